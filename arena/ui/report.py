"""A league report as ONE self-contained HTML file.

Open it straight from disk: CSS is inline, plots are embedded as base64 PNG
data URIs, and there is no script and no external resource. Replay files are
linked relative (``replays/<match_id>.jsonl.gz`` from the league directory), so
the report keeps working when the whole league folder is copied elsewhere. Every
replay, a file or kept in the league's database, also links to the replay page
of ``arena serve DIR`` at its default address (``SERVE_URL``) and shows the
``arena replay show DIR ID`` command that reads it in the terminal.
"""

from __future__ import annotations

import base64
import html
import json
import os
import shlex
import time
from pathlib import Path
from typing import Any, Iterable, Sequence
from urllib.parse import quote

import numpy as np

from arena.ui.plots import figure_png, fitted_figure, game_slug, payoff_figure, ratings_figure
from arena.league.storage import OVERALL, LeagueStore, ResultRow
from arena.league.queries import (
    MATCH_STATUSES,
    default_scope,
    describe_outcome,
    game_label,
    league_name,
    payoff_data,
    rating_rows,
    recent_results,
    return_rows,
)
from arena.ui.views import first_read, fitted_board, fitted_cells, win_rate_rgb

__all__ = ["render_report", "write_report"]

_CSS = """
:root { --fg: #1d232a; --muted: #66707a; --line: #d9dee3; --head: #f2f4f7; --accent: #2f5fa7; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Helvetica, Arial, sans-serif;
       color: var(--fg); margin: 0; background: #fafbfc; }
header { background: #1f2d3d; color: #fff; padding: 18px 28px; }
header h1 { margin: 0 0 4px; font-size: 24px; }
header .meta { color: #c7d0da; font-size: 13px; }
nav { padding: 8px 28px; background: #e9edf2; border-bottom: 1px solid var(--line); font-size: 13px; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
main { padding: 8px 28px 40px; max-width: 1400px; }
h2 { border-bottom: 2px solid var(--line); padding-bottom: 4px; margin-top: 30px; }
h3 { margin: 22px 0 8px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 16px; min-width: 110px; }
.card .n { font-size: 22px; font-weight: 600; }
.card .l { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card.failed .n { color: #c0392b; }
table { border-collapse: collapse; background: #fff; margin: 6px 0 14px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 9px; text-align: left; vertical-align: top; }
th { background: var(--head); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
/* a narrow screen: the rating tables keep the columns read first (the rest: a wider window) */
p.narrow { display: none; }
@media (max-width: 900px) { .detail { display: none; } p.narrow { display: block; } main { padding: 8px 10px 30px; } }
td.never { color: #aab1b8; text-align: center; background: #f4f5f6; }
td.cell { text-align: center; font-variant-numeric: tabular-nums; font-weight: 600; }
td.cell small { display: block; font-weight: 400; opacity: .75; font-size: 11px; }
td.mass { font-weight: 600; color: #6b2f8f; }
.scroll { overflow-x: auto; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.plots figure { margin: 0; background: #fff; border: 1px solid var(--line); padding: 6px; }
.plots img { max-width: 100%; height: auto; display: block; }
.muted { color: var(--muted); }
code.cmd { color: var(--muted); font-size: 11px; white-space: nowrap; }
code, pre { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; }
pre { background: #fff; border: 1px solid var(--line); padding: 10px; overflow-x: auto; }
dl.config { display: grid; grid-template-columns: max-content 1fr; gap: 3px 16px; margin: 8px 0; }
dl.config dt { color: var(--muted); }
dl.config dd { margin: 0; }
.yes { color: #1e8449; } .no { color: var(--muted); }
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _table(headers: Sequence[tuple[str, str]], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    """Rows are sequences of already-escaped <td> elements; headers are (text, css class)."""
    head = "".join(f'<th class="{c}">{_e(h)}</th>' if c else f"<th>{_e(h)}</th>" for h, c in headers)
    body = "\n".join("<tr>" + "".join(r) + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table></div>'


def _td(x: Any, cls: str = "") -> str:
    return f'<td class="{cls}">{_e(x)}</td>' if cls else f"<td>{_e(x)}</td>"


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<figure><img src="data:image/png;base64,{data}" alt="{_e(alt)}"></figure>'


def _ratings_html(store: LeagueStore, game: str) -> str:
    rows = rating_rows(store, game)
    if not rows:
        return '<p class="muted">No rated results yet.</p>'
    headers = [("#", "num"), ("Player", ""), ("Elo", "num"), ("mu", "num"), ("sigma", "num"),
               ("mu - 3 sigma", "num"), ("Games", "num"), ("W", "num"), ("D", "num"), ("L", "num"),
               ("Win rate", "num")]
    body = []
    for i, r in enumerate(rows, 1):
        wr = "-" if r.win_rate is None else f"{100 * r.win_rate:.1f}%"
        body.append([_td(i, "num"), f"<td><b>{_e(r.player)}</b></td>", _td(f"{r.elo:.1f}", "num"),
                     _td(f"{r.mu:.2f}", "num"), _td(f"{r.sigma:.2f}", "num"), _td(f"{r.conservative:.2f}", "num"),
                     _td(r.games, "num"), _td(r.wins, "num"), _td(r.draws, "num"), _td(r.losses, "num"),
                     _td(wr, "num")])
    return _table(headers, body, "ratings")


def _fitted_html(store: LeagueStore, game: str) -> str:
    """The reference table (`arena.ui.views.fitted_cells`: the terminal's cells): fitted ratings with
    their intervals, also drawn as error bars; payoffs first for a game scored by them; provisional
    players marked."""
    board = fitted_board(store, game)
    if not board.rows:
        return '<p class="muted">No rated results yet.</p>'
    cols, cells = fitted_cells(board)
    keep = set(first_read(cols) or range(len(cols)))
    kind = ["num" if k in keep else "num detail" for k in range(len(cols))]
    headers = [("#", "num"), ("Player", "")] + [(c, kind[k]) for k, c in enumerate(cols)]
    body = [[_td(f"{i}?" if r.provisional else i, "num"),
             f"<td><b>{_e(r.player)}</b>{' <small>provisional</small>' if r.provisional else ''}</td>"]
            + [_td(x, kind[k]) for k, x in enumerate(c)] for i, (r, c) in enumerate(zip(board.rows, cells), 1)]
    return (_table(headers, body, "fitted")
            + '<p class="muted narrow">A narrow screen shows the columns read first; a wider window shows every '
              'column (the rank\'s interval, the record, the live Elo).</p>'
            + f'<p class="muted">{_e(board.note())}</p>'
            + _img(figure_png(fitted_figure(board)), f"fitted ratings: {game_label(game)}"))


def _returns_html(store: LeagueStore, game: str) -> str:
    rows = return_rows(store, game)
    if not rows:
        return '<p class="muted">No episodes yet.</p>'
    headers = [("#", "num"), ("Player", ""), ("Mean return (common seeds)", "num"), ("Std", "num"),
               ("Episodes", "num"), ("Common seeds", "num"), ("Forfeits", "num")]

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    body = [[_td(i if r.mean is not None else "-", "num"), f"<td><b>{_e(r.player)}</b></td>", _td(num(r.mean), "num"),
             _td(num(r.std), "num"), _td(r.episodes, "num"), _td(r.common_seeds, "num"), _td(r.forfeits, "num")]
            for i, r in enumerate(rows, 1)]
    note = ('<p class="muted">A one-player game: players ranked by mean return over the common seeds, the '
            "seeds every active player has finished (each player plays the same seeds); std over those "
            "episodes; episodes counts all of a player's episodes. An episode a player forfeited (an invalid "
            "move, an error, a timeout) keeps the return it had earned; a player with any forfeit ranks after "
            "those with none.</p>")
    return _table(headers, body, "returns") + note


def _payoff_html(store: LeagueStore, game: str) -> str:
    data = payoff_data(store, game)
    if not data.players:
        return '<p class="muted">No head-to-head results yet.</p>'
    headers = [("row vs column", "")] + [(p, "num") for p in data.players] + [("alpha-rank", "num")]
    payoff = data.kind == "payoff"
    values = data.mean_payoff if payoff else data.win_rate
    span = float(np.nanmax(np.abs(values))) if payoff and np.isfinite(values).any() else 1.0
    body = []
    for i, p in enumerate(data.players):
        row = [f"<th>{_e(p)}</th>"]
        for j in range(len(data.players)):
            x = values[i, j]
            if np.isnan(x):
                row.append('<td class="never">-</td>')
            else:
                r, g, b = win_rate_rgb(0.5 + 0.5 * x / (span or 1.0) if payoff else x)
                shown = f"{x:+.3f}" if payoff else f"{x:.2f}"
                count = f"{data.games[i, j]:.0f} matches" if payoff else f"{data.games[i, j]:.1f} games"
                row.append(f'<td class="cell" style="background: rgba({r},{g},{b},0.55)">{shown}'
                           f"<small>{count}</small></td>")
        row.append(_td(data.mass(i), "num mass"))
        body.append(row)
    if payoff:
        note = ('<p class="muted">Row player\'s mean payoff a match against the column player (the game is '
                "scored by its payoffs: chips, points), below it the matches; '-' where they never met. "
                "alpha-rank: stationary mass per player from the mean-payoff matrix (0 for pairs that never "
                "met), over the established players ('prov.': provisional, kept out).</p>")
    else:
        note = ('<p class="muted">Row player\'s decayed win rate against the column player (draws count half); '
                "below it the decayed number of games; '-' where they never met. alpha-rank: stationary mass per "
                "player from the win-rate matrix (0.5 for pairs that never met), over the established players "
                "('prov.': provisional, kept out).</p>")
    if data.capped_note:
        note += f'<p class="muted">{_e(data.capped_note.capitalize())}.</p>'
    if data.alpharank_error:
        note += f'<p class="muted">alpha-rank unavailable: {_e(data.alpharank_error)}</p>'
    return _table(headers, body, "payoff") + note


def _players_html(store: LeagueStore) -> str:
    headers = [("Name", ""), ("Kind", ""), ("Role", ""), ("Parent", ""), ("Agent spec", ""), ("Games", ""),
               ("Version", "num"), ("Played", "num"), ("Active", "")]
    body = []
    for p in store.players():
        body.append([f"<td><b>{_e(p.name)}</b></td>", _td(p.kind), _td(p.role or "-"), _td(p.parent or "-"),
                     f"<td><code>{_e(p.spec)}</code></td>", _td(", ".join(p.games)), _td(p.version, "num"),
                     _td(p.steps, "num"),
                     '<td class="yes">yes</td>' if p.active else '<td class="no">no</td>'])
    return _table(headers, body, "players")


#: Where `arena serve` listens by default: the report's replay links open its replay page there.
SERVE_URL = "http://127.0.0.1:8000"


def _show_command(store: LeagueStore, match_id: str) -> str:
    return f"arena replay show {shlex.quote(str(store.dir))} {shlex.quote(match_id)}"


def _replay_link(store: LeagueStore, r: ResultRow, out_dir: Path, serve_url: str = SERVE_URL) -> str:
    """The replay's cell: a link to `arena serve`'s replay page, the file where the replay is one, and
    the command that shows it in the terminal.

    The page's link is absolute: the report is a file opened from disk (``file://``), where a relative
    link would name a file, not the server; ``arena serve DIR`` answers on `serve_url` (its default
    address) once started. Replays kept in the league's database have no file to link to."""
    page = (f'<a href="{_e(serve_url.rstrip("/"))}/replay/{_e(quote(r.match_id, safe=""))}" '
            f'title="open it in the replay viewer of arena serve (start arena serve first)">view</a>')
    command = f'<br><code class="cmd">{_e(_show_command(store, r.match_id))}</code>'
    if r.replay and "#" in Path(r.replay).name and not Path(r.replay).exists():
        # kept in the league's database: the page and the command read it there
        return f'<td>{page} <span class="muted">(in league.db)</span>{command}</td>'
    compress = bool((store.get_meta("config") or {}).get("compress_replays", True))
    stored = Path(r.replay) if r.replay else None
    name = stored.name if stored else r.match_id + (".jsonl.gz" if compress else ".jsonl")
    # Prefer this league folder's own copy (the folder may have been moved or copied since the
    # result was committed with an absolute path), then the path as stored.
    candidates = [store.replay_dir / name]
    if stored is not None:
        candidates.append(stored if stored.is_absolute() else store.dir / stored)
    path = next((c for c in candidates if c.exists()), None)
    if path is None:
        return '<td class="muted">missing</td>'
    rel = os.path.relpath(path.resolve(), out_dir.resolve()).replace(os.sep, "/")
    return f'<td>{page} &middot; <a href="{_e(quote(rel))}">{_e(path.name)}</a>{command}</td>'


def _results_html(store: LeagueStore, out_dir: Path, n: int, serve_url: str = SERVE_URL) -> str:
    rows = recent_results(store, n)
    if not rows:
        return '<p class="muted">No results yet.</p>'
    note = (f'<p class="muted">A replay\'s "view" link opens it in the replay viewer of '
            f"<code>arena serve {_e(shlex.quote(str(store.dir)))}</code>, which listens on {_e(serve_url)} "
            "by default (start it first); the command under it shows the replay in the terminal.</p>")
    headers = [("Commit", "num"), ("Match", ""), ("Game", ""), ("Players", ""), ("Returns", ""), ("Outcome", ""),
               ("Moves", "num"), ("Replay", "")]
    body = []
    for r in reversed(rows):
        body.append([_td(r.commit_seq, "num"), f"<td><code>{_e(r.match_id)}</code></td>", _td(r.game),
                     _td(" vs ".join(r.players)), _td(", ".join(f"{float(x):g}" for x in r.returns)),
                     _td(describe_outcome(r)), _td(r.moves, "num"), _replay_link(store, r, out_dir, serve_url)])
    return note + _table(headers, body, "results")


def _events_html(store: LeagueStore, n: int) -> str:
    events = store.events()[-n:]
    if not events:
        return '<p class="muted">No snapshots or resets yet.</p>'
    body = []
    for ev in reversed(events):
        details = ", ".join(f"{k}={v}" for k, v in ev.items() if k not in ("t", "kind", "player") and v is not None)
        body.append([_td(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ev["t"]))), _td(ev.get("kind")),
                     _td(ev.get("player") or "-"), _td(details)])
    return _table([("Time", ""), ("Kind", ""), ("Player", ""), ("Details", "")], body, "events")


