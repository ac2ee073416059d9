"""`play_lockstep`: many matches of one game advanced together, so that a batched agent (a neural
policy) answers the moves of all of them with one forward pass.

`play_match` plays one match to its end and asks each agent for one move at a time; a neural
policy there costs one forward pass a move. Here every match runs until its player to move is a
*batched* agent (one with ``act_batch(observations) -> moves``: `arena.agents.neural.PolicyAgent`,
a learner's actor), then all the waiting moves of that agent, across every match, go into one
``act_batch`` call. In a simultaneous-move game (StarCraft's case) every batched player of every
match answers its tick in the same calls (both seats of a self-play match in one forward pass), and
the tick is stepped once all of its moves are in. Other agents (random, MCTS, a person) are asked
one move at a time as in `play_match`.

The rules are `play_match`'s own: the same hot path (a move from the legal list the agent was
shown is applied without a second check), the same invalid-move policy for everything else
(`arena.match.loop._Slow`: retries with feedback, faults, engine refusals, simultaneous steps),
and the same result and replay (`arena.match.loop.finish_match`); a test checks that the
replays of random agents are identical to `play_match`'s for the same seeds.

Differences: no per-move time limit (the matches share one thread; a batched call is a forward
pass), and a batched agent is shared by the matches: it is not reset per match (seed it once).
A batched call that raises counts as a failed move of every match in it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from arena.agents.base import derive_seed
from arena.agents.specs import make_agent
from arena.envs.core import SIMULTANEOUS, GameCore
from arena.envs.observation import Observation, ShownLegal
from arena.envs.registry import make_core
from arena.match.loop import (_DEFAULT_POLICY, InvalidMovePolicy, MatchResult, MoveTimeout, _Failed, _perf, _Slow,
                              check_agent_count, encode_action, finish_match, record_mode)
from arena.replays.format import new_match_id


class _Match:
    """One match in flight: what `play_match` keeps in local variables."""

    __slots__ = ("core", "seed", "match_id", "specs", "acts", "batched", "observers", "enders", "rows", "invalid",
                 "t_total", "t_max", "calls", "slow", "t", "forfeiter", "outcome", "reason", "started", "index",
                 "joint")

    def __init__(self, index, core, seed, match_id, agents, specs, batched, rows, text_mode, allowance):
        n = len(core.players)
        self.index, self.core, self.seed, self.match_id, self.specs = index, core, seed, match_id, specs
        self.acts = [a.act for a in agents]
        self.batched = batched
        self.observers = [(i, a.observe) for i, a in enumerate(agents) if callable(getattr(a, "observe", None))]
        self.enders = [(i, a.match_over) for i, a in enumerate(agents) if getattr(a, "match_over", None) is not None]
        self.rows = rows
        self.invalid, self.t_total, self.t_max, self.calls = [0] * n, [0.0] * n, [0.0] * n, [0] * n
        self.slow = _Slow(core, self.acts, None, None, rows, text_mode, self.invalid, self.t_total, self.t_max,
                          self.calls, allowance)
        self.t, self.forfeiter, self.outcome, self.reason = 0, None, "normal", ""
        self.started = _perf()
        #: A simultaneous tick waiting on batched calls: the first attempts answered so far, by player.
        self.joint: dict | None = None


def play_lockstep(
    game: Any,
    seats: Sequence[Sequence[Any]],
    seeds: Sequence[int | None],
    *,
    policy: InvalidMovePolicy | None = None,
    max_moves: int | None = None,
    record: bool | str = "actions",
    game_kwargs: dict | None = None,
    match_ids: Sequence[str] | None = None,
    shared: dict[str, Any] | None = None,
    cores: Sequence[GameCore] | None = None,
    on_result: Callable[[MatchResult], None] | None = None,
) -> list[MatchResult]:
    """Play ``len(seats)`` matches of `game` together; match i seats ``seats[i]`` (agent objects or spec
    strings) with seed ``seeds[i]``. A spec found in `shared` is played by that (batched) agent object
    in every match; other specs are built per match as `play_match` builds them. `cores`: the games
    to play on, made by the caller (one per match; a batched agent tells its matches apart by
    ``observation.core``). Results in order."""
    policy = policy or _DEFAULT_POLICY
    mode = record_mode(record)
    text_mode = mode == "text"
    shared = shared or {}
    if len(seeds) != len(seats):
        raise ValueError(f"{len(seats)} matches but {len(seeds)} seeds")
    matches: list[_Match] = []
    for i, (agents_i, seed) in enumerate(zip(seats, seeds)):
        if cores is not None:
            core = cores[i]
        elif isinstance(game, GameCore) and len(seats) == 1:
            core = game
        else:
            core = make_core(game if isinstance(game, str) else game.game_id, **(game_kwargs or {}))
        check_agent_count(core, len(agents_i))
        agents, specs, batched = [], [], []
        for s, a in enumerate(agents_i):
            if isinstance(a, str):
                spec = a
                a = shared.get(spec) or make_agent(spec, core, derive_seed(seed, s))
            else:
                spec = getattr(a, "spec", type(a).__name__)
            agents.append(a)
            specs.append(spec)
            batched.append(a if callable(getattr(a, "act_batch", None)) else None)
        core.reset(seed)
        for s, a in enumerate(agents):
            hook = getattr(a, "reset", None)
            if batched[s] is None and hook is not None:
                hook(derive_seed(seed, s))
        mid = match_ids[i] if match_ids is not None else new_match_id(core.game_id, seed)
        matches.append(_Match(i, core, seed, mid, agents, specs, batched, [] if mode is not None else None,
                              text_mode, policy.allowance))
    limit = max_moves if max_moves is not None else float("inf")
    results: list[MatchResult | None] = [None] * len(matches)

    def done(m: _Match) -> None:
        res = finish_match(m.core, policy, mode, m.match_id, m.seed, m.specs, game_kwargs, max_moves, m.rows,
                           m.forfeiter, m.outcome, m.reason, m.t, m.invalid, m.t_total, m.t_max, m.calls, m.started,
                           m.enders)
        results[m.index] = res
        if on_result is not None:
            on_result(res)

    def turn(m: _Match, p: int, obs: ShownLegal, a: Any, dt: float) -> bool:
        """Judge and apply player p's move `a` (as `play_match`'s hot loop does); False when the match ended."""
        m.calls[p] += 1
        m.t_total[p] += dt
        if dt > m.t_max[p]:
            m.t_max[p] = dt
        core, t, rows = m.core, m.t, m.rows
        tp = type(a)
        legal = obs._legal
        if (tp is int or tp is str) and type(legal) is list and a in legal:
            text = atext = None
            if text_mode:
                text = obs.text
                try:
                    atext = core.action_to_text(p, a)
                except Exception:
                    atext = None
            why = core.apply(p, a)
            if why is None:
                if rows is not None:
                    rows.append((t, p, text, a if tp is int else encode_action(a), atext, "ok", None, dt))
            else:
                if rows is not None:
                    rows.append((t, p, text, encode_action(a), None, "invalid", why, dt))
                a, m.forfeiter, m.reason = m.slow.finish_turn(p, t, None, "invalid", why)
        else:
            norm, event, why = m.slow.judge(p, t, obs, a, dt)
            a, m.forfeiter, m.reason = m.slow.finish_turn(p, t, norm, event, why)
        if m.forfeiter is not None:
            return False
        for i, fn in m.observers:
            if i != p:
                fn(p, a)
        m.t += 1
        return True

    def joint_step(m: _Match) -> bool:
        """Play a simultaneous tick of `m` (its batched players' first attempts in ``m.joint``, already
        answered); False when the match ended."""
        first, m.joint = m.joint, None
        joint, m.forfeiter, m.reason = m.slow.joint_step(m.t, first)
        if m.forfeiter is not None:
            done(m)
            return False
        for i, fn in m.observers:
            for q, a in joint.items():
                if q != i:
                    fn(q, a)
        m.t += 1
        return True

    active = matches
    while active:
        waiting: dict[int, tuple[Any, list[tuple[_Match, int, ShownLegal]]]] = {}
        still: list[_Match] = []
        for m in active:
            core = m.core
            while True:  # this match's moves up to its next batched one
                p = core.current_player()
                if p < 0:
                    if p != SIMULTANEOUS:
                        done(m)
                        break
                    if m.t >= limit:
                        m.outcome, m.reason = "max_moves", f"stopped after {max_moves} moves"
                        done(m)
                        break
                    if m.joint is None:
                        batched_now = [q for q in core.acting_players() if m.batched[q] is not None]
                        if batched_now:  # their first attempts go into this tick's batched calls
                            m.joint = {}
                            for q in batched_now:
                                obs = Observation(core, q, m.t)
                                waiting.setdefault(id(m.batched[q]), (m.batched[q], []))[1].append((m, q, obs))
                            still.append(m)
                            break
                    if not joint_step(m):
                        break
                    continue
                if m.t >= limit:
                    m.outcome, m.reason = "max_moves", f"stopped after {max_moves} moves"
                    done(m)
                    break
                obs = ShownLegal(core, p, m.t, core.legal_actions(p))
                agent = m.batched[p]
                if agent is not None:
                    waiting.setdefault(id(agent), (agent, []))[1].append((m, p, obs))
                    still.append(m)
                    break
                t0 = _perf()
                try:
                    a = m.acts[p](obs)
                except (MoveTimeout, Exception) as e:
                    a = _Failed(e, None)
                if not turn(m, p, obs, a, _perf() - t0):
                    done(m)
                    break
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
                if m.joint is not None:  # a simultaneous move: judged with the others of its tick
                    m.joint[p] = (obs, a, dt)
                elif not turn(m, p, obs, a, dt):
                    done(m)
        for m in still:
            if m.joint is not None and results[m.index] is None:
                joint_step(m)
        active = [m for m in still if results[m.index] is None]
    return results  # type: ignore[return-value]
