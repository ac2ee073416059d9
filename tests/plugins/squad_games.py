"""A test game with StarCraft's shape, not shipped: two squads on a small grid, both players moving at
once, each seeing its units and the enemy's as a set of entities (with a map and scalars), each
moving with a compound action: a move type, then some of its units chosen by pointer, then a
target unit by pointer (attack) or a grid cell (move). Each part is masked by the game and by the
type chosen before it.

`test/Squads-v0`: 3 units a side with 3 hit points on a 5 x 5 grid, 10 ticks. A unit deals 1
damage to the target it attacks when the target is within 2 cells (Chebyshev); a moving unit steps
one cell towards its cell. Damage lands at once for both sides. A side with no units left loses;
after the last tick the side with more hit points left wins (equal: a draw). Each player sees the
board mirrored so that its own units start on the left and fill the first entity slots: one
network plays either seat.

`focus` is a scripted player that attacks the weakest enemy in range with every unit (a strong
opponent a learner never trains against).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from arena.agents.base import BaseAgent
from arena.agents.specs import agent_kinds, register_agent_kind
from arena.envs.actions import ActionModel, Part
from arena.envs.core import SIMULTANEOUS, TERMINAL, GameCore
from arena.envs.parallel import GameParallelEnv

H = W = 5
UNITS = 3
HP = 3
RANGE = 2
N = 2 * UNITS
FEATURES = 6  # mine, enemy, hp fraction, row, column, ready (alive)
NOOP, ATTACK, MOVE = 0, 1, 2


def action_model() -> ActionModel:
    return ActionModel(
        (Part("type", "categorical", n=3, mask="type_mask", labels=("noop", "attack", "move")),
         Part("units", "select", n=N, max_select=UNITS, mask="unit_mask"),
         Part("target", "pointer", n=N, mask="target_mask"),
         Part("cell", "spatial", shape=(H, W), mask="cell_mask")),
        uses=(("type",), ("type", "units", "target"), ("type", "units", "cell")))


MODEL = action_model()


class SquadCore(GameCore):
    game_id = "test/Squads-v0"
    action_kind = "structured"
    source = "tests"

    def __init__(self, ticks: int = 10):
        if not 1 <= int(ticks) <= 100:
            raise ValueError(f"ticks must be in [1, 100], got {ticks}")
        self.ticks = int(ticks)
        self.players = ["red", "blue"]
        self.engine = {"squads": "1"}
        self.settings = {"ticks": self.ticks}
        self.reset(0)

    # -- lifecycle ----------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        rng = np.random.default_rng(seed)
        self.pos = np.zeros((2, UNITS, 2), dtype=np.int64)  # absolute (row, col)
        for side, col in ((0, 1), (1, W - 2)):
            self.pos[side, :, 0] = np.sort(rng.choice(H, size=UNITS, replace=False))
            self.pos[side, :, 1] = col
        self.hp = np.full((2, UNITS), HP, dtype=np.int64)
        self.t = 0
        self._returns = [0.0, 0.0]
        self._step = [0.0, 0.0]

    def current_player(self) -> int:
        return TERMINAL if self._over() else SIMULTANEOUS

    def acting_players(self) -> list[int]:
        return [] if self._over() else [0, 1]

    def _over(self) -> bool:
        return self.t >= self.ticks or not (self.hp[0] > 0).any() or not (self.hp[1] > 0).any()

    # -- views ------------------------------------------------------------------------------------
    def _rel(self, p: int, rc: np.ndarray) -> np.ndarray:
        """Absolute (row, col) -> player p's view (blue sees the board mirrored)."""
        out = rc.copy()
        if p == 1:
            out[..., 1] = W - 1 - out[..., 1]
        return out

    def _slots(self, p: int) -> list[tuple[int, int]]:
        """(side, unit) of each entity slot in player p's view: its own units first."""
        return [(p, u) for u in range(UNITS)] + [(1 - p, u) for u in range(UNITS)]

    def observation(self, p: int) -> dict[str, np.ndarray]:
        ent = np.zeros((N, FEATURES), np.float32)
        present = np.zeros(N, np.int8)
        spatial = np.zeros((3, H, W), np.float32)
        for k, (side, u) in enumerate(self._slots(p)):
            if self.hp[side, u] <= 0:
                continue
            r, c = self._rel(p, self.pos[side, u])
            mine = side == p
            ent[k] = (float(mine), float(not mine), self.hp[side, u] / HP, r / (H - 1), c / (W - 1), 1.0)
            present[k] = 1
            spatial[0 if mine else 1, r, c] += 1.0
            spatial[2, r, c] += self.hp[side, u] / HP
        own = present[:UNITS].astype(bool)
        enemy = np.zeros(N, bool)
        enemy[UNITS:] = present[UNITS:].astype(bool)
        in_range = self._in_range(p)
        type_mask = np.array([1, int(own.any() and in_range), int(own.any())], np.int8)
        unit_mask = np.zeros((3, N), np.int8)
        unit_mask[ATTACK, :UNITS] = own
        unit_mask[MOVE, :UNITS] = own
        target_mask = np.zeros((3, N), np.int8)
        target_mask[ATTACK] = enemy
        cell_mask = np.zeros((3, H * W), np.int8)
        cell_mask[MOVE] = 1
        mine_hp, their_hp = self.hp[p].clip(0).sum(), self.hp[1 - p].clip(0).sum()
        scalars = np.array([self.t / self.ticks, (mine_hp - their_hp) / (UNITS * HP)], np.float32)
        return {"entities": ent, "entity_mask": present, "spatial": spatial, "scalars": scalars,
                "type_mask": type_mask, "unit_mask": unit_mask, "target_mask": target_mask, "cell_mask": cell_mask}

    def _in_range(self, p: int) -> bool:
        for u in range(UNITS):
            if self.hp[p, u] <= 0:
                continue
            for v in range(UNITS):
                if self.hp[1 - p, v] > 0 and np.abs(self.pos[p, u] - self.pos[1 - p, v]).max() <= RANGE:
                    return True
        return False

    def observation_space(self, p: int):
        box = lambda shape, lo=0.0, hi=1.0, dt=np.float32: spaces.Box(lo, hi, shape=shape, dtype=dt)  # noqa: E731
        return spaces.Dict({
            "entities": box((N, FEATURES)), "entity_mask": box((N,), 0, 1, np.int8),
            "spatial": box((3, H, W), 0.0, float(UNITS)), "scalars": box((2,), -1.0, 1.0),
            "type_mask": box((3,), 0, 1, np.int8), "unit_mask": box((3, N), 0, 1, np.int8),
            "target_mask": box((3, N), 0, 1, np.int8), "cell_mask": box((3, H * W), 0, 1, np.int8)})

    def action_space(self, p: int):
        return MODEL.space()

    def action_model(self, p: int) -> ActionModel:
        return MODEL

    def text(self, p: int) -> str:
        grid = [["." for _ in range(W)] for _ in range(H)]
        for k, (side, u) in enumerate(self._slots(p)):
            if self.hp[side, u] > 0:
                r, c = self._rel(p, self.pos[side, u])
                grid[r][c] = str(k) if side == p else chr(ord("a") + k - UNITS)
        units = ", ".join(f"{k if side == p else chr(ord('a') + k - UNITS)}:{max(0, int(self.hp[side, u]))}hp"
                          for k, (side, u) in enumerate(self._slots(p)))
        return f"tick {self.t}/{self.ticks} (you: digits, enemy: letters)\n" + "\n".join("".join(r) for r in grid) + \
            f"\n{units}"

    # -- moves ------------------------------------------------------------------------------------
    def apply_joint(self, actions: dict[int, Any]) -> dict[int, str]:
        damage = np.zeros((2, UNITS), np.int64)
        new_pos = self.pos.copy()
        for p, move in actions.items():
            kind = move["type"]
            if kind == NOOP:
                continue
            slots = self._slots(p)
            for k in move["units"]:
                side, u = slots[k]
                if kind == MOVE:
                    r, c = move["cell"]
                    goal = np.array([r, c if p == 0 else W - 1 - c])
                    new_pos[side, u] += np.sign(goal - self.pos[side, u])
                else:
                    tside, v = slots[move["target"]]
                    if self.hp[tside, v] > 0 and np.abs(self.pos[side, u] - self.pos[tside, v]).max() <= RANGE:
                        damage[tside, v] += 1
        self.pos = new_pos
        self.hp -= damage
        self.t += 1
        self._step = [0.0, 0.0]
        if self._over():
            a, b = self.hp[0].clip(0).sum(), self.hp[1].clip(0).sum()
            z = float(np.sign(a - b))
            self._step = self._returns = [z, -z if z else 0.0]
        return {}

    def returns(self) -> list[float]:
        return list(self._returns)

    def step_rewards(self) -> list[float]:
        return list(self._step)


