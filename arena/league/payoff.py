"""Decayed head-to-head payoff table for a league.

Players in a league keep learning, so old results describe opponents that no
longer exist.  Following the AlphaStar pseudocode, each pair of players keeps
exponentially decayed counts of wins, draws, losses and games: every new game
between a pair first multiplies that pair's counts by ``decay`` and then adds
the new result.  The win rate is therefore a recency-weighted average with an
effective memory of about ``1 / (1 - decay)`` games.

Counts are stored per ordered pair ``(home, away)`` from ``home``'s point of
view and kept mirrored: a win recorded for ``(a, b)`` is a loss for
``(b, a)``, so ``win_rate(a, b) + win_rate(b, a) == 1`` once they have met.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

__all__ = ["OUTCOMES", "Counts", "Payoff", "decayed_update", "mirror_outcome"]

#: Outcomes from the home player's point of view.
OUTCOMES: tuple[str, str, str] = ("win", "draw", "loss")

#: (wins, draws, losses, games) -- floats because decay makes them fractional.
Counts = tuple[float, float, float, float]

_ZERO: Counts = (0.0, 0.0, 0.0, 0.0)
_MIRROR = {"win": "loss", "draw": "draw", "loss": "win"}


def _check_outcome(outcome: str) -> None:
    if outcome not in _MIRROR:
        raise ValueError(f"unknown outcome {outcome!r}; expected one of {OUTCOMES}")


def _check_decay(decay: float) -> float:
    decay = float(decay)
    # decay == 0 would forget everything but the last game; > 1 would make old
    # games count more than new ones; both are almost certainly mistakes.
    if not 0.0 < decay <= 1.0:
        raise ValueError(f"decay must be in (0, 1], got {decay}")
    return decay


def mirror_outcome(outcome: str) -> str:
    """The same game's outcome as seen by the other player."""
    _check_outcome(outcome)
    return _MIRROR[outcome]


def decayed_update(counts: Sequence[float], outcome: str, decay: float) -> Counts:
    """Fold one game into a pair's decayed counts.

    Old evidence is discounted *before* the new game is added, so the newest
    game always has weight 1 and a game ``t`` games ago has weight
    ``decay**t``.  Kept as a pure function so the arithmetic can be checked
    by hand independently of the table.

    Example (decay 0.5): ``(1, 0, 0, 1)`` then a loss -> ``(0.5, 0, 1, 1.5)``.
    """
    _check_outcome(outcome)
    decay = _check_decay(decay)
    if len(counts) != 4:
        raise ValueError(f"counts must be (wins, draws, losses, games), got {counts!r}")
    w, d, l, n = (float(c) * decay for c in counts)
    if outcome == "win":
        w += 1.0
    elif outcome == "draw":
        d += 1.0
    else:
        l += 1.0
    return (w, d, l, n + 1.0)


def _win_rate(counts: Counts) -> float:
    w, d, _, n = counts
    if n <= 0.0:
        # Knowing nothing about a pair, a coin flip is the honest prior; it
        # also gives PFSP a mid-range weight for unseen opponents.
        return 0.5
    return (w + 0.5 * d) / n


class Payoff:
    """Recency-weighted results between every pair of league players.

    ``update(home, away, outcome)`` decays both directions of the pair and
    records the game mirrored.  Only the pair that played is decayed: a pair
    that stops meeting keeps its last estimate, as in AlphaStar.

    A player meeting itself (``home == away``, e.g. self-play against the
    current snapshot) has a single cell; the game is decayed into it once and
    recorded from both seats (``games`` grows by 2), so its win rate stays
    exactly 0.5 -- the only consistent value for a symmetric game.
    """

    def __init__(self, decay: float = 0.99) -> None:
        self.decay = _check_decay(decay)
        self._counts: dict[tuple[str, str], Counts] = {}

    # -- updates ------------------------------------------------------------

    def update(self, home: str, away: str, outcome: str) -> None:
        """Record one game; ``outcome`` is from ``home``'s point of view."""
        _check_outcome(outcome)
        counts = self._counts
        if home == away:
            w, d, l, n = decayed_update(counts.get((home, away), _ZERO), outcome, self.decay)
            # The mirrored seat adds the opposite outcome without decaying again.
            if outcome == "win":
                l += 1.0
            elif outcome == "loss":
                w += 1.0
            else:
                d += 1.0
            counts[(home, away)] = (w, d, l, n + 1.0)
            return
        counts[(home, away)] = decayed_update(
            counts.get((home, away), _ZERO), outcome, self.decay
        )
        counts[(away, home)] = decayed_update(
            counts.get((away, home), _ZERO), _MIRROR[outcome], self.decay
        )

    # -- queries ------------------------------------------------------------

    def counts(self, home: str, away: str) -> Counts:
        """Decayed ``(wins, draws, losses, games)`` of ``home`` against ``away``."""
        return self._counts.get((home, away), _ZERO)

    def games(self, home: str, away: str) -> float:
        """Decayed number of games, useful to tell estimates from priors."""
        return self.counts(home, away)[3]

    def win_rate(self, home: str, away: str) -> float:
        """``(wins + draws / 2) / games`` for ``home``; 0.5 if they never met."""
        return _win_rate(self.counts(home, away))

    def win_rates(self, home: str, aways: Iterable[str]) -> np.ndarray:
        """Win rates of ``home`` against each of ``aways``, in order (feeds PFSP)."""
        return np.array([self.win_rate(home, a) for a in aways], dtype=np.float64)

    def matrix(self, ids: Sequence[str]) -> np.ndarray:
        """Square matrix ``M[i, j] = win_rate(ids[i], ids[j])`` (feeds alpha-rank)."""
        ids = list(ids)
        return np.array(
            [[self.win_rate(h, a) for a in ids] for h in ids], dtype=np.float64
        ).reshape(len(ids), len(ids))

    def players(self) -> list[str]:
        """Every player id that appears in at least one recorded game, sorted."""
        return sorted({h for h, _ in self._counts} | {a for _, a in self._counts})

    # -- persistence --------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready snapshot.

        Pairs are a list rather than a mapping because JSON keys must be
        strings and ids may contain any character.  Python floats survive a
        JSON round trip exactly, so ``from_dict(to_dict())`` is lossless.
        """
        return {
            "decay": self.decay,
            "pairs": [
                [home, away, w, d, l, n]
                for (home, away), (w, d, l, n) in sorted(self._counts.items())
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Payoff":
        """Rebuild a table written by :meth:`to_dict`."""
        table = cls(decay=data["decay"])
        for row in data["pairs"]:
            home, away, w, d, l, n = row
            table._counts[(str(home), str(away))] = (float(w), float(d), float(l), float(n))
        return table

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Payoff):
            return NotImplemented
        return self.decay == other.decay and self._counts == other._counts

    def __repr__(self) -> str:
        return f"Payoff(decay={self.decay}, pairs={len(self._counts)})"
