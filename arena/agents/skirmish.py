"""Scripted players of the Skirmish game (`arena.envs.skirmish`), agent kind ``skirmish``.

``skirmish:idle``, ``skirmish:attack_nearest``, ``skirmish:focus_fire``, ``skirmish:kite``,
``skirmish:pull_back``, in rising strength (measured in docs/skirmish.md). They read only what a
player is shown (the entity observation) and the public unit table, and play through the same
one-order-a-step interface as a network: an order commands only the units it selects, and orders
persist, so a bot that wants its units to do different things gives one group its order this step
and another the next, remembering what it last told each unit.

* **idle** never orders anything: its units hold where they spawned and fire at whatever comes
  within reach (every unit's first order is stop).
* **attack_nearest** gives each unit an attack on its own nearest shown enemy, one group (the units
  that want the same target) a step, the largest group first; with no enemy in sight every unit
  attack-moves towards the enemy's side.
* **focus_fire** orders every unit to attack one enemy: the weakest (least health and shields) of
  those within some unit's reach, else the shown enemy nearest to its units' centre; so damage is
  concentrated and enemies die sooner, which is what wins fights of equal armies.
* **kite** focus-fires as above, and pulls a ranged unit back while its weapon cools down (at least
  one step of cooldown left) when an enemy of shorter range that could hit it within a step is
  near: the chaser spends its time walking while the kiter would not have fired anyway. Its
  ranged units shoot the weakest enemy within their own reach (rather than walk past the fight to
  the army's target); its melee units take the army's target. Stepping back from an enemy of
  equal range only loses firing time, so against an army of its own range (marines against
  marines) kite plays exactly as focus_fire. Melee units never kite.
* **pull_back** focus-fires as above, and takes a unit that is being focused out of the fight: when
  its weakest unit has lost health since the last step and is down to half its health or less
  while another unit fights on, it moves that unit away from the enemy, and sends it back into
  the fight once it has gone a step unhurt. An enemy that chases it walks instead of shooting; one
  that picks the nearest target turns to a healthy unit. The learners never train against it (a
  held-out test of micro, docs/skirmish.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arena.agents.base import BaseAgent
from arena.envs.skirmish import (
    ATTACK,
    ATTACK_MOVE,
    F_COOLDOWN,
    F_HEALTH,
    F_ORDER,
    F_SHIELD,
    F_TYPE,
    F_X,
    F_Y,
    GRID,
    MOVE,
    NO_OP,
    SPAWN_GAP,
    STEP_SECONDS,
    UNITS,
    SkirmishCore,
)
from arena.errors import AgentSpecError, IncompatibleAgent

BOTS = ("idle", "attack_nearest", "focus_fire", "kite", "pull_back")
#: pull_back: a unit at or below this share of its full health that was hit last step is pulled back.
PULL_BELOW = 0.5

_HEALTH = np.array([u.health for u in UNITS])
_SHIELD = np.array([u.shield for u in UNITS])
_RANGE = np.array([u.range for u in UNITS])
_RADIUS = np.array([u.radius for u in UNITS])
_SPEED = np.array([u.speed for u in UNITS])
_COOLDOWN = np.array([u.cooldown for u in UNITS])
#: Weapons longer than this are ranged (they kite); the zealot's 0.1 is melee.
_RANGED = 1.0


class _View:
    """What a bot reads of one observation: its units and the shown enemies, positions in game units
    of its own (mirrored) view."""

    def __init__(self, observation):
        o = observation.raw
        core = observation.core
        self.w, self.h = float(core.cfg.width), float(core.cfg.height)
        ent, shown = o["entities"], o["entity_mask"].astype(bool)
        self.U = U = ent.shape[0] // 2
        self.own = np.flatnonzero(shown[:U])
        self.enemy = np.flatnonzero(shown[U:]) + U
        self.kind = ent[:, F_TYPE:F_TYPE + len(UNITS)].argmax(-1)
        self.xy = np.stack([ent[:, F_X] * self.w, ent[:, F_Y] * self.h], -1).astype(np.float64)
        self.life = ent[:, F_HEALTH] * _HEALTH[self.kind] + ent[:, F_SHIELD] * _SHIELD[self.kind]
        self.cooldown_left = ent[:, F_COOLDOWN] * _COOLDOWN[self.kind]
        self.order = np.where(ent[:, F_ORDER:F_ORDER + 4].any(-1), ent[:, F_ORDER:F_ORDER + 4].argmax(-1) + 1, NO_OP)
        self.can_attack = bool(o["type_mask"][ATTACK])

    def dist(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        d = self.xy[a][:, None, :] - self.xy[b][None, :, :]
        return np.sqrt((d * d).sum(-1))

    def reach(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``[len(a), len(b)]``: how far unit a's weapon reaches unit b (range plus both radii)."""
        return _RANGE[self.kind[a]][:, None] + _RADIUS[self.kind[a]][:, None] + _RADIUS[self.kind[b]][None, :]

    def cell(self, xy) -> list[int]:
        col = int(np.clip(xy[0] / self.w * GRID, 0, GRID - 1))
        row = int(np.clip(xy[1] / self.h * GRID, 0, GRID - 1))
        return [row, col]

    def enemy_side(self) -> list[int]:
        """The cell of the enemy's spawn (on the right of every player's view)."""
        return self.cell((self.w / 2 + SPAWN_GAP / 2, self.h / 2))


