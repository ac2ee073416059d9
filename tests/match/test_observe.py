"""Observed seats: what a player saw as it played (`MatchResult.observed`) is what re-simulating its
replay shows it (`arena.match.verify.observed_moves`), on every path of the engine (one match after
another, lock step with a batched policy, worker processes), and a match that observes no one keeps
nothing."""

import pickle

import numpy as np
import pytest

from arena.agents.specs import make_agent
from arena.envs.registry import make_core
from arena.match import play_match
from arena.match.batch import play_matches
from arena.match.observe import asker, reader_seed
from arena.match.pool import play_jobs, play_lockstep
from arena.match.runner import MatchJob
from arena.match.verify import observed_moves

TTT = "openspiel/tic_tac_toe-v0"
KUHN = "openspiel/kuhn_poker-v0"
SKIRMISH = "arena/Skirmish-3m-v0"


def same_tree(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_tree(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same_tree(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
    return a == b


def resimulated(res, seats, readers=None) -> list[tuple]:
    """`observed_moves` of `res`'s replay, each move with the answer of a reader seeded as the engine
    seeds its own (`reader_seed`), or None."""
    ask = None
    if readers is not None:
        core = make_core(res.game_id)
        ask = {}
        for s in seats:
            agent = make_agent(readers(res.agents[s]), core, 0)
            agent.reset(reader_seed(res.seed, s))
            ask[s] = asker(agent)
    return [m if len(m) == 4 else (*m, None) for m in observed_moves(res.replay, set(seats), ask=ask)]


def assert_as_resimulated(results, seats_of, readers=None, answers=True):
    for res in results:
        seats = seats_of(res)
        kept = res.observed if answers else [m[:3] for m in res.observed]
        again = [m if answers else m[:3] for m in resimulated(res, seats, readers)]
        assert len(kept) == len(again) > 0
        assert all(same_tree(a, b) for a, b in zip(kept, again)), res.match_id


@pytest.mark.parametrize("specs", [["mcts:simulations=20", "first"], ["first", "random"]])
def test_tictactoe_views_and_search_answers_are_the_resimulated_ones(specs):
    results = play_matches(TTT, specs, 4, seed=3, record="actions", observe=[0, 1], ask="own")
    for res in results:
        own = [s for s in (0, 1) if res.agents[s].startswith("mcts")]
        assert_as_resimulated([res], lambda r: (0, 1), answers=False)
        assert [m[3] is not None for m in res.observed] == [m[0] in own for m in res.observed]
        if own:  # the search's answers: a reader seeded from the match, as the engine seeds its own
            again = resimulated(res, own, readers=lambda spec: spec)
            mine = [m for m in res.observed if m[0] in own]
            assert len(mine) == len(again) and all(same_tree(a, b) for a, b in zip(mine, again))


def test_kuhn_cfr_answers_are_the_resimulated_ones():
    results = play_matches(KUHN, ["cfr:iterations=40", "random"], 6, seed=1, record="actions", observe=[0])
    assert all(r.observed and all(m[3] is None for m in r.observed) for r in results)  # no ask: no answers
    results = play_matches(KUHN, ["cfr:iterations=40", "random"], 6, seed=1, record="actions", observe=[0],
                           ask="own")
    for res in results:
        seat = res.seats.index(0)
        assert {m[0] for m in res.observed} == {seat}
        again = resimulated(res, [seat], readers=lambda spec: spec)
        assert len(res.observed) == len(again) and all(same_tree(a, b) for a, b in zip(res.observed, again))
        assert all(len(m[3][0]) == len(m[3][1]) and abs(sum(m[3][1]) - 1) < 1e-6 for m in res.observed)


def test_a_labeller_answers_for_every_seat_the_same_with_any_number_of_workers():
    label = "mcts:simulations=12"
    one = play_matches(TTT, ["random", "first"], 8, seed=9, record="actions", observe=[0, 1], ask=label)
    two = play_matches(TTT, ["random", "first"], 8, seed=9, record="actions", observe=[0, 1], ask=label, workers=2)
    for a, b in zip(one, two):  # (results cross from the workers by pickle)
        assert same_tree(a.observed, b.observed) and all(m[3] is not None for m in a.observed)
    assert_as_resimulated(one, lambda r: (0, 1), readers=lambda spec: label)


class IllegalFirst:
    """Tries an occupied cell (or a bad string) first at each move, then plays the first legal move."""

    spec = "illegal-first"

    def act(self, obs):
        if obs.feedback is None:
            return "nonsense"
        return obs.legal_actions[0]


def test_a_refused_attempt_is_not_kept():
    res = play_match(TTT, [IllegalFirst(), "random"], seed=4, record="actions", observe=[0, 1])
    assert sum(res.invalid) > 0
    assert len(res.observed) == res.moves
    assert all(same_tree(a, b) for a, b in zip(res.observed, resimulated(res, (0, 1))))


def test_observing_no_one_keeps_nothing():
    assert play_match(TTT, ["random", "random"], seed=1).observed is None
    assert all(r.observed is None for r in play_matches(TTT, ["random", "first"], 3, seed=1))
    job = MatchJob("m", TTT, ("random", "first"), 2, ask="own")  # an answer with no seat observed: nothing
    assert play_jobs([job])[0].observed is None


@pytest.fixture(scope="module")
def skirmish_policy(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from arena.inference.policy_nets import build_policy, save_policy, spec_from_core

    torch.manual_seed(0)
    net = build_policy(spec_from_core(make_core(SKIRMISH)), "auto", hidden=[16], d_model=16, layers=1, heads=2,
                       channels=4)
    return f"policy:{save_policy(tmp_path_factory.mktemp('skirmish') / 'net', net, {})}"


def test_structured_moves_in_lock_step_are_the_resimulated_ones(skirmish_policy):
    specs = [skirmish_policy, "skirmish:focus_fire"]
    jobs = [MatchJob(f"s{i}", SKIRMISH, tuple(specs if i % 2 == 0 else specs[::-1]), seed=20 + i,
                     keep_replay="actions", observe=(i % 2,)) for i in range(4)]
    together = play_jobs(jobs, lockstep=True, width=4)
    for job, res in zip(jobs, together):
        seat = job.observe[0]
        assert {m[0] for m in res.observed} == {seat} and isinstance(res.observed[0][2], dict)
        assert_as_resimulated([res], lambda r: (seat,))
    back = pickle.loads(pickle.dumps(together))
    assert all(same_tree(a.observed, b.observed) for a, b in zip(together, back))
    # play_lockstep takes seats to observe too
    alone = play_lockstep(SKIRMISH, [list(jobs[0].specs)] * 2, [5, 6], observe=[0])
    assert_as_resimulated(alone, lambda r: (0,))
