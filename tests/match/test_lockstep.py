"""The lock-step driver plays by `play_match`'s rules: identical replays, one batched call a tick."""

import pytest

from arena.match.pool import play_lockstep
from arena.match.loop import play_match


def _same(a, b):
    a, b = a.without_timing(), b.without_timing()
    for r in (a, b):
        r.header.pop("created", None)
        r.result.pop("duration", None)
    return a == b


@pytest.mark.parametrize("game,specs", [("openspiel/tic_tac_toe-v0", ["random", "random"]),
                                        ("openspiel/leduc_poker-v0", ["random", "first"]),
                                        ("arena/TicTacToe-v0", ["random", "random"])])
@pytest.mark.parametrize("record", ["text", "actions"])
def test_replays_equal_play_match_for_the_same_seeds(game, specs, record):
    seeds = list(range(12))
    together = play_lockstep(game, [specs] * 12, seeds, record=record, match_ids=[f"m{s}" for s in seeds])
    for s, r in zip(seeds, together):
        alone = play_match(game, specs, seed=s, record=record, match_id=f"m{s}")
        assert _same(alone.replay, r.replay)
        assert (alone.returns, alone.moves, alone.winner) == (r.returns, r.moves, r.winner)


class Counting:
    """A batched agent: the first legal move of every observation, and a count of its calls."""

    spec = "counting"

    def __init__(self, illegal_once=False, raise_at=None):
        self.calls, self.sizes = 0, []
        self.illegal_once, self.raise_at = illegal_once, raise_at

    def act(self, obs):
        return obs.legal_actions[0]

    def act_batch(self, observations):
        self.calls += 1
        self.sizes.append(len(observations))
        if self.raise_at is not None and self.calls == self.raise_at:
            raise RuntimeError("boom")
        if self.illegal_once and self.calls == 1:
            return [99] * len(observations)
        return [o.legal_actions[0] for o in observations]


def test_one_batched_call_per_tick_for_all_matches():
    agent = Counting()
    results = play_lockstep("openspiel/tic_tac_toe-v0", [[agent, "random"]] * 40, list(range(40)))
    # tic-tac-toe: at most 5 moves of seat 0, so at most 5 calls for 40 matches
    assert agent.calls <= 5 and agent.sizes[0] == 40
    assert sum(r.moves for r in results) > 40 * 5
    assert all(r.invalid == [0, 0] for r in results)


def test_invalid_batched_moves_go_through_the_invalid_move_policy():
    agent = Counting(illegal_once=True)
    results = play_lockstep("openspiel/tic_tac_toe-v0", [[agent, "random"]] * 3, [1, 2, 3])
    # the illegal first move is retried (one allowance) with the single-move act, which is legal
    assert all(r.invalid == [1, 0] and r.outcome == "normal" for r in results)
    steps = results[0].replay.steps
    assert steps[0]["event"] == "invalid" and steps[1]["event"] == "ok"


def test_a_raising_batched_agent_loses_its_matches_and_nothing_crashes():
    agent = Counting(raise_at=2)
    results = play_lockstep("openspiel/tic_tac_toe-v0", [[agent, "random"]] * 4, [1, 2, 3, 4])
    for r in results:  # the second batched call raised: an error, retried with act (legal), so the match goes on
        assert r.invalid[0] == 1
        assert any(s["event"] == "error" and "boom" in s["reason"] for s in r.replay.steps)


def test_a_greedy_policy_plays_the_same_in_lockstep_and_alone(tmp_path):
    torch = pytest.importorskip("torch")
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.inference.policy_nets import build_policy, save_policy, spec_from_core

    torch.manual_seed(1)
    folder = save_policy(tmp_path / "p", build_policy(spec_from_core(make_core("openspiel/tic_tac_toe-v0")),
                                                      hidden=[16], channels=4))
    spec = f"policy:{folder},greedy=true"
    shared = make_agent(spec, make_core("openspiel/tic_tac_toe-v0"), 0)
    together = play_lockstep("openspiel/tic_tac_toe-v0", [[spec, "random"]] * 8, list(range(8)),
                             shared={spec: shared}, match_ids=[f"m{s}" for s in range(8)])
    for s, r in enumerate(together):
        alone = play_match("openspiel/tic_tac_toe-v0", [spec, "random"], seed=s, record="actions", match_id=f"m{s}")
        assert _same(alone.replay, r.replay)



