"""Skirmish: the arena's own micro battle game, two squads fighting on an open continuous map.

In the spirit of SMAC's micro scenarios, with unit statistics taken from the public StarCraft II
unit data (Liquipedia, patch 5.0; the table is `UNITS` and docs/skirmish.md). The whole simulation
is numpy over a leading games axis (`SkirmishBatch`, arrays ``[G, 2, U, ...]``, float64); the
`GameCore` (`SkirmishCore`) is the same code with ``G = 1``, so a batched learner and the match loop
step the very same rules.

Scenarios (`SCENARIOS`; ids ``arena/Skirmish-<name>-v0``)
    ``3m`` (3 marines a side, 60 steps), ``5m_vs_6m`` (5 marines against 6, 70 steps), ``2s3z``
    (2 stalkers and 3 zealots a side, 120 steps).
Settings (each checked; a bad value is a one-line ``ValueError`` saying what to give)
    ``red``, ``blue``: each side's units as counts and letters (``"2s3z"``: m marine, r marauder,
    s stalker, z zealot; 1 to `MAX_UNITS` units); ``width``, ``height``: the map in game units
    (`MIN_SIZE`..`MAX_SIZE`; the width also fits the spawn gap); ``max_steps``: the episode length
    (1..`MAX_STEPS`). The same ranges are declared to the registry (``skirmish_env.game_setting_ranges``),
    which checks a replay header's, a config's or ``-k``'s values before anything is built; a side's
    unit count is read from its text (``"300000000m"`` is refused without making a unit).
Players
    Two, ``red`` and ``blue``, zero-sum, moving at once (`SIMULTANEOUS`, `apply_joint`).
Time
    One step is `STEP_SECONDS` = 0.5 game seconds ("faster" speed, as Liquipedia gives the
    statistics), simulated as `SUBSTEPS` = 4 sub-steps of 0.125 s.
Spawn
    Red's units are drawn uniformly in a 4 x 8 box centred `SPAWN_GAP` / 2 = 6 units left of the
    map's centre, blue's in the same box 6 units right of it, from ``reset(seed)``'s generator (the
    only randomness).
Observation (per player, a ``Dict``; player blue sees the map mirrored left to right so that each
player's own units start on the left: one network plays either seat)
    ``entities [N, F]`` float32, ``N = 2U`` (``U``: the larger side's unit count): slots ``0..U-1``
    the player's own units, slots ``U..2U-1`` the enemy's, each unit always in the same slot. The
    `F` = 16 features (`FEATURES`): own, enemy, type one-hot (marine, marauder, stalker, zealot),
    health fraction, shield fraction, x / width, y / height, weapon cooldown left as a fraction
    of the weapon's cooldown (own units only), the unit's current order one-hot (move, attack,
    attack-move, stop; own units only), present. An enemy unit is shown only while it is alive
    and within the sight range of one of the player's living units; a dead or unseen slot is all
    zeros. ``entity_mask [N]`` int8: which slots are shown. ``spatial [4, 8, 8]``: per map cell
    the player's unit count, the shown enemy count, the player's summed health-and-shield
    fractions and the shown enemy's. ``scalars [4]``: time fraction, the player's living unit
    fraction, the enemy's living unit fraction (a kill count, always known), the player's
    remaining health-and-shield fraction. Then the masks the action model names: ``type_mask
    [5]``, ``unit_mask [5, N]``, ``target_mask [5, N]``, ``location_mask [5, 64]`` (a row per
    action type).
Action (one compound order a step, the raw-unit style; `action_model`)
    ``type``: no_op, move, attack, attack_move, stop; ``units``: 1 to U of the player's living
    units (a select part over the entity slots); ``target`` (attack only): a shown enemy slot;
    ``location`` (move and attack_move): a cell ``[row, col]`` of an 8 x 8 grid over the map,
    meaning its centre (in the player's mirrored view). no_op uses no other part. The order
    replaces the selected units' orders; other units keep theirs (orders persist across steps).
    Masks: no_op is always legal; move, attack_move and stop need a living unit; attack needs a
    living unit and a shown enemy; dead units cannot be selected, dead or unseen enemies not
    targeted.
Rules of a sub-step (all units act on the state at the start of the sub-step; damage and moves
land together)
    * A unit's *reach* to an enemy is its weapon range plus both units' radii (ranges are edge to
      edge). It may fire when its weapon has cooled down (cooldown left 0); firing sets the
      cooldown left to the weapon's cooldown, which then counts down 0.125 s a sub-step (so a
      cooldown is in effect rounded up to whole sub-steps: the marine's 0.61 s fires every 5
      sub-steps). A unit that fires does not move in that sub-step.
    * **stop** (every unit's order at the start): hold position; fire at the nearest enemy within
      reach.
    * **move**: walk towards the point, never fire; within `ARRIVE` of it the order becomes stop.
    * **attack**: if the target is within reach, fire at it (waiting in place while the weapon
      cools down), else walk towards it; when it dies the order becomes stop. The target is
      chased even when it leaves sight.
    * **attack_move**: fire at the nearest enemy within reach; else walk towards the nearest
      enemy within the unit's sight range; else walk towards the point (within `ARRIVE` of it
      the order becomes stop).
    * Walking covers ``speed * 0.125`` game units a sub-step in a straight line, never past the
      point. Then overlapping living units (closer than the sum of their radii) are each pushed
      apart by half the overlap (one pass, all pairs at once), and positions are clipped to the
      map.
    * Damage of one attack: ``hits x (damage + bonus if the target is armoured)``. What a unit
      takes in a sub-step is pooled: its shields absorb the raw damage first, and the part that
      passes reaches health reduced by armour: health loses ``passed / raw x sum over hits of
      max(hit - armour, 0.5)`` (exactly the game's rule when a volley lands wholly on shields or
      wholly on health; a volley that breaks the shields splits the armour in proportion).
      Shields do not regenerate. A unit at 0 health is dead at the end of the sub-step (so units
      killing each other in one sub-step both fire).
Outcome
    A side with no living units loses (both at once: a draw). After ``max_steps`` steps the side
    with the larger remaining health-and-shield fraction of its starting total wins; equal is a
    draw. `returns` are +1 / -1 / 0; `step_rewards` are zero until the last step, which carries
    the outcome (the arena's contract: step rewards add up to the returns). `shaped_rewards`
    (damage dealt minus damage taken in the last step, as a fraction of the enemy's starting
    health and shields) is there for a learner that wants a denser signal: the SCC learner adds it,
    weighted by its ``shaping`` setting; no match result or rating reads it.
Text
    ``text(p)``: the step; the player's living and total units and health-and-shield percentage,
    the enemy's living and total units and how many are in sight; then a line per unit (the player's own, and the enemy's in sight) with its slot, type,
    position in the player's mirrored coordinates, health, shields and, for its own, its order.
Rendering (`SkirmishEnv`; nothing here changes the rules or the observations)
    ``render_mode="rgb_array"``: the whole battle from above (`SkirmishCore.battle`, drawn by
    `arena.envs.skirmish_draw`): both sides' units, their health and shields, a line from each unit
    that fired in the last step to its target, the map and the step; ``render_fps`` 2 (a step is
    0.5 game seconds: real time). ``"ansi"`` / ``"human"``: red's text view.

Version history: v0 (this).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from arena.envs.actions import ActionModel, Part
from arena.envs.core import SIMULTANEOUS, TERMINAL, GameCore, int_setting
from arena.envs.parallel import GameParallelEnv
from arena.errors import shown

STEP_SECONDS = 0.5
SUBSTEPS = 4
DT = STEP_SECONDS / SUBSTEPS
#: Distance to a move's point at which the order ends (units pushed apart around one point still
#: count as arrived).
ARRIVE = 1.0
#: Distance between the two spawn boxes' centres.
SPAWN_GAP = 12.0
SPAWN_BOX = (4.0, 8.0)
GRID = 8
MAX_UNITS = 16
MAX_STEPS = 1000
MIN_SIZE, MAX_SIZE = 24, 128

NO_OP, MOVE, ATTACK, ATTACK_MOVE, STOP = range(5)
ACTION_TYPES = ("no_op", "move", "attack", "attack_move", "stop")


@dataclass(frozen=True)
class UnitType:
    """One unit type's statistics (Liquipedia, StarCraft II patch 5.0, "faster" game seconds)."""

    name: str
    letter: str
    health: float
    shield: float
    armour: float
    damage: float
    hits: int
    bonus_vs_armoured: float
    cooldown: float
    range: float
    speed: float
    radius: float
    sight: float
    armoured: bool


