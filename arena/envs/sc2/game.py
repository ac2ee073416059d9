"""StarCraft II as an arena game: pysc2's `SC2Env` behind a `GameCore` (ids ``sc2/<Map>-v0``).

**Ids and players.** The seven mini-games (``sc2/MoveToBeacon-v0`` ... ``sc2/BuildMarines-v0``) are
one-player games: the score is the return, as in pysc2. The 1v1 maps pysc2 knows
(``sc2/Simple64-v0``, ``sc2/AbyssalReef-v0``, ...) are two-player, zero-sum games: each seat is
played by an arena agent (two league players, both moving at once) or by the game's built-in AI,
seated as the agent ``sc2bot:difficulty=hard,race=zerg,build=rush`` (`arena.agents.sc2bot`) and
rated like any player. The match loop tells the core who sits where (`seat_agents`) before the game
starts; a bot's seat never moves in the loop (the game plays it).

**Settings** (`SC2Config`): ``race`` of the arena's seats (``terran``, ``zerg``, ``protoss``,
``random``; ``terran,zerg`` gives each seat its own), ``step_mul`` (game loops a step; 8 is pysc2's
default, 22.4 loops are a second), ``interface`` (``raw``: units as entities and raw unit commands;
``features``: screen and minimap feature layers and pysc2's feature-layer functions), ``screen`` and
``minimap`` sizes, ``max_steps`` (the episode's length in steps; 0: the map's own), ``max_units``
(entity slots), ``bot_difficulty`` / ``bot_race`` / ``bot_build`` (what a bare ``sc2bot`` plays), and
``functions`` (the action types: pysc2 function names, raw or feature-layer by the interface) and
``queued`` (a part choosing now or after the units' current orders).

**Observation, raw interface** (``Dict`` of ``Box``; the same keys as Skirmish's, so a policy and a
learner config written for it read this unchanged apart from sizes):

=============== ==================== ====================================================================
``entities``    ``[max_units, 46]``  pysc2's 46 raw unit fields (`FEATURES`), each divided by its scale
                                     (`SCALES`: positions by the raw resolution, health by 1,500, ...) and
                                     clipped to [0, 4]; the tag (an opaque id) is 0. Own units first, then
                                     the enemy's, then the rest (minerals, geysers), each by tag.
``entity_mask`` ``[max_units]``      which slots hold a unit
``spatial``     ``[6, m, m]``        minimap planes: own, ally, neutral and enemy units (player_relative
                                     one-hot), visibility / 2, terrain height / 255
``scalars``     ``[12]``             pysc2's 11 player figures (minerals, food, army count, ...) scaled,
                                     and the time (step / max_steps)
masks           per action type      ``type_mask``, ``unit_mask`` (own units), ``target_mask`` (for
                                     ``*_unit`` functions: enemy units for attacks, any unit not the
                                     player's for the rest), ``location_mask`` (every cell for ``*_pt``)
=============== ==================== ====================================================================

The move is a compound raw order: ``type`` (one of ``functions``), ``units`` (the acting units by
multi-select pointer, up to 64), and ``target`` (a unit by pointer) or ``location`` (a minimap cell,
sent as its centre in raw coordinates), as the function needs; with the ``queued`` setting a
``queued`` part (now, or after the units' current orders) comes second, else orders are "now".
**Feature-layer interface:** ``screen [7, s, s]`` and ``minimap [6, m, m]`` planes, the same
scalars, ``type_mask`` from pysc2's ``available_actions``; the move is ``type`` plus ``screen`` and
``minimap`` cells for the functions that take them (``select_army``, ``Move_screen``,
``Attack_minimap``, ...; their other arguments "now" / "select").

**Rules of the match.** A step sends each arena seat's order and advances ``step_mul`` loops. An
order the game rejects (its ``action_result`` is an error: not enough minerals, an unreachable
target) is the seat's refused move: the match loop's invalid-move policy counts it (the game has
already stepped; nothing is retried). An order pysc2 itself refuses before sending it (a feature-layer
function not available now) is that seat's refused move alone: a no-op goes in its place and the
other seats' orders are played. The game's end (``player_result``) or ``max_steps`` ends the
match; ``returns`` are +1 / -1 / 0 on 1v1 maps (0 each at a timeout) and the score on mini-games.

**Lifecycle.** The game is launched at `reset` (a new process, or two for agent against agent,
about 1 s on the test game and 5 to 20 s on the real one) and quit at the match's end, at the next
`reset` or at `close`; pysc2 takes the seed only when a game is created, so every match launches
its own. Before launching, the core checks what pysc2 would fail on late or obscurely: the game
under ``$SC2PATH`` (`SC2NotFound`) and the map file (`SC2MapMissing`), each a one-line error naming
the fix. A game that dies mid-match raises `SC2GameCrashed` (the match is a fault: a league
re-queues it; a worker process lives on).

**Replays.** At the end of a match the game's own replay (``.SC2Replay``) is saved and handed to the
match's result (`attachments`): written beside the arena's replay as ``<match id>.SC2Replay``. The
game's version, base build and data version (from its ``ping``) go into ``engine`` in the replay's
header. An arena replay of a StarCraft match cannot be re-simulated (`replay verify` says why). The
game's own replays are read back through its replay observer (`arena.envs.sc2.replay_observer`, for
imitation), into the views a seat sees (`SC2Core.view`) and the moves of the action model
(`SC2Core.move_of`, the inverse of `function_call`).
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arena.envs.actions import ActionModel, Part
from arena.envs.core import SIMULTANEOUS, TERMINAL, GameCore, int_setting
from arena.envs.sc2.install import SC2GameCrashed, SC2MapMissing, SC2NotFound, check_install, sc2_path  # noqa: F401
from arena.errors import ArenaError

MINI_GAMES = ("MoveToBeacon", "CollectMineralShards", "FindAndDefeatZerglings", "DefeatRoaches",
              "DefeatZerglingsAndBanelings", "CollectMineralsAndGas", "BuildMarines")
#: The 1v1 maps of pysc2's registry (its melee and ladder maps), each an id ``sc2/<name>-v0``.
LADDER_MAPS = ("Simple64", "Simple96", "Simple128", "Flat32", "Flat48", "Flat64", "Flat96", "Flat128", "16Bit",
               "Abiogenesis", "AbyssalReef", "AcidPlant", "Acolyte", "Acropolis", "AscensiontoAiur", "Automaton",
               "Backwater", "BattleontheBoardwalk", "BelShirVestige", "BloodBoil", "Blueshift", "CactusValley",
               "Catalyst", "CeruleanFall", "CyberForest", "DarknessSanctuary", "DefendersLanding", "DiscoBloodbath",
               "Dreamcatcher", "Eastwatch", "Ephemeron", "Fracture", "Frost", "Honorgrounds", "Interloper",
               "KairosJunction", "KingsCove", "LostandFound", "MechDepot", "NeonVioletSquare", "NewRepugnancy",
               "NewkirkPrecinct", "Odyssey", "PaladinoTerminal", "ParaSite", "PortAleksander", "ProximaStation",
               "Redshift", "Sequencer", "Stasis", "Thunderbird", "Triton", "TurboCruise84", "WintersGate",
               "WorldofSleepers", "YearZero")
RACES = ("terran", "zerg", "protoss", "random")
#: Starts of a game before its failure is the match's (a start whose join fails, e.g. on a port another
#: process took, is made again on new ports).
LAUNCH_TRIES = 3
DIFFICULTIES = ("very_easy", "easy", "medium", "medium_hard", "hard", "harder", "very_hard", "cheat_vision",
                "cheat_money", "cheat_insane")
BUILDS = ("random", "rush", "timing", "power", "macro", "air")
INTERFACES = ("raw", "features")

#: pysc2's raw unit fields in their order (`pysc2.lib.features.FeatureUnit`) and the scale each is divided by.
FEATURES = ("unit_type", "alliance", "health", "shield", "energy", "cargo_space_taken", "build_progress",
            "health_ratio", "shield_ratio", "energy_ratio", "display_type", "owner", "x", "y", "facing", "radius",
            "cloak", "is_selected", "is_blip", "is_powered", "mineral_contents", "vespene_contents",
            "cargo_space_max", "assigned_harvesters", "ideal_harvesters", "weapon_cooldown", "order_length",
            "order_id_0", "order_id_1", "tag", "hallucination", "buff_id_0", "buff_id_1", "addon_unit_type",
            "active", "is_on_screen", "order_progress_0", "order_progress_1", "order_id_2", "order_id_3",
            "is_in_cargo", "buff_duration_remain", "buff_duration_max", "attack_upgrade_level",
            "armor_upgrade_level", "shield_upgrade_level")
_RES = 0.0  # placeholder: x and y are divided by the raw resolution
SCALES = dict(zip(FEATURES, (
    2000, 4, 1500, 1000, 200, 8, 100, 255, 255, 255, 4, 16, _RES, _RES, 8, 10, 4, 1, 1, 1, 1800, 2250, 8, 24, 24,
    32, 8, 5000, 5000, 0, 1, 300, 300, 2000, 1, 1, 100, 100, 5000, 5000, 1, 1000, 1000, 3, 3, 3)))
F_ALLIANCE, F_X, F_Y, F_TAG = (FEATURES.index(k) for k in ("alliance", "x", "y", "tag"))
SELF, ALLY, NEUTRAL, ENEMY = 1, 2, 3, 4
PLAYER_SCALES = (16, 1000, 1000, 200, 200, 200, 200, 50, 200, 50, 50)
SCALARS = len(PLAYER_SCALES) + 1
MAX_SELECT = 64

#: Default action types per interface (pysc2 function names).
#: The raw default is Skirmish's five order types in Skirmish's order: no-op, move, attack a unit,
#: attack-move, stop.
RAW_FUNCTIONS = ("no_op", "Move_pt", "Attack_unit", "Attack_pt", "Stop_quick")
FEATURE_FUNCTIONS = ("no_op", "select_army", "Move_screen", "Attack_screen", "Move_minimap", "Attack_minimap",
                     "Stop_quick", "select_point")
#: Feature-layer arguments a move may carry and their fixed values ("now", "select", ...).
FIXED_ARGS = {"queued": 0, "select_add": 0, "select_point_act": 0}
SCREEN_PLANES = 7  # player_relative one-hot (4), selected, unit density / 4, visibility / 2
MINIMAP_PLANES = 6


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return str(value)


@dataclass(frozen=True)
class SC2Config:
    map: str
    race: str = "terran"
    step_mul: int = 8
    interface: str = "raw"
    screen: int = 32
    minimap: int = 16
    max_steps: int = 0
    max_units: int = 32
    bot_difficulty: str = "very_easy"
    bot_race: str = "random"
    bot_build: str = "random"
    functions: tuple[str, ...] = ()
    #: A ``queued`` part (now, or after the units' current orders) for the functions that take it.
    queued: bool = False

    def __post_init__(self):
        for r in self.races:
            _choice("race", r, RACES)
        int_setting("step_mul", self.step_mul, 1, 1000)
        _choice("interface", self.interface, INTERFACES)
        int_setting("screen", self.screen, 8, 256)
        int_setting("minimap", self.minimap, 8, 256)
        int_setting("max_steps", self.max_steps, 0, 1_000_000)
        int_setting("max_units", self.max_units, 1, 512)
        _choice("bot_difficulty", self.bot_difficulty, DIFFICULTIES)
        _choice("bot_race", self.bot_race, RACES)
        _choice("bot_build", self.bot_build, BUILDS)
        fns = tuple(self.functions) or (RAW_FUNCTIONS if self.interface == "raw" else FEATURE_FUNCTIONS)
        if not 1 <= len(fns) <= 64 or fns[0] != "no_op" or len(set(fns)) != len(fns):
            raise ValueError(f"functions: 1 to 64 distinct pysc2 function names, the first no_op; got {list(fns)}")
        object.__setattr__(self, "functions", fns)
        if not isinstance(self.queued, bool):
            raise ValueError(f"queued must be true or false, got {self.queued!r}")

    @property
    def mini_game(self) -> bool:
        return self.map in MINI_GAMES

    @property
    def races(self) -> list[str]:
        return [r.strip() for r in str(self.race).split(",")]

    def race_of(self, seat: int) -> str:
        r = self.races
        return r[seat] if seat < len(r) else r[-1]

    def settings(self) -> dict[str, Any]:
        return {"race": self.race, "step_mul": self.step_mul, "interface": self.interface, "screen": self.screen,
                "minimap": self.minimap, "max_steps": self.max_steps, "max_units": self.max_units,
                "bot_difficulty": self.bot_difficulty, "bot_race": self.bot_race, "bot_build": self.bot_build,
                "functions": list(self.functions), "queued": self.queued}


# -- the action model ------------------------------------------------------------------------------
def _arg_names(fn: Any) -> tuple[str, ...]:
    return tuple(a.name for a in fn.args)


def function_table(cfg: SC2Config) -> list[Any]:
    """pysc2's function objects for `cfg.functions`; a `ValueError` naming an unknown or unusable one."""
    from arena.envs.sc2._pysc2 import actions

    a = actions()
    table = a.RAW_FUNCTIONS if cfg.interface == "raw" else a.FUNCTIONS
    out = []
    for name in cfg.functions:
        try:
            fn = table[name]
        except (KeyError, ValueError):
            raise ValueError(f"functions: {name!r} is not a pysc2 {cfg.interface} function "
                             f"(e.g. {', '.join((RAW_FUNCTIONS if cfg.interface == 'raw' else FEATURE_FUNCTIONS)[1:4])})"
                             ) from None
        args = set(_arg_names(fn))
        known = {"queued", "unit_tags", "target_unit_tag", "world"} if cfg.interface == "raw" else \
            {"screen", "minimap"} | set(FIXED_ARGS)
        if not args <= known:
            raise ValueError(f"functions: {name} takes {sorted(args - known)}, which this adapter cannot choose")
        out.append(fn)
    return out


