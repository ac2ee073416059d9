"""Learning-rate schedules as functions of the iteration (so a resumed run continues on the same curve)."""

from __future__ import annotations

import math
from typing import Literal

Schedule = Literal["constant", "linear", "cosine"]


def lr_at(lr: float, iteration: int, iterations: int, schedule: Schedule = "constant", lr_end: float = 0.0) -> float:
    """The learning rate of iteration `iteration` (1-based) of `iterations`: `lr` at the first and,
    for "linear" and "cosine", decaying to `lr_end` at the last."""
    if schedule == "constant" or iterations <= 1:
        return lr
    frac = min(max((iteration - 1) / (iterations - 1), 0.0), 1.0)
    w = 1.0 - frac if schedule == "linear" else 0.5 * (1.0 + math.cos(math.pi * frac))
    return lr_end + (lr - lr_end) * w
