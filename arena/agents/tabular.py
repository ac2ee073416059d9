"""A tabular policy over (game, observation text) keys: the weights of the league's tabular learner.

Spec: ``tabular:<weights.json>`` with options ``epsilon=0.05`` (exploration) and
``greedy=true``. Weights are plain JSON: ``{"format": "arena-tabular", "q":
{key: {action: [value, visits]}}}``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from arena.agents.base import BaseAgent
from arena.envs.observation import Observation

FORMAT = "arena-tabular"


def load_table(path: str | Path) -> dict[str, dict[str, list[float]]]:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no tabular weights at {p}")
    data = json.loads(p.read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{p} is not a tabular weights file (format {data.get('format')!r})")
    return data["q"]


def save_table(q: dict, path: str | Path) -> Path:
    from arena.fsio import atomic_write_bytes

    data = json.dumps({"format": FORMAT, "q": q}, separators=(",", ":"), sort_keys=True).encode()
    return atomic_write_bytes(path, data)


def state_key(game_id: str, text: str) -> str:
    return f"{game_id}|{text}"


class TabularAgent(BaseAgent):
    def __init__(self, path: str, epsilon: float = 0.05, greedy: bool = False, seed: int | None = None):
        self.path = str(path)
        self.q = load_table(path)
        self.epsilon = 0.0 if greedy else float(epsilon)
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)

    def act(self, observation: Observation) -> Any:
        legal = observation.legal_actions
        if not legal:
            raise ValueError(f"the tabular agent needs enumerable legal moves; {observation.game_id} has none")
        rng = self._rng
        if rng.random() < self.epsilon:
            return legal[rng.randrange(len(legal))]
        row = self.q.get(state_key(observation.game_id, observation.text), {})
        best, best_v = [], None
        for a in legal:
            v = row.get(json.dumps(a), (0.0, 0))[0]
            if best_v is None or v > best_v:
                best, best_v = [a], v
            elif v == best_v:
                best.append(a)
        return best[rng.randrange(len(best))]


def _factory(core, seed, positional, **opts):
    if not positional:
        from arena.errors import AgentSpecError

        raise AgentSpecError("tabular agents need a weights file: tabular:<path>")
    return TabularAgent(positional, seed=seed, **opts)
