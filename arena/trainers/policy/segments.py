"""PPO's rollouts on the match pool: every env slot plays its segment of an iteration as matches.

A single-agent task is a one-player game (`arena.envs.farama.GymCore` for a Gymnasium env), so PPO's
rollouts run on the one match engine (`arena.match.loop.Match`) and the one pool
(`arena.match.pool.MatchPool`) like every other match of the arena:

* An iteration sends one `RolloutWork` per env slot. Slot ``i`` plays ``steps`` moves as a run of
  episodes, episode ``k`` seeded by `episode_seed` ``(seed, iteration, i, k)``, the last one cut by
  ``max_moves`` where the segment ends. Its policy samples from a generator of
  ``(seed, iteration, 1000 + i)`` that runs on across the slot's episodes.
* The policy runs where the slot plays: in the learner's process (``processes: false``: the pool's
  ``inline`` backend, the learner's own network) or in a worker process (``local``: the weights
  travel with the work, one network per worker is kept between iterations). A simulator step (about
  17 ms on the prosthetics task) is long beside a small network's forward pass, so each worker
  steps its own env at its own pace and nothing waits on a per-step message to the learner.
* What comes back is a `Segment`: the network's inputs, actions, log-probabilities and values of
  every move, the env's rewards, how each episode ended (terminated, or cut: a time limit, a
  simulator failure or the segment's end, whose ``V(next observation)`` the slot computes with the
  same weights) and the episodes' returns. The learner folds the bootstrap into the rewards
  (`to_batch`).
* The batch is a function of the weights and the seeds alone: the same whatever the backend, the
  number of workers or the order the segments come back in (tested).
* A worker that dies loses the segments it held: they are played again from the same seeds, so
  they are the same segments (nothing lost, nothing counted twice). A segment lost
  `MAX_ATTEMPTS` times is left out of the batch (its moves masked invalid) and counted as
  ``train/lost_segments``.

Evaluation is the same work with ``episodes``: each a seed, played to its end (greedy or sampled from
a generator of the episode's seed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

#: Times a segment is sent before a worker's death drops it from the batch.
MAX_ATTEMPTS = 3

#: How a move ended its episode (`Segment.ends`).
GOES_ON, TERMINATED, CUT = 0, 1, 2


def episode_seed(seed: int, iteration: int, env: int, episode: int) -> int:
    return (seed * 1_000_003 + iteration * 100_019 + env * 1_009 + episode * 7 + 11) % (2**31)


@dataclass
class Segment:
    slot: int
    #: The network's inputs at each move: a dict of ``[L, ...]`` arrays (`policy_inputs`).
    inputs: dict
    #: ``[L]`` or ``[L, *shape]`` (or a dict of those: structured moves).
    actions: Any
    logp: np.ndarray  # [L]
    value: np.ndarray  # [L]
    #: The env's reward of each move (not scaled).
    rewards: np.ndarray  # [L]
    #: `GOES_ON`, `TERMINATED` or `CUT` for each move.
    ends: np.ndarray  # [L] int8
    #: ``V(next observation)`` where a move was `CUT` (0 elsewhere, and where a lost worker left no state).
    bootstrap: np.ndarray  # [L] float32
    #: (return, moves) of each episode that ended in the segment.
    episodes: list[tuple[float, int]] = field(default_factory=list)
    #: Episodes a simulator failure cut (``info["error"]``).
    errors: int = 0


class _Recorder:
    """The slot's player: one network, one generator for the whole segment, and a row per move."""

    spec = "ppo-actor"

    def __init__(self, net: Any, seed: int, greedy: bool, record: bool):
        from arena.agents.neural import PolicyAgent

        self.agent = PolicyAgent(net, greedy=greedy, seed=seed)
        self.record = record
        self.rows: list[tuple] = []
        self.rewards: list[float] = []

    def act(self, observation) -> Any:
        if observation.step > 0 and self.record:  # the reward of this episode's previous move
            self.rewards.append(float(observation.core.step_rewards()[observation.player]))
        moves, x = self.agent.decide([observation])
        if self.record:
            self.rows.extend(self.agent.rows(x))
        return moves[0]

    def value_of(self, core) -> float:
        """The network's value of the player's observation now (no sampling: the generator is untouched)."""
        import torch

        from arena.inference.policy_nets import policy_inputs
        from arena.inference.trees import tree_stack, tree_torch

        net = self.agent.net
        x = tree_torch(tree_stack([policy_inputs(core.observation(0), 0, net.spec)]))
        with torch.no_grad():
            return float(net(x)[1][0])


