"""Playing matches at the terminal (`arena play`): the checks made before any match is played, a batch
of matches with a progress bar and its summary, the first match drawn into a video, and a person's
rated match against a league player.

User errors are `ArenaError`s raised before anything is played; what is shown goes to the console the
caller passes (a progress bar and a person's game both need it while they run)."""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Optional

from rich.console import Console
from rich.markup import escape

from arena.errors import ArenaError


@dataclass
class PlayRequest:
    """The matches `arena play` is asked for, its options read (STYLE 11: a command parses into a
    dataclass and calls one function)."""

    game: str
    specs: list[str]
    n: int = 1
    seed: int = 0
    replays: Optional[Path] = None
    workers: int = 1
    time_limit: Optional[float] = None
    swap_seats: bool = True
    plugins: list[str] = field(default_factory=list)
    record: Literal["actions", "text"] = "actions"
    render: Optional[Path] = None
    fps: Optional[float] = None
    game_kwargs: dict = field(default_factory=dict)


@dataclass
class PlayedBatch:
    """The matches that finished, by match id, and whether Ctrl-C stopped the others."""

    results: list
    stopped: bool


def check_play_options(game: str, *, vs: Optional[str], name: Optional[str], replays: Optional[Path],
                       render: Optional[Path], fps: Optional[float], game_kwargs: dict) -> None:
    """Refuse options that do not go together, or a video that cannot be drawn, before any match is
    played (a long batch must not fail at its end)."""
    if replays is not None:
        from arena.config import writable_folder

        writable_folder(replays, "--replays")
    if game_kwargs and vs is not None:
        raise ArenaError("--game-kwarg sets up matches played with -p agents; a league's games keep its own settings")
    if render is not None:
        from arena.ui.video import check_drawable, check_video_path, frame_plan

        check_video_path(render)
        frame_plan(None, fps)
        if vs is not None:
            raise ArenaError("--render draws matches played with -p agents: drop it with --vs")
        check_drawable(game, game_kwargs)
    if name is not None and vs is None:
        raise ArenaError("--name is the name you play a league player under: use it with --vs LEAGUE_DIR:PLAYER")


def play_batch(req: PlayRequest, console: Console) -> PlayedBatch:
    """Play `req`'s matches, with a progress bar on `console` for more than one (not when a person plays:
    their game keeps the terminal to itself). Ctrl-C stops the batch; the finished matches are kept."""
    from arena.match.batch import play_matches

    if not req.specs:
        raise ArenaError("give the agents, one spec per seat (-p human -p random), or --vs LEAGUE_DIR:PLAYER")
    if req.n < 1:
        raise ArenaError(f"-n must be at least 1, got {req.n}")
    human = "human" in req.specs
    if human and req.workers > 1:
        raise ArenaError("a human player needs --workers 1 (drop --workers)")
    done: list = []
    progress, on_result = (_progress_bar(req, console, done) if req.n > 1 and not human
                           else (contextlib.nullcontext(), done.append))
    if req.render is not None:  # keep the first match's replay (match i has seed + i), none of the others'
        kept = on_result

        def on_result(res, kept=kept) -> None:
            if res.seed != req.seed:
                res.replay = None
            kept(res)
    stopped = False
    try:
        with progress:
            play_matches(req.game, req.specs, req.n, seed=req.seed, swap_seats=req.swap_seats, workers=req.workers,
                         replay_dir=req.replays, game_kwargs=req.game_kwargs, move_time_limit=req.time_limit,
                         plugins=req.plugins, on_result=on_result,
                         record=req.record if req.replays is not None or req.render is not None else False)
    except KeyboardInterrupt:
        stopped = True
    return PlayedBatch(sorted(done, key=lambda r: r.match_id), stopped)