def action_model(cfg: SC2Config) -> ActionModel:
    """The compound move of `cfg`'s interface (see the module docstring). Built from the function names'
    arguments without importing pysc2: a raw ``*_pt`` function takes units and a location, ``*_unit``
    units and a target, ``*_quick`` units; ``no_op`` nothing; a feature function by its name."""
    names = cfg.functions
    m = cfg.minimap
    # with ``queued``: the second part, used by every function but no_op and the selections
    queued = (Part("queued", "categorical", n=2, labels=("now", "queued")),) if cfg.queued else ()
    q = ("queued",) if cfg.queued else ()
    if cfg.interface == "raw":
        uses = []
        for n in names:
            if n == "no_op":
                uses.append(("type",))
            elif n.endswith("_pt"):
                uses.append(("type", *q, "units", "location"))
            elif n.endswith("_unit"):
                uses.append(("type", *q, "units", "target"))
            else:
                uses.append(("type", *q, "units"))
        return ActionModel(
            (Part("type", "categorical", n=len(names), mask="type_mask", labels=tuple(names)), *queued,
             Part("units", "select", n=cfg.max_units, max_select=min(cfg.max_units, MAX_SELECT), mask="unit_mask"),
             Part("target", "pointer", n=cfg.max_units, mask="target_mask"),
             Part("location", "spatial", shape=(m, m), mask="location_mask")),
            uses=tuple(uses))
    uses = []
    for n in names:
        takes_queue = q if n not in ("no_op",) and not n.startswith("select") else ()
        if n.endswith("_screen") or n == "select_point":
            uses.append(("type", *takes_queue, "screen"))
        elif n.endswith("_minimap"):
            uses.append(("type", *takes_queue, "minimap"))
        else:
            uses.append(("type", *takes_queue))
    s = cfg.screen
    return ActionModel(
        (Part("type", "categorical", n=len(names), mask="type_mask", labels=tuple(names)), *queued,
         Part("screen", "spatial", shape=(s, s)),
         Part("minimap", "spatial", shape=(m, m))),
        uses=tuple(uses), entities="")