def test_a_sampling_policy_plays_each_match_the_same_beside_any_others(tmp_path):
    """Each match's sampled moves come from its own seat's generator (`PolicyAgent.seat_match`): the
    same alone, in lock step with seven others, or with only the last three of them (a resumed run
    playing the rest of its matches)."""
    torch = pytest.importorskip("torch")
    from arena.envs.registry import make_core
    from arena.inference.policy_nets import build_policy, save_policy, spec_from_core
    from arena.match.batch import play_matches

    def moves(r):
        return [st.get("action") for st in r.replay.steps]

    torch.manual_seed(1)
    folder = save_policy(tmp_path / "p", build_policy(spec_from_core(make_core("openspiel/tic_tac_toe-v0")),
                                                      hidden=[16], channels=4))
    spec = f"policy:{folder}"
    every = play_matches("openspiel/tic_tac_toe-v0", [spec, "random"], 8, seed=40, record="actions")
    rest = play_matches("openspiel/tic_tac_toe-v0", [spec, "random"], 8, seed=40, record="actions", only=[5, 6, 7])
    assert [moves(r) for r in every[5:]] == [moves(r) for r in rest]
    for k in (0, 3, 7):
        alone = play_match("openspiel/tic_tac_toe-v0", list(every[k].agents), seed=40 + k, record="actions",
                           match_id=every[k].match_id)
        assert _same(alone.replay, every[k].replay)
    assert len({tuple(moves(r)) for r in every}) > 4  # the moves are sampled, not all alike

class GreedySquads:
    """A batched agent for the simultaneous test game: a greedy structured policy (the same move alone
    or in a batch), counting its calls and the moves in each."""

    spec = "greedy-squads"

    def __init__(self, net):
        from arena.agents.neural import PolicyAgent

        self.agent = PolicyAgent(net, greedy=True)
        self.sizes = []

    def act(self, obs):
        return self.act_batch([obs])[0]

    def act_batch(self, observations):
        self.sizes.append(len(observations))
        return self.agent.act_batch(observations)


@pytest.mark.parametrize("record", ["text", "actions"])
def test_simultaneous_moves_of_every_match_are_answered_in_one_call_a_tick(record):
    torch = pytest.importorskip("torch")
    from arena.envs import load_plugin, make_core
    from arena.inference.policy_nets import build_policy, spec_from_core

    load_plugin("plugins.squad_games")
    torch.manual_seed(0)
    net = build_policy(spec_from_core(make_core("test/Squads-v0")), hidden=[32], d_model=16, heads=2, layers=1,
                       channels=4)
    seeds = list(range(8))
    batched = GreedySquads(net)
    together = play_lockstep("test/Squads-v0", [[batched, batched]] * 8, seeds, record=record,
                             match_ids=[f"m{s}" for s in seeds])
    ticks = max(r.moves for r in together)
    # both seats of every match still going, in one call a tick
    assert len(batched.sizes) == ticks and batched.sizes[0] == 16
    mixed = GreedySquads(net)
    half = play_lockstep("test/Squads-v0", [[mixed, "random"]] * 8, seeds, record=record)
    assert mixed.sizes[0] == 8 and len(mixed.sizes) == max(r.moves for r in half)
    for s, r in zip(seeds, together):
        alone = play_match("test/Squads-v0", [GreedySquads(net), GreedySquads(net)], seed=s, record=record,
                           match_id=f"m{s}")
        assert _same(alone.replay, r.replay)
        assert (alone.returns, alone.moves) == (r.returns, r.moves)
