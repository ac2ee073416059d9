"""Hand-worked checks for arena.trainers.common.losses.

Conventions: every tensor is float64; probabilities are chosen so the
arithmetic is easy, and the expected numbers are written out in comments
(ln values to 7 decimals).  pi = exp(logp), mu = exp(old_logp), r = pi / mu.
With agg='token_mean' and n valid tokens, a kept DPPO token has gradient
d loss / d logp = -A * min(r, c) / n and a masked one has gradient 0.
"""

from __future__ import annotations

import math

import pytest
import torch

from arena.trainers.common import losses as L

D = torch.float64
TOL = 1e-6


def lp(*rows: list[float] | tuple[float, ...], grad: bool = False) -> torch.Tensor:
    """log of a [B, T] table of probabilities."""
    t = torch.log(torch.tensor([list(r) for r in rows], dtype=D))
    return t.requires_grad_(grad)


def tk(*rows: list[list[float]]) -> torch.Tensor:
    """log of a [B, T, K] table of top-K probabilities."""
    return torch.log(torch.tensor([list(r) for r in rows], dtype=D))


def ten(*rows: list[float]) -> torch.Tensor:
    return torch.tensor([list(r) for r in rows], dtype=D)


def grad_of(loss: torch.Tensor, x: torch.Tensor) -> list[float]:
    (g,) = torch.autograd.grad(loss, x)
    return g.flatten().tolist()


def val(x: torch.Tensor) -> float:
    return float(x.detach())


def approx(v: float | list[float]) -> object:
    return pytest.approx(v, abs=TOL)


ONES3 = ten([1.0, 1.0, 1.0])

# Shared 1x3 case:  mu = [0.5, 0.5, 0.2],  pi = [0.8, 0.3, 0.25]
#   r = [1.6, 0.6, 1.25];   pi - mu = [+0.3, -0.2, +0.05]
#   ln 0.8 = -0.2231436, ln 0.3 = -1.2039728, ln 0.25 = -1.3862944
MU = [0.5, 0.5, 0.2]
PI = [0.8, 0.3, 0.25]


