"""Game registration through Gymnasium's registry, and `make`.

Every game is a Gymnasium registry entry: an id ``namespace/Name-vN`` and an
entry point ``"module:attr"`` imported only when the game is made. Built-in
games live in the ``arena``, ``openspiel`` and ``textarena`` namespaces; any
pyspiel game name and any TextArena id is reachable through the id pattern
(``openspiel/<name>-v0``, ``textarena/<TextArena id>``) without registration.

Plug in a game by calling ``gymnasium.register`` in your own module and
loading it with ``--plugin your.module`` (`load_plugin`) or through the
``arena.envs`` entry-point group of an installed package. A plain PettingZoo
AEC or parallel env, or a Gymnasium env, is playable as it is.

Settings, not construction
--------------------------
The registry alone decides how a game is built: its entry point and the spec's kwargs. What a
user, a league config, a replay header or a web request may add are the game's *settings*
(`game_settings`): for an OpenSpiel game its parameters (``-k rows=5``) and ``params``; for a
TextArena game the keywords of its TextArena class; for the prosthetics task the names in its
``game_settings``; for a plug-in the keywords its entry point declares (a ``game_settings``
attribute: names, or a function of the spec's kwargs) or else those of its signature. Keys that
say how a game is built (`CONSTRUCTION_KEYS`: ``core``, ``env_class``, ``entry_point``, ...)
are never settings, and every value is plain JSON data, so a file can never name code to
import. `make` refuses anything else with one line (`NotASetting`).

Every setting has a range too (`setting_rules`), checked by the same `check_settings` before anything
is built, so a 1 KB replay header cannot make a game allocate gigabytes or run for hours: what a game's
entry point declares (``game_setting_ranges``: the skirmish's unit counts, map and steps, the
prosthetics task's step limit, frame skip and integrator accuracy), OpenSpiel's and TextArena's
parameters by what their names size (`parameter_rule`: board sides, players, card and dice counts,
turns), and ``invalid_move_limit`` everywhere. Out of range is one line naming the setting, its value
(shown bounded) and its range (`SettingOutOfRange`). A parameter naming a local file (OpenSpiel's
``filename``, TextArena's ``data_path``) is not a setting at all.
"""

from __future__ import annotations

import difflib
import importlib
import math
import warnings
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable

import gymnasium
from gymnasium.envs.registration import load_env_creator

from arena.envs.core import GameCore
from arena.errors import ArenaError, ConfigError, DuplicateGameId, GameNotFound, NotASetting, shown


class SettingOutOfRange(NotASetting):
    """A declared setting whose value is outside the range its game declares for it (`setting_rules`):
    refused by `check_settings` before anything is built (``red: 300000000m``, ``time_limit: 3e8``)."""


ARENA_NAMESPACES = ("arena", "openspiel", "textarena", "sc2")

#: OpenSpiel games registered up front (any other pyspiel name works on demand).
OPENSPIEL_GAMES = ["tic_tac_toe", "connect_four", "kuhn_poker", "leduc_poker", "liars_dice", "breakthrough", "hex"]

#: Curated text games of the self-play papers: arena id -> (TextArena id, note, extra kwargs of
#: `textarena_env`). The versions are described in `arena.envs.textarena_core`.
CURATED_TEXT_GAMES = {
    "arena/TicTacToe-v0": ("TicTacToe-v0-train", "TextArena TicTacToe, board and game messages", {}),
    "arena/KuhnPoker-v1": ("KuhnPoker-v0-short-train",
                           "Kuhn Poker, ante 1, 5 rounds (SPIRAL's setting: bets never enter the pot)", {}),
    "arena/KuhnPoker-v2": ("KuhnPoker-v0-short-train", "Kuhn Poker, ante 1, 5 rounds, real stakes",
                           {"env_class": "arena.envs.kuhn:KuhnPokerStakesEnv"}),
    "arena/SimpleNegotiation-v1": ("SimpleNegotiation-v0", "Simple Negotiation, 10 turns (SPIRAL's setting)", {}),
    "arena/SimpleNegotiation-v2": ("SimpleNegotiation-v0",
                                   "Simple Negotiation, 10 turns, current inventory, offer, messages and turns shown",
                                   {"core": "arena.envs.textarena_core:NegotiationCore"}),
}
TEXTARENA_GAMES = ["TicTacToe-v0", "KuhnPoker-v0", "SimpleNegotiation-v0"]

#: How results are rated (`game_scoring`): the ways, and what the registry says for text games whose
#: returns are more than a win or a loss (chips, the value of a trade). OpenSpiel games say it
#: themselves (`OpenSpielCore.scoring`, from their utilities); plug-ins at registration (`register_game`).
SCORINGS = ("win", "payoff")
_declared_scoring: dict[str, str] = {
    "arena/KuhnPoker-v1": "payoff", "arena/KuhnPoker-v2": "payoff", "textarena/KuhnPoker-v0": "payoff",
    "arena/SimpleNegotiation-v1": "payoff", "arena/SimpleNegotiation-v2": "payoff",
    "textarena/SimpleNegotiation-v0": "payoff",
}

