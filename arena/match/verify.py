"""Re-simulate a replay from its header and recorded actions and check the identical outcome.

Replaying uses the one match loop: each seat is taken by a `ReplayAgent` that
returns the recorded actions in order (and re-raises recorded agent faults),
so the game's own rules re-judge every move. The new record must equal the old
one, timing fields aside; a replay recorded with ``record="actions"`` is
re-simulated and compared the same way, without observations.

The same re-simulation gives what a replay does not store: every player's view at
every step of an actions-only replay, and the position after the last move
(`replay_views`, `final_view`; ``arena replay show`` uses them), and, with a callback after
every move on a core made to draw frames (`resimulate_steps`), videos of the match
(`arena.ui.video.render_replay`).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from arena.errors import ConfigError, GameNotFound, ReplayError, ReplayRefused
from arena.envs.actions import is_fault
from arena.replays.format import TIMING_FIELDS, Replay, load_hint, read_replay


class ReplayAgent:
    """Plays back one seat's recorded move attempts."""

    def __init__(self, steps: list[dict], seat: int):
        self.spec = f"replay:seat{seat}"
        # Engine refusals of simultaneous moves are consequences of a move already queued, not
        # attempts: marked "refused" in actions-only replays, recorded without an observation
        # and with no time in text replays.
        self._queue = deque(s for s in steps if s.get("player") == seat and not (
            s.get("refused") or ("obs" in s and s["obs"] is None and s.get("event") == "invalid"
                                 and s.get("time") == 0.0)))

    def act(self, observation) -> Any:
        from arena.match import RecordedFault

        if not self._queue:
            raise RecordedFault("error", "the replay has no more moves for this player")
        step = self._queue.popleft()
        action, event = step.get("action"), step.get("event")
        if event in ("ok", "invalid") and not is_fault(action):
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
    #: False: the game cannot be re-simulated here; `checks` lists what was checked instead.
    resimulated: bool = True
    checks: list[str] = field(default_factory=list)


def _strip(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in TIMING_FIELDS}


#: The most seats a replay may name (the players a re-simulation makes agents for).
MAX_REPLAY_SEATS = 64


