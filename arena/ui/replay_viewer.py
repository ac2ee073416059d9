"""Terminal viewer: step forward and back through a match.

Pages 1..N are the recorded steps (what the player saw, then its move); the page after
the last step is the final position, the state after the last move. Replays store each
observation before its move, and an actions-only replay (``record: actions``) stores none,
so the viewer re-simulates the match through its game (`arena.match.verify.replay_views`),
once, when the first page needs it. Every page shows the views as people read them
(`GameCore.human_view`: Kuhn and Leduc poker's cards by name and betting in words, TextArena's
views without the rules they repeat), never the stored text unless the re-simulation fails.
Where the game is not loaded (a plug-in) it says which ``--plugin`` to pass and shows the
recorded views (a text replay's), the moves and the result alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from arena.replays.format import Replay

#: The prompt under each page (`arena replay show --help` explains the keys in words).
HELP = "[n]ext (Enter), [p]revious, [g]o N, [f]irst, [l]ast (final position), [q]uit"
KEY_LIST = "n, p, g N, f, l, q"


def header_table(replay: Replay) -> Table:
    h, r = replay.header, replay.result
    t = Table(show_header=False, box=None)
    t.add_row("match", Text(h["match_id"]))
    t.add_row("game", Text(h["game_id"] + (f"  (plug-in {h['plugin']})" if h.get("plugin") else "")))
    t.add_row("seed", str(h.get("seed")))
    returns = r.get("returns") or []
    for i, (name, spec) in enumerate(zip(h["players"], h["agents"])):
        ret = f"  return {returns[i]:+g}" if i < len(returns) else ""
        t.add_row(Text(str(name)), Text(f"{spec}{ret}"))
    t.add_row("result", Text(result_line(replay)))
    return t


def result_line(replay: Replay) -> str:
    h, r = replay.header, replay.result
    players = h.get("players") or []
    winner = r.get("winner")
    if r.get("draw"):
        outcome = "draw"
    elif isinstance(winner, int) and 0 <= winner < len(players):
        outcome = f"{players[winner]} wins"
    else:
        outcome = "-"
    reason = r.get("reason") or ""
    if reason == outcome:  # (an older StarCraft II replay gave who won as its reason too)
        reason = ""
    return f"{outcome} ({r.get('outcome')}; {r.get('moves')} moves) {reason}".rstrip()


def _name(replay: Replay, p) -> str:
    players = replay.header["players"]
    return players[p] if isinstance(p, int) and 0 <= p < len(players) else str(p)


def step_panel(replay: Replay, i: int, views=None) -> Panel:
    """Step i: what its player saw and its move. `views` (`arena.match.verify.ReplayViews`) supplies
    what an actions-only replay does not store: the view and the move's text, re-simulated."""
    s = replay.steps[i]
    name = _name(replay, s["player"])
    body = Text()
    seen, action_text = s.get("obs"), s.get("action_text")
    if views is not None:
        shown = views.shown[i] if views.shown is not None and i < len(views.shown) else None
        if shown is not None:
            seen = shown
        elif seen is None and i < len(views.steps):
            seen = views.steps[i]
        if action_text is None and i < len(views.action_texts):
            action_text = views.action_texts[i]
    if seen is None and "obs" not in s:
        why = f": {views.note}" if views is not None and views.note else ""
        body.append(f"(the replay records actions only; the view could not be re-simulated{why})\n\n",
                    style="yellow")
    else:
        body.append((seen or "") + "\n\n")
    action = action_text or s.get("action")
    style = "bold green" if s["event"] == "ok" else "bold red"
    body.append(f"{name} plays: {action!r}", style=style)
    if s["event"] != "ok":
        body.append(f"  [{s['event']}: {s.get('reason')}]", style="red")
    title = f"step {i + 1}/{len(replay.steps)} · move {s['t']} · {name} · {(s.get('time') or 0) * 1000:.2f} ms"
    return Panel(body, title=Text(title), expand=False)


def final_panel(replay: Replay, view) -> Panel:
    """The position after the last move: each player's view (once if they all see the same), and the result."""
    parts: list = []
    texts = list(view.shown if getattr(view, "shown", None) is not None else view.texts)
    known = [t for t in texts if t is not None]
    if known and all(t == known[0] for t in known) and len(known) == len(texts):
        parts.append(Text(known[0] + "\n"))
    elif known:
        for p, t in enumerate(texts):
            if t is not None:
                parts.append(Text(f"{_name(replay, p)} sees:", style="bold"))
                parts.append(Text(t + "\n"))
    if view.note:
        parts.append(Text("final position not shown (the reason is printed below)\n", style="yellow"))
    parts.append(Text(f"result: {result_line(replay)}", style="bold"))
    n = len(replay.steps)
    return Panel(Group(*parts), title=Text(f"final position · after step {n}/{n} · {replay.result.get('moves')} moves"),
                 expand=False)


