"""Where StarCraft II is installed, and the one-line errors of a game that is missing or stops.

pysc2 looks for the game at ``$SC2PATH`` (default ``~/StarCraftII``): ``Versions/BaseNNNNN/SC2_x64``
and the maps under ``Maps``. It reports a missing game or map late or obscurely (a map is looked for
after the game has started), so the adapter checks first (`check_install`).
"""

from __future__ import annotations

import os
from pathlib import Path

from arena.errors import ArenaError


class SC2NotFound(ArenaError):
    """No StarCraft II installation where pysc2 looks."""


class SC2MapMissing(ArenaError):
    """The map file is not under ``$SC2PATH/Maps``."""


class SC2GameCrashed(ArenaError):
    """The game process stopped or stopped answering mid-match."""


def sc2_path() -> Path:
    return Path(os.environ.get("SC2PATH") or Path.home() / "StarCraftII").expanduser()


def check_install(map_path: str | None = None) -> Path:
    """``$SC2PATH`` if it holds a game (and `map_path`, relative to its ``Maps``), else a one-line error."""
    root = sc2_path()
    versions = root / "Versions"
    builds = sorted(versions.glob("Base*/SC2_x64")) if versions.is_dir() else []
    if not builds:
        raise SC2NotFound(f"no StarCraft II game at {root} (no Versions/Base*/SC2_x64): install Blizzard's Linux "
                          "package and set SC2PATH (README, section 'StarCraft II'; docs/sc2.md)")
    if map_path is not None and not (root / "Maps" / map_path).is_file():
        raise SC2MapMissing(f"map {map_path} is not in {root / 'Maps'}: unzip the map packs (mini_games.zip, the "
                            f"ladder packs) into $SC2PATH/Maps (docs/sc2.md)")
    return root


def lay_out_stand_in(root: str | os.PathLike) -> Path:
    """Lay out the stand-in game (`arena.envs.sc2.stand_in`) at `root`, a new or empty folder, as a
    StarCraft II install (``Versions/Base75689/SC2_x64`` and the maps); one line where it cannot."""
    root = Path(root).expanduser()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        what = "a StarCraft II install" if (root / "Versions").is_dir() else "something"
        raise ArenaError(f"{root} holds {what} already: give a new or empty folder for the stand-in game")
    try:
        from arena.envs.sc2 import stand_in
    except ImportError:
        raise ArenaError('the stand-in StarCraft II game needs the sc2 extra: pip install "arena[sc2]"') from None
    return stand_in.make_sc2path(root).resolve()


def stand_in_lines(root: Path) -> list[str]:
    """What `arena sc2 stand-in` says once the stand-in is laid out at `root`: what it is and how to use it."""
    return [f"A stand-in StarCraft II is at {root} (a toy world, not the game's rules: docs/sc2.md says what it "
            "covers). Use it with:",
            f"  export SC2PATH={root}",
            "  arena play sc2/Simple64-v0 -p sc2:attack -p sc2bot:race=zerg -n 4 --replays runs/sc2",
            "  arena league run configs/leagues/sc2_1v1.yaml --dir runs/sc2league --matches 12",
            "  arena ratings runs/sc2league"]
