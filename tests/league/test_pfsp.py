from __future__ import annotations

import numpy as np
import pytest

from arena.league.pfsp import (
    WEIGHTINGS,
    linear,
    linear_capped,
    pfsp_sample,
    pfsp_weights,
    squared,
    variance,
)


def test_weighting_functions_by_hand() -> None:
    assert squared(0.25) == pytest.approx(0.5625)
    assert variance(0.25) == pytest.approx(0.1875)
    assert linear(0.25) == pytest.approx(0.75)
    assert linear_capped(0.25) == pytest.approx(0.5)
    assert linear_capped(0.75) == pytest.approx(0.25)
    assert set(WEIGHTINGS) == {"squared", "variance", "linear", "linear_capped"}


@pytest.mark.parametrize(
    ("weighting", "expected"),
    [
        ("squared", np.array([1.0, 0.25, 0.0]) / 1.25),
        ("variance", np.array([0.0, 1.0, 0.0])),
        ("linear", np.array([1.0, 0.5, 0.0]) / 1.5),
        ("linear_capped", np.array([0.5, 0.5, 0.0])),
    ],
)
def test_pfsp_weights_by_hand(weighting: str, expected: np.ndarray) -> None:
    w = pfsp_weights([0.0, 0.5, 1.0], weighting)
    np.testing.assert_allclose(w, expected, rtol=0, atol=1e-12)
    assert w.sum() == pytest.approx(1.0)


def test_pfsp_weights_variance_worked_example() -> None:
    # 0.2*0.8 = 0.16, 0.5*0.5 = 0.25, 0.9*0.1 = 0.09 -> total 0.5
    np.testing.assert_allclose(
        pfsp_weights([0.2, 0.5, 0.9], "variance"), [0.32, 0.5, 0.18], atol=1e-12
    )


@pytest.mark.parametrize(
    ("win_rates", "weighting"),
    [([1.0, 1.0, 1.0, 1.0], "squared"), ([0.0, 1.0], "variance"), ([1.0, 1.0], "linear_capped")],
)
def test_all_zero_weights_fall_back_to_uniform(win_rates: list[float], weighting: str) -> None:
    w = pfsp_weights(win_rates, weighting)
    np.testing.assert_allclose(w, np.full(len(win_rates), 1.0 / len(win_rates)))


def test_unknown_weighting_names_valid_ones() -> None:
    with pytest.raises(ValueError) as err:
        pfsp_weights([0.5], "cubic")
    for name in WEIGHTINGS:
        assert name in str(err.value)


@pytest.mark.parametrize("bad", [[], [1.5], [-0.1], [float("nan")], [[0.5]]])
def test_bad_win_rates_rejected(bad: list) -> None:
    with pytest.raises(ValueError):
        pfsp_weights(bad, "linear")


def test_sample_empty_candidates_raises() -> None:
    with pytest.raises(ValueError):
        pfsp_sample([], [], "squared", np.random.default_rng(0))


def test_sample_length_mismatch_raises() -> None:
    with pytest.raises(ValueError):
        pfsp_sample(["a", "b"], [0.5], "squared", np.random.default_rng(0))


def test_sample_frequencies_match_weights() -> None:
    rng = np.random.default_rng(1234)
    candidates = ["weak", "even", "strong"]
    win_rates = [0.9, 0.5, 0.1]  # learner beats "weak" most often
    expected = pfsp_weights(win_rates, "squared")  # [0.01, 0.25, 0.81] / 1.07
    n = 10_000
    counts = {c: 0 for c in candidates}
    for _ in range(n):
        counts[pfsp_sample(candidates, win_rates, "squared", rng)] += 1
    freqs = np.array([counts[c] / n for c in candidates])
    # 4 binomial standard deviations at n = 10k is at most 0.02.
    np.testing.assert_allclose(freqs, expected, atol=0.02)
    assert counts["strong"] > counts["even"] > counts["weak"]


def test_sample_is_reproducible_with_same_seed() -> None:
    cands = list(range(5))
    rates = [0.1, 0.3, 0.5, 0.7, 0.9]
    a = [pfsp_sample(cands, rates, "variance", np.random.default_rng(7)) for _ in range(3)]
    b = [pfsp_sample(cands, rates, "variance", np.random.default_rng(7)) for _ in range(3)]
    assert a == b
    r1, r2 = np.random.default_rng(99), np.random.default_rng(99)
    seq1 = [pfsp_sample(cands, rates, "linear", r1) for _ in range(50)]
    seq2 = [pfsp_sample(cands, rates, "linear", r2) for _ in range(50)]
    assert seq1 == seq2


def test_sample_never_picks_zero_weight_candidate() -> None:
    rng = np.random.default_rng(3)
    picks = {pfsp_sample(["beaten", "other"], [1.0, 0.4], "squared", rng) for _ in range(500)}
    assert picks == {"other"}
