"""Learning players that live inside the league process.

`TabularLearner` is a small every-visit Monte Carlo control learner over
(game, observation text) keys. It is real learning, not a stand-in: its
weights change with every update and it exploits weak opponents, which is
what the league's role machinery (snapshots, exploiter resets, SCC
branching) is tested on. Neural and LLM learners plug into the same
interface from `arena.trainers`.

A league learner is a `arena.league.protocols.LearningPlayer` (``weights``,
``load``, ``reset_to``, ``freeze``, ``pending``) that the league also feeds:
    learn(replay, seat)            consume one finished match it played
    update(version_path) -> str    write the current weights as a new version; returns its spec
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from arena.agents.tabular import load_table, save_table, state_key
from arena.replays.format import Replay


class TabularLearner:
    kind = "tabular"

    def __init__(self, name: str, workdir: str | Path, epsilon: float = 0.1, **_: Any):
        self.name = name
        self.workdir = Path(workdir)
        self.epsilon = float(epsilon)
        self.q: dict[str, dict[str, list[float]]] = {}
        self.pending = 0
        self.path: Path | None = None

    def weights(self) -> str:
        if self.path is None:
            raise RuntimeError(f"learner {self.name} has no weights yet: call update() first")
        return f"tabular:{self.path},epsilon={self.epsilon}"

    def load(self, path: str | Path) -> None:
        self.q = load_table(path)
        self.path = Path(path)

    def learn(self, replay: Replay, seat: int) -> None:
        g = float(replay.result["returns"][seat])
        game = replay.game_id
        for s in replay.steps:
            if s["player"] != seat or s["event"] != "ok" or s.get("obs") is None:
                continue
            row = self.q.setdefault(state_key(game, s["obs"]), {})
            cell = row.setdefault(json.dumps(s["action"]), [0.0, 0])
            cell[1] += 1
            cell[0] += (g - cell[0]) / cell[1]
        self.pending += 1

    def update(self, version_path: str | Path) -> str:
        self.path = save_table(self.q, version_path)
        self.pending = 0
        return self.weights()

    def reset_to(self, path: str | Path | None) -> None:
        self.q = load_table(path) if path is not None else {}

    def freeze(self, path: str | Path) -> str:
        """Copy the current weights file for a frozen historical snapshot; returns its (greedier) spec."""
        if self.path is None:
            raise RuntimeError(f"learner {self.name} has no weights to snapshot")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.path, path)
        return f"tabular:{path},epsilon={self.epsilon}"


def make_learner(kind: str, name: str, workdir: str | Path, options: dict[str, Any]):
    if kind == "tabular":
        return TabularLearner(name, workdir, **options)
    if ":" in kind:
        mod, _, cls = kind.partition(":")
        from arena.usercode import import_user_module

        return getattr(import_user_module(mod), cls)(name=name, workdir=workdir, **options)
    from arena.errors import ConfigError

    raise ConfigError(f"unknown learner kind {kind!r}: use 'tabular' or module:Class")
