"""The one match engine: `Match` (one match in flight), `run_matches` (many, with one batched call a
round for every agent that answers in batches) and `play_match` (one match, nothing batched).

League, evaluation, ``arena play`` and trainers all play through it (`arena.match.pool` runs it in
this process, worker processes or Ray). It serves
turn-based games (PettingZoo AEC and the built-in adapters), simultaneous-move
games (PettingZoo parallel) and single-agent Gymnasium tasks through the same
`GameCore` view, enforces legality, applies the invalid-move policy, times
every move, and returns a `MatchResult` with the replay.

Speed: a learner plays millions of moves through this loop, so its overhead is the learner's
speed. A plain move (the agent returns a move from the legal list its observation showed it,
and the engine takes it) costs one `current_player()`, one legal list, one lazy `Observation`
(nothing is computed unless the agent reads it; none at all for an agent with
``act_legal(legal)``, `BaseAgent.act_legal`, which is given the list alone), the agent call between
two clock reads, a membership test in that same legal list (no second legality check in
Python), one `apply()` (the engine's own call where the core has `apply_fast`) and, when
recording, one tuple; everything else (retries, faults, refusals, simultaneous steps) goes
through `_Slow`. The replay's step dicts are built only when the replay is read or written,
and ``record="actions"`` keeps only what re-simulation needs (`arena.replays.format`). Observed
seats (``observe``: what a player saw as it played, `arena.match.observe`) cost a match that
observes no one one falsy test a move.

Invalid-move policy: an invalid move (illegal, malformed, refused by the game),
an agent that raises, one that runs past the per-move time limit, and one that
returns garbage (None, NaN, a megabyte of text) are all the same event. The
player is asked again, with the reason in ``observation.feedback``, up to
``allowance`` times for that move (1 by default, like TextArena); the next
failure loses the match: the offender scores ``loss`` (-1) and every other
player ``win`` (+1); a one-player task ends with what it earned. An agent
raising `Forfeit` (a human who quits) loses at once. Nothing an agent does
crashes the caller. The rule is `InvalidMovePolicy` (`arena.envs.core`), which
the PettingZoo facades an outside trainer steps play by too.
"""

from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from importlib.metadata import version as _pkg_version
from itertools import islice
from typing import Any, Callable, Iterable, Sequence

from arena.agents.base import Forfeit, derive_seed
from arena.agents.specs import make_agent
from arena.errors import AgentSpecError
from arena.envs.core import SIMULTANEOUS, GameCore, InvalidMovePolicy
from arena.envs.observation import Observation, ShownLegal
from arena.envs.registry import game_origin, make_core
from arena.match.observe import PLAYED, played_asker
from arena.replays.format import FORMAT, RECORD_MODES, VERSION, Replay, encode_action, new_match_id

_perf = time.perf_counter


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
    # play_match builds it with positional arguments: a new field goes after `replay`.
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
    #: The replay as the gzipped bytes of its file, for a league that keeps replays in its database
    #: (`MatchJob.replay_blob`): written in the transaction that records the match.
    replay_blob: bytes | None = None
    #: Files the game itself made, kept beside the replay (`keep_replay` writes ``<match id><suffix>``):
    #: suffix -> bytes (StarCraft II's own ``.SC2Replay``, `arena.envs.sc2.game`). None: none.
    attachments: dict[str, bytes] | None = None
    #: What the observed seats saw as they played (`Match`'s ``observe``; `arena.match.observe`): one
    #: ``(seat, observation.raw, action, answer or None)`` per accepted move, in order. None: none observed.
    observed: list[tuple] | None = None

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


def _outcome(returns: list[float]) -> tuple[int | None, bool]:
    """(winner, draw): the one best return wins; all equal is a draw; a shared best is neither."""
    if len(returns) == 2:  # the common case, compared directly (NaN, neither above nor equal, goes on below)
        a, b = returns
        if a > b:
            return 0, False
        if b > a:
            return 1, False
        if a == b:
            return None, True
    elif len(returns) < 2:
        return None, False
    best = max(returns)
    k = returns.count(best)
    if k == len(returns):
        return None, True
    return (returns.index(best), False) if k == 1 else (None, False)


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


