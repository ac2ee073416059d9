"""A flat view of a structured (compound-action) game, for learners with their own stock models.

RLlib's default PPO model (its catalog's MLP and its ``MultiDiscrete`` distribution) reads one
float vector and writes one vector of independent choices. `FlatView` turns a game whose
observation is a ``Dict`` and whose move is a compound order (`arena.envs.actions.ActionModel`)
into exactly that, derived from the game's spaces and action model alone, never from a flag per
game. It is numpy and Gymnasium only (no torch, no Ray): the RLlib PPO trainer
(`arena.trainers.rllib.ppo`, through `FlatParallelEnv`) and the ``rllib:`` agent
(`arena.agents.rllib_agent`) use the same one.

**Observation.** Every ``Box`` of the observation ``Dict`` (masks included: what is alive, shown
and orderable is worth reading), in the ``Dict``'s key order, flattened and concatenated into one
float32 vector. The arena's structured games are already seen from the seat's own side (Skirmish
mirrors the map for blue), so nothing is swapped and no seat one-hot is added.

**Action.** One ``MultiDiscrete`` component per choice, part by part in the model's order:
``categorical n`` -> ``[n]``; ``pointer n`` -> ``[n]``; ``spatial (H, W)`` -> ``[H * W]`` (the cell
``row * W + col``); ``select n`` (up to ``max_select`` of ``n`` slots) -> ``[2] * n``, one
chosen / not-chosen bit per slot. ``box`` parts have no discrete form: such a game is refused.
For Skirmish 3m: ``[5, 2, 2, 2, 2, 2, 2, 6, 64]`` (type, six unit bits, target, location).

**Legalisation** (`FlatView.to_move`). The policy's components are independent, so most draws
are not a legal order as they stand; none is refused or punished as an invalid move. Each is
turned into the nearest legal order, generically, by the masks the parts name:

1. an illegal type (the first part, when the model has ``uses``) becomes the *default type*: the
   first legal value that uses no other part (Skirmish: ``no_op``), else the first legal value;
2. the parts the type does not use are dropped (their components are ignored);
3. a select part keeps the chosen slots that are legal (alive, own), in slot order, at most
   ``max_select`` of them; if none is left the order is the *default order*;
4. a pointer, spatial or categorical part whose chosen value is illegal (a dead or unseen target,
   an attack with no enemy in sight) makes the order the *default order*;
5. the default order: the default type, with each part it uses at its first legal choice
   (Skirmish: ``no_op`` alone). ``None`` only when no type is legal (the game is over).

So an attack whose target is not shown is a no-op, a move that selects only dead units is a
no-op, and the units part of an order keeps the living units it selected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from arena.envs.actions import ActionModel, Part


class FlatView:
    """The flat observation and action of one structured game (see the module docstring)."""

    def __init__(self, observation_space: spaces.Dict, model: ActionModel):
        if not isinstance(observation_space, spaces.Dict):
            raise ValueError(f"a flat view needs a Dict observation, got {observation_space}")
        bad = [k for k, s in observation_space.spaces.items() if not isinstance(s, spaces.Box)]
        if bad:
            raise ValueError(f"a flat view flattens Box observations only; {bad[0]!r} is "
                             f"{observation_space.spaces[bad[0]]}")
        boxes = [p.name for p in model.parts if p.kind == "box"]
        if boxes:
            raise ValueError(f"action part {boxes[0]!r} is continuous (box): a MultiDiscrete view needs "
                             "categorical, pointer, select and spatial parts only")
        self.model = model
        self.keys = list(observation_space.spaces)
        self.sizes = [int(np.prod(observation_space.spaces[k].shape)) for k in self.keys]
        self.obs_size = int(sum(self.sizes))
        nvec: list[int] = []
        #: Per part, the slice of the flat action holding its components.
        self.slices: dict[str, slice] = {}
        for p in model.parts:
            start = len(nvec)
            nvec += [2] * p.n if p.kind == "select" else [p.size]
            self.slices[p.name] = slice(start, len(nvec))
        self.nvec = np.asarray(nvec, np.int64)

    @classmethod
    def of_core(cls, core: Any, player: int = 0) -> FlatView:
        return cls(core.observation_space(player), core.action_model(player))

    # -- spaces ----------------------------------------------------------------------------------
    @property
    def observation_space(self) -> spaces.Box:
        return spaces.Box(-np.inf, np.inf, (self.obs_size,), np.float32)

    @property
    def action_space(self) -> spaces.MultiDiscrete:
        return spaces.MultiDiscrete(self.nvec)

    # -- observation -----------------------------------------------------------------------------
    def flatten(self, obs: Mapping[str, Any]) -> np.ndarray:
        """The float32 vector of one observation."""
        out = np.empty(self.obs_size, np.float32)
        i = 0
        for k, n in zip(self.keys, self.sizes):
            out[i:i + n] = np.asarray(obs[k], np.float32).ravel()
            i += n
        return out

    # -- action ----------------------------------------------------------------------------------
    def _first_legal(self, p: Part, obs: Mapping | None, type_value: int | None) -> int | None:
        legal = self.model.legal(p, obs, type_value)
        if legal is None:
            return 0
        idx = np.flatnonzero(legal[:p.size])
        return int(idx[0]) if idx.size else None

    def default_type(self, obs: Mapping | None) -> int | None:
        """The type an illegal one becomes: the first legal value using no other part, else the first legal."""
        first = self.model.parts[0]
        legal = self.model.legal(first, obs, None)
        values = range(first.n) if legal is None else [int(v) for v in np.flatnonzero(legal[:first.n])]
        if self.model.uses is not None:
            for v in values:
                if self.model.used(v) == (first.name,):
                    return v
        return next(iter(values), None)

    def default_move(self, obs: Mapping | None) -> dict | None:
        """The default order: the default type, each part it uses at its first legal choice."""
        t = self.default_type(obs) if self.model.uses is not None else None
        if self.model.uses is not None and t is None:
            return None
        move: dict[str, Any] = {}
        for i, p in enumerate(self.model.parts):
            if i == 0 and self.model.uses is not None:
                move[p.name] = t
                continue
            if p.name not in self.model.used(t):
                continue
            v = self._first_legal(p, obs, t)
            if v is None:
                return None
            move[p.name] = [v] if p.kind == "select" else [v // p.shape[1], v % p.shape[1]] \
                if p.kind == "spatial" else v
        return move

    def to_move(self, flat: Any, obs: Mapping | None) -> dict | None:
        """The legal order nearest to a flat action (the rules in the module docstring)."""
        a = np.asarray(flat, np.int64).ravel()
        model = self.model
        t = None
        if model.uses is not None:
            first = model.parts[0]
            t = int(a[self.slices[first.name]][0])
            legal = model.legal(first, obs, None)
            if not 0 <= t < first.n or (legal is not None and not legal[t]):
                t = self.default_type(obs)
                if t is None:
                    return None
        move: dict[str, Any] = {}
        for i, p in enumerate(model.parts):
            if i == 0 and model.uses is not None:
                move[p.name] = t
                continue
            if p.name not in model.used(t):
                continue
            comp = a[self.slices[p.name]]
            legal = model.legal(p, obs, t)
            if p.kind == "select":
                chosen = [int(s) for s in np.flatnonzero(comp[:p.n] > 0)
                          if legal is None or legal[s]][:p.max_select]
                if not chosen:
                    return self.default_move(obs)
                move[p.name] = chosen
                continue
            v = int(comp[0])
            if not 0 <= v < p.size or (legal is not None and not legal[v]):
                return self.default_move(obs)
            move[p.name] = [v // p.shape[1], v % p.shape[1]] if p.kind == "spatial" else v
        return move

    def to_flat(self, move: Mapping) -> np.ndarray:
        """The flat action of a move (unused parts 0): the inverse of `to_move` on legal orders."""
        a = np.zeros(len(self.nvec), np.int64)
        for p in self.model.parts:
            if p.name not in move:
                continue
            s, v = self.slices[p.name], move[p.name]
            if p.kind == "select":
                bits = np.zeros(p.n, np.int64)
                bits[[int(x) for x in v]] = 1
                a[s] = bits
            elif p.kind == "spatial":
                a[s] = int(v[0]) * p.shape[1] + int(v[1])
            else:
                a[s] = int(v)
        return a

