"""StarCraft II players that are not networks: the game's built-in AI and a scripted raw player.

* ``sc2bot:difficulty=hard,race=zerg,build=rush`` is the game's own AI in a seat of a 1v1 map
  (``sc2/Simple64-v0`` ...): the match loop tells the core who sits where (`SC2Core.seat_agents`),
  the core starts the game with pysc2's ``Bot`` in that seat, and the game plays it; the agent
  never moves in the loop, and its result is the other side's negated, so a league rates it like
  any player. Options default to the game's settings ``bot_difficulty`` (``very_easy``),
  ``bot_race`` and ``bot_build`` (``random``); difficulty ``very_easy`` ... ``cheat_insane``.
* ``sc2:attack`` plays the raw interface by a rule: all its units (the first 64 by slot, an order's
  most) attack the shown enemy unit nearest their centre (``Attack_unit``); with none shown they
  move onto the nearest neutral unit's minimap cell (a beacon, a mineral shard: ``Move_pt``; the
  cell is as fine as the ``minimap`` setting: on the test game, MoveToBeacon's beacon is reached
  with ``minimap=64``, not with the default 16); else they stop. ``sc2:idle`` never orders anything.
  They read only the seat's observation, and need those functions among the game's ``functions``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arena.agents.base import BaseAgent
from arena.errors import AgentSpecError, IncompatibleAgent

SCRIPTS = ("attack", "idle")


class SC2Bot(BaseAgent):
    """The game's built-in AI in one seat (see the module docstring)."""

    def __init__(self, difficulty: str, race: str, build: str):
        self.sc2_bot = (race, difficulty, build)
        self.spec = f"sc2bot:difficulty={difficulty},race={race},build={build}"

    def act(self, observation) -> Any:  # the game plays this seat; the match loop never asks it
        raise RuntimeError("the built-in AI is played by the game, not asked for moves")


class SC2Scripted(BaseAgent):
    """``sc2:attack`` / ``sc2:idle`` (see the module docstring)."""

    def __init__(self, style: str, core: Any):
        from arena.envs.sc2.game import F_ALLIANCE, F_X, F_Y, SCALES

        self.style, self.spec = style, f"sc2:{style}"
        names = list(core.cfg.functions)
        need = ("Attack_unit", "Move_pt") if style == "attack" else ()
        missing = [n for n in need if n not in names]
        if core.cfg.interface != "raw" or missing:
            raise IncompatibleAgent(f"sc2:{style} plays the raw interface with {', '.join(need)} among the game's "
                                    f"functions; {core.game_id} has interface {core.cfg.interface}, functions {names}")
        self.attack, self.move = (names.index(n) if n in names else None for n in ("Attack_unit", "Move_pt"))
        self.stop = names.index("Stop_quick") if "Stop_quick" in names else 0
        self.f_alliance, self.fx, self.fy, self.alliance_scale = F_ALLIANCE, F_X, F_Y, SCALES["alliance"]
        self.grid = core.cfg.minimap
        self.max_select = core.action_model(0).part("units").max_select  # at most 64 units an order

    def act(self, observation) -> Any:
        if self.style == "idle":
            return {"type": 0}
        o = observation.raw
        ent, shown = o["entities"], o["entity_mask"].astype(bool)
        alliance = np.rint(ent[:, self.f_alliance] * self.alliance_scale).astype(int)
        own = np.flatnonzero(shown & (alliance == 1))
        if own.size == 0:
            return {"type": 0}
        xy = ent[:, [self.fx, self.fy]].astype(np.float64)
        centre = xy[own].mean(0)
        units = [int(u) for u in own[:self.max_select]]
        enemy = np.flatnonzero(o["target_mask"][self.attack].astype(bool))
        if enemy.size:
            target = int(enemy[np.argmin(((xy[enemy] - centre) ** 2).sum(1))])
            return {"type": self.attack, "units": units, "target": target}
        neutral = np.flatnonzero(shown & (alliance == 3))
        if neutral.size:
            x, y = xy[neutral[np.argmin(((xy[neutral] - centre) ** 2).sum(1))]]
            cell = [int(np.clip(y * self.grid, 0, self.grid - 1)), int(np.clip(x * self.grid, 0, self.grid - 1))]
            return {"type": self.move, "units": units, "location": cell}
        return {"type": self.stop, "units": units} if self.stop else {"type": 0}


def _sc2core(core: Any, what: str) -> Any:
    from arena.envs.sc2.game import SC2Core

    if core is not None and not isinstance(core, SC2Core):
        raise IncompatibleAgent(f"{what} plays the StarCraft II games (sc2/*), not {core.game_id}")
    return core


def bot_factory(core, seed, positional, **opts):
    from arena.envs.sc2.game import BUILDS, DIFFICULTIES, RACES

    _sc2core(core, "sc2bot")
    if positional:
        raise AgentSpecError(f"sc2bot takes only key=value options (difficulty, race, build), got {positional!r}")
    opts.pop("seed", None)
    unknown = sorted(set(opts) - {"difficulty", "race", "build"})
    if unknown:
        raise AgentSpecError(f"sc2bot takes difficulty, race and build; got {', '.join(unknown)}")
    cfg = getattr(core, "cfg", None)
    chosen = {"difficulty": opts.get("difficulty", cfg.bot_difficulty if cfg else "very_easy"),
              "race": opts.get("race", cfg.bot_race if cfg else "random"),
              "build": opts.get("build", cfg.bot_build if cfg else "random")}
    for key, allowed in (("difficulty", DIFFICULTIES), ("race", RACES), ("build", BUILDS)):
        if chosen[key] not in allowed:
            raise AgentSpecError(f"sc2bot: {key} must be one of {', '.join(allowed)}, got {chosen[key]!r}")
    return SC2Bot(chosen["difficulty"], chosen["race"], chosen["build"])


def script_factory(core, seed, positional, **opts):
    opts.pop("seed", None)
    if opts:
        raise AgentSpecError(f"sc2 scripted players take no options, got {', '.join(sorted(opts))}")
    style = positional or "attack"
    if style not in SCRIPTS:
        raise AgentSpecError(f"sc2 scripted players: {', '.join('sc2:' + s for s in SCRIPTS)}; got sc2:{style}")
    if _sc2core(core, f"sc2:{style}") is None:
        raise IncompatibleAgent(f"sc2:{style} needs the game it plays")
    return SC2Scripted(style, core)