def record_mode(record: bool | str | None) -> str | None:
    """`play_match`'s ``record`` as a mode: ``"text"`` (True), ``"actions"``, or None (False: no replay)."""
    if record is True:
        return "text"
    if record is False or record is None:
        return None
    if record in RECORD_MODES:
        return record
    raise ValueError(f"record must be True, False, 'actions' or 'text', got {record!r}")


class _Failed:
    """An agent call that raised: what the replay records for it and why the attempt does not count."""

    __slots__ = ("action", "event", "why")

    def __init__(self, e: BaseException, limit: float | None):
        self.action = None
        if isinstance(e, MoveTimeout):
            self.event, self.why = "timeout", f"no move within the {limit}s limit"
        elif isinstance(e, Forfeit):
            self.event, self.why = "forfeit", str(e) or "forfeit"
        elif isinstance(e, RecordedFault):
            self.action, self.event, self.why = e.encoded_action, e.event, e.reason
        else:  # an agent's bug must never crash the caller
            self.event, self.why = "error", f"agent raised {type(e).__name__}: {e}"


class _Slow:
    """Everything but a plain legal move: retries with feedback, faults, engine refusals and
    simultaneous steps, played by the invalid-move policy. `play_match`'s own loop handles the
    common case (the first attempt is a legal move the engine accepts) and hands the rest here."""

    __slots__ = ("core", "acts", "call", "limit", "rows", "text_mode", "invalid", "t_total", "t_max", "calls",
                 "forfeits", "watch", "seen", "asks", "shown")

    def __init__(self, core, acts, call, limit, rows, text_mode, invalid, t_total, t_max, calls,
                 policy: InvalidMovePolicy, watch: frozenset = frozenset(), seen: list | None = None,
                 asks: dict | None = None):
        self.core, self.acts, self.call, self.limit, self.rows, self.text_mode = core, acts, call, limit, rows, text_mode
        self.invalid, self.t_total, self.t_max, self.calls = invalid, t_total, t_max, calls
        self.forfeits = policy.forfeits
        #: The observed seats, what they saw (`Match.see`), their readers; the last attempt judged:
        #: (its observation, the move as recorded).
        self.watch, self.seen, self.asks, self.shown = watch, seen, asks, None

    def ask(self, p: int, t: int, feedback: str | None) -> tuple[Any, str, str | None]:
        """One recorded attempt of player p: (normalised action, event, reason)."""
        obs = Observation(self.core, p, t, feedback)
        act, call = self.acts[p], self.call
        t0 = _perf()
        try:
            a = act(obs) if call is None else call(act, obs)
        except (MoveTimeout, Exception) as e:  # not KeyboardInterrupt: a person stopping the run stops it
            a = _Failed(e, self.limit)
        dt = _perf() - t0
        self.calls[p] += 1
        self.t_total[p] += dt
        if dt > self.t_max[p]:
            self.t_max[p] = dt
        return self.judge(p, t, obs, a, dt)

    def judge(self, p: int, t: int, obs: Observation, a: Any, dt: float) -> tuple[Any, str, str | None]:
        """Judge and record an attempt whose agent call returned `a` (or failed: a `_Failed`)."""
        if type(a) is _Failed:
            norm, action, event, why = None, a.action, a.event, a.why
        else:
            action = encode_action(a)
            legal = obs._legal
            if (type(a) is int or type(a) is str) and type(legal) is list and a in legal:
                norm, why, event = a, None, "ok"  # the agent chose from the legal list it was shown
            else:
                norm, why = self.core.validate(p, a)
                event = "ok" if why is None else "invalid"
        if self.watch:
            self.shown = (obs, action)
        rows = self.rows
        if rows is not None:
            if self.text_mode:
                text = obs.text
                rows.append((t, p, text, action, _action_text(self.core, p, norm) if event == "ok" else None,
                             event, why, dt))
            else:
                rows.append((t, p, None, action, None, event, why, dt))
        return norm, event, why

    def view(self, p: int) -> tuple:
        """What observed player p saw at the attempt just judged (`Match.see`)."""
        obs, action = self.shown
        ask = self.asks.get(p) if self.asks else None
        return p, obs.raw, action, None if ask is None else ask(obs)

    def finish_turn(self, p: int, t: int, norm: Any, event: str, why: str | None):
        """Player p's turn after its first judged attempt: apply it if it is fine, else ask again as the
        policy allows. Returns (the applied action, forfeiter, reason)."""
        tries = 0
        while True:
            if event == "ok":
                seen = self.view(p) if p in self.watch else None  # before the move changes the position
                why = self.core.apply(p, norm)
                if why is None:
                    if seen is not None:
                        self.seen.append(seen)
                    return norm, None, ""
                event = "invalid"
                rows = self.rows
                if rows is not None:  # the engine refused it: amend the record
                    r = rows[-1]
                    rows[-1] = (r[0], r[1], r[2], r[3], None, "invalid", why, r[7])
            self.invalid[p] += 1
            tries += 1
            if event == "forfeit" or self.forfeits(tries):
                return None, p, why
            norm, event, why = self.ask(p, t, why)

    def joint_step(self, t: int, first: dict[int, tuple[Observation, Any, float]] | None = None):
        """One simultaneous step: every acting player's move (with retries), then the engine's step.
        `first`: the first attempts of some players, already answered (``(observation, move, seconds)``:
        a batched agent's, answered for many matches in one call). Returns (joint actions, forfeiter,
        reason)."""
        joint: dict[int, Any] = {}
        for q in self.core.acting_players():
            tries, feedback = 0, None
            while True:
                if first is not None and q in first:
                    obs, a, dt = first.pop(q)
                    self.calls[q] += 1
                    self.t_total[q] += dt
                    if dt > self.t_max[q]:
                        self.t_max[q] = dt
                    a, event, why = self.judge(q, t, obs, a, dt)
                else:
                    a, event, why = self.ask(q, t, feedback)
                if event == "ok":
                    break
                self.invalid[q] += 1
                tries += 1
                if event == "forfeit" or self.forfeits(tries):
                    return joint, q, why
                feedback = why
            joint[q] = a
            if q in self.watch:  # (kept as the replay keeps it: "ok", even where the joint step refuses it)
                self.seen.append(self.view(q))
        forfeiter, reason = None, ""
        refused = self.core.apply_joint(joint)
        for q, why in refused.items():  # refused by the engine after validation: count it
            self.invalid[q] += 1
            if self.rows is not None:
                self.rows.append((t, q, None, encode_action(joint[q]), None, "refused", why, 0.0))
            if self.forfeits(self.invalid[q]):
                forfeiter, reason = q, why
        return joint, forfeiter, reason