def show(replay: Replay, console: Console | None = None, step: int | None = None, interactive: bool = True,
         stdin: TextIO | None = None, final: Callable | None = None) -> None:
    """Print one step (`step`, 0-based), every step then the final position (not interactive), or
    prompt for keys on `stdin`. `final(replay)` gives the final view (default: re-simulate)."""
    import sys

    from arena.errors import ReplayError

    console = console or Console()
    n = len(replay.steps)
    _views: list = []
    _final: list = []

    def views():  # one re-simulation serves every page
        if not _views:
            from arena.match.verify import replay_views

            _views.append(replay_views(replay))
        return _views[0]

    def final_view():
        if not _final:
            _final.append(final(replay) if final is not None else views().final)
        return _final[0]

    def page(i: int) -> None:
        if i < n:
            console.print(step_panel(replay, i, views()))
            return
        view = final_view()
        console.print(final_panel(replay, view))
        if view.note:  # one line, not wrapped: it names the fix (a --plugin to pass)
            console.print(Text(f"final position not shown: {view.note}", style="yellow"), soft_wrap=True)

    if step is not None:
        if not 0 <= step < n:
            raise ReplayError(f"no step {step + 1}: the replay has {n} steps (1-{n})" if n else
                              "the replay has no steps")
        console.print(header_table(replay))
        page(step)
        return
    console.print(header_table(replay))
    if not interactive:
        for i in range(n + 1):
            page(i)
        return
    stdin = stdin or sys.stdin
    i = 0 if n else n
    last = n  # the final-position page
    redraw = True
    while True:
        if redraw:
            page(i)
        console.print(Text(HELP, style="dim"))
        line = stdin.readline()
        if line == "":
            return
        cmd = line.strip().lower()
        problem, redraw = None, True
        if cmd in ("q", "quit"):
            return
        if cmd in ("", "n"):
            if i == last:
                problem = "this is the final position: p goes back, f to the first step, q quits"
            i = min(i + 1, last)
        elif cmd == "p":
            if i == 0:
                problem = "this is the first step"
            i = max(i - 1, 0)
        elif cmd == "f":
            i = 0
        elif cmd == "l":
            i = last
        elif cmd == "g" or (cmd.startswith("g") and cmd[1] in " -0123456789"):
            arg = cmd[1:].strip()
            try:
                k = int(arg)
            except ValueError:
                problem = "give a step number: g 5"
            else:
                if 1 <= k <= n:
                    i = k - 1
                else:
                    problem = f"no step {k}: the replay has {n} steps (g 1 to g {n}; l shows the final position)"
        else:
            problem = f"unknown key {line.strip()!r}: use {KEY_LIST}"
        if problem is not None:
            console.print(Text(problem, style="red"))
            redraw = False


#: `resimulated_view` shows a row every this many steps (and the first and the last).
SUMMARY_EVERY = 25


def is_continuous(replay: Replay) -> bool:
    """Whether the replay's moves are vectors (a Box action space): read off the recorded actions,
    so that no game is made just to ask."""
    return any(isinstance(s.get("action"), list) for s in replay.steps)


def draw_hint(path) -> Text:
    return Text(f"draw it: arena replay show {path} --render out.gif (or out.mp4)", style="dim")