#: The OpenSim prosthetics task (`arena.envs.prosthetics`), Gymnasium envs that need the opensim extra.
PROSTHETICS_GAMES = {
    "arena/Prosthetics-v0": ({"round": 1}, "AI for Prosthetics round 1: walk at 3 m/s (OpenSim, needs arena[opensim])"),
    "arena/ProstheticsRound2-v0": ({"round": 2}, "AI for Prosthetics round 2: follow a changing target velocity "
                                                 "(OpenSim, needs arena[opensim])"),
}

#: The arena's own micro battle game (`arena.envs.skirmish`): id -> (registration kwargs, note).
SKIRMISH_GAMES = {
    "arena/Skirmish-3m-v0": ({"red": "3m", "blue": "3m", "max_steps": 60},
                             "3 marines a side on an open map, simultaneous compound orders (docs/skirmish.md)"),
    "arena/Skirmish-5m_vs_6m-v0": ({"red": "5m", "blue": "6m", "max_steps": 70},
                                   "5 marines against 6: red must out-play a larger side (docs/skirmish.md)"),
    "arena/Skirmish-2s3z-v0": ({"red": "2s3z", "blue": "2s3z", "max_steps": 120},
                               "2 stalkers and 3 zealots a side: ranged and melee (docs/skirmish.md)"),
}

#: StarCraft II (`arena.envs.sc2.game`, the sc2 extra and the game itself): the mini-games (one player)
#: and the 1v1 maps pysc2 knows, each ``sc2/<map>-v0``.
SC2_NOTES = {
    "MoveToBeacon": "a marine to a beacon", "CollectMineralShards": "two marines collect shards",
    "FindAndDefeatZerglings": "marines hunt zerglings", "DefeatRoaches": "marines against roaches",
    "DefeatZerglingsAndBanelings": "marines against zerglings, banelings",
    "CollectMineralsAndGas": "an economy", "BuildMarines": "an economy making marines",
}


def sc2_games() -> dict[str, tuple[dict, str]]:
    from arena.envs.sc2.game import LADDER_MAPS, MINI_GAMES

    games = {f"sc2/{m}-v0": ({"map": m}, f"StarCraft II mini-game: {SC2_NOTES[m]} (needs the game, docs/sc2.md)")
             for m in MINI_GAMES}
    for m in LADDER_MAPS:
        games[f"sc2/{m}-v0"] = ({"map": m}, "StarCraft II 1v1 (needs the game, docs/sc2.md)")
    return games


_registered = False
_plugin_ids: list[str] = []
#: Game id -> where its plug-in came from: {"plugin": module} for `load_plugin`, or
#: {"plugin_package": distribution} for the entry-point group (recorded in replay headers).
_plugin_origin: dict[str, dict[str, str]] = {}


# -- env factories (the registered entry points) ----------------------------------------
def openspiel_env(game: str, params: dict | None = None, game_id: str | None = None, render_mode=None,
                  invalid_move_limit: int | None = 1, **game_params: Any):
    """`game_params`: OpenSpiel parameters of `game` given one by one (``rows=5``), merged into `params`."""
    from arena.envs.aec import GameAECEnv
    from arena.envs.openspiel_core import OpenSpielCore

    if game_params:
        params = {**(params or {}), **game_params}
    return GameAECEnv(OpenSpielCore(game, params, game_id), render_mode, invalid_move_limit)


_openspiel_types: dict[str, Any] = {}


def _openspiel_type(spec_kwargs: dict):
    """The registered game type of the spec's OpenSpiel game (read without loading the game), or None."""
    import pyspiel

    if not _openspiel_types:
        _openspiel_types.update({t.short_name: t for t in pyspiel.registered_games()})
    return _openspiel_types.get(spec_kwargs.get("game"))


def _openspiel_parameters(spec_kwargs: dict) -> dict[str, Any]:
    """The OpenSpiel game's parameters and their defaults (which say each one's type)."""
    t = _openspiel_type(spec_kwargs)
    return {} if t is None else dict(t.parameter_specification)


def _openspiel_settings(spec_kwargs: dict) -> set[str]:
    names = {"params", "invalid_move_limit"}
    return names | {k for k in _openspiel_parameters(spec_kwargs) if not _names_a_file(k)}


def _openspiel_ranges(spec_kwargs: dict) -> dict[str, Any]:
    """A range for each parameter of the OpenSpiel game (`parameter_rule`), and the same for the
    parameters given through ``params``."""
    t = _openspiel_type(spec_kwargs)
    if t is None:
        return {}
    rules = {k: parameter_rule(k, v) for k, v in t.parameter_specification.items() if not _names_a_file(k)}
    for k in ("players", "num_players"):
        if k in rules:  # what the game itself supports (a default of 0 or -1: the game's own choice)
            default = t.parameter_specification[k]
            lo = min(t.min_num_players, default if _is_int(default) else 1)
            rules[k] = int_range(lo, max(t.max_num_players, 1))
    rules.update(OPENSPIEL_RANGES.get(spec_kwargs.get("game"), {}))
    return {**rules, "params": dict(rules)}


