"""`play_match`: the one match loop.

League, evaluation, ``arena play`` and trainers all call it. It serves
turn-based games (PettingZoo AEC and the built-in adapters), simultaneous-move
games (PettingZoo parallel) and single-agent Gymnasium tasks through the same
`GameCore` view, enforces legality, applies the invalid-move policy, times
every move, and returns a `MatchResult` with the replay.

Invalid-move policy: an invalid move (illegal, malformed, refused by the game),
an agent that raises, one that runs past the per-move time limit, and one that
returns garbage (None, NaN, a megabyte of text) are all the same event. The
player is asked again, with the reason in ``observation.feedback``, up to
``allowance`` times for that move (1 by default, like TextArena); the next
failure loses the match: the offender scores ``loss`` (-1) and every other
player ``win`` (+1). An agent raising `Forfeit` (a human who quits) loses at
once. Nothing an agent does crashes the caller.
"""

from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from importlib.metadata import version as _pkg_version
from typing import Any, Sequence

from arena.agents.base import Forfeit, derive_seed
from arena.agents.specs import make_agent
from arena.envs.core import SIMULTANEOUS, TERMINAL, GameCore
from arena.envs.observation import Observation
from arena.envs.registry import game_origin, make_core
from arena.replays.format import FORMAT, VERSION, Replay, encode_action, new_match_id

_perf = time.perf_counter


@dataclass(frozen=True)
class InvalidMovePolicy:
    #: Retries allowed for one move after an invalid attempt (TextArena's default is 1).
    allowance: int = 1
    #: Final return of the player who forfeits, and of every other player.
    loss: float = -1.0
    win: float = 1.0

    def __post_init__(self):
        if self.allowance < 0:
            raise ValueError(f"invalid-move allowance must be >= 0, got {self.allowance}")


_DEFAULT_POLICY = InvalidMovePolicy()


class MoveTimeout(BaseException):
    """Raised inside an agent that runs past the per-move time limit.

    A BaseException so that an agent's own ``except Exception`` cannot swallow it.
    """


class RecordedFault(Exception):
    """Raised by replaying agents to reproduce a recorded non-move (error, timeout, forfeit)."""

    def __init__(self, event: str, reason: str, encoded_action=None):
        super().__init__(reason)
        self.event, self.reason, self.encoded_action = event, reason, encoded_action


@dataclass
class MatchResult:
    match_id: str
    game_id: str
    seed: int | None
    agents: list[str]
    returns: list[float]
    winner: int | None
    draw: bool
    moves: int
    outcome: str  # "normal", "forfeit" or "max_moves"
    reason: str = ""
    forfeiter: int | None = None
    invalid: list[int] = field(default_factory=list)
    move_time_total: list[float] = field(default_factory=list)
    move_time_max: list[float] = field(default_factory=list)
    #: Agent calls (move attempts) per player: move_time_total / this is the mean time per move.
    move_calls: list[int] = field(default_factory=list)
    duration: float = 0.0
    replay: Replay | None = None
    replay_path: str | None = None
    #: For batch play: which original agent sits in each seat.
    seats: list[int] | None = None

    def score(self, seat: int) -> float:
        """1 for a win, 0.5 for a draw, 0 for a loss (two or more players)."""
        if self.draw:
            return 0.5
        return 1.0 if self.winner == seat else 0.0

    @classmethod
    def from_replay(cls, replay: Replay, path: str | None = None) -> "MatchResult":
        """The result a replay records (timing per move is not kept: the totals are rebuilt)."""
        h, r = replay.header, replay.result
        n = len(r["returns"])
        return cls(match_id=h["match_id"], game_id=h["game_id"], seed=h.get("seed"), agents=list(h.get("agents", [])),
                   returns=[float(x) for x in r["returns"]], winner=r.get("winner"), draw=bool(r.get("draw")),
                   moves=int(r.get("moves", 0)), outcome=r.get("outcome", "normal"), reason=r.get("reason", ""),
                   forfeiter=r.get("forfeiter"), invalid=list(r.get("invalid") or [0] * n),
                   duration=float(r.get("duration") or 0.0), replay_path=path)


