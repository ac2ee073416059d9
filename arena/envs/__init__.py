"""Games: registration (Gymnasium's registry), adapters and the `GameCore` view."""

from arena.envs.core import SIMULTANEOUS, TERMINAL, GameCore
from arena.envs.registry import (
    describe_games,
    ensure_registered,
    list_game_ids,
    load_plugin,
    make,
    make_core,
    register_game,
)

__all__ = [
    "GameCore",
    "SIMULTANEOUS",
    "TERMINAL",
    "describe_games",
    "ensure_registered",
    "list_game_ids",
    "load_plugin",
    "make",
    "make_core",
    "register_game",
]
