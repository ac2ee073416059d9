"""Trainers by name: ``arena train CONFIG`` reads the config's ``trainer:`` key, validates the rest
into that trainer's config dataclass and builds the trainer.

A trainer is a `arena.trainers.common.base.Trainer` (its config a
`arena.trainers.common.base.TrainerConfig`): ``iteration`` (iterations done), ``run(iterations=None,
progress=None, phase=None) -> dict`` (train to the config's end, resuming where the run folder left
off), ``request_stop()``, ``resume_line()``, ``stop_line()`` and ``close()``. Register your own with
:func:`register_trainer`; the built-in ones are named by ``module:attr`` strings and imported only
when used (importing this module needs no torch).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Union

from arena.config import from_dict, read_yaml_mapping
from arena.errors import ConfigError

#: A class, or a "module:attr" string imported on first use.
Ref = Union[type, Callable[..., Any], str]


@dataclass(frozen=True)
class TrainerEntry:
    name: str
    config: Ref  # the config dataclass
    build: Ref  # build(cfg, directory) -> trainer
    summary: str = ""

    def config_class(self) -> type:
        return _resolve(self.config)

    def builder(self) -> Callable[..., Any]:
        return _resolve(self.build)

    def make(self, cfg: Any, directory: str | Path) -> Any:
        """The trainer on run folder `directory`; a `ConfigError` if what was registered is not a `Trainer`."""
        from arena.trainers.common.base import Trainer

        trainer = self.builder()(cfg, directory)
        if not isinstance(trainer, Trainer):
            close = getattr(trainer, "close", None)
            if callable(close):
                close()
            raise ConfigError(f"trainer: {self.name} built a {type(trainer).__name__}, not an "
                              "arena.trainers.common.base.Trainer: subclass it (it owns resume, checkpoints and stop)")
        return trainer


_TRAINERS: dict[str, TrainerEntry] = {
    "spiral": TrainerEntry("spiral", "arena.trainers.llm.config:SpiralConfig", "arena.trainers.llm.spiral:SpiralTrainer",
                           "SPIRAL-style self-play RL for a language-model player, fed by its own league"),
    "scc": TrainerEntry("scc", "arena.trainers.policy.config:SCCConfig", "arena.trainers.policy.scc:SCCTrainer",
                        "SCC-style neural policy: imitation on replays, then league RL (PPO, V-trace, UPGO)"),
    "ppo": TrainerEntry("ppo", "arena.trainers.policy.ppo:PPOConfig", "arena.trainers.policy.ppo:PPOTrainer",
                        "PPO on a single-agent task (continuous control: the OpenSim prosthetics task) over "
                        "parallel simulator processes"),
    "mixed": TrainerEntry("mixed", "arena.trainers.mixed:MixedConfig", "arena.trainers.mixed:MixedTrainer",
                          "a language-model learner and a neural-policy learner in one league, one game"),
    "rllib_ppo": TrainerEntry("rllib_ppo", "arena.trainers.rllib.ppo:RLlibPPOConfig",
                              "arena.trainers.rllib.ppo:RLlibPPOTrainer",
                              "RLlib PPO on the game's PettingZoo env (action mask honoured)"),
}


def _resolve(ref: Ref) -> Any:
    if isinstance(ref, str):
        mod, _, attr = ref.partition(":")
        return getattr(importlib.import_module(mod), attr)
    return ref


def register_trainer(name: str, config: Ref, build: Ref, summary: str = "") -> None:
    """Make ``trainer: <name>`` in a training config build ``build(cfg, directory)`` from a ``config``."""
    if name in _TRAINERS:
        raise ValueError(f"trainer {name!r} is already registered")
    _TRAINERS[name] = TrainerEntry(name, config, build, summary)


def trainer_names() -> list[str]:
    return sorted(_TRAINERS)


def get_trainer(name: str) -> TrainerEntry:
    try:
        return _TRAINERS[name]
    except KeyError:
        raise ConfigError(f"trainer: unknown trainer {name!r}; known: {', '.join(trainer_names())}") from None


def read_train_config(path: str | Path, **overrides: Any) -> tuple[TrainerEntry, Any]:
    """(the trainer the config names, its validated config). Overrides that are None are ignored; a
    dict override updates the section of that name (``parallel={"mode": "odc"}``); every error is a
    `ConfigError` naming the file and the key."""
    path = Path(path)
    data = read_yaml_mapping(path)
    name = data.pop("trainer", None)
    if name is None:
        raise ConfigError(f"{path}: trainer: required key is missing (one of: {', '.join(trainer_names())})")
    try:
        entry = get_trainer(str(name))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    for k, v in overrides.items():
        if v is None:
            continue
        if isinstance(v, dict) and isinstance(data.get(k), dict):  # a section: the given keys replace the file's
            data[k] = {**data[k], **v}
        elif isinstance(v, dict) and k not in data and k not in {f.name for f in fields(entry.config_class())}:
            raise ConfigError(f"{path}: trainer {entry.name} has no {k}: section (the {k} options are for "
                              f"trainers spiral, scc and ppo)" if k == "parallel" else f"{path}: trainer {entry.name} has no {k}:")
        else:
            data[k] = v
    try:
        return entry, from_dict(entry.config_class(), data)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def load_train_config(path: str | Path, **overrides: Any) -> Any:
    """The validated config of the trainer that `path` names (see :func:`read_train_config`)."""
    return read_train_config(path, **overrides)[1]


def make_trainer(path: str | Path, directory: str | Path, **overrides: Any) -> Any:
    """Build the trainer a config file names, on run folder `directory`."""
    entry, cfg = read_train_config(path, **overrides)
    return entry.make(cfg, directory)