def textarena_env(env_id: str, game_id: str | None = None, render_mode=None, invalid_move_limit: int | None = 1,
                  core: str | None = None, **env_kwargs: Any):
    """`core` (``"module:attr"``): a `TextArenaCore` subclass to play the game through."""
    from arena.envs.aec import GameAECEnv
    from arena.envs.textarena_core import TextArenaCore

    cls = TextArenaCore if core is None else load_env_creator(core)
    return GameAECEnv(cls(env_id, game_id, **env_kwargs), render_mode, invalid_move_limit)


def _textarena_settings(spec_kwargs: dict) -> set[str]:
    """``invalid_move_limit`` and the keywords of the TextArena class the id plays (its own, or the
    spec's ``env_class``): what `textarena.make` passes on to it."""
    from textarena.envs.registration import ENV_REGISTRY

    names = {"invalid_move_limit"}
    cls_ref = spec_kwargs.get("env_class")
    if cls_ref is None:
        ta = ENV_REGISTRY.get(spec_kwargs.get("env_id"))
        cls_ref = getattr(ta, "entry_point", None)
    try:
        cls = load_env_creator(cls_ref) if isinstance(cls_ref, str) else cls_ref
    except Exception:
        cls = None
    if cls is not None:
        names |= {k for k in _keywords(cls) or set() if not _names_a_file(k)}
    return names