def check_agent_count(core: GameCore, given: int) -> None:
    """One agent per seat, or an `AgentSpecError` that says how many and gives an example."""
    k = len(core.players)
    if given != k:
        example = " ".join(["-p random"] * k)
        raise AgentSpecError(f"{core.game_id} has {k} player{'s' if k != 1 else ''} ({', '.join(core.players)}); "
                             f"got {given} agent spec{'s' if given != 1 else ''}: give one per seat, e.g. {example}")


class Match:
    """One match in flight: the engine's unit, and everything `play_match` used to keep in local
    variables.

    `advance` plays the match until it ends (then ``result`` is set) or until a *batched* agent must
    answer (one with ``act_batch(observations) -> moves``, seated with ``batched=True``): the
    observation is then queued for that agent in `waiting` and `advance` returns True; the answer
    comes back through `answer`, and the next `advance` goes on from it. `run_matches` is the loop
    that drives many matches so (every waiting move of a batched agent, across all of them, in one
    call); `play_match` is one match with nothing batched: one `advance` plays it to its end.

    The hot path (see the module docstring) is one loop inside `advance`; a batched answer re-enters
    it after the agent call, so the rules (legality, the invalid-move policy, replays) are written
    once for both.
    """

    __slots__ = ("core", "policy", "mode", "match_id", "seed", "specs", "game_kwargs", "max_moves", "limit_s",
                 "acts", "enders", "rows", "invalid", "t_total", "t_max", "calls", "slow", "t", "outcome", "started",
                 "timer", "pend", "joint", "result", "index", "hot", "watch", "seen", "asks")

    def __init__(self, game: Any, agents: Sequence[Any], seed: int | None = None,
                 policy: InvalidMovePolicy | None = None, move_time_limit: float | None = None,
                 max_moves: int | None = None, match_id: str | None = None, record: bool | str = True,
                 game_kwargs: dict | None = None, *, batched: bool = False, shared: dict[str, Any] | None = None,
                 index: int = 0, observe: Iterable[int] = (),
                 ask: dict[int, Callable[[Observation], Any]] | None = None):
        """`agents`: objects or spec strings (a spec found in `shared` is played by that object).
        `batched`: ask agents that have ``act_batch`` through `run_matches`' batched calls; such an
        agent is shared by the matches and is not reset per match (seed it once).

        `observe`: seats whose every accepted move keeps what the player saw (``result.observed``:
        `arena.match.observe`); `ask` (seat -> function of the `Observation`): each such move also
        keeps that function's answer at the position (a strategy reader's, never the playing agent's,
        except a seat mapped to `arena.match.observe.PLAYED`: its own agent's, from the move's search)."""
        self.policy = policy = policy or _DEFAULT_POLICY
        self.mode = mode = record_mode(record)
        self.core = core = game if isinstance(game, GameCore) else make_core(game, **(game_kwargs or {}))
        n = len(core.players)
        check_agent_count(core, len(agents))
        # One pass over the seats for everything the match needs of an agent (a match of tic-tac-toe
        # is a few microseconds: per-match work counts as much as per-move work).
        specs, acts, legal_acts, resets, observers, enders, objs = [], [], [], [], [], [], []
        seated: list[Any] = [None] * n
        for i, a in enumerate(agents):
            if isinstance(a, str):
                spec = a
                a = shared.get(spec) if shared else None
                if a is None:
                    a = make_agent(spec, core, derive_seed(seed, i))
            else:
                spec = getattr(a, "spec", type(a).__name__)
            specs.append(spec)
            objs.append(a)
            acts.append(a.act)
            if batched and callable(getattr(a, "act_batch", None)):
                seated[i] = a
                legal_acts.append(None)
                # A batched agent keeps what it needs per match itself (keyed by the core and the seat);
                # `seat_match` tells it the seed a per-match agent of its seat would be reset with.
                hook = getattr(a, "seat_match", None)
                if hook is not None:
                    hook(core, i, derive_seed(seed, i))
            else:
                # `act_legal(legal)`: the agent's move from the legal list alone (`BaseAgent.act_legal`).
                legal_acts.append(getattr(a, "act_legal", None))
                hook = getattr(a, "reset", None)
                if hook is not None:
                    resets.append((i, hook))
            hook = getattr(a, "observe", None)
            if callable(hook):
                observers.append((i, hook))
            hook = getattr(a, "match_over", None)
            if hook is not None:
                enders.append((i, hook))
        if ask and PLAYED in ask.values():  # the seats whose own agent labels its moves
            ask = {seat: played_asker(objs[seat], seat) if how == PLAYED else how for seat, how in ask.items()}
        self.specs, self.acts, self.enders = specs, acts, enders
        self.match_id = match_id or new_match_id(core.game_id, seed)
        self.seed, self.game_kwargs, self.max_moves, self.limit_s, self.index = seed, game_kwargs, max_moves, \
            move_time_limit, index
        self.started = _perf()
        core.seat_agents(objs)  # a game that must know who sits where before it starts (StarCraft II's own AI)
        core.reset(seed)
        for i, hook in resets:
            hook(derive_seed(seed, i))
        self.rows = rows = [] if mode is not None else None
        self.invalid, self.t_total, self.t_max, self.calls = invalid, t_total, t_max, calls = \
            [0] * n, [0.0] * n, [0.0] * n, [0] * n
        self.slow = None  # built at the first move that is not a plain legal one
        self.watch = watch = frozenset(observe)
        self.seen, self.asks = ([] if watch else None), ask
        self.t, self.outcome = 0, "normal"
        self.timer = timer = _Timer(move_time_limit) if move_time_limit is not None else None
        # What `advance` reads, in one tuple (a batched match re-enters `advance` at every move):
        # the core's bound methods are made once a match, not once a move.
        # `apply` without a Python call where the core has one (`OpenSpielCore.apply_fast`): it raises where
        # `apply` returns a reason, and `apply` is then asked for it. A core whose `apply` was replaced on
        # the instance (a viewer counting the moves it applies, `arena.match.verify.resimulate_steps`)
        # keeps every move going through that `apply`.
        apply_fast = core.apply_fast if "apply" not in vars(core) else None
        self.hot = (core, rows, seated, mode == "text", invalid, t_total, t_max, calls, acts, legal_acts, observers,
                    max_moves if max_moves is not None else float("inf"),
                    timer.call if timer is not None else None, core.current_player, core.apply,
                    core.action_to_text, apply_fast, core.legal_actions, core.text, watch)
        #: A batched answer to this match's move (player, observation, move, seconds), or None.
        self.pend = None
        #: A simultaneous tick waiting on batched calls: the first attempts answered so far, by player.
        self.joint: dict | None = None
        self.result: MatchResult | None = None

    def _slow(self) -> _Slow:
        timer = self.timer
        self.slow = _Slow(self.core, self.acts, timer.call if timer is not None else None, self.limit_s, self.rows,
                          self.mode == "text", self.invalid, self.t_total, self.t_max, self.calls,
                          self.policy, self.watch, self.seen, self.asks)
        return self.slow

    def see(self, p: int, t: int, obs: Observation | None, legal: Any, a: Any) -> bool:
        """Keep what observed player p sees before its move `a` (a plain legal one) is applied; True
        where it was kept (the caller drops it if the game then refuses the move)."""
        if p not in self.watch:
            return False
        if obs is None:
            obs = ShownLegal(self.core, p, t, legal)
        ask = self.asks.get(p) if self.asks else None
        self.seen.append((p, obs.raw, a if type(a) is int else encode_action(a), None if ask is None else ask(obs)))
        return True

    def answer(self, p: int, obs: Observation, a: Any, dt: float) -> None:
        """A batched agent's move `a` for the observation `advance` queued (or a `_Failed`)."""
        if self.joint is not None:  # a simultaneous move: judged with the others of its tick
            self.joint[p] = (obs, a, dt)
        else:
            self.pend = (p, obs, a, dt)

    def advance(self, waiting: dict | None = None) -> bool:
        """Play on until the match ends (returns False; ``result`` is set) or a batched agent must
        answer: its observation goes into ``waiting[id(agent)] = (agent, [(match, player, obs), ...])``
        and this returns True."""
        # The hot loop: one turn is cur(), the legal list, the agent call between two clock reads (with an
        # Observation, or the list alone for an agent that has `act_legal`), a membership test in the list the
        # agent was shown, apply(), and a tuple for the replay. The legal list (None where the game has none)
        # is asked once a move, shown to the agent and checked against: no second legality check in Python
        # when the agent picks from it.
        (core, rows, batched, text_mode, invalid, t_total, t_max, calls, acts, legal_acts, observers, limit, call,
         cur, apply, to_text, apply_fast, legal_of, view, watch) = self.hot
        forfeiter, reason, slow, t = None, "", self.slow, self.t
        timer, limit_s = self.timer, self.limit_s
        Shown, perf = ShownLegal, _perf
        text = atext = None
        pend, self.pend = self.pend, None
        if timer is not None:
            timer.__enter__()
        try:
            while True:
                if pend is None:
                    p = cur()
                    if p < 0:
                        if p != SIMULTANEOUS:
                            break  # TERMINAL
                        if t >= limit:
                            self.outcome, reason = "max_moves", f"stopped after {self.max_moves} moves"
                            break
                        first, self.joint = self.joint, None
                        if first is None and waiting is not None:
                            now = [q for q in core.acting_players() if batched[q] is not None]
                            if now:  # their first attempts go into this tick's batched calls
                                self.joint = {}
                                for q in now:
                                    agent = batched[q]
                                    waiting.setdefault(id(agent), (agent, []))[1].append(
                                        (self, q, Observation(core, q, t)))
                                self.t, self.slow = t, slow
                                return True
                        if slow is None:
                            slow = self._slow()
                        joint, forfeiter, reason = slow.joint_step(t, first)
                        if forfeiter is not None:
                            break
                        for i, obs_fn in observers:
                            for q, a in joint.items():
                                if q != i:
                                    obs_fn(q, a)
                        t += 1
                        continue
                    if t >= limit:
                        self.outcome, reason = "max_moves", f"stopped after {self.max_moves} moves"
                        break
                    legal = legal_of(p)
                    agent = batched[p]
                    if agent is not None:
                        waiting.setdefault(id(agent), (agent, []))[1].append((self, p, Shown(core, p, t, legal)))
                        self.t, self.slow = t, slow
                        return True
                    fn = legal_acts[p]
                    if fn is not None and legal and type(legal) is list:
                        obs = None  # built only if a move outside the list needs judging
                        arg = legal
                    else:
                        fn = acts[p]
                        obs = arg = Shown(core, p, t, legal)
                    t0 = perf()
                    try:
                        a = fn(arg) if call is None else call(fn, arg)
                    except (MoveTimeout, Exception) as e:  # not KeyboardInterrupt: a person stopping the run stops it
                        a = _Failed(e, limit_s)
                    dt = perf() - t0
                else:  # a batched agent's answer to the move this match stopped at
                    p, obs, a, dt = pend
                    pend = None
                    legal = obs._legal
                calls[p] += 1
                t_total[p] += dt
                if dt > t_max[p]:
                    t_max[p] = dt
                tp = type(a)
                if (tp is int or tp is str) and type(legal) is list and a in legal:
                    # The agent chose from the legal list it was shown: nothing to validate.
                    if watch:  # (a match that observes no one pays this one test a move)
                        seen = self.see(p, t, obs, legal, a)
                    if text_mode:
                        text = obs.text if obs is not None else view(p)
                        try:
                            atext = to_text(p, a)
                        except Exception:
                            atext = None
                    if apply_fast is not None:
                        try:
                            apply_fast(a)
                            why = None
                        except Exception:
                            why = apply(p, a)
                    else:
                        why = apply(p, a)
                    if why is None:
                        if rows is not None:
                            rows.append((t, p, text, a if tp is int else encode_action(a), atext, "ok", None, dt))
                    else:  # the engine refused it after all
                        if rows is not None:
                            rows.append((t, p, text, encode_action(a), None, "invalid", why, dt))
                        if watch and seen:
                            self.seen.pop()
                        if slow is None:
                            slow = self._slow()
                        a, forfeiter, reason = slow.finish_turn(p, t, None, "invalid", why)
                        if forfeiter is not None:
                            break
                else:
                    if slow is None:
                        slow = self._slow()
                    if obs is None:
                        obs = Shown(core, p, t, legal)
                    norm, event, why = slow.judge(p, t, obs, a, dt)
                    a, forfeiter, reason = slow.finish_turn(p, t, norm, event, why)
                    if forfeiter is not None:
                        break
                if observers:
                    for i, obs_fn in observers:
                        if i != p:
                            obs_fn(p, a)
                t += 1
        finally:
            if timer is not None:
                timer.__exit__(None, None, None)
        self.t = t
        self.result = finish_match(core, self.policy, self.mode, self.match_id, self.seed, self.specs,
                                   self.game_kwargs, self.max_moves, rows, forfeiter, self.outcome, reason, t, invalid,
                                   t_total, t_max, calls, self.started, self.enders)
        if watch:
            self.result.observed = self.seen
        return False


