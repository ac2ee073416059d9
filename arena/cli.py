"""The `arena` console script: thin; each command parses its options and calls one library function."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from arena.errors import ArenaError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Self-play arena: games, agents, leagues, replays.")
envs_app = typer.Typer(no_args_is_help=True, help="Registered games.")
replay_app = typer.Typer(no_args_is_help=True, help="List, view and verify replays.")
league_app = typer.Typer(no_args_is_help=True, help="Run and inspect leagues.")
app.add_typer(envs_app, name="envs")
app.add_typer(replay_app, name="replay")
app.add_typer(league_app, name="league")

console = Console()


def _plugins(plugins: Optional[List[str]]) -> None:
    from arena.envs import load_plugin

    for mod in plugins or []:
        load_plugin(mod)


@envs_app.command("list")
def envs_list(
    all_: bool = typer.Option(False, "--all", help="Also list every other Gymnasium id."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help="Module that registers more games."),
):
    """Every registered game, with players, action kind and source."""
    from arena.envs import describe_games
    from arena.ui.tables import games_table

    _plugins(plugin)
    console.print(games_table(describe_games(include_all=all_)))


@app.command()
def play(
    game: str = typer.Argument(..., help="Game id, e.g. arena/TicTacToe-v0"),
    players: Optional[List[str]] = typer.Option(None, "--players", "-p",
                                                help="Agent specs, one per seat (repeat or space-separate)."),
    vs: Optional[str] = typer.Option(None, "--vs", help="Play a league player yourself: LEAGUE_DIR:PLAYER (rated)."),
    seat: int = typer.Option(0, "--seat", help="With --vs: your seat."),
    n: int = typer.Option(1, "-n", "--matches", help="Number of matches."),
    seed: int = typer.Option(0, "--seed"),
    replays: Optional[Path] = typer.Option(None, "--replays", help="Folder to store replays in."),
    workers: int = typer.Option(1, "--workers", help="Worker processes."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", help="Seconds per move."),
    no_swap: bool = typer.Option(False, "--no-swap", help="Keep seats fixed instead of rotating them."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help="Module that registers more games."),
):
    """Play matches between agents (a human at the terminal is `human`)."""
    from arena.match.batch import play_matches, summarize
    from arena.ui.tables import summary_table

    _plugins(plugin)
    if vs is not None:
        from arena.league.play import play_against

        directory, _, player = vs.rpartition(":")
        if not directory or not player:
            raise typer.BadParameter("--vs takes LEAGUE_DIR:PLAYER, e.g. runs/quick:mcts")
        out = play_against(directory, player, game, seat=seat, seed=seed)
        who = "draw" if out["draw"] else (f"{out['players'][out['winner']]} wins" if out["winner"] is not None else "-")
        console.print(f"[bold]{game}[/]: {who}; returns {out['returns']}; {out['outcome']}")
        console.print("Elo now: " + ", ".join(f"{k} {v:.0f}" for k, v in out["elo"].items() if v is not None))
        console.print(f"Replay: {out['replay']}")
        return
    if not players:
        raise typer.BadParameter("give --players (one agent spec per seat) or --vs LEAGUE_DIR:PLAYER")
    specs = [s for p in players for s in p.split()]
    if "human" in specs and workers > 1:
        raise typer.BadParameter("a human player needs --workers 1")
    results = play_matches(game, specs, n, seed=seed, swap_seats=not no_swap, workers=workers,
                           replay_dir=replays, move_time_limit=time_limit, plugins=plugin or ())
    if n == 1:
        r = results[0]
        who = "draw" if r.draw else (f"{r.agents[r.winner]} (seat {r.winner}) wins" if r.winner is not None else "-")
        console.print(f"[bold]{game}[/]: {who}; returns {r.returns}; {r.moves} moves; {r.outcome} {r.reason}")
    console.print(summary_table(f"{game}: {n} matches", summarize(results, specs)))
    if replays is not None:
        console.print(f"Replays in {replays}")


@replay_app.command("list")
def replay_list(folder: Path):
    """The replays in a folder: id, game, agents, result."""
    from rich.table import Table

    from arena.replays import list_replays, read_replay

    t = Table(title=str(folder), title_justify="left")
    for c in ("replay", "game", "agents", "returns", "moves", "outcome"):
        t.add_column(c)
    paths = list_replays(folder)
    for p in paths:
        r = read_replay(p)
        t.add_row(str(p.relative_to(folder)), r.game_id, " vs ".join(r.header["agents"]),
                  " ".join(f"{x:+g}" for x in r.result["returns"]), str(r.result["moves"]), r.result["outcome"])
    console.print(t)
    console.print(f"{len(paths)} replays")


@replay_app.command("show")
def replay_show(
    path: Path,
    step: Optional[int] = typer.Option(None, "--step", help="Show only this step (1-based)."),
    all_: bool = typer.Option(False, "--all", help="Print every step, no prompts."),
):
    """Step through a match in the terminal (n/p/g N/q)."""
    from arena.replays import read_replay
    from arena.ui.replay_viewer import show

    r = read_replay(path)
    show(r, console, step=None if step is None else step - 1, interactive=not all_ and step is None)


@replay_app.command("verify")
def replay_verify(path: Path):
    """Re-simulate replays (a file or a folder) and confirm the same outcome."""
    from arena.replays import list_replays
    from arena.match.verify import verify_replay

    paths = list_replays(path) if path.is_dir() else [path]
    bad = 0
    for p in paths:
        rep = verify_replay(p)
        status = "[green]OK[/]" if rep.ok else "[red]MISMATCH[/]"
        console.print(f"{status} {p} ({rep.steps} steps)")
        for d in rep.differences:
            console.print(f"   {d}")
        for w in rep.warnings:
            console.print(f"   [yellow]warning[/]: {w}")
        bad += not rep.ok
    if bad:
        raise typer.Exit(1)


@league_app.command("run")
def league_run(
    config: Path = typer.Argument(..., help="League YAML, e.g. configs/leagues/quickstart.yaml"),
    directory: Path = typer.Option(..., "--dir", help="League directory (created, or resumed if it exists)."),
    backend: Optional[str] = typer.Option(None, "--backend", help="local (process pool) or ray."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (with --backend ray)."),
    matches: Optional[int] = typer.Option(None, "--matches", help="Total results to reach (overrides the config)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Worker processes (overrides the config)."),
):
    """Run (or resume) a league: progress bar and a live top-5 table. Ctrl-C is safe; run again to continue."""
    from arena.league.config import load_league_config
    from arena.ui.progress import run_with_progress

    cfg = load_league_config(config, workers=workers, backend=backend)
    # Ctrl-C / SIGINT stops the run safely even when the parent started us with SIGINT ignored
    # (a background job of a non-interactive shell, a test runner's worker): Python keeps an
    # inherited SIG_IGN, which would let the league run on to its budget.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        summary = run_with_progress(cfg, directory, backend=backend, address=address, matches=matches, console=console)
    except KeyboardInterrupt:
        console.print(f"[yellow]stopped[/]: run the same command again to continue ({directory})")
        raise typer.Exit(130)
    console.print(f"{summary['new']} new matches in {summary['seconds']:.1f}s ({summary['matches_per_s']:.1f}/s); "
                  f"{summary['results']} results in {directory}"
                  + (f"; recovered {summary['committed_from_replay']} from replays, re-queued {summary['requeued']}"
                     if summary["committed_from_replay"] or summary["requeued"] else ""))


@league_app.command("status")
def league_status(directory: Path):
    """Players, roles, matches played/queued, recent results and events."""
    from arena.league.manager import open_league
    from arena.ui.views import status_view

    console.print(status_view(open_league(directory)))


@league_app.command("report")
def league_report(directory: Path, out: Optional[Path] = typer.Option(None, "--out")):
    """One self-contained HTML page: tables, plots, links to replays."""
    from arena.league.manager import open_league
    from arena.ui.report import write_report

    path = write_report(open_league(directory), out)
    console.print(f"Report: {path}")


@app.command()
def ratings(
    directory: Path,
    game: Optional[str] = typer.Option(None, "--game", help="One game's ratings (default: all games, then each)."),
    payoff: bool = typer.Option(False, "--payoff", help="Show the payoff matrix (win rates) with alpha-rank."),
    plot: bool = typer.Option(False, "--plot", help="Write PNGs: rating curves and payoff heatmaps."),
    recompute: bool = typer.Option(False, "--recompute", help="Recompute from the match log and compare."),
):
    """Elo and OpenSkill tables (mu, sigma, conservative), games and win rates."""
    from arena.league.manager import open_league
    from arena.league.storage import OVERALL
    from arena.ui.views import payoff_view, ratings_per_game_views, ratings_view, recompute_view

    store = open_league(directory)
    g = game or OVERALL
    if recompute:
        view, equal = recompute_view(store)
        console.print(view)
        if not equal:
            raise typer.Exit(1)
        return
    if payoff:
        console.print(payoff_view(store, g))
    else:
        console.print(ratings_view(store, g))
        if game is None:
            for v in ratings_per_game_views(store):
                console.print(v)
    if plot:
        from arena.ui.plots import plot_all

        for p in plot_all(store, Path(directory) / "plots"):
            console.print(f"wrote {p}")


@app.command()
def train(
    config: Path = typer.Argument(..., help="Training YAML, e.g. configs/train/spiral_tictactoe_tiny.yaml"),
    directory: Path = typer.Option(..., "--dir", help="Run folder (resumed from its latest checkpoint if it exists)."),
    model: Optional[str] = typer.Option(None, "--model", help="tiny, smollm2 or a local Hugging Face folder."),
    loss: Optional[str] = typer.Option(None, "--loss", help="ppo_clip, dppo_binary_tv, dppo_topk_kl, drpo, ..."),
    iterations: Optional[int] = typer.Option(None, "--iterations"),
):
    """Train the learner a config names (its `trainer:` key; today `spiral`: SPIRAL-style self-play RL
    for a language-model player, fed by its own league). An existing run folder resumes."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from arena.trainers.registry import read_train_config

    entry, cfg = read_train_config(config, model=model, loss=loss, iterations=iterations)
    trainer = entry.builder()(cfg, directory)
    cols = (TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
            TimeElapsedColumn())
    try:
        with Progress(*cols, console=console) as progress:
            task = progress.add_task("train", total=cfg.iterations, completed=trainer.iteration, info="")

            def show(it, total, m):
                wr = next((f"win {v:.2f} vs {k.split('/')[-1]}" for k, v in m.items() if k.startswith("eval/win_rate")), "")
                progress.update(task, completed=it, info=f"return {m.get('train/return', 0):+.2f} "
                                f"invalid {m.get('train/invalid_rate', 0):.2f} {wr}")

            final = trainer.run(progress=show)
    finally:
        trainer.close()
    for k in sorted(final):
        if k.startswith("eval/"):
            console.print(f"{k}: {final[k]:.3f}")
    best_json = directory / "best.json"
    if best_json.exists():
        best = json.loads(best_json.read_text())
        line = f"best: iteration {best['iteration']} ({best['metric']} {best['value']:.3f} in the run"
        if "confirm" in best:
            line += f"; {best['confirm']['win_rate']:.3f} on {best['confirm']['games']} fresh games"
        console.print(line + f") -> {directory}/best")
    console.print(f"Run folder: {directory} (latest checkpoint: {directory}/latest; curves: {directory}/curves.png; "
                  f"tensorboard --logdir {directory})")


@app.command()
def demo(
    out: str = typer.Option("runs/demo", "--dir", help="League directory (resumed if it exists)."),
    matches: Optional[int] = typer.Option(None, "--matches", help="Total matches (default: the config's)."),
    workers: Optional[int] = typer.Option(None, "--workers"),
):
    """The quickstart league on embedded defaults: ratings, payoff, plots and an HTML report."""
    from arena.demo import DemoConfig, run_demo

    run_demo(DemoConfig(out=out, matches=matches, workers=workers), console)


def main() -> None:
    try:
        app()
    except ArenaError as e:
        Console(stderr=True).print(f"[red]error:[/] {e}")
        sys.exit(2)


if __name__ == "__main__":
    main()