def squads_env(ticks: int = 10, render_mode: str | None = None, invalid_move_limit: int | None = 1):
    return GameParallelEnv(SquadCore(ticks), render_mode, invalid_move_limit)


gymnasium.register(id="test/Squads-v0", entry_point="plugins.squad_games:squads_env")


class FocusFire(BaseAgent):
    """Every unit attacks the weakest enemy in range; moves towards the enemy when none is."""

    spec = "focus"

    def act(self, observation) -> Any:
        o = observation.raw
        ent, present = o["entities"], o["entity_mask"].astype(bool)
        own = [k for k in range(UNITS) if present[k]]
        if o["type_mask"][ATTACK]:
            targets = [k for k in range(UNITS, N) if o["target_mask"][ATTACK][k]]
            target = min(targets, key=lambda k: (ent[k, 2], k))
            return {"type": ATTACK, "units": own, "target": target}
        enemy = [k for k in range(UNITS, N) if present[k]]
        r, c = ent[enemy[0], 3] * (H - 1), ent[enemy[0], 4] * (W - 1)
        return {"type": MOVE, "units": own, "cell": [int(round(r)), int(round(c))]}


def _focus(core, seed, positional, **opts):
    return FocusFire()


if "focus" not in agent_kinds():
    register_agent_kind("focus", _focus)


