"""The Actors of the neural-policy trainer: league matches played in lock step (one batched forward
pass a tick for every match a network plays in), their trajectories kept for the learner.

A `Pairing` here names, per seat, a learning player (`Seat.learner`, whose moves are trained when
``trained``), or any agent spec (fixed players, frozen snapshots ``policy:<folder>``: those are
batched too, one network per snapshot). `play_pairings` plays a list of them with
`arena.match.lockstep.play_lockstep` and returns the `MatchResult` of each match and the
`Trajectory` of each trained seat.

`PolicyActors` runs that in the learner's process (``actors: 0``) or in worker processes, each
playing its share of the matches with the weights the learner sent (a version number goes with
them: the learner measures the actors' lag and V-trace / PPO's ratio correct for it).
"""

from __future__ import annotations

import multiprocessing as mp
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from arena.agents.base import derive_seed
from arena.envs.registry import make_core
from arena.inference.trees import tree_pad, tree_stack, tree_torch
from arena.match.lockstep import play_lockstep
from arena.match.loop import InvalidMovePolicy, MatchResult


@dataclass(frozen=True)
class Seat:
    #: A learning player's name (its current network plays), else None.
    learner: str | None = None
    #: Otherwise an agent spec.
    spec: str | None = None
    #: Keep this seat's trajectory for the learner.
    trained: bool = False


@dataclass
class Pairing:
    seats: list[Seat]
    #: League names by seat (what the league records).
    names: list[str]
    #: Which learner scheduled it and why (the role rule).
    owner: str = ""
    why: str = ""


@dataclass
class Trajectory:
    learner: str
    match: int  # index into the pairings
    seat: int
    #: What the network read at each move: a dict of ``[L, ...]`` arrays (`policy_inputs`).
    obs: dict
    mask: np.ndarray | None  # [L, A] bool (also obs["mask"]), or None
    #: ``[L]`` or ``[L, *action_shape]``, or a dict of those (structured moves).
    actions: Any
    logp: np.ndarray  # [L]
    value: np.ndarray  # [L]
    privileged: np.ndarray | None = None  # [L, P]
    ret: float = 0.0
    version: int = 0


class LearnerSeat:
    """A batched agent that plays one network for every seat given to it and keeps, per (match, seat),
    the tensors of its moves (observation, mask, action, log-probability, value)."""

    def __init__(self, net: Any, name: str, *, seed: int, greedy: bool = False, record: bool = True):
        from arena.agents.neural import PolicyAgent

        self.name = name
        self.spec = f"learner:{name}"
        self.agent = PolicyAgent(net, greedy=greedy, seed=seed)
        self.record = record
        self.priv = bool(net.spec.privileged_dim)
        self.steps: dict[tuple[int, int], list[tuple]] = {}

    def act(self, observation) -> Any:
        return self.act_batch([observation])[0]

    def act_batch(self, observations: Sequence[Any]) -> list[Any]:
        moves, x = self.agent.decide(observations)
        if self.record:
            from arena.inference.policy_nets import privileged_vector
            from arena.inference.trees import tree_map, tree_row

            numpy = lambda t: t.numpy()  # noqa: E731
            inputs, act = tree_map(numpy, x["inputs"]), tree_map(numpy, x["action"])
            logp, val = x["logp"].numpy(), x["value"].numpy()
            for k, o in enumerate(observations):
                pv = privileged_vector(o.core) if self.priv else None
                self.steps.setdefault((id(o.core), o.player), []).append(
                    (tree_row(inputs, k), tree_row(act, k), logp[k], val[k], pv))
        return moves


