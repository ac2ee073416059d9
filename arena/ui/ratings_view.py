"""`arena ratings` at the terminal: which tables a league's ratings are shown in, for one game or all.

The fitted ratings (or the live Elo / OpenSkill tables), the payoff matrices, each one-player game's
returns, the exploitability of the players whose strategy can be read, and the plots; every table is
cut to the terminal's width in parts (`fit_width`), never cropped. Nothing here prints: the views are
yielded, in order, for the command to show."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from arena.errors import ArenaError
from arena.league.storage import OVERALL, LeagueStore

#: The `--method`s: bt fits Bradley-Terry to every result; elo and openskill are the live tables.
METHODS = ("bt", "elo", "openskill")


def check_method(method: str) -> None:
    """Refuse an unknown --method before the league is opened."""
    if method not in METHODS:
        raise ArenaError(f"--method {method!r}: use bt (fitted, the default), elo or openskill")


def rated_league(directory: Path, game: Optional[str]) -> LeagueStore:
    """The league at `directory`, once `game` (None: all of them) is known to be one of its games."""
    from arena.league.manager import open_league

    store = open_league(directory)
    games = store.rated_games()
    solo = store.one_player_games()
    if game is not None and game not in games and game != OVERALL and game not in solo:
        known = ", ".join([g for g in games if g != OVERALL] + solo) or "none yet"
        raise ArenaError(f"--game {game}: the league at {directory} has no rated games of that id; its games: {known}")
    return store


def ratings_views(store: LeagueStore, game: Optional[str], *, width: int, payoff: bool = False,
                  method: str = "bt", resamples: int = 1000, exploitability: bool = False,
                  plots: Optional[Path] = None, wide: bool = False) -> Iterator[RenderableType]:
    """The views of `store`'s ratings for `game` (None: overall, then each game), each fitted to
    `width` (a rating table too wide for it in its compact form, unless `wide`: `fit_width`); then, with `plots` (a folder), a line per plot written there. A one-player game has its
    returns table alone (no ratings, no payoff, no plots)."""
    from arena.ui.views import fit_width, returns_view

    games = store.rated_games()
    solo = store.one_player_games()
    if game in solo:  # a single-agent task: no ratings or payoff, its returns table
        yield fit_width(returns_view(store, game), width)
        return
    if payoff:
        yield from (fit_width(t, width, 1) for t in _payoff_views(store, game, games))
    else:
        if games or not solo:  # the rating tables, unless every game is a one-player game
            tables = [fit_width(t, width, wide=wide) for t in _rating_views(store, game, games, method, resamples)]
            yield from tables
            if method == "bt" and store.result_count():
                from arena.league.leaderboard import game_scorings, method_note

                shown = [game] if game else games
                payoffs = "payoff" in game_scorings(store, [x for x in shown if x != OVERALL]).values()
                yield Text(method_note(resamples, payoffs), style="dim")
        if exploitability:
            yield fit_width(exploitability_view(store, game), width)
        if game is None:
            for x in solo:
                yield fit_width(returns_view(store, x), width)
    if plots is not None:
        from arena.ui.plots import plot_all

        for p in plot_all(store, plots):
            yield f"wrote {p}"


def _payoff_views(store: LeagueStore, game: Optional[str], games: list[str]) -> Iterator[Table]:
    """The payoff matrix of `game` (None: the league's first scope, `default_scope`: its one game's, or
    overall then each game's when there are several)."""
    from arena.league.queries import default_scope
    from arena.ui.views import payoff_view

    yield payoff_view(store, game or default_scope(store))
    per_game = [x for x in games if x != OVERALL]
    if game is None and len(per_game) > 1:
        for x in per_game:
            yield payoff_view(store, x)


def _rating_views(store: LeagueStore, game: Optional[str], games: list[str], method: str,
                  resamples: int) -> Iterator[Table]:
    """The fitted table (bt) or the live one sorted by Elo or OpenSkill, of `game` (None: the league's
    one game's, `default_scope`; with several games overall, then each game's)."""
    from arena.league.queries import default_scope
    from arena.ui.views import fitted_view, ratings_per_game_views, ratings_view

    g = game or default_scope(store)
    if method == "bt":
        scopes = [g] + ([x for x in games if x != OVERALL] if game is None and len(games) > 2 else [])
        for x in scopes:  # each table's own figures under it; what they all are, once after them
            yield fitted_view(store, x, resamples=resamples, short=True)
    else:
        sort = "elo" if method == "elo" else "conservative"
        yield ratings_view(store, g, sort)
        if game is None and g == OVERALL:
            yield from ratings_per_game_views(store, sort)


def exploitability_view(store: LeagueStore, game: Optional[str]) -> Table:
    """NashConv of every player whose strategy can be read, in each small poker game of the league."""
    from arena.agents.exploitability import NotReadable, nash_conv, readable
    from arena.league.leaderboard import leaderboard

    t = Table(title="Exploitability (NashConv, OpenSpiel; 0 is a Nash equilibrium)", title_justify="left")
    for col in ("Game", "Player", "Agent", "Rating", "NashConv"):
        t.add_column(col, justify="right" if col in ("Rating", "NashConv") else "left")
    cfg = store.get_meta("config") or {}
    settings = {e.get("id"): e.get("kwargs") or {} for e in cfg.get("games", []) if isinstance(e, dict)}
    for g in [x for x in store.rated_games() if x != OVERALL and (game is None or x == game)
              and _imperfect(x, settings.get(x))]:
        fitted = None
        for p in store.players():
            if g not in p.games or not readable(p.spec, g, game_kwargs=settings.get(g)):
                continue
            try:
                value = f"{nash_conv(p.spec, g, game_kwargs=settings.get(g), timeout_s=300):.4f}"
            except NotReadable as e:
                value = f"- ({e})"
            if fitted is None:
                fitted = {r.player: r for r in leaderboard(store, g, resamples=200).rows}
            r = fitted.get(p.name)
            t.add_row(g, p.name, p.spec, "-" if r is None else f"{r.rating:.0f} [{r.lo:.0f}, {r.hi:.0f}]", value)
    if not t.row_count:
        t.caption = "no player of a small poker game has a strategy that can be read (cfr, tabular, policy:, random)"
    return t


def _imperfect(game: str, kwargs: Optional[dict]) -> bool:
    """Poker and its kind: NashConv says something there; a board game's is moot."""
    from arena.envs.registry import make_core

    try:
        return not make_core(game, **(kwargs or {})).perfect_information
    except Exception:
        return False