def _textarena_ranges(spec_kwargs: dict) -> dict[str, Any]:
    """A range for each keyword of the TextArena class (`parameter_rule`, by its name and default)."""
    import inspect

    from textarena.envs.registration import ENV_REGISTRY

    cls_ref = spec_kwargs.get("env_class")
    if cls_ref is None:
        cls_ref = getattr(ENV_REGISTRY.get(spec_kwargs.get("env_id")), "entry_point", None)
    try:
        cls = load_env_creator(cls_ref) if isinstance(cls_ref, str) else cls_ref
        params = inspect.signature(cls.__init__).parameters.values()
    except Exception:
        return {}
    return {p.name: parameter_rule(p.name, None if p.default is p.empty else p.default) for p in params
            if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


openspiel_env.game_settings = _openspiel_settings
textarena_env.game_settings = _textarena_settings
openspiel_env.game_setting_ranges = _openspiel_ranges
textarena_env.game_setting_ranges = _textarena_ranges

#: Keys that say how a game is built, not how it is played: only a registration sets them, never
#: a replay, a config, a command-line setting or a web request.
CONSTRUCTION_KEYS = frozenset({"core", "env_class", "entry_point", "env_id", "game", "game_id", "model_file",
                               "module", "cls", "class", "factory", "creator", "plugin", "plugin_package",
                               "additional_wrappers", "vector_entry_point", "disable_env_checker"})
#: Viewing options every game takes (no rule depends on them).
VIEW_KEYS = frozenset({"render_mode"})
#: Settings `gymnasium.make` itself takes for a Gymnasium env.
_GYM_MAKE_KEYS = frozenset({"max_episode_steps"})
#: Nesting and size bounds of a setting's value (plain JSON data).
_MAX_SETTING_DEPTH, _MAX_SETTING_ITEMS, _MAX_SETTING_TEXT = 8, 10_000, 100_000


# -- setting ranges ---------------------------------------------------------------------------------
#: A setting's range: (what a value must be, in words; whether a value is in it). Checked by
#: `check_settings` before anything is built, for a replay header, ``-k KEY=VALUE``, a league config
#: and a web request alike. A mapping of rules instead of a rule: the value is a mapping whose items
#: are checked by them (OpenSpiel's ``params``).
SettingRule = tuple[str, Callable[[Any], bool]]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def int_range(lo: int, hi: int, *, none: bool = False) -> SettingRule:
    """A whole number in ``[lo, hi]`` (bools are not numbers); ``none``: or null."""
    what = f"a whole number in [{lo:,}, {hi:,}]" + (" or null" if none else "")
    return what, lambda v: (none and v is None) or (_is_int(v) and lo <= v <= hi)


def number_range(lo: float, hi: float, *, none: bool = False) -> SettingRule:
    """A finite number in ``[lo, hi]``; ``none``: or null."""
    what = f"a number in [{lo:g}, {hi:g}]" + (" or null" if none else "")
    return what, lambda v: (none and v is None) or (_is_number(v) and lo <= v <= hi)


def text_rule(max_chars: int) -> SettingRule:
    return f"a text of at most {max_chars:,} characters", lambda v: isinstance(v, str) and len(v) <= max_chars


def ints_rule(lo: int, hi: int, max_items: int = 8) -> SettingRule:
    """A whole number in ``[lo, hi]``, or a list of at most `max_items` of them (a room's dimensions)."""
    one = int_range(lo, hi)[1]
    return (f"a whole number in [{lo:,}, {hi:,}] or a list of up to {max_items} of them",
            lambda v: one(v) or (isinstance(v, (list, tuple)) and len(v) <= max_items and all(one(x) for x in v)))


def _any_value(v: Any) -> bool:
    return True


#: Settings every game may take, with their ranges: ``invalid_move_limit`` (retries before a forfeit;
#: null: never forfeit), and for a Gymnasium env the steps `gymnasium.make` cuts an episode at.
MAX_INVALID_MOVES = 1_000
MAX_EPISODE_STEPS = 1_000_000
COMMON_RULES: dict[str, SettingRule] = {
    "invalid_move_limit": int_range(0, MAX_INVALID_MOVES, none=True),
    "max_episode_steps": int_range(1, MAX_EPISODE_STEPS, none=True),
    "render_mode": ("null or the name of a render mode (a text of at most 40 characters)",
                    lambda v: v is None or (isinstance(v, str) and len(v) <= 40)),
}

#: Game parameters (OpenSpiel's, TextArena's keywords) by what their name says they size, each with
#: its range: a board side (memory grows with its square: a 100 x 100 board is 10,000 cells), the
#: board's number of dimensions (gomoku's ``dims``: cells grow as side ** dims), players, the counts
#: of cards, dice, items and symbols a game's tensors and action lists grow with, and the lengths of a
#: game in turns, rounds or steps (time, not memory, but a replay must not be able to make a
#: re-simulation last for hours). Any other whole number is within +-1,000,000, any other number
#: finite and within +-1e9, any text at most 1,000 characters.
MAX_BOARD_SIDE, MAX_BOARD_DIMS, MAX_PLAYERS, MAX_COUNT, MAX_GAME_LENGTH = 100, 3, 16, 100, 10_000
_BOARD_NAMES = frozenset({"rows", "columns", "cols", "num_rows", "num_cols", "num_columns", "board_size",
                          "board_height", "board_width", "height", "width", "grid_size", "size", "n", "m", "k", "N", "x_in_row",
                          "connect", "dim_room", "sense_size", "obs_front", "obs_back", "obs_side"})
_PLAYER_NAMES = frozenset({"players", "num_players", "numPlayers", "default_num_players", "jury_size", "imposters"})
_SEED_NAMES = frozenset({"seed", "rng_seed"})
_COUNT_WORDS = ("card", "dice", "die", "rank", "suit", "item", "symbol", "color", "colour", "coin", "field", "state",
                "message", "action", "chance", "house", "seed", "disk", "box", "apple", "cup", "hole", "mine",
                "letter", "word", "number", "guess", "unit", "shot", "token", "clue", "hand", "pile",
                "sides", "outcomes", "length", "utterance", "wall", "redeal", "trick", "instance")
_LENGTH_WORDS = ("turn", "round", "step", "horizon", "moves", "game_length", "episode_length", "depth", "allowance",
                 "repetition", "no_progress", "num_hands", "time_step")
MAX_INT_PARAMETER, MAX_NUMBER_PARAMETER, MAX_TEXT_PARAMETER = 1_000_000, 1e9, 1_000


def parameter_rule(name: str, default: Any = None) -> SettingRule:
    """The range of a game parameter named `name` whose default is `default` (its type, where the game
    says it): see the table above (`_BOARD_NAMES`, ...)."""
    low = name.lower()
    if isinstance(default, bool):
        return "true or false", lambda v: isinstance(v, bool)
    if isinstance(default, str):
        return text_rule(MAX_TEXT_PARAMETER)
    if isinstance(default, dict):  # a nested game's parameters (OpenSpiel's game transforms): plain data
        return "a mapping of parameters", lambda v: isinstance(v, dict)
    if isinstance(default, float):
        return number_range(-MAX_NUMBER_PARAMETER, MAX_NUMBER_PARAMETER)
    if isinstance(default, (list, tuple)):
        return ints_rule(1, MAX_BOARD_SIDE) if name in _BOARD_NAMES else ("plain data", _any_value)
    if not (default is None or _is_int(default)):
        return "plain data", _any_value
    if name in _BOARD_NAMES:
        rule = int_range(1, MAX_BOARD_SIDE)
        return rule if default is not None else _or_not_a_number(rule)
    if low == "dims":
        return int_range(1, MAX_BOARD_DIMS)
    lo = min(default, 0) if default is not None else 0  # -1 is "the game's default" in some OpenSpiel games
    if name in _PLAYER_NAMES:
        rule = int_range(min(lo, 1), MAX_PLAYERS)
    elif name in _SEED_NAMES:
        rule = int_range(-(2 ** 31), 2 ** 31 - 1)
    elif "tile" in low:  # a tile's value (2048's target 16,384): no size
        rule = int_range(-MAX_INT_PARAMETER, MAX_INT_PARAMETER)
    elif low.startswith("max_") or any(w in low for w in _LENGTH_WORDS):
        rule = int_range(lo, MAX_GAME_LENGTH)
    elif low.startswith("num") or low.endswith("_count") or any(w in low for w in _COUNT_WORDS):
        rule = int_range(lo, MAX_COUNT)
    else:
        rule = int_range(-MAX_INT_PARAMETER, MAX_INT_PARAMETER)
    return rule if default is not None else _or_not_a_number(rule)


def _or_not_a_number(rule: SettingRule) -> SettingRule:
    """`rule` for a parameter whose type the game does not say (a default of None): a whole number in
    its range, a finite number within +-1e9, a text of at most 1,000 characters, or other plain data."""
    what, ok = rule

    def check(v: Any) -> bool:
        if _is_int(v):
            return ok(v)
        if isinstance(v, float):
            return math.isfinite(v) and abs(v) <= MAX_NUMBER_PARAMETER
        if isinstance(v, str):
            return len(v) <= MAX_TEXT_PARAMETER
        return True
    return f"{what} (or a text, a list, true or false)", check


#: OpenSpiel parameters whose product, not each alone, sizes the game: Blotto lists every way of
#: spreading its coins over its fields at load (100 coins on 100 fields does not fit in memory).
OPENSPIEL_RANGES: dict[str, dict[str, Any]] = {
    "blotto": {"coins": int_range(1, 30), "fields": int_range(1, 5)},
}


def _names_a_file(name: str) -> bool:
    """A parameter that names a local file or folder (OpenSpiel's ``filename``, TextArena's ``data_path``):
    like ``model_file``, a path is the person's to give (in the registration), never a setting a replay or
    a config may set."""
    low = name.lower()
    return low in ("filename", "jury_class") or low.endswith(("_file", "_path", "_root", "filename"))


def _keywords(fn: Any) -> set[str] | None:
    """The keyword parameters of a class's ``__init__`` or a function; None where it takes ``**kwargs``
    (a PettingZoo ``env(**kwargs)`` is followed to its module's ``raw_env``)."""
    import inspect
    import sys

    target = fn.__init__ if isinstance(fn, type) else fn
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return None
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}
    if any(p.kind == p.VAR_KEYWORD for p in params):
        raw = getattr(sys.modules.get(getattr(fn, "__module__", "") or ""), "raw_env", None)
        if raw is not None and raw is not fn and getattr(fn, "__name__", "") in ("env", "parallel_env"):
            return _keywords(raw)
        return None
    return names