def observation_space(cfg: SC2Config):
    from gymnasium import spaces

    def box(shape, hi=4.0, dt=np.float32):
        return spaces.Box(0, hi, shape=shape, dtype=dt)

    k, m = len(cfg.functions), cfg.minimap
    if cfg.interface == "raw":
        N = cfg.max_units
        return spaces.Dict({
            "entities": box((N, len(FEATURES))), "entity_mask": box((N,), 1, np.int8),
            "spatial": box((MINIMAP_PLANES, m, m), 1.0), "scalars": box((SCALARS,)),
            "type_mask": box((k,), 1, np.int8), "unit_mask": box((k, N), 1, np.int8),
            "target_mask": box((k, N), 1, np.int8), "location_mask": box((k, m * m), 1, np.int8)})
    s = cfg.screen
    return spaces.Dict({"screen": box((SCREEN_PLANES, s, s), 1.0), "minimap": box((MINIMAP_PLANES, m, m), 1.0),
                        "scalars": box((SCALARS,)), "type_mask": box((k,), 1, np.int8)})


# -- observations ----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _inverse_scales(raw_resolution: float) -> np.ndarray:
    """``1 / SCALES`` in `FEATURES` order (0 for the tag), x and y by `raw_resolution`."""
    s = np.array([SCALES[f] for f in FEATURES], np.float64)
    s[F_X] = s[F_Y] = max(float(raw_resolution), 1.0)
    return np.divide(1.0, s, out=np.zeros_like(s), where=s > 0)


#: The slot order's rank of each alliance (own, enemy, ally, the rest).
_RANK = np.array([3, 0, 2, 3, 1, 3, 3, 3])


