"""The `arena` console script: thin; each command parses its options and calls one library function."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import sys
import time
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

# typer 0.29's rich help prints a flag's type as "<bool>", which reads as an option that takes a value
# (and `--payoff true` is then refused): a flag shows no type.
_display_type_rich = TyperOption.display_type_rich
TyperOption.display_type_rich = lambda self, ctx: None if self.is_flag else _display_type_rich(self, ctx)

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Self-play arena: games, agents, leagues, replays.")
envs_app = typer.Typer(no_args_is_help=True, help="Registered games.")
replay_app = typer.Typer(no_args_is_help=True, help="List, view and verify replays.")
league_app = typer.Typer(no_args_is_help=True, help="Run and inspect leagues.")
app.add_typer(envs_app, name="envs")
app.add_typer(replay_app, name="replay")
app.add_typer(league_app, name="league")

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
    """Import each plug-in (a module name or a path to a .py file) and return their module names.

    A module name is an installed module, else the module of that name in the working folder; a file
    path loads that file. Only the named module is taken from a folder (`arena.usercode`): the working
    folder is never put on the import path. Worker processes find the same modules.
    """
    import os

    from arena.envs import load_plugin

    names = []
    for item in plugins or []:
        path = Path(item)
        if item.endswith(".py") or os.sep in item:
            if not path.is_file():
                raise ArenaError(f"--plugin {item}: no such file")
            folder, name = str(path.resolve().parent), path.stem
        else:
            folder, name = None, item
        load_plugin(name, folder)
        names.append(name)
    return names


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


PLAYERS_HELP = ("Agent specs, one per seat: repeat -p (-p human -p random) or list them after one --players "
                "(--players human random); see the agents table in the README.")


@app.command()
def play(
    game: str = typer.Argument(..., help="Game id, e.g. arena/TicTacToe-v0 (see `arena envs list`)."),
    more_players: Optional[List[str]] = typer.Argument(
        None, metavar="AGENT", show_default=False,
        help="More agent specs after the game or after one --players: `arena play GAME --players human random` "
        "is `-p human -p random`."),
    players: Optional[List[str]] = typer.Option(None, "--players", "-p", help=PLAYERS_HELP),
    vs: Optional[str] = typer.Option(None, "--vs", help="Play a league player yourself: LEAGUE_DIR:PLAYER (rated)."),
    seat: int = typer.Option(0, "--seat", help="With --vs: your seat (0 moves first)."),
    name: Optional[str] = typer.Option(
        None, "--name", help="With --vs: the name you play under, rated as the player human:NAME (1-24 letters, "
        "digits, '.', '_', '-'), and remembered for next time. Default: the name remembered (in "
        "~/.config/arena/player.json; $ARENA_PLAYER_FILE), else a new guest name."),
    n: int = typer.Option(1, "-n", "--matches", help="Number of matches."),
    seed: int = typer.Option(0, "--seed", help="Seed of the first match; match i uses seed + i."),
    replays: Optional[Path] = typer.Option(None, "--replays", help="Folder to store one replay per match in."),
    workers: int = typer.Option(1, "--workers", help="Worker processes (1: play in this process)."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", help="Seconds per move (none by default)."),
    no_swap: bool = typer.Option(False, "--no-swap", help="Keep seats fixed instead of rotating them."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help="Module or .py file that registers more games."),
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
    from arena.match.batch import play_matches, summarize
    from arena.ui.tables import summary_table

    plugins = _plugins(plugin)
    kwargs = _game_kwargs(game_kwarg)
    _check_time_limit(time_limit)
    if replays is not None:
        from arena.config import writable_folder

        writable_folder(replays, "--replays")
    if kwargs and vs is not None:
        raise ArenaError("--game-kwarg sets up matches played with -p agents; a league's games keep its own settings")
    if render is not None:  # refused before any match is played
        from arena.ui.video import check_drawable, check_video_path, frame_plan

        check_video_path(render)
        frame_plan(None, fps)
        if vs is not None:
            raise ArenaError("--render draws matches played with -p agents: drop it with --vs")
        check_drawable(game, kwargs)
    if name is not None and vs is None:
        raise ArenaError("--name is the name you play a league player under: use it with --vs LEAGUE_DIR:PLAYER")
    if vs is not None:
        _play_league_player(game, vs, seat, seed, bool(players), name)
        return
    specs = [s for p in (players or []) + (more_players or []) for s in p.split()]
    if not specs:
        raise ArenaError("give the agents, one spec per seat (-p human -p random), or --vs LEAGUE_DIR:PLAYER")
    if n < 1:
        raise ArenaError(f"-n must be at least 1, got {n}")
    human = "human" in specs
    if human and workers > 1:
        raise ArenaError("a human player needs --workers 1 (drop --workers)")
    done: list = []
    stopped = False
    on_result = done.append
    progress = contextlib.nullcontext()
    if n > 1 and not human:  # a person's game keeps the terminal to itself
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]:.1f} matches/s"), TimeElapsedColumn(), console=console,
                            transient=True)
        task = progress.add_task(game, total=n, rate=0.0)
        start = time.perf_counter()

        def on_result(res) -> None:
            done.append(res)
            progress.update(task, completed=len(done), rate=len(done) / max(time.perf_counter() - start, 1e-9))
    if render is not None:  # keep the first match's replay (match i has seed + i), none of the others'
        kept = on_result

        def on_result(res, kept=kept) -> None:
            if res.seed != seed:
                res.replay = None
            kept(res)
    try:
        with progress:
            play_matches(game, specs, n, seed=seed, swap_seats=not no_swap, workers=workers, replay_dir=replays,
                         game_kwargs=kwargs,
                         move_time_limit=time_limit, plugins=plugins, on_result=on_result,
                         record=record if replays is not None or render is not None else False)
    except KeyboardInterrupt:
        stopped = True
    results = sorted(done, key=lambda r: r.match_id)
    if stopped or len(results) < n:
        # (a new line first: the terminal has echoed ^C where the cursor was)
        console.print(("\n" if stopped else "") + f"[yellow]stopped after {len(results)} of {n} matches[/]"
                      + ("; the finished ones are below" if results else ""))
    if not results:
        if stopped:
            raise typer.Exit(130)
        return
    if n == 1:
        r = results[0]
        who = "draw" if r.draw else (f"{r.agents[r.winner]} (seat {r.winner}) wins" if r.winner is not None else "-")
        if len(r.returns) == 1:  # a one-player task: no one to win against
            who = "episode over"
        returns = ", ".join(f"{float(x):.6g}" for x in r.returns)
        why = f" ({r.reason})" if r.reason else ""
        console.print(f"[bold]{escape(game)}[/]: {escape(who)}; returns {returns}; {r.moves} moves; "
                      f"{r.outcome}{escape(why)}", soft_wrap=True)
    count = f"{len(results)} match{'es' if len(results) != 1 else ''}"
    from arena.ui.views import fit_width

    console.print(fit_width(summary_table(f"{game}: {count}", summarize(results, specs)), console.width, keep=1))
    if replays is not None:
        console.print(f"Replays in {replays}" + (f" ({len(results)} files)" if not stopped else
                                                  " (the finished matches', and any a worker wrote as it stopped)"))
    if render is not None:
        _render_first(results, seed, render, fps)
    if stopped:
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


def _render_first(results: list, seed: int, render: Path, fps: Optional[float]) -> None:
    from arena.replays import read_replay
    from arena.ui.video import render_replay

    first = next((r for r in results if r.seed == seed), None)
    if first is None:
        console.print(f"[yellow]no video[/]: the first match (seed {seed}) did not finish")
        return
    replay = first.replay if first.replay is not None else read_replay(first.replay_path)
    video, resim = render_replay(replay, render, fps)
    rounded = lambda xs: ", ".join(f"{float(x):.6g}" for x in xs)  # noqa: E731
    same = ("equal to the played" if resim.matches()
            else f"[red]differs from the played {rounded(resim.recorded_returns)}[/]")
    console.print(f"Video of match {first.match_id}: {escape(video.describe())}; re-simulated return "
                  f"{rounded(resim.returns)} ({same})", soft_wrap=True)


def _play_league_player(game: str, vs: str, seat: int, seed: int, with_players: bool,
                        name: Optional[str] = None) -> None:
    """You at the terminal against a league player, as the person `name` (--name; else the name
    remembered, else a new guest name), remembered for the next time."""
    from arena.league.play import (BadName, check_name, person_of, play_against, player_file, remember_name,
                                   remembered_name)

    if with_players:
        raise ArenaError("--vs plays you against a league player: drop -p/--players")
    directory, _, player = vs.rpartition(":")
    if not directory or not player:
        raise ArenaError("--vs takes LEAGUE_DIR:PLAYER, e.g. --vs runs/quick:mcts")
    given = name is not None
    if given:
        try:
            name = check_name(name)
        except BadName as e:
            raise ArenaError(f"--name: {e}") from None
    else:
        name = remembered_name()  # None: a new guest name, remembered once the match is scheduled

    def started(human: str) -> None:
        person = person_of(human) or human
        console.print(f"You play as [bold]{escape(person)}[/], rated as the player {escape(human)}.", soft_wrap=True)
        if person != remembered_name():
            try:
                where = remember_name(person)
            except OSError as e:
                console.print(f"[yellow]could not remember your name in {escape(str(player_file()))}[/] ({escape(str(e))}): "
                              "give --name next time", soft_wrap=True)
            else:
                console.print(f"(remembered in {escape(str(where))}: --name NAME to play under another name)",
                              soft_wrap=True)

    try:
        out = play_against(directory, player, game, seat=seat, seed=seed, name=name, on_start=started)
    except BadName as e:  # the league's own checks (a league player's name, a name taken in other case)
        raise ArenaError(f"--name: {e}" if given else f"{e} (the name remembered in {player_file()}): give "
                         "--name NAME") from None
    who = "draw" if out["draw"] else (f"{out['players'][out['winner']]} wins" if out["winner"] is not None else "-")
    console.print(f"[bold]{escape(game)}[/]: {escape(who)}; returns {out['returns']}; {out['outcome']}", soft_wrap=True)
    change = out.get("elo_change") or {}
    console.print("Elo now: " + ", ".join(
        f"{escape(k)} {v:.0f}" + (f" ({change[k]:+.1f} by this match)" if change.get(k) is not None else "")
        for k, v in out["elo"].items() if v is not None), soft_wrap=True)
    console.print(f"Replay: {out['replay']}")


@replay_app.command("list")
def replay_list(
    folder: Path = typer.Argument(..., help="Folder of replays (searched recursively), or a league folder."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help="Module that registers plug-in games (repeat)."),
):
    """The replays in a folder or a league (its database and its replay files): id, game, agents, result.

    Ids are printed whole (never cut to the terminal's width): `arena replay show FOLDER ID` and `arena replay verify FOLDER ID` take one, or a unique start of one.

    Unreadable files are listed after the table, one line each (file and why); the exit code is then 1.
    """
    from rich.table import Table
    from rich.text import Text

    from arena.envs.registry import is_registered
    from arena.errors import ReplayError
    from arena.replays import list_replays, load_hint, read_replay, replay_id

    _plugins(plugin)
    paths = list_replays(folder)
    rows, bad, missing = [], [], {}
    for p in paths:
        try:
            r = read_replay(p)
            row = [replay_id(p, folder), r.game_id, " vs ".join(map(str, r.header["agents"])),
                   " ".join(f"{float(x):+g}" for x in r.result["returns"]), str(r.result["moves"]),
                   str(r.result["outcome"])]
        except (ReplayError, TypeError, ValueError) as e:
            bad.append(str(e) if isinstance(e, ReplayError) else f"{p}: not a valid replay ({e})")
            continue
        rows.append(row)
        if r.game_id not in missing:
            missing[r.game_id] = None if is_registered(r.game_id) else load_hint(r.header)
    width = max((len(r[0]) for r in rows), default=2)
    if console.width >= width + 50:
        t = Table(title=str(folder), title_justify="left")
        t.add_column("id", no_wrap=True, min_width=width)
        for c in ("game", "agents", "returns", "moves", "outcome"):
            t.add_column(c)
        for row in rows:
            t.add_row(*(Text(x) for x in row))
        console.print(t)
    else:  # too narrow for a table that keeps ids whole: one id a line, details under it
        console.print(Text(str(folder), style="bold"), soft_wrap=True)
        for row in rows:
            console.print(Text(row[0]), soft_wrap=True)
            console.print(Text("    " + "  ".join(row[1:]), style="dim"), soft_wrap=True)
    for e in bad:
        console.print(Text.assemble(("UNREADABLE ", "red"), e), soft_wrap=True)
    for gid, hint in missing.items():
        if hint is not None:
            n = sum(1 for row in rows if row[1] == gid)
            console.print(Text(f"game {gid} ({n} replays) is not registered: {hint}", style="yellow"), soft_wrap=True)
    console.print(f"{len(rows)} replays" + (f", {len(bad)} unreadable" if bad else ""))
    if bad:
        raise typer.Exit(1)


@replay_app.command("show")
def replay_show(
    path: Path = typer.Argument(..., help="A replay file, or the folder of replays with ID."),
    replay: Optional[str] = typer.Argument(None, metavar="ID",
                                           help="With a folder: the id `arena replay list` shows, or its start."),
    step: Optional[int] = typer.Option(None, "--step", help="Show only this step (1-based)."),
    all_: bool = typer.Option(False, "--all", help="Print every step and the final position, no prompts."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help="Module that registers plug-in games (repeat)."),
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
    from arena.errors import ReplayError
    from arena.replays import find_replay, is_replay_source, read_replay
    from arena.ui.replay_viewer import view_replay
    from arena.ui.video import check_video_path, frame_plan

    _plugins(plugin)
    if render is not None:
        check_video_path(render)
        frame_plan(None, fps)
    if is_replay_source(path):
        if replay is None:
            raise ReplayError(f"{path} is a folder: give a replay id too, arena replay show {path} ID "
                              f"(arena replay list {path} shows them)")
        path = find_replay(path, replay)
    elif replay is not None:
        raise ReplayError(f"{path} is not a folder: give a replay file alone, or a folder and an id")
    view_replay(read_replay(path), console, step=None if step is None else step - 1, every_step=all_, render=render,
                fps=fps, shown_as=str(path))


@replay_app.command("verify")
def replay_verify(
    path: Path = typer.Argument(..., help="A replay file or a folder of replays."),
    ids: Optional[List[str]] = typer.Argument(None, metavar="ID",
                                              help="With a folder: only these ids (as `replay list` shows them)."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help="Module that registers plug-in games (repeat)."),
):
    """Re-simulate replays (a file, a folder, or a folder and ids) and confirm the same outcome.

    Every file is checked: each one that fails gets one line (file and why), then a count: verified, mismatched, unreadable, refused (over the size cap, or a header naming anything but the game's declared settings), not checked (its game is not loaded: the line names the --plugin to pass). The exit code is 1 if any failed.

    A module a replay names is never imported unless it is passed with --plugin.

    A StarCraft II match cannot be re-simulated (its rules and AI are the game's): it is checked as far as it can be (its orders, its result, its .SC2Replay beside it, the game's build) and counted as checked, not re-simulated.
    """
    from rich.text import Text

    from arena.errors import ReplayError, ReplayRefused
    from arena.match.verify import verify_replay
    from arena.replays import find_replay, is_replay_source, list_replays, read_replay

    _plugins(plugin)
    if is_replay_source(path):
        paths = [find_replay(path, i) for i in ids] if ids else list_replays(path)
    elif ids:
        raise ReplayError(f"{path} is not a folder: ids go with a folder of replays")
    elif not path.exists() and "#" not in path.name and \
            not any(path.with_name(path.name + s).exists() for s in (".jsonl", ".jsonl.gz")):
        raise ReplayError(f"no replay or folder at {path}")
    else:
        paths = [path]
    counts = {"verified": 0, "checked (not re-simulated)": 0, "mismatched": 0, "unreadable": 0, "refused": 0,
              "not checked": 0}
    for p in paths:
        try:
            r = read_replay(p)
        except ReplayRefused as e:  # over the size cap
            counts["refused"] += 1
            console.print(Text.assemble(("REFUSED ", "red"), str(e)), soft_wrap=True)
            continue
        except ReplayError as e:
            counts["unreadable"] += 1
            console.print(Text.assemble(("UNREADABLE ", "red"), str(e)), soft_wrap=True)
            continue
        try:
            rep = verify_replay(r)
        except ReplayRefused as e:  # a header naming what is not a game setting: nothing was made
            counts["refused"] += 1
            console.print(Text.assemble(("REFUSED ", "red"), f"{p}: {e}"), soft_wrap=True)
            continue
        except ReplayError as e:
            counts["not checked"] += 1
            console.print(Text.assemble(("NOT CHECKED ", "red"), f"{p}: {e}"), soft_wrap=True)
            continue
        except Exception as e:  # a broken game must not hide the other files
            counts["not checked"] += 1
            console.print(Text.assemble(("NOT CHECKED ", "red"), f"{p}: re-simulation failed: {type(e).__name__}: {e}"),
                          soft_wrap=True)
            continue
        if rep.ok and not rep.resimulated:  # a game whose rules live in its own process (StarCraft II)
            counts["checked (not re-simulated)"] += 1
            console.print(Text.assemble(("CHECKED ", "yellow"), f"{p} ({rep.steps} steps), not re-simulated: "
                                        + "; ".join(rep.checks)), soft_wrap=True)
        elif rep.ok:
            counts["verified"] += 1
            console.print(Text.assemble(("OK ", "green"), f"{p} ({rep.steps} steps)"), soft_wrap=True)
        else:
            counts["mismatched"] += 1
            more = f" (and {len(rep.differences) - 1} more)" if len(rep.differences) > 1 and len(paths) > 1 else ""
            console.print(Text.assemble(("MISMATCH ", "red"), f"{p} ({rep.steps} steps): {rep.differences[0]}{more}"),
                          soft_wrap=True)
            if len(paths) == 1:
                for d in rep.differences[1:]:
                    console.print(Text(f"   {d}"), soft_wrap=True)
        for w in rep.warnings:
            console.print(Text.assemble("   ", ("warning", "yellow"), f": {w}"), soft_wrap=True)
    shown = {k: v for k, v in counts.items() if v or k != "checked (not re-simulated)"}  # that one when it occurs
    console.print(f"{len(paths)} replays: " + ", ".join(f"{v} {k}" for k, v in shown.items()))
    if len(paths) != counts["verified"] + counts["checked (not re-simulated)"]:
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
    from arena.config import writable_folder
    from arena.league.config import check_game_settings, load_league_config
    from arena.league.lock import writer_lock
    from arena.league.storage import league_db_errors
    from arena.ui.progress import run_with_progress

    cfg = load_league_config(config, workers=workers, backend=backend)
    check_game_settings(cfg)
    if matches is not None and matches < 0:
        raise ArenaError(f"--matches {matches}: the total of results to reach must be >= 0")
    writable_folder(directory, "--dir")
    # One writer per league, for this process's life: taken before the server (or anything) opens it.
    held = writer_lock(directory)  # noqa: F841 (kept referenced: the lock is released with its last reference)
    server = None
    try:
        with league_db_errors(directory / "league.db"):
            server = _serve_while_running(cfg, directory, host, port, token, token_file) if serve else None
            summary = run_with_progress(cfg, directory, backend=backend, address=address, matches=matches,
                                        console=console)
    except KeyboardInterrupt:
        # (a new line first on a terminal: it has echoed ^C where the cursor was)
        console.print(("\n" if console.is_terminal else "") + f"[yellow]stopped[/]: run the same command again "
                      f"to continue ({directory})")
        raise typer.Exit(130)
    finally:
        if server is not None:
            server.stop()
    console.print(f"{summary['new']} new matches in {summary['seconds']:.1f}s ({summary['matches_per_s']:.1f}/s); "
                  f"{summary['results']} results in {directory}"
                  + (f"; recovered {summary['committed_from_replay']} from replays, re-queued {summary['requeued']}"
                     if summary["committed_from_replay"] or summary["requeued"] else ""))


def _serve_while_running(cfg, directory: Path, host: str, port: int, token: Optional[str],
                         token_file: Optional[Path] = None):
    """`league run --serve`: the league's store made first (the server reads it), then the server on a thread."""
    from arena.league.storage import LeagueStore
    from arena.ui.web import host_warning, read_token, start_in_background

    token = read_token(token, token_file)
    LeagueStore(directory, elo_k=cfg.elo_k, payoff_decay=cfg.payoff_decay).close()

    warn = host_warning(host)
    if warn:
        console.print(f"[yellow]{escape(warn)}[/]")
    server = start_in_background(directory, host, port, token)
    console.print(f"serving {directory} at {server.url}" + (" (token required to play)" if token else ""))
    return server


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
):
    """Ratings fitted to every result, with 95% intervals, provisional players and payoffs.

    Bradley-Terry with draws, 95% bootstrap intervals on the ratings and the ranks, provisional players ranked last, the payoff against the Nash mixture and the mean payoff first for games scored by their payoffs (poker), the live Elo beside; `--method elo|openskill` for the live tables. For one-player games: the mean return on the seeds every player finished."""
    from arena.league.storage import league_db_errors

    if method not in ("bt", "elo", "openskill"):
        raise ArenaError(f"--method {method!r}: use bt (fitted, the default), elo or openskill")
    with league_db_errors(directory / "league.db"):
        _ratings(directory, game, payoff, plot, recompute, method, resamples, exploitability)


def _ratings(directory: Path, game: Optional[str], payoff: bool, plot: bool, recompute: bool, method: str = "bt",
             resamples: int = 1000, exploitability: bool = False) -> None:
    from arena.league.manager import open_league
    from arena.league.storage import OVERALL
    from arena.ui.views import (fit_width, fitted_view, payoff_view, ratings_per_game_views, ratings_view,
                                recompute_view, returns_view)

    def show(table, keep: int = 2) -> None:  # a narrow terminal gets a wide table in parts, not cut
        console.print(fit_width(table, console.width, keep))

    store = open_league(directory)
    games = store.rated_games()
    solo = store.one_player_games()
    if game is not None and game not in games and game != OVERALL and game not in solo:
        known = ", ".join([g for g in games if g != OVERALL] + solo) or "none yet"
        raise ArenaError(f"--game {game}: the league at {directory} has no rated games of that id; its games: {known}")
    g = game or OVERALL
    if game in solo and not recompute:  # a single-agent task: no ratings or payoff, its returns table
        show(returns_view(store, game))
        return
    if recompute:
        view, equal = recompute_view(store)
        console.print(view)
        if not equal:
            raise typer.Exit(1)
        return
    if payoff:
        show(payoff_view(store, g), 1)
        per_game = [x for x in games if x != OVERALL]
        if game is None and len(per_game) > 1:
            for x in per_game:
                show(payoff_view(store, x), 1)
    else:
        if games or not solo:  # the rating tables, unless every game is a one-player game
            if method == "bt":
                scopes = [g] + ([x for x in games if x != OVERALL] if game is None and len(games) > 2 else [])
                for x in scopes:
                    show(fitted_view(store, x, resamples=resamples))
            else:
                sort = "elo" if method == "elo" else "conservative"
                show(ratings_view(store, g, sort))
                if game is None:
                    for v in ratings_per_game_views(store, sort):
                        show(v)
        if exploitability:
            show(_exploitability_view(store, game))
        if game is None:
            for x in solo:
                show(returns_view(store, x))
    if plot:
        from arena.ui.plots import plot_all

        for p in plot_all(store, Path(directory) / "plots"):
            console.print(f"wrote {p}")


def _exploitability_view(store, game: Optional[str]):
    """NashConv of every player whose strategy can be read, in each small poker game of the league."""
    from rich.table import Table

    from arena.agents.exploitability import NotReadable, nash_conv, readable
    from arena.league.storage import OVERALL

    t = Table(title="Exploitability (NashConv, OpenSpiel; 0 is a Nash equilibrium)", title_justify="left")
    from arena.league.leaderboard import leaderboard

    for col in ("Game", "Player", "Agent", "Rating", "NashConv"):
        t.add_column(col, justify="right" if col in ("Rating", "NashConv") else "left")
    cfg = store.get_meta("config") or {}
    settings = {e.get("id"): e.get("kwargs") or {} for e in cfg.get("games", []) if isinstance(e, dict)}
    from arena.envs.registry import make_core

    def imperfect(g: str) -> bool:  # poker and its kind: NashConv says something there; a board game's is moot
        try:
            return not getattr(make_core(g, **(settings.get(g) or {})), "perfect_information", True)
        except Exception:
            return False

    for g in [x for x in store.rated_games() if x != OVERALL and (game is None or x == game) and imperfect(x)]:
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
                                           "interleaved_1f1b, zb1p, zbv, dualpipev."),
    microbatches: Optional[int] = typer.Option(None, "--microbatches", help="Microbatches per minibatch (pipeline) "
                                               "or per rank (odc, fsdp)."),
    plugin: Optional[List[str]] = typer.Option(None, "--plugin", help="Module or .py file that registers more games."),
):
    """Train the learner a config names (its `trainer:` key: spiral, scc, ppo, mixed, rllib_ppo).

    An existing run folder resumes, under any --parallel setting. Ctrl-C finishes the iteration, saves it and stops (a second Ctrl-C stops at once); the same command resumes."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from arena.trainers.parallel.learner import parallel_overrides
    from arena.trainers.registry import read_train_config

    _plugins(plugin)
    par = parallel_overrides(parallel, world_size, stages, schedule, microbatches)
    entry, cfg = read_train_config(config, model=model, learner={"loss": loss} if loss is not None else None,
                                   iterations=iterations, parallel=par)
    trainer = entry.make(cfg, directory)
    from arena.ui.progress import learning_signals

    pcfg = getattr(cfg, "parallel", None)
    if pcfg is not None and pcfg.mode != "none":
        what = (f"schedule {pcfg.schedule}" if pcfg.mode == "pipeline" else f"{pcfg.microbatches} microbatches a rank"
                if entry.name == "spiral" else "each minibatch shared out")
        console.print(f"learner step: {pcfg.mode} on {pcfg.world_size} ranks ({what}); rollouts on rank 0")
    resuming = trainer.resume_line()
    if resuming is not None:
        console.print(escape(resuming), soft_wrap=True)
    cols = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
            TimeElapsedColumn())

    def on_sigint(signum, frame):
        # First Ctrl-C: finish the current iteration, checkpoint it, stop. A second one (or one before the
        # first iteration starts) stops at once; the last checkpoint stands.
        if trainer.request_stop():
            console.print("[yellow]stopping after this iteration[/] (Ctrl-C again to stop at once)")
            return
        raise KeyboardInterrupt

    old_handler = signal.signal(signal.SIGINT, on_sigint)
    interrupted = False
    try:
        with Progress(*cols, console=console) as progress:
            task = progress.add_task("train", total=cfg.iterations, completed=trainer.iteration, info="")
            # The second bar: what the iteration is doing now (rollout, update, evaluation, imitation), with a rate.
            step = progress.add_task("", total=None, info="", visible=False)
            since = {"text": None, "t": 0.0, "done": 0}

            def show(it, total, m):
                wr = next((f"win {v:.2f} vs {k.split('/')[-1]}" for k, v in m.items() if k.startswith("eval/win_rate")), "")
                if "train/invalid_rate" in m or wr:
                    info = f"return {m.get('train/return', 0):+.2f} invalid {m.get('train/invalid_rate', 0):.2f} {wr}"
                else:  # a single-agent task: returns only
                    info = f"return {m.get('train/return', float('nan')):+.1f}"
                    if "eval/return" in m:
                        info += f" eval {m['eval/return']:+.1f}"
                    if "train/samples_per_s" in m:
                        info += f" {m['train/samples_per_s']:.0f} samples/s"
                signals = learning_signals(m)
                progress.update(task, description="train", completed=it, info=f"{info} | {signals}" if signals else info)

            milestones: set[tuple[str, int]] = set()

            def phase(text, done, total):
                stage, _, what = text.partition(":")
                what = what.strip()
                now = time.monotonic()
                if text != since["text"] or done < since["done"]:
                    since.update(text=text, t=now, done=done, first=done)
                since["done"] = done
                rate = (done - since["first"]) / (now - since["t"]) if now > since["t"] else 0.0
                info = what
                if what and " " not in what:  # "rollout: samples": the count's unit, and how fast it goes
                    info = f"{what}, {rate:,.1f} {what}/s" if rate < 10 else f"{what}, {rate:,.0f} {what}/s"
                progress.update(step, description=stage, completed=done, total=max(total, 1), info=info, visible=True)
                if stage != "imitation":
                    return
                if not console.is_terminal:  # a log (a pipe, CI): a line per epoch and per quarter of the matches
                    quarter = (text, 4 * done // max(total, 1))
                    if "epoch" in text or quarter not in milestones:
                        milestones.add(quarter)
                        progress.console.print(f"{text} ({done}/{total})")

            final = trainer.run(progress=show, phase=phase)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        signal.signal(signal.SIGINT, old_handler)
        trainer.close()
    if interrupted or trainer.stop_requested:
        console.print(("\n" if console.is_terminal else "") + escape(trainer.stop_line()), style="yellow",
                      soft_wrap=True)
        raise typer.Exit(130)
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
    workers: Optional[int] = typer.Option(None, "--workers", help="Worker processes (default: the config's)."),
):
    """The quickstart league on embedded defaults: ratings, payoff, plots and an HTML report."""
    from arena.demo import DemoConfig, run_demo

    run_demo(DemoConfig(out=out, matches=matches, workers=workers), console)


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