UNITS = (
    UnitType("marine", "m", 45, 0, 0, 6, 1, 0, 0.61, 5, 3.15, 0.375, 9, False),
    UnitType("marauder", "r", 125, 0, 1, 10, 1, 10, 1.07, 6, 3.15, 0.5625, 10, True),
    UnitType("stalker", "s", 80, 80, 1, 13, 1, 5, 1.34, 6, 4.13, 0.625, 10, True),
    UnitType("zealot", "z", 100, 50, 1, 8, 2, 0, 0.86, 0.1, 3.15, 0.5, 9, False),
)
TYPE_INDEX = {u.letter: i for i, u in enumerate(UNITS)}
T = len(UNITS)

#: Entity features: the column of each.
F_OWN, F_ENEMY, F_TYPE, F_HEALTH, F_SHIELD, F_X, F_Y, F_COOLDOWN, F_ORDER, F_PRESENT = 0, 1, 2, 6, 7, 8, 9, 10, 11, 15
FEATURES = 16
SPATIAL = 4
SCALARS = 4

#: Scenario name -> (red, blue, max_steps).
SCENARIOS = {"3m": ("3m", "3m", 60), "5m_vs_6m": ("5m", "6m", 70), "2s3z": ("2s3z", "2s3z", 120)}

_COMPOSITION = re.compile(r"^(\d+[mrsz])+$")
#: The longest composition text read (``"16m"``, ``"2m2r2s2z"``: a few characters; one of a side's
#: at most `MAX_UNITS` units per letter needs no more than 2 digits).
MAX_COMPOSITION_CHARS = 32
UNITS_WHAT = (f"1 to {MAX_UNITS} units as counts and letters, each letter once (m marine, r marauder, s stalker, "
              "z zealot), e.g. 2s3z")


