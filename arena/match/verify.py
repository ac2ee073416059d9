"""Re-simulate a replay from its header and recorded actions and check the identical outcome.

Replaying uses the one match loop: each seat is taken by a `ReplayAgent` that
returns the recorded actions in order (and re-raises recorded agent faults),
so the game's own rules re-judge every move. The new record must equal the old
one, timing fields aside.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from arena.errors import GameNotFound, ReplayError
from arena.replays.format import TIMING_FIELDS, Replay, load_hint, read_replay


class ReplayAgent:
    """Plays back one seat's recorded move attempts."""

    def __init__(self, steps: list[dict], seat: int):
        self.spec = f"replay:seat{seat}"
        # Engine refusals of simultaneous moves are recorded without an observation
        # (obs None); they are consequences of a move already queued, not attempts.
        self._queue = deque(s for s in steps if s.get("player") == seat and not (
            s.get("obs") is None and s.get("event") == "invalid" and s.get("time") == 0.0))

    def act(self, observation) -> Any:
        from arena.match import RecordedFault

        if not self._queue:
            raise RecordedFault("error", "the replay has no more moves for this player")
        step = self._queue.popleft()
        action, event = step.get("action"), step.get("event")
        if event in ("ok", "invalid") and not isinstance(action, dict):
            return action
        raise RecordedFault(event or "error", step.get("reason") or "", action)


@dataclass
class VerifyReport:
    ok: bool
    match_id: str
    game_id: str
    steps: int
    differences: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _strip(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in TIMING_FIELDS}


def core_for_replay(replay: Replay):
    """The game of a replay, made fresh, or a one-line `ReplayError` saying what to load.

    Only games already registered are made: a plug-in the replay names is never imported
    here (a replay from elsewhere must not run code); the error names the ``--plugin`` to pass.
    """
    from arena.envs.registry import is_registered, make_core

    h = replay.header
    gid = h["game_id"]
    origin = h.get("plugin") or h.get("plugin_package")
    if origin and not is_registered(gid):
        what = "plug-in module" if h.get("plugin") else "package"
        raise ReplayError(f"replay {h['match_id']} is of game {gid!r} from the {what} {origin!r}, "
                          f"which is not loaded: {load_hint(h)}")
    try:
        core = make_core(gid, **(h.get("game_kwargs") or {}))
    except GameNotFound as e:
        raise ReplayError(
            f"replay {h['match_id']} is of game {gid!r}, which this arena does not have "
            f"(the game may have changed version; if a plug-in registers it, {load_hint(h)}): {e}"
        ) from e
    if core.settings != h.get("game_settings", core.settings):
        raise ReplayError(
            f"game {gid} has changed settings since the replay was written: "
            f"replay {h.get('game_settings')} vs now {core.settings}"
        )
    return core


def resimulate(replay: Replay):
    """Play the replay's recorded moves again through its game: ``(core, MatchResult)``.

    The core is left in the final state (after the last move), for views of the end.
    """
    from arena.match import InvalidMovePolicy, play_match

    h = replay.header
    core = core_for_replay(replay)
    seats = len(h["players"])
    agents = [ReplayAgent(replay.steps, s) for s in range(seats)]
    policy = InvalidMovePolicy(**h.get("policy", {}))
    again = play_match(core, agents, seed=h.get("seed"), policy=policy, max_moves=h.get("max_moves"),
                       match_id=h["match_id"], record=True)
    return core, again


def verify_replay(replay: Replay | str | os.PathLike) -> VerifyReport:
    report, core = _verify(replay)
    core.close()
    return report


def _verify(replay: Replay | str | os.PathLike):
    if not isinstance(replay, Replay):
        replay = read_replay(replay)
    h = replay.header
    from arena.envs.registry import game_origin

    core, again = resimulate(replay)
    warnings = []
    recorded, now = h.get("entry_point"), game_origin(h["game_id"]).get("entry_point")
    if recorded and now and recorded != now:
        warnings.append(f"the game's entry point was {recorded} when recorded, now {now}")
    for pkg, ver in (h.get("engine") or {}).items():
        now = core.engine.get(pkg)
        if now is not None and now != ver:
            warnings.append(f"{pkg} was {ver} when recorded, now {now}")
    diffs = []
    old_steps, new_steps = replay.steps, again.replay.steps
    keys = ("t", "player", "obs", "action", "event")
    for i, (a, b) in enumerate(zip(old_steps, new_steps)):
        for k in keys:
            if a.get(k) != b.get(k):
                diffs.append(f"step {i} ({k}): recorded {_short(a.get(k))}, re-simulated {_short(b.get(k))}")
                break
        if len(diffs) >= 5:
            break
    if len(old_steps) != len(new_steps):
        diffs.append(f"recorded {len(old_steps)} step lines, re-simulation produced {len(new_steps)}")
    old_r, new_r = _strip(replay.result), _strip(again.replay.result)
    for k in ("returns", "winner", "draw", "outcome", "moves", "forfeiter"):
        if old_r.get(k) != new_r.get(k):
            diffs.append(f"result {k}: recorded {old_r.get(k)!r}, re-simulated {new_r.get(k)!r}")
    return VerifyReport(not diffs, h["match_id"], h["game_id"], len(old_steps), diffs, warnings), core


@dataclass
class FinalView:
    """What the players see once the last recorded move is made (`texts[p]`, None where unknown).

    `note` says why there is no view (the game is not loaded, the re-simulation differs).
    """

    texts: list[str | None]
    note: str = ""


def final_view(replay: Replay) -> FinalView:
    """Re-simulate the replay and read every player's view of the final position.

    Replays store each step's observation before its move, so the position after the last
    move exists only in the game: this plays the recorded moves again to get there.
    """
    n = len(replay.header.get("players") or [])
    try:
        report, core = _verify(replay)
    except ReplayError as e:
        return FinalView([None] * n, str(e))
    except Exception as e:  # a plug-in game that breaks must not break the viewer
        return FinalView([None] * n, f"re-simulating the game failed: {type(e).__name__}: {e}")
    try:
        if not report.ok:
            return FinalView([None] * n, "the re-simulation does not match the recording "
                                         f"(arena replay verify shows how): {report.differences[0]}")
        texts: list[str | None] = []
        for p in range(n):
            try:
                texts.append(core.text(p))
            except Exception:
                texts.append(None)
        _textarena_final(core, replay, texts)
        return FinalView(texts)
    finally:
        core.close()


def _textarena_final(core, replay: Replay, texts: list[str | None]) -> None:
    """TextArena cores keep each player's last observation, from before the game ended; the
    engine still holds the closing one (final board, result messages) for one player: ask it
    through TextArena's own `get_observation`, and drop the views that stop before the end."""
    get = getattr(getattr(core, "env", None), "get_observation", None)
    if getattr(core, "source", None) != "textarena" or get is None or replay.result.get("outcome") != "normal":
        return  # (after a forfeit or a move limit no move ended the game: the views are the end)
    last = {}
    for s in replay.steps:
        if s.get("obs") is not None:
            last[s.get("player")] = s["obs"]
    if not any(texts[p] is not None and texts[p] == last.get(p) for p in range(len(texts))):
        return  # the core's own view already shows the end
    try:
        pid, text = get()
    except Exception:
        return
    if isinstance(pid, int) and 0 <= pid < len(texts) and isinstance(text, str) and text:
        for p in range(len(texts)):  # the other views stop before the end: leave them out
            if p != pid and texts[p] == last.get(p):
                texts[p] = None
        texts[pid] = text


def _short(x: Any, n: int = 80) -> str:
    s = repr(x)
    return s if len(s) <= n else s[: n - 3] + "..."
