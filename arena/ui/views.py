"""Terminal views of a league: rich renderables built from the league's data queries.

Every function here reads through `arena.league.queries` (or the store), builds a rich
`Table` or `Group` and returns it; nothing is printed.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from arena.league.queries import (
    MATCH_STATUSES,
    describe_outcome,
    game_label,
    league_name,
    payoff_data,
    rating_rows,
    recent_results,
    recompute_rows,
    return_rows,
)
from arena.league.storage import OVERALL, LeagueStore

__all__ = [
    "fitted_board",
    "fitted_cells",
    "fitted_per_game_views",
    "fitted_view",
    "payoff_view",
    "ratings_per_game_views",
    "ratings_view",
    "recompute_view",
    "returns_view",
    "status_view",
    "top_table",
    "win_rate_rgb",
]

def win_rate_rgb(x: float) -> tuple[int, int, int]:
    """Red (0) through amber (0.5) to green (1), for colouring win rates."""
    x = min(1.0, max(0.0, float(x)))
    red, amber, green = (215, 48, 39), (230, 180, 40), (26, 152, 80)
    lo, hi, t = (red, amber, x / 0.5) if x <= 0.5 else (amber, green, (x - 0.5) / 0.5)
    return tuple(int(round(a + (b - a) * t)) for a, b in zip(lo, hi))  # type: ignore[return-value]


def _returns(values: Sequence[float]) -> str:
    return ", ".join(f"{float(v):g}" for v in values)


def _event_details(ev: dict) -> str:
    skip = {"t", "kind", "player"}
    return ", ".join(f"{k}={v}" for k, v in ev.items() if k not in skip and v is not None)


def _clock(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"


# ---------------------------------------------------------------------------------------
# Renderables
# ---------------------------------------------------------------------------------------


def status_view(store: LeagueStore, recent: int = 10) -> Group:
    """Players, match counts by status, the last `recent` results and events."""
    players = store.players()
    header = Text.assemble(
        ("League ", "bold"), (league_name(store), "bold cyan"),
        f"  {store.result_count()} results  ", (str(store.dir), "dim"))

    pt = Table(title="Players", title_justify="left")
    for col, kw in (("Name", {"style": "bold"}), ("Kind", {}), ("Role", {}), ("Parent", {}),
                    ("Version", {"justify": "right"}), ("Played", {"justify": "right"}), ("Active", {})):
        pt.add_column(col, **kw)
    for p in players:
        pt.add_row(p.name, p.kind, p.role or "-", p.parent or "-", str(p.version), str(p.steps),
                   Text("yes", style="green") if p.active else Text("no", style="dim"))

    counts = store.status_counts()
    ct = Table(title="Matches", title_justify="left")
    statuses = list(MATCH_STATUSES) + sorted(s for s in counts if s not in MATCH_STATUSES)
    for s in statuses:
        ct.add_column(s, justify="right", style="red" if s == "failed" and counts.get(s) else None)
    ct.add_column("total", justify="right", style="bold")
    ct.add_row(*[str(counts.get(s, 0)) for s in statuses], str(sum(counts.values())))

    rt = Table(title=f"Recent results (last {recent})", title_justify="left")
    for col in ("Match", "Game", "Players", "Returns", "Outcome"):
        rt.add_column(col)
    for r in reversed(recent_results(store, recent)):
        rt.add_row(r.match_id, r.game, " vs ".join(r.players), _returns(r.returns), describe_outcome(r))

    events = store.events()[-recent:]
    et = Table(title=f"Recent events (last {recent})", title_justify="left")
    for col in ("Time", "Kind", "Player", "Details"):
        et.add_column(col)
    for ev in reversed(events):
        et.add_row(_clock(ev.get("t")), str(ev.get("kind")), str(ev.get("player") or "-"), _event_details(ev))
    if not events:
        et.add_row("-", "-", "-", "no snapshots or resets yet")
    return Group(header, pt, ct, rt, et)


def compact_columns(table: Table) -> list[int] | None:
    """`first_read` of `table`'s column headers."""
    return first_read([str(c.header) for c in table.columns])


def first_read(heads: list[str]) -> list[int] | None:
    """The columns a person reads first in a rating table, by header: the rank, the player, the order's
    figure with its interval (a payoff game's payoff against the Nash mixture, else the fitted rating;
    the live table's Elo), the fitted rating beside a payoff, the games (the terminal's compact table,
    the report's narrow screen). None where the table has none of them (it is not a rating table)."""
    lead = next((h for h in ("vs Nash", "Rating", "Elo") if h in heads), None)
    if lead is None:
        return None
    want = {"#", "Player", lead, "Games"} | ({"Rating"} if lead == "vs Nash" else set())
    return [i for i, h in enumerate(heads)
            if h in want or (h == "95% CI" and i and heads[i - 1] == lead)]