def count_units(text: Any) -> int | None:
    """How many units the composition `text` names, or None where it is not one (not a text, too long,
    malformed, a letter twice); reads the counts without making a unit, so ``"300000000m"`` costs
    nothing (`parse_units` and the registry's range check use it before anything is built)."""
    if not isinstance(text, str) or len(text) > MAX_COMPOSITION_CHARS or not _COMPOSITION.match(text):
        return None
    pairs = re.findall(r"(\d+)([mrsz])", text)
    if len({letter for _, letter in pairs}) != len(pairs):
        return None
    return sum(int(count) for count, _ in pairs)  # at most 32 characters: small numbers


def parse_units(name: str, text: Any) -> list[int]:
    """A side's units as type indices, in the order written (``"2s3z"`` -> stalker, stalker, zealot x 3).
    The count is checked (1 to `MAX_UNITS`) before any unit is made."""
    hint = f"{name}: give counts and letters, e.g. {name}=2s3z (m marine, r marauder, s stalker, z zealot)"
    if not isinstance(text, str) or len(text) > MAX_COMPOSITION_CHARS or not _COMPOSITION.match(text):
        raise ValueError(f"{hint}; got {shown(text, 60)}")
    pairs = re.findall(r"(\d+)([mrsz])", text)
    seen = set()
    for _count, letter in pairs:
        if letter in seen:
            raise ValueError(f"{hint}; {letter!r} appears twice in {text!r}")
        seen.add(letter)
    total = count_units(text)
    if not 1 <= total <= MAX_UNITS:
        raise ValueError(f"{name}: a side has 1 to {MAX_UNITS} units, {text!r} has {total}")
    out: list[int] = []
    for count, letter in pairs:
        out += [TYPE_INDEX[letter]] * int(count)
    return out


