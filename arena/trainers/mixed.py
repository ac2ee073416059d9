"""One league, two learner families: a language-model learner (SPIRAL) and a neural-policy learner
(SCC) learning in the same league on the same game, rated in one table.

``trainer: mixed`` (``configs/train/mixed_tictactoe.yaml``) holds a ``llm:`` section (a SPIRAL
config) and a ``policy:`` section (an SCC config) for one ``game``. The run folder is the
league's (``arena ratings <dir>`` shows everyone); each learner keeps its checkpoints in its own
sub-folder (``<dir>/llm``, ``<dir>/policy``). The two coordinators take turns, one iteration
each: each schedules its learner's matches by its own rules through the shared league, so the
language model meets the neural players (their snapshots are frozen `policy:` players) and the
neural learners meet the language model's snapshots (`llm:` players), and every match is rated
in the same Elo/OpenSkill tables next to the fixed agents and anyone who plays the league.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from arena.config import from_dict
from arena.errors import ConfigError


@dataclass
class MixedConfig:
    game: str = "openspiel/tic_tac_toe-v0"
    iterations: int = 10
    seed: int = 0
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


class MixedTrainer:
    def __init__(self, cfg: MixedConfig, directory: str | Path):
        from arena.trainers.llm.spiral import SpiralTrainer
        from arena.trainers.policy.scc import SCCTrainer

        self.cfg = cfg
        self.dir = Path(directory)
        llm_cfg, policy_cfg = cfg.parts()
        self.policy = SCCTrainer(policy_cfg, self.dir / "policy", league_dir=self.dir)
        self.llm = SpiralTrainer(llm_cfg, self.dir / "llm", league_dir=self.dir)
        self.stop_requested = False
        self.in_loop = False

    @property
    def iteration(self) -> int:
        return min(self.policy.iteration, self.llm.iteration)

    def run(self, progress: Callable | None = None, phase: Callable | None = None) -> dict[str, float]:
        out: dict[str, float] = {}
        kw = {"phase": phase} if phase is not None else {}
        # Both starts (imitation, the first checkpoint, its snapshot) before any match between the two:
        # each learner's league spec must point at weights that exist when the other one draws it.
        for trainer in (self.policy, self.llm):
            if trainer.iteration == 0:
                trainer.run(iterations=0, **kw)
        self.in_loop = True
        try:
            for it in range(self.iteration + 1, self.cfg.iterations + 1):
                for name, trainer in (("policy", self.policy), ("llm", self.llm)):
                    if trainer.iteration < it:
                        line = trainer.run(iterations=it, **kw)
                        out.update({f"{name}/{k}": v for k, v in line.items()})
                if progress is not None:
                    progress(it, self.cfg.iterations, out)
                if self.stop_requested:
                    break
        finally:
            self.in_loop = False
        return out

    def close(self) -> None:
        self.policy.close()
        self.llm.close()
