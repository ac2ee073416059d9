"""The league's two seams, as typed protocols, and the pairing that passes through the first.

* :class:`LeagueClient` is how anything that schedules or plays matches talks to a league:
  the league's own run loop, a trainer feeding its learner from the league, and a person
  playing a league player at the terminal (or, later, in the browser). `League` implements it.
* :class:`LearningPlayer` is a player whose weights change while the league runs. The
  league's built-in tabular learner implements it, and so does the language-model learner's
  coordinator (``arena.trainers.llm.spiral``); a neural-policy learner implements the same.

Both are structural (``typing.Protocol``): implement the methods, no base class needed.

A :class:`Pairing` is what ``LeagueClient.next_pairing`` returns and ``begin`` takes: a game and
who plays it, by seat.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, runtime_checkable

if TYPE_CHECKING:
    from arena.league.storage import MatchRow
    from arena.match.loop import MatchResult


@dataclass
class Pairing:
    game: str
    players: list[str]  # by seat
    specs: list[str]
    why: str = ""
    #: The match's seed when the pairing fixes it (an episode of a one-player game: `arena.league.manager.common_seed`).
    seed: int | None = None


@runtime_checkable
class LeagueClient(Protocol):
    def next_pairing(self, learner: str | None = None) -> "Pairing":
        """The next match: for `learner` by its role's opponent rule, else by the configured pairing."""

    def begin(self, pairing: "Pairing", *, status: str = "queued", source: str = "league",
              seed: int | None = None, note: str | None = None) -> "MatchRow":
        """Give the match its id and seed (one transaction) before it is played."""

    def commit(self, match_id: str, result: "MatchResult") -> bool:
        """Record a finished match exactly once (results, ratings, payoff); False if already recorded."""

    def add_snapshot(self, parent: str, spec: str, name: str | None = None) -> str:
        """Freeze `spec` (weights of learning player `parent`) as a historical player; returns its name."""

    def win_rates(self, game: str) -> "Callable[[str, str], float]":
        """``win_rate(a, b)`` on `game`, for a learner's own role rules (snapshots, resets)."""


@runtime_checkable
class LearningPlayer(Protocol):
    #: Matches learned since the last saved version.
    pending: int

    def weights(self) -> str:
        """The agent spec that plays the current weights."""

    def load(self, path: str | Path) -> None:
        """Continue from saved weights (after a restart)."""

    def reset_to(self, path: str | Path | None) -> None:
        """Restart learning from another player's weights (SCC branching), or from scratch (None)."""

    def freeze(self, path: str | Path) -> str:
        """Copy the current weights to `path` for a frozen snapshot; returns the snapshot's spec."""
