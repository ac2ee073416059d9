"""The one match driver: the engine (`Match`, `run_matches`) and the pool's backends (inline, local
worker processes, Ray) give the same matches; a lost worker, a full disk and a failing piece of
work are each reported as what they are."""

import os

import pytest

from arena.errors import DiskFull
from arena.match.batch import schedule
from arena.match.loop import Match, play_match, run_matches
from arena.match.pool import JobsWork, MatchPool, WorkerLost, play_jobs

GAME = "openspiel/tic_tac_toe-v0"


def _key(r):
    return (r.match_id, r.seed, r.agents, r.returns, r.moves, r.winner, r.outcome)


def _jobs(n=12, specs=("random", "first")):
    return schedule(n, list(specs), 7, True, GAME)


@pytest.mark.parametrize("backend", ["inline", "local"])
def test_backends_play_the_same_matches_as_one_after_another(backend):
    jobs = _jobs()
    alone = [_key(play_match(GAME, list(j.specs), seed=j.seed, match_id=j.match_id, record=False)) for j in jobs]
    with MatchPool(backend, 2) as pool:
        parts = pool.play([JobsWork(jobs[i:i + 5]) for i in range(0, len(jobs), 5)])
    assert [_key(r) for part in parts for r in part] == alone
    assert pool.pending == 0


def test_the_ray_backend_plays_the_same_matches():
    pytest.importorskip("ray")
    jobs = _jobs(6)
    with MatchPool("inline") as pool:
        inline = pool.play([JobsWork(jobs)])[0]
    with MatchPool("ray", 1) as pool:
        remote = pool.play([JobsWork(jobs[:3]), JobsWork(jobs[3:])])
    assert [_key(r) for part in remote for r in part] == [_key(r) for r in inline]


class Dies:
    """Work that kills the process it runs in (a worker lost to the OOM killer, a segfault)."""

    def run(self):
        os._exit(9)


class Fails:
    def run(self):
        raise ValueError("a bad agent spec in a worker")


class FillsDisk:
    def run(self):
        raise DiskFull("no space left on the device writing replays/x.jsonl")


def test_a_lost_worker_is_reported_and_the_pool_goes_on():
    with MatchPool("local", 1) as pool:
        pool.send("dies", Dies())
        got = []
        while len(got) < 1:
            got += pool.recv(30)
        (key, out), = got
        assert key == "dies" and isinstance(out, WorkerLost) and "dies" in str(out)
        # the pool was rebuilt: the next work runs
        assert [_key(r) for r in pool.play([JobsWork(_jobs(2))])[0]] == \
            [_key(r) for r in play_jobs(_jobs(2))]


@pytest.mark.parametrize("backend", ["inline", "local"])
def test_a_failing_work_is_returned_and_a_full_disk_is_raised(backend):
    with MatchPool(backend, 1) as pool:
        pool.send("bad", Fails())
        got = []
        while not got:
            got += pool.recv(30)
        assert got[0][0] == "bad" and isinstance(got[0][1], ValueError)
        with pytest.raises(ValueError, match="bad agent spec"):
            pool.play([Fails()])
        with pytest.raises(DiskFull):
            pool.send("full", FillsDisk())
            while True:
                pool.recv(30)


def test_unknown_backend_is_one_line():
    with pytest.raises(ValueError, match="unknown backend 'gpu': inline, local, ray"):
        MatchPool("gpu")


class Batched:
    """The first legal move of each observation; records how many answers each call had."""

    spec = "batched"

    def __init__(self):
        self.sizes = []

    def act(self, obs):
        return obs.legal_actions[0]

    def act_batch(self, observations):
        self.sizes.append(len(observations))
        return [o.legal_actions[0] for o in observations]


def test_run_matches_keeps_width_matches_in_flight_and_makes_them_lazily():
    agent = Batched()
    made = []

    def matches():
        for i in range(30):
            made.append(i)
            yield Match(GAME, [agent, "random"], i, record=False, batched=True)

    ended = []
    run_matches(matches(), ended.append, width=8)
    assert len(ended) == 30 and max(agent.sizes) == 8 and agent.sizes[0] == 8
    # a match that ends makes room: never more than 8 waiting, and the calls stay full while matches remain
    assert sum(agent.sizes) == sum(r.moves - r.moves // 2 for r in ended)
    assert sum(1 for s in agent.sizes if s == 8) >= len(agent.sizes) // 2


def test_play_match_is_one_match_with_nothing_batched():
    """`play_match` is the engine with one match: a batched agent is asked one move at a time there
    (its ``act``), and the replay is the one the engine writes for that match among others."""
    agent = Batched()
    alone = play_match(GAME, [agent, "random"], seed=3, record="actions", match_id="m")
    assert agent.sizes == []  # never asked in a batch
    m = Match(GAME, [Batched(), "random"], 3, record="actions", match_id="m", batched=True)
    run_matches([Match(GAME, [Batched(), "random"], s, record=False, batched=True) for s in range(5)] + [m])
    a, b = alone.replay.without_timing(), m.result.replay.without_timing()
    for r in (a, b):
        r.header.pop("created", None)
        r.result.pop("duration", None)
    assert a == b


def test_lockstep_jobs_batch_a_policy_and_return_in_job_order(tmp_path):
    torch = pytest.importorskip("torch")  # noqa: F841
    from arena.envs.registry import make_core
    from arena.inference.policy_nets import build_policy, save_policy, spec_from_core

    net = build_policy(spec_from_core(make_core(GAME)), "mlp", hidden=[8])
    save_policy(tmp_path / "p", net, {})
    spec = f"policy:{tmp_path / 'p'}"
    jobs = schedule(20, [spec, "random"], 0, True, GAME)
    results = play_jobs(jobs, lockstep=True, width=6)
    assert [r.match_id for r in results] == [j.match_id for j in jobs]
    assert all(sum(r.move_calls) >= r.moves for r in results)