class PickCore(GameCore):
    """`test/Pick-v0`: six items of random values; the players take turns picking one (a pointer over
    the items left); whoever holds more value at the end wins. An entity observation with plain
    discrete moves (the pointer-head case of `arch: entity`)."""

    game_id = "test/Pick-v0"
    source = "tests"
    ITEMS = 6

    def __init__(self):
        self.players = ["first", "second"]
        self.engine = {"pick": "1"}
        self.settings = {}
        self.reset(0)

    def reset(self, seed: int | None = None) -> None:
        self.values = np.random.default_rng(seed).uniform(0.0, 1.0, self.ITEMS).round(3)
        self.owner = np.full(self.ITEMS, -1)
        self.turn = 0
        self._step = [0.0, 0.0]

    def current_player(self) -> int:
        return TERMINAL if self.turn >= self.ITEMS else self.turn % 2

    def legal_actions(self, p: int) -> list[int]:
        return [int(i) for i in np.flatnonzero(self.owner < 0)]

    def observation(self, p: int) -> dict:
        left = (self.owner < 0).astype(np.int8)
        ent = np.stack([self.values, left, (self.owner == p), (self.owner == 1 - p)], -1).astype(np.float32)
        return {"entities": ent, "entity_mask": np.ones(self.ITEMS, np.int8), "action_mask": left}

    def action_mask(self, p: int) -> np.ndarray:
        return (self.owner < 0).astype(np.int8)

    def observation_space(self, p: int):
        return spaces.Dict({"entities": spaces.Box(0.0, 1.0, (self.ITEMS, 4), np.float32),
                            "entity_mask": spaces.Box(0, 1, (self.ITEMS,), np.int8),
                            "action_mask": spaces.Box(0, 1, (self.ITEMS,), np.int8)})

    def action_space(self, p: int):
        return spaces.Discrete(self.ITEMS)

    def apply(self, p: int, action: Any) -> str | None:
        self.owner[action] = p
        self.turn += 1
        self._step = [0.0, 0.0]
        if self.turn >= self.ITEMS:
            a, b = self.values[self.owner == 0].sum(), self.values[self.owner == 1].sum()
            z = float(np.sign(a - b))
            self._step = [z, -z if z else 0.0]
        return None

    def returns(self) -> list[float]:
        return list(self._step) if self.turn >= self.ITEMS else [0.0, 0.0]

    def step_rewards(self) -> list[float]:
        return list(self._step)

    def text(self, p: int) -> str:
        return " ".join(f"{i}:{v:.2f}" + ("" if o < 0 else f"({'mine' if o == p else 'theirs'})")
                        for i, (v, o) in enumerate(zip(self.values, self.owner)))


def pick_env(render_mode: str | None = None, invalid_move_limit: int | None = 1):
    from arena.envs.aec import GameAECEnv

    return GameAECEnv(PickCore(), render_mode, invalid_move_limit)


gymnasium.register(id="test/Pick-v0", entry_point="plugins.squad_games:pick_env")
