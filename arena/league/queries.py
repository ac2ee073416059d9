"""League data queries shared by every view: the terminal, the plots, the HTML report (and a web app).

Pure functions of a `LeagueStore`: they read and return plain data (rows, matrices,
counts), never renderables, so every view shows the same numbers. Rendering lives in
`arena.ui`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from arena.league.storage import OVERALL, LeagueStore, ResultRow, common_seeds_of, return_stats

__all__ = [
    "MATCH_STATUSES",
    "PAYOFF_TOP",
    "PayoffData",
    "RatingRow",
    "RecomputeRow",
    "ResultPage",
    "ReturnRow",
    "SORT_KEYS",
    "describe_outcome",
    "game_label",
    "league_name",
    "payoff_data",
    "rating_rows",
    "recent_results",
    "recompute_rows",
    "record_counts",
    "result_page",
    "return_rows",
]

MATCH_STATUSES: tuple[str, ...] = ("queued", "running", "done", "failed")


# ---------------------------------------------------------------------------------------
# Shared data helpers
# ---------------------------------------------------------------------------------------


def game_label(game: str) -> str:
    """Human name of a rating scope: 'all games' for OVERALL, else the game id."""
    return "all games" if game == OVERALL else game


def default_scope(store: LeagueStore) -> str:
    """The rating scope a person sees first: a league of one rated game opens on that game's table
    (its payoffs, its vs-Nash column: the game's own, which the all-games table cannot have); a league
    of several games, or of none yet, on all games."""
    games = [g for g in store.rated_games() if g != OVERALL]
    return games[0] if len(games) == 1 else OVERALL


def league_name(store: LeagueStore) -> str:
    cfg = store.get_meta("config") or {}
    return str(cfg.get("name") or store.dir.name)


def record_counts(store: LeagueStore, game: str = OVERALL) -> dict[str, tuple[int, int, int]]:
    """(wins, draws, losses) per player over the rated results of `game` (OVERALL: every game), kept
    by the store with each commit (two players: the 1 / 0.5 / 0 scores the ratings use; more: a win
    is the unique highest return, a draw a tie for it)."""
    return store.records(game)


@dataclass(frozen=True)
class RatingRow:
    player: str
    elo: float
    mu: float
    sigma: float
    wins: int
    draws: int
    losses: int

    @property
    def conservative(self) -> float:
        """OpenSkill mu - 3 sigma."""
        return self.mu - 3.0 * self.sigma

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def win_rate(self) -> float | None:
        """(wins + draws / 2) / games; None before the first game."""
        return (self.wins + 0.5 * self.draws) / self.games if self.games else None


SORT_KEYS: dict[str, Any] = {
    "elo": lambda r: (-r.elo, r.player),
    "mu": lambda r: (-r.mu, r.player),
    "conservative": lambda r: (-r.conservative, r.player),
    "games": lambda r: (-r.games, r.player),
    "win_rate": lambda r: (-(r.win_rate if r.win_rate is not None else -1.0), r.player),
    "name": lambda r: r.player,
}


def rating_rows(store: LeagueStore, game: str = OVERALL, sort: str = "elo") -> list[RatingRow]:
    """Every player rated in `game`, best first by `sort` (one of SORT_KEYS; ties by name)."""
    if sort not in SORT_KEYS:
        raise ValueError(f"unknown sort {sort!r}; use one of {', '.join(SORT_KEYS)}")
    elo, skill, wdl = store.elo(game), store.openskill(game), record_counts(store, game)
    rows = []
    for p, e in elo.items():
        mu, sigma = skill.get(p, (float("nan"), float("nan")))
        w, d, l = wdl.get(p, (0, 0, 0))
        rows.append(RatingRow(p, float(e), float(mu), float(sigma), w, d, l))
    return sorted(rows, key=SORT_KEYS[sort])


@dataclass
class PayoffData:
    """The decayed payoff of one rating scope, players ordered by Elo (best first).

    ``win_rate[i, j]`` is player i's decayed win rate against j, NaN where they
    never met; ``games`` the decayed game counts (0 where never met);
    ``alpharank`` the alpha-rank mass per player computed on the win-rate
    matrix with 0.5 for unseen pairs and on the diagonal, over the established
    players (NaN for a provisional one: fewer than
    `arena.league.leaderboard.PROVISIONAL_GAMES` games); None, with
    ``alpharank_error`` saying why, if it could not be computed.
    """

    game: str
    players: list[str]
    win_rate: np.ndarray
    games: np.ndarray
    alpharank: np.ndarray | None
    alpharank_error: str | None = None
    #: Players in the scope before the cap (the matrix holds the top ``len(players)`` by Elo).
    total_players: int = 0
    #: ``"win_rate"``, or ``"payoff"`` for a game scored by its payoffs: then `mean_payoff` holds
    #: row's mean return a match against column (NaN where they never met), `games` the matches
    #: (not decayed), and alpha-rank runs on the mean payoffs.
    kind: str = "win_rate"
    mean_payoff: np.ndarray | None = None

    def mass(self, i: int) -> str:
        """Player i's alpha-rank mass as the tables show it: "-" where there is none, "prov." for a
        provisional player (kept out of the alpha-rank)."""
        if self.alpharank is None:
            return "-"
        x = float(self.alpharank[i])
        return "prov." if x != x else f"{x:.3f}"

    @property
    def capped_note(self) -> str | None:
        """What the views say when the matrix is capped (None when it holds every player)."""
        if self.total_players <= len(self.players):
            return None
        return (f"showing the top {len(self.players)} of {self.total_players} players by Elo; alpha-rank over "
                f"those {len(self.players)} (a matrix and an alpha-rank of every pair grow with the square and "
                "the cube of the players)")


#: The payoff matrix (and its alpha-rank) covers at most this many players, the best by Elo.
PAYOFF_TOP = 50


def payoff_data(store: LeagueStore, game: str = OVERALL, with_alpharank: bool = True,
                top: int | None = PAYOFF_TOP) -> PayoffData:
    """The payoff of `game` among its `top` players by Elo (None: all of them). A game scored by its
    payoffs (`arena.league.leaderboard.game_scorings`): the mean payoff matrix from the result log,
    players by mean payoff."""
    if game != OVERALL:
        from arena.league.leaderboard import game_scorings

        if game_scorings(store, [game])[game] == "payoff":
            return _mean_payoff_data(store, game, with_alpharank, top)
    elo = store.elo(game)
    if top is None:
        payoff = store.payoff(game)
        everyone = sorted(payoff.players(), key=lambda p: (p not in elo, -elo.get(p, 0.0), p))
        players = everyone
    else:  # read only the pairs among the top players: the whole table grows with the square of the players
        everyone = sorted(elo, key=lambda p: (-elo[p], p))
        players = everyone[:top]
        payoff = store.payoff(game, players=players)
    n = len(players)
    wr = np.full((n, n), np.nan)
    games = np.zeros((n, n))
    for i, a in enumerate(players):
        for j, b in enumerate(players):
            g = payoff.games(a, b)
            games[i, j] = g
            if g > 0:
                wr[i, j] = payoff.win_rate(a, b)
    masses, err = None, None
    if with_alpharank and n:
        record = store.records(game)
        # Payoff.matrix already gives 0.5 for pairs that never met, the diagonal included.
        masses, err = _alpharank_established(payoff.matrix(players), [sum(record.get(p, (0, 0, 0))) for p in players],
                                             payoffs=False)
    return PayoffData(game, players, wr, games, masses, err, total_players=len(everyone))


def _alpharank_established(matrix: np.ndarray, games: list[int], payoffs: bool) -> tuple[np.ndarray | None, str | None]:
    """(alpha-rank masses, None) or (None, why not): over the established players (at least
    `arena.league.leaderboard.PROVISIONAL_GAMES` games), a provisional one's mass NaN (listed apart, as
    in the ratings): a player with a handful of games does not move the others'. Over everyone when no
    one is established yet."""
    from arena.league.leaderboard import PROVISIONAL_GAMES

    keep = np.flatnonzero(np.asarray(games) >= PROVISIONAL_GAMES)
    if keep.size == 0:
        keep = np.arange(len(games))
    try:
        from arena.league.ratings import alpharank

        sub = alpharank(matrix[np.ix_(keep, keep)], payoffs=payoffs)
    except (ImportError, RuntimeError, ValueError, np.linalg.LinAlgError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    masses = np.full(len(games), np.nan)
    masses[keep] = sub
    return masses, None


def _mean_payoff_data(store: LeagueStore, game: str, with_alpharank: bool, top: int | None) -> PayoffData:
    from arena.league.leaderboard import pair_payoffs, two_player_results

    res = two_player_results(store, game)
    mean, count = pair_payoffs(res)
    overall = (np.nan_to_num(mean) * count).sum(1) / np.maximum(count.sum(1), 1)  # mean payoff over the field
    order = sorted(range(len(res.names)), key=lambda i: (-overall[i], res.names[i]))
    keep = order if top is None else order[:top]
    players = [res.names[i] for i in keep]
    sub, games = mean[np.ix_(keep, keep)], count[np.ix_(keep, keep)]
    masses, err = None, None
    if with_alpharank and players:
        played = count.sum(1)
        masses, err = _alpharank_established(np.nan_to_num(sub, nan=0.0), [int(played[i]) for i in keep], payoffs=True)
    wins = np.full(sub.shape, np.nan)
    return PayoffData(game, players, wins, games, masses, err, total_players=len(order), kind="payoff",
                      mean_payoff=sub)


def recent_results(store: LeagueStore, n: int = 10) -> list[ResultRow]:
    """The last `n` committed results, oldest first, without reading the whole log."""
    total = store.result_count()
    rows = store.results(since=max(0, total - n))
    if len(rows) < min(n, total):  # commit_seq has gaps: fall back to the full log
        rows = store.results()
    return rows[-n:] if n > 0 else []


@dataclass(frozen=True)
class ResultPage:
    """One page of the committed results (`result_page`), newest first."""

    results: list[ResultRow]
    #: Read oldest first and turned round (an `after` cursor alone: the results just after it, not the newest).
    ascending: bool
    #: The commit number of the last result of the whole log when the page was read.
    last_commit: int


def result_page(store: LeagueStore, game: str | None = None, player: str | None = None, outcome: str | None = None,
                since: float | None = None, until: float | None = None, before: int | None = None,
                after: int | None = None, limit: int = 50, wide: bool | None = None) -> ResultPage:
    """At most `limit` committed results, filtered (`LeagueStore.results_page`: `game`, `player`, `outcome`),
    committed in [`since`, `until`) (times) and with commit numbers before `before` and after `after` (keyset
    cursors); the newest of them, or with `after` alone the oldest. The dates become a range of commit
    numbers by a binary search (results are committed in time order). `wide`: see `results_page`."""
    lo, hi = None, None  # commit_seq bounds: lo <= seq < hi
    if since is not None:
        lo = store.first_commit_at(since)
    if until is not None:
        hi = store.first_commit_at(until)
    if before is not None:
        hi = before if hi is None else min(hi, before)
    if after is not None:
        lo = after + 1 if lo is None else max(lo, after + 1)
    ascending = after is not None and before is None
    rows = store.results_page(lo=lo, hi=hi, game=game, player=player, outcome=outcome, newest_first=not ascending,
                              limit=limit, wide=wide)
    if ascending:
        rows.reverse()
    return ResultPage(rows, ascending, store.last_commit())


def describe_outcome(r: ResultRow) -> str:
    if len(r.players) == 1:
        text = "episode"  # a one-player game: its return is the result
    elif r.draw:
        text = "draw"
    elif r.winner is not None and 0 <= r.winner < len(r.players):
        text = f"{r.players[r.winner]} wins"
    else:
        text = "no winner"
    if r.outcome and r.outcome != "normal":
        text += f" ({r.outcome}{': ' + r.reason if r.reason else ''})"
    return text



@dataclass(frozen=True)
class ReturnRow:
    """One player of a one-player game: mean and std of its returns on the common seeds (None while
    it lacks one of them), its episodes in all, and how many seeds are common."""

    player: str
    mean: float | None
    std: float | None
    episodes: int
    common_seeds: int
    #: Episodes it ended by forfeiting (a cut-short return is no measure of the player: ranked last).
    forfeits: int = 0


def return_rows(store: LeagueStore, game: str) -> list[ReturnRow]:
    """The one-player game's table, best first: by mean return on the seeds that every active player of
    `game` has finished (ties by name); a player that forfeited an episode after every one that did not,
    and players without a common mean (retired ones who missed a common seed) last."""
    eps = store.episodes(game)
    active = [p.name for p in store.players(active_only=True) if game in p.games]
    seeds = common_seeds_of(eps, active)
    every, common = return_stats(eps), return_stats(eps, seeds)
    forfeits = store.forfeits(game)
    rows = []
    for p in dict.fromkeys(active + list(every)):
        n, mean, std = common.get(p, (0, None, None))
        if n < len(seeds) or not seeds:  # a retired player who missed a common seed: no fair mean
            mean = std = None
        rows.append(ReturnRow(p, mean, std, every.get(p, (0, 0.0, 0.0))[0], len(seeds), forfeits.get(p, 0)))
    return sorted(rows, key=lambda r: (r.mean is None, r.forfeits > 0, -(r.mean or 0.0), r.player))


@dataclass(frozen=True)
class RecomputeRow:
    game: str
    player: str
    live: tuple[float, float, float] | None  # (elo, mu, sigma)
    recomputed: tuple[float, float, float] | None

    @property
    def equal(self) -> bool:
        return self.live is not None and self.live == self.recomputed


def recompute_rows(store: LeagueStore) -> list[RecomputeRow]:
    """Live ratings next to ratings rebuilt from the result log, per game and player."""
    out = []
    for game in store.rated_games():
        elo, skill = store.elo(game), store.openskill(game)
        r_elo, r_ts = store.recompute(game)
        r_elo_d, r_ts_d = r_elo.ratings(), r_ts.ratings()
        for p in sorted(set(elo) | set(skill) | set(r_elo_d) | set(r_ts_d)):
            live = (float(elo[p]), *map(float, skill[p])) if p in elo and p in skill else None
            rec = (float(r_elo_d[p]), *map(float, r_ts_d[p])) if p in r_elo_d and p in r_ts_d else None
            out.append(RecomputeRow(game, p, live, rec))  # type: ignore[arg-type]
    return out
