"""The action model: every move a game takes is a composite of named parts.

Games declare Gymnasium spaces; this module says what a move *means*, so that a policy can be
built for it, a replay can store it and a random agent can draw one:

* a **part** is one choice: ``categorical`` (one of ``n``, e.g. the action type), ``pointer``
  (one of the ``n`` entity slots of the observation: a target unit), ``select`` (an ordered list
  of 1 to ``max_select`` distinct entity slots: the units that act), ``spatial`` (one cell of an
  ``H x W`` grid: a location) or ``box`` (a real vector in ``[low, high]``);
* an **action model** is the parts in the order a policy chooses them (AlphaStar's: action type,
  then queued, then the selected units, then a target unit or a location), with, for each value
  of the first part (the action type), the parts that value uses (``uses``). A part the chosen
  type does not use is not part of the move: it is not stored, not checked and contributes
  nothing to a policy's log-probability, entropy or KL.
* each part may name the observation key that holds its legal choices (``mask``): a ``[n]``
  mask, or a ``[types, n]`` one whose row is chosen by the action type already chosen (the units
  that can attack, the cells a unit can move to).

Today's kinds are the simple cases: a discrete game is one ``categorical`` part named
``action`` masked by ``action_mask`` (`ActionModel.discrete`), a continuous one a single ``box``
part (`ActionModel.continuous`); text moves are not neural and have no model.

A structured move is a dict ``{part: value}`` (ints, lists of ints for ``select``, ``[row, col]``
for ``spatial``, a list of floats for ``box``); `ActionModel.encode` writes its compact JSON form
(the used parts only) and `ActionModel.check` reads one back, so a replay re-simulates it. A
policy reads and writes the parts as fixed-shape arrays (`ActionModel.to_arrays`,
`ActionModel.from_arrays`): a select part as ``max_select`` slots padded with -1, a spatial part as
the flat index ``row * W + col``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np

PART_KINDS = ("categorical", "pointer", "select", "spatial", "box")

#: Keys the generic JSON form of a move uses for what it could not store (`json_form`): no part has
#: one of these names, so a stored structured move is never mistaken for a fault.
FAULT_KEYS = frozenset({"repr", "truncated", "length"})

#: Observation keys that are masks (a policy reads them as bool and never encodes them), besides the
#: keys the parts of a move name as theirs.
MASK_KEYS = frozenset({"entity_mask", "action_mask"})

#: Most parts an action model may have, and most choices a part may have (bounds on what a game or
#: a checkpoint may declare).
MAX_PARTS = 16
MAX_CHOICES = 1 << 20

#: Longest text a move of an unknown kind is kept as (see `json_form`).
MAX_STORED_ACTION = 4096


@dataclass(frozen=True)
class Part:
    """One choice of a move; see the module docstring."""

    name: str
    kind: str
    #: categorical: the number of choices; pointer and select: the entity slots.
    n: int = 0
    #: spatial: (H, W); box: the vector's shape.
    shape: tuple[int, ...] = ()
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()
    #: select: the most slots chosen.
    max_select: int = 0
    #: The observation key of this part's legal choices: ``[size]`` or ``[types, size]``.
    mask: str | None = None
    #: categorical: the choices' names (a move's text).
    labels: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in PART_KINDS:
            raise ValueError(f"action part {self.name!r}: kind {self.kind!r} is not one of {', '.join(PART_KINDS)}")
        if not self.name or self.name in FAULT_KEYS or not self.name.replace("_", "").isalnum():
            raise ValueError(f"action part name {self.name!r}: letters, digits and _ only, not {sorted(FAULT_KEYS)}")
        if self.kind in ("categorical", "pointer", "select") and not 1 <= self.n <= MAX_CHOICES:
            raise ValueError(f"action part {self.name!r}: n must be in [1, {MAX_CHOICES}], got {self.n}")
        if self.kind == "select" and not 1 <= self.max_select <= self.n:
            raise ValueError(f"action part {self.name!r}: max_select must be in [1, n={self.n}], got {self.max_select}")
        if self.kind == "spatial" and (len(self.shape) != 2 or min(self.shape) < 1 or self.size > MAX_CHOICES):
            raise ValueError(f"action part {self.name!r}: a spatial part's shape is (H, W), got {self.shape}")
        if self.kind == "box" and (not self.shape or len(self.low) != self.size or len(self.high) != self.size):
            raise ValueError(f"action part {self.name!r}: a box part needs its shape and one low and high a component")
        if self.labels and len(self.labels) != self.n:
            raise ValueError(f"action part {self.name!r}: {len(self.labels)} labels for {self.n} choices")

    @property
    def size(self) -> int:
        """The number of choices (a mask's length): n, H * W, or the box's component count."""
        if self.kind in ("spatial", "box"):
            return int(math.prod(self.shape))
        return int(self.n)

    def space(self):
        from gymnasium import spaces

        if self.kind in ("categorical", "pointer"):
            return spaces.Discrete(self.n)
        if self.kind == "select":
            return spaces.Box(-1, self.n - 1, shape=(self.max_select,), dtype=np.int64)
        if self.kind == "spatial":
            return spaces.MultiDiscrete(list(self.shape))
        return spaces.Box(np.asarray(self.low, np.float32).reshape(self.shape),
                          np.asarray(self.high, np.float32).reshape(self.shape), dtype=np.float32)


@dataclass(frozen=True)
class ActionModel:
    """The parts of a move in the order a policy chooses them; see the module docstring."""

    parts: tuple[Part, ...]
    #: For each value of the first part (the action type), the names of the parts it uses (the
    #: first part included). None: every part is always used.
    uses: tuple[tuple[str, ...], ...] | None = None
    #: The observation key of the entity set that pointer and select parts point into.
    entities: str = "entities"
    _index: dict = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    def __post_init__(self):
        if not 1 <= len(self.parts) <= MAX_PARTS:
            raise ValueError(f"an action model has 1 to {MAX_PARTS} parts, got {len(self.parts)}")
        names = [p.name for p in self.parts]
        if len(set(names)) != len(names):
            raise ValueError(f"action parts must have distinct names, got {names}")
        if self.uses is not None:
            first = self.parts[0]
            if first.kind != "categorical" or len(self.uses) != first.n:
                raise ValueError(f"uses: one entry for each of the {first.n} values of the first part "
                                 f"({first.name!r}, which must be categorical), got {len(self.uses)}")
            for k, used in enumerate(self.uses):
                bad = [u for u in used if u not in names]
                if bad or first.name not in used:
                    raise ValueError(f"uses[{k}]: {bad or 'the first part'} " +
                                     ("is not a part" if bad else f"must include {first.name!r}"))
        for p in self.parts:
            if p.kind in ("pointer", "select") and not self.entities:
                raise ValueError(f"action part {p.name!r} points into entities: the model needs an entities key")
        object.__setattr__(self, "_index", {p.name: p for p in self.parts})

    # -- the simple cases ---------------------------------------------------------------------
    @classmethod
    def discrete(cls, n: int, mask: str | None = "action_mask") -> "ActionModel":
        return cls((Part("action", "categorical", n=int(n), mask=mask),))

    @classmethod
    def continuous(cls, shape: tuple[int, ...], low: Any, high: Any) -> "ActionModel":
        lo = np.broadcast_to(np.asarray(low, np.float64), shape).ravel()
        hi = np.broadcast_to(np.asarray(high, np.float64), shape).ravel()
        return cls((Part("action", "box", shape=tuple(int(s) for s in shape), low=tuple(lo.tolist()),
                         high=tuple(hi.tolist())),))

    @property
    def structured(self) -> bool:
        """More than one part, or one that is not a plain choice or box (a move is a dict)."""
        return len(self.parts) > 1 or self.parts[0].kind not in ("categorical", "box")

    @property
    def mask_keys(self) -> frozenset[str]:
        """The observation keys that are masks: `MASK_KEYS` and the keys the parts name."""
        return MASK_KEYS | {p.mask for p in self.parts if p.mask}

    def part(self, name: str) -> Part:
        return self._index[name]

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.parts]

    def used(self, type_value: int | None) -> tuple[str, ...]:
        """The parts a move whose first part is `type_value` uses."""
        if self.uses is None:
            return tuple(self.names)
        return self.uses[int(type_value)]

    def space(self):
        """The Gymnasium space of a move as arrays (`to_arrays`)."""
        from gymnasium import spaces

        return spaces.Dict({p.name: p.space() for p in self.parts})

    # -- dict form (checkpoints) --------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"parts": [asdict(p) for p in self.parts], "uses": None if self.uses is None else
                [list(u) for u in self.uses], "entities": self.entities}

    @classmethod
    def from_dict(cls, d: Mapping) -> "ActionModel":
        parts = []
        for p in d["parts"]:
            p = dict(p)
            for k in ("shape", "low", "high", "labels"):
                p[k] = tuple(p.get(k) or ())
            parts.append(Part(**p))
        uses = d.get("uses")
        return cls(tuple(parts), None if uses is None else tuple(tuple(u) for u in uses), d.get("entities", "entities"))

    # -- masks ----------------------------------------------------------------------------------
    def legal(self, part: Part, obs: Mapping | None, type_value: int | None) -> np.ndarray | None:
        """The legal choices of `part` (a bool ``[size]``) given the action type chosen, or None: all."""
        if part.mask is None or obs is None:
            return None
        m = np.asarray(obs[part.mask]).astype(bool)
        if m.ndim == 2:
            m = m[int(type_value) if type_value is not None else 0]
        return m

    # -- moves ------------------------------------------------------------------------------------
    def check(self, action: Any, obs: Mapping | None = None) -> tuple[dict | None, str | None]:
        """``(move, None)``: `action` (a dict of parts, or its JSON form) as a move of plain values
        with the unused parts left out; or ``(None, reason)``. Never raises."""
        if not isinstance(action, Mapping):
            return None, f"expected a move as a dict of its parts ({', '.join(self.names)}), got {type(action).__name__}"
        unknown = [k for k in action if k not in self._index]
        if unknown:
            return None, f"{short_repr(unknown[0])} is not a part of this game's moves (its parts: {', '.join(self.names)})"
        first = self.parts[0]
        out: dict[str, Any] = {}
        type_value = None
        if self.uses is not None:
            v, why = self._one(first, action.get(first.name), obs, None)
            if why:
                return None, why
            type_value = out[first.name] = v
        for p in self.parts:
            if p.name in out or p.name not in self.used(type_value):
                continue
            v, why = self._one(p, action.get(p.name), obs, type_value)
            if why:
                return None, why
            out[p.name] = v
        return out, None

    def _one(self, p: Part, v: Any, obs: Mapping | None, type_value: int | None) -> tuple[Any, str | None]:
        if v is None:
            return None, f"the move has no {p.name!r}" + (f" (move type {self._type_name(type_value)} uses it)"
                                                          if type_value is not None else "")
        legal = self.legal(p, obs, type_value)
        if p.kind == "box":
            try:
                arr = np.asarray(v, dtype=np.float32).reshape(p.shape)
            except (TypeError, ValueError):
                return None, f"{p.name}: expected {p.size} numbers, got {short_repr(v)}"
            if not np.all(np.isfinite(arr)):
                return None, f"{p.name}: contains NaN or infinity"
            return np.clip(arr, np.asarray(p.low, np.float32).reshape(p.shape),
                           np.asarray(p.high, np.float32).reshape(p.shape)), None
        if p.kind == "spatial":
            if not isinstance(v, (list, tuple, np.ndarray)) or len(v) != 2 or not all(_is_int(x) for x in v):
                return None, f"{p.name}: expected a cell [row, col], got {short_repr(v)}"
            r, c = int(v[0]), int(v[1])
            h, w = p.shape
            if not (0 <= r < h and 0 <= c < w):
                return None, f"{p.name}: cell [{r}, {c}] is off the {h} x {w} grid"
            if legal is not None and not legal[r * w + c]:
                return None, f"{p.name}: cell [{r}, {c}] is not legal here"
            return [r, c], None
        if p.kind == "select":
            if not isinstance(v, (list, tuple, np.ndarray)) or not all(_is_int(x) for x in v):
                return None, f"{p.name}: expected a list of entity slots, got {short_repr(v)}"
            chosen = [int(x) for x in v]
            if not 1 <= len(chosen) <= p.max_select:
                return None, f"{p.name}: choose 1 to {p.max_select} slots, got {len(chosen)}"
            if len(set(chosen)) != len(chosen):
                return None, f"{p.name}: slot chosen twice in {chosen}"
            for x in chosen:
                if not 0 <= x < p.n or (legal is not None and not legal[x]):
                    return None, f"{p.name}: slot {x} may not be chosen here"
            return chosen, None
        if not _is_int(v):
            return None, f"{p.name}: expected an integer, got {short_repr(v)}"
        x = int(v)
        if not 0 <= x < p.n or (legal is not None and not legal[x]):
            what = self._type_name(x) if p is self.parts[0] and self.uses is not None else str(x)
            return None, f"{p.name}: {what} is not legal here"
        return x, None

    def _type_name(self, v: int | None) -> str:
        first = self.parts[0]
        if v is not None and first.labels and 0 <= int(v) < len(first.labels):
            return first.labels[int(v)]
        return str(v)

    def encode(self, move: Mapping) -> dict:
        """The compact JSON form of a checked move (its used parts)."""
        out = {}
        for p in self.parts:
            if p.name in move:
                v = move[p.name]
                out[p.name] = np.asarray(v).ravel().tolist() if p.kind == "box" else (
                    [int(x) for x in v] if isinstance(v, (list, tuple, np.ndarray)) else int(v))
        return out

    def to_text(self, move: Mapping) -> str:
        """One line for people: ``attack units=[0, 2] target=4`` (the parts its type uses)."""
        bits = []
        first = move.get(self.parts[0].name)
        used = self.used(first) if self.uses is None or _is_int(first) and 0 <= first < self.parts[0].n else self.names
        for p in self.parts:
            if p.name not in move or p.name not in used:
                continue
            v = move[p.name]
            if p is self.parts[0] and p.labels:
                bits.append(p.labels[int(v)])
            else:
                bits.append(f"{p.name}={self.encode({p.name: v})[p.name]}")
        return " ".join(bits)

    def sample(self, obs: Mapping | None, rng: np.random.Generator) -> dict | None:
        """A uniformly drawn legal move (each part uniform over its legal choices); None when the
        type part has no legal value."""
        move: dict[str, Any] = {}
        type_value = None
        for i, p in enumerate(self.parts):
            if i > 0 and p.name not in self.used(type_value):
                continue
            legal = self.legal(p, obs, type_value)
            if p.kind == "box":
                move[p.name] = rng.uniform(p.low, p.high).astype(np.float32).reshape(p.shape)
                continue
            choices = np.arange(p.size) if legal is None else np.flatnonzero(legal)
            if p.kind == "select":
                choices = choices[choices < p.n]
            if len(choices) == 0:
                return None
            if p.kind == "select":
                k = int(rng.integers(1, min(p.max_select, len(choices)) + 1))
                move[p.name] = [int(x) for x in rng.choice(choices, size=k, replace=False)]
            elif p.kind == "spatial":
                x = int(choices[int(rng.integers(len(choices)))])
                move[p.name] = [x // p.shape[1], x % p.shape[1]]
            else:
                move[p.name] = int(choices[int(rng.integers(len(choices)))])
            if i == 0 and self.uses is not None:
                type_value = move[p.name]
        return move

    # -- arrays (policies) -------------------------------------------------------------------------
    def to_arrays(self, move: Mapping) -> dict[str, np.ndarray]:
        """Fixed-shape arrays of a checked move; unused parts are zeros (select: all -1)."""
        out: dict[str, np.ndarray] = {}
        for p in self.parts:
            v = move.get(p.name)
            if p.kind == "box":
                out[p.name] = np.zeros(p.size, np.float32) if v is None else np.asarray(v, np.float32).ravel()
            elif p.kind == "select":
                a = np.full(p.max_select, -1, np.int64)
                if v is not None:
                    a[:len(v)] = v
                out[p.name] = a
            elif p.kind == "spatial":
                out[p.name] = np.asarray(0 if v is None else int(v[0]) * p.shape[1] + int(v[1]), np.int64)
            else:
                out[p.name] = np.asarray(0 if v is None else int(v), np.int64)
        return out

    def from_arrays(self, arrays: Mapping[str, Any]) -> dict:
        """The move of one row of a policy's arrays: the used parts as plain values."""
        type_value = int(arrays[self.parts[0].name]) if self.uses is not None else None
        move: dict[str, Any] = {}
        for p in self.parts:
            if p.name not in self.used(type_value):
                continue
            v = np.asarray(arrays[p.name])
            if p.kind == "box":
                move[p.name] = v.astype(np.float32).reshape(p.shape)
            elif p.kind == "select":
                move[p.name] = [int(x) for x in v.ravel() if x >= 0]
            elif p.kind == "spatial":
                x = int(v)
                move[p.name] = [x // p.shape[1], x % p.shape[1]]
            else:
                move[p.name] = int(v)
        return move

    def describe(self) -> str:
        bits = []
        for p in self.parts:
            extra = {"select": f"<= {p.max_select} of {p.n}", "spatial": "x".join(map(str, p.shape)),
                     "box": str(p.shape)}.get(p.kind, str(p.n))
            bits.append(f"{p.name}: {p.kind} {extra}")
        return "{" + ", ".join(bits) + "}"


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def short_repr(x: Any, n: int = 60) -> str:
    """`repr(x)` cut to `n` characters (what an error message shows of a value)."""
    s = repr(x)
    return s if len(s) <= n else s[: n - 3] + "..."


def is_fault(stored: Any) -> bool:
    """Whether a stored move is the JSON form of something that was not a move (`json_form`'s
    ``{"repr": ...}`` or ``{"truncated": ...}``), as opposed to a structured move."""
    return isinstance(stored, dict) and not FAULT_KEYS.isdisjoint(stored)


def json_form(action: Any) -> Any:
    """A JSON form of whatever an agent returned (garbage included), bounded in size: plain values
    as they are, arrays as lists, a dict of plain values as it is, anything else as its repr."""
    tp = type(action)
    if tp is int or action is None:
        return action
    if tp is str and len(action) <= MAX_STORED_ACTION:
        return action
    if isinstance(action, bool):
        return action
    if isinstance(action, (int, np.integer)):
        return int(action)
    if isinstance(action, (float, np.floating)):
        f = float(action)
        return f if math.isfinite(f) else {"repr": repr(f)}
    if isinstance(action, str):
        if len(action) > MAX_STORED_ACTION:
            return {"truncated": action[:200], "length": len(action)}
        return action
    if isinstance(action, (list, tuple, np.ndarray)):
        try:
            arr = np.asarray(action)
        except (ValueError, TypeError):
            arr = None
        if arr is not None and arr.dtype.kind in "fiu" and arr.size <= 4096:
            if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
                return {"repr": repr(arr.tolist())[:MAX_STORED_ACTION]}
            return arr.tolist()
    if isinstance(action, Mapping) and len(action) <= MAX_PARTS and all(
            type(k) is str and k not in FAULT_KEYS for k in action):
        out = {k: json_form(v) for k, v in action.items()}
        if not any(is_fault(v) or isinstance(v, dict) for v in out.values()):
            return out
    return {"repr": repr(action)[:MAX_STORED_ACTION]}
