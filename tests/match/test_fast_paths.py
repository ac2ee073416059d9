"""The match loop's fast paths change no move and no replay: the random agent's `act_legal` and its direct
seeding draw what `act` and `random.Random` draw, agents that override `act` keep it, OpenSpiel's
`apply_fast` refuses what `apply` refuses, and the two-player outcome is the general rule's."""

import itertools
import json
import random

import pyspiel
import pytest

from arena.agents import BaseAgent, make_agent
from arena.agents.basic import FirstLegalAgent, RandomAgent
from arena.envs import make_core
from arena.envs.openspiel_core import OpenSpielCore
from arena.match import play_match
from arena.match.pool import play_lockstep
from arena.match.loop import _outcome

SEEDS = [0, 1, 7, 42, 123456789, 2**32 - 1, 2**32, 2**40 + 5, -3]


class Obs:
    """An observation that shows a legal list and nothing else."""

    def __init__(self, legal):
        self.legal_actions = legal


@pytest.mark.parametrize("seed", SEEDS)
def test_random_act_legal_draws_what_act_and_randrange_draw(seed):
    sizes = [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 100, 1024, 1025, 2**31 + 1, 2**33 + 3]
    by_list, by_act = RandomAgent(seed), RandomAgent(seed)
    ref = random.Random(seed)
    for n in sizes * 20:
        legal = list(range(10, 10 + n)) if n < 5000 else range(10, 10 + n)  # a range: long lists, no memory
        want = legal[ref.randrange(n)]
        assert by_list.act_legal(legal) == want
        assert by_act.act(Obs(legal)) == want


@pytest.mark.parametrize("seed", SEEDS + [None, True, 2.5, "text seed", b"bytes"])
def test_lazy_seeding_draws_what_eager_seeding_draws(seed):
    """Seeded at the first draw after `__init__` / `reset`: the stream and the generator's state after
    it are those of ``random.Random(seed)``; a used generator starts over."""
    for agent in (RandomAgent(seed), RandomAgent(99)):
        agent.act_legal([1, 2, 3])  # a used generator: reset must start the stream over
        agent.reset(seed)
        if seed is None:  # from the OS: only that it draws
            assert agent.act_legal(list(range(9))) in range(9)
            continue
        ref = random.Random(seed)
        assert [agent.act_legal(list(range(9))) for _ in range(30)] == [ref.randrange(9) for _ in range(30)]
        assert agent._py.getstate() == ref.getstate()
        agent.reset(seed)
        ref.seed(seed)
        assert [agent.act(Obs(list(range(5)))) for _ in range(30)] == [ref.randrange(5) for _ in range(30)]


def test_lazy_seeding_seeds_once_per_match_and_only_when_drawing(monkeypatch):
    from arena.agents import basic

    seeded = []
    real = basic._seed_mt
    monkeypatch.setattr(basic, "_seed_mt", lambda rng, seed: (seeded.append(seed), real(rng, seed)))
    for s in range(3):  # agents built from their specs for each match: built with a seed, reset with it
        play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=s, match_id="m", record=False)
    assert len(seeded) == 6
    seeded.clear()
    agent = RandomAgent(5)
    agent.reset(6)
    agent.reset(7)  # never drew: never seeded
    assert seeded == []
    agent.act_legal([0, 1])
    agent.act_legal([0, 1])
    assert seeded == [7]


def test_a_bad_seed_still_fails_where_it_is_given():
    with pytest.raises(TypeError):
        RandomAgent([1, 2])
    agent = RandomAgent(1)
    with pytest.raises(TypeError):
        agent.reset({"seed": 1})


def test_a_random_agent_copies_and_pickles_seeded_or_not():
    import copy
    import pickle

    def stream(agent):
        return [agent.act_legal(list(range(9))) for _ in range(10)]

    want = stream(RandomAgent(3))
    fresh = RandomAgent(3)  # not seeded yet
    assert stream(copy.deepcopy(fresh)) == want == stream(pickle.loads(pickle.dumps(fresh)))
    used = RandomAgent(4)
    used.act_legal(list(range(9)))
    clone = pickle.loads(pickle.dumps(used))
    assert stream(clone) == stream(used)


def test_first_agent_chooses_the_first_move():
    assert FirstLegalAgent().act_legal([4, 2, 7]) == 4 == FirstLegalAgent().act(Obs([4, 2, 7]))


class Loud(RandomAgent):
    """Overrides `act` only: the inherited `act_legal` must not play in its place."""

    def act(self, observation):
        self.calls = getattr(self, "calls", 0) + 1
        return super().act(observation)


class Picky(BaseAgent):
    """Has its own `act_legal` and `act` (which the loop calls when the legal list is empty or absent)."""

    def act_legal(self, legal):
        return legal[-1]

    def act(self, observation):
        return observation.legal_actions[-1]


def test_a_subclass_that_overrides_act_has_no_act_legal_and_its_act_plays():
    assert BaseAgent.act_legal is None and RandomAgent.act_legal is not None
    assert Loud.act_legal is None and Picky.act_legal is not None
    loud = Loud(3)
    res = play_match("openspiel/tic_tac_toe-v0", [loud, "random"], seed=5, match_id="m", record="actions")
    assert loud.calls == res.move_calls[0] == (res.moves + 1) // 2