def entity_slots(raw_units: np.ndarray, max_units: int) -> np.ndarray:
    """Rows of `raw_units` in slot order: own units, then the enemy's, then the rest, each by tag; at
    most `max_units`."""
    if len(raw_units) == 0:
        return np.zeros(0, np.int64)
    rank = _RANK.take(raw_units[:, F_ALLIANCE].astype(np.int64, copy=False), mode="clip")
    order = np.lexsort((raw_units[:, F_TAG], rank))
    return order[:max_units]


class _Roles:
    """What each of `functions` needs, as arrays (for masks without a loop over the functions)."""

    def __init__(self, functions: tuple[str, ...]):
        names = list(functions)
        self.noop = np.array([n == "no_op" for n in names])
        self.units = ~self.noop
        self.on_unit = np.array([n.endswith("_unit") for n in names])
        self.attack = self.on_unit & np.array([n.startswith("Attack") for n in names])
        self.at_point = np.array([n.endswith("_pt") for n in names])
        #: Legal as soon as the player has a unit: every function but no_op and the ``*_unit`` ones.
        self.plain = self.units & ~self.on_unit


@functools.lru_cache(maxsize=32)
def _roles(functions: tuple[str, ...]) -> _Roles:
    return _Roles(functions)


_ALLIANCES = np.array([SELF, ALLY, NEUTRAL, ENEMY])[:, None, None]


def _player_relative(layer: np.ndarray) -> np.ndarray:
    """``[4, H, W]``: own, ally, neutral and enemy cells of a player_relative layer."""
    return layer[None] == _ALLIANCES


@functools.lru_cache(maxsize=2)
def _layer_index(kind: str) -> dict[str, int]:
    """Where pysc2 puts each named feature layer (``minimap`` or ``screen``) in its stacked array."""
    from arena.envs.sc2._pysc2 import features

    layers = features().MINIMAP_FEATURES if kind == "minimap" else features().SCREEN_FEATURES
    return {f.name: int(f.index) for f in layers}


def minimap_planes(obs: Any, m: int) -> np.ndarray:
    mm = obs.get("feature_minimap")
    out = np.zeros((MINIMAP_PLANES, m, m), np.float32)
    layers = np.asarray(mm) if mm is not None else None
    if layers is None or layers.size == 0:
        return out
    at = _layer_index("minimap")
    pr = layers[at["player_relative"]]
    h, w = min(m, pr.shape[0]), min(m, pr.shape[1])
    out[:4, :h, :w] = _player_relative(pr[:h, :w])
    out[4, :h, :w] = layers[at["visibility_map"], :h, :w] * 0.5  # 0, 1 or 2
    out[5, :h, :w] = layers[at["height_map"], :h, :w] * (1 / 255)
    return out


def screen_planes(obs: Any, s: int) -> np.ndarray:
    sc = obs.get("feature_screen")
    out = np.zeros((SCREEN_PLANES, s, s), np.float32)
    if sc is None or np.asarray(sc).size == 0:
        return out
    pr = np.asarray(sc.player_relative)
    h, w = min(s, pr.shape[0]), min(s, pr.shape[1])
    out[:4, :h, :w] = _player_relative(pr[:h, :w])
    out[4, :h, :w] = np.asarray(sc.selected)[:h, :w]
    out[5, :h, :w] = np.asarray(sc.unit_density)[:h, :w] / 4.0
    out[6, :h, :w] = np.asarray(sc.visibility_map)[:h, :w] / 2.0
    return np.clip(out, 0.0, 1.0)


_PLAYER_INVERSE = 1.0 / np.asarray(PLAYER_SCALES, np.float64)


def scalars(obs: Any, step: int, max_steps: int) -> np.ndarray:
    out = np.zeros(SCALARS, np.float32)
    player = obs.get("player")
    if player is not None:
        player = np.asarray(player)[:len(PLAYER_SCALES)]
        out[:len(player)] = np.clip(player * _PLAYER_INVERSE[:len(player)], 0.0, 4.0)
    out[-1] = min(step / max_steps, 1.0) if max_steps else 0.0
    return out


class RawView:
    """One player's raw-interface observation as arrays, and what its slots mean for the moves."""

    def __init__(self, cfg: SC2Config, obs: Any | None, step: int, max_steps: int, raw_resolution: float):
        N, m = cfg.max_units, cfg.minimap
        k = len(cfg.functions)
        self.rows = np.zeros(0, np.int64)
        ent = np.zeros((N, len(FEATURES)), np.float32)
        alliance = np.zeros(N, np.int64)
        raw = obs.get("raw_units") if obs is not None else None
        if raw is not None and len(raw):
            raw = np.asarray(raw).view(np.ndarray)  # pysc2's named array as a plain one (no copy)
            self.rows = rows = entity_slots(raw, N)
            n = len(rows)
            picked = raw[rows]
            scaled = ent[:n]
            np.multiply(picked, _inverse_scales(raw_resolution), out=scaled, casting="unsafe")
            np.clip(scaled, 0.0, 4.0, out=scaled)
            alliance[:n] = picked[:, F_ALLIANCE]
        mask = (alliance > 0).view(np.int8)  # padding slots have alliance 0
        own = alliance == SELF
        roles = _roles(cfg.functions)
        if own.any():
            targets = np.where(roles.attack[:, None], alliance == ENEMY, alliance > SELF)
            targets &= roles.on_unit[:, None]
            type_mask = roles.noop | roles.plain | targets.any(1)
            unit_mask = roles.units[:, None] & own
            location_mask = np.repeat(roles.at_point.view(np.int8)[:, None], m * m, 1)
        else:  # nothing to order: no_op alone
            type_mask, targets, unit_mask = roles.noop.copy(), np.zeros((k, N), bool), np.zeros((k, N), bool)
            location_mask = np.zeros((k, m * m), np.int8)
        self.arrays = {
            "entities": ent, "entity_mask": mask,
            "spatial": minimap_planes(obs, m) if obs is not None else np.zeros((MINIMAP_PLANES, m, m), np.float32),
            "scalars": scalars(obs, step, max_steps) if obs is not None else np.zeros(SCALARS, np.float32),
            "type_mask": type_mask.view(np.int8), "unit_mask": unit_mask.view(np.int8),
            "target_mask": targets.view(np.int8), "location_mask": location_mask}


