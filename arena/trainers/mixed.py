"""One league, two learner families: a language-model learner (SPIRAL) and a neural-policy learner
(SCC) learning in the same league on the same game, rated in one table.

``trainer: mixed`` (``configs/train/mixed_tictactoe.yaml``) holds a ``llm:`` section (a SPIRAL
config) and a ``policy:`` section (an SCC config) for one ``game``. The run folder is the
league's (``arena ratings <dir>`` shows everyone); each learner keeps its checkpoints in its own
sub-folder (``<dir>/llm``, ``<dir>/policy``). The league is opened once, here (a
`arena.league.session.SharedLeague`), and each coordinator reaches it through its own session. They take turns, one iteration
each: each schedules its learner's matches by its own rules through the shared league, so the
language model meets the neural players (their snapshots are frozen `policy:` players) and the
neural learners meet the language model's snapshots (`llm:` players), and every match is rated
in the same Elo/OpenSkill tables next to the fixed agents and anyone who plays the league.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena.config import from_dict
from arena.errors import ConfigError
from arena.trainers.common.base import Trainer, TrainerConfig


@dataclass
class MixedConfig(TrainerConfig):
    game: str = "openspiel/tic_tac_toe-v0"
    iterations: int = 10
    #: A SPIRAL config (``trainer: spiral`` keys, without game, iterations, seed).
    llm: dict[str, Any] = field(default_factory=dict)
    #: An SCC config (``trainer: scc`` keys, without game, iterations, seed).
    policy: dict[str, Any] = field(default_factory=dict)

    def parts(self):
        from arena.trainers.llm.config import SpiralConfig
        from arena.trainers.policy.config import SCCConfig

        out = []
        for key, cls in (("llm", SpiralConfig), ("policy", SCCConfig)):
            section = dict(getattr(self, key))
            for k in ("game", "iterations", "seed"):
                if k in section:
                    raise ConfigError(f"{key}.{k}: set {k} once, at the top of the mixed config")
            section.update(game=self.game, iterations=self.iterations, seed=self.seed)
            out.append(from_dict(cls, section, key))
        llm, policy = out
        names = [e.name for e in policy.learners]
        from arena.trainers.llm.spiral import LEARNER_NAME

        if LEARNER_NAME in names or any(n.startswith(LEARNER_NAME + "@") for n in names):
            raise ConfigError(f"policy.learners: {LEARNER_NAME!r} is the language-model learner's name; "
                              "name the neural learners otherwise")
        return llm, policy


class MixedTrainer(Trainer):
    """Two trainers on one league: the run folder's, opened once here (with both trainers' opponents)
    and handed to both, which add their own players to it under their own owners."""

    keeps_metrics = False  # each learner keeps its own, in its sub-folder

    def __init__(self, cfg: MixedConfig, directory: str | Path):
        from arena.trainers.llm.spiral import SpiralTrainer
        from arena.trainers.policy.scc import SCCTrainer

        llm_cfg, policy_cfg = cfg.parts()
        super().__init__(cfg, directory)
        #: The one league of both learners: opened here, closed here (the trainers' sessions leave it to its opener).
        self.league = self._open_league(llm_cfg, policy_cfg)
        policy = None
        try:
            self.policy = policy = SCCTrainer(policy_cfg, self.dir / "policy", league=self.league)
            self.llm = SpiralTrainer(llm_cfg, self.dir / "llm", league=self.league)
        except BaseException:
            try:
                if policy is not None:
                    policy.close()
            finally:
                self.league.close()
            raise
        self._out: dict[str, float] = {}

    def _open_league(self, llm_cfg: Any, policy_cfg: Any) -> Any:
        """The one league both learners play in: the game (with the policy config's settings), both
        learners' opponents as its fixed players, the policy learners' role rules."""
        from arena.league.session import SharedLeague
        from arena.trainers.llm.spiral import league_spec as llm_league
        from arena.trainers.policy.scc import league_spec as policy_league

        name = f"train-{self.dir.name}"
        spec = policy_league(policy_cfg, name).merged(llm_league(llm_cfg, name))
        return SharedLeague(spec, self.dir, config_owner="mixed/config")

    @property
    def iteration(self) -> int:
        return min(self.policy.iteration, self.llm.iteration)

    def _parts(self):
        return (("policy", self.policy), ("llm", self.llm))

    def needs_start(self) -> bool:
        return any(t.iteration == 0 for _, t in self._parts())

    def start(self, last: int) -> None:
        # Both starts (imitation, the first checkpoint, its snapshot) before any match between the two:
        # each learner's league spec must point at weights that exist when the other one draws it.
        for _, trainer in self._parts():
            if trainer.iteration == 0:
                trainer.run(iterations=0, phase=self._phase)

    def iterate(self, it: int, last: int) -> dict[str, float]:
        for name, trainer in self._parts():
            if trainer.iteration < it:
                line = trainer.run(iterations=it, phase=self._phase)
                self._out.update({f"{name}/{k}": v for k, v in line.items()})
        return self._out

    def save_finished(self, it: int) -> None:
        for _, trainer in self._parts():
            trainer.save_finished(it)

    def finish(self, last: int, stopped: bool) -> None:
        pass  # each learner drew its own curves

    def close(self) -> None:
        """Close both learners, then the league they share. A second call does nothing."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        with contextlib.ExitStack() as closing:  # each one runs, in reverse order, whatever the others raise
            closing.callback(super().close)
            closing.callback(self.league.close)
            closing.callback(self.llm.close)
            closing.callback(self.policy.close)