def run_matches(matches: Iterable[Match], on_result: Callable[[MatchResult], None] | None = None,
                width: int | None = None) -> None:
    """Play `matches` to their ends together: each plays until a batched agent must answer; then every
    waiting move of each batched agent, across all of the matches, goes into one ``act_batch`` call
    (in a simultaneous-move game every batched player of a tick answers in the same calls, both seats
    of a self-play match in one forward pass), and the matches go on. Agents that are not batched
    are asked one move at a time inside `Match.advance`. A batched call that raises counts as a
    failed move of every match in it. `on_result` gets each result as its match ends.

    `width`: at most this many matches in flight; `matches` is then read lazily (an iterator of
    matches made as they are needed) and a match that ends makes room for the next, so the batched
    calls stay full until the last matches."""
    source = iter(matches)
    active: list[Match] = []
    while True:
        active += source if width is None else islice(source, max(0, width - len(active)))
        if not active:
            break
        waiting: dict[int, tuple[Any, list]] = {}
        still = []
        for m in active:  # (a match that ends makes room for the next, which plays in this same round)
            if m.advance(waiting):
                still.append(m)
            else:
                if on_result is not None:
                    on_result(m.result)
                if width is not None:
                    active.extend(islice(source, 1))
        for agent, items in waiting.values():
            t0 = _perf()
            try:
                moves = list(agent.act_batch([obs for _, _, obs in items]))
                if len(moves) != len(items):
                    raise RuntimeError(f"act_batch returned {len(moves)} moves for {len(items)} observations")
            except (MoveTimeout, Exception) as e:
                moves = [_Failed(e, None)] * len(items)
            dt = (_perf() - t0) / len(items)
            for (m, p, obs), a in zip(items, moves):
                m.answer(p, obs, a, dt)
        active = still