def test_agents_without_act_legal_play_through_act():
    """Search agents (tactics, MCTS, CFR) have no `act_legal` (the tactics agent's own `choose(state)`
    is another thing): they are asked with an Observation and make no invalid move."""
    for spec in ("tactics", "mcts:simulations=20"):
        agent = make_agent(spec, make_core("openspiel/tic_tac_toe-v0"), 0)
        assert agent.act_legal is None
        for seed in range(3):
            res = play_match("openspiel/tic_tac_toe-v0", [spec, "random"], seed=seed, match_id="m", record="actions")
            assert res.invalid == [0, 0] and {s["event"] for s in res.replay.steps} == {"ok"}


class ActOnly(BaseAgent):
    """The random agent seen through `act` only (no `act_legal`): the loop's Observation path."""

    spec = "random"

    def __init__(self, seed=None):
        self.inner = RandomAgent(seed)

    def reset(self, seed=None):
        self.inner.reset(seed)

    def act(self, observation):
        return self.inner.act(observation)


def _steps(res):
    replay = res.replay.without_timing()
    return [json.dumps(s) for s in replay.steps], replay.result


@pytest.mark.parametrize("game", ["openspiel/tic_tac_toe-v0", "openspiel/connect_four-v0", "openspiel/kuhn_poker-v0",
                                  "arena/TicTacToe-v0", "arena/KuhnPoker-v1"])
@pytest.mark.parametrize("record", ["actions", "text"])
def test_act_legal_path_and_observation_path_write_the_same_replays(game, record):
    core = make_core(game)
    fast = [RandomAgent(1), RandomAgent(2)]
    slow = [ActOnly(1), ActOnly(2)]
    for seed in range(12):
        a = play_match(core, fast, seed=seed, match_id="m", record=record)
        b = play_match(core, slow, seed=seed, match_id="m", record=record)
        assert _steps(a) == _steps(b)
        assert (a.returns, a.winner, a.moves, a.move_calls) == (b.returns, b.winner, b.moves, b.move_calls)
        c = play_match(game, ["random", "random"], seed=seed, match_id="m", record=record)  # built per match
        assert _steps(c) == _steps(a)


def test_same_seed_same_match_and_lockstep_agrees():
    seeds = list(range(20))
    first = [play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=s, match_id=f"m{s}", record="actions")
             for s in seeds]
    again = [play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=s, match_id=f"m{s}", record="actions")
             for s in seeds]
    locked = play_lockstep("openspiel/tic_tac_toe-v0", [["random", "random"]] * len(seeds), seeds,
                           match_ids=[f"m{s}" for s in seeds], record="actions")
    assert [_steps(r) for r in first] == [_steps(r) for r in again] == [_steps(r) for r in locked]
    assert len({tuple(_steps(r)[0]) for r in first}) > 10  # different seeds, different games


def test_openspiel_apply_fast_only_where_apply_does_nothing_more():
    ttt = make_core("openspiel/tic_tac_toe-v0")
    assert ttt.apply_fast is None
    ttt.reset(0)
    assert ttt.apply_fast is not None
    ttt.apply_fast(4)
    assert ttt.state.history() == [4]
    with pytest.raises(pyspiel.SpielError):
        ttt.apply_fast(4)  # taken: refused, and the state is as it was
    assert ttt.state.history() == [4] and "refused" in ttt.apply(1, 4)
    for game in ("openspiel/kuhn_poker-v0", "openspiel/2048-v0", "openspiel/cliff_walking-v0"):
        core = make_core(game)  # chance nodes, per-move rewards: apply does more than the engine's call
        core.reset(0)
        assert core.apply_fast is None

    class Own(OpenSpielCore):
        def apply(self, p, action):
            return super().apply(p, action)

    own = Own("tic_tac_toe")
    own.reset(0)
    assert own.apply_fast is None


def test_two_player_outcome_is_the_general_rule():
    def general(returns):
        best = max(returns)
        k = returns.count(best)
        if k == len(returns):
            return None, True
        return (returns.index(best), False) if k == 1 else (None, False)

    nan = float("nan")
    values = [-1.0, -0.0, 0.0, 0.5, 1.0, nan, float("inf"), -float("inf"), 0, 1, True]
    for pair in itertools.product(values, repeat=2):
        assert _outcome(list(pair)) == general(list(pair)), pair
    assert _outcome([nan, nan]) == general([nan, nan])


def test_a_viewer_that_wraps_apply_sees_every_move_of_a_fast_core():
    # resimulate_steps counts moves by wrapping the core's apply: the loop's apply_fast must not go around it
    from arena.match.verify import resimulate_steps

    r = play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=3)
    seen = []
    again = resimulate_steps(r.replay, lambda core, moves, rewards: seen.append(moves))
    assert seen == list(range(1, r.moves + 1)) and again.moves == r.moves
