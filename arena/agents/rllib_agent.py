"""A player from an RLlib checkpoint (the RLlib PPO trainer's, `arena.trainers.rllib.ppo`).

Spec: ``rllib:<checkpoint folder>`` with options ``greedy=True`` (the default: the masked argmax;
``greedy=False`` samples from the masked policy), ``seed`` (for sampling) and ``module=<id>``
(which RLModule of a multi-module checkpoint; default: the only one, else ``shared``). The
folder is an Algorithm checkpoint (``algo.save_to_path``: the module is read from
``learner_group/learner/rl_module/<id>``), a MultiRLModule folder or one RLModule folder; a run
folder's ``checkpoint`` link plays its latest iteration (``rllib:runs/rl/checkpoint``).

Only the RLModule is loaded (``RLModule.from_checkpoint``): no Algorithm, no Ray cluster. It
reads ``observation.raw`` (tensor and action mask), builds the seat view the module was trained
on (`arena.inference.rllib_module.seat_features`) and returns an int. Illegal moves are masked
twice: inside the module and here, on the legal list the match loop shows, so even a module
that does not mask plays only legal moves. A game with no observation tensor (a text game) is
an `IncompatibleAgent`. Checkpoints are pickles: load only checkpoints you trust.

A checkpoint of a structured game (compound orders, such as ``arena/Skirmish-3m-v0``; its module
is RLlib's default one with a ``MultiDiscrete`` action space) is played by `RLlibFlatAgent`: the
same flat view the trainer used (`arena.inference.flat_view.FlatView`, rebuilt from the game's
spaces and action model and checked against the module's), the module's logits split per
component (greedy: each component's argmax; else a draw from each), then the same legalisation
(`FlatView.to_move`), so it never makes an invalid move.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

import numpy as np

from arena.agents.base import BaseAgent
from arena.envs.observation import Observation
from arena.errors import AgentSpecError, IncompatibleAgent

#: Where an Algorithm checkpoint keeps its MultiRLModule.
ALGO_MODULES = Path("learner_group") / "learner" / "rl_module"
#: What an RLModule (or MultiRLModule) folder holds.
_STATE = "module_state.pkl"


def find_module_dir(path: str | Path, module_id: str | None = None) -> Path:
    """The RLModule folder inside an RLlib checkpoint folder: an Algorithm checkpoint, a
    MultiRLModule folder, one RLModule folder, or a run folder (its ``checkpoint`` link)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no RLlib checkpoint at {p}")
    if not (p / _STATE).exists() and not (p / ALGO_MODULES).is_dir() and (p / "checkpoint").is_dir():
        p = p / "checkpoint"  # a run folder of the rllib_ppo trainer
    root = p / ALGO_MODULES if (p / ALGO_MODULES).is_dir() else p
    subs = {d.name: d for d in sorted(root.iterdir()) if d.is_dir() and (d / _STATE).exists()} if root.is_dir() else {}
    if subs:
        if module_id is not None:
            if module_id not in subs:
                raise AgentSpecError(f"RLlib checkpoint {p} has no module {module_id!r} (it has: {', '.join(subs)})")
            return subs[module_id]
        if len(subs) == 1:
            return next(iter(subs.values()))
        if "shared" in subs:
            return subs["shared"]
        raise AgentSpecError(f"RLlib checkpoint {p} holds modules {', '.join(subs)}: pick one with module=<id>")
    if (root / _STATE).exists():
        return root
    raise FileNotFoundError(f"no RLlib checkpoint at {p} (no RLModule inside)")


@contextlib.contextmanager
def _quiet(name: str = "ray._common.deprecation"):
    # RLlib's RLModule constructor logs a deprecation note of its own on every load.
    log = logging.getLogger(name)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def load_module(path: str | Path, module_id: str | None = None) -> Any:
    """The RLModule of an RLlib checkpoint folder, in eval mode."""
    from arena.errors import require

    folder = find_module_dir(path, module_id)
    require("ray.rllib", "rllib: agents", "ray")
    from ray.rllib.core.rl_module.rl_module import RLModule

    import arena.inference.rllib_module  # noqa: F401  (the class the checkpoint names)

    with _quiet():
        module = RLModule.from_checkpoint(str(folder.resolve()))
    module.eval()
    return module