_settings_cache: dict[str, tuple[Any, frozenset[str] | None]] = {}


def game_settings(game_id: str) -> frozenset[str] | None:
    """The settings `game_id` declares (module docstring): the kwargs that anyone but its registration
    may give. None: a plug-in whose entry point takes any keyword (``**kwargs`` it does not name); then
    every key but the `CONSTRUCTION_KEYS` is a setting."""
    def declared_settings(spec: Any, creator: Any) -> frozenset[str] | None:
        declared = getattr(creator, "game_settings", None)
        if declared is not None:
            names = set(declared(dict(spec.kwargs)) if callable(declared) else declared)
        else:
            names = _keywords(creator)
            if names is not None and isinstance(creator, type) and issubclass(creator, gymnasium.Env):
                names |= _GYM_MAKE_KEYS
        return None if names is None else frozenset((names | VIEW_KEYS) - CONSTRUCTION_KEYS)

    return _per_registration(_settings_cache, game_id, declared_settings)


def _per_registration(cache: dict[str, tuple[Any, Any]], game_id: str, make: Callable[[Any, Any], Any]) -> Any:
    """``make(spec, entry point)`` for the game's registration as it is now, worked out once per
    registration (a plug-in that registers the id again gets it worked out again)."""
    spec = _spec(game_id)
    hit = cache.get(game_id)
    if hit is not None and hit[0] is spec:
        return hit[1]
    ep = spec.entry_point
    out = make(spec, load_env_creator(ep) if isinstance(ep, str) else ep)
    cache[game_id] = (spec, out)
    return out


_rules_cache: dict[str, tuple[Any, dict[str, Any]]] = {}


def setting_rules(game_id: str) -> dict[str, Any]:
    """The range of each setting of `game_id` (a `SettingRule`, or a mapping of them for a mapping
    setting): `COMMON_RULES`, then what the entry point declares (a ``game_setting_ranges`` attribute: a
    mapping of setting name -> rule, or a function of the spec's kwargs giving one; OpenSpiel's and
    TextArena's are worked out from their parameters' names and defaults, `parameter_rule`). A setting
    with no rule is still plain data of bounded size, and a number must be finite."""
    def declared_ranges(spec: Any, creator: Any) -> dict[str, Any]:
        declared = getattr(creator, "game_setting_ranges", None)
        if callable(declared):
            declared = declared(dict(spec.kwargs))
        return {**COMMON_RULES, **dict(declared or {})}

    return _per_registration(_rules_cache, game_id, declared_ranges)


def _out_of_range(rule: Any, value: Any, path: str) -> tuple[str, Any, str] | None:
    """(the setting's name, its value, what it must be) where `value` is outside `rule`; else None."""
    if isinstance(rule, dict):
        if not isinstance(value, dict):
            return path, value, "a mapping of parameters"
        for k, v in value.items():
            why = _out_of_range(rule.get(k), v, f"{path}.{k}")
            if why:
                return why
        return None
    if rule is None:
        if isinstance(value, float) and not math.isfinite(value):
            return path, value, "a finite number"
        return None
    what, ok = rule
    return None if ok(value) else (path, value, what)


