"""AlphaStar league roles as pure functions: who a learning player plays next, when it
snapshots, and when it resets (with SCC-style branching from the current main agent).

Inputs are plain data (player descriptions, a win-rate function, a seeded
generator), so each rule is tested on small hand-worked cases.

Following AlphaStar's pseudocode (Vinyals et al. 2019):

* main agent (``MainPlayer.get_match``): 50% PFSP-squared against all historical
  players; otherwise a current main is drawn as the opponent (itself included), and
  15% of the time verification runs first: past main exploiters while its worst
  win rate against them is < 0.3, else the forgetting check, the drawn opponent's
  past snapshots (oldest first) with the monotonic suffix of win rates removed
  (`remove_monotonic_suffix`) while the worst is < 0.7; when verification finds
  no one, and the other 35% of the time, self-play against the drawn opponent,
  unless its win rate against it is 0.3 or less (exactly 0.3 included), then
  PFSP-variance over the opponent's history.
* main exploiter: the current mains while it wins > 10% against them, else
  PFSP-variance over their history; reset at each of its snapshots.
* league exploiter: PFSP linear-capped against all historicals; reset with
  probability 0.25 at each of its snapshots.

Fixed agents count as historical players: they are frozen too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from arena.league.config import RolesConfig
from arena.league.pfsp import pfsp_sample


@dataclass(frozen=True)
class Member:
    name: str
    kind: str  # "fixed", "learner", "historical" (only these are paired by the role rules)
    role: str | None = None
    #: For historical snapshots: the learning player they were taken from.
    parent: str | None = None


WinRate = Callable[[str, str], float]


def historicals(members: Sequence[Member]) -> list[Member]:
    return [m for m in members if m.kind in ("historical", "fixed")]


def mains(members: Sequence[Member]) -> list[Member]:
    return [m for m in members if m.kind == "learner" and m.role == "main"]


def _pfsp(me: str, candidates: Sequence[Member], win_rate: WinRate, weighting: str,
          rng: np.random.Generator) -> str:
    names = [c.name for c in candidates]
    return pfsp_sample(names, [win_rate(me, n) for n in names], weighting, rng)


def choose_opponent(me: Member, members: Sequence[Member], win_rate: WinRate, cfg: RolesConfig,
                    rng: np.random.Generator) -> tuple[str, str]:
    """(opponent name, why) for learning player `me`."""
    hist = historicals(members)
    if me.role == "main":
        return _main_opponent(me, members, hist, win_rate, cfg, rng)
    if me.role == "main_exploiter":
        return _main_exploiter_opponent(me, members, win_rate, cfg, rng)
    if me.role == "league_exploiter":
        if not hist:
            return _fallback_selfplay(me, members)
        return _pfsp(me.name, hist, win_rate, "linear_capped", rng), "pfsp_linear_capped"
    raise ValueError(f"unknown role {me.role!r} for player {me.name}")


def _fallback_selfplay(me: Member, members: Sequence[Member]) -> tuple[str, str]:
    current = mains(members)
    return (current[0].name if current else me.name), "selfplay"


def _main_opponent(me, members, hist, win_rate, cfg, rng):
    coin = rng.random()
    if hist and coin < cfg.main_pfsp:  # make sure it can beat the league
        return _pfsp(me.name, hist, win_rate, "squared", rng), "pfsp_squared"
    current = mains(members) or [me]
    opp = current[int(rng.integers(len(current)))]
    if hist and coin < cfg.main_pfsp + cfg.main_verification:  # rare players it may have omitted
        chosen = verification_opponent(me, members, win_rate, cfg, rng, opponent=opp.name)
        if chosen is not None:
            return chosen, "verification"
    return _selfplay_opponent(me, opp, hist, win_rate, cfg, rng)


def _selfplay_opponent(me, opp, hist, win_rate, cfg, rng):
    """Self-play against `opp`, unless `me` wins `selfplay_fallback_threshold` or less against it:
    then a curriculum of its past snapshots by PFSP-variance (where it has any)."""
    if opp.name == me.name or win_rate(me.name, opp.name) > cfg.selfplay_fallback_threshold:
        return opp.name, "selfplay"
    past = [h for h in hist if h.parent == opp.name]
    if past:
        return _pfsp(me.name, past, win_rate, "variance", rng), "selfplay_fallback_pfsp_variance"
    return opp.name, "selfplay"


def remove_monotonic_suffix(win_rates: Sequence[float], players: Sequence[Member]
                            ) -> tuple[list[float], list[Member]]:
    """Drop the trailing run of snapshots (oldest first) against which the win rate only falls: newer
    snapshots being harder is progress, not forgetting. What is left ends at the last rise (nothing
    when the rates never rise)."""
    for i in range(len(win_rates) - 1, 0, -1):
        if win_rates[i - 1] < win_rates[i]:
            return list(win_rates[:i + 1]), list(players[:i + 1])
    return [], []


def verification_opponent(me: Member, members: Sequence[Member], win_rate: WinRate, cfg: RolesConfig,
                          rng: np.random.Generator, opponent: str | None = None) -> str | None:
    """Past main exploiters while `me` wins < 0.3 against the best of them (exploitation); else the past
    snapshots of `opponent` (a main; default `me`), oldest first and without their monotonic suffix,
    while the worst win rate is < 0.7 (forgetting); else None. `members` are in creation order."""
    by_name = {m.name: m for m in members}
    exploiter_past = [m for m in members if m.kind == "historical" and m.parent in by_name
                      and by_name[m.parent].role == "main_exploiter"]
    if exploiter_past:
        rates = [win_rate(me.name, m.name) for m in exploiter_past]
        if min(rates) < cfg.verification_exploiter_threshold:
            return _pfsp(me.name, exploiter_past, win_rate, "squared", rng)
    parent = me.name if opponent is None else opponent
    past = [m for m in members if m.kind == "historical" and m.parent == parent]
    rates, past = remove_monotonic_suffix([win_rate(me.name, m.name) for m in past], past)
    if past and min(rates) < cfg.verification_historical_threshold:
        return _pfsp(me.name, past, win_rate, "squared", rng)
    return None


def _main_exploiter_opponent(me, members, win_rate, cfg, rng):
    current = mains(members)
    if not current:
        hist = historicals(members)
        if not hist:
            return me.name, "selfplay"
        return _pfsp(me.name, hist, win_rate, "variance", rng), "pfsp_variance"
    opp = current[int(rng.integers(len(current)))]
    if win_rate(me.name, opp.name) > cfg.main_exploiter_threshold:
        return opp.name, "exploit_main"
    past = [m for m in members if m.kind == "historical" and m.parent == opp.name]
    if past:
        return _pfsp(me.name, past, win_rate, "variance", rng), "pfsp_variance_main_history"
    return opp.name, "exploit_main"


def ready_to_snapshot(me: Member, steps_since_snapshot: int, members: Sequence[Member], win_rate: WinRate,
                      cfg: RolesConfig) -> bool:
    """After the step budget, or once it beats every historical more than `snapshot_win_rate`."""
    if steps_since_snapshot >= cfg.snapshot_steps:
        return True
    if steps_since_snapshot < cfg.snapshot_min_steps:
        return False
    hist = historicals(members)
    if me.role == "main_exploiter":
        # An exploiter is judged against its targets, the current mains.
        targets = [m for m in mains(members) if m.name != me.name]
        hist = targets or hist
    if not hist:
        return False
    return min(win_rate(me.name, h.name) for h in hist) > cfg.snapshot_win_rate


def reset_after_snapshot(me: Member, cfg: RolesConfig, rng: np.random.Generator) -> bool:
    """Main exploiters always reset; league exploiters with probability p; mains never."""
    if me.role == "main_exploiter":
        return True
    if me.role == "league_exploiter":
        return bool(rng.random() < cfg.league_exploiter_reset_p)
    return False


def branch_source(me: Member, members: Sequence[Member]) -> str | None:
    """SCC branching: a reset exploiter restarts from the current main agent's weights."""
    current = [m for m in mains(members) if m.name != me.name]
    return current[0].name if current else None


@dataclass(frozen=True)
class RoleStep:
    """What a learning player's role calls for after an update."""

    snapshot: bool = False
    #: Restart after the snapshot (exploiters), from `branch_from`'s weights (None: from the start).
    reset: bool = False
    branch_from: str | None = None


def after_update(me: Member, steps_since_snapshot: int, members: Sequence[Member], win_rate: WinRate,
                 cfg: RolesConfig, rng: np.random.Generator, *, due: bool = False) -> RoleStep:
    """The role lifecycle after an update of `me`, the same for every learner family (the league's own
    learners, the neural-policy trainer's): snapshot when `due` (a trainer's own schedule) or when
    `ready_to_snapshot`; then reset by `reset_after_snapshot`, branching from `branch_source`. The
    generator is drawn from only when a snapshot is taken."""
    pool = [m for m in members if m.name != me.name]
    if not due and not ready_to_snapshot(me, steps_since_snapshot, pool, win_rate, cfg):
        return RoleStep()
    if not reset_after_snapshot(me, cfg, rng):
        return RoleStep(snapshot=True)
    return RoleStep(snapshot=True, reset=True, branch_from=branch_source(me, members))
