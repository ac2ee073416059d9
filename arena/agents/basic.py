"""Random and fixed-rule agents."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from arena.agents.base import BaseAgent
from arena.envs.observation import Observation


class RandomAgent(BaseAgent):
    """Uniform over legal moves (or the game's own sampler for free-text and continuous moves).

    Draws from its own seeded generators, never the global `random` state.
    """

    spec = "random"

    def __init__(self, seed: int | None = None):
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        self._seed = seed
        self._py = random.Random(seed)
        self._np = None  # built on first use: most games never need it

    def _np_rng(self) -> np.random.Generator:
        if self._np is None:
            self._np = np.random.default_rng(self._seed)
        return self._np

    def act(self, observation: Observation) -> Any:
        legal = observation.legal_actions
        if legal:
            return legal[self._py.randrange(len(legal))]
        action = observation.sample_action(self._np_rng())
        if action is None:
            raise ValueError(
                f"the random agent cannot play {observation.game_id}: the game lists no legal moves and has no sampler"
            )
        return action


class FirstLegalAgent(BaseAgent):
    """Always the first legal move: a deterministic baseline for tests and sanity checks."""

    spec = "first"

    def act(self, observation: Observation) -> Any:
        legal = observation.legal_actions
        if not legal:
            raise ValueError(f"{observation.game_id} lists no legal moves")
        return legal[0]