def _widest_rows(table: Table, over: int = 40) -> Table:
    """`table`, or where it has more than `over` rows a copy with only the rows that set its narrowest
    width: each column's longest cell and the cell with its longest word (a column is as narrow as its
    widest unbreakable cell, a table as its columns): measuring a thousand rows takes half a second."""
    if table.row_count <= over:
        return table
    from rich.text import Text

    keep: set[int] = set()
    for col in table.columns:
        plain = [c.plain if isinstance(c, Text) else Text.from_markup(c).plain if isinstance(c, str) else None
                 for c in col.cells]
        if any(p is None for p in plain):  # a cell of another kind: measure them all
            return table
        keep.add(max(range(len(plain)), key=lambda r: len(plain[r])))
        keep.add(max(range(len(plain)), key=lambda r: max((len(w) for w in plain[r].split()), default=0)))
    out = Table(title=table.title, caption=table.caption, box=table.box, pad_edge=table.pad_edge,
                show_header=table.show_header, show_edge=table.show_edge, padding=table.padding)
    for col in table.columns:
        out.add_column(col.header, justify=col.justify, style=col.style, no_wrap=col.no_wrap, overflow=col.overflow,
                       min_width=col.min_width, max_width=col.max_width, width=col.width, ratio=col.ratio)
    cells = [list(col.cells) for col in table.columns]
    for r in sorted(keep):
        out.add_row(*[c[r] for c in cells])
    return out


def fit_width(table: Table, width: int, keep: int = 2, wide: bool = True) -> Table | Group:
    """`table` itself when it fits `width` columns. Else, unless `wide`, a rating table's compact form
    (`compact_columns`: rank, player, the rating with its interval, games) with a line naming what is
    left out; else (or where even that is too wide) the same rows as several tables one under the
    other, each with the first `keep` columns (the rank and the player) and as many of the others as
    fit whole, the title on the first and the caption on the last: a narrow terminal never gets a
    number or a header cut short."""
    from rich.console import Console
    from rich.measure import Measurement

    measure = Console(width=10**5)

    def needed(t: Table) -> int:  # the narrowest it can be: names wrap, numbers and headers stay whole
        return Measurement.get(measure, measure.options, _widest_rows(t)).minimum

    if needed(table) <= width or len(table.columns) <= keep + 1:
        return table
    cols = table.columns
    cells = [list(c.cells) for c in cols]

    def part(indices: list[int], title, caption=None) -> Table:
        t = Table(title=title, title_justify="left", box=table.box, pad_edge=table.pad_edge, caption=caption,
                  caption_justify=table.caption_justify)
        for i in indices:
            c = cols[i]
            t.add_column(c.header, justify=c.justify, style=c.style, no_wrap=c.no_wrap, overflow=c.overflow,
                         min_width=c.min_width)
        for r in range(table.row_count):
            t.add_row(*[cells[i][r] for i in indices], style=table.rows[r].style)
        return t

    short = None if wide else compact_columns(table)
    if short is not None:
        left = len(cols) - len(short)
        note = f"(--wide: {left} more column{'s' if left != 1 else ''}, the rank's interval and the record among them)"
        caption = f"{table.caption} {note}" if table.caption else note
        compact = part(short, table.title, caption)
        if needed(compact) <= width:
            return compact
    parts, current = [], []
    for i in range(keep, len(cols)):
        if current and needed(part(list(range(keep)) + current + [i], table.title)) > width:
            parts.append(current)
            current = []
        current.append(i)
    parts.append(current)
    shown = [part(list(range(keep)) + p, table.title if k == 0 else None) for k, p in enumerate(parts)]
    if table.caption:  # once, under the last part, at the terminal's width
        shown.append(Text(str(table.caption), style="dim" if isinstance(table.caption, str) else ""))
    return Group(*shown)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:.1f}%"


