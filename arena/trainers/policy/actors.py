"""The Actors of the neural-policy trainer: league matches played in lock step (one batched forward
pass a tick for every match a network plays in), their trajectories kept for the learner.

A `Pairing` here names, per seat, a learning player (`Seat.learner`, whose moves are trained when
``trained``), or any agent spec (fixed players, frozen snapshots ``policy:<folder>``: those are
batched too, one network per snapshot). `play_pairings` plays a list of them with
`arena.match.pool.play_lockstep` (the one engine) and returns the `MatchResult` of each match and the
`Trajectory` of each trained seat.

`PolicyActors` runs that on the match pool (`arena.match.pool`): in the learner's process
(``actors: 0``), in worker processes or as Ray tasks, each playing its share of the matches with
the weights the learner sent (a version number goes with them: the learner measures the actors' lag and V-trace / PPO's ratio correct for it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from arena.agents.base import derive_seed
from arena.envs.registry import make_core
from arena.inference.trees import tree_stack
from arena.match.loop import InvalidMovePolicy, MatchResult
from arena.match.pool import MatchPool, play_lockstep


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
    #: ``[L]`` or ``[L, *action_shape]``, or a dict of those (structured moves).
    actions: Any
    logp: np.ndarray  # [L]
    value: np.ndarray  # [L]
    privileged: np.ndarray | None = None  # [L, P]
    ret: float = 0.0
    version: int = 0
    #: ``[L]``: the dense reward after each move, for a game whose core reports `shaped_rewards`
    #: (Skirmish: damage dealt minus damage taken); else None.
    shaped: np.ndarray | None = None


class LearnerSeat:
    """A batched agent that plays one network for every seat given to it and keeps, per (match, seat),
    the tensors of its moves (observation, mask, action, log-probability, value)."""

    def __init__(self, net: Any, name: str, *, seed: int, greedy: bool = False, record: bool = True,
                 explore: float = 0.0):
        from arena.agents.neural import PolicyAgent

        self.name = name
        self.spec = f"learner:{name}"
        self.agent = PolicyAgent(net, greedy=greedy, seed=seed, explore=explore)
        self.record = record
        self.priv = bool(net.spec.privileged_dim)
        self.steps: dict[tuple[int, int], list[tuple]] = {}
        #: Per (match, seat): the shaped reward that followed each recorded move, read from the core
        #: when the seat next moves (the last one when the match ends, `play_pairings`).
        self.shaped: dict[tuple[int, int], list[float]] = {}

    def act(self, observation) -> Any:
        return self.act_batch([observation])[0]

    def act_batch(self, observations: Sequence[Any]) -> list[Any]:
        moves, x = self.agent.decide(observations)
        if self.record:
            from arena.inference.policy_nets import privileged_vector

            for o, row in zip(observations, self.agent.rows(x)):
                pv = privileged_vector(o.core) if self.priv else None
                key = (id(o.core), o.player)
                past = self.steps.setdefault(key, [])
                if past and o.core.shaped_rewards() is not None:
                    self.shaped.setdefault(key, []).append(float(o.core.shaped_rewards()[o.player]))
                past.append((*row, pv))
        return moves


def play_pairings(game: str, pairings: Sequence[Pairing], nets: dict[str, Any], *, seed: int, version: int = 0,
                  game_kwargs: dict | None = None, policy: InvalidMovePolicy | None = None, record: str = "actions",
                  greedy: bool = False, index_offset: int = 0,
                  explore: float = 0.0) -> tuple[list[MatchResult], list[Trajectory]]:
    """Play every pairing in lock step; match i has seed ``derive_seed(seed, i + index_offset)``. The seats
    that are trained explore (`arena.agents.neural.PolicyAgent.explore`); the others play the policy."""
    seats_for: dict[tuple[str, bool], LearnerSeat] = {}

    def seat_agent(name: str, rec: bool) -> LearnerSeat:
        key = (name, rec)
        if key not in seats_for:
            k = sorted(nets).index(name)
            seats_for[key] = LearnerSeat(nets[name], name, seed=derive_seed(seed, 1_000_000 + 2 * k + int(rec)),
                                         greedy=greedy, record=rec, explore=explore if rec else 0.0)
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
            shaped = None
            if cores[i].shaped_rewards() is not None:  # the last move's: the step that ended the match
                shaped = np.asarray(ls.shaped.get((cid, seat), []) + [cores[i].shaped_rewards()[seat]],
                                    dtype=np.float32)[:len(steps)]
            trajs.append(Trajectory(name, i + index_offset, seat, inputs, tree_stack(act),
                                    np.asarray(logp, dtype=np.float32), np.asarray(val, dtype=np.float32),
                                    None if pv[0] is None else np.stack(pv), float(results[i].returns[seat]), version,
                                    shaped))
    trajs.sort(key=lambda t: (t.learner, t.match, t.seat))
    return results, trajs


def to_batch(trajs: Sequence[Trajectory], *, gamma: float, reward_scale: float = 1.0, shaping: float = 0.0):
    """Time-major padded `RolloutBatch` of trajectories (column b = trajectory b). The reward of a
    move is the outcome (times `reward_scale`) on the last one, plus ``shaping`` times its shaped
    reward where the game reports one."""
    from arena.trainers.policy.learner import Played, batch_of

    columns = []
    for t in trajs:
        n = len(t.logp)
        rew = np.zeros(n, dtype=np.float32)
        if shaping and t.shaped is not None:
            rew[:] = shaping * t.shaped
        rew[n - 1] += t.ret * reward_scale
        disc = np.zeros(n, dtype=np.float32)
        disc[: n - 1] = gamma
        columns.append(Played(t.obs, t.actions, t.logp, t.value, rew, disc, t.privileged, t.version))
    return batch_of(columns)


def order_shares(trajs: Sequence[Trajectory], action: dict | None) -> dict[str, float]:
    """The share of each choice of a structured move's first labelled part among the moves played
    (Skirmish's order types: ``orders/move`` 0.0 says the policy never walks), for the progress and the
    metrics; {} for a game with no labelled part."""
    if not action or not trajs or not isinstance(trajs[0].actions, dict):
        return {}
    from arena.envs.actions import ActionModel

    part = next((p for p in ActionModel.from_dict(action).parts if p.kind == "categorical" and p.labels), None)
    if part is None:
        return {}
    chosen = np.concatenate([np.asarray(t.actions[part.name]).reshape(-1) for t in trajs])
    counts = np.bincount(chosen.astype(np.int64).clip(0, part.n - 1), minlength=part.n)
    return {f"orders/{label}": float(c / max(1, counts.sum())) for label, c in zip(part.labels, counts)}


# -- the pool's work ---------------------------------------------------------------------------------
_NETS: dict[str, tuple[tuple, Any]] = {}


def shipped(net: Any) -> tuple[dict, tuple]:
    """A network as plain data for a worker: its weights on the CPU and its blueprint (spec, arch, sizes)."""
    return ({k: v.detach().cpu().clone() for k, v in net.state_dict().items()},
            (net.spec.to_dict(), net.arch, net.sizes))


def worker_net(name: str, weights: dict, blueprint: tuple) -> Any:
    """This worker's network `name` with `weights` loaded: built from `blueprint` once and kept between
    pieces of work (built again when the blueprint changes)."""
    kept = _NETS.get(name)
    if kept is None or kept[0] != blueprint:
        from arena.inference.policy_nets import PolicySpec, build_policy

        spec, arch, sizes = blueprint
        kept = _NETS[name] = (blueprint, build_policy(PolicySpec.from_dict(spec), arch, **sizes).eval())
    kept[1].load_state_dict(weights)
    return kept[1]


@dataclass
class PairingsWork:
    """A share of an iteration's pairings for the match pool (`arena.match.pool.MatchPool`): played
    with `play_pairings` where it lands. In the learner's process it plays the learner's own
    networks (`nets`); elsewhere it carries their weights and how to build them, and each worker
    keeps one network per learner name between iterations."""

    game: str
    pairings: list
    seed: int
    version: int
    game_kwargs: dict
    policy: InvalidMovePolicy | None
    record: str
    greedy: bool
    offset: int
    nets: dict | None = None
    explore: float = 0.0
    weights: dict | None = None
    blueprint: tuple | None = None

    def run(self) -> tuple[list[MatchResult], list[Trajectory]]:
        nets = self.nets
        if nets is None:
            nets = {name: worker_net(name, sd, self.blueprint) for name, sd in self.weights.items()}
        return play_pairings(self.game, self.pairings, nets, seed=self.seed, version=self.version,
                             game_kwargs=self.game_kwargs, policy=self.policy, record=self.record, greedy=self.greedy,
                             index_offset=self.offset, explore=self.explore)


class PolicyActors:
    """Plays pairings on the match pool: in this process (``workers=0``), or split over worker
    processes (``backend="local"``) or Ray tasks (``backend="ray"``, on a cluster at `address` or a
    local Ray started with ``workers`` CPUs), each share with the weights the learner sent."""

    def __init__(self, game: str, workers: int = 0, game_kwargs: dict | None = None, backend: str = "local",
                 address: str | None = None):
        if backend not in ("local", "ray"):
            raise ValueError(f"actors backend must be local or ray, got {backend!r}")
        self.game, self.workers, self.game_kwargs = game, workers, dict(game_kwargs or {})
        self.backend, self.address = backend, address
        self._pool: MatchPool | None = None

    @property
    def busy(self) -> bool:
        """Pairings submitted and not collected yet."""
        return self._pool is not None and self._pool.pending > 0

    def _ensure_pool(self) -> MatchPool:
        if self._pool is None:
            if self.workers <= 0:
                self._pool = MatchPool("inline")
            else:
                self._pool = MatchPool(self.backend, self.workers, address=self.address)
        return self._pool

    def submit(self, pairings: Sequence[Pairing], nets: dict[str, Any], *, seed: int, version: int,
               policy: InvalidMovePolicy | None = None, record: str = "actions", greedy: bool = False,
               explore: float = 0.0) -> None:
        """Start playing (in the workers: returns at once; `collect` waits)."""
        pool = self._ensure_pool()
        common = dict(game=self.game, seed=seed, version=version, game_kwargs=self.game_kwargs, policy=policy,
                      record=record, greedy=greedy, explore=explore)
        if self.workers <= 0:
            pool.send(0, PairingsWork(pairings=list(pairings), offset=0, nets=nets, **common))
            return
        packed = {n: shipped(net) for n, net in nets.items()}
        weights, blueprint = {n: w for n, (w, _) in packed.items()}, next(iter(packed.values()))[1]
        size = (len(pairings) + self.workers - 1) // self.workers
        for i in range(0, len(pairings), size):
            pool.send(i, PairingsWork(pairings=list(pairings[i:i + size]), offset=i, weights=weights,
                                      blueprint=blueprint, **common))

    def collect(self) -> tuple[list[MatchResult], list[Trajectory]]:
        results, trajs = [], []
        for _, (r, t) in sorted(self._ensure_pool().drain(), key=lambda kv: kv[0]):
            results.extend(r)
            trajs.extend(t)
        trajs.sort(key=lambda t: (t.learner, t.match, t.seat))
        return results, trajs

    def play(self, pairings, nets, **kw) -> tuple[list[MatchResult], list[Trajectory]]:
        self.submit(pairings, nets, **kw)
        return self.collect()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