def _config_html(cfg: dict | None) -> str:
    if not cfg:
        return '<p class="muted">No configuration stored.</p>'
    items = []
    for key in ("name", "seed", "matches", "pairing", "pfsp_weighting", "backend", "workers", "in_flight",
                "elo_k", "payoff_decay", "update_every", "compress_replays", "move_time_limit"):
        if key in cfg:
            items.append(f"<dt>{_e(key)}</dt><dd>{_e(cfg[key])}</dd>")
    games = ", ".join(
        g["id"] + (f" (weight {g.get('weight')})" if g.get("weight", 1.0) != 1.0 else "")
        + (f" {json.dumps(g['kwargs'])}" if g.get("kwargs") else "") for g in cfg.get("games", []))
    items.append(f"<dt>games</dt><dd>{_e(games or '-')}</dd>")
    fixed = ", ".join(f"{p['name']} ({p['agent']})" for p in cfg.get("players", []))
    items.append(f"<dt>fixed players</dt><dd>{_e(fixed or '-')}</dd>")
    learners = ", ".join(f"{p['name']} ({p.get('role')}, {p.get('learner')})" for p in cfg.get("learners", []))
    items.append(f"<dt>learners</dt><dd>{_e(learners or '-')}</dd>")
    full = _e(json.dumps(cfg, indent=2, sort_keys=True, default=str))
    return (f'<dl class="config">{"".join(items)}</dl>'
            f"<details><summary>Full configuration</summary><pre>{full}</pre></details>")


