"""The main job on embedded defaults: the quickstart league (fixed agents on seven games, four of them
poker and one negotiation, local process pool, SQLite, replays), then its fitted ratings (payoffs first
in the payoff games), payoff matrices, plots and report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

QUICKSTART = Path(__file__).resolve().parent.parent / "configs" / "leagues" / "quickstart.yaml"


@dataclass
class DemoConfig:
    out: str = "runs/demo"
    config: str = str(QUICKSTART)
    matches: int | None = None
    workers: int | None = None


def run_demo(cfg: DemoConfig, console: Console | None = None) -> dict:
    from arena.league.config import load_league_config
    from arena.ui.progress import run_with_progress
    from arena.league.manager import open_league
    from arena.ui.plots import plot_all
    from arena.ui.report import write_report
    from arena.league.leaderboard import game_scorings
    from arena.ui.views import fitted_per_game_views, fitted_view, payoff_view

    console = console or Console()
    league_cfg = load_league_config(cfg.config, workers=cfg.workers)
    console.print(f"[bold]League '{league_cfg.name}'[/]: {', '.join(league_cfg.game_ids)}")
    summary = run_with_progress(league_cfg, cfg.out, matches=cfg.matches, console=console)
    console.print()
    store = open_league(cfg.out)
    console.print(fitted_view(store))
    for view in fitted_per_game_views(store):
        console.print(view)
    console.print(payoff_view(store))
    for game, scoring in game_scorings(store).items():  # a game scored by its payoffs (poker): its payoff matrix
        if scoring == "payoff":
            console.print(payoff_view(store, game))
    plots = plot_all(store, Path(cfg.out) / "plots")
    report = write_report(store)
    console.print(f"{summary['results']} matches, {summary['new']} new in {summary['seconds']:.1f}s "
                  f"({summary['matches_per_s']:.1f} matches/s)")
    console.print(f"Replays: {store.db_path}   (arena replay list {cfg.out})")
    console.print(f"Plots:   {plots[0].parent}")
    console.print(f"Report:  {report}   (open it in a browser)")
    console.print(f"Browser: arena serve {cfg.out}   (http://127.0.0.1:8000: live leaderboard, replays, play)")
    console.print(f"More:    arena league status {cfg.out} · arena ratings {cfg.out} --payoff · "
                  f"arena play arena/TicTacToe-v0 --vs {cfg.out}:first")
    return summary