def _episode(core, player: _Recorder, seed: int, max_moves: int | None):
    from arena.match.loop import play_match

    res = play_match(core, [player], seed, max_moves=max_moves, record=False)
    if res.forfeiter is not None:
        raise RuntimeError(f"{core.game_id}: the policy's move was refused ({res.reason}); a move with NaN in it "
                           "means the network has diverged (lower the learning rate)")
    return res


def play_segment(core, net: Any, *, slot: int, seed: int, iteration: int, steps: int) -> Segment:
    """Slot `slot`'s `steps` moves of iteration `iteration` (see the module docstring)."""
    from arena.inference.trees import tree_stack

    player = _Recorder(net, episode_seed(seed, iteration, 1_000 + slot, 0), greedy=False, record=True)
    ends = np.zeros(steps, dtype=np.int8)
    boot = np.zeros(steps, dtype=np.float32)
    episodes: list[tuple[float, int]] = []
    errors, k = 0, 0
    while len(player.rows) < steps:
        res = _episode(core, player, episode_seed(seed, iteration, slot, k), steps - len(player.rows))
        player.rewards.append(float(core.step_rewards()[0]))
        last = len(player.rows) - 1
        if res.outcome == "max_moves" or core.truncated:
            ends[last] = CUT
            boot[last] = player.value_of(core)
        else:
            ends[last] = TERMINATED
        if "error" in (core.info or {}):
            errors += 1
        if res.outcome != "max_moves":
            episodes.append((float(res.returns[0]), int(res.moves)))
        k += 1
    inputs, actions, logp, value = zip(*player.rows)
    return Segment(slot, tree_stack(inputs), tree_stack(actions), np.asarray(logp, dtype=np.float32),
                   np.asarray(value, dtype=np.float32), np.asarray(player.rewards, dtype=np.float64), ends, boot,
                   episodes, errors)


def play_episodes(core, net: Any, episodes: Sequence[int], *, seed: int, greedy: bool) -> list[tuple[float, int]]:
    """(return, moves) of an episode of each seed, played to its end; a sampled policy draws from a
    generator of the episode's seed (the same episode whichever worker plays it)."""
    out = []
    for s in episodes:
        player = _Recorder(net, episode_seed(seed, -1, 0, s), greedy=greedy, record=False)
        res = _episode(core, player, s, None)
        out.append((float(res.returns[0]), int(res.moves)))
    return out


# -- the pool's work ----------------------------------------------------------------------------------
_CACHE: dict[str, Any] = {}


@dataclass
class RolloutWork:
    """One slot's segment (``steps``) or some evaluation episodes (``episodes``) for the match pool. In
    the learner's process it plays the learner's network (`net`); elsewhere it carries the weights and
    how to build the network, and each worker keeps one game and one network between iterations
(`arena.trainers.policy.actors.worker_net`)."""

    game: str
    game_kwargs: dict
    plugins: list[str]
    seed: int
    slot: int = 0
    iteration: int = 0
    steps: int = 0
    episodes: list[int] | None = None
    greedy: bool = True
    net: Any = None
    weights: dict | None = None
    blueprint: tuple | None = None

    def run(self) -> Segment | list[tuple[float, int]]:
        from arena.envs.registry import load_plugin, make_core

        for mod in self.plugins:
            load_plugin(mod)
        key = (self.game, repr(sorted(self.game_kwargs.items())))
        if _CACHE.get("game") != key:
            if "core" in _CACHE:
                _CACHE.pop("core").close()
            _CACHE["core"], _CACHE["game"] = make_core(self.game, **self.game_kwargs), key
        core, net = _CACHE["core"], self.net
        if net is None:
            from arena.trainers.policy.actors import worker_net

            net = worker_net("ppo", self.weights, self.blueprint)
        if self.episodes is not None:
            return play_episodes(core, net, self.episodes, seed=self.seed, greedy=self.greedy)
        return play_segment(core, net, slot=self.slot, seed=self.seed, iteration=self.iteration, steps=self.steps)


