"""Terminal viewer: step forward and back through a match."""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from arena.replays.format import Replay

HELP = "[n]ext (Enter), [p]revious, [g]o N, [f]irst, [l]ast, [q]uit"


def header_table(replay: Replay) -> Table:
    h, r = replay.header, replay.result
    t = Table(show_header=False, box=None)
    t.add_row("match", h["match_id"])
    t.add_row("game", h["game_id"])
    t.add_row("seed", str(h.get("seed")))
    for i, (name, spec) in enumerate(zip(h["players"], h["agents"])):
        t.add_row(name, f"{spec}  return {r['returns'][i]:+g}")
    outcome = "draw" if r.get("draw") else (f"{h['players'][r['winner']]} wins" if r.get("winner") is not None else "-")
    t.add_row("result", f"{outcome} ({r.get('outcome')}; {r.get('moves')} moves) {r.get('reason') or ''}")
    return t


def step_panel(replay: Replay, i: int) -> Panel:
    s = replay.steps[i]
    h = replay.header
    name = h["players"][s["player"]] if 0 <= s["player"] < len(h["players"]) else str(s["player"])
    body = Text()
    body.append((s.get("obs") or "") + "\n\n")
    action = s.get("action_text") or s.get("action")
    style = "bold green" if s["event"] == "ok" else "bold red"
    body.append(f"{name} plays: {action!r}", style=style)
    if s["event"] != "ok":
        body.append(f"  [{s['event']}: {s.get('reason')}]", style="red")
    return Panel(body, title=f"step {i + 1}/{len(replay.steps)} · move {s['t']} · {name} · {s.get('time', 0) * 1000:.2f} ms")


def show(replay: Replay, console: Console | None = None, step: int | None = None, interactive: bool = True,
         stdin: TextIO | None = None) -> None:
    import sys

    console = console or Console()
    console.print(header_table(replay))
    if not replay.steps:
        return
    if step is not None or not interactive:
        idx = range(len(replay.steps)) if step is None else [max(0, min(step, len(replay.steps) - 1))]
        for i in idx:
            console.print(step_panel(replay, i))
        return
    stdin = stdin or sys.stdin
    i = 0
    while True:
        console.print(step_panel(replay, i))
        console.print(HELP, style="dim")
        line = stdin.readline()
        if line == "":
            return
        cmd = line.strip().lower()
        if cmd in ("q", "quit"):
            return
        if cmd in ("", "n"):
            i = min(i + 1, len(replay.steps) - 1)
        elif cmd == "p":
            i = max(i - 1, 0)
        elif cmd == "f":
            i = 0
        elif cmd == "l":
            i = len(replay.steps) - 1
        elif cmd.startswith("g"):
            try:
                i = max(0, min(int(cmd[1:].strip()) - 1, len(replay.steps) - 1))
            except ValueError:
                console.print("give a step number: g 5", style="red")
