"""PPO on a single-agent task over parallel simulator processes (``trainer: ppo``).

The continuous-control trainer: a neural policy (`arena.inference.policy_nets`, Gaussian or Beta
head over the action box, observation normalisation) learns by the neural-policy learner's PPO
(`arena.trainers.policy.learner.PolicyLearner`, GAE, clipped surrogate, value regression) from
rollouts of several copies of the env, each in its own worker process on the match pool
(`arena.trainers.policy.segments`: one-player matches on the one engine). Built for
the OpenSim prosthetics task (``configs/train/prosthetics_ppo.yaml``), it trains any single-agent
Gymnasium game with Box or Discrete actions.

One iteration:

1. every env plays ``steps_per_env`` steps from a fresh reset (episodes end and restart inside;
   the seeds come from ``(seed, iteration, env, episode)``), each at its own pace in its worker
   with the weights of now; the samples are the policy's own (not clipped: the env clips to its
   box);
2. an episode cut by the step limit, by a simulator failure or by the end of the segment is
   bootstrapped: ``gamma * V(next observation)`` is folded into its last reward, whose discount is
   then 0, which is exactly GAE's bootstrap (and UPGO's); a fall (termination) is not;
3. ``epochs`` passes of PPO over minibatches of the ``envs * steps_per_env`` samples;
4. the observation normaliser takes in the iteration's observations (after the update, so the
   behaviour log-probabilities and the update saw the same normaliser; iteration 0 plays one batch
   with the first policy only to start the normaliser and to measure that policy's return);
5. every ``eval.every`` iterations the policy plays ``eval.seeds`` (greedy by default) and the
   mean return decides ``best``; the checkpoint (``checkpoints/iter-N/policy.pt``: weights and
   normaliser, what ``policy:runs/x/best`` plays) and the trainer state are written, ``latest``
   and ``best`` re-pointed.

Every iteration is a function of the weights, the optimizer, the normaliser and the iteration
number (its random draws are seeded by ``(seed, iteration)``), so a run stopped at any point
resumes exactly from its last checkpoint, and the same seed gives the same run.

Inside an iteration, ``run(phase=...)`` hears ``phase(text, done, total)`` as it goes: ``"rollout:
samples"`` (the env steps played of ``envs * steps_per_env``), ``"update: epochs"`` (PPO's passes
over the batch) and ``"evaluation: episodes"`` (of ``eval.seeds``); ``arena train`` shows them as a
second bar with a rate.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from arena.errors import ConfigError
from arena.trainers.common.base import Trainer, TrainerConfig
from arena.trainers.parallel.config import ParallelConfig
from arena.trainers.policy.learner import LearnerSettings
from arena.trainers.policy.segments import episode_seed


@dataclass
class PPOEvalConfig:
    #: Evaluate every this many iterations (and at iteration 0 and the last).
    every: int = 5
    #: The seeds every evaluation plays, one episode each (the same for every policy: comparable).
    seeds: list[int] = field(default_factory=lambda: [0, 1])
    #: The distribution's mode (greedy) or samples from it.
    greedy: bool = True

    def __post_init__(self):
        if self.every < 1 or not self.seeds:
            raise ValueError("eval.every >= 1 and at least one eval.seeds are required")


@dataclass
class PPOLearnerSettings(LearnerSettings):
    """The neural-policy learner's settings with PPO's defaults for continuous control (clipped
    surrogate, GAE, the KL early stop; no UPGO)."""

    epochs: int = 8
    gamma: float = 0.99
    #: Stop an iteration's epochs once a minibatch's approximate KL passes 1.5 x this (None: never).
    target_kl: float | None = 0.02
    entropy_coef: float = 0.0
    upgo_coef: float = 0.0
    max_grad_norm: float = 0.5
    update_kl: bool = True

    def __post_init__(self):
        super().__post_init__()
        if self.algo not in ("ppo", "dppo"):
            raise ValueError(f"learner.algo: the ppo trainer learns by ppo or dppo, got {self.algo}")


@dataclass
class PPOConfig(TrainerConfig):
    game: str = "arena/Prosthetics-v0"
    game_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Torch threads of the learner's process (the env processes use none).
    threads: int = 1
    #: Copies of the env, stepped together.
    envs: int = 2
    #: Each env in its own process (false: all in this process, one after another).
    processes: bool = True
    #: Steps each env plays per iteration (the batch is envs * steps_per_env samples).
    steps_per_env: int = 256
    iterations: int = 50
    arch: Literal["auto", "mlp", "conv", "entity"] = "auto"
    #: Network sizes (`arena.inference.policy_nets.DEFAULT_SIZES`): ``continuous: beta`` for a Beta head.
    sizes: dict[str, Any] = field(default_factory=lambda: {"hidden": [256, 256], "obs_norm": True})
    #: The learner's settings (`PPOLearnerSettings`): epochs, minibatch, gamma, lam, clip, target_kl,
    #: value_coef, entropy_coef, max_grad_norm.
    learner: PPOLearnerSettings = field(default_factory=PPOLearnerSettings)
    lr: float = 3e-4
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    lr_end: float = 0.0
    #: Rewards are multiplied by this before learning (the prosthetics task: about 10 a step).
    reward_scale: float = 0.05
    eval: PPOEvalConfig = field(default_factory=PPOEvalConfig)
    #: The learner's step data parallel over ranks (mode odc or fsdp; `arena.trainers.parallel.policy`).
    parallel: ParallelConfig = field(default_factory=ParallelConfig)

    #: Keys that moved: an old config naming one at the top gets a one-line error naming the new place.
    moved_keys: ClassVar[dict[str, str]] = {k: f"learner.{k}" for k in LearnerSettings.FLAT_KEYS}

    def __post_init__(self):
        if self.envs < 1 or self.steps_per_env < 1 or self.iterations < 0:
            raise ValueError("envs >= 1, steps_per_env >= 1 and iterations >= 0 are required")
        if self.processes:  # each env is a worker process
            from arena.workers import check_workers

            check_workers(self.envs, "envs (with processes: true, one process each)")

    def lr_at(self, iteration: int) -> float:
        from arena.trainers.common.schedules import lr_at

        return lr_at(self.lr, iteration, self.iterations, self.lr_schedule, self.lr_end)


class PPOTrainer(Trainer):
    curve_keys = ("eval/return", "train/return", "train/episode_len", "train/entropy", "train/value_loss",
                  "train/approx_kl", "train/env_steps_per_s")

    def __init__(self, cfg: PPOConfig, directory: str | Path):
        from arena.envs.registry import make_core
        from arena.inference.policy_nets import build_policy, spec_from_core
        from arena.trainers.policy.make import check_learner, check_parallel, make_policy_learner

        import torch

        check_parallel(cfg.parallel)
        self.cfg, self.dir, self.torch = cfg, Path(directory), torch
        torch.set_num_threads(int(cfg.threads))
        core = make_core(cfg.game, **cfg.game_kwargs)
        try:
            if len(core.players) != 1:
                raise ConfigError(f"trainer: ppo trains single-agent tasks; {cfg.game} has {len(core.players)} players "
                                  "(train two-player games with trainer: scc)")
            self.spec = spec_from_core(core)
            check_learner(cfg.learner, self.spec, cfg.game, cfg.sizes)
        finally:
            core.close()
        super().__init__(cfg, directory)
        torch.manual_seed(cfg.seed)
        self.net = build_policy(self.spec, cfg.arch, **cfg.sizes)
        self.learner = make_policy_learner(self.net, cfg.learner, lr=cfg.lr, parallel=cfg.parallel)
        self.env_steps = 0
        self.rollouts = None
        state = self.latest_state(map_location="cpu")
        if state is not None:
            self.learner.load_state_dict(state["learner"])
            self.iteration = int(state["iteration"])
            self.env_steps = int(state.get("env_steps", 0))

    # -- the env slots ------------------------------------------------------------------------------
    def _rollouts(self):
        if self.rollouts is None:
            from arena.trainers.policy.segments import Rollouts

            self.rollouts = Rollouts(self.cfg.game, self.cfg.game_kwargs, self.cfg.envs,
                                     self.cfg.envs if self.cfg.processes else 0)
        return self.rollouts

    # -- one iteration ----------------------------------------------------------------------------
    def collect(self, it: int):
        """Play ``steps_per_env`` moves in every env slot; (RolloutBatch, stats).

        Each slot plays its segment on the match pool (`arena.trainers.policy.segments`): in its own
        worker process, with the weights of now, at its own pace. Each slot draws from its own
        generator, seeded by ``(seed, iteration, slot)``: the batch is the same whatever order the
        segments arrive in, and in-process or in workers."""
        from arena.trainers.policy.segments import to_batch

        cfg = self.cfg
        rollouts = self._rollouts()
        T, N = cfg.steps_per_env, cfg.envs
        done = [0]

        def shown(slot, segment) -> None:
            done[0] += T
            self._show("rollout: samples", done[0], T * N)

        self._show("rollout: samples", 0, T * N)
        lost_before = rollouts.lost
        segments = rollouts.segments(self.net, seed=cfg.seed, iteration=it, steps=T, on_done=shown)
        batch = to_batch(segments, T, gamma=cfg.learner.gamma, reward_scale=cfg.reward_scale)
        finished = [e for s in segments if s is not None for e in s.episodes]
        stats = {"train/episodes": float(len(finished)),
                 "train/sim_errors": float(sum(s.errors for s in segments if s is not None)),
                 "train/lost_segments": float(rollouts.lost - lost_before)}
        if finished:
            stats["train/return"] = float(np.mean([f[0] for f in finished]))
            stats["train/episode_len"] = float(np.mean([f[1] for f in finished]))
        return batch, stats

    def _normalise_with(self, batch) -> None:
        """The observation normaliser takes in a batch's observations (a policy without one: nothing)."""
        if self.cfg.sizes.get("obs_norm") and "obs" in batch.inputs:  # (a one-tensor observation's)
            self.net.update_obs_norm(batch.inputs["obs"][batch.valid].numpy())

    def evaluate(self, seeds: list[int] | None = None, greedy: bool | None = None) -> dict[str, float]:
        """The policy on the eval seeds, one episode each, spread over the env slots; a sampled policy
        draws from a generator of the episode's seed (the same episode whichever slot plays it)."""
        cfg = self.cfg
        seeds = list(cfg.eval.seeds if seeds is None else seeds)
        greedy = cfg.eval.greedy if greedy is None else greedy
        done = [0]

        def shown(key, episodes) -> None:
            done[0] += len(episodes or ())
            self._show("evaluation: episodes", done[0], len(seeds))

        self._show("evaluation: episodes", 0, len(seeds))
        out = self._rollouts().episodes(self.net, seeds, seed=cfg.seed, greedy=greedy, on_done=shown)
        played = [e for e in out if e is not None]
        if not played:
            raise RuntimeError("every evaluation episode was lost: the env's workers keep dying")
        ret = [e[0] for e in played]
        return {"eval/return": float(np.mean(ret)), "eval/return_min": float(np.min(ret)),
                "eval/episode_len": float(np.mean([e[1] for e in played]))}

    # -- checkpoints ---------------------------------------------------------------------------------
    def save(self, folder: Path, it: int) -> None:
        from arena.inference.policy_nets import save_policy

        save_policy(folder, self.net, {"trainer": "ppo", "iteration": it, "run": str(self.dir),
                                       "game_kwargs": dict(self.cfg.game_kwargs)})
        self.save_state(folder, {"iteration": it, "learner": self.learner.state_dict(), "env_steps": self.env_steps,
                                 "config": asdict(self.cfg)})

    # -- the loop (`Trainer.run`) ------------------------------------------------------------------------
    def on_phase(self, phase) -> None:
        self.learner.on_epoch = None if phase is None else (lambda k, n: phase("update: epochs", k, n))

    def start(self, last: int) -> dict[str, float]:
        # Iteration 0 plays one batch with the first policy and learns nothing from it: its
        # observations start the normaliser (else the first update sees raw inputs, metres next to
        # newtons, and moves the policy far), and its return is the first policy's.
        batch, line = self.collect(0)
        self._normalise_with(batch)
        self.env_steps += batch.moves
        out = {**line, **self.evaluate(), "train/env_steps_total": float(self.env_steps)}
        self.checkpoint(0)
        self.track_best(0, "eval/return", out["eval/return"])
        self.metrics.log(0, **out)
        return out

    def iterate(self, it: int, last: int) -> dict[str, float]:
        torch = self.torch
        cfg = self.cfg
        t0 = time.perf_counter()
        lr = cfg.lr_at(it)
        self.learner.set_lr(lr)
        batch, line = self.collect(it)
        t_roll = time.perf_counter() - t0
        t1 = time.perf_counter()
        gen = torch.Generator().manual_seed(episode_seed(cfg.seed, it, 998, 0))
        self._show("update: epochs", 0, cfg.learner.epochs)
        stats = self.learner.step(batch, 0.0, gen)
        self._normalise_with(batch)
        t_learn = time.perf_counter() - t1
        samples = batch.moves
        self.env_steps += samples
        line.update({f"train/{k}": v for k, v in stats.items() if k not in ("moves",)})
        line.update({"train/lr": lr, "train/env_steps_total": float(self.env_steps),
                     "time/rollout_s": t_roll, "time/learn_s": t_learn,
                     "train/env_steps_per_s": samples / max(t_roll, 1e-9),
                     "train/samples_per_s": samples / max(t_roll + t_learn, 1e-9)})
        evaluated = it % cfg.eval.every == 0 or it == last
        if evaluated:
            line.update(self.evaluate())
        self.iteration = it
        self.checkpoint(it)
        if evaluated:
            self.track_best(it, "eval/return", line["eval/return"])
        line["time/iteration_s"] = time.perf_counter() - t0
        self.metrics.log(it, **line)
        return line

    def close(self) -> None:
        if self.rollouts is not None:
            self.rollouts.close()
            self.rollouts = None
        self.learner.close()
        super().close()