class SkirmishBot(BaseAgent):
    """One of `BOTS`; see the module docstring."""

    def __init__(self, style: str = "focus_fire"):
        if style not in BOTS:
            raise AgentSpecError(f"skirmish bots: {', '.join('skirmish:' + b for b in BOTS)}; got skirmish:{style}")
        self.style = style
        self.spec = f"skirmish:{style}"
        self.told: dict[int, tuple[int, int]] = {}
        self.life: dict[int, float] = {}

    def reset(self, seed: int | None = None) -> None:
        self.told = {}
        self.life = {}

    def act(self, observation) -> Any:
        if self.style == "idle":
            return {"type": NO_OP}
        v = _View(observation)
        if len(v.own) == 0:
            return {"type": NO_OP}
        if len(v.enemy) == 0 or not v.can_attack:
            return self._advance(v)
        if self.style == "attack_nearest":
            want = {int(u): (ATTACK, int(v.enemy[k])) for u, k in zip(v.own, v.dist(v.own, v.enemy).argmin(1))}
            return self._one_group(v, want)
        target = self._focus_target(v)
        if self.style == "focus_fire":
            return self._order(v, list(v.own), ATTACK, target)
        if self.style == "pull_back":
            return self._pull_back(v, target)
        return self._kite(v, target)

    # -- the pieces --------------------------------------------------------------------------------
    def _told(self, v: _View, u: int) -> tuple[int, int]:
        """What unit u is doing as far as this bot knows: its last order, unless the game says the
        unit has since stopped (arrived, or its target died)."""
        said = self.told.get(u, (NO_OP, -1))
        return said if said[0] == v.order[u] else (int(v.order[u]), -1)

    def _order(self, v: _View, units: list[int], kind: int, target: int | None = None, cell=None) -> dict:
        move: dict[str, Any] = {"type": kind, "units": [int(u) for u in units]}
        if kind == ATTACK:
            move["target"] = int(target)
        elif kind in (MOVE, ATTACK_MOVE):
            move["location"] = [int(cell[0]), int(cell[1])]
        for u in units:
            self.told[int(u)] = (kind, int(target) if kind == ATTACK else -1)
        return move

    def _advance(self, v: _View) -> dict:
        """No enemy in sight: attack-move every unit not doing so yet towards the enemy's side."""
        idle = [int(u) for u in v.own if self._told(v, int(u))[0] != ATTACK_MOVE]
        if not idle:
            return {"type": NO_OP}
        return self._order(v, idle, ATTACK_MOVE, cell=v.enemy_side())

    def _one_group(self, v: _View, want: dict[int, tuple[int, int]]) -> dict:
        """Give the largest group of units that want the same order (and are not following it) that order."""
        groups: dict[tuple[int, int], list[int]] = {}
        for u, order in want.items():
            if self._told(v, u) != order:
                groups.setdefault(order, []).append(u)
        if not groups:
            return {"type": NO_OP}
        order, units = max(groups.items(), key=lambda kv: (len(kv[1]), -kv[0][0], -kv[0][1]))
        return self._order(v, units, order[0], order[1])

    def _focus_target(self, v: _View, units=None) -> int:
        """The weakest shown enemy within reach of one of `units` (default: all), else the shown enemy
        nearest to the player's units' centre."""
        units = v.own if units is None else np.asarray(units)
        d = v.dist(units, v.enemy)
        reachable = (d <= v.reach(units, v.enemy)).any(0)
        if reachable.any():
            k = np.flatnonzero(reachable)
            return int(v.enemy[k[np.lexsort((k, v.life[v.enemy[k]]))[0]]])
        centre = v.xy[v.own].mean(0)
        gap = np.sqrt(((v.xy[v.enemy] - centre) ** 2).sum(-1))
        return int(v.enemy[int(gap.argmin())])

    def _kite(self, v: _View, target: int) -> dict:
        ranged = _RANGE[v.kind[v.own]] > _RANGED
        d = v.dist(v.own, v.enemy)
        # a threat: an enemy of shorter range whose one step of walking brings the unit within its reach
        # (stepping back from an enemy of equal range only loses firing time)
        near = d <= v.reach(v.enemy, v.own).T + _SPEED[v.kind[v.enemy]][None, :] * STEP_SECONDS
        threat = (near & (_RANGE[v.kind[v.enemy]][None, :] < _RANGE[v.kind[v.own]][:, None])).any(1)
        back = ranged & threat & (v.cooldown_left[v.own] >= STEP_SECONDS)
        retreat = [int(u) for u in v.own[back]]
        fight = [int(u) for u in v.own[~back]]
        returning = [u for u in fight if self._told(v, u)[0] == MOVE]
        if returning:  # weapons ready again: back into the fight at once
            return self._order(v, fight, ATTACK, target)
        leaving = [u for u in retreat if self._told(v, u)[0] != MOVE]
        if leaving:
            units = np.array(leaving)
            away = v.xy[units].mean(0) - v.xy[v.enemy].mean(0)
            norm = float(np.sqrt((away * away).sum()))
            step = away / norm if norm > 0 else np.array([-1.0, 0.0])
            goal = v.xy[units].mean(0) + step * (v.w / GRID) * 1.5
            return self._order(v, leaving, MOVE, cell=v.cell(goal))
        # ranged units shoot the weakest enemy within their own reach (no walking past the fight to the
        # army's target); melee units take the army's target
        shooters = [u for u in fight if _RANGE[v.kind[u]] > _RANGED]
        melee = [u for u in fight if _RANGE[v.kind[u]] <= _RANGED]
        for group, aim in ((shooters, self._focus_target(v, shooters) if shooters else target), (melee, target)):
            if group and any(self._told(v, u) != (ATTACK, aim) for u in group):
                return self._order(v, group, ATTACK, aim)
        return {"type": NO_OP}


    def _pull_back(self, v: _View, target: int) -> dict:
        """Focus fire on `target`, with the weakest unit taken out while it is being hit (module docstring)."""
        hurt = {int(u): v.life[u] < self.life.get(int(u), v.life[u]) for u in v.own}
        self.life = {int(u): float(v.life[u]) for u in v.own}
        full = _HEALTH[v.kind[v.own]] + _SHIELD[v.kind[v.own]]
        away = [int(u) for u in v.own if self._told(v, int(u))[0] == MOVE]
        back = [u for u in away if not hurt[u]]
        if back:  # a step unhurt: back into the fight
            return self._order(v, back, ATTACK, target)
        k = int(np.argmin(v.life[v.own] / full))
        weakest = int(v.own[k])
        if (len(v.own) > len(away) + 1 and weakest not in away and hurt[weakest]
                and v.life[weakest] <= PULL_BELOW * full[k]):
            step = v.xy[weakest] - v.xy[v.enemy].mean(0)
            norm = float(np.sqrt((step * step).sum()))
            step = step / norm if norm > 0 else np.array([-1.0, 0.0])
            return self._order(v, [weakest], MOVE, cell=v.cell(v.xy[weakest] + step * (v.w / GRID) * 1.5))
        fight = [int(u) for u in v.own if int(u) not in away]
        if any(self._told(v, u) != (ATTACK, target) for u in fight):
            return self._order(v, fight, ATTACK, target)
        return {"type": NO_OP}


def _factory(core, seed, positional, **opts):
    if opts:
        raise AgentSpecError(f"skirmish bots take no options, got {', '.join(sorted(opts))}")
    if core is not None and not isinstance(core, SkirmishCore):
        raise IncompatibleAgent(f"skirmish bots play the Skirmish games (arena/Skirmish-*), not {core.game_id}")
    return SkirmishBot(positional or "focus_fire")