# --------------------------------------------------------------------------- #
# aggregate
# --------------------------------------------------------------------------- #
class TestAggregate:
    # per-token loss [[1, 2, 3], [4, 5(pad), 6(pad)]]
    LOSS = ten([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    MASK = ten([1.0, 1.0, 1.0], [1.0, 0.0, 0.0])

    def test_token_mean(self) -> None:
        # (1 + 2 + 3 + 4) / 4 valid tokens = 2.5
        assert float(L.aggregate(self.LOSS, self.MASK, "token_mean")) == approx(2.5)

    def test_seq_mean(self) -> None:
        # seq 0: (1+2+3)/3 = 2 ; seq 1: 4/1 = 4 ; mean over sequences = 3
        assert float(L.aggregate(self.LOSS, self.MASK, "seq_mean")) == approx(3.0)

    def test_seq_sum_norm(self) -> None:
        # seq 0: 6/4 = 1.5 ; seq 1: 4/4 = 1.0 ; mean = 1.25
        assert float(L.aggregate(self.LOSS, self.MASK, "seq_sum_norm", max_len=4)) == approx(1.25)

    def test_seq_sum_norm_requires_max_len(self) -> None:
        with pytest.raises(ValueError, match="max_len"):
            L.aggregate(self.LOSS, self.MASK, "seq_sum_norm")

    def test_unknown_mode(self) -> None:
        with pytest.raises(ValueError, match="token_mean"):
            L.aggregate(self.LOSS, self.MASK, "sum")

    def test_padding_values_do_not_leak(self) -> None:
        loss = self.LOSS.clone()
        loss[1, 1] = float("nan")
        loss[1, 2] = float("inf")
        for mode in L.AGG_MODES:
            v = L.aggregate(loss, self.MASK.bool(), mode, max_len=4)
            assert torch.isfinite(v)

    def test_empty_sequence_excluded_from_seq_mean(self) -> None:
        # seq 1 has no valid token: seq_mean = mean over seq 0 only = (1+2+3)/3 = 2
        mask = ten([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
        assert float(L.aggregate(self.LOSS, mask, "seq_mean")) == approx(2.0)
        # no valid token at all -> 0
        assert float(L.aggregate(self.LOSS, torch.zeros_like(mask), "token_mean")) == 0.0

    def test_modes_through_a_loss_gradient(self) -> None:
        # r = 1 everywhere (logp == old_logp) and a huge eps: nothing masked, so the
        # DPPO per-token loss is -A * logp and d/dlogp = -A * weight.
        # 2x3, seq 1 has one valid token.  A = [[1, 2, 3], [4, 5, 6]].
        old = lp([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
        logp = old.clone().requires_grad_(True)
        adv = self.LOSS
        # token_mean: weight 1/4 -> grads [-1/4, -2/4, -3/4, -4/4, 0, 0]
        loss, _ = L.dppo_binary_tv(logp, old, adv, self.MASK, eps_low=1, eps_high=1)
        assert grad_of(loss, logp) == approx([-0.25, -0.5, -0.75, -1.0, 0.0, 0.0])
        # seq_mean: seq 0 weight 1/(3*2), seq 1 weight 1/(1*2)
        #   -> [-1/6, -2/6, -3/6, -4/2, 0, 0]
        loss, _ = L.dppo_binary_tv(logp, old, adv, self.MASK, eps_low=1, eps_high=1, agg="seq_mean")
        assert grad_of(loss, logp) == approx([-1 / 6, -2 / 6, -3 / 6, -2.0, 0.0, 0.0])
        # seq_sum_norm, max_len 4: weight 1/(4*2) = 1/8 -> [-1/8, -2/8, -3/8, -4/8, 0, 0]
        loss, _ = L.dppo_binary_tv(
            logp, old, adv, self.MASK, eps_low=1, eps_high=1, agg="seq_sum_norm", max_len=4
        )
        assert grad_of(loss, logp) == approx([-0.125, -0.25, -0.375, -0.5, 0.0, 0.0])
        with pytest.raises(ValueError):
            L.dppo_binary_tv(logp, old, adv, self.MASK, agg="seq_sum_norm")


# --------------------------------------------------------------------------- #
# PPO clip
# --------------------------------------------------------------------------- #
class TestPPOClip:
    def test_hand_values(self) -> None:
        # r = [1.6, 0.6, 1.25], A = [+1, +1, -1], clip 0.2 -> clip(r) = [1.2, 0.8, 1.2]
        # t0: -min(1.6, 1.2)   = -1.2   (clipped, grad 0)
        # t1: -min(0.6, 0.8)   = -0.6   (unclipped, dL/dlogp = -A r = -0.6)
        # t2: -min(-1.25,-1.2) = +1.25  (unclipped, dL/dlogp = -A r = +1.25)
        # mean = (-1.2 - 0.6 + 1.25) / 3 = -0.55 / 3 = -0.1833333
        logp = lp(PI, grad=True)
        loss, stats = L.ppo_clip(logp, lp(MU), ten([1.0, 1.0, -1.0]), ONES3)
        assert val(loss) == approx(-0.1833333)
        # grads /3: [0, -0.2, 0.4166667]
        assert grad_of(loss, logp) == approx([0.0, -0.2, 0.4166667])
        assert stats["clip_frac"] == approx(1 / 3)
        assert stats["dual_clip_frac"] == 0.0
        assert stats["ratio_mean"] == approx(1.15)  # (1.6 + 0.6 + 1.25) / 3
        # k3 = r - 1 - ln r: 0.6 - 0.4700036 = 0.1299964 ; -0.4 + 0.5108256 = 0.1108256 ;
        #                    0.25 - 0.2231436 = 0.0268564 ; mean = 0.2676784 / 3
        assert stats["approx_kl"] == approx(0.0892261)

    def test_dual_clip(self) -> None:
        # mu = [0.2, 0.2, 0.5], pi = [0.8, 0.25, 0.8] -> r = [4, 1.25, 1.6]; A = [-1, -1, +1]; c = 3
        # t0: max(4, 1.2) = 4, dual: min(4, 3*1) = 3  (constant, grad 0)
        # t1: max(1.25, 1.2) = 1.25 < 3              (grad -A r = 1.25)
        # t2: A > 0: -min(1.6, 1.2) = -1.2           (clipped, grad 0)
        # mean = (3 + 1.25 - 1.2) / 3 = 3.05 / 3 = 1.0166667
        mu, pi, adv = [0.2, 0.2, 0.5], [0.8, 0.25, 0.8], ten([-1.0, -1.0, 1.0])
        logp = lp(pi, grad=True)
        loss, stats = L.ppo_clip(logp, lp(mu), adv, ONES3, dual_clip=3.0)
        assert val(loss) == approx(1.0166667)
        assert grad_of(loss, logp) == approx([0.0, 0.4166667, 0.0])
        assert stats["dual_clip_frac"] == approx(1 / 3)
        assert stats["clip_frac"] == approx(1 / 3)  # only t2's clipped branch is active
        # without dual clip t0 contributes 4 with grad 4/3: (4 + 1.25 - 1.2)/3 = 1.35
        logp = lp(pi, grad=True)
        loss, _ = L.ppo_clip(logp, lp(mu), adv, ONES3)
        assert val(loss) == approx(1.35)
        assert grad_of(loss, logp) == approx([4 / 3, 0.4166667, 0.0])

    def test_dual_clip_must_exceed_one(self) -> None:
        with pytest.raises(ValueError):
            L.ppo_clip(lp(PI), lp(MU), ONES3, ONES3, dual_clip=1.0)

    def test_asymmetric_clip(self) -> None:
        # clip_high = 0.7 lets r = 1.6 through: t0 = -1.6 -> (-1.6 - 0.6 + 1.25)/3 = -0.3166667
        loss, stats = L.ppo_clip(lp(PI), lp(MU), ten([1.0, 1.0, -1.0]), ONES3, clip_high=0.7)
        assert val(loss) == approx(-0.3166667)
        assert stats["clip_frac"] == 0.0


# --------------------------------------------------------------------------- #
# DPPO binary TV
# --------------------------------------------------------------------------- #
class TestDPPOBinaryTV:
    def test_positive_advantage(self) -> None:
        # A = +1 everywhere; pi - mu = [+0.3, -0.2, +0.05], eps_high = 0.15
        # t0: +0.3 > 0.15 with A > 0 -> masked
        # t1: moved against A          -> kept: -1 * 0.6  * ln 0.3  = +0.7223837
        # t2: +0.05 inside the band    -> kept: -1 * 1.25 * ln 0.25 = +1.7328680
        # loss = (0 + 0.7223837 + 1.7328680) / 3 = 2.4552517 / 3 = 0.8184172
        logp = lp(PI, grad=True)
        loss, stats = L.dppo_binary_tv(logp, lp(MU), ONES3, ONES3)
        assert val(loss) == approx(0.8184172)
        # grads: [0, -A r / 3 = -0.2, -1.25 / 3 = -0.4166667]
        assert grad_of(loss, logp) == approx([0.0, -0.2, -0.4166667])
        assert stats["mask_frac"] == approx(1 / 3)
        assert stats["tv"] == approx(0.1833333)  # (0.3 + 0.2 + 0.05) / 3
        assert stats["ratio_mean"] == approx(1.15)  # (1.6 + 0.6 + 1.25) / 3

    def test_eps_high_controls_positive_side(self) -> None:
        # eps_high = 0.35 > 0.3: t0 kept too: -1.6 * ln 0.8 = +0.3570297
        # loss = (0.3570297 + 0.7223837 + 1.7328680) / 3 = 2.8122814 / 3 = 0.9374271
        loss, stats = L.dppo_binary_tv(lp(PI), lp(MU), ONES3, ONES3, eps_high=0.35)
        assert val(loss) == approx(0.9374271)
        assert stats["mask_frac"] == 0.0

    def test_negative_advantage_and_eps_low(self) -> None:
        # A = -1; mu = [0.5, 0.5, 0.2], pi = [0.3, 0.8, 0.1] -> pi - mu = [-0.2, +0.3, -0.1]
        #   r = [0.6, 1.6, 0.5]; ln 0.3 = -1.2039728, ln 0.8 = -0.2231436, ln 0.1 = -2.3025851
        # default eps_low = 0.15: t0 (-0.2 < -0.15) masked; t1 moved against A, kept;
        #   t2 (-0.1 > -0.15) kept.
        #   t1: -(-1) * 1.6 * ln 0.8 = -0.3570297 ; t2: 0.5 * ln 0.1 = -1.1512925
        #   loss = (-0.3570297 - 1.1512925) / 3 = -0.5027741 ; grads [0, 1.6/3, 0.5/3]
        mu, pi, adv = [0.5, 0.5, 0.2], [0.3, 0.8, 0.1], -ONES3
        logp = lp(pi, grad=True)
        loss, stats = L.dppo_binary_tv(logp, lp(mu), adv, ONES3)
        assert val(loss) == approx(-0.5027741)
        assert grad_of(loss, logp) == approx([0.0, 0.5333333, 0.1666667])
        assert stats["mask_frac"] == approx(1 / 3)
        # eps_low = 0.05 (eps_high irrelevant for A < 0): t2 masked as well
        #   loss = -0.3570297 / 3 = -0.1190099 ; grads [0, 0.5333333, 0]
        logp = lp(pi, grad=True)
        loss, stats = L.dppo_binary_tv(logp, lp(mu), adv, ONES3, eps_low=0.05, eps_high=10.0)
        assert val(loss) == approx(-0.1190099)
        assert grad_of(loss, logp) == approx([0.0, 0.5333333, 0.0])
        assert stats["mask_frac"] == approx(2 / 3)

    def test_ratio_cap_c(self) -> None:
        # nothing masked (eps = 1); c = 1.5 caps r = 1.6 -> min(r, c) = [1.5, 0.6, 1.25]
        # grads = -A min(r, c) / 3 = [-0.5, -0.2, -0.4166667]
        logp = lp(PI, grad=True)
        loss, _ = L.dppo_binary_tv(logp, lp(MU), ONES3, ONES3, eps_low=1, eps_high=1, c=1.5)
        assert grad_of(loss, logp) == approx([-0.5, -0.2, -0.4166667])

    def test_sequence_advantage_broadcast_and_padding(self) -> None:
        # 2x3, adv given per sequence [+1, -1]; padding has logp = -inf and must not matter.
        old = lp([0.5, 0.5, 0.2], [0.5, 0.5, 0.5])
        logp = lp([0.8, 0.3, 0.25], [0.5, 1.0, 1.0]).detach().clone()
        logp[1, 1:] = float("-inf")
        logp.requires_grad_(True)
        mask = ten([1, 1, 1], [1, 0, 0])
        loss, stats = L.dppo_binary_tv(logp, old, torch.tensor([1.0, -1.0], dtype=D), mask)
        # row 0 as in test_positive_advantage; row 1 t0: r = 1, A = -1 -> grad +1/4
        # n = 4 valid tokens: grads [0, -0.6/4, -1.25/4, +1/4, 0, 0]
        assert torch.isfinite(loss)
        assert grad_of(loss, logp) == approx([0.0, -0.15, -0.3125, 0.25, 0.0, 0.0])
        assert stats["mask_frac"] == approx(0.25)


# --------------------------------------------------------------------------- #
# DPPO binary KL
# --------------------------------------------------------------------------- #
class TestDPPOBinaryKL:
    # KL = mu ln(mu/pi) + (1-mu) ln((1-mu)/(1-pi))
    # t0: 0.5 ln(0.5/0.8) + 0.5 ln(0.5/0.2) = 0.5 ln 1.5625 = 0.2231436
    # t1: 0.5 ln(0.5/0.3) + 0.5 ln(0.5/0.7) = 0.5 ln(0.25/0.21) = 0.5 * 0.1743534 = 0.0871767
    # t2: 0.2 ln(0.2/0.25) + 0.8 ln(0.8/0.75) = -0.0446287 + 0.0516308 = 0.0070021
    KL = [0.2231436, 0.0871767, 0.0070021]

    def test_binary_kl_values(self) -> None:
        assert L.binary_kl(lp(MU), lp(PI)).flatten().tolist() == approx(self.KL)

    def test_positive_advantage(self) -> None:
        # A = +1: t0 KL > 0.05 and pi > mu -> masked; t1 KL > 0.05 but pi < mu -> kept;
        # t2 KL < 0.05 -> kept.  Same kept set as the TV case: loss = 0.8184172
        logp = lp(PI, grad=True)
        loss, stats = L.dppo_binary_kl(logp, lp(MU), ONES3, ONES3)
        assert val(loss) == approx(0.8184172)
        assert grad_of(loss, logp) == approx([0.0, -0.2, -0.4166667])
        assert stats["mask_frac"] == approx(1 / 3)
        assert stats["kl"] == approx(0.1057741)  # (0.2231436 + 0.0871767 + 0.0070021) / 3
        assert stats["ratio_mean"] == approx(1.15)

    def test_negative_advantage(self) -> None:
        # A = -1: t1 (pi < mu, KL 0.087 > 0.05) masked; t0, t2 have pi > mu -> kept.
        # t0: -(-1) * 1.6 * ln 0.8 = -0.3570297 ; t2: 1.25 * ln 0.25 = -1.7328680
        # loss = -2.0898977 / 3 = -0.6966326 ; grads [1.6/3, 0, 1.25/3]
        logp = lp(PI, grad=True)
        loss, stats = L.dppo_binary_kl(logp, lp(MU), -ONES3, ONES3)
        assert val(loss) == approx(-0.6966326)
        assert grad_of(loss, logp) == approx([0.5333333, 0.0, 0.4166667])
        assert stats["mask_frac"] == approx(1 / 3)

    def test_eps(self) -> None:
        # eps = 0.005 < 0.0070021: t2 (pi > mu, A > 0) now masked too -> only t1 kept
        # loss = 0.7223837 / 3 = 0.2407946
        loss, stats = L.dppo_binary_kl(lp(PI), lp(MU), ONES3, ONES3, eps=0.005)
        assert val(loss) == approx(0.2407946)
        assert stats["mask_frac"] == approx(2 / 3)

    def test_extreme_probabilities_finite(self) -> None:
        # mu -> 1 or pi -> 1 must not produce NaN
        kl = L.binary_kl(torch.tensor([0.0, -1e-12, -5.0], dtype=D), torch.tensor([-0.3, 0.0, -1e-9], dtype=D))
        assert torch.isfinite(kl).all() and (kl >= 0).all()


# --------------------------------------------------------------------------- #
# Top-K divergences
# --------------------------------------------------------------------------- #
# 1x3 tokens, K = 2, slot 0 is the sampled token:
#   t0: mu = (0.5, 0.3 | tail 0.2),  pi = (0.7, 0.25 | tail 0.05)
#   t1: mu = (0.4, 0.4 | tail 0.2),  pi = (0.45, 0.3 | tail 0.25)
#   t2: mu = (0.3, 0.6 | tail 0.1),  pi = (0.35, 0.1 | tail 0.55)
TOPK_MU = [[0.5, 0.3], [0.4, 0.4], [0.3, 0.6]]
TOPK_PI = [[0.7, 0.25], [0.45, 0.3], [0.35, 0.1]]
SAMP_MU = [0.5, 0.4, 0.3]
SAMP_PI = [0.7, 0.45, 0.35]
# TV = 0.5 * sum |mu - pi| over 3 buckets:
#   t0: 0.5 (0.2 + 0.05 + 0.15) = 0.2 ; t1: 0.5 (0.05 + 0.1 + 0.05) = 0.1 ;
#   t2: 0.5 (0.05 + 0.5 + 0.45) = 0.5
TOPK_TV = [0.2, 0.1, 0.5]
# KL = sum mu ln(mu / pi):
#   t0: 0.5 ln(5/7) + 0.3 ln(1.2) + 0.2 ln 4 = -0.1682361 + 0.0546965 + 0.2772589 = 0.1637193
#   t1: 0.4 ln(0.4/0.45) + 0.4 ln(4/3) + 0.2 ln 0.8 = -0.0471132 + 0.1150728 - 0.0446287 = 0.0233309
#   t2: 0.3 ln(0.3/0.35) + 0.6 ln 6 + 0.1 ln(0.1/0.55) = -0.0462452 + 1.0750557 - 0.1704748 = 0.8583357
TOPK_KL = [0.1637193, 0.0233309, 0.8583357]


class TestTopK:
    def test_tail_bucket(self) -> None:
        # (0.5, 0.3) -> tail 1 - 0.8 = 0.2 ; (0.6, 0.45) sums to 1.05 -> tail clamped to 0
        buckets = L.with_tail_bucket(tk([[0.5, 0.3], [0.6, 0.45]]))
        assert buckets.flatten().tolist() == approx([0.5, 0.3, 0.2, 0.6, 0.45, 0.0])

    def test_divergences(self) -> None:
        assert L.topk_tv(tk(TOPK_MU), tk(TOPK_PI)).flatten().tolist() == approx(TOPK_TV)
        assert L.topk_kl(tk(TOPK_MU), tk(TOPK_PI)).flatten().tolist() == approx(TOPK_KL)

    def test_divergences_with_clamped_tail(self) -> None:
        # mu = (0.6, 0.45 | 0) (clamped tail), pi = (0.5, 0.3 | 0.2)
        # TV = 0.5 (0.1 + 0.15 + 0.2) = 0.225
        # KL = 0.6 ln 1.2 + 0.45 ln 1.5 + 0 * ln(0/0.2) = 0.1093929 + 0.1824593 = 0.2918522
        mu, pi = tk([[0.6, 0.45]]), tk([[0.5, 0.3]])
        assert float(L.topk_tv(mu, pi)) == approx(0.225)
        assert float(L.topk_kl(mu, pi)) == approx(0.2918522)

    def test_dppo_topk_tv(self) -> None:
        # A = +1; pi_a > mu_a on all three tokens; TV = [0.2, 0.1, 0.5] vs eps 0.15
        # t0 masked, t1 kept, t2 masked (binary TV there would be only 0.05!)
        # t1: r = 0.45/0.4 = 1.125, ln 0.45 = -0.7985077: -1.125 * -0.7985077 = 0.8983211
        # loss = 0.8983211 / 3 = 0.2994404 ; grads [0, -1.125/3 = -0.375, 0]
        logp = lp(SAMP_PI, grad=True)
        loss, stats = L.dppo_topk_tv(logp, lp(SAMP_MU), ONES3, ONES3, tk(TOPK_MU), tk(TOPK_PI))
        assert val(loss) == approx(0.2994404)
        assert grad_of(loss, logp) == approx([0.0, -0.375, 0.0])
        assert stats["mask_frac"] == approx(2 / 3)
        assert stats["tv"] == approx(0.2666667)  # (0.2 + 0.1 + 0.5) / 3
        # r = [1.4, 1.125, 1.1666667] -> mean 3.6916667 / 3
        assert stats["ratio_mean"] == approx(1.2305556)

    def test_dppo_topk_tv_direction(self) -> None:
        # A = -1 on the same tensors: pi_a > mu_a everywhere -> moving against A, nothing masked
        _, stats = L.dppo_topk_tv(lp(SAMP_PI), lp(SAMP_MU), -ONES3, ONES3, tk(TOPK_MU), tk(TOPK_PI))
        assert stats["mask_frac"] == 0.0
        # swap the roles (pi_a < mu_a) with A = -1: TV unchanged, t0 and t2 exceed eps_low
        _, stats = L.dppo_topk_tv(lp(SAMP_MU), lp(SAMP_PI), -ONES3, ONES3, tk(TOPK_PI), tk(TOPK_MU))
        assert stats["mask_frac"] == approx(2 / 3)
        # eps_low = 0.3 keeps t0 (0.2) and masks only t2 (0.5)
        _, stats = L.dppo_topk_tv(
            lp(SAMP_MU), lp(SAMP_PI), -ONES3, ONES3, tk(TOPK_PI), tk(TOPK_MU), eps_low=0.3
        )
        assert stats["mask_frac"] == approx(1 / 3)

    def test_dppo_topk_kl(self) -> None:
        # KL = [0.1637193, 0.0233309, 0.8583357] vs eps 0.05, all pi_a > mu_a, A = +1
        # -> t0, t2 masked, t1 kept: same loss as the TV case, 0.2994404
        logp = lp(SAMP_PI, grad=True)
        loss, stats = L.dppo_topk_kl(logp, lp(SAMP_MU), ONES3, ONES3, tk(TOPK_MU), tk(TOPK_PI))
        assert val(loss) == approx(0.2994404)
        assert grad_of(loss, logp) == approx([0.0, -0.375, 0.0])
        assert stats["mask_frac"] == approx(2 / 3)
        assert stats["kl"] == approx(0.3484620)  # 1.0453859 / 3
        # eps = 0.02 < 0.0233309 masks t1 as well
        _, stats = L.dppo_topk_kl(lp(SAMP_PI), lp(SAMP_MU), ONES3, ONES3, tk(TOPK_MU), tk(TOPK_PI), eps=0.02)
        assert stats["mask_frac"] == approx(1.0)

    def test_topk_shape_check(self) -> None:
        with pytest.raises(ValueError):
            L.dppo_topk_tv(lp(SAMP_PI), lp(SAMP_MU), ONES3, ONES3, tk(TOPK_MU)[:, :2], tk(TOPK_PI)[:, :2])

    def test_topk_logp_with_grad_is_detached(self) -> None:
        topk_pi = tk(TOPK_PI).requires_grad_(True)
        logp = lp(SAMP_PI, grad=True)
        loss, _ = L.dppo_topk_kl(logp, lp(SAMP_MU), ONES3, ONES3, tk(TOPK_MU), topk_pi)
        loss.backward()
        assert topk_pi.grad is None


# --------------------------------------------------------------------------- #
# DRPO
# --------------------------------------------------------------------------- #
class TestDRPO:
    def test_hand_values(self) -> None:
        # mu = [0.5, 0.5, 0.2], pi = [0.8, 0.3, 0.2] -> r = [1.6, 0.6, 1.0]; A = [+1, -1, +1]; eps = 0.15
        # L = -A r + |A| mu (r-1)^2 / (2 eps)    (2 eps = 0.3)
        #   t0: -1.6 + 0.5 * 0.36 / 0.3 = -1.6 + 0.6       = -1.0
        #   t1: +0.6 + 0.5 * 0.16 / 0.3 = +0.6 + 0.2666667 = +0.8666667
        #   t2: -1.0 + 0                                     = -1.0
        #   mean = -1.1333333 / 3 = -0.3777778
        # dL/dlogp = -A r + |A| mu (r-1) r / eps
        #   t0: -1.6 + 0.5 * 0.6 * 1.6 / 0.15    = -1.6 + 3.2 = 1.6  -> /3 = 0.5333333
        #   t1: +0.6 + 0.5 * (-0.4) * 0.6 / 0.15 = 0.6 - 0.8 = -0.2  -> /3 = -0.0666667
        #   t2: -1.0                                                -> /3 = -0.3333333
        logp = lp([0.8, 0.3, 0.2], grad=True)
        loss, stats = L.drpo(logp, lp(MU), ten([1.0, -1.0, 1.0]), ONES3)
        assert val(loss) == approx(-0.3777778)
        assert grad_of(loss, logp) == approx([0.5333333, -0.0666667, -0.3333333])
        assert stats["mask_frac"] == 0.0
        assert stats["tv"] == approx(0.1666667)  # (0.3 + 0.2 + 0) / 3
        assert stats["penalty"] == approx(0.2888889)  # (0.6 + 0.2666667 + 0) / 3
        assert stats["ratio_mean"] == approx(3.2 / 3)

    def test_gradient_at_ratio_one_is_plain_pg(self) -> None:
        # r = 1 -> dL/dlogp = -A / n, identical to the plain policy gradient of -A * logp
        old = lp([0.5, 0.2, 0.7], [0.1, 0.9, 0.5])
        adv = ten([0.7, 0.7, 0.7], [-1.3, -1.3, -1.3])
        mask = ten([1, 1, 1], [1, 1, 0])
        logp = old.clone().requires_grad_(True)
        loss, _ = L.drpo(logp, old, adv, mask)
        g_drpo = grad_of(loss, logp)
        logp2 = old.clone().requires_grad_(True)
        g_pg = grad_of(L.aggregate(-adv * logp2, mask), logp2)
        # n = 5 valid tokens: [-0.7/5] * 3 + [1.3/5] * 2 + [0]
        assert g_drpo == approx([-0.14, -0.14, -0.14, 0.26, 0.26, 0.0])
        assert g_drpo == approx(g_pg)

    def test_eps_positive(self) -> None:
        with pytest.raises(ValueError):
            L.drpo(lp(PI), lp(MU), ONES3, ONES3, eps=0.0)


# --------------------------------------------------------------------------- #
# Predictive mask
# --------------------------------------------------------------------------- #
class TestPredictiveMask:
    # Case 1: K = 1 (sampled token + tail), 1x2 tokens, mu = (0.5 | 0.5), pi = (0.8 | 0.2).
    # p = (0.8, 0.2), |p|^2 = 0.68.  delta_z = eta A (e_a - p);
    # dp_j = eta A p_j (1[j=a] - p_j - p_a + |p|^2):
    #   dp_a    = eta A 0.8 (1 - 0.8 - 0.8 + 0.68) = +0.064 eta A
    #   dp_tail = eta A 0.2 (0 - 0.2 - 0.8 + 0.68) = -0.064 eta A
    # TV = 0.5 (0.3 + 0.3) = 0.3 > 0.15
    #   dTV = 0.5 (sign(+0.3) 0.064 + sign(-0.3) (-0.064)) eta A = +0.064 eta A
    # KL = 0.2231436 > 0.05
    #   dKL = eta A [(p_a - mu_a) - <p - mu, p>] = eta A [0.3 - (0.24 - 0.06)] = +0.12 eta A
    # Token 0: A = +1 (pi moved toward the sampled token and A pushes further) -> masked
    # Token 1: A = -1 (the step pulls pi back toward mu)                      -> kept
    MU1 = [0.5, 0.5]
    PI1 = [0.8, 0.8]
    ADV1 = ten([1.0, -1.0])
    MASK1 = ten([1.0, 1.0])

    def _case1(self) -> tuple[torch.Tensor, torch.Tensor]:
        return tk([[0.5], [0.5]]), tk([[0.8], [0.8]])

    @pytest.mark.parametrize("div,d,dd", [("tv", 0.3, 0.064), ("kl", 0.2231436, 0.12)])
    def test_predicted_change_closed_form(self, div: str, d: float, dd: float) -> None:
        mu, pi = self._case1()
        idx = torch.zeros(1, 2, dtype=torch.long)
        D_, dD = L.predicted_divergence_change(mu, pi, idx, self.ADV1, div, lr_scale=2.0)
        assert D_.flatten().tolist() == approx([d, d])
        assert dD.flatten().tolist() == approx([2 * dd, -2 * dd])  # eta = 2, A = +-1

    @pytest.mark.parametrize("div", ["tv", "kl"])
    def test_mask_toward_keep_pullback(self, div: str) -> None:
        # token 0 masked; token 1 kept: -(-1) * r * ln 0.8 with r = 1.6 -> -0.3570297
        # loss = -0.3570297 / 2 = -0.1785148 ; grads [0, +1.6/2 = 0.8]
        mu, pi = self._case1()
        logp = lp(self.PI1, grad=True)
        loss, stats = L.predictive_mask(
            logp, lp(self.MU1), self.ADV1, self.MASK1, mu, pi, divergence=div
        )
        assert val(loss) == approx(-0.1785148)
        assert grad_of(loss, logp) == approx([0.0, 0.8])
        assert stats["mask_frac"] == approx(0.5)
        assert stats["outside_frac"] == approx(1.0)
        assert stats["increase_frac"] == approx(0.5)
        assert div in stats and stats["ratio_mean"] == approx(1.6)

    def test_keeps_when_step_reduces_divergence_despite_direction(self) -> None:
        # Case 2: K = 2, mu = (a 0.1, b 0.8 | 0.1), pi = (a 0.15, b 0.1 | 0.75), A = +1.
        # pi_a > mu_a and the divergence is large, so dppo_topk_tv / dppo_topk_kl mask it,
        # but raising a takes mass mostly from the over-weighted tail:
        #   |p|^2 = 0.0225 + 0.01 + 0.5625 = 0.595
        #   dp = (0.15 * 1.295, 0.1 * 0.345, 0.75 * -0.305) = (0.19425, 0.0345, -0.22875)
        #   TV = 0.5 (0.05 + 0.7 + 0.65) = 0.7 ;
        #   dTV = 0.5 (+0.19425 - 0.0345 - 0.22875) = -0.0345 < 0 -> keep
        #   KL = 0.1 ln(0.1/0.15) + 0.8 ln 8 + 0.1 ln(0.1/0.75)
        #      = -0.0405465 + 1.6635532 - 0.2014903 = 1.4215164
        #   <p - mu, p> = 0.0075 - 0.07 + 0.4875 = 0.425 ; dKL = 0.05 - 0.425 = -0.375 < 0 -> keep
        mu, pi = tk([[0.1, 0.8]]), tk([[0.15, 0.1]])
        idx = torch.zeros(1, 1, dtype=torch.long)
        a = torch.ones(1, 1, dtype=D)
        d_tv, dd_tv = L.predicted_divergence_change(mu, pi, idx, a, "tv")
        d_kl, dd_kl = L.predicted_divergence_change(mu, pi, idx, a, "kl")
        assert (float(d_tv), float(dd_tv)) == approx((0.7, -0.0345))
        assert (float(d_kl), float(dd_kl)) == approx((1.4215164, -0.375))
        logp, old, one = lp([0.15]), lp([0.1]), ten([1.0])
        for div, naive in (("tv", L.dppo_topk_tv), ("kl", L.dppo_topk_kl)):
            _, s_pred = L.predictive_mask(logp, old, one, one, mu, pi, divergence=div)
            _, s_naive = naive(logp, old, one, one, mu, pi)
            assert s_pred["mask_frac"] == 0.0
            assert s_naive["mask_frac"] == 1.0

    def test_inside_region_never_masked(self) -> None:
        # mu = (0.5 | 0.5), pi = (0.55 | 0.45), A = +1: TV = 0.05 < 0.15 although dTV > 0
        logp, old, one = lp([0.55]), lp([0.5]), ten([1.0])
        _, stats = L.predictive_mask(logp, old, one, one, tk([[0.5]]), tk([[0.55]]))
        assert stats["mask_frac"] == 0.0
        assert stats["increase_frac"] == 1.0
        assert stats["outside_frac"] == 0.0

    def test_explicit_sampled_index_and_inference_agree(self) -> None:
        # sampled token in slot 1 of the case-2 tensors reordered (b, a)
        mu, pi = tk([[0.8, 0.1]]), tk([[0.1, 0.15]])
        logp, old, one = lp([0.15]), lp([0.1]), ten([1.0])
        assert L.infer_sampled_index(logp, old, mu, pi).tolist() == [[1]]
        out_inf = L.predictive_mask(logp, old, one, one, mu, pi)
        out_idx = L.predictive_mask(logp, old, one, one, mu, pi, sampled_index=torch.tensor([[1]]))
        assert out_inf[1] == out_idx[1]
        with pytest.raises(ValueError):
            L.predictive_mask(logp, old, one, one, mu, pi, sampled_index=torch.tensor([[2]]))

    @pytest.mark.parametrize("div", ["tv", "kl"])
    def test_first_order_prediction_matches_finite_difference(self, div: str) -> None:
        # softmax over K+1 = 5 buckets; apply delta_z = h * A (e_a - p) and compare
        # (D(mu, softmax(z + delta_z)) - D(mu, p)) / h with the closed-form dD.
        g = torch.Generator().manual_seed(0)
        z_mu = torch.randn(3, 5, generator=g, dtype=D)
        z = torch.randn(3, 5, generator=g, dtype=D)
        adv = torch.tensor([1.0, -0.5, 2.0], dtype=D)
        idx = torch.tensor([0, 2, 3])
        mu_top = torch.log_softmax(z_mu, -1)[:, :4]
        p = torch.softmax(z, -1)
        _, dd = L.predicted_divergence_change(mu_top, torch.log_softmax(z, -1)[:, :4], idx, adv, div)
        h = 1e-6
        onehot = torch.nn.functional.one_hot(idx, 5).to(D)
        z2 = z + h * adv[:, None] * (onehot - p)
        fn = L.topk_tv if div == "tv" else L.topk_kl
        d0 = fn(mu_top, torch.log_softmax(z, -1)[:, :4])
        d1 = fn(mu_top, torch.log_softmax(z2, -1)[:, :4])
        assert ((d1 - d0) / h).tolist() == pytest.approx(dd.tolist(), rel=1e-4, abs=1e-6)

    def test_k1_reduces_to_binary_tv_rule(self) -> None:
        # With K = 1 the top-K TV equals |pi - mu| and dTV has the sign of A (pi_a - mu_a),
        # so the predictive mask equals DPPO binary TV with eps_low = eps_high = eps.
        g = torch.Generator().manual_seed(1)
        mu = torch.rand(4, 6, generator=g, dtype=D) * 0.98 + 0.01
        pi = torch.rand(4, 6, generator=g, dtype=D) * 0.98 + 0.01
        adv = torch.randn(4, 1, generator=g, dtype=D).expand(4, 6)
        mask = (torch.rand(4, 6, generator=g) > 0.2).to(D)
        logp = torch.log(pi).requires_grad_(True)
        loss_p, s_p = L.predictive_mask(
            logp, torch.log(mu), adv, mask, torch.log(mu)[..., None], torch.log(pi)[..., None], eps=0.15
        )
        loss_b, s_b = L.dppo_binary_tv(logp, torch.log(mu), adv, mask, eps_low=0.15, eps_high=0.15)
        assert 0.0 < s_b["mask_frac"] < 1.0
        assert s_p["mask_frac"] == approx(s_b["mask_frac"])
        assert val(loss_p) == approx(val(loss_b))

    def test_bad_arguments(self) -> None:
        mu, pi = self._case1()
        args = (lp(self.PI1), lp(self.MU1), self.ADV1, self.MASK1, mu, pi)
        with pytest.raises(ValueError):
            L.predictive_mask(*args, divergence="js")
        with pytest.raises(ValueError):
            L.predictive_mask(*args, lr_scale=0.0)


# --------------------------------------------------------------------------- #
# Family-wide properties and registry
# --------------------------------------------------------------------------- #
def _call(name: str, logp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor):
    fn = L.get_loss(name)
    if name in ("dppo_topk_tv", "dppo_topk_kl", "predictive_mask"):
        return fn(logp, old, adv, mask, old.detach()[..., None], logp.detach()[..., None])
    if name in L.DIVERGENCE_LOSSES:  # the exact KL of the move's distributions: here, the binary one's
        return fn(logp, old, adv, mask, divergence=L.binary_kl(old, logp.detach()).nan_to_num(0.0))
    return fn(logp, old, adv, mask)


@pytest.mark.parametrize("name", sorted(L.LOSSES))
def test_every_loss_masks_padding_and_reports_stats(name: str) -> None:
    old = lp([0.5, 0.5, 0.2], [0.5, 0.4, 0.3])
    logp = lp([0.8, 0.3, 0.25], [0.55, 0.9, 0.9]).detach().clone()
    logp[1, 2] = float("-inf")  # padding
    logp.requires_grad_(True)
    mask = ten([1, 1, 1], [1, 1, 0])
    adv = torch.tensor([1.0, -1.0], dtype=D)
    loss, stats = _call(name, logp, old, adv, mask)
    assert loss.dim() == 0 and torch.isfinite(loss)
    g = torch.autograd.grad(loss, logp)[0]
    assert torch.isfinite(g).all() and g[1, 2] == 0.0
    assert all(isinstance(v, float) for v in stats.values())
    assert "ratio_mean" in stats
    if name != "ppo_clip":
        assert "mask_frac" in stats and ("tv" in stats or "kl" in stats)
    # every loss accepts the aggregation arguments
    fn = L.get_loss(name)
    extra = (old.detach()[..., None], logp.detach()[..., None]) if "topk" in name or "predictive" in name else ()
    kw = {"divergence": torch.zeros_like(old)} if name in L.DIVERGENCE_LOSSES else {}
    loss2, _ = fn(logp, old, adv, mask, *extra, agg="seq_sum_norm", max_len=8, **kw)
    assert torch.isfinite(loss2)


@pytest.mark.parametrize("name", ["dppo_binary_tv", "dppo_binary_kl", "dppo_exact_kl", "dppo_topk_tv", "dppo_topk_kl",
                                  "predictive_mask"])
def test_dppo_family_nothing_masked_at_ratio_one(name: str) -> None:
    # pi == mu: every divergence is 0, nothing is masked, grad = -A / n exactly
    old = lp([0.5, 0.2, 0.7])
    logp = old.clone().requires_grad_(True)
    adv = ten([2.0, -1.0, 0.5])
    loss, stats = _call(name, logp, old, adv, ONES3)
    assert stats["mask_frac"] == 0.0
    assert grad_of(loss, logp) == approx([-2 / 3, 1 / 3, -0.5 / 3])


def test_get_loss() -> None:
    assert L.get_loss("drpo") is L.drpo
    assert set(L.LOSSES) == {
        "ppo_clip",
        "dppo_binary_tv",
        "dppo_binary_kl",
        "dppo_exact_kl",
        "dppo_topk_tv",
        "dppo_topk_kl",
        "drpo",
        "predictive_mask",
    }
    with pytest.raises(ValueError, match="dppo_binary_tv"):
        L.get_loss("nope")


def test_shape_mismatch_raises() -> None:
    with pytest.raises(ValueError):
        L.dppo_binary_tv(lp(PI), lp([0.5, 0.5]), ONES3, ONES3)
    with pytest.raises(ValueError):
        L.dppo_binary_tv(lp(PI), lp(MU), ten([1.0, 1.0]), ONES3)
    assert math.isfinite(float(L.dppo_binary_tv(lp(PI), lp(MU), 1.0, ONES3)[0]))
