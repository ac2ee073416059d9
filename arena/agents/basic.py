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
        self._py = random.Random(seed)
        # randrange(n) is _randbelow(n) for n > 0 (CPython's random.py since 3.2): the same draws
        # without randrange's argument checks, one call less per move.
        self._below = self._py._randbelow
        self._seed = seed
        self._np = None  # built on first use: most games never need it

    def reset(self, seed: int | None = None) -> None:
        # Re-seeding is the Mersenne Twister's own cost (about 4 us, most of a tic-tac-toe match's
        # agent time); reusing the generator object saves only its allocation.
        self._seed = seed
        self._py.seed(seed)
        self._np = None

    def _np_rng(self) -> np.random.Generator:
        if self._np is None:
            self._np = np.random.default_rng(self._seed)
        return self._np

    def act(self, observation: Observation) -> Any:
        legal = observation.legal_actions
        if legal:
            return legal[self._below(len(legal))]
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


class ConstantAgent(BaseAgent):
    """The same continuous action every move: ``constant:value=0.05`` in every component, clipped to
    the action box (from Python, `value` may also be one number per component). A baseline for
    control tasks: ``constant:value=0`` holds every muscle of the prosthetics task at rest."""

    def __init__(self, space: Any, value: Any = 0.0):
        low, high = np.broadcast_to(space.low, space.shape), np.broadcast_to(space.high, space.shape)
        try:
            v = np.broadcast_to(np.asarray(value, dtype=np.float64), space.shape)
        except ValueError:
            raise ValueError(f"value {value!r} does not fit actions of shape {space.shape}") from None
        self.action = np.clip(v, low, high).astype(space.dtype)
        self.spec = f"constant:value={value!r}"

    def act(self, observation: Observation) -> Any:
        return self.action.copy()