def play_pairings(game: str, pairings: Sequence[Pairing], nets: dict[str, Any], *, seed: int, version: int = 0,
                  game_kwargs: dict | None = None, policy: InvalidMovePolicy | None = None, record: str = "actions",
                  greedy: bool = False, index_offset: int = 0) -> tuple[list[MatchResult], list[Trajectory]]:
    """Play every pairing in lock step; match i has seed ``derive_seed(seed, i + index_offset)``."""
    seats_for: dict[tuple[str, bool], LearnerSeat] = {}

    def seat_agent(name: str, rec: bool) -> LearnerSeat:
        key = (name, rec)
        if key not in seats_for:
            k = sorted(nets).index(name)
            seats_for[key] = LearnerSeat(nets[name], name, seed=derive_seed(seed, 1_000_000 + 2 * k + int(rec)),
                                         greedy=greedy, record=rec)
        return seats_for[key]

    cores = [make_core(game, **(game_kwargs or {})) for _ in pairings]
    shared: dict[str, Any] = {}
    seats: list[list[Any]] = []
    for p in pairings:
        row = []
        for s in p.seats:
            if s.learner is not None:
                row.append(seat_agent(s.learner, s.trained))
            else:
                row.append(s.spec)
                if s.spec.startswith("policy:") and s.spec not in shared:
                    from arena.agents.specs import make_agent

                    shared[s.spec] = make_agent(s.spec, cores[0], derive_seed(seed, 2_000_000 + len(shared)))
        seats.append(row)
    seeds = [derive_seed(seed, i + index_offset) for i in range(len(pairings))]
    results = play_lockstep(game, seats, seeds, policy=policy, record=record, game_kwargs=game_kwargs,
                            shared=shared, cores=cores)
    index = {id(c): i for i, c in enumerate(cores)}
    trajs: list[Trajectory] = []
    for (name, rec), ls in sorted(seats_for.items()):
        if not rec:
            continue
        for (cid, seat), steps in ls.steps.items():
            i = index[cid]
            if not pairings[i].seats[seat].trained:
                continue
            obs, act, logp, val, pv = zip(*steps)
            inputs = tree_stack(obs)
            trajs.append(Trajectory(name, i + index_offset, seat, inputs, inputs.get("mask"), tree_stack(act),
                                    np.asarray(logp, dtype=np.float32), np.asarray(val, dtype=np.float32),
                                    None if pv[0] is None else np.stack(pv), float(results[i].returns[seat]), version))
    trajs.sort(key=lambda t: (t.learner, t.match, t.seat))
    return results, trajs


def to_batch(trajs: Sequence[Trajectory], *, gamma: float, reward_scale: float = 1.0):
    """Time-major padded `RolloutBatch` of trajectories (column b = trajectory b)."""
    import torch

    from arena.trainers.policy.learner import RolloutBatch

    B = len(trajs)
    T = max(len(t.logp) for t in trajs)
    first = trajs[0]
    # padded moves: every action legal (a one-tensor game's mask), nothing else present
    obs = tree_pad([t.obs for t in trajs], T, fill={"mask": True})
    act = tree_pad([t.actions for t in trajs], T)
    priv = np.zeros((T, B, first.privileged.shape[1]), dtype=np.float32) if first.privileged is not None else None
    logp, val, rew, disc = (np.zeros((T, B), dtype=np.float32) for _ in range(4))
    valid = np.zeros((T, B), dtype=bool)
    for b, t in enumerate(trajs):
        n = len(t.logp)
        if priv is not None:
            priv[:n, b] = t.privileged
        logp[:n, b], val[:n, b] = t.logp, t.value
        rew[n - 1, b] = t.ret * reward_scale
        disc[: n - 1, b] = gamma
        valid[:n, b] = True
    tt = torch.from_numpy
    return RolloutBatch(tree_torch(obs), None, tree_torch(act), tt(logp), tt(val), tt(rew), tt(disc),
                        tt(valid), None if priv is None else tt(priv),
                        torch.tensor([t.version for t in trajs], dtype=torch.long))


# -- worker processes -----------------------------------------------------------------------------
_NETS: dict[str, Any] = {}


def _actor(args):
    import torch

    torch.set_num_threads(1)
    (game, pairings, weights, blueprint, seed, version, game_kwargs, policy, record, offset) = args
    from arena.inference.policy_nets import PolicySpec, build_policy

    spec, arch, sizes = blueprint
    for name, sd in weights.items():
        net = _NETS.get(name)
        if net is None:
            net = _NETS[name] = build_policy(PolicySpec.from_dict(spec), arch, **sizes).eval()
        net.load_state_dict(sd)
    return play_pairings(game, pairings, {n: _NETS[n] for n in weights}, seed=seed, version=version,
                         game_kwargs=game_kwargs, policy=policy, record=record, index_offset=offset)