class RLlibAgent(BaseAgent):
    """Plays an RLModule trained on the seat view of `arena.inference.rllib_module`."""

    def __init__(self, module: Any, greedy: bool = True, seed: int | None = None, core: Any = None):
        self.module = module
        self.greedy = bool(greedy)
        cfg = dict(getattr(module, "model_config", None) or {})
        self.game = cfg.get("game")
        self.obs_shape = tuple(cfg.get("obs_shape") or ())
        self.num_players = int(cfg.get("num_players", 2))
        planes = cfg.get("seat_planes")
        self.seat_planes = tuple(planes) if planes is not None else None
        self.n_actions = int(module.action_space.n)
        if core is not None:
            self.check_game(core)
        self.reset(seed)

    def check_game(self, core: Any) -> None:
        """`IncompatibleAgent` unless `core` shows the tensor and takes the actions the module was trained on."""
        from gymnasium import spaces

        space = core.observation_space(0)
        inner = space.spaces.get("observation") if isinstance(space, spaces.Dict) else None
        if not isinstance(inner, spaces.Box) or "action_mask" not in space.spaces:
            raise IncompatibleAgent(f"{core.game_id} shows no observation tensor and action mask (a text game?): "
                                    "an rllib: agent needs both; play it with an llm: or search agent")
        act = core.action_space(0)
        if (self.obs_shape and tuple(inner.shape) != self.obs_shape) or \
                not isinstance(act, spaces.Discrete) or int(act.n) != self.n_actions:
            raise IncompatibleAgent(f"this RLlib checkpoint plays {self.game or 'another game'} (observation "
                                    f"{self.obs_shape}, {self.n_actions} actions); {core.game_id} shows "
                                    f"{tuple(inner.shape)} and takes {act}")

    def reset(self, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(seed)

    def logits(self, observation: Observation) -> np.ndarray:
        """The module's (masked) logits for this observation, as float64."""
        import torch
        from ray.rllib.core.columns import Columns

        from arena.inference.rllib_module import seat_features

        raw = observation.raw
        if not isinstance(raw, dict) or "observation" not in raw or isinstance(raw["observation"], str):
            raise IncompatibleAgent(f"{observation.game_id} shows no observation tensor: an rllib: agent needs one")
        x = seat_features(raw["observation"], observation.player, self.num_players, self.seat_planes)
        mask = np.asarray(raw.get("action_mask", np.ones(self.n_actions)), dtype=np.float32)
        batch = {Columns.OBS: {"observation": torch.from_numpy(x)[None], "action_mask": torch.from_numpy(mask)[None]}}
        with torch.no_grad():
            out = self.module.forward_inference(batch)
        return out[Columns.ACTION_DIST_INPUTS][0].double().numpy()

    def act(self, observation: Observation) -> int:
        legal = observation.legal_actions
        logits = self.logits(observation)
        if legal is None:  # no legal list shown: the mask in the raw observation is all there is
            legal = [int(a) for a in np.flatnonzero(np.asarray(observation.raw["action_mask"]))]
        legal = np.asarray([int(a) for a in legal], dtype=np.int64)
        if legal.size == 0:
            raise ValueError(f"{observation.game_id}: no legal move to choose from")
        z = logits[legal]
        if self.greedy:
            return int(legal[int(np.argmax(z))])
        p = np.exp(z - z.max())
        return int(legal[int(self._rng.choice(legal.size, p=p / p.sum()))])


class RLlibFlatAgent(BaseAgent):
    """Plays an RLModule trained on the flat view of a structured game (`arena.inference.flat_view`)."""

    def __init__(self, module: Any, greedy: bool = True, seed: int | None = None, core: Any = None):
        self.module = module
        self.greedy = bool(greedy)
        self.nvec = np.asarray(module.action_space.nvec, np.int64).ravel()
        self.obs_size = int(np.prod(module.observation_space.shape))
        self._bounds = np.concatenate([[0], np.cumsum(self.nvec)])
        self._views: dict[tuple, Any] = {}
        if core is not None:
            self.view_of(core, 0)
        self.reset(seed)

    def view_of(self, core: Any, player: int) -> Any:
        """The flat view of `core` for `player`, checked against the module's spaces once a core."""
        from arena.inference.flat_view import FlatView

        key = (core.game_id, repr(core.settings), player)
        view = self._views.get(key)
        if view is None:
            if core.action_kind != "structured":
                raise IncompatibleAgent(f"this RLlib checkpoint plays a structured game (flat actions {self.nvec.tolist()}); "
                                        f"{core.game_id} takes {core.action_kind} actions")
            try:
                view = FlatView.of_core(core, player)
            except ValueError as e:
                raise IncompatibleAgent(f"{core.game_id} has no flat view: {e}") from None
            if view.obs_size != self.obs_size or view.nvec.tolist() != self.nvec.tolist():
                raise IncompatibleAgent(f"this RLlib checkpoint reads {self.obs_size} features and writes actions "
                                        f"{self.nvec.tolist()}; {core.game_id} shows {view.obs_size} and takes "
                                        f"{view.nvec.tolist()}")
            self._views[key] = view
        return view

    def reset(self, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(seed)

    def flat_action(self, x: np.ndarray) -> np.ndarray:
        """The flat action for one flat observation: per component the argmax, or a draw."""
        import torch
        from ray.rllib.core.columns import Columns

        with torch.no_grad():
            out = self.module.forward_inference({Columns.OBS: torch.from_numpy(x)[None]})
        logits = out[Columns.ACTION_DIST_INPUTS][0].double().numpy()
        a = np.zeros(len(self.nvec), np.int64)
        for i in range(len(self.nvec)):
            z = logits[self._bounds[i]:self._bounds[i + 1]]
            if self.greedy:
                a[i] = int(np.argmax(z))
            else:
                p = np.exp(z - z.max())
                a[i] = int(self._rng.choice(z.size, p=p / p.sum()))
        return a

    def act(self, observation: Observation) -> Any:
        view = self.view_of(observation.core, observation.player)
        raw = observation.raw
        move = view.to_move(self.flat_action(view.flatten(raw)), raw)
        if move is None:
            raise ValueError(f"{observation.game_id}: no legal move to choose from")
        return move


def _factory(core, seed, positional, **opts):
    if not positional:
        raise AgentSpecError("rllib agents need a checkpoint folder: rllib:<folder> (a run folder's checkpoint link, "
                             "e.g. rllib:runs/rl/checkpoint)")
    module = load_module(positional, opts.pop("module", None))
    if type(module.action_space).__name__ == "MultiDiscrete":
        return RLlibFlatAgent(module, seed=opts.pop("seed", seed), core=core, **opts)
    return RLlibAgent(module, seed=opts.pop("seed", seed), core=core, **opts)
