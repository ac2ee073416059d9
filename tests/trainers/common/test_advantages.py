"""Hand-worked checks for arena.trainers.common.advantages."""

from __future__ import annotations

import json

import pytest
import torch

from arena.trainers.common import advantages as A

TOL = 1e-6


def approx(v: object) -> object:
    return pytest.approx(v, abs=TOL)


# --------------------------------------------------------------------------- #
# RAE (SPIRAL role-conditioned advantage estimation)
# --------------------------------------------------------------------------- #
class TestRAEBaseline:
    def test_hand_sequence(self) -> None:
        # decay 0.95, b starts at 0; A = R - b is read BEFORE b <- 0.95 b + 0.05 R
        # R = 1 : A = 1 - 0      = 1       ; b = 0.95 * 0      + 0.05 * 1  = 0.05
        # R = 1 : A = 1 - 0.05   = 0.95    ; b = 0.95 * 0.05   + 0.05 * 1  = 0.0975
        # R = -1: A = -1 - 0.0975 = -1.0975 ; b = 0.95 * 0.0975 + 0.05 * -1 = 0.092625 - 0.05 = 0.042625
        rae = A.RAEBaseline(decay=0.95)
        key = ("tictactoe", 0)
        assert rae.advantage(key, 1.0) == approx(1.0)
        assert rae.baseline(key) == approx(0.05)
        assert rae.advantage(key, 1.0) == approx(0.95)
        assert rae.baseline(key) == approx(0.0975)
        assert rae.advantage(key, -1.0) == approx(-1.0975)
        assert rae.baseline(key) == approx(0.042625)

    def test_advantages_in_order(self) -> None:
        rae = A.RAEBaseline()
        out = rae.advantages([("g", "p0")] * 3, [1.0, 1.0, -1.0])
        assert out == approx([1.0, 0.95, -1.0975])
        with pytest.raises(ValueError):
            rae.advantages([("g", "p0")], [1.0, 2.0])

    def test_keyed_by_game_and_role(self) -> None:
        rae = A.RAEBaseline(decay=0.95)
        # same role in two games: separate baselines, both start at 0
        assert rae.advantage(("tictactoe", 0), 1.0) == approx(1.0)  # b_ttt0 = 0.05
        assert rae.advantage(("kuhn_poker", 0), 1.0) == approx(1.0)  # b_kuhn0 = 0.05
        # same game, other role: also fresh
        assert rae.advantage(("tictactoe", 1), -1.0) == approx(-1.0)  # b_ttt1 = -0.05
        # ttt/0 only saw its own reward: A = 0 - 0.05 = -0.05
        assert rae.advantage(("tictactoe", 0), 0.0) == approx(-0.05)
        # ttt/1: A = 0 - (-0.05) = 0.05
        assert rae.advantage(("tictactoe", 1), 0.0) == approx(0.05)
        assert len(rae) == 3
        assert ("kuhn_poker", 0) in rae and ("kuhn_poker", 1) not in rae

    def test_state_dict_exact_resume_through_json(self) -> None:
        keys = [("ttt", 0), ("ttt", 1), ("kuhn", 0)] * 4
        rewards = [1.0, -1.0, 0.5, -1.0, 1.0, 0.0, 1.0, 1.0, -0.5, 0.0, -1.0, 1.0]
        full = A.RAEBaseline(decay=0.9)
        expected = full.advantages(keys, rewards)

        first = A.RAEBaseline(decay=0.9)
        got = first.advantages(keys[:5], rewards[:5])
        blob = json.dumps(first.state_dict())
        assert set(json.loads(blob)["baselines"]) == {"ttt|0", "ttt|1", "kuhn|0"}
        resumed = A.RAEBaseline(decay=0.5)  # decay comes from the state
        resumed.load_state_dict(json.loads(blob))
        assert resumed.decay == 0.9
        got += resumed.advantages(keys[5:], rewards[5:])
        assert got == expected  # bit-exact
        assert resumed.state_dict() == full.state_dict()

    def test_string_keys_equivalent(self) -> None:
        rae = A.RAEBaseline()
        rae.advantage(("ttt", 0), 1.0)
        assert rae.baseline("ttt|0") == approx(0.05)
        assert rae.baseline(("ttt", "0")) == approx(0.05)

    def test_bad_arguments(self) -> None:
        with pytest.raises(ValueError):
            A.RAEBaseline(decay=1.0)
        rae = A.RAEBaseline()
        with pytest.raises(ValueError):
            rae.advantage("no-separator", 1.0)
        with pytest.raises(ValueError):
            rae.advantage(("g", "a|b"), 1.0)


