"""RLlib PPO self-play on the arena's own games (``trainer: rllib_ppo``).

The environment is the arena's PettingZoo AEC env for the game (`arena.envs.make`), seen through
`SeatViewEnv` (each seat's observation from its own side plus a seat one-hot, the mask as float32:
`arena.inference.rllib_module.seat_features`) and wrapped with RLlib's `PettingZooEnv`. Both seats
map to one RLModule, ``shared`` (`arena.inference.rllib_module.MaskedMLPModule`, which masks the
logits of illegal moves in every forward pass), so it learns by playing itself. RLlib's new API
stack throughout: RLModule, Learner, EnvRunner; with ``num_env_runners: 0`` the driver samples.

One iteration is one ``algo.train()`` (``train_batch_size`` env steps sampled, then
``num_epochs`` passes of minibatches of ``minibatch_size``). Every ``checkpoint_every``
iterations, every evaluation and the last iteration write ``checkpoints/iter-NNNNN``
(``algo.save_to_path`` plus ``arena_state.json``: iteration and env steps), renamed into place
whole, and re-point the ``latest`` and ``checkpoint`` links at it, so ``rllib:<run>/checkpoint``
plays the newest. Every ``eval_every`` iterations (and at iteration 0 and the last) the
checkpoint plays ``eval_games`` greedy, seat-swapped games against ``eval_opponent`` through the
arena's match loop (`arena.match.batch.play_matches` with the ``rllib:`` agent).

Metrics (`arena.trainers.common.metrics.MetricsLogger`: ``metrics.jsonl`` and TensorBoard; and
``curves.png``): ``train/return`` (the mean return per seat: 0 in zero-sum self-play, where one
seat's win is the other's loss), ``train/return/<seat>``, ``train/episode_len``, ``train/env_steps``
(lifetime), ``train/env_steps_per_s`` (this iteration's sampling and learning), ``train/entropy``,
``train/policy_loss``, ``train/vf_loss``, ``train/kl``, ``train/loss``, ``time/*``, and
``eval/win_rate/<opponent>``, ``eval/invalid_rate``.

**Structured games** (compound orders, such as ``arena/Skirmish-3m-v0``; `validate` tells them by
their action model). The arena's *parallel* PettingZoo env for the game (both seats move at once),
through `FlatParallelEnv` (`arena.inference.flat_view.FlatView`: the observation ``Dict``
flattened to one float32 vector a seat, the move a ``MultiDiscrete`` derived part by part from the
game's `ActionModel`, and every flat action turned into the nearest legal order, so no draw is
refused or punished as an invalid move), wrapped with RLlib's `ParallelPettingZooEnv`. The module is
RLlib's own default PPO module (its catalog's MLP over the flat vector, ``hidden`` and
``activation`` as its ``fcnet_hiddens`` and ``fcnet_activation``; its ``MultiDiscrete``
distribution), shared by both seats; no custom masking. An env step is one simultaneous tick of
one game (both seats' moves), as the arena's match loop counts a simultaneous game's moves.

``arena train`` on an existing run folder restores the latest checkpoint (weights, optimizer,
RLlib's counters) and continues at the next iteration; the environment's and the sampler's
random streams start afresh, so a resumed run is not bit-identical to one that never stopped.
Ray runs locally with its session files in ``<run>/ray`` (or a short folder under the system's
temporary folder when that path is too long for Ray's sockets); nothing goes to ``~/ray_results``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import gymnasium
import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper, BaseWrapper

from arena.errors import ConfigError
from arena.procs import start_local_ray, stop_local_ray
from arena.trainers.common.base import Trainer, TrainerConfig
from arena.trainers.common.checkpoints import checkpoint_path, link

try:  # Ray is an extra: without it the config still loads, and building the trainer says what to install
    from ray.rllib.algorithms.ppo import PPO as _PPO

    from arena.inference.rllib_module import (
        SEAT_PLANES,
        MaskedMLPModule,
        feature_size,
        seat_features,
    )
except ImportError:  # pragma: no cover - exercised only without the extra
    _PPO = None

#: The one RLModule both seats share.
MODULE_ID = "shared"
#: The name the env creator is registered under in Ray's env registry.
ENV_NAME = "arena_pettingzoo"
#: ... and the flat view of a structured game's parallel env.
ENV_NAME_FLAT = "arena_pettingzoo_flat"
STATE_FILE = "arena_state.json"


@dataclass
class RLlibPPOConfig(TrainerConfig):
    game: str = "openspiel/connect_four-v0"
    iterations: int = 30
    #: Env steps sampled per iteration (all seats' moves together).
    train_batch_size: int = 4000
    minibatch_size: int = 500
    num_epochs: int = 6
    lr: float = 1e-3
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_param: float = 0.2
    entropy_coeff: float = 0.01
    vf_loss_coeff: float = 0.5
    #: Layer sizes of the policy MLP and of the value MLP (each).
    hidden: list[int] = field(default_factory=lambda: [128, 128])
    activation: Literal["tanh", "relu"] = "tanh"
    #: 0: the driver samples; N > 0: N Ray actors sample, one CPU each.
    num_env_runners: int = 0
    #: Games stepped side by side in each sampler (one batched forward pass for all of them).
    num_envs_per_env_runner: int = 8
    checkpoint_every: int = 5
    eval_every: int = 5
    eval_games: int = 200
    eval_opponent: str = "random"
    #: torch threads in the driver (the learner, the evaluation games).
    threads: int = 2

    def __post_init__(self):
        if self.iterations < 0:
            raise ValueError(f"iterations must be >= 0, got {self.iterations}")
        if self.train_batch_size < 1 or not 1 <= self.minibatch_size <= self.train_batch_size:
            raise ValueError(f"train_batch_size must be >= 1 and minibatch_size within [1, train_batch_size], got "
                             f"{self.train_batch_size} and {self.minibatch_size}")
        for name in ("num_epochs", "checkpoint_every", "eval_every", "eval_games", "threads",
                     "num_envs_per_env_runner"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        from arena.workers import check_workers

        check_workers(self.num_env_runners, "num_env_runners", least=0)  # each a Ray worker process
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise ValueError(f"hidden must list positive layer sizes, got {self.hidden}")
        if self.lr <= 0 or not 0 < self.gamma <= 1 or not 0 <= self.gae_lambda <= 1:
            raise ValueError("lr must be > 0, gamma in (0, 1], gae_lambda in [0, 1]")


def validate(cfg: RLlibPPOConfig) -> dict[str, Any]:
    """Check the game (two or more seats, a tensor and an action mask, Discrete actions; or a
    structured game whose seats move at once: `_validate_structured`) and the evaluation opponent
    before anything is written; a `ConfigError` naming the key. Returns what the RLModule needs to
    know of the game (``structured: True`` for the flat path)."""
    from gymnasium import spaces

    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.errors import ArenaError

    try:
        core = make_core(cfg.game)
    except ArenaError as e:
        raise ConfigError(f"game: {e}") from None
    try:
        if len(core.players) < 2:
            raise ConfigError(f"game: {cfg.game} has {len(core.players)} player; self-play needs two or more")
        space = core.observation_space(0)
        inner = space.spaces.get("observation") if isinstance(space, spaces.Dict) else None
        if core.action_kind == "structured":
            return _validate_structured(cfg, core)
        if not isinstance(inner, spaces.Box) or "action_mask" not in space.spaces:
            raise ConfigError(f"game: {cfg.game} shows no observation tensor and action mask (a text game?); RLlib "
                              "PPO needs both: pick an OpenSpiel game such as openspiel/connect_four-v0")
        act = core.action_space(0)
        if not isinstance(act, spaces.Discrete):
            raise ConfigError(f"game: {cfg.game} has actions {act}; RLlib PPO here takes Discrete actions")
        if any(core.observation_space(i) != space or core.action_space(i) != act for i in range(len(core.players))):
            raise ConfigError(f"game: {cfg.game} shows its seats different spaces; one shared policy needs the same")
        try:
            make_agent(cfg.eval_opponent, core, seed=0)
        except ArenaError as e:
            raise ConfigError(f"eval_opponent: {e}") from None
        planes = SEAT_PLANES.get(cfg.game)
        return {"game": cfg.game, "obs_shape": list(inner.shape), "num_players": len(core.players),
                "seat_planes": list(planes) if planes is not None else None,
                "hidden": list(cfg.hidden), "activation": cfg.activation}
    finally:
        core.close()


def _validate_structured(cfg: RLlibPPOConfig, core: Any) -> dict[str, Any]:
    """`validate` for a structured game: simultaneous moves, the same flat view for every seat."""
    from arena.agents.specs import make_agent
    from arena.envs.core import SIMULTANEOUS
    from arena.errors import ArenaError
    from arena.inference.flat_view import FlatView

    core.reset(cfg.seed)
    if core.current_player() != SIMULTANEOUS:
        raise ConfigError(f"game: {cfg.game} has compound moves but its players take turns; RLlib PPO here takes "
                          "structured games whose players move at once (a parallel env, such as "
                          "arena/Skirmish-3m-v0)")
    try:
        views = [FlatView.of_core(core, i) for i in range(len(core.players))]
    except ValueError as e:
        raise ConfigError(f"game: {cfg.game}: {e}") from None
    first = views[0]
    if any(v.obs_size != first.obs_size or v.nvec.tolist() != first.nvec.tolist() for v in views):
        raise ConfigError(f"game: {cfg.game} shows its seats different spaces; one shared policy needs the same")
    try:
        make_agent(cfg.eval_opponent, core, seed=0)
    except ArenaError as e:
        raise ConfigError(f"eval_opponent: {e}") from None
    return {"game": cfg.game, "structured": True, "obs_size": first.obs_size, "nvec": first.nvec.tolist(),
            "num_players": len(core.players), "hidden": list(cfg.hidden), "activation": cfg.activation}


# -- the environment ------------------------------------------------------------------------------
class SeatViewEnv(BaseWrapper):
    """The arena's AEC env for a game, each seat observing `seat_features` of its own observation
    (``{"observation": float32 vector, "action_mask": float32 vector}``)."""

    def __init__(self, game: str):
        from arena.envs.registry import make

        env = make(game)
        super().__init__(env)
        self._seats = {a: i for i, a in enumerate(env.possible_agents)}
        self._n = len(env.possible_agents)
        self._planes = SEAT_PLANES.get(game)
        raw = env.observation_space(env.possible_agents[0])
        n_act = int(raw["action_mask"].shape[0])
        self._space = gymnasium.spaces.Dict({
            "observation": gymnasium.spaces.Box(-np.inf, np.inf, (feature_size(raw["observation"].shape, self._n),),
                                                np.float32),
            "action_mask": gymnasium.spaces.Box(0.0, 1.0, (n_act,), np.float32),
        })

    def observation_space(self, agent):
        return self._space

    def observe(self, agent):
        raw = self.env.observe(agent)
        return {"observation": seat_features(raw["observation"], self._seats[agent], self._n, self._planes),
                "action_mask": np.asarray(raw["action_mask"], dtype=np.float32)}


def make_rllib_env(env_config: dict) -> Any:
    """RLlib's `PettingZooEnv` over the seat view of the arena's env for ``env_config["game"]``."""
    from ray.rllib.env.wrappers.pettingzoo_env import PettingZooEnv

    return PettingZooEnv(SeatViewEnv(env_config["game"]))


class FlatParallelEnv(BaseParallelWrapper):
    """The arena's parallel env for a structured game seen through its `FlatView`: each seat observes
    a float32 vector and moves with a ``MultiDiscrete`` flat action, which becomes the nearest legal
    order (`FlatView.to_move`) before the game sees it."""

    def __init__(self, game: str):
        from arena.envs.registry import make
        from arena.inference.flat_view import FlatView

        env = make(game)
        super().__init__(env)
        self.view = FlatView.of_core(env.core)
        self._obs: dict[str, Any] = {}

    def observation_space(self, agent):
        return self.view.observation_space

    def action_space(self, agent):
        return self.view.action_space

    def _flat(self, obs: dict) -> dict:
        self._obs = obs
        return {a: self.view.flatten(o) for a, o in obs.items()}

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._flat(obs), infos

    def step(self, actions: dict):
        moves = {a: self.view.to_move(flat, self._obs.get(a)) for a, flat in actions.items()}
        obs, rewards, terminations, truncations, infos = self.env.step(moves)
        return self._flat(obs), rewards, terminations, truncations, infos


def make_flat_rllib_env(env_config: dict) -> Any:
    """RLlib's `ParallelPettingZooEnv` over the flat view of the arena's parallel env for a structured game."""
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    return ParallelPettingZooEnv(FlatParallelEnv(env_config["game"]))


def shared_policy(agent_id: Any, *args: Any, **kwargs: Any) -> str:
    """Every seat plays the one shared module (self-play)."""
    return MODULE_ID


if _PPO is not None:
    class RunFolderPPO(_PPO):
        """PPO whose (unused) Trainable log folder is in the run folder, not ``~/ray_results``."""

        def _setup_logdir(self):
            self._logdir = str(Path(self.config.env_config["run_folder"]) / "ray" / "trainable")
            os.makedirs(self._logdir, exist_ok=True)


def algorithm_config(cfg: RLlibPPOConfig, model_config: dict, run_folder: str | Path) -> Any:
    """The RLlib `PPOConfig` of a run."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    if model_config.get("structured"):
        # RLlib's own default PPO module and catalog (MLP encoder, MultiDiscrete distribution)
        spec = RLModuleSpec(model_config={"fcnet_hiddens": list(cfg.hidden), "fcnet_activation": cfg.activation})
        env_name = ENV_NAME_FLAT
    else:
        spec = RLModuleSpec(module_class=MaskedMLPModule, model_config=dict(model_config))
        env_name = ENV_NAME
    return (
        PPOConfig(algo_class=RunFolderPPO)
        .environment(env_name, env_config={"game": cfg.game, "run_folder": str(Path(run_folder).resolve())})
        .framework("torch")
        .env_runners(num_env_runners=cfg.num_env_runners, num_envs_per_env_runner=cfg.num_envs_per_env_runner,
                     num_cpus_per_env_runner=1)
        .learners(num_learners=0)
        .multi_agent(policies={MODULE_ID}, policy_mapping_fn=shared_policy)
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={MODULE_ID: spec}))
        .training(train_batch_size_per_learner=cfg.train_batch_size, minibatch_size=cfg.minibatch_size,
                  num_epochs=cfg.num_epochs, lr=cfg.lr, gamma=cfg.gamma, lambda_=cfg.gae_lambda,
                  clip_param=cfg.clip_param, entropy_coeff=cfg.entropy_coeff, vf_loss_coeff=cfg.vf_loss_coeff)
        .debugging(seed=cfg.seed, log_level="ERROR")
    )


