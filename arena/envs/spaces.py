"""A Gymnasium space for free-text observations and actions.

`gymnasium.spaces.Text` restricts the charset (alphanumerics by default) and
so rejects real game text; this one accepts any `str` up to a length.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Space

_SAMPLE_CHARS = np.array(list(string.ascii_letters + string.digits + " []:->,"))


class TextObservation(str):
    """A `str` that also carries the `dtype` PettingZoo's api_test compares with the space's."""

    __slots__ = ()
    dtype = np.dtype(object)


class FreeText(Space[str]):
    def __init__(self, max_length: int = 1 << 20, seed: int | np.random.Generator | None = None):
        super().__init__(shape=None, dtype=object, seed=seed)
        self.max_length = int(max_length)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        n = int(self.np_random.integers(1, 16))
        return "".join(self.np_random.choice(_SAMPLE_CHARS, size=n))

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"FreeText({self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, FreeText) and other.max_length == self.max_length
