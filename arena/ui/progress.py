"""Running a league in the terminal: a progress bar with matches/s and a live top-5 table, the web
pages served meanwhile (`league run --serve`); and the figures a training run's progress line shows."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass
class ServeOptions:
    """`league run --serve`'s web server: where it listens and the token people give to play."""

    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    token_file: Path | None = None


def run_league(cfg: LeagueConfig, directory: Path, *, backend: str | None = None, address: str | None = None,
               matches: int | None = None, serve: ServeOptions | None = None,
               console: Console | None = None) -> dict | None:
    """`arena league run`: run (or resume) the league at `directory` to `matches` results with a
    progress bar, its web pages served meanwhile with `serve`. The summary of `League.run`, or None
    when Ctrl-C stopped the run (said on the console: the same command continues it).

    The folder's writer lock is taken first and held until the run ends: one writer per league, and
    the server (which reads the league) starts only once it is held."""
    from arena.config import writable_folder
    from arena.errors import ArenaError
    from arena.league.lock import writer_lock
    from arena.league.storage import league_db_errors

    console = console or Console()
    if matches is not None and matches < 0:
        raise ArenaError(f"--matches {matches}: the total of results to reach must be >= 0")
    writable_folder(directory, "--dir")
    held = writer_lock(directory)  # noqa: F841 (kept referenced: the lock is released with its last reference)
    server = None
    try:
        with league_db_errors(directory / "league.db"):
            server = serve_while_running(cfg, directory, serve, console) if serve is not None else None
            return run_with_progress(cfg, directory, backend=backend, address=address, matches=matches,
                                     console=console)
    except KeyboardInterrupt:
        # (a new line first on a terminal: it has echoed ^C where the cursor was)
        console.print(("\n" if console.is_terminal else "") + f"[yellow]stopped[/]: run the same command again "
                      f"to continue ({directory})")
        return None
    finally:
        if server is not None:
            server.stop()


def serve_while_running(cfg: LeagueConfig, directory: Path, serve: ServeOptions, console: Console) -> Any:
    """`league run --serve`: the league's store made first (the server reads it), then the server on a
    thread; the running server (its `stop()` ends it)."""
    from rich.markup import escape

    from arena.league.storage import LeagueStore
    from arena.ui.web import host_warning, read_token, start_in_background

    token = read_token(serve.token, serve.token_file)
    LeagueStore(directory, elo_k=cfg.elo_k, payoff_decay=cfg.payoff_decay).close()

    warn = host_warning(serve.host)
    if warn:
        console.print(f"[yellow]{escape(warn)}[/]")
    server = start_in_background(directory, serve.host, serve.port, token)
    console.print(f"serving {directory} at {server.url}" + (" (token required to play)" if token else ""))
    return server


def run_summary(summary: dict, directory: Path) -> str:
    """The line a finished league run ends with: new matches, their rate, and any recovered or re-queued."""
    return (f"{summary['new']} new matches in {summary['seconds']:.1f}s ({summary['matches_per_s']:.1f}/s); "
            f"{summary['results']} results in {directory}"
            + (f"; recovered {summary['committed_from_replay']} from replays, re-queued {summary['requeued']}"
               if summary["committed_from_replay"] or summary["requeued"] else ""))


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

