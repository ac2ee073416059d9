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
from arena.replays.format import TIMING_FIELDS, Replay, read_replay


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


def verify_replay(replay: Replay | str | os.PathLike) -> VerifyReport:
    from arena.envs.registry import make_core
    from arena.match import InvalidMovePolicy, play_match

    if not isinstance(replay, Replay):
        replay = read_replay(replay)
    h = replay.header
    gid = h["game_id"]
    try:
        core = make_core(gid, **(h.get("game_kwargs") or {}))
    except GameNotFound as e:
        raise ReplayError(
            f"replay {h['match_id']} is of game {gid!r}, which this arena does not have "
            f"(the game may have changed version): {e}"
        ) from e
    warnings = []
    if core.settings != h.get("game_settings", core.settings):
        raise ReplayError(
            f"game {gid} has changed settings since the replay was written: "
            f"replay {h.get('game_settings')} vs now {core.settings}"
        )
    for pkg, ver in (h.get("engine") or {}).items():
        now = core.engine.get(pkg)
        if now is not None and now != ver:
            warnings.append(f"{pkg} was {ver} when recorded, now {now}")
    seats = len(h["players"])
    agents = [ReplayAgent(replay.steps, s) for s in range(seats)]
    policy = InvalidMovePolicy(**h.get("policy", {}))
    again = play_match(core, agents, seed=h.get("seed"), policy=policy, max_moves=h.get("max_moves"),
                       match_id=h["match_id"], record=True)
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
    return VerifyReport(not diffs, h["match_id"], gid, len(old_steps), diffs, warnings)


def _short(x: Any, n: int = 80) -> str:
    s = repr(x)
    return s if len(s) <= n else s[: n - 3] + "..."