@dataclass(frozen=True)
class SkirmishConfig:
    """The settings of a skirmish, checked (see the module docstring)."""

    red: str = "3m"
    blue: str = "3m"
    width: int = 32
    height: int = 32
    max_steps: int = 60

    def __post_init__(self):
        parse_units("red", self.red)
        parse_units("blue", self.blue)
        int_setting("width", self.width, MIN_SIZE, MAX_SIZE, 32)
        int_setting("height", self.height, MIN_SIZE // 2, MAX_SIZE, 32)
        int_setting("max_steps", self.max_steps, 1, MAX_STEPS, 60)
        if self.width < SPAWN_GAP + SPAWN_BOX[0] + 2:
            raise ValueError(f"width must leave room for both spawn boxes: at least "
                             f"{int(SPAWN_GAP + SPAWN_BOX[0] + 2)}, got {self.width}")
        if self.height < SPAWN_BOX[1] + 2:
            raise ValueError(f"height must hold a spawn box: at least {int(SPAWN_BOX[1] + 2)}, got {self.height}")

    def settings(self) -> dict[str, Any]:
        return {"red": self.red, "blue": self.blue, "width": int(self.width), "height": int(self.height),
                "max_steps": int(self.max_steps)}


def action_model(units: int) -> ActionModel:
    """The compound order of a side of `units` slots: type, then units, then a target or a cell."""
    n = 2 * units
    return ActionModel(
        (Part("type", "categorical", n=5, mask="type_mask", labels=ACTION_TYPES),
         Part("units", "select", n=n, max_select=units, mask="unit_mask"),
         Part("target", "pointer", n=n, mask="target_mask"),
         Part("location", "spatial", shape=(GRID, GRID), mask="location_mask")),
        uses=(("type",), ("type", "units", "location"), ("type", "units", "target"),
              ("type", "units", "location"), ("type", "units")))


def _ordered_sum(a: np.ndarray, axis: int) -> np.ndarray:
    """Sum over `axis` adding one slice at a time in index order: every element is the same sequence
    of float additions whatever the other axes' sizes (a batch of 64 games and one game agree to the
    bit, which numpy's own reductions do not promise)."""
    a = np.moveaxis(a, axis, 0)
    out = a[0].copy()
    for k in range(1, a.shape[0]):
        out += a[k]
    return out


class SkirmishBatch:
    """`G` skirmishes of one configuration stepped together; see the module docstring for the rules.

    State (absolute map coordinates, side 0 red): ``pos [G, 2, U, 2]``, ``health``, ``shield``,
    ``cooldown`` (seconds left) ``[G, 2, U]``, ``alive [G, 2, U]``, ``order [G, 2, U]`` (an action
    type), ``goal [G, 2, U, 2]`` (the point of a move or attack-move), ``target [G, 2, U]`` (the enemy
    unit of an attack), ``t [G]``. Padding slots (the smaller side's missing units) are never alive.
    ``shot [G, 2, U]``: the enemy unit each unit last fired at in the last step, -1 where it did not
    fire (read by pictures only: no rule and no observation depends on it).
    """

    def __init__(self, games: int, config: SkirmishConfig | None = None):
        self.cfg = cfg = config or SkirmishConfig()
        self.G = int(games)
        sides = [parse_units("red", cfg.red), parse_units("blue", cfg.blue)]
        self.U = U = max(len(s) for s in sides)
        self.size = np.array([cfg.width, cfg.height], np.float64)
        self.kind = np.full((2, U), -1, np.int64)
        for s, types in enumerate(sides):
            self.kind[s, :len(types)] = types
        self.exists = self.kind >= 0
        k = np.where(self.exists, self.kind, 0)
        stat = lambda f: np.where(self.exists, np.array([getattr(u, f) for u in UNITS], np.float64)[k], 0.0)  # noqa: E731
        self.max_health, self.max_shield = stat("health"), stat("shield")
        self.armour, self.weapon_cd = stat("armour"), stat("cooldown")
        self.range, self.speed, self.radius, self.sight = stat("range"), stat("speed"), stat("radius"), stat("sight")
        dmg, hits, bonus = stat("damage"), stat("hits"), stat("bonus_vs_armoured")
        armoured = np.where(self.exists, np.array([u.armoured for u in UNITS])[k], False)
        # [attacker side, attacker u, target v] tables: reach, raw damage and armour-reduced damage of one attack
        other = self.radius[::-1]
        self.reach = self.range[:, :, None] + self.radius[:, :, None] + other[:, None, :]
        hit = dmg[:, :, None] + bonus[:, :, None] * armoured[::-1][:, None, :]
        self.raw = hits[:, :, None] * hit
        self.armoured_damage = hits[:, :, None] * np.maximum(hit - self.armour[::-1][:, None, :], 0.5)
        self.full = (self.max_health + self.max_shield).sum(-1)  # [2] each side's starting total
        self._alloc()

    def _alloc(self) -> None:
        G, U = self.G, self.U
        self.pos = np.zeros((G, 2, U, 2))
        self.health = np.zeros((G, 2, U))
        self.shield = np.zeros((G, 2, U))
        self.cooldown = np.zeros((G, 2, U))
        self.alive = np.zeros((G, 2, U), bool)
        self.order = np.full((G, 2, U), STOP, np.int64)
        self.goal = np.zeros((G, 2, U, 2))
        self.target = np.zeros((G, 2, U), np.int64)
        self.t = np.zeros(G, np.int64)
        self.dealt = np.zeros((G, 2))  # health and shields each side removed in the last step
        self.shot = np.full((G, 2, U), -1, np.int64)

    # -- lifecycle ----------------------------------------------------------------------------------
    def reset(self, seeds: list[int | None]) -> None:
        """Every game afresh, game g's spawn drawn from ``default_rng(seeds[g])``."""
        if len(seeds) != self.G:
            raise ValueError(f"reset needs one seed a game: {self.G} games, {len(seeds)} seeds")
        self._alloc()
        for g, seed in enumerate(seeds):
            self.reset_game(g, seed)

    def reset_game(self, g: int, seed: int | None) -> None:
        rng = np.random.default_rng(seed)
        cx, cy = self.size / 2
        bw, bh = SPAWN_BOX
        for s, x in ((0, cx - SPAWN_GAP / 2), (1, cx + SPAWN_GAP / 2)):
            xy = rng.uniform((x - bw / 2, cy - bh / 2), (x + bw / 2, cy + bh / 2), size=(self.U, 2))
            self.pos[g, s] = np.where(self.exists[s][:, None], xy, 0.0)
        self.health[g] = self.max_health
        self.shield[g] = self.max_shield
        self.cooldown[g] = 0.0
        self.alive[g] = self.exists
        self.order[g] = STOP
        self.goal[g] = self.pos[g]
        self.target[g] = 0
        self.t[g] = 0
        self.dealt[g] = 0.0
        self.shot[g] = -1

    # -- outcome ------------------------------------------------------------------------------------
    def fractions(self) -> np.ndarray:
        """``[G, 2]``: each side's remaining health and shields as a fraction of its start."""
        left = np.where(self.alive, self.health + self.shield, 0.0)
        return _ordered_sum(left, 2) / self.full

    def over(self) -> np.ndarray:
        some = self.alive.any(-1)
        return (self.t >= self.cfg.max_steps) | ~some[:, 0] | ~some[:, 1]

    def outcome(self) -> np.ndarray:
        """``[G]``: red's result (+1, -1, 0) of each game as it stands (meaningful once `over`)."""
        some = self.alive.any(-1)
        frac = self.fractions()
        by_health = np.sign(frac[:, 0] - frac[:, 1])
        return np.where(some[:, 0] & some[:, 1], by_health, some[:, 0].astype(float) - some[:, 1].astype(float))

    # -- orders -------------------------------------------------------------------------------------
    def cell_point(self, p: int, cell) -> np.ndarray:
        """The absolute centre of grid cell ``[row, col]`` of player p's (mirrored) view."""
        r, c = int(cell[0]), int(cell[1])
        w, h = self.size
        x = (c + 0.5) * w / GRID
        return np.array([w - x if p == 1 else x, (r + 0.5) * h / GRID])

    def give(self, g: int, p: int, move: dict) -> None:
        """Game g's player p orders (a checked move): the selected living units take the order."""
        kind = int(move["type"])
        if kind == NO_OP:
            return
        units = [u for u in move["units"] if 0 <= u < self.U and self.alive[g, p, u]]
        if not units:
            return
        self.order[g, p, units] = kind
        if kind in (MOVE, ATTACK_MOVE):
            self.goal[g, p, units] = self.cell_point(p, move["location"])
        elif kind == ATTACK:
            self.target[g, p, units] = int(move["target"]) - self.U

    # -- simulation ---------------------------------------------------------------------------------
    def distances(self) -> np.ndarray:
        """``[G, 2, U, U]``: from unit u of side s to unit v of the other side."""
        d = self.pos[:, :, :, None, :] - self.pos[:, ::-1, None, :, :]
        return np.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1])

    def step(self) -> None:
        """One step (`SUBSTEPS` sub-steps) of every game not over; games over are left as they are."""
        active = ~self.over()
        self.dealt[active] = 0.0
        self.shot[active] = -1
        if not active.any():
            return
        for _ in range(SUBSTEPS):
            self._substep(active)
        self.t[active] += 1

    def _substep(self, active: np.ndarray) -> None:
        G, U = self.G, self.U
        alive, pos = self.alive, self.pos
        foe_alive = alive[:, ::-1]
        dist = self.distances()
        live_pair = alive[:, :, :, None] & foe_alive[:, :, None, :]
        in_reach = live_pair & (dist <= self.reach)
        in_sight = live_pair & (dist <= self.sight[:, :, None])
        near_reach = np.where(in_reach, dist, np.inf).argmin(-1)
        has_reach = in_reach.any(-1)
        near_sight = np.where(in_sight, dist, np.inf).argmin(-1)
        has_sight = in_sight.any(-1)

        # an attack whose target is dead ends: the unit holds (stop)
        tgt = self.target
        tgt_alive = np.take_along_axis(foe_alive, tgt, 2)
        order = np.where((self.order == ATTACK) & ~tgt_alive & alive, STOP, self.order)
        tgt_reach = np.take_along_axis(in_reach, tgt[..., None], 3)[..., 0]

        attack = order == ATTACK
        amove = order == ATTACK_MOVE
        fire_on = np.where(attack, tgt, near_reach)
        wants_fire = alive & ((attack & tgt_reach) | ((amove | (order == STOP)) & has_reach))
        fires = wants_fire & (self.cooldown <= 0.0) & active[:, None, None]

        # where each walking unit heads
        foe_pos = pos[:, ::-1]
        tgt_pos = np.take_along_axis(foe_pos, tgt[..., None].repeat(2, -1), 2)
        sight_pos = np.take_along_axis(foe_pos, near_sight[..., None].repeat(2, -1), 2)
        dest = self.goal
        dest = np.where((attack & ~tgt_reach)[..., None], tgt_pos, dest)
        dest = np.where((amove & ~has_reach & has_sight)[..., None], sight_pos, dest)
        walks = alive & ~wants_fire & ((order == MOVE) | attack | amove) & active[:, None, None]

        # damage, pooled per target: raw [G, target side, v] and armour-reduced
        raw = np.zeros((G, 2, U))
        arm = np.zeros((G, 2, U))
        for u in range(U):
            hit = fires[:, :, u, None] & (fire_on[:, :, u, None] == np.arange(U))  # [G, attacker side, v]
            raw += np.where(hit, self.raw[:, u], 0.0)[:, ::-1]
            arm += np.where(hit, self.armoured_damage[:, u], 0.0)[:, ::-1]
        absorbed = np.minimum(self.shield, raw)
        passed = raw - absorbed
        to_health = np.where(raw > 0, arm * np.divide(passed, raw, out=np.zeros_like(raw), where=raw > 0), 0.0)
        lost = absorbed + np.minimum(to_health, self.health)
        self.dealt += _ordered_sum(lost, 2)[:, ::-1]
        self.shield = self.shield - absorbed
        self.health = np.maximum(self.health - to_health, 0.0)
        self.cooldown = np.where(fires, self.weapon_cd, self.cooldown)
        self.shot = np.where(fires, fire_on, self.shot)

        # walking
        vec = dest - pos
        length = np.sqrt(vec[..., 0] * vec[..., 0] + vec[..., 1] * vec[..., 1])
        stride = np.minimum(self.speed * DT, length)
        unit = np.divide(vec, length[..., None], out=np.zeros_like(vec), where=length[..., None] > 0)
        new = np.where(walks[..., None], pos + unit * stride[..., None], pos)

        # overlapping living units are pushed apart by half their overlap
        flat = new.reshape(G, 2 * U, 2)
        live = alive.reshape(G, 2 * U)
        rad = self.radius.reshape(2 * U)
        diff = flat[:, :, None, :] - flat[:, None, :, :]
        gap = np.sqrt(diff[..., 0] * diff[..., 0] + diff[..., 1] * diff[..., 1])
        idx = np.arange(2 * U)
        # coincident units separate along x, the lower index to the left
        tie = np.where(idx[:, None] < idx[None, :], -1.0, 1.0)
        direction = np.where((gap > 0)[..., None], diff / np.where(gap > 0, gap, 1.0)[..., None],
                             np.stack([tie, np.zeros_like(tie)], -1)[None])
        overlap = rad[:, None] + rad[None, :] - gap
        push = (overlap > 0) & live[:, :, None] & live[:, None, :] & (idx[:, None] != idx[None, :])
        shove = np.where(push[..., None], direction * (overlap / 2)[..., None], 0.0)
        flat = flat + np.where(active[:, None, None], _ordered_sum(shove, 2), 0.0)
        new = np.clip(flat.reshape(G, 2, U, 2), 0.0, self.size)
        self.pos = np.where(alive[..., None], new, pos)

        # arrival ends moves and attack-moves that walked to their point
        to_goal = self.pos - self.goal
        there = np.sqrt(to_goal[..., 0] * to_goal[..., 0] + to_goal[..., 1] * to_goal[..., 1]) <= ARRIVE
        order = np.where(((order == MOVE) | (amove & ~has_reach & ~has_sight)) & there, STOP, order)
        self.order = np.where(active[:, None, None], order, self.order)
        self.cooldown = np.where(active[:, None, None] & alive, np.maximum(self.cooldown - DT, 0.0), self.cooldown)
        self.alive = alive & (self.health > 0.0)

    # -- views --------------------------------------------------------------------------------------
    def observe(self) -> dict[str, np.ndarray]:
        """Every player's observation of every game: each key ``[G, 2, ...]`` (see the module docstring)."""
        G, U, N = self.G, self.U, 2 * self.U
        w, h = self.size
        alive = self.alive
        dist = self.distances()
        sees = alive[:, :, :, None] & (dist <= self.sight[:, :, None])
        visible = alive[:, ::-1] & sees.any(2)  # [G, p, v]: enemy unit v shown to player p
        x, y = self.pos[..., 0], self.pos[..., 1]
        xv = np.stack([x[:, 0], w - x[:, 1]], 1)  # each side's own x as it sees it
        ent = np.zeros((G, 2, N, FEATURES), np.float32)
        shown = np.concatenate([alive, visible], -1)
        for half, side in ((slice(0, U), slice(None)), (slice(U, N), slice(None, None, -1))):
            kind = np.broadcast_to(self.kind[side], (G, 2, U))
            e = np.zeros((G, 2, U, FEATURES))
            e[..., F_OWN] = half.start == 0
            e[..., F_ENEMY] = half.start != 0
            e[..., F_TYPE:F_TYPE + T] = np.eye(T)[np.maximum(kind, 0)]
            e[..., F_HEALTH] = self.health[:, side] / np.where(self.max_health[side] > 0, self.max_health[side], 1)
            e[..., F_SHIELD] = self.shield[:, side] / np.where(self.max_shield[side] > 0, self.max_shield[side], 1)
            # the viewer p sees side `side[p]`'s x mirrored when p is blue
            xs = x[:, side]
            e[..., F_X] = np.stack([xs[:, 0], w - xs[:, 1]], 1) / w
            e[..., F_Y] = y[:, side] / h
            if half.start == 0:
                e[..., F_COOLDOWN] = self.cooldown / np.where(self.weapon_cd > 0, self.weapon_cd, 1)
                e[..., F_ORDER:F_ORDER + 4] = np.eye(5)[self.order][..., 1:]
            e[..., F_PRESENT] = 1.0
            ent[:, :, half] = np.where(shown[:, :, half][..., None], e, 0.0)
        # the spatial map: (own count, shown enemy count, own health, shown enemy health) per cell
        unit_frac = (self.health + self.shield) / np.where(self.exists, self.max_health + self.max_shield, 1.0)
        view_x = np.concatenate([xv, np.stack([x[:, 1], w - x[:, 0]], 1)], -1)  # [G, p, slot]
        col = np.clip((view_x / w * GRID).astype(np.int64), 0, GRID - 1)
        row = np.clip((np.concatenate([y, y[:, ::-1]], -1) / h * GRID).astype(np.int64), 0, GRID - 1)
        uf = np.concatenate([unit_frac, unit_frac[:, ::-1]], -1)
        spatial = np.zeros((G, 2, SPATIAL, GRID * GRID))
        cell = row * GRID + col
        gi, pi, ki = np.nonzero(shown)
        enemy = ki >= U
        np.add.at(spatial, (gi, pi, enemy.astype(np.int64), cell[gi, pi, ki]), 1.0)
        np.add.at(spatial, (gi, pi, 2 + enemy.astype(np.int64), cell[gi, pi, ki]), uf[gi, pi, ki])
        n_own = self.exists.sum(-1)  # [2]
        scalars = np.stack([
            np.broadcast_to(self.t / self.cfg.max_steps, (2, G)).T,
            alive.sum(-1) / n_own,
            alive[:, ::-1].sum(-1) / n_own[::-1],
            self.fractions()], -1)
        any_own = alive.any(-1)
        any_seen = visible.any(-1)
        type_mask = np.zeros((G, 2, 5), np.int8)
        type_mask[..., NO_OP] = 1
        type_mask[..., [MOVE, ATTACK_MOVE, STOP]] = any_own[..., None]
        type_mask[..., ATTACK] = any_own & any_seen
        unit_mask = np.zeros((G, 2, 5, N), np.int8)
        unit_mask[:, :, 1:, :U] = alive[:, :, None, :]
        target_mask = np.zeros((G, 2, 5, N), np.int8)
        target_mask[:, :, ATTACK, U:] = visible
        location_mask = np.zeros((G, 2, 5, GRID * GRID), np.int8)
        location_mask[:, :, [MOVE, ATTACK_MOVE]] = 1
        return {"entities": ent, "entity_mask": shown.astype(np.int8),
                "spatial": spatial.reshape(G, 2, SPATIAL, GRID, GRID).astype(np.float32),
                "scalars": scalars.astype(np.float32), "type_mask": type_mask, "unit_mask": unit_mask,
                "target_mask": target_mask, "location_mask": location_mask}

    def observation_space(self):
        U, N = self.U, 2 * self.U
        box = lambda shape, lo=0.0, hi=1.0, dt=np.float32: spaces.Box(lo, hi, shape=shape, dtype=dt)  # noqa: E731
        return spaces.Dict({
            "entities": box((N, FEATURES)), "entity_mask": box((N,), 0, 1, np.int8),
            "spatial": box((SPATIAL, GRID, GRID), 0.0, float(U)), "scalars": box((SCALARS,)),
            "type_mask": box((5,), 0, 1, np.int8), "unit_mask": box((5, N), 0, 1, np.int8),
            "target_mask": box((5, N), 0, 1, np.int8), "location_mask": box((5, GRID * GRID), 0, 1, np.int8)})


