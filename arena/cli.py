"""The `arena` console script: thin; each command parses its options and calls one library function."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import List, Literal, Optional

# Before torch (and its OpenMP runtime) loads: idle OpenMP threads sleep instead of spinning, so a
# trainer, its actor processes and anything else on the machine do not steal each other's cores
# (a spinning neighbour made a learner step up to 70 times slower on 2 cores).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import typer  # noqa: E402
from rich.console import Console
from typer.core import TyperOption
from rich.markup import escape

from arena.errors import ArenaError, bounded_line, damaged_database
from arena.workers import check_workers

# typer 0.29's rich help prints a flag's type as "<bool>", which reads as an option that takes a value
# (and `--payoff true` is then refused): a flag shows no type.
_display_type_rich = TyperOption.display_type_rich
TyperOption.display_type_rich = lambda self, ctx: None if self.is_flag else _display_type_rich(self, ctx)

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Self-play arena: games, agents, leagues, replays.")
envs_app = typer.Typer(no_args_is_help=True, help="Registered games.")
agents_app = typer.Typer(no_args_is_help=True, help="Agent kinds.")
replay_app = typer.Typer(no_args_is_help=True, help="List, view and verify replays.")
league_app = typer.Typer(no_args_is_help=True, help="Run and inspect leagues.")
sc2_app = typer.Typer(no_args_is_help=True, help="StarCraft II without the game: a stand-in that speaks its protocol.")
app.add_typer(envs_app, name="envs")
app.add_typer(agents_app, name="agents")
app.add_typer(replay_app, name="replay")
app.add_typer(league_app, name="league")
app.add_typer(sc2_app, name="sc2")

#: The console's width when the output is a file or a pipe (and COLUMNS is not set): wide enough that
#: no table is ever cut or wrapped there; a terminal keeps its own width.
PIPE_WIDTH = 100_000


def cli_console(stderr: bool = False) -> Console:
    """The CLI's console: a terminal's width on a terminal (or COLUMNS), else `PIPE_WIDTH`, so a table
    written to a file or a pipe is never cut at 80 columns (rich's default there)."""
    stream = sys.stderr if stderr else sys.stdout
    if os.environ.get("COLUMNS") or stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=PIPE_WIDTH)