def play_match(
    game: Any,
    agents: Sequence[Any],
    seed: int | None = None,
    *,
    policy: InvalidMovePolicy | None = None,
    move_time_limit: float | None = None,
    max_moves: int | None = None,
    match_id: str | None = None,
    record: bool | str = True,
    game_kwargs: dict | None = None,
    observe: Iterable[int] = (),
    ask: dict[int, Callable[[Observation], Any]] | None = None,
) -> MatchResult:
    """Play one match of `game` (an id, an env or a `GameCore`) between `agents` (objects or spec strings).

    `record`: what the replay (``result.replay``) holds: ``"text"`` (or True, the default) each
    player's observation text and the move's text too, ``"actions"`` only what re-simulation
    needs (`arena.replays.format`), False no replay at all. `observe` and `ask`: what chosen seats
    saw as they played, on ``result.observed`` (`Match`).

    The engine's pool of one: a `Match` with nothing batched, which one `Match.advance` plays to
    its end (what `run_matches` would do for it, without the round's bookkeeping).
    """
    m = Match(game, agents, seed, policy, move_time_limit, max_moves, match_id, record, game_kwargs, observe=observe,
              ask=ask)
    m.advance()
    return m.result


def finish_match(core: GameCore, policy: InvalidMovePolicy, mode: str | None, match_id: str, seed: int | None,
                 specs: list[str], game_kwargs: dict | None, max_moves: int | None, rows: list | None,
                 forfeiter: int | None, outcome: str, reason: str, t: int, invalid: list[int], t_total: list[float],
                 t_max: list[float], calls: list[int], started: float, enders: list) -> MatchResult:
    """The `MatchResult` (and its replay) of a match that has stopped: the returns (the invalid-move
    policy's for a forfeit), the winner, and the agents' ``match_over`` hooks. Shared by `play_match`
    and the lock-step driver (`arena.match.pool`), so both write the same replays."""
    if forfeiter is not None:
        outcome = "forfeit"
        returns = policy.forfeit_returns(forfeiter, core.returns())
        reason = f"{core.players[forfeiter]} forfeits: {reason}"
    else:
        returns = list(map(float, core.returns()))
        if outcome == "normal":
            reason = core.outcome_reason or ""
    winner, draw = _outcome(returns)
    duration = _perf() - started
    replay = None
    core.end_match()  # a game with a process of its own keeps its files and quits it now
    attachments = core.attachments() or None
    if mode is not None:
        header = {
            "type": "header", "format": FORMAT, "version": VERSION, "match_id": match_id, "game_id": core.game_id,
            # entry_point, and plugin / plugin_package for plug-in games: what `replay verify` must load
            **game_origin(core.game_id),
            "game_settings": core.settings, "engine": core.engine, "arena": _arena_version(), "seed": seed,
            "game_kwargs": game_kwargs or {}, "agents": specs, "players": list(core.players),
            "policy": policy.__dict__,
            "max_moves": max_moves, "record": mode, "created": time.time(),
        }
        if attachments:  # the files the game made, kept beside the replay under its match id: their sha256
            import hashlib

            header["attachments"] = {k: hashlib.sha256(v).hexdigest() for k, v in sorted(attachments.items())}
        result_line = {
            "type": "result", "returns": returns, "winner": winner, "draw": draw, "outcome": outcome,
            "reason": reason, "forfeiter": forfeiter, "moves": t, "invalid": invalid, "duration": duration,
        }
        replay = Replay.from_rows(header, rows, result_line)
    # Positional, in field order: keywords would cost half a microsecond a match.
    result = MatchResult(match_id, core.game_id, seed, specs, returns, winner, draw, t, outcome, reason, forfeiter,
                         invalid, t_total, t_max, calls, duration, replay)
    if attachments:
        result.attachments = attachments
    for i, over in enders:  # optional: agents that show the end of a game (a person at the terminal)
        try:
            over(core.text(i), result, i)
        except Exception:  # a display problem must not lose the result
            pass
    return result


def _action_text(core: GameCore, p: int, action: Any) -> str | None:
    try:
        return core.action_to_text(p, action)
    except Exception:
        return None