def _ray_temp_dir(run_folder: Path) -> tuple[str, bool]:
    """(Ray's temp folder, whether it is a throw-away one). Ray's socket paths (its temp folder, a
    session folder of about 45 characters, ``sockets/plasma_store``) must stay under about 107
    characters: the run folder's ``ray`` when that is short enough, else a fresh temporary folder."""
    inside = (run_folder / "ray").resolve()
    if len(str(inside)) <= 40:
        inside.mkdir(parents=True, exist_ok=True)
        return str(inside), False
    return tempfile.mkdtemp(prefix="arena-ray-"), True


def start_ray(run_folder: str | Path, num_cpus: int = 2) -> tuple[bool, str | None]:
    """Start a local Ray unless one is up: (whether this call started it, the throw-away temp folder to
    delete after ``ray.shutdown()``, if any)."""
    import ray

    if ray.is_initialized():
        return False, None
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # Ray's workers inherit it: no busy-waiting threads
    temp, throwaway = _ray_temp_dir(Path(run_folder))
    # loopback only, and none of its processes outlives this one (arena.procs.start_local_ray)
    start_local_ray(ray, num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                    _temp_dir=temp)
    return True, temp if throwaway else None


def stop_ray(started: bool, temp: str | None) -> None:
    import ray

    if started:
        stop_local_ray(ray)
    if temp is not None:
        shutil.rmtree(temp, ignore_errors=True)