def replay_game_kwargs(replay: Replay) -> dict[str, Any]:
    """The game settings a replay header names, checked: `ReplayError` (``replay X: header field Y is
    not a game setting``) for any key the registered game does not declare as a setting (a replay
    is data: ``core``, ``env_class``, ``entry_point`` or any other constructor-level key is never
    passed on, so nothing a replay names is imported), and for a malformed header. Every reader of
    a header takes its game kwargs from here: show, verify, --render, the web replay page,
    imitation from replays."""
    from arena.envs.registry import SettingOutOfRange, check_settings, is_registered
    from arena.errors import NotASetting

    h = replay.header
    mid, gid = h.get("match_id"), h.get("game_id")
    mid = mid if isinstance(mid, str) and len(mid) <= 100 else _clip(mid)
    if not isinstance(gid, str) or not gid or len(gid) > 200:
        raise ReplayRefused(f"replay {mid}: header field game_id is not a game id")
    players = h.get("players")
    if not isinstance(players, list) or not 0 < len(players) <= MAX_REPLAY_SEATS:
        raise ReplayRefused(f"replay {mid}: header field players is not a list of 1 to {MAX_REPLAY_SEATS} names")
    for key in ("seed", "max_moves"):
        v = h.get(key)
        if v is not None and (type(v) is not int or v < 0):
            raise ReplayRefused(f"replay {mid}: header field {key} is not a whole number >= 0")
    pol = h.get("policy", {})
    known = {"allowance", "loss", "win"}
    if not isinstance(pol, dict) or any(k not in known or type(v) not in (int, float) for k, v in pol.items()):
        raise ReplayRefused(f"replay {mid}: header field policy is not an invalid-move policy "
                          f"(numbers for {', '.join(sorted(known))})")
    kwargs = h.get("game_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ReplayRefused(f"replay {mid}: header field game_kwargs is not a mapping of game settings")
    if kwargs and is_registered(gid):
        try:
            check_settings(gid, kwargs)
        except NotASetting as e:
            key = e.key if isinstance(e.key, str) and len(e.key) <= 60 else _clip(e.key, 60)
            what = "is out of range for" if isinstance(e, SettingOutOfRange) else "is not a game setting of"
            raise ReplayRefused(f"replay {mid}: header field game_kwargs.{key} {what} {gid} ({e.detail})") from None
    return dict(kwargs)


def core_for_replay(replay: Replay, render_mode: str | None = None):
    """The game of a replay, made fresh, or a one-line `ReplayError` saying what to load.

    Only games already registered are made, with the registry's own construction and the
    settings the header names (`replay_game_kwargs`): a plug-in the replay names is never imported
    here (a replay from elsewhere must not run code); the error names the ``--plugin`` to pass.
    `render_mode` makes the env with that render mode (``"rgb_array"``: frames to draw) on top of
    the replay's game kwargs; it is not a setting of the game (no rule depends on it).
    """
    from arena.envs.registry import is_registered, make_core

    h = replay.header
    kwargs = replay_game_kwargs(replay)
    gid = h["game_id"]
    origin = h.get("plugin") or h.get("plugin_package")
    if origin and not is_registered(gid):
        what = "plug-in module" if h.get("plugin") else "package"
        raise ReplayError(f"replay {h['match_id']} is of game {gid!r} from the {what} {_clip(origin)}, "
                          f"which is not loaded: {load_hint(h)}")
    recorded_view = kwargs.get("render_mode")
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    try:
        core = make_core(gid, **kwargs)
    except GameNotFound as e:
        raise ReplayError(
            f"replay {h['match_id']} is of game {gid!r}, which this arena does not have "
            f"(the game may have changed version; if a plug-in registers it, {load_hint(h)}): {e}"
        ) from e
    except ConfigError as e:  # a setting the game refuses (a value out of range)
        raise ReplayError(f"replay {h['match_id']}: {e}") from None
    settings = core.settings
    if render_mode is not None and isinstance(settings, dict):
        settings = {k: v for k, v in settings.items() if k != "render_mode"}
        if recorded_view is not None:
            settings["render_mode"] = recorded_view
    if settings != h.get("game_settings", settings):
        core.close()
        raise ReplayError(
            f"game {gid} has changed settings since the replay was written: "
            f"replay {_clip(h.get('game_settings'), 300)} vs now {_clip(settings, 300)}"
        )
    return core


def resimulate(replay: Replay, record: str | None = None, seat_agent: Callable[[list, int], Any] = ReplayAgent,
               core: Any = None):
    """Play the replay's recorded moves again through its game: ``(core, MatchResult)``.

    `record`: what the new replay holds, ``"text"`` or ``"actions"`` (default: what the
    recorded one holds). The core is left in the final state (after the last move), for
    views of the end. `seat_agent(steps, seat)` makes each seat's player (a `ReplayAgent`).
    """
    from arena.match import InvalidMovePolicy, play_match

    h = replay.header
    core = core if core is not None else core_for_replay(replay)
    if not core.resimulates:  # the rules live in a game process (StarCraft II)
        why = core.not_resimulated(replay)
        core.close()
        raise ReplayError(why)
    seats = len(h["players"])
    agents = [seat_agent(replay.steps, s) for s in range(seats)]
    policy = InvalidMovePolicy(**h.get("policy", {}))
    again = play_match(core, agents, seed=h.get("seed"), policy=policy, max_moves=h.get("max_moves"),
                       match_id=h["match_id"], record=record or replay.record)
    return core, again


@dataclass
class Resimulation:
    """What `resimulate_steps` got by playing a replay's recorded actions again, and what the replay
    recorded: the returns and the number of moves of each."""

    returns: list[float]
    moves: int
    recorded_returns: list[float]
    recorded_moves: int
    outcome: str

    @property
    def return_error(self) -> float:
        """The largest difference between a re-simulated and a recorded return (inf: a count differs)."""
        if len(self.returns) != len(self.recorded_returns):
            return float("inf")
        return max((abs(a - b) for a, b in zip(self.returns, self.recorded_returns)), default=0.0)

    def matches(self, tol: float = 1e-9) -> bool:
        return self.moves == self.recorded_moves and self.return_error <= tol


def resimulate_steps(replay: Replay, on_step: Callable[[Any, int, list[float]], None] | None = None, *,
                     on_reset: Callable[[Any], None] | None = None, render_mode: str | None = None,
                     core: Any = None) -> Resimulation:
    """Play a replay's recorded actions again on a fresh core of its game (same game kwargs, seed,
    invalid-move policy and move limit), calling ``on_step(core, moves, rewards)`` after every move
    the game applied (`moves` so far, 1 after the first; `rewards` that move's, one per player) and
    ``on_reset(core)`` once the game is reset, before the first move: where a viewer draws frames.

    `render_mode` makes the env with it (``"rgb_array"``: ``core.env.render()`` gives frames);
    `core`: one made by ``core_for_replay(replay, render_mode)`` already (it is closed here). A
    continuous action is stored as the JSON floats of what the agent returned (a float32 vector
    exactly) and validated into the action space's dtype again, so the env gets the very values
    it got when the match was played.
    """
    from arena.match import InvalidMovePolicy, play_match

    h = replay.header
    core = core if core is not None else core_for_replay(replay, render_mode)
    # The match loop has no per-move hook (its hot loop pays for every call): the callbacks wrap
    # this private core's own apply / apply_joint / reset instead.
    moves = [0]
    apply, apply_joint, reset = core.apply, core.apply_joint, core.reset

    def stepped() -> None:
        moves[0] += 1
        if on_step is not None:
            on_step(core, moves[0], core.step_rewards())

    def applied(p: int, action: Any) -> str | None:
        why = apply(p, action)
        if why is None:
            stepped()
        return why

    def applied_joint(actions: dict) -> dict:
        refused = apply_joint(actions)
        stepped()
        return refused

    def was_reset(seed: int | None = None) -> None:
        reset(seed)
        moves[0] = 0
        if on_reset is not None:
            on_reset(core)

    core.apply, core.apply_joint, core.reset = applied, applied_joint, was_reset
    agents = [ReplayAgent(replay.steps, s) for s in range(len(h["players"]))]
    try:
        again = play_match(core, agents, seed=h.get("seed"), policy=InvalidMovePolicy(**h.get("policy", {})),
                           max_moves=h.get("max_moves"), match_id=h["match_id"], record=False)
    finally:
        core.close()
    r = replay.result
    return Resimulation([float(x) for x in again.returns], again.moves, [float(x) for x in r["returns"]],
                        int(r.get("moves", 0)), again.outcome)


class _Watching(ReplayAgent):
    """A replaying seat that also keeps the structured view (`Observation.raw`: tensor and mask) it is
    shown before each of its recorded moves the game accepted."""

    def __init__(self, steps: list[dict], seat: int, out: list, ask: Callable[[Any], Any] | None = None):
        super().__init__(steps, seat)
        self.out, self.ask = out, ask

    def act(self, observation) -> Any:
        step = self._queue[0] if self._queue else None
        if step is not None and step.get("event") == "ok" and not is_fault(step.get("action")):
            move = (observation.player, observation.raw, step.get("action"))
            self.out.append(move if self.ask is None else (*move, self.ask(observation)))
        return super().act(observation)


def observed_moves(replay: Replay, seats: set[int] | None = None,
                   ask: dict[int, Callable[[Any], Any]] | None = None) -> list[tuple]:
    """``(seat, structured view, action)`` of every accepted move of `seats` (None: all), in order, by
    re-simulating the replay through its game: the observation tensors and masks the player saw,
    which replays do not store (imitation reads these for replays of matches it did not play; a match
    played with observed seats keeps them as played: `arena.match.observe`). An attempt the game then refused
    is dropped afterwards (the replay marks it invalid). Raises `ReplayError` like `core_for_replay`.

    `ask` (seat -> function of the `Observation`): each move of those seats gets a fourth element, the
    function's answer at that position (imitation asks a teacher whose strategy can be read for its
    action probabilities)."""
    from arena.match import InvalidMovePolicy, play_match

    h = replay.header
    core = core_for_replay(replay)
    out: list[tuple] = []
    n = len(h["players"])
    ask = ask or {}
    agents = [_Watching(replay.steps, s, out, ask.get(s)) if seats is None or s in seats
              else ReplayAgent(replay.steps, s) for s in range(n)]
    try:
        play_match(core, agents, seed=h.get("seed"), policy=InvalidMovePolicy(**h.get("policy", {})),
                   max_moves=h.get("max_moves"), match_id=h["match_id"], record=False)
    finally:
        core.close()
    return out


def verify_replay(replay: Replay | str | os.PathLike) -> VerifyReport:
    """Re-simulate `replay` and compare. A game that cannot be re-simulated here (its rules live in
    a game process: StarCraft II, ``resimulates = False``) is checked as far as the game allows
    instead (`GameCore.check_replay`): the report's ``resimulated`` is False and its warnings say why."""
    if not isinstance(replay, Replay):
        replay = read_replay(replay)
    core = core_for_replay(replay)
    if not core.resimulates:
        try:
            found = core.check_replay(replay)
        finally:
            core.close()
        h = replay.header
        return VerifyReport(not found["differences"], h["match_id"], h["game_id"], len(replay.steps),
                            list(found["differences"]), list(found["warnings"]), resimulated=False,
                            checks=list(found["checks"]))
    report, core, _ = _verify(replay, core=core)
    core.close()
    return report


def _verify(replay: Replay | str | os.PathLike, record: str | None = None,
            seat_agent: Callable[[list, int], Any] = ReplayAgent, core: Any = None):
    """(report, core in the final state, the re-simulated replay)."""
    if not isinstance(replay, Replay):
        replay = read_replay(replay)
    h = replay.header
    from arena.envs.registry import game_origin

    core, again = resimulate(replay, record, seat_agent, core)
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
            if k == "obs" and "obs" not in a:
                continue  # an actions-only replay: nothing recorded to compare
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
    return VerifyReport(not diffs, h["match_id"], h["game_id"], len(old_steps), diffs, warnings), core, again.replay


@dataclass
class FinalView:
    """What the players see once the last recorded move is made (`texts[p]`, None where unknown), and
    the same as people read it (`shown[p]`: `GameCore.human_view`, cards by name and no repeated
    rules; None where not re-simulated).

    `note` says why there is no view (the game is not loaded, the re-simulation differs).
    """

    texts: list[str | None]
    note: str = ""
    shown: list[str | None] | None = None


@dataclass
class ReplayViews:
    """What a replay shows, step by step: `steps[i]` is the text the player of step i saw before
    its move, `action_texts[i]` that move as the game writes it (None where unknown), `shown[i]` the
    view of step i as people read it (`GameCore.human_view`; None where not re-simulated), and
    `final` the view after the last move. `note` says why the re-simulated views are missing."""

    steps: list[str | None]
    action_texts: list[str | None]
    final: FinalView
    note: str = ""
    shown: list[str | None] | None = None


class _Showing(ReplayAgent):
    """A replaying seat that also keeps the view for people of each position it is asked to move in:
    ``out[(seat, move)]``, one per attempt, in order."""

    def __init__(self, steps: list[dict], seat: int, out: dict):
        super().__init__(steps, seat)
        self.out = out

    def act(self, observation) -> Any:
        try:
            view = observation.human_view
        except Exception:  # a game's rendering that breaks: the text shows instead
            view = None
        self.out.setdefault((observation.player, observation.step), deque()).append(view)
        return super().act(observation)


def _human_views(core, n: int) -> list[str | None]:
    out: list[str | None] = []
    for p in range(n):
        try:
            out.append(core.human_view(p))
        except Exception:
            out.append(None)
    return out


def _move_texts(replay: Replay) -> list[str | None]:
    """Each step's move as people read it where the replay has no text for it: a structured move (a
    dict of parts) through its game's action model (``Attack_unit units=[0, 1] target=4``), which the
    game gives without playing (StarCraft II's from the replay's settings); else None."""
    texts = [s.get("action_text") for s in replay.steps]
    if all(t is not None or not isinstance(s.get("action"), dict) for t, s in zip(texts, replay.steps)):
        return texts
    try:
        core = core_for_replay(replay)
    except Exception:  # a game that cannot be made here: the moves show as recorded
        return texts
    try:
        for i, s in enumerate(replay.steps):
            if texts[i] is None and isinstance(s.get("action"), dict):
                try:
                    texts[i] = core.action_model(s["player"]).to_text(s["action"])
                except Exception:
                    pass
    finally:
        core.close()
    return texts


def replay_views(replay: Replay) -> ReplayViews:
    """Every player's view at every step and after the last move, by re-simulating the replay with
    the observation text recorded (a text replay's own views are the same: the re-simulation
    matches it or `note` says where it differs)."""
    n = len(replay.header.get("players") or [])
    count = len(replay.steps)
    own = [s.get("obs") for s in replay.steps]

    def missing(note: str) -> ReplayViews:
        return ReplayViews(own, _move_texts(replay), FinalView([None] * n, note), note)

    seen: dict = {}
    try:
        report, core, again = _verify(replay, "text", lambda steps, seat: _Showing(steps, seat, seen))
    except ReplayError as e:
        return missing(str(e))
    except Exception as e:  # a plug-in game that breaks must not break the viewer
        return missing(f"re-simulating the game failed: {type(e).__name__}: {e}")
    try:
        if not report.ok:
            return missing("the re-simulation does not match the recording "
                           f"(arena replay verify shows how): {report.differences[0]}")
        steps = again.steps
        texts: list[str | None] = []
        for p in range(n):
            try:
                texts.append(core.text(p))
            except Exception:
                texts.append(None)
        shown: list[str | None] = []
        for s in steps[:count]:
            queue = seen.get((s.get("player"), s.get("t")))
            shown.append(queue.popleft() if queue and s.get("obs") is not None else None)
            if shown[-1] is None and s.get("obs") is not None:
                shown[-1] = s["obs"]
        return ReplayViews([s.get("obs") for s in steps][:count], [s.get("action_text") for s in steps][:count],
                           FinalView(texts, shown=_human_views(core, n)), shown=shown)
    finally:
        core.close()


def text_replay(replay: Replay) -> Replay:
    """`replay` with each player's observation text in its steps: itself when it was recorded with
    text, else its re-simulation (for readers of ``obs``: imitation, tabular learners). Raises
    `ReplayError` when the game is not loaded or the re-simulation differs."""
    if replay.record == "text":
        return replay
    report, core, again = _verify(replay, "text")
    core.close()
    if not report.ok:
        raise ReplayError(f"replay {replay.match_id}: the re-simulation does not match the recording "
                          f"(arena replay verify shows how): {report.differences[0]}")
    steps = again.steps
    for new, old in zip(steps, replay.steps):  # the agents' own times, not the replaying agents'
        new["time"] = old.get("time", new["time"])
    return Replay(dict(replay.header, record="text"), steps, replay.result)


def final_view(replay: Replay) -> FinalView:
    """Re-simulate the replay and read every player's view of the final position.

    Replays store each step's observation before its move (or none: ``record="actions"``), so
    the position after the last move exists only in the game: this plays the recorded moves
    again to get there.
    """
    return replay_views(replay).final


def _short(x: Any, n: int = 80) -> str:
    s = repr(x)
    return s if len(s) <= n else s[: n - 3] + "..."


_clip = _short