class Rollouts:
    """PPO's env slots on the match pool: ``processes`` workers (0: the learner's process)."""

    def __init__(self, game: str, game_kwargs: dict | None, slots: int, processes: int):
        from arena.envs.registry import loaded_plugins

        self.game, self.game_kwargs, self.slots, self.processes = game, dict(game_kwargs or {}), slots, processes
        self.plugins = loaded_plugins()
        #: Segments played again after a worker died, and segments dropped after `MAX_ATTEMPTS` losses.
        self.replayed = self.lost = 0
        self._pool = None

    def _ensure_pool(self):
        from arena.match.pool import MatchPool

        if self._pool is None:
            self._pool = MatchPool("local", self.processes) if self.processes > 0 \
                else MatchPool("inline")
        return self._pool

    def _common(self, net: Any, seed: int) -> dict:
        common: dict[str, Any] = dict(game=self.game, game_kwargs=self.game_kwargs, plugins=self.plugins, seed=seed)
        if self.processes <= 0:
            common["net"] = net
        else:
            from arena.trainers.policy.actors import shipped

            common["weights"], common["blueprint"] = shipped(net)
        return common

    def _play(self, works: dict[int, RolloutWork], on_done=None) -> dict[int, Any]:
        """Every work's output by key; a work whose worker died is sent again, up to `MAX_ATTEMPTS`
        times in all (then its output is None)."""
        from arena.match.pool import WorkerLost

        pool = self._ensure_pool()
        tries = dict.fromkeys(works, 1)
        for key, w in works.items():
            pool.send(key, w)
        out: dict[int, Any] = {}
        while pool.pending:
            for key, o in pool.recv(None):
                if isinstance(o, WorkerLost):
                    if tries[key] < MAX_ATTEMPTS:
                        tries[key] += 1
                        self.replayed += 1
                        pool.send(key, works[key])
                        continue
                    self.lost += 1
                    o = None
                elif isinstance(o, BaseException):
                    raise o
                out[key] = o
                if on_done is not None:
                    on_done(key, o)
        return out

    def segments(self, net: Any, *, seed: int, iteration: int, steps: int, on_done=None) -> list[Segment | None]:
        """Every slot's segment of `iteration`, by slot (None: lost `MAX_ATTEMPTS` times)."""
        common = self._common(net, seed)
        works = {i: RolloutWork(slot=i, iteration=iteration, steps=steps, **common) for i in range(self.slots)}
        out = self._play(works, on_done)
        return [out[i] for i in range(self.slots)]

    def episodes(self, net: Any, seeds: Sequence[int], *, seed: int, greedy: bool, on_done=None
                 ) -> list[tuple[float, int] | None]:
        """(return, moves) of one episode of each of `seeds`, spread over the slots."""
        common = self._common(net, seed)
        n = max(1, min(self.slots, len(seeds)))
        share = [list(range(len(seeds)))[j::n] for j in range(n)]
        works = {j: RolloutWork(episodes=[seeds[i] for i in idx], greedy=greedy, **common)
                 for j, idx in enumerate(share) if idx}
        out: list[Any] = [None] * len(seeds)
        for j, eps in self._play(works, on_done).items():
            for i, e in zip(share[j], eps or [None] * len(share[j])):
                out[i] = e
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def to_batch(segments: Sequence[Segment | None], steps: int, *, gamma: float, reward_scale: float):
    """The time-major `RolloutBatch` of the slots' segments (column i = slot i): rewards scaled, a
    discount of 0 where an episode ended, ``gamma * V(next)`` folded into a cut move's reward (GAE's
    and UPGO's bootstrap). A lost segment is a column of invalid moves."""
    from arena.trainers.policy.learner import Played, batch_of

    if all(s is None for s in segments):
        raise RuntimeError("every segment of the iteration was lost: the env's workers keep dying")
    return batch_of([None if s is None else
                     Played(s.inputs, s.actions, s.logp, s.value, s.rewards * reward_scale + gamma * s.bootstrap,
                            np.where(s.ends == GOES_ON, gamma, 0.0)) for s in segments], steps)