def view_replay(replay: Replay, console: Console, step: int | None = None, every_step: bool = False, render=None,
                fps: float | None = None, shown_as: str = "REPLAY", stdin: TextIO | None = None):
    """What ``arena replay show`` prints. The pages of `show` (one `step`, 0-based; `every_step`;
    else the prompt) for most games; for a drawable single-agent game with continuous moves (the
    prosthetics task), and for any drawable game given `render` (a .gif or .mp4 path) without a
    step or every step, the `resimulated_view` instead. A drawable game's output ends (the prompt:
    starts) with how to draw it (`shown_as`: the replay as the user named it); a game that cannot
    be drawn given `render` is a one-line error before anything is printed."""
    from arena.match.verify import core_for_replay, replay_game_kwargs
    from arena.ui.video import can_draw, check_drawable, render_replay

    kwargs = replay_game_kwargs(replay)  # a header naming anything but the game's settings: one line
    drawable = can_draw(replay.game_id, kwargs)
    if render is not None and not drawable:
        core_for_replay(replay).close()  # a game that is not loaded: the error names the --plugin to pass
        check_drawable(replay.game_id, kwargs)
    pages = step is not None or every_step
    if not pages and (render is not None or (drawable and len(replay.header["players"]) == 1
                                             and is_continuous(replay))):
        from arena.errors import ArenaError

        try:
            resimulated_view(replay, console, render, fps)
        except ArenaError as e:
            if render is not None:
                raise
            # the game cannot be re-simulated here (its extra is not installed): the recorded pages
            console.print(Text(f"not re-simulated: {e}", style="yellow"), soft_wrap=True)
            drawable = False
        else:
            if render is None:
                console.print(draw_hint(shown_as), soft_wrap=True)
            return
    if drawable and render is None and not pages:
        console.print(draw_hint(shown_as), soft_wrap=True)
    show(replay, console, step=step, interactive=not pages, stdin=stdin)
    for line in _watch_hint(replay):  # a game that plays its own replays (StarCraft II): how to watch it there
        console.print(Text(line), soft_wrap=True)
    if render is not None:
        video, resim = render_replay(replay, render, fps)
        console.print(Text(f"video: {video.describe()}; re-simulated return {_returns(resim.returns)} (recorded "
                           f"{_returns(resim.recorded_returns)})"), soft_wrap=True)
    elif drawable and pages:
        console.print(draw_hint(shown_as), soft_wrap=True)


def _watch_hint(replay: Replay) -> list[str]:
    """The game's own lines on watching the match (`GameCore.watch_hint`), for games that cannot be
    re-simulated; none for the others or a game that is not loaded."""
    from arena.match.verify import core_for_replay

    try:
        core = core_for_replay(replay)
    except Exception:
        return []
    try:
        return [] if core.resimulates else list(core.watch_hint(replay))
    finally:
        core.close()


def resimulated_view(replay: Replay, console: Console, render=None, fps: float | None = None,
                     every: int = SUMMARY_EVERY):
    """Re-simulate the replay and print what it did, for games whose moves are not worth a page each
    (a vector of 19 muscle excitations 100 times a second): a row every `every` steps (step, reward,
    return so far and the env's ``ansi`` line where it has one), the re-simulated return against
    the recorded one and, with `render` (a .gif or .mp4 path), the video of the match
    (`arena.ui.video.render_replay`: the same re-simulation draws it). Returns the
    `arena.match.verify.Resimulation` (and the `VideoInfo` or None)."""
    from arena.match.verify import resimulate_steps
    from arena.ui.video import ansi_line

    rows: list[tuple] = []
    last: list = [None]

    def row(core, moves: int, rewards) -> tuple:
        view = ansi_line(core)
        return (moves, rewards, core.returns(), view)

    def on_reset(core) -> None:
        rows.append(row(core, 0, None))

    def on_step(core, moves: int, rewards) -> None:
        if moves % every == 0 or core.is_terminal():
            rows.append(row(core, moves, rewards))
            last[0] = None
        else:
            last[0] = (moves, rewards, core.returns(), None)

    video = None
    if render is not None:
        from arena.ui.video import render_replay

        video, resim = render_replay(replay, render, fps, on_step=on_step, on_reset=on_reset)
    else:
        resim = resimulate_steps(replay, on_step, on_reset=on_reset)
    if last[0] is not None:  # stopped by a move limit: the last step, without waiting for a view
        rows.append(last[0])
    console.print(header_table(replay))
    t = Table(title=f"re-simulated, every {every} steps", title_justify="left")
    t.add_column("step", justify="right")
    t.add_column("reward", justify="right")
    t.add_column("return", justify="right")
    views = any(r[3] for r in rows)
    if views:
        t.add_column("view")
    for moves, rewards, returns, view in rows:
        cells = [str(moves), "" if rewards is None else " ".join(f"{x:+.4f}" for x in rewards),
                 " ".join(f"{x:+.4f}" for x in returns)]
        t.add_row(*cells, *([Text(view or "")] if views else []))
    console.print(t)
    same = "equal" if resim.matches() else f"DIFFERENT (by {resim.return_error:.3g})"
    console.print(Text(f"re-simulated return {_returns(resim.returns)} in {resim.moves} steps; recorded "
                       f"{_returns(resim.recorded_returns)} in {resim.recorded_moves}: {same}",
                       style="green" if resim.matches() else "red"), soft_wrap=True)
    if video is not None:
        console.print(Text(f"video: {video.describe()}"), soft_wrap=True)
    return resim, video


def _returns(xs) -> str:
    return " ".join(repr(float(x)) for x in xs)