# --------------------------------------------------------------------------- #
# GRPO / Dr. GRPO
# --------------------------------------------------------------------------- #
class TestGroupAdvantages:
    R = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)

    def test_grpo_hand(self) -> None:
        # mean 0.25; deviations [0.75, -0.25, -0.25, -0.25]; sum sq = 0.5625 + 3 * 0.0625 = 0.75
        # unbiased var = 0.75 / 3 = 0.25 -> std 0.5 -> A = [1.5, -0.5, -0.5, -0.5]
        assert A.grpo_advantages(self.R, eps=0.0).tolist() == approx([1.5, -0.5, -0.5, -0.5])
        # default eps 1e-6: 0.75 / 0.500001 = 1.499997, -0.25 / 0.500001 = -0.499999
        assert A.grpo_advantages(self.R).tolist() == pytest.approx(
            [1.499997, -0.499999, -0.499999, -0.499999], abs=1e-6
        )
        # population std: var 0.1875, std 0.4330127 -> [1.7320508, -0.5773503 x3]
        assert A.grpo_advantages(self.R, eps=0.0, unbiased=False).tolist() == approx(
            [1.7320508, -0.5773503, -0.5773503, -0.5773503]
        )

    def test_grpo_degenerate_groups(self) -> None:
        # all-equal rewards: 0 / (0 + eps) = 0 ; a group of one: 0
        assert A.grpo_advantages(torch.tensor([1.0, 1.0, 1.0])).tolist() == [0.0, 0.0, 0.0]
        assert A.grpo_advantages(torch.tensor([3.0])).tolist() == [0.0]

    def test_grpo_batched_over_last_dim(self) -> None:
        batch = torch.stack([self.R, 2 * self.R + 1])  # affine change -> same normalised A
        out = A.grpo_advantages(batch, eps=0.0)
        assert out[0].tolist() == approx([1.5, -0.5, -0.5, -0.5])
        assert out[1].tolist() == approx([1.5, -0.5, -0.5, -0.5])

    def test_dr_grpo_hand(self) -> None:
        # r - mean = [1 - 0.25, -0.25, -0.25, -0.25]
        assert A.dr_grpo_advantages(self.R).tolist() == approx([0.75, -0.25, -0.25, -0.25])
        # no std division: scaling rewards scales advantages
        assert A.dr_grpo_advantages(2 * self.R).tolist() == approx([1.5, -0.5, -0.5, -0.5])
        assert A.dr_grpo_advantages(torch.tensor([1, 0])).tolist() == approx([0.5, -0.5])