def render_report(store: LeagueStore, out_dir: str | Path | None = None, *, recent: int = 20,
                  serve_url: str = SERVE_URL) -> str:
    """The report's HTML text; replay files are linked relative to `out_dir` (default: the league
    directory), every replay's page at `arena serve`'s `serve_url`."""
    out_dir = Path(out_dir) if out_dir is not None else store.dir
    name = league_name(store)
    cfg = store.get_meta("config")
    counts = store.status_counts()
    games = [g for g in store.rated_games() if g != OVERALL]
    solo = store.one_player_games()
    generated = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime())

    cards = [(store.result_count(), "results", ""), (len(store.players()), "players", "")]
    statuses = list(MATCH_STATUSES) + sorted(s for s in counts if s not in MATCH_STATUSES)
    cards += [(counts.get(s, 0), f"{s} matches", s if counts.get(s) else "") for s in statuses]
    cards_html = "".join(f'<div class="card {c}"><div class="n">{_e(n)}</div><div class="l">{_e(l)}</div></div>'
                         for n, l, c in cards)

    # With a single game, its ratings and payoff are the overall ones: show them once.
    per_game = games if len(games) > 1 else []

    def scope(game: str, anchor: str) -> str:
        label = game_label(game)
        title = label.capitalize() if game == OVERALL else label
        if game != OVERALL and len(games) == 1:
            title += " (the league's only game)"
        plots = (_img(figure_png(ratings_figure(store, game)), f"ratings over time: {label}")
                 + _img(figure_png(payoff_figure(store, game)), f"payoff heatmap: {label}"))
        return (f'<section id="{_e(anchor)}"><h2>{_e(title)}</h2>'
                f"<h3>Ratings</h3>{_fitted_html(store, game)}"
                f"<details><summary>Live ratings (Elo, OpenSkill: updated one result at a time)</summary>"
                f"{_ratings_html(store, game)}</details>"
                f"<h3>Payoff and alpha-rank</h3>{_payoff_html(store, game)}"
                f'<div class="plots">{plots}</div></section>')

    # One-player games have no ratings or payoff: their returns table instead (and no empty Elo
    # section in a league of one-player games only).
    rated = bool(games) or not solo
    first = default_scope(store)  # a league of one game: that game's tables (its vs-Nash column included)
    nav = ([f'<a href="#overall">{_e(game_label(first).capitalize() if first == OVERALL else first)}</a>']
           if rated else []) + [
        f'<a href="#game-{_e(game_slug(g))}">{_e(g)}</a>' for g in per_game + solo] + [
        '<a href="#players">Players</a>', '<a href="#results">Recent results</a>', '<a href="#events">Events</a>',
        '<a href="#config">Configuration</a>']
    sections = ([scope(first, "overall")] if rated else []) + [scope(g, f"game-{game_slug(g)}") for g in per_game]
    sections += [f'<section id="game-{_e(game_slug(g))}"><h2>{_e(g)}</h2>'
                 f"<h3>Returns</h3>{_returns_html(store, g)}</section>" for g in solo]
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>League report: {_e(name)}</title>
<style>{_CSS}</style>
</head>
<body>
<header><h1>League report: {_e(name)}</h1>
<div class="meta">Generated {_e(generated)} &middot; {_e(store.dir)} &middot; games: {_e(", ".join(games + solo) or "none rated yet")}</div>
</header>
<nav>{"".join(nav)}</nav>
<main>
<div class="cards">{cards_html}</div>
{"".join(sections)}
<section id="players"><h2>Players</h2>{_players_html(store)}</section>
<section id="results"><h2>Recent results</h2>{_results_html(store, out_dir, recent, serve_url)}</section>
<section id="events"><h2>Recent events</h2>{_events_html(store, recent)}</section>
<section id="config"><h2>Configuration</h2>{_config_html(cfg)}</section>
</main>
</body>
</html>
"""


def write_report(store: LeagueStore, out_path: str | Path | None = None, *, recent: int = 20) -> Path:
    """Write the self-contained HTML report (default `<league dir>/report.html`); returns its path."""
    path = Path(out_path) if out_path is not None else store.dir / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = render_report(store, path.parent, recent=recent)
    from arena.fsio import atomic_write_bytes

    atomic_write_bytes(path, text.encode("utf-8"))
    return path
