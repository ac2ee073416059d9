"""Running a league in the terminal: a progress bar with matches/s and a live top-5 table."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from arena.league.config import LeagueConfig
from arena.league.manager import League
from arena.ui.views import top_table


def run_with_progress(cfg: LeagueConfig, directory: str | Path, *, backend: str | None = None,
                      address: str | None = None, matches: int | None = None,
                      console: Console | None = None) -> dict:
    console = console or Console()
    league = League(cfg, directory, backend=backend, address=address)
    target = cfg.matches if matches is None else matches
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[rate]:.1f} matches/s"), TextColumn("in flight {task.fields[inflight]}"),
                        TimeElapsedColumn(), console=console)
    task = progress.add_task(cfg.name, total=target, completed=league.store.result_count("league"), rate=0.0,
                             inflight=0)
    last = [0.0]
    try:
        with Live(Group(progress, top_table(league.store)), console=console, refresh_per_second=4,
                  transient=False) as live:
            def on_progress(info: dict) -> None:
                progress.update(task, completed=info["done"], rate=info["rate"], inflight=info["inflight"])
                now = time.monotonic()
                if now - last[0] > 1.0:
                    last[0] = now
                    live.update(Group(progress, top_table(league.store)))

            summary = league.run(matches=target, on_progress=on_progress)
            live.update(Group(progress, top_table(league.store, fitted=True)))
    finally:
        console.print()  # whatever stops the run (Ctrl-C, an error) prints below the table, not on its last row
    return summary


def learning_signals(m: dict) -> str:
    """The few figures that explain an RL stall, for a training run's progress line: each action part's
    normalised entropy (0: the part never explores), the value's explained variance, the KL to the
    anchor and to the behaviour policy, and the share of each order type played ("" where a trainer
    logs none of them)."""
    out = []
    parts = [f"{k.rsplit('/', 1)[-1]} {v:.2f}" for k, v in m.items() if k.startswith("train/entropy/")]
    if parts:
        out.append("H " + " ".join(parts))
    for key, label in (("train/explained_variance", "EV"), ("train/kl_anchor", "KL-anchor"),
                       ("train/kl_behaviour", "KL-behaviour")):
        if key in m:
            out.append(f"{label} {m[key]:.3f}")
    orders = [f"{k.rsplit('/', 1)[-1]} {v:.2f}" for k, v in m.items() if k.startswith("train/orders/")]
    if orders:
        out.append("orders " + " ".join(orders))
    return " | ".join(out)