def feature_arrays(cfg: SC2Config, obs: Any | None, step: int, max_steps: int, function_ids: list[int]) -> dict:
    s, m, k = cfg.screen, cfg.minimap, len(cfg.functions)
    type_mask = np.zeros(k, np.int8)
    type_mask[0] = 1
    if obs is not None:
        available = set(int(a) for a in np.asarray(obs.get("available_actions", [])))
        for i, fid in enumerate(function_ids):
            if fid in available:
                type_mask[i] = 1
    return {"screen": screen_planes(obs, s) if obs is not None else np.zeros((SCREEN_PLANES, s, s), np.float32),
            "minimap": minimap_planes(obs, m) if obs is not None else np.zeros((MINIMAP_PLANES, m, m), np.float32),
            "scalars": scalars(obs, step, max_steps) if obs is not None else np.zeros(SCALARS, np.float32),
            "type_mask": type_mask}


def function_call(cfg: SC2Config, fn: Any, move: dict, rows: np.ndarray | None, raw_resolution: int) -> Any:
    """pysc2's `FunctionCall` of `fn` (a pysc2 function object) for a checked `move`.

    Raw interface: `rows` are the raw_units rows of the entity slots (`RawView.rows`); pysc2 takes
    a row position as a unit's tag (``unit_tags``, ``target_unit_tag``) and maps it to the game's
    tag itself. A location cell ``[row, col]`` of the ``minimap x minimap`` grid is sent as its
    centre in raw coordinates (x from the column, y from the row; pysc2 floors it). Feature
    interface: a ``screen`` / ``minimap`` cell is sent as ``[x, y]``, the other arguments fixed
    (`FIXED_ARGS`). An out-of-range slot raises `IndexError` (the core counts a refused move)."""
    from arena.envs.sc2._pysc2 import actions

    a = actions()
    if fn.name == "no_op":
        return a.FunctionCall(fn.id, [])
    args = []
    if cfg.interface == "raw":
        for name in _arg_names(fn):
            if name == "queued":
                args.append([int(move.get("queued", 0))])
            elif name == "unit_tags":
                args.append([int(rows[u]) for u in move["units"]])
            elif name == "target_unit_tag":
                args.append([int(rows[int(move["target"])])])
            elif name == "world":
                r, c = move["location"]
                scale = raw_resolution / cfg.minimap
                args.append([int((int(c) + 0.5) * scale), int((int(r) + 0.5) * scale)])
        return a.FunctionCall(fn.id, args)
    for name in _arg_names(fn):
        if name == "queued":
            args.append([int(move.get("queued", 0))])
        elif name in FIXED_ARGS:
            args.append([FIXED_ARGS[name]])
        else:
            r, c = move[name]
            args.append([int(c), int(r)])
    return a.FunctionCall(fn.id, args)