def check_settings(game_id: str, kwargs: dict | None) -> None:
    """Nothing if every key of `kwargs` is a setting `game_id` declares, every value is plain JSON data
    of bounded size and within the setting's range (`setting_rules`); else `NotASetting` naming the first
    key that is not (see `game_settings`), or `SettingOutOfRange` naming the setting, its value (shown
    bounded) and its range. Nothing of the game is built before this check."""
    if not kwargs:
        return
    allowed = game_settings(game_id)
    for key, value in kwargs.items():
        if not isinstance(key, str) or key in CONSTRUCTION_KEYS or (allowed is not None and key not in allowed):
            names = ", ".join(sorted(allowed)) if allowed is not None else "any key but " + ", ".join(
                sorted(CONSTRUCTION_KEYS))
            raise NotASetting(key, game_id, f"{game_id} has no setting {shown(key, 80)} (its settings: {names})",
                              f"its settings: {names}")
        why = _not_data(value)
        if why:
            raise NotASetting(key, game_id, f"{game_id}: the value of setting {key!r} {why}", f"its value {why}")
    rules = setting_rules(game_id)
    for key, value in kwargs.items():
        bad = _out_of_range(rules.get(key), value, key)
        if bad:
            name, v, what = bad
            detail = f"{name} must be {what}, got {shown(v, 60)}"
            raise SettingOutOfRange(key, game_id, f"{game_id}: {detail}", detail)


def _not_data(value: Any, depth: int = 0, budget: list | None = None) -> str | None:
    """Why `value` is not a plain JSON value of bounded size (None: it is)."""
    budget = [0] if budget is None else budget
    budget[0] += 1
    if budget[0] > _MAX_SETTING_ITEMS or depth > _MAX_SETTING_DEPTH:
        return f"is larger than a setting may be (at most {_MAX_SETTING_ITEMS} items, {_MAX_SETTING_DEPTH} deep)"
    if value is None or isinstance(value, (bool, int, float)):
        return None
    if isinstance(value, str):
        return None if len(value) <= _MAX_SETTING_TEXT else f"is a text of {len(value)} characters (at most " \
            f"{_MAX_SETTING_TEXT})"
    if isinstance(value, (list, tuple)):
        return next((w for w in (_not_data(v, depth + 1, budget) for v in value) if w), None)
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            return "has a key that is not a text"
        return next((w for w in (_not_data(v, depth + 1, budget) for v in value.values()) if w), None)
    return f"is a {type(value).__name__}, not plain data (a number, a text, a list or a mapping)"


# -- registration ---------------------------------------------------------------------
def register_game(id: str, entry_point: str, kwargs: dict | None = None, *, scoring: str | None = None,
                  **spec_kwargs: Any) -> None:
    """`gymnasium.register`, except that an id registered twice is an error, not a warning. `scoring`:
    how the game's results are rated, ``"win"`` (win / draw / loss, the default) or ``"payoff"`` (the
    returns themselves: chips, points, any general-sum game); see `game_scoring`."""
    if id in gymnasium.envs.registry:
        raise DuplicateGameId(f"game id {id!r} is already registered (bump its -vN to register a changed game)")
    if scoring is not None and scoring not in SCORINGS:
        raise ConfigError(f"{id}: scoring {shown(scoring, 40)} is not one of {', '.join(SCORINGS)}")
    gymnasium.register(id=id, entry_point=entry_point, kwargs=kwargs or {}, **spec_kwargs)
    if scoring is not None:
        _declared_scoring[id] = scoring


def game_scoring(game_id: str, core: GameCore | None = None) -> str:
    """How `game_id`'s results are rated: ``"return"`` for a one-player game (its mean return on common
    seeds), else what its registration says, else what its core says (`GameCore.scoring`), else
    ``"win"``. `core`: the game's core if one is at hand (else one is made)."""
    if game_id in _declared_scoring and (core is None or len(core.players) > 1):
        return _declared_scoring[game_id]
    made = core is None
    core = make_core(game_id) if made else core
    try:
        if len(core.players) < 2:
            return "return"
        return _declared_scoring.get(game_id) or core.scoring or "win"
    finally:
        if made:
            core.close()


def _register_openspiel(name: str) -> str:
    gid = f"openspiel/{name}-v0"
    if gid not in gymnasium.envs.registry:
        register_game(gid, "arena.envs.registry:openspiel_env", {"game": name, "game_id": gid})
    return gid


def _register_textarena(ta_id: str, gid: str | None = None, extra: dict | None = None) -> str:
    gid = gid or f"textarena/{ta_id}"
    if gid not in gymnasium.envs.registry:
        register_game(gid, "arena.envs.registry:textarena_env", {"env_id": ta_id, "game_id": gid, **(extra or {})})
    return gid


