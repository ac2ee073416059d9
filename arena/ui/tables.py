"""Rich tables shared by the CLI commands."""

from __future__ import annotations

from typing import Sequence

from rich.markup import escape
from rich.table import Table

from arena.match.batch import AgentSummary


def spec_text(spec: str) -> str:
    """An agent spec as a table shows it: a space after each comma, so a narrow column wraps between
    options (``mcts:simulations=10, rollouts=1``) instead of every few characters."""
    return spec.replace(",", ", ")


def summary_table(title: str, rows: Sequence[AgentSummary]) -> Table:
    """One row per agent. A one-player game (a single row: no one to win against) has no W/D/L or
    win-rate columns, its mean return alone."""
    t = Table(title=title, title_justify="left")
    # at least one option wide (a spec wraps between its options, never a letter a line)
    words = [w for r in rows for w in spec_text(r.spec).split()]
    t.add_column("agent", overflow="fold", min_width=min(max([len(w) for w in words] + [5]), 28))
    duel = len(rows) > 1
    cols = (("games", "W", "D", "L", "win rate") if duel else ("games",)) + ("mean return", "invalid", "ms/move")
    for col in cols:  # no_wrap: a number or a header stays whole (a narrow terminal gets the table in parts)
        t.add_column(col, justify="right", no_wrap=True)
    for s in rows:
        record = [str(s.wins), str(s.draws), str(s.losses), f"{s.win_rate:.3f}"] if duel else []
        t.add_row(escape(spec_text(s.spec)), str(s.games), *record, f"{s.mean_return:+.3f}", str(s.invalid),
                  f"{1000 * s.move_time / max(s.move_calls, 1):.2f}")
    return t


def agents_table(rows: list[dict]) -> Table:
    t = Table(title="Agent kinds (a spec is kind:options; your own: module:Class)", title_justify="left")
    t.add_column("kind", no_wrap=True)
    for col in ("example", "options", "what it is"):
        t.add_column(col)
    for r in rows:
        t.add_row(escape(r["kind"]), escape(r["example"]), escape(", ".join(r["options"]) or "-"), escape(r["about"]))
    return t


def games_table(rows: list[dict]) -> Table:
    t = Table(title="Registered games", title_justify="left")
    t.add_column("id", no_wrap=True)
    for col in ("players", "action", "source", "notes"):
        t.add_column(col)
    for r in rows:
        notes = r.get("error") or r.get("note") or ", ".join(
            f"{k}={v}" for k, v in r.items() if k in ("info", "chance"))
        # plain text, not markup: "arena[opensim]" is an extra's name, not a style
        t.add_row(escape(r["id"]), str(r["players"]), str(r["action"]), escape(str(r["source"])), escape(notes))
    return t