def _init_actor(owner: int) -> None:
    from arena.match.batch import _init_worker

    _init_worker(owner)


class PolicyActors:
    """Plays pairings in this process (``workers=0``), or split over worker processes: a local process
    pool (``backend="local"``) or Ray tasks (``backend="ray"``, on a cluster at `address` or a local
    Ray started with ``workers`` CPUs)."""

    def __init__(self, game: str, workers: int = 0, game_kwargs: dict | None = None, backend: str = "local",
                 address: str | None = None):
        if backend not in ("local", "ray"):
            raise ValueError(f"actors backend must be local or ray, got {backend!r}")
        self.game, self.workers, self.game_kwargs = game, workers, dict(game_kwargs or {})
        self.backend, self.address = backend, address
        self._pool = None
        self._pending = None
        self._ray_task = None
        self._ray_started = False

    def _ensure_ray(self):
        if self._ray_task is None:
            from arena.errors import require

            ray = require("ray", "Ray actors", "ray")
            if not ray.is_initialized():
                import tempfile

                # Ray's socket paths must stay short: its session files under a short temp path.
                kw = {"address": self.address} if self.address else {
                    "num_cpus": self.workers, "_temp_dir": tempfile.mkdtemp(prefix="arena-ray-")}
                ray.init(include_dashboard=False, log_to_driver=False, **kw)
                self._ray_started = True
            self._ray_task = ray.remote(num_cpus=1, max_retries=0)(_actor)
        return self._ray_task

    def _ensure_pool(self):
        if self._pool is None and self.workers > 0:
            ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
            from arena.procs import forkserver_preload

            forkserver_preload(ctx)
            self._pool = ctx.Pool(self.workers, initializer=_init_actor, initargs=(os.getpid(),))
        return self._pool

    def submit(self, pairings: Sequence[Pairing], nets: dict[str, Any], *, seed: int, version: int,
               policy: InvalidMovePolicy | None = None, record: str = "actions", greedy: bool = False) -> None:
        """Start playing (in the workers: returns at once; `collect` waits)."""
        if self.workers <= 0:
            self._pending = ("done", play_pairings(self.game, pairings, nets, seed=seed, version=version,
                                                   game_kwargs=self.game_kwargs, policy=policy, record=record,
                                                   greedy=greedy))
            return
        first = next(iter(nets.values()))
        blueprint = (first.spec.to_dict(), first.arch, first.sizes)
        weights = {n: {k: v.detach().cpu().clone() for k, v in net.state_dict().items()} for n, net in nets.items()}
        k = self.workers
        size = (len(pairings) + k - 1) // k
        jobs = [(self.game, list(pairings[i:i + size]), weights, blueprint, seed, version, self.game_kwargs, policy,
                 record, i) for i in range(0, len(pairings), size)]
        if self.backend == "ray":
            task = self._ensure_ray()
            self._pending = ("ray", [task.remote(j) for j in jobs])
        else:
            self._pending = ("async", self._ensure_pool().map_async(_actor, jobs))

    def collect(self) -> tuple[list[MatchResult], list[Trajectory]]:
        kind, value = self._pending
        self._pending = None
        if kind == "done":
            return value
        results, trajs = [], []
        if kind == "ray":
            import ray

            parts = ray.get(value)
        else:
            parts = value.get()
        for r, t in parts:
            results.extend(r)
            trajs.extend(t)
        trajs.sort(key=lambda t: (t.learner, t.match, t.seat))
        return results, trajs

    def play(self, pairings, nets, **kw) -> tuple[list[MatchResult], list[Trajectory]]:
        self.submit(pairings, nets, **kw)
        return self.collect()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
        if self._ray_started:
            import ray

            ray.shutdown()
            self._ray_started = False
