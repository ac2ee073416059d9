"""The league's two seams, as typed protocols, and the pairing that passes through the first.

* :class:`LeagueClient` is the league's own surface for what schedules and plays matches: its run
  loop and a person playing a league player at the terminal or in the browser. `League` implements
  it. A trainer does not use it: it gets the narrower `arena.league.session.LeagueSession`.
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
    from contextlib import AbstractContextManager

    import numpy as np

    from arena.league.roles import Member
    from arena.league.storage import MatchRow, PlayerRow, ResultRow
    from arena.match.loop import MatchResult
    from arena.replays.format import Replay


@dataclass
class Pairing:
    game: str
    players: list[str]  # by seat
    specs: list[str]
    why: str = ""
    #: The match's seed when the pairing fixes it (an episode of a one-player game: `arena.league.manager.common_seed`).
    seed: int | None = None
    #: Seat balance (`arena.league.manager`): True for the first match of a pair (`begin` records, with it, the
    #: second it owes: the same players with the seats swapped); the pair's id (the first match's id) for the
    #: second; None for an unpaired match.
    pair: bool | str | None = None
    #: With ``pair`` True: the second match reuses this one's seed (a duplicate match) ...
    duplicate: bool = False
    #: ... and is played at its own turn of the pairing (round_robin: the pair's turn in the next round)
    #: rather than as the next fixed-player match.
    in_turn: bool = False


@runtime_checkable
class LeagueClient(Protocol):
    def next_pairing(self, learner: str | None = None, rng: "np.random.Generator | None" = None) -> "Pairing":
        """The next match: for `learner` by its role's opponent rule, else by the configured pairing.
        `rng`: the caller's own generator for a learner's draws (a trainer checkpoints it)."""

    def begin(self, pairing: "Pairing", *, status: str = "queued", source: str = "league",
              seed: int | None = None, note: str | None = None) -> "MatchRow":
        """Give the match its id and seed (one transaction) before it is played."""

    def commit(self, match_id: str, result: "MatchResult") -> bool:
        """Record a finished match exactly once (results, ratings, payoff); False if already recorded."""

    def add_snapshot(self, parent: str, spec: str, name: str | None = None) -> str:
        """Freeze `spec` (weights of learning player `parent`) as a historical player; returns its name."""

    def commit_many(self, items: "list[tuple[str, MatchResult]]") -> list[bool]:
        """Several finished matches in one transaction (each at most once)."""

    def attach_replay(self, match_id: str, result: "MatchResult") -> "MatchResult":
        """Ready a replay played outside the league to be kept under `match_id` by the next commit."""

    def win_rates(self, game: str) -> "Callable[[str, str], float]":
        """``win_rate(a, b)`` on `game`, for a learner's own role rules (snapshots, resets)."""

    def members(self) -> "list[Member]":
        """The active players as the role rules see them."""

    # -- players, matches and marks (a trainer's session reaches these through the league) -----------
    def player(self, name: str) -> "PlayerRow | None":
        """Player `name`'s row (None: no such player)."""

    def players(self, active_only: bool = False) -> "list[PlayerRow]":
        """Every player's row."""

    def add_player(self, name: str, kind: str, spec: str, games: list[str], *, role: str | None = None,
                   state: dict | None = None, owner: str | None = None) -> None:
        """A player the caller adds (a trainer's learner or teacher), owned by `owner`."""

    def update_player(self, name: str, **fields) -> None:
        """Change a player's row (its spec, version, owner, state, active)."""

    def transaction(self) -> "AbstractContextManager":
        """One write transaction around several calls."""

    def matches(self, source: str | None = None) -> "list[MatchRow]":
        """The matches begun (of `source`: "league" or "external")."""

    def result_for(self, match_id: str) -> "ResultRow | None":
        """The result of a match (None: not committed)."""

    def results(self, game: str | None = None) -> "list[ResultRow]":
        """The committed results (of `game`), in commit order."""

    def read_replay(self, match_id: str) -> "Replay":
        """A committed match's replay."""

    def meta(self, key: str, default=None):
        """A value the caller keeps in the league (what it has applied)."""

    def set_meta(self, key: str, value) -> None:
        """Keep a value in the league (inside the caller's transaction)."""

    def add_event(self, kind: str, player: str | None = None, **data) -> None:
        """Record an event (a reset) in the league's log."""



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