class _Encoded:
    """An action already in its recorded (JSON) form, replayed as-is."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _outcome(returns: list[float]) -> tuple[int | None, bool]:
    if len(returns) < 2:
        return None, False
    best = max(returns)
    if min(returns) == best:
        return None, True
    top = [i for i, r in enumerate(returns) if r == best]
    return (top[0], False) if len(top) == 1 else (None, False)


def _on_alarm(signum, frame):
    raise MoveTimeout()


class _Timer:
    """Per-move time limit: SIGALRM on the main thread (cheap), a watchdog thread elsewhere."""

    def __init__(self, limit: float | None):
        self.limit = limit
        self.use_signal = (
            limit is not None and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
        )
        self._old = None
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self):
        if self.use_signal:
            self._old = signal.signal(signal.SIGALRM, _on_alarm)
        return self

    def __exit__(self, *exc):
        if self.use_signal:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._old)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def call(self, fn, arg):
        limit = self.limit
        if limit is None:
            return fn(arg)
        if self.use_signal:
            signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                return fn(arg)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arena-move")
        fut = self._pool.submit(fn, arg)
        try:
            return fut.result(timeout=limit)
        except FutureTimeout:
            # The hung call is abandoned on its own thread; a fresh one serves the next move.
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            raise MoveTimeout() from None


_VERSION: list[str] = []


def _arena_version() -> str:
    if not _VERSION:
        try:
            _VERSION.append(_pkg_version("arena"))
        except Exception:  # pragma: no cover
            _VERSION.append("dev")
    return _VERSION[0]


def play_match(
    game: Any,
    agents: Sequence[Any],
    seed: int | None = None,
    *,
    policy: InvalidMovePolicy | None = None,
    move_time_limit: float | None = None,
    max_moves: int | None = None,
    match_id: str | None = None,
    record: bool = True,
    game_kwargs: dict | None = None,
) -> MatchResult:
    """Play one match of `game` (an id, an env or a `GameCore`) between `agents` (objects or spec strings)."""
    policy = policy or _DEFAULT_POLICY
    core: GameCore = make_core(game, **(game_kwargs or {}))
    n = len(core.players)
    if len(agents) != n:
        raise ValueError(f"{core.game_id} has {n} players ({', '.join(core.players)}), got {len(agents)} agents")
    agents = [make_agent(a, core, derive_seed(seed, i)) if isinstance(a, str) else a for i, a in enumerate(agents)]
    specs = [getattr(a, "spec", type(a).__name__) for a in agents]
    match_id = match_id or new_match_id(core.game_id, seed)
    started = _perf()

    core.reset(seed)
    for i, a in enumerate(agents):
        reset = getattr(a, "reset", None)
        if reset is not None:
            reset(derive_seed(seed, i))
    observers = [(i, a.observe) for i, a in enumerate(agents) if callable(getattr(a, "observe", None))]
    acts = [a.act for a in agents]

    steps: list[dict] | None = [] if record else None
    invalid = [0] * n
    t_total = [0.0] * n
    t_max = [0.0] * n
    calls = [0] * n
    allowance = policy.allowance
    forfeiter: int | None = None
    outcome, reason = "normal", ""
    t = 0
    cur = core.current_player
    validate, apply = core.validate, core.apply

    def ask(p: int, feedback: str | None) -> tuple[Any, str, str | None, str | None]:
        """One attempt of player p: (normalised action, event, reason, text seen)."""
        obs = Observation(core, p, t, feedback)
        t0 = _perf()
        try:
            action = acts[p](obs) if move_time_limit is None else timer.call(acts[p], obs)
            event = None
        except MoveTimeout:
            action, event, why = None, "timeout", f"no move within the {move_time_limit}s limit"
        except Forfeit as e:
            action, event, why = None, "forfeit", str(e) or "forfeit"
        except RecordedFault as e:
            action, event, why = _Encoded(e.encoded_action), e.event, e.reason
        except Exception as e:  # an agent's bug must never crash the caller
            action, event, why = None, "error", f"agent raised {type(e).__name__}: {e}"
        dt = _perf() - t0
        calls[p] += 1
        t_total[p] += dt
        if dt > t_max[p]:
            t_max[p] = dt
        text = obs.text if record else None
        if event is None:
            legal = obs._legal
            if (type(action) is int or type(action) is str) and type(legal) is list and action in legal:
                norm, why, event = action, None, "ok"  # the agent chose from the legal list it was shown
            else:
                norm, why = validate(p, action)
                event = "ok" if why is None else "invalid"
        else:
            norm = None
        if steps is not None:
            steps.append({
                "type": "step", "t": t, "player": p, "obs": text,
                "action": action.value if type(action) is _Encoded else encode_action(action),
                "action_text": _action_text(core, p, norm) if event == "ok" else None,
                "event": event, "reason": why, "time": dt,
            })
        return norm, event, why, text

    with _Timer(move_time_limit) as timer:
        while True:
            p = cur()
            if p == TERMINAL:
                break
            if max_moves is not None and t >= max_moves:
                outcome, reason = "max_moves", f"stopped after {max_moves} moves"
                break
            if p == SIMULTANEOUS:
                joint: dict[int, Any] = {}
                for q in core.acting_players():
                    a, forfeiter, reason = _move_with_retries(ask, q, allowance, invalid, None)
                    if forfeiter is not None:
                        break
                    joint[q] = a
                if forfeiter is not None:
                    break
                refused = core.apply_joint(joint)
                for q, why in refused.items():  # refused by the engine after validation: count it
                    invalid[q] += 1
                    if steps is not None:
                        steps.append({"type": "step", "t": t, "player": q, "obs": None, "action": encode_action(joint[q]),
                                      "action_text": None, "event": "invalid", "reason": why, "time": 0.0})
                    if invalid[q] > allowance:
                        forfeiter, reason = q, why
                if forfeiter is not None:
                    break
                for i, obs_fn in observers:
                    for q, a in joint.items():
                        if q != i:
                            obs_fn(q, a)
                t += 1
                continue
            feedback = None
            tries = 0
            while True:
                a, event, why, _ = ask(p, feedback)
                if event == "ok":
                    why = apply(p, a)
                    if why is None:
                        break
                    event = "invalid"
                    if steps is not None:  # the engine refused it: amend the record
                        steps[-1]["event"], steps[-1]["reason"], steps[-1]["action_text"] = "invalid", why, None
                invalid[p] += 1
                tries += 1
                if event == "forfeit" or tries > allowance:
                    forfeiter, reason = p, why
                    break
                feedback = why
            if forfeiter is not None:
                break
            for i, obs_fn in observers:
                if i != p:
                    obs_fn(p, a)
            t += 1

    if forfeiter is not None:
        outcome = "forfeit"
        returns = [policy.win] * n
        returns[forfeiter] = policy.loss
        reason = f"{core.players[forfeiter]} forfeits: {reason}"
    else:
        returns = [float(r) for r in core.returns()]
        if outcome == "normal":
            reason = getattr(core, "outcome_reason", "") or ""
    winner, draw = _outcome(returns)
    duration = _perf() - started
    replay = None
    if record:
        header = {
            "type": "header", "format": FORMAT, "version": VERSION, "match_id": match_id, "game_id": core.game_id,
            # entry_point, and plugin / plugin_package for plug-in games: what `replay verify` must load
            **game_origin(core.game_id),
            "game_settings": core.settings, "engine": core.engine, "arena": _arena_version(), "seed": seed,
            "game_kwargs": game_kwargs or {}, "agents": specs, "players": list(core.players),
            "policy": policy.__dict__,
            "max_moves": max_moves, "created": time.time(),
        }
        result_line = {
            "type": "result", "returns": returns, "winner": winner, "draw": draw, "outcome": outcome,
            "reason": reason, "forfeiter": forfeiter, "moves": t, "invalid": invalid, "duration": duration,
        }
        replay = Replay(header, steps, result_line)
    result = MatchResult(
        match_id=match_id, game_id=core.game_id, seed=seed, agents=specs, returns=returns, winner=winner, draw=draw,
        moves=t, outcome=outcome, reason=reason, forfeiter=forfeiter, invalid=invalid, move_time_total=t_total,
        move_time_max=t_max, move_calls=calls, duration=duration, replay=replay,
    )
    for i, a in enumerate(agents):  # optional: agents that show the end of a game (a person at the terminal)
        over = getattr(a, "match_over", None)
        if over is not None:
            try:
                over(core.text(i), result, i)
            except Exception:  # a display problem must not lose the result
                pass
    return result


def _move_with_retries(ask, p: int, allowance: int, invalid: list[int], feedback):
    tries = 0
    while True:
        a, event, why, _ = ask(p, feedback)
        if event == "ok":
            return a, None, ""
        invalid[p] += 1
        tries += 1
        if event == "forfeit" or tries > allowance:
            return None, p, why
        feedback = why


def _action_text(core: GameCore, p: int, action: Any) -> str | None:
    try:
        return core.action_to_text(p, action)
    except Exception:
        return None
