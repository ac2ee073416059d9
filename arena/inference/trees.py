"""Nested dicts of arrays ("trees"): what a policy reads and writes, and what a rollout batch holds.

A policy's input is a dict of arrays (the observation tensor and its action mask; or a game's
entities, entity mask, map, scalars and every part's mask), its action a dict of arrays for a
structured move or one array; a rollout batch stacks them with ``[T, B]`` leading dimensions. These
helpers apply one operation to every leaf, numpy or torch alike, so the learners never ask which
kind of game they train on.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """`fn` applied to every leaf (None stays None)."""
    if isinstance(tree, dict):
        return {k: tree_map(fn, v) for k, v in tree.items()}
    return None if tree is None else fn(tree)


def tree_stack(rows: Sequence[Any]) -> Any:
    """Rows of equal structure stacked along a new first axis (numpy)."""
    first = rows[0]
    if isinstance(first, dict):
        return {k: tree_stack([r[k] for r in rows]) for k in first}
    if first is None:
        return None
    return np.stack([np.asarray(r) for r in rows])


def tree_row(tree: Any, i: int) -> Any:
    """Row `i` of every leaf."""
    return tree_map(lambda x: x[i], tree)


def tree_rows(tree: Any, idx: Any) -> Any:
    """The rows `idx` of ``[T, B, ...]`` leaves flattened to ``[T * B, ...]``."""
    return tree_map(lambda x: x.reshape(-1, *x.shape[2:])[idx], tree)


def tree_columns(tree: Any, cols: Any) -> Any:
    """Columns `cols` of ``[T, B, ...]`` leaves."""
    return tree_map(lambda x: x[:, cols], tree)


def tree_torch(tree: Any) -> Any:
    import torch

    return tree_map(torch.from_numpy, tree)


def tree_to(tree: Any, device: str) -> Any:
    return tree_map(lambda x: x.to(device), tree)


def tree_leaf(tree: Any) -> Any:
    """Any one leaf (to read a batch size)."""
    while isinstance(tree, dict):
        tree = next(v for v in tree.values() if v is not None)
    return tree


def tree_pad(trees: Sequence[Any], length: int, fill: dict[str, Any] | None = None) -> Any:
    """Time-major ``[length, B, ...]`` arrays of `trees` (each ``[L_b, ...]``, L_b <= length); padding is
    0 (False, -1 for integer leaves named in `fill` with -1), or ``fill[key]`` for a top-level key."""
    first = trees[0]
    if isinstance(first, dict):
        return {k: _pad_leaf([t[k] for t in trees], length, (fill or {}).get(k, 0))
                if not isinstance(first[k], dict) else tree_pad([t[k] for t in trees], length, fill)
                for k in first if first[k] is not None}
    return _pad_leaf(trees, length, 0)


def _pad_leaf(leaves: Sequence[np.ndarray], length: int, fill: Any) -> np.ndarray:
    a0 = np.asarray(leaves[0])
    out = np.full((length, len(leaves), *a0.shape[1:]), fill, dtype=a0.dtype)
    for b, x in enumerate(leaves):
        out[:len(x), b] = x
    return out