console = cli_console()


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        console.print(f"arena {version('arena')}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Self-play arena: games, agents, leagues, replays."""


def _plugins(plugins: Optional[List[str]]) -> list[str]:
    """`arena.envs.registry.load_plugins`: each --plugin imported (games and agent kinds); their names."""
    from arena.envs.registry import load_plugins

    return load_plugins(plugins)


PLUGIN_HELP = "Module or .py file that registers more games or agent kinds (repeat)."


@envs_app.command("list")
def envs_list(
    all_: bool = typer.Option(False, "--all", help="Also list every other Gymnasium id."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help=PLUGIN_HELP),
):
    """Every registered game, with players, action kind and source."""
    from arena.envs import describe_games
    from arena.ui.tables import games_table

    _plugins(plugin)
    console.print(games_table(describe_games(include_all=all_)))


@agents_app.command("list")
def agents_list(plugin: Optional[List[str]] = typer.Option(None, "--plugin", help=PLUGIN_HELP)):
    """Every agent kind a spec can name (built-in and plug-in), an example, its options (docs/agents.md)."""
    from arena.agents.specs import describe_agents
    from arena.ui.tables import agents_table

    _plugins(plugin)
    console.print(agents_table(describe_agents()))


PLAYERS_HELP = ("Agent specs, one per seat: repeat -p (-p human -p random) or list them after one --players "
                "(--players human random); `arena agents list` shows the kinds, docs/agents.md describes them.")


@app.command()
def play(
    game: str = typer.Argument(..., help="Game id, e.g. arena/TicTacToe-v0 (see `arena envs list`)."),
    more_players: Optional[List[str]] = typer.Argument(
        None, metavar="AGENT", show_default=False,
        help="More agent specs after the game or after one --players: `arena play GAME --players human random` "
        "is `-p human -p random`."),
    players: Optional[List[str]] = typer.Option(None, "--players", "-p", help=PLAYERS_HELP),
    vs: Optional[str] = typer.Option(None, "--vs", help="Play a league player yourself: LEAGUE_DIR:PLAYER (rated)."),
    seat: int = typer.Option(0, "--seat", help="With --vs: your seat, 0, 1, ... (which one moves first is the "
                             "game's rule: TextArena's Kuhn poker opens with seat 1; said when the match starts)."),
    name: Optional[str] = typer.Option(
        None, "--name", help="With --vs: the name you play under, rated as the player human:NAME (1-24 letters, "
        "digits, '.', '_', '-'), and remembered for next time; a name with games in the league that this "
        "terminal does not remember is confirmed first. Default: the name remembered (in "
        "~/.config/arena/player.json; $ARENA_PLAYER_FILE), else a new guest name."),
    n: int = typer.Option(1, "-n", "--matches", help="Number of matches."),
    seed: int = typer.Option(0, "--seed", help="Seed of the first match; match i uses seed + i."),
    replays: Optional[Path] = typer.Option(None, "--replays", help="Folder to store one replay per match in."),
    workers: int = typer.Option(1, "--workers", help="Worker processes (1: play in this process)."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", help="Seconds per move (none by default)."),
    no_swap: bool = typer.Option(False, "--no-swap", help="Keep seats fixed instead of rotating them."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help=PLUGIN_HELP),
    record: Literal["actions", "text"] = typer.Option(
        "actions", "--record", help="What each replay in --replays holds: actions (what re-simulation needs; replay "
        "show re-simulates the views) or text (each player's observation text too, for imitation learning)."),
    render: Optional[Path] = typer.Option(
        None, "--render", help="Then draw the first match (with -n N too: only the first) into this video, a .gif "
        "or .mp4 by its suffix: its replay re-simulated with the game drawing frames (a game whose env has an "
        "rgb_array render mode, e.g. arena/Prosthetics-v0)."),
    fps: Optional[float] = typer.Option(None, "--fps", help="With --render: frames a second (default: real time, "
                                        "at most 50, keeping every k-th frame)."),
    game_kwarg: Optional[List[str]] = typer.Option(
        None, "--game-kwarg", "-k", help="A setting of the game, KEY=VALUE (repeat; the value is read as YAML), e.g. "
        "-k frame_skip=4 -k time_limit=100 for arena/Prosthetics-v0, or -k rows=5 for an OpenSpiel game's parameter."),
):
    """Play matches between agents (a person at the terminal is `human`); print a summary table."""
    from arena.ui.play import (PlayRequest, check_play_options, play_batch, play_league_player, render_first,
                               show_batch)

    plugins = _plugins(plugin)
    kwargs = _game_kwargs(game_kwarg)
    _check_time_limit(time_limit)
    check_play_options(game, vs=vs, name=name, replays=replays, render=render, fps=fps, game_kwargs=kwargs)
    if vs is not None:
        play_league_player(game, vs, seat=seat, seed=seed, with_players=bool(players), name=name, console=console)
        return
    specs = [s for p in (players or []) + (more_players or []) for s in p.split()]
    req = PlayRequest(game, specs, n=n, seed=seed, replays=replays, workers=workers, time_limit=time_limit,
                      swap_seats=not no_swap, plugins=plugins, record=record, render=render, fps=fps,
                      game_kwargs=kwargs)
    batch = play_batch(req, console)
    show_batch(req, batch, console)
    if render is not None and batch.results:
        render_first(batch.results, seed, render, fps, console)
    if batch.stopped:
        raise typer.Exit(130)


def _check_time_limit(seconds: Optional[float], flag: str = "--time-limit") -> None:
    """Seconds per move: a finite number > 0 (a zero or negative limit forfeits every match at its first move)."""
    import math

    from arena.errors import ConfigError

    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise ConfigError(f"{flag} {seconds:g}: seconds per move must be a number > 0 (leave it out for no limit)")


def _game_kwargs(items: Optional[List[str]]) -> dict:
    """``KEY=VALUE`` settings (values read as YAML scalars) as game kwargs; a malformed one is a ConfigError."""
    import yaml

    from arena.config import load_yaml_text
    from arena.errors import ConfigError, shown

    out: dict = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--game-kwarg {shown(item)}: expected KEY=VALUE, e.g. -k frame_skip=4")
        try:
            out[key.strip()] = load_yaml_text(value) if value.strip() else ""
        except yaml.YAMLError as e:
            raise ConfigError(f"--game-kwarg {shown(item)}: the value is not readable ({e.problem})") from None
        except ConfigError as e:
            raise ConfigError(f"--game-kwarg {shown(item)}: {e}") from None
    return out


@replay_app.command("list")
def replay_list(
    folder: Path = typer.Argument(..., help="Folder of replays (searched recursively), or a league folder."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help=PLUGIN_HELP),
):
    """The replays in a folder or a league (its database and its replay files): id, game, agents, result.

    Ids are printed whole (never cut to the terminal's width): `arena replay show FOLDER ID` and `arena replay verify FOLDER ID` take one, or a unique start of one.

    Unreadable files are listed after the table, one line each (file and why); the exit code is then 1.
    """
    from arena.ui.replay_listing import print_listing, read_listing

    _plugins(plugin)
    listing = read_listing(folder)
    print_listing(listing, console)
    if listing.unreadable:
        raise typer.Exit(1)


@replay_app.command("show")
def replay_show(
    path: Path = typer.Argument(..., help="A replay file, or the folder of replays with ID."),
    replay: Optional[str] = typer.Argument(None, metavar="ID",
                                           help="With a folder: the id `arena replay list` shows, or its start."),
    step: Optional[int] = typer.Option(None, "--step", help="Show only this step (1-based)."),
    all_: bool = typer.Option(False, "--all", help="Print every step and the final position, no prompts."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help=PLUGIN_HELP),
    render: Optional[Path] = typer.Option(
        None, "--render", help="Also draw the match into this video, a .gif or .mp4 by its suffix (games whose env "
        "has an rgb_array render mode): re-simulated, with a table of every 25th step."),
    fps: Optional[float] = typer.Option(None, "--fps", help="With --render: frames a second (default: real time, "
                                        "at most 50, keeping every k-th frame)."),
):
    """Step through a match in the terminal: give a replay file, or a folder and an id.

    Keys: Enter or n: next step; p: previous step; g N: go to step N; f: first step; l: last, the final position after the last move; q: quit.

    The final position comes from re-simulating the match through its game: a plug-in game needs its --plugin (a module a replay names is never imported on its own).

    A drawable single-agent game with continuous moves (arena/Prosthetics-v0), or any drawable game with --render: the match re-simulated, a row every 25 steps (reward, return, the env's text line) and the re-simulated return against the recorded one, instead of the pages (--step and --all still show them).
    """
    from arena.replays import read_replay
    from arena.ui.replay_listing import replay_to_show
    from arena.ui.replay_viewer import view_replay
    from arena.ui.video import check_video_path, frame_plan

    _plugins(plugin)
    if render is not None:
        check_video_path(render)
        frame_plan(None, fps)
    path = replay_to_show(path, replay)
    view_replay(read_replay(path), console, step=None if step is None else step - 1, every_step=all_, render=render,
                fps=fps, shown_as=str(path))


@replay_app.command("verify")
def replay_verify(
    path: Path = typer.Argument(..., help="A replay file or a folder of replays."),
    ids: Optional[List[str]] = typer.Argument(None, metavar="ID",
                                              help="With a folder: only these ids (as `replay list` shows them)."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help=PLUGIN_HELP),
    each: bool = typer.Option(False, "--each", help="A line for every file, the verified ones too."),
):
    """Re-simulate replays (a file, a folder, or a folder and ids) and confirm the same outcome.

    Every file is checked: each one that fails, or can only be checked, gets one line (file and why; with --each every file does), then a count: verified, mismatched, unreadable, refused (over the size cap, or a header naming anything but the game's declared settings), not checked (its game is not loaded: the line names the --plugin to pass). The exit code is 1 if any failed.

    A module a replay names is never imported unless it is passed with --plugin.

    A StarCraft II match cannot be re-simulated (its rules and AI are the game's): it is checked as far as it can be (its orders, its result, its .SC2Replay beside it, the game's build) and counted as checked, not re-simulated.
    """
    from arena.ui.replay_listing import replays_to_verify
    from arena.ui.replay_verification import Verification

    _plugins(plugin)
    check = Verification(replays_to_verify(path, ids or []), each=each)
    for line in check.lines():
        console.print(line, soft_wrap=True)
    console.print(check.summary())
    if not check.ok:
        raise typer.Exit(1)


@league_app.command("run")
def league_run(
    config: Path = typer.Argument(..., help="League YAML, e.g. configs/leagues/quickstart.yaml"),
    directory: Path = typer.Option(..., "--dir", help="League directory (created, or resumed if it exists)."),
    backend: Optional[str] = typer.Option(
        None, "--backend", help="local (process pool) or ray (a Ray of this run, on 127.0.0.1 only, unless --address)."),
    address: Optional[str] = typer.Option(
        None, "--address", help="With --backend ray: join the Ray cluster at this address instead. A Ray cluster "
        "runs the code its drivers send, unencrypted: use it on a trusted network only (docs/security.md)."),
    matches: Optional[int] = typer.Option(None, "--matches", help="Total results to reach (overrides the config)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Worker processes (overrides the config)."),
    serve: bool = typer.Option(False, "--serve", help="Serve the live web pages while the league runs (as `arena serve`)."),
    host: str = typer.Option("127.0.0.1", "--host", help="With --serve: address to listen on."),
    port: int = typer.Option(8000, "--port", help="With --serve: port to listen on."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", help="With --serve: a file holding the token "
                                              "people must give to play (preferred; or set $ARENA_TOKEN)."),
    token: Optional[str] = typer.Option(None, "--token", help="With --serve: the token on the command line (shows "
                                        "in `ps`: prefer --token-file or $ARENA_TOKEN)."),
):
    """Run (or resume) a league: progress bar and a live top-5 table. Ctrl-C is safe; run again to continue."""
    from arena.league.config import check_game_settings, load_league_config
    from arena.ui.progress import ServeOptions, run_league, run_summary

    if workers is not None:  # the flag named in its error, not the config it overrides
        check_workers(workers, "--workers")
    cfg = load_league_config(config, workers=workers, backend=backend)
    check_game_settings(cfg)
    served = ServeOptions(host, port, token, token_file) if serve else None
    summary = run_league(cfg, directory, backend=backend, address=address, matches=matches, serve=served,
                         console=console)
    if summary is None:  # stopped by Ctrl-C
        raise typer.Exit(130)
    console.print(run_summary(summary, directory))


@app.command("serve")
def serve_cmd(
    directory: Path = typer.Argument(..., help="League folder."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: every interface; warns)."),
    port: int = typer.Option(8000, "--port", help="Port to listen on."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", help="A file holding the token people must "
                                              "give to play (preferred; or set $ARENA_TOKEN)."),
    token: Optional[str] = typer.Option(None, "--token", help="The token on the command line (shows in `ps`: "
                                        "prefer --token-file or $ARENA_TOKEN)."),
    move_time_limit: float = typer.Option(300.0, "--move-time-limit", help="Seconds a person has for a move."),
    idle_timeout: float = typer.Option(20.0, "--idle-timeout",
                                       help="Seconds without the page before a person's match is forfeited."),
):
    """Web pages of a league at http://127.0.0.1:8000: live leaderboard, matches, replays, play its players."""
    from arena.league.storage import LeagueStore, no_league_message

    if not (directory / "league.db").exists():
        raise ArenaError(no_league_message(directory))

    LeagueStore(directory, create=False).close()  # a damaged league.db: one line now, not a server that fails
    from arena.ui.web import PlaySettings, read_token, serve

    serve(directory, host, port, read_token(token, token_file), echo=lambda line: console.print(escape(line)),
          play=PlaySettings(move_time_limit=move_time_limit, idle_timeout=idle_timeout))


@league_app.command("status")
def league_status(directory: Path = typer.Argument(..., help="League folder.")):
    """Players, roles, matches played/queued, recent results and events."""
    from arena.league.manager import open_league
    from arena.league.storage import league_db_errors
    from arena.ui.views import status_view

    with league_db_errors(directory / "league.db"):
        console.print(status_view(open_league(directory)))


@league_app.command("report")
def league_report(directory: Path = typer.Argument(..., help="League folder."),
                  out: Optional[Path] = typer.Option(None, "--out", help="HTML file (default: DIR/report.html).")):
    """One self-contained HTML page: tables, plots, links to replays."""
    from arena.league.manager import open_league
    from arena.league.storage import league_db_errors
    from arena.ui.report import write_report

    with league_db_errors(directory / "league.db"):
        path = write_report(open_league(directory), out)
    console.print(f"Report: {path}")


@app.command()
def ratings(
    directory: Path = typer.Argument(..., help="League (or training run) folder."),
    game: Optional[str] = typer.Option(None, "--game", help="One game's ratings (default: all games, then each)."),
    payoff: bool = typer.Option(False, "--payoff", help="Show the payoff matrix (win rates) with alpha-rank."),
    plot: bool = typer.Option(False, "--plot", help="Write PNGs: rating curves and payoff heatmaps."),
    recompute: bool = typer.Option(False, "--recompute", help="Recompute from the match log and compare."),
    method: str = typer.Option("bt", "--method", help="bt: ratings fitted to every result (Bradley-Terry with "
                               "draws, 95% bootstrap intervals; payoffs first in payoff games); elo or "
                               "openskill: the live tables."),
    resamples: int = typer.Option(1000, "--resamples", min=10, max=100_000,
                                  help="Bootstrap resamples of the fitted table's intervals."),
    exploitability: bool = typer.Option(False, "--exploitability", help="NashConv (OpenSpiel) of each player "
                                        "whose strategy can be read (cfr, tabular, policy:, random) in small "
                                        "poker games, beside its rating."),
    wide: bool = typer.Option(False, "--wide", help="Every column of the rating tables, in parts in a narrow "
                              "terminal (there by default: rank, player, rating with its interval, games)."),
):
    """Ratings fitted to every result, with 95% intervals, provisional players and payoffs.

    Bradley-Terry with draws, 95% bootstrap intervals on the ratings and the ranks, provisional players ranked last, the payoff against the Nash mixture and the mean payoff first for games scored by their payoffs (poker), the live Elo beside; `--method elo|openskill` for the live tables. For one-player games: the mean return on the seeds every player finished."""
    from arena.league.storage import league_db_errors
    from arena.ui.ratings_view import check_method, rated_league, ratings_views
    from arena.ui.views import recompute_view

    check_method(method)
    with league_db_errors(directory / "league.db"):
        store = rated_league(directory, game)
        if recompute:
            view, equal = recompute_view(store)
            console.print(view)
            if not equal:
                raise typer.Exit(1)
            return
        for view in ratings_views(store, game, width=console.width, payoff=payoff, method=method,
                                  resamples=resamples, exploitability=exploitability,
                                  plots=directory / "plots" if plot else None, wide=wide):
            console.print(view)


@app.command()
def train(
    config: Path = typer.Argument(..., help="Training YAML, e.g. configs/train/spiral_tictactoe_tiny.yaml"),
    directory: Path = typer.Option(..., "--dir", help="Run folder (resumed from its latest checkpoint if it exists)."),
    model: Optional[str] = typer.Option(None, "--model", help="tiny, smollm2 or a local Hugging Face folder."),
    loss: Optional[str] = typer.Option(None, "--loss", help="ppo_clip, dppo_binary_tv, dppo_topk_kl, drpo, ..."),
    iterations: Optional[int] = typer.Option(None, "--iterations", help="Train to this iteration (overrides the config)."),
    parallel: Optional[str] = typer.Option(None, "--parallel", help="The learner's step on several processes: "
                                           "pipeline (language models), odc (sharded, on-demand), fsdp (FSDP2), "
                                           "none."),
    world_size: Optional[int] = typer.Option(None, "--world-size", help="Ranks for --parallel odc or fsdp."),
    stages: Optional[int] = typer.Option(None, "--stages", help="Pipeline ranks for --parallel pipeline."),
    schedule: Optional[str] = typer.Option(None, "--schedule", help="Pipeline schedule: gpipe, 1f1b, "
                                           "interleaved_1f1b, zb1p, zbv, dualpipev, vhalf, vmin, "
                                           "vmin8, vmin12."),
    microbatches: Optional[int] = typer.Option(None, "--microbatches", help="Microbatches per minibatch (pipeline) "
                                               "or per rank (odc, fsdp)."),
    vocab_parallel: bool = typer.Option(False, "--vocab-parallel", help="Pipeline: vocabulary layers over every rank."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help=PLUGIN_HELP),
):
    """Train the learner a config names (its `trainer:` key: spiral, scc, ppo, mixed, rllib_ppo).

    An existing run folder resumes, under any --parallel setting. Ctrl-C finishes the iteration, saves it and stops (a second Ctrl-C stops at once); the same command resumes."""
    from arena.ui.training import TrainRequest, make_training, train_with_progress, training_summary

    _plugins(plugin)
    training = make_training(TrainRequest(config, directory, model=model, loss=loss, iterations=iterations,
                                          parallel=parallel, world_size=world_size, stages=stages,
                                          schedule=schedule, microbatches=microbatches, vocab_parallel=vocab_parallel))
    final = train_with_progress(training, console)
    if final is None:  # stopped by Ctrl-C
        raise typer.Exit(130)
    for line in training_summary(final, directory):
        console.print(line)


@app.command()
def demo(
    out: str = typer.Option("runs/demo", "--dir", help="League directory (resumed if it exists)."),
    matches: Optional[int] = typer.Option(None, "--matches", help="Total matches (default: the config's)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Worker processes (default: the config's)."),
):
    """The quickstart league on embedded defaults: ratings, payoff, plots and an HTML report."""
    from arena.demo import DemoConfig, run_demo

    if workers is not None:
        check_workers(workers, "--workers")
    run_demo(DemoConfig(out=out, matches=matches, workers=workers), console)


@sc2_app.command("stand-in")
def sc2_stand_in(folder: Path = typer.Argument(..., help="A new or empty folder to lay the stand-in game out in.")):
    """Lay out a stand-in StarCraft II at FOLDER (a toy world that speaks the game's protocol) to try sc2/ ids
    without the game: SC2PATH=FOLDER (docs/sc2.md)."""
    from arena.envs.sc2.install import lay_out_stand_in, stand_in_lines

    for line in stand_in_lines(lay_out_stand_in(folder)):
        console.print(line, soft_wrap=True, markup=False)


def main() -> None:
    # Ctrl-C / SIGINT stops any command safely even when the parent started us with SIGINT ignored
    # (a background job of a non-interactive shell, a test runner's worker): Python keeps an
    # inherited SIG_IGN, which would let a league or `play -n 5000` run on to its end.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        app()
    except ArenaError as e:
        _fail(e)
    except sqlite3.DatabaseError as e:  # a damaged league.db met where no command named the file
        damaged = damaged_database(e, "a league database read by this command")
        if damaged is None:
            raise
        _fail(damaged)


def _fail(e: ArenaError) -> None:
    """A user error: one line on stderr, exit code 2. Values in messages are cut where they are shown
    (`arena.errors.shown`); this cuts whatever still got through (`arena.errors.bounded_line`)."""
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(bounded_line(str(e)))}")
    sys.exit(2)


if __name__ == "__main__":
    main()
