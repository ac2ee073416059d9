"""A stored replay as the replay viewer's JSON: the steps, and every player's view at every frame.

Frame k is the position after k applied moves (frame 0: after the reset). Its views are read
from the game itself by playing the recorded moves again (`resimulate_steps`), so an
actions-only replay (``record: actions``, no views stored) shows the same as a text replay,
and every player's view is there, not only the mover's. Where the game cannot be re-simulated
(a plug-in game not loaded, a changed engine), a text replay's own views are used and
``note`` says why the others are missing.

The prosthetics task's frames carry the body's joints (``skeleton``) for the stick figure, a
skirmish's the whole battle (``battle``: every unit, its health and shields, who fired at whom;
`arena.envs.skirmish.SkirmishCore.battle`) for its top-down board. Where a
game writes a view for people besides its text (``human_view``: Kuhn and Leduc poker in words), a
frame's ``readable`` has it (None where it is the text); ``views`` stay the game's text, what the
agents read and the boards are drawn from.
"""

from __future__ import annotations

from typing import Any

from arena.match.verify import resimulate_steps
from arena.replays.format import Replay

from arena.ui.web.boards import board_of, transcript_kind

#: Frames kept per replay: a long episode (1,000 prosthetics steps) is thinned to this many views.
MAX_FRAMES = 2000


def _texts(core, n: int) -> list[str | None]:
    out = []
    for p in range(n):
        try:
            out.append(core.text(p))
        except Exception:
            out.append(None)
    return out


def _readable(core, n: int, texts: list[str | None]) -> list[str | None] | None:
    """Each player's view as a person reads it, where the game writes one that differs from its text
    (``human_view``: poker's cards by name, the betting in words); None where none does."""
    out: list[str | None] = []
    for p in range(n):
        try:
            v = core.human_view(p)
        except Exception:
            v = None
        out.append(v if isinstance(v, str) and v != texts[p] else None)
    return out if any(v is not None for v in out) else None


def _skeleton(core) -> dict | None:
    env = core.env
    fn = getattr(getattr(env, "unwrapped", env), "skeleton", None)
    if fn is None:
        return None
    try:
        sk = fn()
    except Exception:
        return None
    return {"joints": {k: [float(v[0]), float(v[1])] for k, v in sk["joints"].items()},
            "ends": {k: [float(v[0]), float(v[1])] for k, v in sk.get("ends", {}).items()},
            "segments": [list(s) for s in sk["segments"]], "time": float(sk.get("time", 0.0))}


def _battle(core) -> dict | None:
    try:
        out = core.battle()
    except Exception:
        return None
    return out if isinstance(out, dict) else None


def _first_to_move(game: str, replay: Replay) -> int | None:
    """The seat that made this match's first move, where the game's seats take turns (`first_mover`:
    not where they move at once); None otherwise."""
    from arena.envs.registry import first_mover
    from arena.match.verify import replay_game_kwargs

    try:
        if first_mover(game, replay_game_kwargs(replay) or None) is None:
            return None
    except Exception:  # noqa: BLE001 - a game not loaded here: the recorded first move still says it
        pass
    first = next((s.get("player") for s in replay.steps if s.get("type", "step") == "step"
                  and isinstance(s.get("player"), int)), None)
    return first if isinstance(first, int) else None


def replay_json(replay: Replay, match_id: str, names: list[str] | None = None) -> dict[str, Any]:
    """The viewer's JSON of `replay`; `names`: the league's names of its seats (default: the game's)."""
    h, r = replay.header, replay.result
    game = h.get("game_id", "")
    players = list(h.get("players") or [])
    if names and len(names) == len(players):
        players = list(names)
    n = len(players)
    steps = [{"t": int(s.get("t", i)), "player": s.get("player"), "action": s.get("action"),
              "action_text": s.get("action_text"), "event": s.get("event"), "reason": s.get("reason")}
             for i, s in enumerate(replay.steps)]
    frames: list[dict] = []
    note = ""

    def capture(core, *_):
        views = _texts(core, n)
        frames.append({"views": views, "readable": _readable(core, n, views), "skeleton": _skeleton(core),
                       "battle": _battle(core)})

    try:
        sim = resimulate_steps(replay, capture, on_reset=capture)
        if not sim.matches():
            note = "the re-simulation does not match the recording (`arena replay verify` shows how)"
            frames = []
        else:
            # The moves' own texts, as the game writes them (actions-only replays store none).
            _fill_action_texts(replay, steps)
    except Exception as e:  # a game that is not loaded, a plug-in that breaks: the recorded views
        note = f"views not re-simulated: {type(e).__name__}: {e}"
        frames = []
    if not frames:
        frames = _recorded_frames(replay, n)
    if len(frames) > MAX_FRAMES:
        stride = -(-len(frames) // MAX_FRAMES)
        frames = [f | {"moves": i} for i, f in enumerate(frames) if i % stride == 0 or i == len(frames) - 1]
    else:
        frames = [f | {"moves": i} for i, f in enumerate(frames)]
    for f in frames:
        f["boards"] = [board_of(game, v) for v in f["views"]]
    return {"match_id": match_id, "game": game, "players": players, "agents": list(h.get("agents") or []),
            "first": _first_to_move(game, replay),
            "seed": h.get("seed"), "record": replay.record, "created": h.get("created"),
            "result": {k: r.get(k) for k in ("returns", "winner", "draw", "outcome", "reason", "moves", "forfeiter")},
            "steps": steps, "frames": frames, "transcript": transcript_kind(game), "note": note}


def _fill_action_texts(replay: Replay, steps: list[dict]) -> None:
    if all(s["action_text"] is not None or s["event"] != "ok" for s in steps):
        return
    try:
        from arena.match.verify import text_replay

        again = text_replay(replay)
    except Exception:
        return
    for s, a in zip(steps, again.steps):
        if s["action_text"] is None:
            s["action_text"] = a.get("action_text")


def _recorded_frames(replay: Replay, n: int) -> list[dict]:
    """Frames from the views a text replay stored (each step's mover only)."""
    frames: list[dict] = [{"views": [None] * n, "readable": None, "skeleton": None, "battle": None}]
    for s in replay.steps:
        t = int(s.get("t", 0))
        while len(frames) <= t + 1:
            frames.append({"views": [None] * n, "readable": None, "skeleton": None, "battle": None})
        p = s.get("player")
        if isinstance(p, int) and 0 <= p < n and s.get("obs") is not None:
            frames[t]["views"][p] = s["obs"]
    return frames


def final_frame(replay: Replay) -> dict | None:
    """The last frame of `replay`: every player's view, readable view and board at the end (for a
    person's match, the other side's cards once the hand is over)."""
    frames = replay_json(replay, "")["frames"]
    return frames[-1] if frames else None