def ensure_registered() -> None:
    """Register the built-in games and installed plug-ins once per process."""
    global _registered
    if _registered:
        return
    _registered = True
    for name in OPENSPIEL_GAMES:
        _register_openspiel(name)
    for ta_id in TEXTARENA_GAMES:
        _register_textarena(ta_id)
    for gid, (ta_id, _note, extra) in CURATED_TEXT_GAMES.items():
        _register_textarena(ta_id, gid, extra)
    for gid, (kwargs, _note) in PROSTHETICS_GAMES.items():
        if gid not in gymnasium.envs.registry:
            register_game(gid, "arena.envs.prosthetics:ProstheticsEnv", kwargs)
    for gid, (kwargs, _note) in SKIRMISH_GAMES.items():
        if gid not in gymnasium.envs.registry:
            register_game(gid, "arena.envs.skirmish:skirmish_env", {"game_id": gid, **kwargs})
    for gid, (kwargs, _note) in sc2_games().items():
        if gid not in gymnasium.envs.registry:
            register_game(gid, "arena.envs.sc2.game:sc2_env", {"game_id": gid, **kwargs})
    load_entry_point_plugins()


def load_entry_point_plugins(group: str = "arena.envs") -> list[str]:
    """Load the games that installed packages register through an entry-point group."""
    before = len(_plugin_ids)
    for ep in entry_points(group=group):
        dist = getattr(getattr(ep, "dist", None), "name", None)
        _load_with_duplicate_check(ep.name, ep.load, {"plugin_package": dist or ep.module})
    return _plugin_ids[before:]


def _load_with_duplicate_check(name: str, loader, origin: dict[str, str] | None = None) -> None:
    registry = gymnasium.envs.registry
    snapshot = dict(registry)
    before = set(registry)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        obj = loader()
        if callable(obj) and not isinstance(obj, type) and getattr(obj, "__module__", None) != "builtins":
            # an entry point may name a register() function rather than a module
            if not hasattr(obj, "__path__") and not hasattr(obj, "__file__"):
                obj()
    for w in caught:
        msg = str(w.message)
        if "Overriding environment" in msg:
            # Put the registry back as it was: the plug-in's ids are refused whole.
            registry.clear()
            registry.update(snapshot)
            raise DuplicateGameId(f"plug-in {name!r} registers a game id that already exists: {msg.strip()}")
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    added = sorted(set(registry) - before)
    _plugin_ids.extend(added)
    for gid in added:
        _plugin_origin[gid] = dict(origin or {"plugin": name})


def load_plugin(module: str, folder: str | None = None) -> list[str]:
    """Import a module that calls `gymnasium.register` (the installed one, else the one in `folder`,
    default the working folder: `arena.usercode`); returns the ids it added."""
    from arena.usercode import import_user_module

    ensure_registered()
    before = len(_plugin_ids)
    try:
        _load_with_duplicate_check(module, lambda: import_user_module(module, folder), {"plugin": module})
    except ModuleNotFoundError as e:
        raise GameNotFound(f"plug-in module {module!r} could not be imported: {e}") from e
    return _plugin_ids[before:]


def load_plugins(items: list[str] | None) -> list[str]:
    """Import each plug-in (`--plugin`: a module name or a path to a .py file) and return their module
    names. A module name is an installed module, else the module of that name in the working folder; a
    file path loads that file. Only the named module is taken from a folder (`arena.usercode`): the
    working folder is never put on the import path. Worker processes find the same modules."""
    import os

    names = []
    for item in items or []:
        path = Path(item)
        if item.endswith(".py") or os.sep in item:
            if not path.is_file():
                raise ArenaError(f"--plugin {item}: no such file")
            folder, name = str(path.resolve().parent), path.stem
        else:
            folder, name = None, item
        load_plugin(name, folder)
        names.append(name)
    return names


def loaded_plugins() -> list[str]:
    """The modules `load_plugin` imported in this process (what a worker process imports too)."""
    return sorted({o["plugin"] for o in _plugin_origin.values() if "plugin" in o})