def move_of(cfg: SC2Config, fns: list[Any], call: Any, rows: np.ndarray, raw_resolution: int) -> dict | None:
    """`function_call` backwards, raw interface: the move that sends pysc2's `call` (a `FunctionCall`
    whose ``unit_tags`` / ``target_unit_tag`` are rows of the observation's raw_units, as pysc2's
    `reverse_raw_action` gives them; ``world`` in raw coordinates), or None where the action model
    cannot say it: a function not in `fns`, a unit outside the entity slots (`rows`), a queued order
    without the ``queued`` setting. A location is the minimap cell holding the point."""
    ids = [int(f.id) for f in fns]
    if int(call.function) not in ids:
        return None
    k = ids.index(int(call.function))
    fn, move = fns[k], {"type": k}
    slot = {int(r): i for i, r in enumerate(rows)}
    for name, arg in zip(_arg_names(fn), call.arguments):
        if name == "queued":
            if cfg.queued:
                move["queued"] = int(bool(arg[0]))
            elif arg[0]:
                return None
        elif name == "unit_tags":
            units = [slot.get(int(u)) for u in arg]
            if not units or None in units:
                return None
            move["units"] = units
        elif name == "target_unit_tag":
            target = slot.get(int(arg[0]))
            if target is None:
                return None
            move["target"] = target
        elif name == "world":
            x, y = (float(v) for v in arg)
            scale, m = raw_resolution / cfg.minimap, cfg.minimap
            move["location"] = [min(m - 1, max(0, int(y // scale))), min(m - 1, max(0, int(x // scale)))]
    return move


# -- the core --------------------------------------------------------------------------------------
class SC2Core(GameCore):
    """One StarCraft II match through pysc2's `SC2Env` (see the module docstring)."""

    action_kind = "structured"
    source = "pysc2"

    def __init__(self, game_id: str, map: str, race: str = "terran", step_mul: int = 8, interface: str = "raw",
                 screen: int = 32, minimap: int = 16, max_steps: int = 0, max_units: int = 32,
                 bot_difficulty: str = "very_easy", bot_race: str = "random", bot_build: str = "random",
                 functions: list[str] | tuple[str, ...] = (), queued: bool = False):
        self.game_id = game_id
        self.cfg = cfg = SC2Config(map, race, step_mul, interface, screen, minimap, max_steps, max_units,
                                   bot_difficulty, bot_race, bot_build, tuple(functions), queued)
        self.players = ["player"] if cfg.mini_game else ["player_1", "player_2"]
        self.settings = cfg.settings()
        self.model = action_model(cfg)
        self._space = observation_space(cfg)
        self.engine = {"pysc2-evolved": _version("pysc2-evolved")}
        #: Per seat: None (an arena agent plays it) or (race, difficulty, build) of the game's AI.
        self.bots: list[tuple[str, str, str] | None] = [None] * len(self.players)
        self._agent_seats = list(range(len(self.players)))
        self._env = None
        self._pids: list[int] = []
        self._fns: list[Any] | None = None
        self._ts: list[Any] | None = None
        self._views: list[Any] = []
        self._returns = [0.0] * len(self.players)
        self._step_rewards = [0.0] * len(self.players)
        self._t = 0
        self._over = False
        self._seed: int | None = None
        self._attachments: dict[str, bytes] = {}
        self.outcome_reason = ""

    # -- seats ---------------------------------------------------------------------------------------
    def seat_agents(self, agents: list[Any]) -> None:
        """The match loop's word on who sits where, before `reset`: a seat held by the game's own AI
        (an agent with ``sc2_bot``: race, difficulty, build) is played by the game."""
        bots = [getattr(a, "sc2_bot", None) for a in agents]
        if self.cfg.mini_game and any(b is not None for b in bots):
            raise ArenaError(f"{self.game_id} is a one-player mini-game: there is no seat for the built-in AI "
                             "(play it on a 1v1 map such as sc2/Simple64-v0)")
        if len(bots) == len(self.players) and all(b is not None for b in bots):
            raise ArenaError(f"{self.game_id}: both seats are the built-in AI; at least one must be an arena agent")
        self.bots = [tuple(b) if b is not None else None for b in bots]
        self._agent_seats = [i for i, b in enumerate(self.bots) if b is None]

    @property
    def agent_seats(self) -> list[int]:
        return self._agent_seats

    # -- lifecycle -----------------------------------------------------------------------------------
    def _functions(self) -> list[Any]:
        if self._fns is None:
            from arena.envs.sc2._pysc2 import actions

            self._fns = function_table(self.cfg)
            self._noop = actions().FunctionCall(self._fns[0].id, [])
        return self._fns

    def _map_path(self) -> str:
        from arena.envs.sc2._pysc2 import pysc2

        maps = pysc2("maps")
        try:
            return maps.get(self.cfg.map).path
        except Exception:
            raise ArenaError(f"pysc2 knows no map {self.cfg.map!r}") from None

    def _launch(self, seed: int | None) -> None:
        from arena.envs.sc2._pysc2 import sc2_env

        cfg = self.cfg
        check_install()  # before pysc2 is imported (it logs a warning on import): a missing game is one line
        env_mod = sc2_env()
        self._functions()
        check_install(self._map_path())
        players = []
        for seat, bot in enumerate(self.bots):
            if bot is None:
                players.append(env_mod.Agent(env_mod.Race[cfg.race_of(seat)], f"arena_{seat}"))
            else:
                race, difficulty, build = bot
                players.append(env_mod.Bot(env_mod.Race[race], env_mod.Difficulty[difficulty],
                                           env_mod.BotBuild[build]))
        aif = self.interface_format()
        kwargs: dict[str, Any] = {}
        if cfg.max_steps:
            kwargs["game_steps_per_episode"] = cfg.max_steps * cfg.step_mul
        from arena import procs

        # A worker terminated while the game starts or plays stops it first (`_kill_games`).
        procs.at_exit(id(self), self._kill_games)
        running = set(_game_children())  # other cores' games in this process, left alone below
        for attempt in range(1, LAUNCH_TRIES + 1):
            try:
                self._env = env_mod.SC2Env(map_name=cfg.map, players=players, agent_interface_format=aif,
                                           step_mul=cfg.step_mul,
                                           random_seed=None if seed is None else int(seed) % 2**31, **kwargs)
                break
            except ArenaError:
                raise
            except Exception as e:
                # pysc2's env was never made, so nothing closes the games this start launched: stop them
                # here. The next try picks new ports (a port taken between pysc2 picking it and the game
                # binding it fails the join: a race with every other process on the machine).
                _kill(set(_game_children()) - running)
                if attempt == LAUNCH_TRIES:
                    raise SC2GameCrashed(f"StarCraft II did not start ({LAUNCH_TRIES} tries): {type(e).__name__}: "
                                         f"{str(e).splitlines()[0][:200]}") from None
        # pysc2's own handles on the game processes
        self._pids = [int(p.pid) for p in getattr(self._env, "_sc2_procs", None) or [] if p.pid]
        try:
            ping = self._env._controllers[0].ping()
            self.engine = {**self.engine, "sc2_game_version": str(ping.game_version),
                           "sc2_base_build": int(ping.base_build), "sc2_data_version": str(ping.data_version)}
        except Exception:
            pass

    def interface_format(self) -> Any:
        """pysc2's `AgentInterfaceFormat` of the seats (a match's, and a replay observer's: the same views)."""
        from arena.envs.sc2._pysc2 import features

        cfg, feat = self.cfg, features()
        dims = feat.Dimensions(screen=cfg.screen, minimap=cfg.minimap)
        if cfg.interface == "raw":
            return feat.AgentInterfaceFormat(feature_dimensions=dims, use_raw_units=True, use_raw_actions=True,
                                             raw_resolution=self.raw_resolution, action_space=feat.ActionSpace.RAW)
        return feat.AgentInterfaceFormat(feature_dimensions=dims, action_space=feat.ActionSpace.FEATURES)

    @property
    def raw_resolution(self) -> int:
        return 64

    def _kill_games(self) -> None:
        """Stop this core's game processes at once (a worker being terminated: `arena.procs.at_exit`):
        those pysc2 reported, and, for a game still starting, this process's children that run with
        the game's protocol flags."""
        _kill(set(self._pids) | set(_game_children()))

    def _quit(self) -> None:
        from arena import procs

        procs.forget(id(self))
        self._pids = []
        env, self._env = self._env, None
        if env is not None:
            try:
                env.close()
            except Exception:
                pass

    def reset(self, seed: int | None = None) -> None:
        self._quit()
        self._seed = seed
        self._returns = [0.0] * len(self.players)
        self._step_rewards = [0.0] * len(self.players)
        self._t = 0
        self._over = False
        self._attachments = {}
        self.outcome_reason = ""
        self._ts = None
        self._views = []
        self._launch(seed)
        try:
            ts = self._env.reset()
        except Exception as e:
            self._crashed(e, "at the start")
        self._take(ts)

    def close(self) -> None:
        self._quit()

    def __del__(self):  # a core dropped mid-match must not leave a game running
        try:
            self._quit()
        except Exception:
            pass

    def _crashed(self, e: BaseException, when: str):
        self._quit()
        self._over = True
        raise SC2GameCrashed(f"StarCraft II stopped {when} (step {self._t}): {type(e).__name__}: "
                             f"{str(e).splitlines()[0][:200] if str(e) else ''}; the match is a fault (a league plays "
                             "it again)") from None

    @property
    def episode_steps(self) -> int:
        return self.cfg.max_steps

    def _take(self, ts: list[Any]) -> None:
        """Keep the agents' timesteps (in agent-seat order); each seat's view is built when first asked
        for (`_view_of`), once a step."""
        self._ts = list(ts)
        self._views = [None] * len(self.agent_seats)

    def _build_view(self, k: int) -> Any:
        return self.view(self._ts[k].observation, self._t)

    def view(self, obs: Any, step: int) -> Any:
        """A seat's view of pysc2's observation `obs` at `step` (a `RawView`, or the feature-layer arrays):
        what `observation` hands out, here from a match and in `arena.envs.sc2.replay_observer` from a
        replay."""
        if self.cfg.interface == "raw":
            return RawView(self.cfg, obs, step, self.cfg.max_steps, self.raw_resolution)
        return feature_arrays(self.cfg, obs, step, self.cfg.max_steps, [int(f.id) for f in self._functions()])

    # -- turns ---------------------------------------------------------------------------------------
    def current_player(self) -> int:
        return TERMINAL if self._over or self._ts is None else SIMULTANEOUS

    def acting_players(self) -> list[int]:
        return [] if self._over or self._ts is None else self.agent_seats

    def _view_of(self, p: int, fresh: bool = False) -> Any | None:
        """Seat p's view of this step (None for a seat the game plays, or before the start); `fresh`:
        built anew (its arrays are the caller's) and kept as the step's view."""
        seats = self.agent_seats
        if p not in seats or not self._views:
            return None
        k = seats.index(p)
        if fresh or self._views[k] is None:
            self._views[k] = self._build_view(k)
        return self._views[k]

    def observation(self, p: int) -> dict[str, np.ndarray]:
        v = self._view_of(p, fresh=True)  # new arrays every call: no copy to make
        if v is None:
            if self.cfg.interface == "raw":
                return RawView(self.cfg, None, 0, 0, self.raw_resolution).arrays
            return feature_arrays(self.cfg, None, 0, 0, [])
        return dict(v.arrays) if isinstance(v, RawView) else dict(v)

    def observation_space(self, p: int):
        return self._space

    def action_space(self, p: int):
        return self.model.space()

    def action_model(self, p: int) -> ActionModel:
        return self.model

    # -- moves ---------------------------------------------------------------------------------------
    def function_call(self, p: int, move: dict) -> Any:
        """pysc2's `FunctionCall` for seat p's checked move (`function_call`)."""
        fn = self._functions()[int(move["type"])]
        rows = self._view_of(p).rows if self.cfg.interface == "raw" else None
        return function_call(self.cfg, fn, move, rows, self.raw_resolution)

    def move_of(self, call: Any, view: RawView) -> dict | None:
        """The move whose `function_call` is pysc2's `call` (raw interface, its unit arguments rows of the
        observation `view` was built from), or None where the action model cannot say it (`move_of`)."""
        return move_of(self.cfg, self._functions(), call, view.rows, self.raw_resolution)

    def apply_joint(self, actions: dict[int, Any]) -> dict[int, str]:
        if self._env is None:  # not a crash: there is no game to send the orders to
            raise ArenaError(f"{self.game_id}: no match in progress (it has ended or never started): reset first")
        noop = self._noop
        calls, refused = [], {}
        seats = self.agent_seats
        for p in seats:
            move = actions.get(p)
            if move is None:
                calls.append(noop)
                continue
            try:
                calls.append(self.function_call(p, move))
            except (IndexError, KeyError, TypeError, ValueError) as e:
                calls.append(noop)
                refused[p] = f"cannot send {move!r} to the game: {e}"
        try:
            ts = self._env.step(calls)
        except ValueError:
            ts = self._step_refusing(calls, refused)
        except Exception as e:
            self._crashed(e, "mid-match")
        self._t += 1
        self._take(ts)
        self._score(ts)
        for k, p in enumerate(self.agent_seats):
            errors = [int(x) for x in np.asarray(ts[k].observation.get("action_result", []))]
            if errors and p in actions and p not in refused:
                refused[p] = "the game rejected the order: " + ", ".join(_action_error(x) for x in errors)
        return refused

    def _step_refusing(self, calls: list[Any], refused: dict[int, str]) -> list[Any]:
        """Step after pysc2 refused a call. It checks every call (available now, arguments in range)
        before it sends any and raises for the first bad one: find each seat's own, so that only that
        seat's order is refused (no-op in its place), then step with the others' orders."""
        env, noop, seats = self._env, self._noop, self.agent_seats
        feats, last = getattr(env, "_features", None) or [], getattr(env, "_obs", None) or []
        for k, p in enumerate(seats):
            if calls[k] is noop or k >= len(feats) or k >= len(last) or last[k] is None:
                continue
            try:
                feats[k].transform_action(last[k].observation, calls[k])
            except ValueError as e:
                calls[k] = noop
                refused[p] = f"pysc2 refused the order: {e}"
        try:
            return env.step(calls)
        except ValueError as e:  # not checkable above: every seat's order gives way
            refused.update({p: f"pysc2 refused the order: {e}" for p in seats if p not in refused})
            calls = [noop] * len(calls)
        except Exception as e:
            self._crashed(e, "mid-match")
        try:
            return env.step(calls)
        except Exception as e:
            self._crashed(e, "mid-match")

    def _score(self, ts: list[Any]) -> None:
        seats = self.agent_seats
        rewards = [0.0] * len(self.players)
        for k, p in enumerate(seats):
            rewards[p] = float(ts[k].reward or 0.0)
        last = any(t.last() for t in ts)
        if not self.cfg.mini_game:
            # 1v1: pysc2's reward is the outcome at the end (+1 / -1 / 0); a bot's seat gets the other side
            if last:
                for b in range(len(self.players)):
                    if b not in seats:
                        rewards[b] = -rewards[1 - b]
                z = rewards
                # who won is the result's (its winner seat): the reason only says how a draw came about
                self.outcome_reason = "" if z[0] in (1.0, -1.0) else "a draw (a timeout or both sides gone)"
        self._step_rewards = rewards
        self._returns = [r + s for r, s in zip(self._returns, rewards)]
        if last:
            self._over = True
            self._save_replay()
            self._quit()

    def _save_replay(self) -> None:
        try:
            folder = tempfile.mkdtemp(prefix="arena-sc2-replay-")
            try:
                path = self._env.save_replay(folder, "match")
                self._attachments = {".SC2Replay": Path(path).read_bytes()}
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        except Exception:
            self._attachments = {}

    def attachments(self) -> dict[str, bytes]:
        """Files the match's result keeps beside its replay: the game's own ``.SC2Replay``."""
        return dict(self._attachments)

    def end_match(self) -> None:
        """The match loop's word that the match is over (a forfeit, a ``max_moves`` cut or the game's
        end): keep the game's replay and quit the game now, not at the next `reset`."""
        if self._env is not None:
            if not self._attachments:
                self._save_replay()
            self._quit()
        self._over = True

    # -- replays: checked, not re-simulated (`arena.envs.sc2.replays`) -------------------------------------
    #: The rules live in the game's process: `arena replay verify` checks what it can instead.
    resimulates = False

    def not_resimulated(self, replay: Any) -> str:
        from arena.envs.sc2.replays import not_resimulated

        return not_resimulated(replay)

    def check_replay(self, replay: Any) -> dict[str, list[str]]:
        from arena.envs.sc2.replays import check_replay

        return check_replay(self, replay)

    def watch_hint(self, replay: Any) -> list[str]:
        from arena.envs.sc2.replays import watch_hint

        return watch_hint(replay)

    # -- outcome and views -----------------------------------------------------------------------------
    def returns(self) -> list[float]:
        return list(self._returns)

    def step_rewards(self) -> list[float]:
        return list(self._step_rewards)

    def text(self, p: int) -> str:
        head = f"{self.game_id} step {self._t}" + (f"/{self.cfg.max_steps}" if self.cfg.max_steps else "")
        if p in [i for i, b in enumerate(self.bots) if b is not None]:
            return head + f", {self.players[p]} is the built-in AI ({', '.join(self.bots[p])})"
        v = self._view_of(p)
        if v is None:
            return head
        if not isinstance(v, RawView):
            return head + f", {int(v['type_mask'].sum())} action types available"
        ent, mask = v.arrays["entities"], v.arrays["entity_mask"].astype(bool)
        alliance = np.rint(ent[:, F_ALLIANCE] * SCALES["alliance"]).astype(int)
        counts = {name: int((mask & (alliance == a)).sum()) for name, a in (("own", SELF), ("enemy", ENEMY),
                                                                            ("other", NEUTRAL))}
        lines = [head + f", you are {self.players[p]}: {counts['own']} units, {counts['enemy']} enemy units in "
                        f"sight, {counts['other']} other"]
        for i in np.flatnonzero(mask)[:16]:
            e = ent[i]
            lines.append(f"  {i} type {int(round(e[0] * SCALES['unit_type']))} "
                         f"{['?', 'own', 'ally', 'neutral', 'enemy'][min(alliance[i], 4)]} "
                         f"({e[F_X] * self.raw_resolution:.0f}, {e[F_Y] * self.raw_resolution:.0f}) "
                         f"{e[2] * SCALES['health']:.0f}hp")
        return "\n".join(lines)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "map": self.cfg.map, "interface": self.cfg.interface}


def _kill(pids: set[int]) -> None:
    """SIGKILL each of `pids` and reap those that are this process's children (no zombie left)."""
    import signal

    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        try:
            os.waitpid(pid, 0)
        except OSError:
            pass


def _game_children() -> list[int]:
    """This process's child processes that are StarCraft II games: pysc2 starts them with ``-listen``
    and ``-dataDir`` (Linux's /proc; none elsewhere)."""
    me, out = os.getpid(), []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            if ppid != me:
                continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if b"-listen" in args and b"-dataDir" in args:
            out.append(int(name))
    return out


def _action_error(code: int) -> str:
    try:
        from arena.envs.sc2._pysc2 import pysc2

        pysc2()
        from s2clientprotocol import error_pb2

        return error_pb2.ActionResult.Name(code)
    except Exception:
        return str(code)


def _version(dist: str) -> str:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:
        return "not installed"


def sc2_core(game_id: str, map: str, **settings: Any) -> SC2Core:
    return SC2Core(game_id, map, **settings)


def sc2_env(game_id: str = "sc2/MoveToBeacon-v0", map: str = "MoveToBeacon", render_mode: str | None = None,
            invalid_move_limit: int | None = 1, **settings: Any):
    """The PettingZoo parallel env of a StarCraft II id (the registered entry point)."""
    from arena.envs.parallel import GameParallelEnv

    return GameParallelEnv(SC2Core(game_id, map, **settings), render_mode, invalid_move_limit)


#: What a user, a config or a replay may set (`arena.envs.registry.game_settings`).
sc2_env.game_settings = ("race", "step_mul", "interface", "screen", "minimap", "max_steps", "max_units",
                         "bot_difficulty", "bot_race", "bot_build", "functions", "queued", "invalid_move_limit")
