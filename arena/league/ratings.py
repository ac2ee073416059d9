"""Rating systems used by the league.

Three complementary views of strength:

* **Elo** -- cheap, transparent, and what people expect to see in a table.
* **OpenSkill** (Weng-Lin Bayesian ratings, a TrueSkill-like model;
  :class:`OpenSkillTable`) -- keeps an
  uncertainty per player, handles draws and more than two players or teams,
  and gives a conservative ``mu - 3 sigma`` score for promotion decisions.
* **alpha-rank** -- ranks a *population* from its head-to-head payoff matrix
  without assuming strength is transitive (rock-paper-scissors leagues).

Elo and OpenSkill tables are updated incrementally, one result at a time, and
are deterministic: replaying the same results in the same order gives
bit-identical numbers.  :func:`recompute` does exactly that replay, so a
league can verify that its live tables have not drifted from its result log.

:class:`LeagueRatings` is a league's use of them: its settings (the Elo
K-factor, the payoff decay), its live tables per rating scope and the numbers a
committed result changes, handed back as rows.  Where those rows are kept is
the store's business (`arena.league.storage`), so the arithmetic can be run and
tested without a database, and a recompute takes the same path as a live commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence, Union

import numpy as np
from openskill.models import (
    BradleyTerryFull,
    BradleyTerryPart,
    PlackettLuce,
    ThurstoneMostellerFull,
    ThurstoneMostellerPart,
)

from arena.league.payoff import decayed_update

__all__ = [
    "ELO_SCALE",
    "OPENSKILL_MODELS",
    "EloTable",
    "LeagueRatings",
    "RatedResult",
    "RatingRows",
    "OpenSkillTable",
    "alpharank",
    "nash_average",
    "elo_expected",
    "elo_update",
    "rate_result",
    "recompute",
    "scores_from_returns",
    "scores_to_ranks",
]

#: Rating difference at which the stronger side is expected to score 10:1.
ELO_SCALE = 400.0

#: Names accepted by :class:`OpenSkillTable` (stable strings for persistence).
OPENSKILL_MODELS: dict[str, type] = {
    "plackett_luce": PlackettLuce,
    "thurstone_mosteller_full": ThurstoneMostellerFull,
    "thurstone_mosteller_part": ThurstoneMostellerPart,
    "bradley_terry_full": BradleyTerryFull,
    "bradley_terry_part": BradleyTerryPart,
}

# --------------------------------------------------------------------------
# Elo
# --------------------------------------------------------------------------


def elo_expected(ra: float, rb: float) -> float:
    """Expected score of A against B under the logistic (base 10, scale 400) Elo model."""
    return 1.0 / (1.0 + 10.0 ** ((rb - ra) / ELO_SCALE))


def _check_score(score: float) -> float:
    score = float(score)
    # Fractional scores are legitimate Elo input (e.g. averaged mini-matches);
    # anything outside [0, 1] would break the zero-sum bookkeeping.
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"score must be in [0, 1] (1 win, 0.5 draw, 0 loss), got {score}")
    return score


def elo_update(ra: float, rb: float, score_a: float, k: float = 32.0) -> tuple[float, float]:
    """New ratings after one game; ``score_a`` is 1 (A won), 0.5 (draw) or 0 (A lost).

    B's change is exactly the negative of A's, so rating points are conserved;
    computing it as ``rb - delta`` (rather than from B's own expectation)
    keeps that true to the last bit.
    """
    score_a = _check_score(score_a)
    delta = k * (score_a - elo_expected(ra, rb))
    return ra + delta, rb - delta


def _pair_score(sa: float, sb: float) -> float:
    if sa > sb:
        return 1.0
    if sa < sb:
        return 0.0
    return 0.5


class EloTable:
    """Elo ratings for a set of players, created lazily at ``initial``."""

    def __init__(self, k: float = 32.0, initial: float = 1500.0) -> None:
        self.k = float(k)
        self.initial = float(initial)
        self._ratings: dict[str, float] = {}

    def rating(self, player: str) -> float:
        """Current rating; unseen players sit at ``initial``."""
        return self._ratings.get(player, self.initial)

    def ratings(self) -> dict[str, float]:
        """Copy of every rated player's rating."""
        return dict(self._ratings)

    def __contains__(self, player: object) -> bool:
        return player in self._ratings

    def __len__(self) -> int:
        return len(self._ratings)

    def update(self, a: str, b: str, score_a: float) -> tuple[float, float]:
        """Apply one two-player result and return the new ``(rating_a, rating_b)``."""
        if a == b:
            raise ValueError(f"a player cannot be rated against itself: {a!r}")
        ratings = self._ratings
        initial = self.initial
        ra, rb = elo_update(ratings.get(a, initial), ratings.get(b, initial), score_a, self.k)
        ratings[a] = ra
        ratings[b] = rb
        return ra, rb

    def update_multi(self, ids: Sequence[str], scores: Sequence[float]) -> list[float]:
        """Apply one N-player result (free-for-all) as all pairwise games.

        ``scores`` are ordinal, higher is better (points, or negative finish
        position); each pair counts as a win, draw or loss by comparing them.

        Choices, and why:

        * Every pair is one Elo game with ``k / (n - 1)``.  Each player plays
          ``n - 1`` virtual games, so this bounds a player's total change by
          ``k`` -- the same as a two-player game -- instead of letting large
          free-for-alls swing ratings ``n - 1`` times harder.
        * All pairwise deltas are computed from the *pre-game* ratings and
          then summed, so the result does not depend on the order of ``ids``.
        * With ``n == 2`` this is bit-identical to :meth:`update`.

        Returns the new ratings in the order of ``ids``.
        """
        n = len(ids)
        if n != len(scores):
            raise ValueError(f"got {n} ids but {len(scores)} scores")
        if n < 2:
            raise ValueError("a result needs at least two players")
        if len(set(ids)) != n:
            raise ValueError(f"duplicate player ids in one result: {list(ids)}")
        ratings = self._ratings
        before = [ratings.get(p, self.initial) for p in ids]
        s = [float(x) for x in scores]
        k = self.k / (n - 1)
        deltas = [0.0] * n
        for i in range(n):
            for j in range(i + 1, n):
                d = k * (_pair_score(s[i], s[j]) - elo_expected(before[i], before[j]))
                deltas[i] += d
                deltas[j] -= d
        after = [r + d for r, d in zip(before, deltas)]
        for p, r in zip(ids, after):
            ratings[p] = r
        return after

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready snapshot (floats round-trip through JSON exactly)."""
        return {"k": self.k, "initial": self.initial, "ratings": dict(self._ratings)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "EloTable":
        """Rebuild a table written by :meth:`to_dict`."""
        table = cls(k=data["k"], initial=data["initial"])
        table._ratings = {str(p): float(r) for p, r in data["ratings"].items()}
        return table

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EloTable):
            return NotImplemented
        return (self.k, self.initial, self._ratings) == (other.k, other.initial, other._ratings)

    def __repr__(self) -> str:
        return f"EloTable(k={self.k}, initial={self.initial}, players={len(self)})"


# --------------------------------------------------------------------------
# OpenSkill ("TrueSkill")
# --------------------------------------------------------------------------

#: One side of a game: a single player id, or the ids of a team.
Side = Union[str, Sequence[str]]


def scores_to_ranks(scores: Sequence[float]) -> list[float]:
    """Convert higher-is-better scores to 0-based competition ranks (ties share the best).

    OpenSkill wants lower-is-better ranks; a canonical form means a live
    league and :func:`recompute` hand the model exactly the same numbers.
    """
    ordered = sorted(scores, reverse=True)
    first: dict[float, int] = {}
    for i, s in enumerate(ordered):
        first.setdefault(s, i)
    return [float(first[s]) for s in scores]


class OpenSkillTable:
    """Bayesian (mu, sigma) ratings backed by an ``openskill`` model.

    The table holds openskill's own rating objects and hands them straight to
    ``model.rate``; the wrapper only adds an id -> rating dict, so an update
    costs little more than calling openskill directly (see
    ``benchmarks/bench_ratings.py``).

    Updates are sequential: results applied in a different order give
    different numbers, but the same order always gives the same numbers.
    """

    def __init__(
        self,
        model: str = "plackett_luce",
        mu: float = 25.0,
        sigma: float = 25.0 / 3.0,
        beta: float = 25.0 / 6.0,
        tau: float = 25.0 / 300.0,
    ) -> None:
        if model not in OPENSKILL_MODELS:
            valid = ", ".join(sorted(OPENSKILL_MODELS))
            raise ValueError(f"unknown openskill model {model!r}; valid models: {valid}")
        self.model_name = model
        self.mu = float(mu)
        self.sigma = float(sigma)
        self.beta = float(beta)
        self.tau = float(tau)
        self.model = OPENSKILL_MODELS[model](mu=self.mu, sigma=self.sigma, beta=self.beta, tau=self.tau)
        self._ratings: dict[str, Any] = {}

    def _get(self, player: str) -> Any:
        r = self._ratings.get(player)
        if r is None:
            r = self._ratings[player] = self.model.rating(name=player)
        return r

    def update(self, sides: Sequence[Side], ranks: Sequence[float] | None = None) -> None:
        """Apply one result between two or more players or teams.

        ``sides`` lists players (an id) or teams (a sequence of ids).  Without
        ``ranks`` they are taken to be in finishing order, winner first.  With
        ``ranks``, lower is better and equal ranks are draws (see
        :func:`scores_to_ranks` to convert points).
        """
        if isinstance(sides, str):
            raise TypeError("sides must be a sequence of ids or teams, not a single string")
        n = len(sides)
        if n == 2:
            a, b = sides
            if type(a) is str and type(b) is str:
                # Fast path for the common 1-vs-1 game: no team bookkeeping,
                # so the wrapper stays within a few percent of raw openskill.
                if a == b:
                    raise ValueError(f"a player appears twice in one result: {[a, b]}")
                if ranks is None:
                    rank_list = [0.0, 1.0]
                elif len(ranks) != 2:
                    raise ValueError(f"got 2 sides but {len(ranks)} ranks")
                else:
                    rank_list = [float(ranks[0]), float(ranks[1])]
                ratings = self._ratings
                ra = ratings.get(a)
                if ra is None:
                    ra = self._get(a)
                rb = ratings.get(b)
                if rb is None:
                    rb = self._get(b)
                (ratings[a],), (ratings[b],) = self.model.rate([[ra], [rb]], ranks=rank_list)
                return
        elif n < 2:
            raise ValueError("a result needs at least two sides")
        if ranks is None:
            rank_list = [float(i) for i in range(n)]
        else:
            if len(ranks) != n:
                raise ValueError(f"got {n} sides but {len(ranks)} ranks")
            # openskill type-checks ranks as int/float; numpy ints would fail.
            rank_list = [float(r) for r in ranks]
        teams = [[s] if isinstance(s, str) else list(s) for s in sides]
        flat = [p for team in teams for p in team]
        if len(set(flat)) != len(flat):
            raise ValueError(f"a player appears twice in one result: {flat}")
        if any(len(team) == 0 for team in teams):
            raise ValueError("every team needs at least one player")
        get = self._get
        new = self.model.rate([[get(p) for p in team] for team in teams], ranks=rank_list)
        ratings = self._ratings
        for team, new_team in zip(teams, new):
            for p, r in zip(team, new_team):
                ratings[p] = r

    def rating(self, player: str) -> tuple[float, float]:
        """``(mu, sigma)``; unseen players get the model's prior."""
        r = self._ratings.get(player)
        if r is None:
            return self.mu, self.sigma
        return r.mu, r.sigma

    def conservative(self, player: str) -> float:
        """``mu - 3 sigma``: a skill the player very probably exceeds.

        Ranking by this keeps a lucky newcomer with few games from jumping
        over well-measured players.
        """
        mu, sigma = self.rating(player)
        return mu - 3.0 * sigma

    def ratings(self) -> dict[str, tuple[float, float]]:
        """Copy of every rated player's ``(mu, sigma)``."""
        return {p: (r.mu, r.sigma) for p, r in self._ratings.items()}

    def __contains__(self, player: object) -> bool:
        return player in self._ratings

    def __len__(self) -> int:
        return len(self._ratings)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready snapshot; mu/sigma are plain floats, so the round trip is exact."""
        return {
            "model": self.model_name,
            "mu": self.mu,
            "sigma": self.sigma,
            "beta": self.beta,
            "tau": self.tau,
            "ratings": {p: [r.mu, r.sigma] for p, r in self._ratings.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "OpenSkillTable":
        """Rebuild a table written by :meth:`to_dict`."""
        table = cls(
            model=data["model"], mu=data["mu"], sigma=data["sigma"], beta=data["beta"], tau=data["tau"]
        )
        make = table.model.rating
        for p, (mu, sigma) in data["ratings"].items():
            table._ratings[str(p)] = make(mu=float(mu), sigma=float(sigma), name=str(p))
        return table

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpenSkillTable):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"OpenSkillTable(model={self.model_name!r}, players={len(self)})"


# --------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class RatedResult:
    """One rated result: player ids and their scores (higher is better).

    For two players, ``scores=(1, 0)`` is a win for ``ids[0]`` and
    ``(0.5, 0.5)`` a draw; two scores in [0, 1] summing to 1 reach Elo as a
    (possibly fractional) game score.  Any other scores are ordinal: they
    only decide who finished ahead of whom.
    """

    ids: tuple[str, ...]
    scores: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.scores):
            raise ValueError(f"got {len(self.ids)} ids but {len(self.scores)} scores")


ResultLike = Union[RatedResult, tuple[Sequence[str], Sequence[float]]]


def recompute(
    results: Iterable[ResultLike],
    k: float = 32.0,
    initial: float = 1500.0,
    model: str = "plackett_luce",
    mu: float = 25.0,
    sigma: float = 25.0 / 3.0,
    beta: float = 25.0 / 6.0,
    tau: float = 25.0 / 300.0,
) -> tuple[EloTable, OpenSkillTable]:
    """Rebuild Elo and OpenSkill tables from a result log, in order.

    Both systems are order-dependent, so the log order matters.  Each result
    goes through exactly the code path a live league should use --
    ``EloTable.update`` for two players (``update_multi`` otherwise, which is
    identical for two) and ``OpenSkillTable.update`` with
    :func:`scores_to_ranks` -- so live tables must compare *equal* to the
    recomputed ones, not merely close.
    """
    elo = EloTable(k=k, initial=initial)
    ts = OpenSkillTable(model=model, mu=mu, sigma=sigma, beta=beta, tau=tau)
    for result in results:
        if isinstance(result, RatedResult):
            ids, scores = result.ids, result.scores
        else:
            ids, scores = result
        rate_result(elo, ts, ids, scores)
    return elo, ts


def rate_result(elo: EloTable, ts: OpenSkillTable, ids: Sequence[str], scores: Sequence[float]) -> None:
    """Apply one result to both tables: the one code path for live leagues and `recompute`."""
    ids = list(ids)
    scores = [float(s) for s in scores]
    if len(ids) == 2 and all(0.0 <= s <= 1.0 for s in scores) and scores[0] + scores[1] == 1.0:
        elo.update(ids[0], ids[1], scores[0])
    else:
        elo.update_multi(ids, scores)
    ts.update(ids, ranks=scores_to_ranks(scores))


def scores_from_returns(returns: Sequence[float]) -> list[float]:
    """Two players: 1 / 0.5 / 0 game scores from returns; more: the returns themselves (ordinal)."""
    if len(returns) == 2:
        a, b = float(returns[0]), float(returns[1])
        return [1.0, 0.0] if a > b else [0.0, 1.0] if a < b else [0.5, 0.5]
    return [float(r) for r in returns]


# --------------------------------------------------------------------------
# A league's ratings
# --------------------------------------------------------------------------


@dataclass
class RatingRows:
    """What one result changes, as rows for the league's tables, scope by scope and seat by seat.

    * ``ratings``: ``(system, scope, player, value)``, "elo" with the rating and "openskill" with
      ``[mu, sigma]`` (a list: the stored value is its JSON);
    * ``history``: ``(commit number, scope, player, elo, mu, sigma)``, the ratings after the result;
    * ``payoff``: ``(scope, home, away, wins, draws, losses, games)``, each ordered pair's decayed counts.

    All empty for a result that is not rated.
    """

    ratings: list[tuple[str, str, str, Any]] = field(default_factory=list)
    history: list[tuple[int, str, str, float, float, float]] = field(default_factory=list)
    payoff: list[tuple[str, str, str, float, float, float, float]] = field(default_factory=list)


class LeagueRatings:
    """A league's rating arithmetic: its settings, its live tables per scope, and what a result changes.

    A scope is a game, or the league's overall table: each result is rated in every scope it counts
    in, with the same numbers. The live (Elo, OpenSkill) tables of a scope start from what is stored
    (`load`: the caller reads them, this object never touches a database) or from nothing, and are
    updated in place by each result, which `rate` hands back as the rows to store. The payoff counts
    are not kept here: a league of 1,000 players has about a million pairs, so the caller passes the
    stored counts of the result's own pairs with each result.

    The tables in memory are a cache of what is stored: a caller that finds the store changed by
    someone else, or that throws away rows it was given (a rolled-back transaction), calls `forget`,
    and the next result of each scope starts again from what `load` is given.

    Settings are fixed for the object's life (the tables are built with them): a league that changes
    them makes a new one. They are not checked here, so a league created with bad settings can still
    be opened and refused with a message that says what to do (`arena.league.storage.check_rating_settings`).
    """

    def __init__(self, elo_k: float = 32.0, payoff_decay: float = 0.99) -> None:
        self._elo_k = float(elo_k)
        self._payoff_decay = float(payoff_decay)
        # Built once: an OpenSkill model is slow to make, and every scope's table starts from it.
        self._ts_template = OpenSkillTable().to_dict()
        self._live: dict[str, tuple[EloTable, OpenSkillTable]] = {}

    @property
    def elo_k(self) -> float:
        """The Elo K-factor (a free-for-all of n players splits it over its n - 1 pairs)."""
        return self._elo_k

    @property
    def payoff_decay(self) -> float:
        """What each new game of a pair multiplies the pair's old payoff counts by."""
        return self._payoff_decay

    @property
    def live(self) -> dict[str, tuple[EloTable, OpenSkillTable]]:
        """The live tables by scope: a cache of what is stored (clearing it is `forget`)."""
        return self._live

    @staticmethod
    def rated(players: Sequence[str]) -> bool:
        """Whether a result of `players` (in seat order) is rated: two or more players, all different
        (self-play says nothing of a player's strength against others)."""
        return len(players) >= 2 and len(set(players)) == len(players)

    def loaded(self, scope: str) -> bool:
        """Whether the live tables of `scope` are in memory (else `load` them before rating it)."""
        return scope in self._live

    def load(self, scope: str, stored: Iterable[tuple[str, str, Any]] = ()) -> None:
        """Start the live tables of `scope` from `stored` ratings: (system, player, value) rows, "elo"
        with a rating, "openskill" with (mu, sigma); players not in them start at the prior."""
        elo_d, ts_d = EloTable(k=self._elo_k).to_dict(), dict(self._ts_template, ratings={})
        for system, player, value in stored:
            (elo_d if system == "elo" else ts_d)["ratings"][player] = value
        self._live[scope] = (EloTable.from_dict(elo_d), OpenSkillTable.from_dict(ts_d))

    def forget(self) -> None:
        """Drop the live tables: the next result of each scope starts from what `load` is given."""
        self._live.clear()

    def tables(self, scope: str) -> tuple[EloTable, OpenSkillTable]:
        """The live (Elo, OpenSkill) tables of `scope` (empty ones if it was never loaded)."""
        tables = self._live.get(scope)
        if tables is None:
            self.load(scope)
            tables = self._live[scope]
        return tables

    def rate(self, commit_seq: int, players: Sequence[str], returns: Sequence[float], scopes: Sequence[str],
             payoff: Mapping[str, Mapping[tuple[str, str], Sequence[float]]] | None = None) -> RatingRows:
        """Rate one committed result (commit number `commit_seq`, `players` in seat order with their
        `returns`) in each of `scopes`: the live tables are updated and the rows to store handed back.
        `payoff`: per scope, the stored (wins, draws, losses, games) of the result's ordered pairs (a
        pair missing has never met)."""
        rows = RatingRows()
        players = list(players)
        if not self.rated(players):
            return rows
        scores = scores_from_returns(returns)
        payoff = payoff or {}
        for scope in scopes:
            elo, ts = self._apply(scope, players, scores)
            for p in players:
                r = elo.rating(p)
                mu, sigma = ts.rating(p)
                rows.ratings += [("elo", scope, p, r), ("openskill", scope, p, [mu, sigma])]
                rows.history.append((commit_seq, scope, p, r, mu, sigma))
            known = payoff.get(scope, {})
            for i, home in enumerate(players):
                for j, away in enumerate(players):
                    if i == j:
                        continue
                    a, b = float(returns[i]), float(returns[j])
                    outcome = "win" if a > b else "loss" if a < b else "draw"
                    counts = decayed_update(known.get((home, away), (0.0, 0.0, 0.0, 0.0)), outcome,
                                            self._payoff_decay)
                    rows.payoff.append((scope, home, away, *counts))
        return rows

    def replay(self, results: Iterable[tuple[Sequence[str], Sequence[float]]],
               scope: str) -> tuple[EloTable, OpenSkillTable]:
        """Rate `results` ((players, returns), in commit order; those not rated are passed over) in
        `scope` through the step `rate` takes, and return its tables: on a new object, the recompute
        that a league's stored ratings must equal exactly."""
        for players, returns in results:
            players = list(players)
            if self.rated(players):
                self._apply(scope, players, scores_from_returns(returns))
        return self.tables(scope)

    def _apply(self, scope: str, players: list[str], scores: list[float]) -> tuple[EloTable, OpenSkillTable]:
        """The one rating step of a live commit and a replay."""
        elo, ts = self.tables(scope)
        rate_result(elo, ts, players, scores)
        return elo, ts

    def __repr__(self) -> str:
        return (f"LeagueRatings(elo_k={self._elo_k}, payoff_decay={self._payoff_decay}, "
                f"scopes={sorted(self._live)})")


# --------------------------------------------------------------------------
# alpha-rank
# --------------------------------------------------------------------------


def alpharank(
    payoff_matrix: np.ndarray,
    alpha: float = 100.0,
    m: int = 50,
    use_inf_alpha: bool = False,
    payoffs: bool = False,
) -> np.ndarray:
    """alpha-rank stationary mass per player from a head-to-head win-rate matrix.

    ``payoff_matrix[i, j]`` is player i's win rate against player j (as from
    ``Payoff.matrix``).  It is mapped to the zero-sum payoff ``2x - 1`` and
    treated as a single-population symmetric game, OpenSpiel's setting for
    ranking agents against each other.  Unlike Elo, the result stays
    meaningful for cyclic (non-transitive) leagues: a pure rock-paper-scissors
    cycle gives uniform mass.  ``alpha`` is the selection intensity (larger ->
    mass concentrates on the best responses), ``m`` the population size.

    With ``payoffs=True`` the matrix holds mean payoffs instead (any real numbers: chips a hand of
    row against column, 0 for pairs that never met), used as they are.

    Returns a distribution (non-negative, sums to 1), one mass per player.
    """
    # Imported lazily: open_spiel is heavy and only this function needs it.
    from open_spiel.python.egt import alpharank as _os_alpharank

    w = np.asarray(payoff_matrix, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] == 0:
        raise ValueError(f"payoff_matrix must be a non-empty square matrix, got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("payoff_matrix entries must be finite")
    if not payoffs and (np.any(w < 0.0) or np.any(w > 1.0)):
        raise ValueError("payoff_matrix entries must be win rates in [0, 1]")
    if w.shape[0] == 1:
        return np.ones(1)
    payoffs = w if payoffs else 2.0 * w - 1.0
    # Large alpha overflows exp() inside the fixation probabilities; the
    # library handles the resulting inf correctly, so the warning is noise.
    with np.errstate(over="ignore"):
        _, _, pi, _, _ = _os_alpharank.compute(
            [payoffs], m=m, alpha=alpha, use_inf_alpha=use_inf_alpha
        )
    pi = np.asarray(pi, dtype=np.float64).reshape(-1)
    if pi.shape[0] != w.shape[0] or not np.all(np.isfinite(pi)):
        raise RuntimeError(f"alpha-rank returned an invalid distribution: {pi}")
    # The eigen-solver leaves ~1e-16 negatives; clip so callers get a true distribution.
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum()


# --------------------------------------------------------------------------
# Nash averaging
# --------------------------------------------------------------------------


#: The Nash linear program's methods, tried in order, each with its time limit in seconds: HiGHS's
#: simplex (quickest on almost every payoff matrix) and its interior-point method. On large poker
#: leagues the simplex stalled on about 2 bootstrap resamples in 100 with no end in sight, where the
#: interior-point method solved the same matrix in 0.04 s; so a stall costs the simplex's time limit,
#: not the command.
LP_METHODS: tuple[tuple[str, float], ...] = (("highs-ds", 10.0), ("highs-ipm", 60.0))


def _solve_lp(linprog, c: np.ndarray, a_ub: np.ndarray, n: int):
    """The meta-game's linear program by the first of `LP_METHODS` that solves it within its time limit;
    a `RuntimeError` naming each method's failure where none does."""
    failures = []
    for method, limit in LP_METHODS:
        res = linprog(c, A_ub=a_ub, b_ub=np.zeros(n), A_eq=np.hstack([np.ones((1, n)), np.zeros((1, 1))]),
                      b_eq=[1.0], bounds=[(0, None)] * n + [(None, None)], method=method,
                      options={"time_limit": limit})
        if res.success:
            return res
        failures.append(f"{method}: {res.message}")
    raise RuntimeError(f"Nash averaging: the linear program failed ({'; '.join(failures)})")


def nash_average(payoffs: np.ndarray, maxent: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(the meta-game's maximum-entropy Nash mixture, each player's payoff against it).

    Nash averaging (Balduzzi, Tuyls, Perolat and Graepel, "Re-evaluating evaluation", 2018):
    ``payoffs[i, j]`` is player i's mean payoff against j (0 where they never met). The meta-game
    is its zero-sum part ``A = (P - P^T) / 2``, a symmetric two-player zero-sum game of value 0. Its
    maximum-entropy Nash equilibrium ``p`` is found by linear programming (an equilibrium) and
    then, among equilibria, the one of largest entropy (a concave maximisation over the
    equilibrium polytope, by SLSQP from the linear program's answer). A player's rating is its
    payoff against that mixture, ``(A p)_i``: 0 for the players in the equilibrium's support,
    negative for the others (``maxent=False``: the linear program's equilibrium, quicker, for
    bootstrap resamples). Unlike a mean over the field, it does not reward beating a weak or
    redundant player many times: a player who only farms an exploitable opponent gains nothing
    from it, the strongest strategies (which nothing beats on average) rate 0.
    """
    from scipy.optimize import linprog, minimize

    P = np.asarray(payoffs, dtype=np.float64)
    n = P.shape[0]
    if P.ndim != 2 or P.shape[1] != n or n == 0 or not np.all(np.isfinite(P)):
        raise ValueError(f"payoffs must be a finite non-empty square matrix, got shape {P.shape}")
    A = 0.5 * (P - P.T)
    if n == 1:
        return np.ones(1), np.zeros(1)
    # max v s.t. (A^T p)_j >= v for every column j, p a distribution: variables (p, v)
    c = np.zeros(n + 1)
    c[-1] = -1.0
    a_ub = np.hstack([-A.T, np.ones((n, 1))])
    res = _solve_lp(linprog, c, a_ub, n)
    p = np.clip(res.x[:n], 0.0, None)
    p /= p.sum()
    value = float(res.x[-1])
    tol = 1e-9 * max(1.0, float(np.abs(A).max()))

    if not maxent:  # the linear program's equilibrium (the same one wherever the equilibrium is unique)
        return p, A @ p

    def neg_entropy(q):
        q = np.clip(q, 1e-300, None)
        return float((q * np.log(q)).sum())

    out = minimize(neg_entropy, p, jac=lambda q: np.log(np.clip(q, 1e-300, None)) + 1.0, method="SLSQP",
                   bounds=[(0.0, 1.0)] * n,
                   constraints=[{"type": "eq", "fun": lambda q: q.sum() - 1.0, "jac": lambda q: np.ones(n)},
                                {"type": "ineq", "fun": lambda q: A.T @ q - value + tol, "jac": lambda q: A.T}],
                   options={"maxiter": 200, "ftol": 1e-12})
    if out.success and np.all(A.T @ np.clip(out.x, 0, None) >= value - 10 * tol - 1e-9):
        q = np.clip(out.x, 0.0, None)
        p = q / q.sum()
    return p, A @ p
