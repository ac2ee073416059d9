from __future__ import annotations

import json

import numpy as np
import pytest

from arena.league.payoff import Payoff, decayed_update, mirror_outcome


def test_decayed_update_hand_worked() -> None:
    assert decayed_update((1.0, 0.0, 0.0, 1.0), "loss", 0.5) == (0.5, 0.0, 1.0, 1.5)
    assert decayed_update((0.0, 0.0, 0.0, 0.0), "win", 0.9) == (1.0, 0.0, 0.0, 1.0)
    # (2, 2, 0, 4) * 0.5 = (1, 1, 0, 2), + draw -> (1, 2, 0, 3)
    assert decayed_update((2.0, 2.0, 0.0, 4.0), "draw", 0.5) == (1.0, 2.0, 0.0, 3.0)
    # decay 1 is plain counting
    assert decayed_update((3.0, 1.0, 2.0, 6.0), "win", 1.0) == (4.0, 1.0, 2.0, 7.0)


def test_decayed_update_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        decayed_update((0, 0, 0, 0), "victory", 0.5)
    with pytest.raises(ValueError):
        decayed_update((0, 0, 0, 0), "win", 0.0)
    with pytest.raises(ValueError):
        decayed_update((0, 0, 0, 0), "win", 1.5)
    with pytest.raises(ValueError):
        decayed_update((0, 0, 0), "win", 0.5)


def test_mirror_outcome() -> None:
    assert [mirror_outcome(o) for o in ("win", "draw", "loss")] == ["loss", "draw", "win"]


def test_unseen_pair_is_even() -> None:
    p = Payoff()
    assert p.win_rate("a", "b") == 0.5
    assert p.counts("a", "b") == (0.0, 0.0, 0.0, 0.0)


def test_update_decays_and_mirrors_by_hand() -> None:
    p = Payoff(decay=0.5)
    p.update("a", "b", "win")
    assert p.counts("a", "b") == (1.0, 0.0, 0.0, 1.0)
    assert p.counts("b", "a") == (0.0, 0.0, 1.0, 1.0)
    # b now wins, seen from b's side: both directions decay by 0.5 first.
    p.update("b", "a", "win")
    assert p.counts("a", "b") == (0.5, 0.0, 1.0, 1.5)
    assert p.counts("b", "a") == (1.0, 0.0, 0.5, 1.5)
    assert p.win_rate("a", "b") == pytest.approx(0.5 / 1.5)
    assert p.win_rate("b", "a") == pytest.approx(1.0 / 1.5)
    p.update("a", "b", "draw")
    # a: (0.25, 0, 0.5, 0.75) + draw -> (0.25, 1, 0.5, 1.75); rate (0.25 + 0.5) / 1.75
    assert p.counts("a", "b") == (0.25, 1.0, 0.5, 1.75)
    assert p.win_rate("a", "b") == pytest.approx(0.75 / 1.75)
    assert p.win_rate("a", "b") + p.win_rate("b", "a") == pytest.approx(1.0)


def test_other_pairs_not_decayed() -> None:
    p = Payoff(decay=0.5)
    p.update("a", "b", "win")
    p.update("a", "c", "win")
    assert p.counts("a", "b") == (1.0, 0.0, 0.0, 1.0)


def test_self_play_stays_even() -> None:
    p = Payoff(decay=0.5)
    p.update("a", "a", "win")
    assert p.counts("a", "a") == (1.0, 0.0, 1.0, 2.0)
    p.update("a", "a", "draw")
    assert p.counts("a", "a") == (0.5, 2.0, 0.5, 3.0)
    assert p.win_rate("a", "a") == 0.5


def test_win_rates_and_matrix() -> None:
    p = Payoff(decay=1.0)
    p.update("a", "b", "win")
    p.update("a", "b", "win")
    p.update("a", "b", "loss")
    p.update("c", "a", "draw")
    np.testing.assert_allclose(p.win_rates("a", ["b", "c", "z"]), [2 / 3, 0.5, 0.5])
    m = p.matrix(["a", "b", "c"])
    expected = np.array([[0.5, 2 / 3, 0.5], [1 / 3, 0.5, 0.5], [0.5, 0.5, 0.5]])
    np.testing.assert_allclose(m, expected)
    assert p.matrix([]).shape == (0, 0)
    assert p.players() == ["a", "b", "c"]


def test_unknown_outcome_rejected() -> None:
    with pytest.raises(ValueError):
        Payoff().update("a", "b", "won")


def test_json_round_trip_is_exact() -> None:
    p = Payoff(decay=0.97)
    rng = np.random.default_rng(0)
    ids = ["p0", "p1", "p2", "weird id/ü"]
    for _ in range(200):
        h, a = rng.choice(len(ids), size=2, replace=False)
        p.update(ids[h], ids[a], ("win", "draw", "loss")[rng.integers(3)])
    q = Payoff.from_dict(json.loads(json.dumps(p.to_dict())))
    assert q == p
    assert q.decay == p.decay
    np.testing.assert_array_equal(q.matrix(ids), p.matrix(ids))
    for h in ids:
        for a in ids:
            assert q.counts(h, a) == p.counts(h, a)
