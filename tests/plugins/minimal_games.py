"""A plug-in game written against `GameCore` with only what a core must have: the game's attributes
(`players`, `engine`, `settings`) and its required methods. Everything else is `GameCore`'s default.

`test/Take-v0`: a pile of 5 to 9 stones (drawn from the seed); the players take 1 or 2 stones in
turn (action 0: one, 1: two) and whoever takes the last stone wins (+1, the other -1).
"""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces

from arena.envs.aec import GameAECEnv
from arena.envs.core import TERMINAL, GameCore
from arena.envs.spaces import FreeText


class TakeCore(GameCore):
    game_id = "test/Take-v0"

    def __init__(self):
        self.players = ["first", "second"]
        self.engine = {"take": "1"}
        self.settings = {}
        self.reset(0)

    def reset(self, seed: int | None = None) -> None:
        self.pile = int(np.random.default_rng(seed).integers(5, 10))
        self.turn = 0
        self.winner: int | None = None

    def current_player(self) -> int:
        return TERMINAL if self.winner is not None else self.turn % 2

    def legal_actions(self, p: int) -> list[int]:
        return [] if self.winner is not None else [0, 1][:min(2, self.pile)]

    def apply(self, p: int, action: int) -> str | None:
        self.pile -= action + 1
        if self.pile == 0:
            self.winner = p
        self.turn += 1
        return None

    def returns(self) -> list[float]:
        if self.winner is None:
            return [0.0, 0.0]
        return [1.0 if p == self.winner else -1.0 for p in range(2)]

    def text(self, p: int) -> str:
        return f"{self.pile} stones left; you are {self.players[p]}; take 1 (0) or 2 (1)"

    def observation_space(self, p: int):
        return FreeText()

    def action_space(self, p: int):
        return spaces.Discrete(2)


def take_env(render_mode: str | None = None, invalid_move_limit: int | None = 1):
    return GameAECEnv(TakeCore(), render_mode, invalid_move_limit)


gymnasium.register(id="test/Take-v0", entry_point="plugins.minimal_games:take_env")