def ratings_view(store: LeagueStore, game: str = OVERALL, sort: str = "elo") -> Table:
    """One row per player rated in `game`: Elo, OpenSkill, record; best first by `sort`."""
    rows = rating_rows(store, game, sort)
    t = Table(title=f"Ratings: {game_label(game)}", title_justify="left",
              caption=None if rows else "no rated results yet", box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("#", justify="right", style="dim", no_wrap=True)
    t.add_column("Player", style="bold", overflow="fold", min_width=8)
    cells = [[f"{r.elo:.1f}", f"{r.mu:.2f}", f"{r.sigma:.2f}", f"{r.conservative:.2f}", str(r.games), str(r.wins),
              str(r.draws), str(r.losses), _pct(r.win_rate)] for r in rows]
    # Numbers are never cut: each column is at least as wide as its widest value.
    for j, col in enumerate(("Elo", "mu", "sigma", "mu-3σ", "Games", "W", "D", "L", "Win rate")):
        width = max([len(c[j]) for c in cells] + [len(col)])
        t.add_column(col, justify="right", no_wrap=True, min_width=width)
    for i, (r, c) in enumerate(zip(rows, cells), 1):
        t.add_row(str(i), r.player, *c)
    return t


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _interval(lo: float | None, hi: float | None, digits: int = 0, sign: bool = False) -> str:
    if lo is None or hi is None:
        return "-"
    f = f"{{:{'+' if sign else ''}.{digits}f}}"
    return f"[{f.format(lo)}, {f.format(hi)}]"


def fitted_cells(board: Any) -> tuple[list[str], list[list[str]]]:
    """The columns after the rank and the player of a fitted table (`arena.league.leaderboard`), and
    each row's cells as text: for a payoff game its payoff against the Nash mixture and its mean payoff
    a match with their intervals first; then the rating, its interval and the rank's, the record,
    forfeits, invalid moves a game and the live Elo. The terminal and the HTML report show these."""
    payoff = board.scoring == "payoff"
    cols = (["vs Nash", "95% CI", "Payoff", "95% CI"] if payoff else []) + [
        "Rating", "95% CI", "Rank CI", "Games", "W", "D", "L", "Forfeits", "Invalid/g", "Elo"]
    rows = []
    for r in board.rows:
        c = []
        if payoff:
            for p in (r.nash, r.payoff):
                c += [f"{p.mean:+.3f}" if p and p.n else "-", _interval(p.lo, p.hi, 3, True) if p else "-"]
        c += [f"{r.rating:.0f}", _interval(r.lo, r.hi), f"{r.rank_lo}-{r.rank_hi}" if r.rank_lo != r.rank_hi
              else str(r.rank_lo), str(r.games), str(r.wins), str(r.draws), str(r.losses), str(r.forfeits),
              f"{r.invalid_rate:.2f}", "-" if r.elo is None else f"{r.elo:.0f}"]
        rows.append(c)
    return cols, rows


def fitted_board(store: LeagueStore, game: str = OVERALL, *, resamples: int = 1000, seed: int = 0) -> Any:
    """The fitted table of `game` in the order it is shown: a payoff game's by payoff against the Nash
    mixture (`arena.league.leaderboard.with_payoff_ranks`)."""
    from arena.league.leaderboard import leaderboard, with_payoff_ranks

    board = leaderboard(store, game, resamples=resamples, seed=seed)
    return with_payoff_ranks(board) if board.scoring == "payoff" else board


def fitted_view(store: LeagueStore, game: str = OVERALL, *, resamples: int = 1000, seed: int = 0,
                short: bool = False) -> Table:
    """The reference table of `game` (`fitted_cells`): Bradley-Terry ratings fitted to every result with
    95% bootstrap intervals, provisional players marked and ranked last; a payoff game in the order of
    its payoff against the Nash mixture. The fit's terms in the caption (`short`: the table's own figures
    alone, where `arena.league.leaderboard.method_note` is said once under several tables)."""
    board = fitted_board(store, game, resamples=resamples, seed=seed)
    what = ("payoff against the Nash mixture, mean payoff, fitted rating" if board.scoring == "payoff"
            else "fitted rating")
    t = Table(title=f"Ratings: {game_label(game)} ({what}, 95% intervals)", title_justify="left",
              caption=board.note(short) if board.rows else "no rated results yet", caption_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("#", justify="right", style="dim", no_wrap=True)
    t.add_column("Player", style="bold", overflow="fold", min_width=8)
    cols, cells = fitted_cells(board)
    for j, col in enumerate(cols):
        width = max([len(c[j]) for c in cells] + [len(col)])
        t.add_column(col, justify="right", no_wrap=True, min_width=width)
    for i, (r, c) in enumerate(zip(board.rows, cells), 1):
        t.add_row(f"{i}?" if r.provisional else str(i), r.player + (" (provisional)" if r.provisional else ""), *c,
                  style="dim" if r.provisional else None)
    return t


def fitted_per_game_views(store: LeagueStore, *, resamples: int = 1000, seed: int = 0) -> list[Table]:
    """`fitted_view` for every rated game (OVERALL excluded), in game order."""
    return [fitted_view(store, g, resamples=resamples, seed=seed) for g in store.rated_games() if g != OVERALL]


def returns_view(store: LeagueStore, game: str) -> Table:
    """A one-player game's table: players by mean return on the common seeds (the seeds every active
    player has finished), best first, with the std there, episodes in all, the common seeds and the
    episodes forfeited (a player with any is ranked after those with none)."""
    rows = return_rows(store, game)
    common = rows[0].common_seeds if rows else 0
    t = Table(title=f"Returns: {game} (mean over {common} common seeds)", title_justify="left",
              caption=None if common else "no seed finished by every player yet", box=box.SIMPLE_HEAD,
              pad_edge=False)
    t.add_column("#", justify="right", style="dim", no_wrap=True)
    t.add_column("Player", style="bold", overflow="fold", min_width=8)
    cells = [[_num(r.mean), _num(r.std), str(r.episodes), str(r.common_seeds), str(r.forfeits)] for r in rows]
    for j, col in enumerate(("Mean return", "Std", "Episodes", "Common seeds", "Forfeits")):
        width = max([len(c[j]) for c in cells] + [len(col)])
        t.add_column(col, justify="right", no_wrap=True, min_width=width)
    for i, (r, c) in enumerate(zip(rows, cells), 1):
        t.add_row(str(i) if r.mean is not None else "-", r.player, *c)
    return t


def ratings_per_game_views(store: LeagueStore, sort: str = "elo") -> list[Table]:
    """`ratings_view` for every rated game (OVERALL excluded), in game order."""
    return [ratings_view(store, g, sort) for g in store.rated_games() if g != OVERALL]


def payoff_view(store: LeagueStore, game: str = OVERALL) -> Table:
    """Row player's decayed win rate against each column player, with decayed game counts and alpha-rank."""
    data = payoff_data(store, game)
    payoff = data.kind == "payoff"
    what = ("row vs column mean payoff a match; in brackets their matches" if payoff else
            "row vs column win rate; in brackets the decayed weight of their games")
    t = Table(title=f"Payoff: {game_label(game)} ({what})",
              title_justify="left",
              caption=" ".join(x for x in (data.capped_note, data.alpharank_error and
                                           f"alpha-rank unavailable: {data.alpharank_error}",
                                           data.alpharank is not None and bool(np.isnan(data.alpharank).any()) and
                                           "α-rank over the established players (prov.: provisional, kept out).")
                               if x)
              or (None if data.players else "no rated results yet"))
    t.add_column("Player", style="bold", overflow="fold")
    for p in data.players:
        t.add_column(p, justify="right")
    t.add_column("α-rank", justify="right", style="bold magenta")
    for i, p in enumerate(data.players):
        cells: list[Any] = []
        for j in range(len(data.players)):
            x = data.mean_payoff[i, j] if payoff else data.win_rate[i, j]
            if np.isnan(x):
                cells.append(Text("-", style="dim"))
            elif payoff:
                r, g, b = win_rate_rgb(0.5 + 0.5 * np.sign(x))
                cells.append(Text.assemble((f"{x:+.3f}", f"bold rgb({r},{g},{b})"),
                                           (f" ({data.games[i, j]:.0f})", "dim")))
            else:
                r, g, b = win_rate_rgb(x)
                cells.append(Text.assemble((f"{x:.2f}", f"bold rgb({r},{g},{b})"),
                                           (f" ({data.games[i, j]:.1f})", "dim")))
        t.add_row(p, *cells, data.mass(i))
    return t


def top_table(store: LeagueStore, n: int = 5, fitted: bool = False) -> Table:
    """Compact top-`n` of the league's first scope (`default_scope`: its one game, else all games),
    cheap enough to refresh during a run: by the live Elo, a player with fewer than `PROVISIONAL_GAMES`
    games marked provisional and ranked after the rest. `fitted` (a run's last word): the reference
    table's top-`n` instead, Bradley-Terry ratings with their 95% intervals (200 resamples), in the
    order that table gives (a payoff game's: by payoff against the Nash mixture). A league of
    one-player games only: its first game's returns table."""
    from arena.league.leaderboard import PROVISIONAL_GAMES
    from arena.league.queries import default_scope

    scope = default_scope(store)
    label = game_label(scope)
    elo, skill = store.elo(scope), store.openskill(scope)
    if not elo and store.one_player_games():
        return returns_view(store, store.one_player_games()[0])
    played = {p.name: p.steps for p in store.players()}
    if fitted and elo:
        board = fitted_board(store, scope, resamples=200)
        t = Table(title=f"Top {n} (fitted ratings, 95% intervals, {label})", title_justify="left", box=None,
                  pad_edge=False)
        payoff = board.scoring == "payoff"  # ordered by payoff against the Nash mixture: shown first
        cols = [("#", {"justify": "right", "style": "dim"}), ("Player", {"style": "bold", "overflow": "fold"})]
        cols += [("vs Nash", {"justify": "right"})] if payoff else []
        cols += [("Rating", {"justify": "right"}), ("95% CI", {"justify": "right"}), ("Games", {"justify": "right"}),
                 ("Elo", {"justify": "right"})]
        for col, kw in cols:
            t.add_column(col, **kw)
        for i, r in enumerate(board.rows[:n], 1):
            nash = ([f"{r.nash.mean:+.3f}" if r.nash and r.nash.n else "-"] if payoff else [])
            t.add_row(f"{i}?" if r.provisional else str(i), r.player + (" (provisional)" if r.provisional else ""),
                      *nash, f"{r.rating:.0f}", _interval(r.lo, r.hi), str(r.games), f"{elo.get(r.player, 0.0):.0f}",
                      style="dim" if r.provisional else None)
        return t
    games = {p: sum(v) for p, v in store.records(scope).items()}
    best = sorted(elo, key=lambda p: (games.get(p, 0) < PROVISIONAL_GAMES, -elo[p], p))[:n]
    t = Table(title=f"Top {n} (Elo, {label}; provisional: under {PROVISIONAL_GAMES} games)", title_justify="left",
              box=None, pad_edge=False)
    t.add_column("#", justify="right", style="dim")
    t.add_column("Player", style="bold", overflow="fold")
    t.add_column("Elo", justify="right")
    t.add_column("mu-3σ", justify="right")
    t.add_column("Games", justify="right")
    t.add_column("Played", justify="right")
    for i, p in enumerate(best, 1):
        mu, sigma = skill.get(p, (float("nan"), float("nan")))
        prov = games.get(p, 0) < PROVISIONAL_GAMES
        t.add_row(f"{i}?" if prov else str(i), p + (" (provisional)" if prov else ""), f"{elo[p]:.1f}",
                  f"{mu - 3 * sigma:.2f}", str(games.get(p, 0)), str(played.get(p, 0)), style="dim" if prov else None)
    if not best:
        t.add_row("", "no rated results yet", "", "", "", "")
    return t


def recompute_view(store: LeagueStore) -> tuple[Group, bool]:
    """(live vs recomputed Elo / mu / sigma, one table per rating scope; whether all are exactly equal).

    "log" columns are the ratings rebuilt from the stored result log; the check
    is exact float equality (a mismatch shows the largest difference).
    """
    rows = recompute_rows(store)

    def fmt(v: tuple[float, float, float] | None, k: int, digits: int) -> str:
        return "-" if v is None else f"{v[k]:.{digits}f}"

    tables = []
    for game in dict.fromkeys(r.game for r in rows):
        t = Table(title=f"Live vs recomputed from the result log: {game_label(game)}", title_justify="left",
                  box=box.SIMPLE_HEAD)
        t.add_column("Player", style="bold", min_width=6, overflow="fold")
        for col in ("Elo", "Elo log", "mu", "mu log", "sigma", "σ log"):
            t.add_column(col, justify="right", no_wrap=True)
        t.add_column("Check", no_wrap=True)
        for r in (r for r in rows if r.game == game):
            if r.equal:
                check = Text("match", style="green")
            elif r.live is None or r.recomputed is None:
                check = Text("MISMATCH (missing)", style="bold red")
            else:
                diff = max(abs(a - b) for a, b in zip(r.live, r.recomputed))
                check = Text(f"MISMATCH |Δ| {diff:.1e}", style="bold red")
            t.add_row(r.player, fmt(r.live, 0, 2), fmt(r.recomputed, 0, 2), fmt(r.live, 1, 4),
                      fmt(r.recomputed, 1, 4), fmt(r.live, 2, 4), fmt(r.recomputed, 2, 4), check)
        tables.append(t)
    all_equal = all(r.equal for r in rows)
    bad = sum(not r.equal for r in rows)
    summary = (Text(f"all {len(rows)} ratings match the result log exactly (Elo, mu and sigma bit for bit)",
                    style="bold green") if all_equal
               else Text(f"{bad} of {len(rows)} ratings differ from the result log", style="bold red"))
    return Group(*tables, summary), all_equal
