"""Prioritized Fictitious Self-Play (PFSP) opponent selection.

AlphaStar (Vinyals et al., 2019) does not pick league opponents uniformly:
it weights each candidate by a function of the learner's current win rate
against it, so training time goes where it is most useful.  The weighting
functions here are the ones from the AlphaStar pseudocode:

* ``squared``       ``(1 - x)**2``      -- focus hard on opponents we lose to
  (used by main agents against the whole league).
* ``variance``      ``x * (1 - x)``     -- focus on opponents of similar
  strength, where each game carries the most information.
* ``linear``        ``1 - x``           -- a milder version of ``squared``.
* ``linear_capped`` ``min(0.5, 1 - x)`` -- like ``linear`` but stops an
  opponent we never beat from crowding out everything else.

Everything here is a pure function of its arguments; sampling takes an
explicit :class:`numpy.random.Generator` so league runs are reproducible.
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

import numpy as np

__all__ = [
    "WEIGHTINGS",
    "linear",
    "linear_capped",
    "pfsp_sample",
    "pfsp_weights",
    "squared",
    "variance",
]

T = TypeVar("T")

# Below this total mass the weights carry no usable preference (e.g. the
# learner beats everyone under ``squared``); AlphaStar uses the same cut-off
# before falling back to uniform, which keeps exploring instead of dividing
# by ~0 and amplifying float noise.
_NORM_EPS = 1e-10


def squared(x: np.ndarray | float) -> np.ndarray | float:
    """Concentrate on the hardest opponents: weight falls quadratically as we win more."""
    return (1.0 - x) ** 2


def variance(x: np.ndarray | float) -> np.ndarray | float:
    """Prefer evenly matched opponents, where an outcome is least predictable."""
    return x * (1.0 - x)


def linear(x: np.ndarray | float) -> np.ndarray | float:
    """Prefer harder opponents, less sharply than :func:`squared`."""
    return 1.0 - x


def linear_capped(x: np.ndarray | float) -> np.ndarray | float:
    """Like :func:`linear`, but any opponent we win at most half against counts the same.

    The cap stops a handful of unbeatable opponents from absorbing almost
    all of the sampling mass.
    """
    return np.minimum(0.5, 1.0 - x)


WEIGHTINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "squared": squared,
    "variance": variance,
    "linear": linear,
    "linear_capped": linear_capped,
}


def _weighting_fn(weighting: str) -> Callable[[np.ndarray], np.ndarray]:
    try:
        return WEIGHTINGS[weighting]
    except (KeyError, TypeError):
        valid = ", ".join(sorted(WEIGHTINGS))
        raise ValueError(
            f"unknown PFSP weighting {weighting!r}; valid weightings: {valid}"
        ) from None


def pfsp_weights(win_rates: Sequence[float], weighting: str) -> np.ndarray:
    """Turn win rates against candidates into a sampling distribution.

    Win rates are from the learner's point of view (1.0 = always beats that
    candidate).  The result sums to 1.  If every weight is (numerically) zero
    -- e.g. ``squared`` when the learner beats everyone -- there is no
    preference to express, so the distribution is uniform, as in AlphaStar.

    Raises:
        ValueError: for an unknown weighting, an empty or non-1-D input, or a
            win rate that is not a finite number in [0, 1] (such values would
            silently produce negative or NaN probabilities).
    """
    fn = _weighting_fn(weighting)
    x = np.asarray(win_rates, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"win_rates must be one-dimensional, got shape {x.shape}")
    if x.size == 0:
        raise ValueError("win_rates is empty: there is nothing to weight")
    if not np.all(np.isfinite(x)) or np.any(x < 0.0) or np.any(x > 1.0):
        raise ValueError(f"win rates must lie in [0, 1], got {x.tolist()}")
    weights = np.asarray(fn(x), dtype=np.float64)
    total = float(weights.sum())
    if total < _NORM_EPS:
        return np.full(x.shape, 1.0 / x.size)
    return weights / total


def pfsp_sample(
    candidates: Sequence[T],
    win_rates: Sequence[float],
    weighting: str,
    rng: np.random.Generator,
) -> T:
    """Draw one opponent with PFSP probabilities.

    ``win_rates[i]`` is the learner's win rate against ``candidates[i]``.
    The generator is passed in rather than global so the same seed replays
    the same league schedule.

    Raises:
        ValueError: if there are no candidates, the two sequences differ in
            length, or :func:`pfsp_weights` rejects its input.
    """
    if len(candidates) == 0:
        raise ValueError("cannot sample an opponent from an empty candidate list")
    if len(candidates) != len(win_rates):
        raise ValueError(
            f"got {len(candidates)} candidates but {len(win_rates)} win rates"
        )
    probs = pfsp_weights(win_rates, weighting)
    index = int(rng.choice(len(candidates), p=probs))
    return candidates[index]