# --------------------------------------------------------------------------- #
# GAE
# --------------------------------------------------------------------------- #
class TestGAE:
    REWARDS = [0.0, 0.0, 1.0]
    VALUES = [0.5, 0.6, 0.7]

    def test_hand_gamma1_lam_half(self) -> None:
        # V_3 = 0.  delta = r_t + V_{t+1} - V_t:
        #   delta_2 = 1 + 0 - 0.7 = 0.3 ; delta_1 = 0 + 0.7 - 0.6 = 0.1 ; delta_0 = 0.6 - 0.5 = 0.1
        # A_t = delta_t + 0.5 A_{t+1}: A_2 = 0.3 ; A_1 = 0.1 + 0.15 = 0.25 ; A_0 = 0.1 + 0.125 = 0.225
        # returns = A + V = [0.725, 0.85, 1.0]
        adv, ret = A.gae(self.REWARDS, self.VALUES, gamma=1.0, lam=0.5)
        assert adv.tolist() == approx([0.225, 0.25, 0.3])
        assert ret.tolist() == approx([0.725, 0.85, 1.0])

    def test_lam1_is_monte_carlo(self) -> None:
        # gamma 0.9, lam 1: G = [0.81, 0.9, 1.0]; A = G - V = [0.31, 0.3, 0.3]
        #   delta_2 = 0.3 ; delta_1 = 0.9 * 0.7 - 0.6 = 0.03 ; delta_0 = 0.9 * 0.6 - 0.5 = 0.04
        #   A_1 = 0.03 + 0.9 * 0.3 = 0.3 ; A_0 = 0.04 + 0.9 * 0.3 = 0.31
        adv, ret = A.gae(torch.tensor(self.REWARDS), torch.tensor(self.VALUES), gamma=0.9, lam=1.0)
        assert adv.tolist() == approx([0.31, 0.3, 0.3])
        assert ret.tolist() == approx([0.81, 0.9, 1.0])

    def test_lam0_is_td(self) -> None:
        adv, _ = A.gae(self.REWARDS, self.VALUES, gamma=1.0, lam=0.0)
        assert adv.tolist() == approx([0.1, 0.1, 0.3])

    def test_detached_and_checked(self) -> None:
        v = torch.tensor(self.VALUES, requires_grad=True)
        adv, ret = A.gae(torch.tensor(self.REWARDS), v)
        assert not adv.requires_grad and not ret.requires_grad
        with pytest.raises(ValueError):
            A.gae([0.0, 1.0], [0.5])
        with pytest.raises(ValueError):
            A.gae([0.0], [0.5], lam=1.5)


def test_length_adaptive_lambda() -> None:
    # 1 - 1/(0.4 L): L = 10 -> 1 - 1/4 = 0.75 ; L = 100 -> 1 - 1/40 = 0.975
    # L = 2 -> 1 - 1/0.8 = -0.25 -> clamped to 0 ; L = 0 -> 0
    assert A.length_adaptive_lambda(10) == approx(0.75)
    assert A.length_adaptive_lambda(100) == approx(0.975)
    assert A.length_adaptive_lambda(2) == 0.0
    assert A.length_adaptive_lambda(0) == 0.0
    assert A.length_adaptive_lambda(4, alpha=0.5) == approx(0.5)  # 1 - 1/2
    t = A.length_adaptive_lambda(torch.tensor([0, 2, 10, 100]))
    assert t.tolist() == approx([0.0, 0.0, 0.75, 0.975])
    with pytest.raises(ValueError):
        A.length_adaptive_lambda(10, alpha=0.0)


def test_bounded_value() -> None:
    raw = torch.tensor([-1e4, -1.0, 0.0, 1.0, 1e4], dtype=torch.float64, requires_grad=True)
    v = A.bounded_value(raw)
    assert ((v >= -1.0) & (v <= 1.0)).all()
    # [-1, 1]: low + 2 (tanh + 1)/2 = tanh(raw): tanh(1) = 0.7615942
    assert v.tolist() == approx([-1.0, -0.7615942, 0.0, 0.7615942, 1.0])
    (g,) = torch.autograd.grad(v.sum(), raw)
    # d/draw = (high - low)/2 (1 - tanh^2): 1 at 0, 1 - 0.58002 = 0.4199743 at +-1, 0 when saturated
    assert torch.isfinite(g).all()
    assert g.tolist() == approx([0.0, 0.4199743, 1.0, 0.4199743, 0.0])
    # [0, 10]: 0 -> 5 ; 1 -> 10 (1.7615942)/2 = 8.807971
    w = A.bounded_value(torch.tensor([0.0, 1.0], dtype=torch.float64), low=0.0, high=10.0)
    assert w.tolist() == approx([5.0, 8.807971])
    with pytest.raises(ValueError):
        A.bounded_value(raw, low=1.0, high=1.0)