class SkirmishCore(GameCore):
    """One skirmish as a `GameCore`: a `SkirmishBatch` of one game (the same code a batch runs)."""

    action_kind = "structured"
    source = "arena"

    def __init__(self, game_id: str = "arena/Skirmish-3m-v0", red: str = "3m", blue: str = "3m", width: int = 32,
                 height: int = 32, max_steps: int = 60):
        self.game_id = game_id
        self.cfg = SkirmishConfig(red, blue, width, height, max_steps)
        self.batch = SkirmishBatch(1, self.cfg)
        self.players = ["red", "blue"]
        self.engine = {"skirmish": "0"}
        self.settings = self.cfg.settings()
        self.model = action_model(self.batch.U)
        self._space = self.batch.observation_space()
        self.reset(0)

    # -- lifecycle ----------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        self.batch.reset_game(0, seed)
        self._obs = None
        self._step = [0.0, 0.0]
        self._shaped = [0.0, 0.0]

    def current_player(self) -> int:
        return TERMINAL if self.batch.over()[0] else SIMULTANEOUS

    def acting_players(self) -> list[int]:
        return [] if self.batch.over()[0] else [0, 1]

    # -- views --------------------------------------------------------------------------------------
    def _observed(self) -> dict[str, np.ndarray]:
        if self._obs is None:
            self._obs = self.batch.observe()
        return self._obs

    def observation(self, p: int) -> dict[str, np.ndarray]:
        return {k: v[0, p].copy() for k, v in self._observed().items()}

    def observation_space(self, p: int):
        return self._space

    def action_space(self, p: int):
        return self.model.space()

    def action_model(self, p: int) -> ActionModel:
        return self.model

    def text(self, p: int) -> str:
        b, U = self.batch, self.batch.U
        w = b.size[0]
        obs = self._observed()
        lines = [f"step {int(b.t[0])}/{self.cfg.max_steps}, you are {self.players[p]} "
                 f"(your units 0-{U - 1}, the enemy's {U}-{2 * U - 1}; you start on the left)"]
        for label, side in (("you", p), ("enemy", 1 - p)):
            units = []
            for u in range(U):
                if not b.alive[0, side, u] or (side != p and not obs["entity_mask"][0, p, U + u]):
                    continue
                x, y = b.pos[0, side, u]
                x = w - x if p == 1 else x
                kind = UNITS[b.kind[side, u]]
                bit = f"{u if side == p else U + u} {kind.name} ({x:.1f}, {y:.1f}) {b.health[0, side, u]:.0f}hp"
                if kind.shield:
                    bit += f" {b.shield[0, side, u]:.0f}sh"
                if side == p:
                    o = int(b.order[0, side, u])
                    bit += " " + ACTION_TYPES[o] + (f" {U + int(b.target[0, side, u])}" if o == ATTACK else "")
                units.append(bit)
            alive = int(b.alive[0, side].sum())
            head = f"{label}: {alive} alive of {int(b.exists[side].sum())}, "
            # the enemy's losses are public (a kill count), its health only as far as its units are seen
            head += f"{100 * b.fractions()[0, side]:.0f}% health" if side == p else f"{len(units)} in sight"
            lines.append(head + (":" if units else ""))
            lines += ["  " + x for x in units]
        return "\n".join(lines)

    def battle(self) -> dict[str, Any]:
        """The whole battle now as plain JSON data, for pictures of it (`arena.envs.skirmish_draw`, the
        web replay's board): unlike the players' views it shows every unit, unmirrored (absolute map
        coordinates, y down the grid's rows).

        ``step``, ``max_steps``, ``width``, ``height``, ``grid``; ``sides``: per side its ``name``,
        ``alive`` and ``units`` counts and remaining health-and-shield ``fraction``; ``units``: per
        unit ``side`` (0 red, 1 blue), ``slot``, ``type`` (its letter), ``radius``, ``x``, ``y``,
        ``health`` and ``shield`` as fractions of the type's (``shield`` None for a type without),
        ``alive``, and ``shot``: the enemy slot it last fired at in the last step, or None;
        ``winner``: "red", "blue" or "draw" once the battle is over, else None."""
        b, cfg = self.batch, self.cfg
        frac = b.fractions()[0]
        units = []
        for s in range(2):
            for u in range(b.U):
                if not b.exists[s, u]:
                    continue
                kind = UNITS[b.kind[s, u]]
                shot = int(b.shot[0, s, u])
                units.append({
                    "side": s, "slot": u, "type": kind.letter, "radius": kind.radius,
                    "x": round(float(b.pos[0, s, u, 0]), 3), "y": round(float(b.pos[0, s, u, 1]), 3),
                    "health": round(float(b.health[0, s, u] / kind.health), 4),
                    "shield": round(float(b.shield[0, s, u] / kind.shield), 4) if kind.shield else None,
                    "alive": bool(b.alive[0, s, u]), "shot": shot if shot >= 0 else None})
        winner = None
        if b.over()[0]:
            winner = {1.0: "red", -1.0: "blue"}.get(float(b.outcome()[0]), "draw")
        return {"step": int(b.t[0]), "max_steps": cfg.max_steps, "width": cfg.width, "height": cfg.height,
                "grid": GRID, "units": units, "winner": winner,
                "sides": [{"name": self.players[s], "alive": int(b.alive[0, s].sum()),
                           "units": int(b.exists[s].sum()), "fraction": round(float(frac[s]), 4)}
                          for s in range(2)]}

    # -- moves --------------------------------------------------------------------------------------
    def apply_joint(self, actions: dict[int, Any]) -> dict[int, str]:
        b = self.batch
        for p in sorted(actions):
            b.give(0, p, actions[p])
        b.step()
        self._obs = None
        dealt = b.dealt[0]
        self._shaped = [float((dealt[0] - dealt[1]) / b.full[1]), float((dealt[1] - dealt[0]) / b.full[0])]
        self._step = [0.0, 0.0]
        if b.over()[0]:
            z = float(b.outcome()[0])
            self._step = [z, -z if z else 0.0]
        return {}

    def returns(self) -> list[float]:
        if not self.batch.over()[0]:
            return [0.0, 0.0]
        z = float(self.batch.outcome()[0])
        return [z, -z if z else 0.0]

    def step_rewards(self) -> list[float]:
        return list(self._step)

    def shaped_rewards(self) -> list[float]:
        """Damage dealt minus damage taken in the last step, each as a fraction of the other side's
        starting health and shields (a dense signal beside the outcome; see the module docstring)."""
        return list(self._shaped)


