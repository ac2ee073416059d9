"""The reference leaderboard: ratings fitted to every result, with their uncertainty, and payoffs.

Elo and OpenSkill are live views, updated one result at a time as a league runs. The table people
should trust is fitted to the whole result log at once (`arena.league.bt`): a Bradley-Terry model
with Davidson's draws by maximum likelihood, 95% bootstrap intervals on every rating and rank, one
named player pinned to a fixed value so two leagues of a game share a scale, provisional players
(too few games or too wide an interval) ranked after the established ones, and a stability figure
(how often the top-k order survives dropping 1% of the results).

What a result counts as depends on the game's scoring (`arena.envs.registry.game_scoring`, or the
league config's ``scoring:`` for a game): ``win`` games (board games) rate win / draw / loss;
``payoff`` games (poker, negotiation, general-sum games) also have their primary figure, the mean
payoff a match with its 95% interval, and their payoff matrix holds mean payoffs, not win rates. The
overall table weighs every game equally, however many matches each has.

Every number here is computed from the result log (SQLite), so the terminal, the HTML report and the
web pages show the same table; a fitted table is kept in memory per league until a new result lands.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from arena.errors import ArenaError
from arena.league.storage import OVERALL, LeagueStore

__all__ = [
    "BoardRow",
    "Leaderboard",
    "PairStats",
    "game_scorings",
    "leaderboard",
    "pair_payoffs",
    "two_player_results",
]

#: Fewer games than this and a player is provisional (shown, ranked after the established).
PROVISIONAL_GAMES = 20
#: A 95% rating interval wider than this (Elo points) makes a player provisional too.
PROVISIONAL_WIDTH = 400.0


@dataclass(frozen=True)
class TwoPlayerResults:
    """The two-player results of a scope as arrays: a row is `count` matches alike (the same game, seats,
    returns and forfeit: the league's tally), or one match of a duplicate pair (`pair` names it)."""

    games: list[str]          # the scope's game ids (codes index it)
    names: list[str]          # player names (codes index it)
    game: np.ndarray          # game code per row
    a: np.ndarray             # seat 0's player code
    b: np.ndarray             # seat 1's player code
    ra: np.ndarray            # seat 0's return
    rb: np.ndarray            # seat 1's return
    forfeit: np.ndarray       # player code of the forfeiter, -1 if none
    inv_a: np.ndarray         # invalid moves of seat 0 (over the row's matches)
    inv_b: np.ndarray         # of seat 1
    pair: list[str | None] = field(default_factory=list)  # duplicate-pair id per row (None: unpaired)
    count: np.ndarray | None = None  # matches per row (None: one each)
    many: int = 0  # results of more than two seats in the scope (not rated)

    def __post_init__(self) -> None:
        if self.count is None:
            object.__setattr__(self, "count", np.ones(len(self.a), dtype=np.int64))

    def __len__(self) -> int:
        return len(self.a)

    @property
    def matches(self) -> int:
        return int(self.count.sum())


def two_player_results(store: LeagueStore, game: str = OVERALL) -> TwoPlayerResults:
    """Every two-player result of `game` (OVERALL: of every game) between two players, from the league's
    tally (`LeagueStore.tally_rows`: matches alike counted once) and the matches of duplicate pairs one by
    one (a player's match against itself rates no one: left out, as the live ratings leave it). Players
    and games are coded in name order."""
    rows, many = store.tally_rows(game)
    rows = [(*r, None) for r in rows] + store.paired_rows(game)
    if not rows:
        z, f = np.zeros(0, np.int64), np.zeros(0)
        return TwoPlayerResults([], [], z, z, z, f, f, z, z, z, [], z, many)
    gid, p0, p1, r0, r1, ff, n, i0, i1, pair = zip(*rows)
    games = sorted(set(gid))
    names = sorted(set(p0) | set(p1))
    gcode = {x: k for k, x in enumerate(games)}
    pcode = {x: k for k, x in enumerate(names)}
    m = len(rows)
    a = np.fromiter(map(pcode.__getitem__, p0), np.int64, m)
    b = np.fromiter(map(pcode.__getitem__, p1), np.int64, m)
    seat = np.asarray(ff, dtype=np.int64)
    return TwoPlayerResults(games, names, np.fromiter(map(gcode.__getitem__, gid), np.int64, m), a, b,
                            np.asarray(r0, dtype=np.float64), np.asarray(r1, dtype=np.float64),
                            np.where(seat == 0, a, np.where(seat == 1, b, -1)),
                            np.asarray(i0, dtype=np.int64), np.asarray(i1, dtype=np.int64), list(pair),
                            np.asarray(n, dtype=np.int64), many)


_scoring_memo: dict[str, str] = {}


def game_scorings(store: LeagueStore, games: list[str] | None = None) -> dict[str, str]:
    """How each rated game of the league is scored: ``win`` or ``payoff`` (the league's record, written
    when it starts, with its config's overrides; else what the game's registration or core says)."""
    known = dict(store.get_meta("scoring") or {})
    out = {}
    for g in games if games is not None else [x for x in store.rated_games() if x != OVERALL]:
        s = known.get(g)
        if s is None:
            s = _scoring_memo.get(g)
            if s is None:
                from arena.envs.registry import game_scoring

                try:
                    s = game_scoring(g)
                except (ArenaError, ImportError):  # a game not installed here (a plug-in): win / draw / loss
                    s = "win"
                _scoring_memo[g] = s
        out[g] = s
    return out


def _scores(res: TwoPlayerResults, scorings: dict[str, str]) -> np.ndarray:
    """Seat 0's score in each match, in [0, 1]. A ``win`` game: 1 ahead, 0.5 level, 0 behind (the sign
    of the returns). A ``payoff`` game: the margin itself, ``0.5 + (ra - rb) / (4 m)`` with `m` the
    largest return seen in that game, so that winning many chips counts for more than winning many
    small pots, and a player who wins more chips than it loses rates above one who wins more often
    but less (a fractional score, as Elo's; Bradley-Terry fits it as that share of a win)."""
    ra, rb = res.ra, res.rb
    out = np.where(ra > rb, 1.0, np.where(ra < rb, 0.0, 0.5))
    for code, gid in enumerate(res.games):
        if scorings.get(gid) != "payoff":
            continue
        sel = res.game == code
        m = float(max(np.abs(ra[sel]).max(initial=0.0), np.abs(rb[sel]).max(initial=0.0)))
        if m > 0:
            out[sel] = np.clip(0.5 + (ra[sel] - rb[sel]) / (4.0 * m), 0.0, 1.0)
    return out


@dataclass(frozen=True)
class PairStats:
    """A player's payoff over its matches: `n` units (matches, or duplicate pairs of matches), the mean
    payoff a match and its 95% interval (normal approximation; None below 2 units)."""

    n: int
    mean: float
    lo: float | None
    hi: float | None


def _mean_ci(x: np.ndarray, per: float = 1.0, w: np.ndarray | None = None) -> PairStats:
    """The mean of `x` (each value `w` times; None: once) over `per`, with its 95% interval."""
    w = np.ones(len(x)) if w is None else np.asarray(w, dtype=np.float64)
    n = int(round(w.sum()))
    if n == 0:
        return PairStats(0, float("nan"), None, None)
    mean = float((w * x).sum() / n)
    m = mean / per
    if n < 2:
        return PairStats(n, m, None, None)
    var = max(float((w * (x - mean) ** 2).sum()) / (n - 1), 0.0)
    half = 1.96 * math.sqrt(var) / math.sqrt(n) / per
    return PairStats(n, m, m - half, m + half)


def _payoff_stats(res: TwoPlayerResults) -> list[PairStats]:
    """Per player: its mean payoff a match with the interval, over units (`_unit_codes`): a pair of
    seat-swapped matches (a duplicate deal) is one unit, its payoff the sum of the two; an unpaired
    match is its own unit (a row of the tally, `count` units alike). The mean a unit is divided by the
    player's matches a unit on average."""
    n = len(res.names)
    units = _unit_codes(res)
    span = int(units.max()) + 1 if len(units) else 1
    key = np.concatenate([res.a, res.b]) * span + np.concatenate([units, units])
    cells, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    sums = np.bincount(inverse, np.concatenate([res.ra, res.rb]))  # a unit's payoff (a tally row: one match's)
    sizes = np.bincount(inverse)  # matches in the unit (a tally row: 1 a unit)
    alike = np.concatenate([res.count, res.count])[first]  # units alike
    bounds = np.searchsorted(cells // span, np.arange(n + 1))  # cells are sorted by player
    return [_mean_ci(sums[lo:hi], float((alike[lo:hi] * sizes[lo:hi]).sum() / alike[lo:hi].sum()) if hi > lo
                     else 1.0, alike[lo:hi])
            for lo, hi in zip(bounds[:-1], bounds[1:])]


def _pair_means(res: TwoPlayerResults, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(total payoff of row player against column player over their matches, the matches), each row
    counted `weights` times (a bootstrap's; None: its `count`)."""
    n = len(res.names)
    w = res.count.astype(np.float64) if weights is None else weights
    total = np.zeros((n, n))
    count = np.zeros((n, n))
    np.add.at(total, (res.a, res.b), w * res.ra)
    np.add.at(total, (res.b, res.a), w * res.rb)
    np.add.at(count, (res.a, res.b), w)
    np.add.at(count, (res.b, res.a), w)
    return total, count


def pair_payoffs(res: TwoPlayerResults) -> tuple[np.ndarray, np.ndarray]:
    """(mean payoff of row player against column player a match, matches) over `res`'s players."""
    total, count = _pair_means(res)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return mean, count


@dataclass(frozen=True)
class BoardRow:
    """One player of the reference table."""

    player: str
    rating: float            # fitted (Bradley-Terry with draws), Elo scale, anchored
    lo: float                # its 95% bootstrap interval
    hi: float
    rank: int
    rank_lo: int             # 95% interval on the rank
    rank_hi: int
    provisional: bool
    games: int
    wins: int
    draws: int
    losses: int
    forfeits: int            # matches it lost by forfeiting (invalid moves, errors, time)
    invalid: int             # invalid moves it made in all
    payoff: PairStats | None = None  # payoff games: its mean payoff a match (None: a win/draw/loss table)
    #: payoff games: its payoff a match against the meta-game's Nash mixture (Nash averaging), with a
    #: bootstrap interval; the primary order of a payoff game's table (None: not computed)
    nash: PairStats | None = None
    #: payoff games: the 95% interval of its rank by payoff against the Nash mixture, over the same
    #: resamples, among the established players (a provisional one: among the provisional, after them)
    nash_rank: tuple[int, int] | None = None
    elo: float | None = None        # the live views, beside
    mu: float | None = None
    sigma: float | None = None

    @property
    def win_rate(self) -> float | None:
        return (self.wins + 0.5 * self.draws) / self.games if self.games else None

    @property
    def invalid_rate(self) -> float:
        """Invalid moves a game."""
        return self.invalid / self.games if self.games else 0.0


@dataclass(frozen=True)
class Leaderboard:
    scope: str                # a game id, or OVERALL
    scoring: str              # "win", "payoff", or "mixed" (OVERALL over games of both kinds)
    rows: list[BoardRow]      # established first (rating, best first), then provisional
    anchor: str | None
    anchor_value: float
    stability: float | None
    top_k: int
    resamples: int
    results: int
    draw_nu: float
    games_in_scope: list[str] = field(default_factory=list)
    #: Results not in the fit (matches of more than two players: rated by Elo and OpenSkill only).
    unrated: int = 0
    #: The all-games table of several games: each player's games in the scope (else empty).
    played: dict[str, list[str]] = field(default_factory=dict)

    def apart(self, top: int = 5) -> list[tuple[str, str]]:
        """(player, its one game) for the table's first `top` players that played one game of several:
        their place is how they do in that game, set against the others only through the players of
        both (`note`)."""
        if self.scope != OVERALL or len(self.games_in_scope) < 2:
            return []
        return [(r.player, self.played[r.player][0]) for r in self.rows[:top]
                if len(self.played.get(r.player, ())) == 1]

    def note(self, short: bool = False) -> str:
        """What the table is, one paragraph under it; `short`: this table's own figures only (the
        results, the anchor, the stability, the provisional players), where `method_note` is said
        once for several tables."""
        anchor = (f"{self.anchor} pinned at {self.anchor_value:g}" if self.anchor
                  else f"the mean pinned at {self.anchor_value:g} (no anchor player in the scope)")
        if short:
            parts = [f"{self.results:,} results; {anchor}"]
        else:
            parts = [f"Bradley-Terry with draws (Davidson), fitted by maximum likelihood to {self.results:,} "
                     f"results; 95% intervals from {self.resamples:,} bootstrap resamples; {anchor}"]
        if self.scope == OVERALL and len(self.games_in_scope) > 1:
            parts.append(f"each of the {len(self.games_in_scope)} games weighs the same; players of different games "
                         "are set against each other only through the players of both, so a place here says how a "
                         "player does in its own games, not that it beats players of others")
            lone = self.apart()
            if lone:
                parts.append("played one game only: " + ", ".join(f"{p} ({g})" for p, g in lone))
        if self.stability is not None:
            parts.append(f"top-{self.top_k} order unchanged in {self.stability:.0%} of resamples with 1% of "
                         "the results dropped")
        prov = sum(r.provisional for r in self.rows)
        if prov:
            parts.append(f"{prov} provisional (fewer than {PROVISIONAL_GAMES} games or an interval wider than "
                         f"{PROVISIONAL_WIDTH:g}), ranked after the rest")
        if self.scoring == "payoff" and not short:
            parts.append(PAYOFF_NOTE)
        if self.unrated:
            parts.append(f"{self.unrated} results of more than two players are rated by Elo/OpenSkill only")
        return "; ".join(parts) + "."


#: What a payoff game's columns are (`Leaderboard.note`, `method_note`).
PAYOFF_NOTE = ("vs Nash: payoff a match against the Nash mixture of the payoff matrix (Nash averaging; 0 for the "
               "players nothing beats on average), the table's order; payoff: mean return a match against the field; "
               "both with 95% intervals (a duplicate pair is one unit)")


def method_note(resamples: int, payoff: bool) -> str:
    """What every fitted table is, said once under several (each with its own `Leaderboard.note(short=True)`)."""
    return ("Ratings: Bradley-Terry with draws (Davidson), fitted by maximum likelihood; 95% intervals from "
            f"{resamples:,} bootstrap resamples; the top's stability: how often its order survives dropping a random "
            "1% of the results" + (f"; {PAYOFF_NOTE}" if payoff else "") + ".")


_memo: dict[tuple, tuple[int, Leaderboard]] = {}
_memo_lock = threading.Lock()


def _version(store: LeagueStore) -> int:
    row = store.conn.execute("SELECT MAX(commit_seq) FROM results").fetchone()
    return int(row[0] or 0)


def leaderboard(store: LeagueStore, game: str = OVERALL, *, resamples: int = 1000, seed: int = 0,
                provisional_games: int = PROVISIONAL_GAMES, provisional_width: float = PROVISIONAL_WIDTH,
                anchor: str | None = "random", top_k: int = 3) -> Leaderboard:
    """The fitted table of `game` (OVERALL: every game, each weighing the same). Kept in memory until
    the league commits another result."""
    key = (str(store.db_path), game, resamples, seed, provisional_games, provisional_width, anchor, top_k)
    version = _version(store)
    with _memo_lock:
        hit = _memo.get(key)
    if hit is not None and hit[0] == version:
        return hit[1]
    board = _fit(store, game, resamples=resamples, seed=seed, provisional_games=provisional_games,
                 provisional_width=provisional_width, anchor=anchor, top_k=top_k)
    with _memo_lock:
        if len(_memo) > 64:
            _memo.clear()
        _memo[key] = (version, board)
    return board


def _fit(store: LeagueStore, game: str, *, resamples: int, seed: int, provisional_games: int,
         provisional_width: float, anchor: str | None, top_k: int) -> Leaderboard:
    from arena.league.bt import Results, fit_bt

    res = two_player_results(store, game)
    scorings = game_scorings(store, res.games if res.games else ([game] if game != OVERALL else []))
    kinds = set(scorings.values())
    scoring = kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else "win")
    total = res.many
    # a duplicate pair (seats and deals swapped) is resampled whole, as the payoff intervals resample it
    unit = np.where([bool(p) for p in res.pair], _unit_codes(res), -1) if any(res.pair) else None
    fit_input = Results(res.game, res.a, res.b, _scores(res, scorings), res.games, res.names, unit, res.count)
    table = fit_bt(fit_input, scope=game, anchor=anchor, resamples=resamples, seed=seed,
                   provisional_games=provisional_games, provisional_width=provisional_width, top_k=top_k)
    elo, skill = store.elo(game), store.openskill(game)
    code = {n: i for i, n in enumerate(res.names)}
    provisional = {r.player for r in table.rows if r.provisional}
    established = np.array([name not in provisional for name in res.names], dtype=bool)
    nash, nash_ranks = (nash_payoffs(res, seed=seed, established=established) if scoring == "payoff"
                        and game != OVERALL else (None, None))
    payoffs = _payoff_stats(res) if scoring == "payoff" else None
    # each player's record in one pass over the matches (seat 0's sign of the returns: 1, 0.5, 0)
    n, a, b, c = len(res.names), res.a, res.b, res.count
    sign = np.where(res.ra > res.rb, 1.0, np.where(res.ra < res.rb, 0.0, 0.5))
    games = (np.bincount(a, c, n) + np.bincount(b, c, n)).astype(np.int64)
    wins = np.bincount(a, c * (sign == 1.0), n) + np.bincount(b, c * (sign == 0.0), n)
    draws = np.bincount(a, c * (sign == 0.5), n) + np.bincount(b, c * (sign == 0.5), n)
    lost = res.forfeit >= 0
    forfeits = np.bincount(res.forfeit[lost], c[lost], n)
    invalid = np.bincount(a, res.inv_a, n) + np.bincount(b, res.inv_b, n)
    rows = []
    for r in table.rows:
        i = code.get(r.player)
        if i is None:
            continue
        mu, sigma = skill.get(r.player, (None, None))
        rows.append(BoardRow(
            r.player, r.rating, r.lo, r.hi, r.rank, r.rank_lo, r.rank_hi, r.provisional, int(games[i]), int(wins[i]),
            int(draws[i]), int(games[i] - wins[i] - draws[i]), int(forfeits[i]), int(invalid[i]),
            payoff=None if payoffs is None else payoffs[i], nash=None if nash is None else nash[i],
            nash_rank=None if nash_ranks is None else nash_ranks[i],
            elo=elo.get(r.player), mu=None if mu is None else float(mu), sigma=None if sigma is None else float(sigma)))
    played: dict[str, list[str]] = {}
    if game == OVERALL and len(res.games) > 1:
        pairs = set(zip(res.a.tolist(), res.game.tolist())) | set(zip(res.b.tolist(), res.game.tolist()))
        for i, g in sorted(pairs):
            played.setdefault(res.names[i], []).append(res.games[g])
    return Leaderboard(game, scoring, rows, table.anchor, table.anchor_value, table.stability, table.top_k,
                       table.resamples, table.results, table.draw_nu, sorted(res.games), total, played)


def ranked_by_payoff(board: Leaderboard) -> list[BoardRow]:
    """A payoff game's rows by payoff against the Nash mixture, then mean payoff (best first;
    provisional players after the established)."""
    def key(r: BoardRow):
        nash = r.nash.mean if r.nash and r.nash.n else -math.inf
        return (r.provisional, -round(nash, 9), -(r.payoff.mean if r.payoff and r.payoff.n else -math.inf), r.player)
    return sorted(board.rows, key=key)


#: Bootstrap resamples of the Nash-averaged payoffs (a linear program each), and the most players the
#: Nash averaging takes (a larger league's payoff game shows the mean payoff alone).
NASH_RESAMPLES = 200
NASH_MAX_PLAYERS = 200


def _unit_codes(res: TwoPlayerResults) -> np.ndarray:
    """Each match's unit (of resampling, of a player's payoff): its pair of seat-swapped matches, or itself."""
    ids: dict[Any, int] = {}
    return np.fromiter((ids.setdefault(p if p else ("m", k), len(ids)) for k, p in enumerate(res.pair)),
                       np.int64, len(res.pair))


def nash_payoffs(res: TwoPlayerResults, resamples: int = NASH_RESAMPLES, seed: int = 0,
                 established: np.ndarray | None = None) -> tuple[list[PairStats] | None, list | None]:
    """Per player of `res`: its payoff against the maximum-entropy Nash mixture of the established
    players' mean-payoff meta-game (`arena.league.ratings.nash_average`; a provisional player is scored
    against that mixture and never changes it), with a 95% interval from `resamples` Poisson
    bootstrap resamples of the matches (a duplicate pair resampled whole); and the 95% interval of its
    rank by that payoff over the same resamples (`_group_ranks`: an `established` player among the
    established, a provisional one among the provisional). (None, None) above `NASH_MAX_PLAYERS`
    players or without results."""
    from arena.league.ratings import nash_average

    n = len(res.names)
    if n == 0 or n > NASH_MAX_PLAYERS or len(res) == 0:
        return None, None
    established = np.ones(n, dtype=bool) if established is None else np.asarray(established, dtype=bool)
    # the mixture is the established players' equilibrium: a provisional player's few noisy matches never
    # move it (nor the others' payoffs against it); a provisional player is scored against it too
    core = np.flatnonzero(established) if established.any() else np.arange(n)

    def ratings(weights: np.ndarray | None, maxent: bool) -> np.ndarray:
        total, count = _pair_means(res, weights)
        mean = np.divide(total, count, out=np.zeros_like(total), where=count > 0)
        mix = nash_average(mean[np.ix_(core, core)], maxent=maxent)[0]
        return (0.5 * (mean - mean.T))[:, core] @ mix

    point = ratings(None, True)
    units = _unit_codes(res)
    # a unit drawn Poisson(1) times; a tally row's `count` units alike together: Poisson(count)
    alike = np.ones(int(units.max()) + 1)
    alike[units] = np.where([p is None for p in res.pair], res.count, 1)
    rng = np.random.default_rng(seed)
    boot = np.empty((resamples, n))
    for r in range(resamples):
        boot[r] = ratings(rng.poisson(alike)[units].astype(float), False)
    lo = np.minimum(np.percentile(boot, 2.5, axis=0), point) if resamples else point
    hi = np.maximum(np.percentile(boot, 97.5, axis=0), point) if resamples else point
    games = (np.bincount(res.a, res.count, n) + np.bincount(res.b, res.count, n)).astype(np.int64)
    stats = [PairStats(int(games[i]), float(point[i]), float(lo[i]), float(hi[i])) for i in range(n)]
    if not resamples:
        return stats, None
    ranks = _group_ranks(boot, established)
    k_lo = np.percentile(ranks, 2.5, axis=0, method="lower").astype(int)
    k_hi = np.percentile(ranks, 97.5, axis=0, method="higher").astype(int)
    return stats, [(int(k_lo[i]), int(k_hi[i])) for i in range(n)]


def _group_ranks(values: np.ndarray, established: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """``[R, n]`` ranks of each resample's values, best first: an established player's among the
    established (1 + those strictly above it: players level with it share its rank), a provisional
    one's among the provisional, after every established one."""
    ranks = np.empty(values.shape, dtype=np.int64)
    first = 1
    for group in (established, ~established):
        idx = np.flatnonzero(group)
        if idx.size:
            v = values[:, idx]
            ranks[:, idx] = first + (v[:, None, :] > v[:, :, None] + tol).sum(-1)
            first += idx.size
    return ranks


def with_payoff_ranks(board: Leaderboard) -> Leaderboard:
    """`board` with its rows in payoff order (for the primary table of a payoff game), each row's rank its
    place in that order and its rank interval the one by payoff against the Nash mixture (widened to
    hold the place), so the interval agrees with the order it sits in."""
    rows = []
    for place, r in enumerate(ranked_by_payoff(board), 1):
        if r.nash_rank is not None:
            r = replace(r, rank=place, rank_lo=min(r.nash_rank[0], place), rank_hi=max(r.nash_rank[1], place))
        rows.append(r)
    return replace(board, rows=rows)