def _quiet_rllib() -> None:
    # RLlib's start-up notes (new API stack, GPU monitoring) would break the progress bar's lines.
    for name in ("ray.rllib", "ray.tune", "ray.train"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in spec)[:40]


def _num(d: dict, *keys: str, default: float = float("nan")) -> float:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    try:
        return float(d)
    except (TypeError, ValueError):
        return default


class RLlibPPOTrainer(Trainer):
    """``trainer: rllib_ppo``: RLlib PPO self-play with checkpoints, metrics and arena evaluation."""

    state_file = STATE_FILE

    def __init__(self, cfg: RLlibPPOConfig, directory: str | Path):
        if _PPO is None:
            from arena.errors import MissingExtra

            raise MissingExtra("the rllib_ppo trainer", "ray")
        import torch
        from ray.tune.registry import register_env

        self.model_config = validate(cfg)  # before anything is written to the run folder
        super().__init__(cfg, directory)
        self.curve_keys = ("eval/win_rate/" + _slug(cfg.eval_opponent), "eval/invalid_rate", "train/return/player_0",
                           "train/episode_len", "train/entropy", "train/env_steps_per_s")
        self.env_steps = 0
        self._lifetime: int | None = None
        torch.set_num_threads(cfg.threads)
        _quiet_rllib()
        self._ray = None
        self.algo = None
        try:
            self._ray = start_ray(self.dir, num_cpus=max(2, cfg.num_env_runners + 1))
            register_env(ENV_NAME, make_rllib_env)
            register_env(ENV_NAME_FLAT, make_flat_rllib_env)
            with warnings.catch_warnings():  # each sampler re-registers RLlib's env wrapper with Gymnasium
                warnings.filterwarnings("ignore", message=".*Overriding environment rllib-multi-agent-env")
                self.algo = algorithm_config(cfg, self.model_config, self.dir).build_algo()
            state = self.latest_state()
            if state is not None:
                self.algo.restore_from_path(str(self.latest.resolve()))
                self.iteration = int(state["iteration"])
                self.env_steps = int(state["env_steps"])
        except BaseException:
            self.close()
            raise

    def latest_state(self, map_location: Any = None) -> dict | None:
        if not self.latest.exists():
            return None
        return json.loads((self.latest.resolve() / STATE_FILE).read_text())

    # -- checkpoints --------------------------------------------------------------------------
    def save(self, folder: Path, it: int) -> None:
        """Iteration `it`'s RLlib checkpoint, written aside and renamed into place whole."""
        from arena.fsio import atomic_write_bytes

        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        self.algo.save_to_path(str(tmp.resolve()))
        state = {"iteration": it, "env_steps": self.env_steps, "config": asdict(self.cfg)}
        atomic_write_bytes(tmp / STATE_FILE, json.dumps(state, indent=1).encode())
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)

    def checkpoint(self, it: int, **extra: Any) -> Path:
        """Save iteration `it` (`Trainer.checkpoint`) and point ``latest`` and ``checkpoint`` at it."""
        path = super().checkpoint(it)
        link(self.dir, "checkpoint", checkpoint_path(it))
        return path

    def evaluate(self, checkpoint: str | Path, it: int) -> dict[str, float]:
        """Greedy, seat-swapped games of the checkpoint against ``eval_opponent`` in the arena."""
        from arena.match.batch import play_matches, summarize

        cfg = self.cfg
        specs = [f"rllib:{checkpoint}", cfg.eval_opponent]
        results = play_matches(cfg.game, specs, cfg.eval_games, seed=cfg.seed * 1_000_003 + 17, swap_seats=True)
        me = summarize(results, specs)[0]
        return {f"eval/win_rate/{_slug(cfg.eval_opponent)}": me.win_rate,
                "eval/invalid_rate": me.invalid / max(1, me.move_calls)}

    # -- the loop (`Trainer.run`) -----------------------------------------------------------------
    def _train_line(self, r: dict, seconds: float, steps: int) -> dict[str, float]:
        er = r.get("env_runners", {})
        learner = r.get("learners", {}).get(MODULE_ID, {})
        seat_returns = er.get("agent_episode_returns_mean", {}) or {}
        line = {
            "train/return": (sum(seat_returns.values()) / len(seat_returns)) if seat_returns else float("nan"),
            "train/episode_len": _num(er, "episode_len_mean"),
            "train/episodes": _num(er, "num_episodes", default=0.0),
            "train/env_steps": float(self.env_steps),
            "train/env_steps_per_s": steps / max(seconds, 1e-9),
            "train/entropy": _num(learner, "entropy"),
            "train/policy_loss": _num(learner, "policy_loss"),
            "train/vf_loss": _num(learner, "vf_loss"),
            "train/vf_explained_var": _num(learner, "vf_explained_var"),
            "train/kl": _num(learner, "mean_kl_loss"),
            "train/loss": _num(learner, "total_loss"),
            "time/iteration_s": seconds,
            "time/sample_s": _num(r, "timers", "env_runner_sampling_timer"),
            "time/learn_s": _num(r, "timers", "learner_update_timer"),
        }
        for seat, v in sorted(seat_returns.items()):
            line[f"train/return/{seat}"] = float(v)
        return line

    def start(self, last: int) -> dict[str, float]:
        result = self.evaluate(self.checkpoint(0), 0)  # the untrained policy: the curves' first point
        self.metrics.log(0, **result)
        return result

    def iterate(self, it: int, last: int) -> dict[str, float]:
        cfg = self.cfg
        if self._lifetime is None:
            # RLlib's lifetime counter of sampled env steps (restored with a checkpoint, or 0): each
            # iteration's steps are its increase.
            self._lifetime = int(self.algo.metrics.peek(("env_runners", "num_env_steps_sampled_lifetime"), default=0))
        t0 = time.perf_counter()
        r = self.algo.train()
        seconds = time.perf_counter() - t0
        now = int(_num(r, "env_runners", "num_env_steps_sampled_lifetime", default=0))
        steps, self._lifetime = max(0, now - self._lifetime), now
        self.iteration = it
        self.env_steps += steps
        result = self._train_line(r, seconds, steps)
        evaluate = it % cfg.eval_every == 0 or it == last
        # asked to stop during the steps: saved now (asked later: `Trainer.run` saves it before stopping)
        if evaluate or it % cfg.checkpoint_every == 0 or self.stop_requested:
            ckpt = self.checkpoint(it)
            if evaluate:
                result.update(self.evaluate(ckpt, it))
        self.metrics.log(it, **result)
        return result

    def finish(self, last: int, stopped: bool) -> None:
        self.plot_curves()

    def close(self) -> None:
        if getattr(self, "algo", None) is not None:
            self.algo.stop()
            self.algo = None
        super().close()
        if getattr(self, "_ray", None) is not None:
            stop_ray(*self._ray)
            self._ray = None