class SkirmishEnv(GameParallelEnv):
    """The PettingZoo parallel env of a skirmish: the arena's parallel facade, which draws the battle
    too (``render_mode="rgb_array"``, see the module docstring)."""

    metadata = {**GameParallelEnv.metadata, "render_modes": ["ansi", "human", "rgb_array"],
                "render_fps": 1 / STEP_SECONDS}

    def __init__(self, core: SkirmishCore, render_mode: str | None = None, invalid_move_limit: int | None = 1):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, "
                             f"got {render_mode!r}")
        # the facade itself knows only the text modes; the picture is this class's
        super().__init__(core, None if render_mode == "rgb_array" else render_mode, invalid_move_limit)
        self.render_mode = render_mode
        #: What a video adds to every frame (`arena.envs.skirmish_draw`): ``labels`` (who plays each side)
        #: and ``view`` (the part of the map drawn), set by `label_sides` and `zoom_to`.
        self.frame: dict = {}
        if render_mode == "rgb_array":
            # Whoever draws a match holds the core (the match loop plays cores) and takes its frames
            # from ``core.env`` (`arena.ui.video.frame_of`), as for a game played through a Gymnasium env.
            core.env = self

    def positions(self) -> list[tuple[float, float, float]]:
        """``(x, y, radius)`` of every living unit now (a video's first pass over a match: `zoom_to`)."""
        return [(u["x"], u["y"], u["radius"]) for u in self.core.battle()["units"] if u["alive"]]

    def zoom_to(self, points: list[tuple[float, float, float]]) -> None:
        """Draw only the square around `points` (every place a match's units stood), the map's rest cut."""
        from arena.envs.skirmish_draw import fight_view

        battle = self.core.battle()
        self.frame["view"] = list(fight_view(points, battle["width"], battle["height"]))

    def label_sides(self, labels: list[str]) -> None:
        """Say who plays each side (red first) in the frames' caption."""
        self.frame["labels"] = [str(x) for x in labels]

    def render(self):
        if self.render_mode == "rgb_array":
            from arena.envs.skirmish_draw import draw_frame

            return draw_frame({**self.core.battle(), **self.frame})
        return super().render()