def _spec(game_id: str):
    ensure_registered()
    reg = gymnasium.envs.registry
    if game_id in reg:
        return reg[game_id]
    ns, _, rest = game_id.partition("/")
    if ns == "openspiel" and rest.endswith("-v0"):
        import pyspiel

        name = rest[: -len("-v0")]
        if name in pyspiel.registered_names():
            return reg[_register_openspiel(name)]
    if ns == "textarena" and rest:
        from textarena.envs.registration import ENV_REGISTRY

        if rest in ENV_REGISTRY:
            return reg[_register_textarena(rest)]
    known = list_game_ids(include_all=True)
    close = difflib.get_close_matches(game_id, known, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else " Run `arena envs list` to see the games."
    raise GameNotFound(f"unknown game id {game_id!r}.{hint}")


def game_origin(game_id: str) -> dict[str, str]:
    """Where a registered game comes from, for replay headers.

    ``entry_point``: the Gymnasium spec's entry point (``"module:attr"``); ``plugin``: the module
    `load_plugin` imported to register it (``--plugin MODULE``), or ``plugin_package``: the
    installed distribution that registered it through the ``arena.envs`` entry points. Games
    not in the registry (an env object passed directly) give ``{}``.
    """
    spec = gymnasium.envs.registry.get(game_id)
    if spec is None:
        return {}
    ep = spec.entry_point
    if not isinstance(ep, str):
        ep = f"{getattr(ep, '__module__', '?')}:{getattr(ep, '__qualname__', type(ep).__name__)}"
    return {"entry_point": ep, **_plugin_origin.get(game_id, {})}


def is_registered(game_id: str) -> bool:
    """Whether `make` knows `game_id` now (registered, or an OpenSpiel/TextArena id); imports no plug-in."""
    try:
        _spec(game_id)
    except GameNotFound:
        return False
    return True


def make(game_id: str, **kwargs: Any):
    """Make a registered game: a PettingZoo env for multi-agent games, a Gymnasium env otherwise."""
    spec = _spec(game_id)
    check_settings(game_id, kwargs)
    ep = spec.entry_point
    creator = load_env_creator(ep) if isinstance(ep, str) else ep
    try:
        if isinstance(creator, type) and issubclass(creator, gymnasium.Env):
            return gymnasium.make(game_id, **kwargs)
        return creator(**{**spec.kwargs, **kwargs})
    except (TypeError, ValueError) as e:
        if not kwargs:
            raise
        # a setting the game does not take, or a value it refuses: the user's, so one line naming it
        msg = str(e).split("\n")[0]
        raise ConfigError(f"{game_id} refuses the settings {kwargs}: {msg}") from None


#: `first_mover`'s answers, by game id and settings (a game's rules do not change within a process).
_FIRST_MOVERS: dict[tuple[str, str], int | None] = {}


def first_mover(game_id: str, settings: dict | None = None, seeds: tuple[int, ...] = (0, 1, 2, 3)) -> int | None:
    """The seat that moves first in `game_id`, from its own rules: the seat to move once a match starts,
    the same on each of `seeds`. None where the seats move at once (`SIMULTANEOUS`) or the first mover
    changes from match to match. (TextArena's Kuhn poker, ``arena/KuhnPoker-v1``, opens with seat 1;
    OpenSpiel's with seat 0: no seat number says "first" for every game.)"""
    import json

    key = (game_id, json.dumps(settings or {}, sort_keys=True, default=str))
    if key not in _FIRST_MOVERS:
        core = make_core(game_id, **(settings or {}))
        seen = set()
        try:
            for seed in seeds:
                core.reset(seed)
                seen.add(core.current_player())
        finally:
            core.close()
        seat = seen.pop() if len(seen) == 1 else None
        _FIRST_MOVERS[key] = seat if isinstance(seat, int) and seat >= 0 else None
    return _FIRST_MOVERS[key]


def make_core(game: Any, **kwargs: Any) -> GameCore:
    """The `GameCore` of a game given by id, by env object, or already a core."""
    if isinstance(game, GameCore):
        return game
    game_id = game if isinstance(game, str) else getattr(getattr(game, "spec", None), "id", None) or type(game).__name__
    env = make(game, **kwargs) if isinstance(game, str) else game
    core = getattr(env, "core", None)
    if isinstance(core, GameCore):
        return core
    return core_for_env(env, game_id, kwargs)


def core_for_env(env: Any, game_id: str, settings: dict | None = None) -> GameCore:
    from pettingzoo import AECEnv, ParallelEnv

    from arena.envs.farama import AECCore, GymCore, ParallelCore

    if isinstance(env, AECEnv):
        return AECCore(env, game_id, settings)
    if isinstance(env, ParallelEnv):
        return ParallelCore(env, game_id, settings)
    if isinstance(env, gymnasium.Env):
        return GymCore(env, game_id, settings)
    raise TypeError(f"{game_id}: {type(env).__name__} is neither a PettingZoo (AEC or parallel) nor a Gymnasium env")


def list_game_ids(include_all: bool = False) -> list[str]:
    ensure_registered()
    ids = []
    for gid in gymnasium.envs.registry:
        if include_all or gid.split("/")[0] in ARENA_NAMESPACES or gid in _plugin_ids:
            ids.append(gid)
    return sorted(ids)


def describe_games(include_all: bool = False) -> list[dict[str, Any]]:
    """One row per game: id, players, action kind, source (makes each game once)."""
    rows = []
    for gid in list_game_ids(include_all):
        try:
            core = make_core(gid)
            row = core.describe()
            row["id"] = gid
            core.close()
        except Exception as e:  # a broken plug-in must not hide the others
            row = {"id": gid, "players": "?", "action": "?", "source": "?", "error": f"{type(e).__name__}: {e}"}
        note = CURATED_TEXT_GAMES[gid][1] if gid in CURATED_TEXT_GAMES else \
            {**PROSTHETICS_GAMES, **SKIRMISH_GAMES, **sc2_games()}.get(gid, (None, None))[1]
        if note:
            row["note"] = note
        rows.append(row)
    return rows
