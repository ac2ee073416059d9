"""`Observation`: what an agent is given when it is asked to move.

A thin, lazy view over the game core: nothing is computed unless the agent
reads it (the text on first read, then kept), so a random agent costs a legal-move
lookup and nothing more. `__slots__` and no per-move work beyond six attribute stores:
the match loop builds one a move (`ShownLegal`, with the legal list it checks against).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arena.envs.core import GameCore


class Observation:
    __slots__ = ("core", "player", "step", "feedback", "_legal", "_text")

    def __init__(self, core: GameCore, player: int, step: int, feedback: str | None = None):
        self.core = core
        self.player = player
        self.step = step
        #: Why the previous attempt at this move was refused (None on the first try).
        self.feedback = feedback
        self._legal = _UNSET
        self._text = None

    @property
    def game_id(self) -> str:
        return self.core.game_id

    @property
    def player_name(self) -> str:
        return self.core.players[self.player]

    @property
    def num_players(self) -> int:
        return len(self.core.players)

    @property
    def action_kind(self) -> str:
        return self.core.action_kind

    @property
    def legal_actions(self) -> list | None:
        legal = self._legal
        if legal is _UNSET:
            legal = self._legal = self.core.legal_actions(self.player)
        return legal

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.core.text(self.player)
        return self._text

    @property
    def human_view(self) -> str:
        """`text` as a person reads it (`GameCore.human_view`: cards by name, no repeated rules)."""
        return self.core.human_view(self.player)

    @property
    def rules(self) -> str | None:
        """The rules the game's views repeat (TextArena's prompt), for a person to read once; or None."""
        return self.core.rules(self.player)

    @property
    def raw(self) -> Any:
        """The structured observation (tensor and action mask where the game has them)."""
        return self.core.observation(self.player)

    @property
    def action_mask(self) -> np.ndarray | None:
        return self.core.action_mask(self.player)

    @property
    def action_space(self):
        return self.core.action_space(self.player)

    @property
    def privileged(self) -> str | None:
        return self.core.privileged(self.player)

    def action_to_text(self, action: Any) -> str:
        return self.core.action_to_text(self.player, action)

    def parse_action(self, text: str) -> Any:
        """Read a move written as text; raises ValueError when it names no legal move."""
        return self.core.text_to_action(self.player, text)

    def sample_action(self, rng: np.random.Generator) -> Any:
        return self.core.sample_action(self.player, rng)

    def engine_state(self) -> Any:
        return self.core.engine_state()

    def information_state(self) -> str:
        """`GameCore.information_state`: raises NotImplementedError where the game has none."""
        return self.core.information_state(self.player)


class ShownLegal(Observation):
    """An `Observation` built with its player's legal list (None where the game has none), which the
    match loop asks of the game once a move and checks the agent's move against: the list is a plain
    attribute here, not a property (the read every random agent makes costs no call)."""

    __slots__ = ("legal_actions",)

    def __init__(self, core: GameCore, player: int, step: int, legal: list | None):
        self.core = core
        self.player = player
        self.step = step
        self.feedback = None
        self._legal = self.legal_actions = legal
        self._text = None


class _Unset:
    __slots__ = ()


_UNSET = _Unset()