def skirmish_env(game_id: str = "arena/Skirmish-3m-v0", red: str = "3m", blue: str = "3m", width: int = 32,
                 height: int = 32, max_steps: int = 60, render_mode: str | None = None,
                 invalid_move_limit: int | None = 1):
    """The PettingZoo parallel env of a skirmish (the registered entry point)."""
    return SkirmishEnv(SkirmishCore(game_id, red, blue, width, height, max_steps), render_mode, invalid_move_limit)


#: What a user, a config or a replay may set (`arena.envs.registry.game_settings`); the scenario's id
#: is the registration's.
skirmish_env.game_settings = ("red", "blue", "width", "height", "max_steps", "invalid_move_limit")


def _side_in_range(text: Any) -> bool:
    n = count_units(text)
    return n is not None and 1 <= n <= MAX_UNITS


def _whole(lo: int, hi: int) -> tuple[str, Any]:
    return (f"a whole number in [{lo}, {hi}]",
            lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, bool) and lo <= v <= hi)


#: Each setting's range (`arena.envs.registry.setting_rules`), checked before anything is built: a side
#: of at most `MAX_UNITS` units (the scenarios field 3 to 6; the simulation's pairwise arrays grow with
#: the square of the units), a map of `MIN_SIZE`..`MAX_SIZE` game units, at most `MAX_STEPS` steps.
skirmish_env.game_setting_ranges = {
    "red": (UNITS_WHAT, _side_in_range), "blue": (UNITS_WHAT, _side_in_range),
    "width": _whole(MIN_SIZE, MAX_SIZE), "height": _whole(MIN_SIZE // 2, MAX_SIZE), "max_steps": _whole(1, MAX_STEPS),
}