def _progress_bar(req: PlayRequest, console: Console, done: list) -> tuple[Any, Callable[[Any], None]]:
    """A transient bar of matches done and matches a second, and the callback that keeps it up to date."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[rate]:.1f} matches/s"), TimeElapsedColumn(), console=console,
                        transient=True)
    task = progress.add_task(req.game, total=req.n, rate=0.0)
    start = time.perf_counter()

    def on_result(res) -> None:
        done.append(res)
        progress.update(task, completed=len(done), rate=len(done) / max(time.perf_counter() - start, 1e-9))
    return progress, on_result


def show_batch(req: PlayRequest, batch: PlayedBatch, console: Console) -> None:
    """What a batch came to: a line when it stopped early, the one match's outcome for -n 1, the summary
    table (in parts on a narrow terminal) and where the replays are."""
    from arena.match.batch import summarize
    from arena.ui.tables import summary_table
    from arena.ui.views import fit_width

    results, stopped, n, game = batch.results, batch.stopped, req.n, req.game
    if stopped or len(results) < n:
        # (a new line first: the terminal has echoed ^C where the cursor was)
        console.print(("\n" if stopped else "") + f"[yellow]stopped after {len(results)} of {n} matches[/]"
                      + ("; the finished ones are below" if results else ""))
    if not results:
        return
    if n == 1:
        console.print(_outcome_line(game, results[0]), soft_wrap=True)
    count = f"{len(results)} match{'es' if len(results) != 1 else ''}"
    console.print(fit_width(summary_table(f"{game}: {count}", summarize(results, req.specs)), console.width, keep=1))
    if req.replays is not None:
        console.print(f"Replays in {req.replays}" + (f" ({len(results)} files)" if not stopped else
                                                      " (the finished matches', and any a worker wrote as it stopped)"))


def _outcome_line(game: str, r: Any) -> str:
    """One match's outcome (rich markup): who won, the returns, the moves and how it ended."""
    who = "draw" if r.draw else (f"{r.agents[r.winner]} (seat {r.winner}) wins" if r.winner is not None else "-")
    if len(r.returns) == 1:  # a one-player task: no one to win against
        who = "episode over"
    returns = ", ".join(f"{float(x):.6g}" for x in r.returns)
    why = f" ({r.reason})" if r.reason else ""
    return f"[bold]{escape(game)}[/]: {escape(who)}; returns {returns}; {r.moves} moves; {r.outcome}{escape(why)}"


def render_first(results: list, seed: int, render: Path, fps: Optional[float], console: Console) -> None:
    """Draw the first match of a batch (the one with `seed`) into the video `render`, its replay
    re-simulated, and say whether the re-simulated return equals the played one."""
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


def play_league_player(game: str, vs: str, *, seat: int, seed: int, with_players: bool, name: Optional[str],
                       console: Console) -> None:
    """You at the terminal against a league player (`vs`: LEAGUE_DIR:PLAYER), as the person `name`
    (--name; else the name remembered, else a new guest name), remembered for the next time; then the
    outcome, the Elo it left and the replay."""
    from arena.league.play import BadName, check_name, play_against, player_file, remembered_name

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
        _confirm_name(directory, name, console)
    else:
        name = remembered_name()  # None: a new guest name, remembered once the match is scheduled
    try:
        out = play_against(directory, player, game, seat=seat, seed=seed, name=name,
                           on_start=lambda human: _greet(human, console, game, seat))
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


def _confirm_name(directory: str, name: str, console: Console) -> None:
    """A --name that is not the one this terminal remembers, where that person already has games in the
    league: asked to confirm (a name is not a password, and two people under one name would share one
    rating); anything but yes is one line asking for another name."""
    from arena.league.play import games_of, remembered_name

    if name == remembered_name() or not Path(directory).is_dir():
        return
    try:
        n = games_of(directory, name)
    except ArenaError:
        return  # not a league: play_against says so
    if not n:
        return
    console.print(f"human:{escape(name)} has {n} game{'s' if n != 1 else ''} in this league already; playing "
                  "as them adds to their rating. Is that you? [y/N] ", end="")
    answer = sys.stdin.readline(64).strip().lower()
    if answer not in ("y", "yes"):
        raise ArenaError(f"--name {name}: that name has a history in this league; give another --name, or answer y "
                         "to play as them")


def _greet(human: str, console: Console, game: str, seat: int) -> None:
    """Once the match is scheduled: who you play as, your seat and who moves first (the game's rule), and
    the name remembered for next time (a name that cannot be written down is said, not fatal)."""
    from arena.envs.registry import first_mover
    from arena.league.play import person_of, player_file, remember_name, remembered_name

    person = person_of(human) or human
    first = first_mover(game)
    order = ("the seats move at once or in an order drawn each match" if first is None else
             "you move first" if first == seat else f"seat {first} moves first")
    console.print(f"You play as [bold]{escape(person)}[/], rated as the player {escape(human)}; you are seat {seat} "
                  f"({order}).", soft_wrap=True)
    if person != remembered_name():
        try:
            where = remember_name(person)
        except OSError as e:
            console.print(f"[yellow]could not remember your name in {escape(str(player_file()))}[/] ({escape(str(e))}): "
                          "give --name next time", soft_wrap=True)
        else:
            console.print(f"(remembered in {escape(str(where))}: --name NAME to play under another name)",
                          soft_wrap=True)
