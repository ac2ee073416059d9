"""Hand-worked checks for arena.trainers.common.rl (V-trace, UPGO, batched GAE, RL losses).

Conventions: tensors are float64 and time-major [T, B]; a trajectory written
as a list is one column (B = 1) unless said otherwise.  Expected numbers are
worked out in the comments (ln values to 7 decimals).
"""

from __future__ import annotations

import math

import pytest
import torch

from arena.trainers.common import advantages as A
from arena.trainers.common import losses as L
from arena.trainers.common import rl

D = torch.float64
TOL = 1e-9


def approx(v: object, tol: float = TOL) -> object:
    return pytest.approx(v, abs=tol)


def col(*xs: float) -> torch.Tensor:
    """One trajectory as a [T, 1] time-major column."""
    return torch.tensor([[x] for x in xs], dtype=D)


def flat(t: torch.Tensor) -> list[float]:
    return t.flatten().tolist()


# --------------------------------------------------------------------------- #
# V-trace
# --------------------------------------------------------------------------- #
class TestVTrace:
    # 3 steps, gamma 0.9 everywhere, bootstrap V(x_3) = 1.0
    REWARDS = (1.0, 0.0, 2.0)
    VALUES = (0.5, 1.0, 0.8)
    BOOT = 1.0
    RATIOS = (2.0, 0.5, 1.5)  # pi / mu: two above 1 (truncated), one below

    def _run(self, **kw: float) -> rl.VTraceReturns:
        mu = torch.zeros(3, 1, dtype=D)  # log mu = 0, so log pi = log ratio
        pi = torch.log(col(*self.RATIOS))
        return rl.vtrace(mu, pi, col(*self.REWARDS), col(*self.VALUES), torch.tensor([self.BOOT], dtype=D), 0.9, **kw)

    def test_hand_truncated_weights(self) -> None:
        # rho_bar = c_bar = 1: rho = c = min(1, [2, 0.5, 1.5]) = [1, 0.5, 1]
        # V(x_{t+1}) = [1.0, 0.8, 1.0]
        # delta_t = rho_t (r_t + 0.9 V(x_{t+1}) - V(x_t)):
        #   delta_0 = 1   * (1 + 0.9   - 0.5) = 1.4
        #   delta_1 = 0.5 * (0 + 0.72  - 1.0) = -0.14
        #   delta_2 = 1   * (2 + 0.9   - 0.8) = 2.1
        # backward: vs_t - V_t = delta_t + 0.9 c_t (vs_{t+1} - V_{t+1})
        #   t=2: 2.1
        #   t=1: -0.14 + 0.9 * 0.5 * 2.1   = -0.14 + 0.945  = 0.805
        #   t=0:  1.4  + 0.9 * 1   * 0.805 =  1.4  + 0.7245 = 2.1245
        # vs = V + that = [2.6245, 1.805, 2.9]
        # pg_adv_t = rho_t (r_t + 0.9 vs_{t+1} - V_t), vs_3 = bootstrap 1.0:
        #   t=0: 1   * (1 + 0.9 * 1.805 - 0.5) = 2.1245
        #   t=1: 0.5 * (0 + 0.9 * 2.9   - 1.0) = 0.5 * 1.61 = 0.805
        #   t=2: 1   * (2 + 0.9 * 1.0   - 0.8) = 2.1
        # (with c = rho and lam = 1, pg_adv_t = vs_t - V_t exactly)
        out = self._run(rho_bar=1.0, c_bar=1.0)
        assert flat(out.rhos) == approx([1.0, 0.5, 1.0])
        assert flat(out.vs) == approx([2.6245, 1.805, 2.9])
        assert flat(out.pg_advantages) == approx([2.1245, 0.805, 2.1])

    def test_hand_lambda_half(self) -> None:
        # as above, but c_t = 0.5 * min(1, ratio) = [0.5, 0.25, 0.5]; deltas unchanged
        #   t=2: 2.1
        #   t=1: -0.14 + 0.9 * 0.25 * 2.1    = -0.14 + 0.4725   = 0.3325
        #   t=0:  1.4  + 0.9 * 0.5  * 0.3325 =  1.4  + 0.149625 = 1.549625
        # vs = [2.049625, 1.3325, 2.9]
        # pg_adv: t=0: 1 * (1 + 0.9 * 1.3325 - 0.5) = 0.5 + 1.19925 = 1.69925
        #         t=1: 0.5 * (0.9 * 2.9 - 1) = 0.805 ; t=2: 2.1
        out = self._run(lam=0.5)
        assert flat(out.vs) == approx([2.049625, 1.3325, 2.9])
        assert flat(out.pg_advantages) == approx([1.69925, 0.805, 2.1])

    def test_hand_unclipped_pg_rho(self) -> None:
        # pg_rho_bar = inf leaves the policy-gradient weights at [2, 0.5, 1.5]; vs as in the first test
        #   t=0: 2 * (1 + 0.9 * 1.805 - 0.5) = 4.249 ; t=1: 0.805 ; t=2: 1.5 * 2.1 = 3.15
        out = self._run(pg_rho_bar=math.inf)
        assert flat(out.vs) == approx([2.6245, 1.805, 2.9])
        assert flat(out.pg_advantages) == approx([4.249, 0.805, 3.15])

    def test_on_policy_is_n_step_return(self) -> None:
        # all ratios 1, lam 1: vs_t = sum gamma^k r_{t+k} + gamma^(T-t) bootstrap, whatever V says
        #   G_2 = 2 + 0.9 * 1.0 = 2.9 ; G_1 = 0 + 0.9 * 2.9 = 2.61 ; G_0 = 1 + 0.9 * 2.61 = 3.349
        # pg_adv = G - V = [2.849, 1.61, 2.1]
        zeros = torch.zeros(3, 1, dtype=D)
        for values in (col(*self.VALUES), col(-3.0, 7.0, 0.0)):
            out = rl.vtrace(zeros, zeros, col(*self.REWARDS), values, torch.tensor([self.BOOT], dtype=D), 0.9)
            assert flat(out.vs) == approx([3.349, 2.61, 2.9])
            assert flat(out.pg_advantages) == approx(flat(col(3.349, 2.61, 2.9) - values))
            assert flat(out.rhos) == approx([1.0, 1.0, 1.0])

    def test_on_policy_terminal_is_monte_carlo(self) -> None:
        # the episode ends at the last step (discount 0): bootstrap ignored
        #   G = [1 + 0.9 * (0 + 0.9 * 2), 0.9 * 2, 2] = [2.62, 1.8, 2.0]
        zeros = torch.zeros(3, 1, dtype=D)
        disc = col(0.9, 0.9, 0.0)
        out = rl.vtrace(zeros, zeros, col(*self.REWARDS), col(*self.VALUES), torch.tensor([123.0], dtype=D), disc)
        assert flat(out.vs) == approx([2.62, 1.8, 2.0])

    def test_on_policy_equals_gae_returns(self) -> None:
        # on-policy, c_t = lam, so vs_t - V_t obeys GAE's recursion: vs = lambda-returns
        g = torch.Generator().manual_seed(1)
        r, v = torch.randn(6, 4, generator=g, dtype=D), torch.randn(6, 4, generator=g, dtype=D)
        boot = torch.randn(4, generator=g, dtype=D)
        disc = 0.95 * (torch.rand(6, 4, generator=g, dtype=D) > 0.2).to(D)
        zeros = torch.zeros(6, 4, dtype=D)
        out = rl.vtrace(zeros, zeros, r, v, boot, disc, lam=0.7)
        _, ret = rl.gae_tb(r, v, boot, disc, lam=0.7)
        assert torch.allclose(out.vs, ret, atol=1e-12)

    def test_episode_boundary(self) -> None:
        # 4 steps, the first episode ends at t=1 (discount 0), a new one starts at t=2
        # on-policy, gamma 0.9, bootstrap 0.5 (the second episode is still running)
        #   vs_3 = 1 + 0.9 * 0.5 = 1.45 ; vs_2 = 0 + 0.9 * 1.45 = 1.305
        #   vs_1 = 2 (terminal)         ; vs_0 = 1 + 0.9 * 2    = 2.8
        rewards, values = col(1.0, 2.0, 0.0, 1.0), col(0.3, 0.4, 5.0, -5.0)
        disc = col(0.9, 0.0, 0.9, 0.9)
        boot = torch.tensor([0.5], dtype=D)
        zeros = torch.zeros(4, 1, dtype=D)
        out = rl.vtrace(zeros, zeros, rewards, values, boot, disc)
        assert flat(out.vs) == approx([2.8, 2.0, 1.305, 1.45])
        # off-policy ratios, rewards and values of the second episode do not reach the first
        mu = torch.log(col(1.0, 1.0, 0.1, 0.2))
        r2, v2 = rewards.clone(), values.clone()
        r2[2:], v2[2:] = 9.0, -9.0
        out2 = rl.vtrace(mu, zeros, r2, v2, boot * 4, disc, rho_bar=5.0, c_bar=5.0)
        assert flat(out2.vs)[:2] == approx([2.8, 2.0])
        assert flat(out2.pg_advantages)[:2] == approx([2.8 - 0.3, 2.0 - 0.4])

    def test_batch_columns_independent(self) -> None:
        g = torch.Generator().manual_seed(2)
        shape = (5, 3)
        mu, pi = torch.randn(shape, generator=g, dtype=D), torch.randn(shape, generator=g, dtype=D)
        r, v = torch.randn(shape, generator=g, dtype=D), torch.randn(shape, generator=g, dtype=D)
        boot, disc = torch.randn(3, generator=g, dtype=D), torch.full(shape, 0.9, dtype=D)
        out = rl.vtrace(mu, pi, r, v, boot, disc, rho_bar=1.0, c_bar=0.8, lam=0.9)
        for b in range(3):
            one = rl.vtrace(mu[:, b], pi[:, b], r[:, b], v[:, b], boot[b], disc[:, b], rho_bar=1.0, c_bar=0.8, lam=0.9)
            assert torch.allclose(out.vs[:, b], one.vs) and torch.allclose(out.pg_advantages[:, b], one.pg_advantages)

    def test_detached_and_checked(self) -> None:
        lp = torch.zeros(3, 2, dtype=D, requires_grad=True)
        v = torch.ones(3, 2, dtype=D, requires_grad=True)
        out = rl.vtrace(lp, lp, torch.ones(3, 2, dtype=D), v, torch.zeros(2, dtype=D), 0.9)
        assert not any(t.requires_grad for t in out)
        with pytest.raises(ValueError, match="bootstrap_value"):
            rl.vtrace(lp, lp, torch.ones(3, 2, dtype=D), v, torch.zeros(3, dtype=D), 0.9)
        with pytest.raises(ValueError, match="discounts"):
            rl.vtrace(lp, lp, torch.ones(3, 2, dtype=D), v, torch.zeros(2, dtype=D), torch.ones(3, 1))
        with pytest.raises(ValueError, match="lam"):
            rl.vtrace(lp, lp, torch.ones(3, 2, dtype=D), v, torch.zeros(2, dtype=D), 0.9, lam=1.5)


# --------------------------------------------------------------------------- #
# UPGO
# --------------------------------------------------------------------------- #
class TestUPGO:
    def test_hand_cut(self) -> None:
        # gamma 1, 4 steps, bootstrap V(x_4) = 0.2
        #   r = [0, 0, 0, 1], V = [0.5, 0.6, 0.9, 0.7]
        # Q(x_t, a_t) ~ r_t + V(x_{t+1}):  Q_1 = 0.9 >= V_1 = 0.6 (follow)
        #                                  Q_2 = 0.7 <  V_2 = 0.9 (cut: bootstrap V_2)
        #                                  Q_3 = 1.2 >= V_3 = 0.7 (follow)
        #   G_3 = 1 + 0.2 = 1.2   (last step bootstraps)
        #   G_2 = 0 + G_3 = 1.2   (Q_3 >= V_3)
        #   G_1 = 0 + V_2 = 0.9   (Q_2 < V_2)
        #   G_0 = 0 + G_1 = 0.9   (Q_1 >= V_1)
        # without the cut G_0 would be the Monte-Carlo 1.2
        r, v = col(0.0, 0.0, 0.0, 1.0), col(0.5, 0.6, 0.9, 0.7)
        boot = torch.tensor([0.2], dtype=D)
        g = rl.upgo_returns(r, v, boot, 1.0)
        assert flat(g) == approx([0.9, 0.9, 1.2, 1.2])
        # advantages G - V = [0.4, 0.3, 0.3, 0.5]; with rhos [1, 0.5, 1, 1]: [0.4, 0.15, 0.3, 0.5]
        assert flat(rl.upgo_advantages(r, v, boot, 1.0)) == approx([0.4, 0.3, 0.3, 0.5])
        rhos = col(1.0, 0.5, 1.0, 1.0)
        assert flat(rl.upgo_advantages(r, v, boot, 1.0, rhos=rhos)) == approx([0.4, 0.15, 0.3, 0.5])

    def test_hand_discounted_with_episode_end(self) -> None:
        # gamma 0.5, episode ends at t=2 (discount 0), a new one is at t=3; bootstrap 4
        #   r = [1, 2, 3, 1], V = [1, 1, 10, 0]
        # Q_1 = 2 + 0.5 * 10 = 7 >= V_1 = 1 (follow)
        # Q_2 = 3 + 0   * 0  = 3 <  V_2 = 10 (cut: step 1 bootstraps from V_2)
        #   G_3 = 1 + 0.5 * 4   = 3
        #   G_2 = 3 + 0 * (...) = 3          (terminal: nothing after)
        #   G_1 = 2 + 0.5 * V_2 = 2 + 5 = 7  (Q_2 = 3 < V_2 = 10: bootstrap V_2)
        #   G_0 = 1 + 0.5 * G_1 = 4.5        (Q_1 = 7 >= V_1 = 1: follow)
        r, v = col(1.0, 2.0, 3.0, 1.0), col(1.0, 1.0, 10.0, 0.0)
        disc = col(0.5, 0.5, 0.0, 0.5)
        g = rl.upgo_returns(r, v, torch.tensor([4.0], dtype=D), disc)
        assert flat(g) == approx([4.5, 7.0, 3.0, 3.0])

    def test_never_cut_is_n_step_return(self) -> None:
        # with V = 0 and rewards >= 0 every Q >= V, so UPGO is the plain n-step return
        r = col(1.0, 0.0, 2.0)
        g = rl.upgo_returns(r, torch.zeros(3, 1, dtype=D), torch.tensor([1.0], dtype=D), 0.9)
        assert flat(g) == approx([3.349, 2.61, 2.9])

    def test_batch_and_detached(self) -> None:
        gen = torch.Generator().manual_seed(3)
        r, v = torch.randn(5, 3, generator=gen, dtype=D), torch.randn(5, 3, generator=gen, dtype=D, requires_grad=True)
        boot = torch.randn(3, generator=gen, dtype=D)
        g = rl.upgo_returns(r, v, boot, 0.9)
        assert not g.requires_grad
        for b in range(3):
            assert torch.allclose(g[:, b], rl.upgo_returns(r[:, b], v[:, b], boot[b], 0.9))
        with pytest.raises(ValueError, match="rhos"):
            rl.upgo_advantages(r, v, boot, 0.9, rhos=torch.ones(5, 2, dtype=D))


# --------------------------------------------------------------------------- #
# Batched GAE
# --------------------------------------------------------------------------- #
class TestGAETB:
    def test_hand_with_bootstrap(self) -> None:
        # gamma 1, lam 0.5, r = [0, 0, 1], V = [0.5, 0.6, 0.7], bootstrap 0.4
        #   delta_2 = 1 + 0.4 - 0.7 = 0.7 ; delta_1 = 0.7 - 0.6 = 0.1 ; delta_0 = 0.6 - 0.5 = 0.1
        #   A_2 = 0.7 ; A_1 = 0.1 + 0.35 = 0.45 ; A_0 = 0.1 + 0.225 = 0.325
        #   G = A + V = [0.825, 1.05, 1.4]
        adv, ret = rl.gae_tb(col(0.0, 0.0, 1.0), col(0.5, 0.6, 0.7), torch.tensor([0.4], dtype=D), 1.0, lam=0.5)
        assert flat(adv) == approx([0.325, 0.45, 0.7])
        assert flat(ret) == approx([0.825, 1.05, 1.4])

    @pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
    def test_columns_equal_1d_gae(self, dtype: torch.dtype) -> None:
        # the language-model learner's 1-D gae (V after the last turn = 0) is gae_tb column by column, bit for bit
        gen = torch.Generator().manual_seed(4)
        r = torch.randn(7, 5, generator=gen).to(dtype)
        v = torch.randn(7, 5, generator=gen).to(dtype)
        for gamma, lam in ((1.0, 0.95), (0.99, 0.95), (0.9, 0.0), (0.9, 1.0)):
            adv, ret = rl.gae_tb(r, v, 0.0, gamma, lam)
            assert adv.dtype == dtype
            for b in range(5):
                a1, g1 = A.gae(r[:, b], v[:, b], gamma=gamma, lam=lam)
                assert torch.equal(adv[:, b], a1) and torch.equal(ret[:, b], g1)

    def test_1d_gae_keeps_its_former_loop(self) -> None:
        # gae used to run this scalar loop itself; now that it calls gae_tb its float32 results must not move by an ulp
        def former_gae(r: torch.Tensor, v: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
            adv = torch.zeros_like(r)
            running = torch.zeros((), dtype=r.dtype)
            next_value = torch.zeros((), dtype=r.dtype)
            for t in range(r.shape[0] - 1, -1, -1):
                running = (r[t] + gamma * next_value - v[t]) + gamma * lam * running
                adv[t] = running
                next_value = v[t]
            return adv

        gen = torch.Generator().manual_seed(7)
        for _ in range(20):
            r, v = torch.randn(30, generator=gen), torch.randn(30, generator=gen)
            for gamma, lam in ((0.99, 0.95), (0.997, 0.9), (0.9, 0.3)):
                assert torch.equal(A.gae(r, v, gamma=gamma, lam=lam)[0], former_gae(r, v, gamma, lam))

    def test_episode_boundary_splits_into_1d_gae(self) -> None:
        # discounts gamma (1 - done) with an episode ending at t=2: each episode is an independent 1-D gae
        gen = torch.Generator().manual_seed(5)
        r, v = torch.randn(5, 1, generator=gen, dtype=D), torch.randn(5, 1, generator=gen, dtype=D)
        disc = col(0.9, 0.9, 0.0, 0.9, 0.0)
        adv, ret = rl.gae_tb(r, v, torch.tensor([77.0], dtype=D), disc, lam=0.8)
        a_first, g_first = A.gae(r[:3, 0], v[:3, 0], gamma=0.9, lam=0.8)
        a_second, g_second = A.gae(r[3:, 0], v[3:, 0], gamma=0.9, lam=0.8)
        assert torch.allclose(adv[:, 0], torch.cat([a_first, a_second]), atol=1e-12)
        assert torch.allclose(ret[:, 0], torch.cat([g_first, g_second]), atol=1e-12)

    def test_checked(self) -> None:
        with pytest.raises(ValueError, match="lam"):
            rl.gae_tb(col(0.0), col(0.0), 0.0, 1.0, lam=-0.1)
        with pytest.raises(ValueError, match="values shape"):
            rl.gae_tb(col(0.0, 1.0), col(0.0), 0.0, 1.0, lam=0.5)


# --------------------------------------------------------------------------- #
# Losses
# --------------------------------------------------------------------------- #
class TestPolicyGradientLoss:
    def test_value_and_gradient(self) -> None:
        # [T=2, B=2], one step masked: n = 3 valid
        # logp = ln [[0.5, 0.25], [0.8, 0.1]], adv = [[1, -2], [0.5, 100]], mask = [[1, 1], [1, 0]]
        # L = -(1 * ln 0.5 + (-2) * ln 0.25 + 0.5 * ln 0.8) / 3
        #   = -(-0.6931472 + 2.7725887 - 0.1115718) / 3 = -1.9678697 / 3 = -0.6559566
        # dL/dlogp = -adv / 3 at valid steps, 0 at the masked one
        logp = torch.log(torch.tensor([[0.5, 0.25], [0.8, 0.1]], dtype=D)).requires_grad_(True)
        adv = torch.tensor([[1.0, -2.0], [0.5, 100.0]], dtype=D)
        mask = torch.tensor([[1, 1], [1, 0]])
        loss, stats = rl.policy_gradient_loss(logp, adv, mask)
        expected = -(math.log(0.5) - 2 * math.log(0.25) + 0.5 * math.log(0.8)) / 3
        assert loss.item() == approx(expected)
        assert expected == approx(-0.6559566, 1e-7)
        (grad,) = torch.autograd.grad(loss, logp)
        assert flat(grad) == approx([-1 / 3, 2 / 3, -0.5 / 3, 0.0])
        assert stats["adv_mean"] == approx((1 - 2 + 0.5) / 3)

    def test_no_mask_means_all(self) -> None:
        logp = torch.zeros(2, 3, dtype=D, requires_grad=True)
        loss, _ = rl.policy_gradient_loss(logp, torch.full((2, 3), 2.0, dtype=D))
        (grad,) = torch.autograd.grad(loss, logp)
        assert flat(grad) == approx([-2 / 6] * 6)
        with pytest.raises(ValueError, match="advantages"):
            rl.policy_gradient_loss(logp, torch.ones(3, 2, dtype=D))


class TestPPOClipLoss:
    def test_matches_ppo_clip_and_hand(self) -> None:
        # ratios [1.5, 1.0, 0.5], adv [1, 1, -1], clip 0.2:
        #   step 0: min(1.5, 1.2) * 1 = 1.2 (clipped, no gradient)
        #   step 1: 1.0 (gradient -1/3)
        #   step 2: min(-0.5, -0.8) = -0.8 (clipped: 0.5 < 0.8 = 1 - 0.2, no gradient)
        # L = -(1.2 + 1.0 - 0.8) / 3 = -1.4 / 3
        old = torch.zeros(3, 1, dtype=D)
        logp = torch.log(col(1.5, 1.0, 0.5)).requires_grad_(True)
        adv = col(1.0, 1.0, -1.0)
        loss, stats = rl.ppo_clip_loss(logp, old, adv, clip=0.2)
        assert loss.item() == approx(-1.4 / 3)
        (grad,) = torch.autograd.grad(loss, logp)
        assert flat(grad) == approx([0.0, -1 / 3, 0.0])
        assert stats["clip_frac"] == approx(2 / 3)
        ref, _ = L.ppo_clip(logp, old, adv, torch.ones(3, 1), clip_low=0.2, clip_high=0.2)
        assert loss.item() == approx(ref.item())


class TestValueLoss:
    def test_mse_and_huber(self) -> None:
        # errors V - G = [1, 2, -0.5], the last step masked out
        #   mse   = 0.5 * (1 + 4) / 2 = 1.25, gradient (V - G) / 2 = [0.5, 1.0, 0]
        #   huber (delta 1) = (0.5 * 1 + 1 * (2 - 0.5)) / 2 = 1.0, gradient [0.5, 0.5, 0]
        values = col(1.0, 2.0, -0.5).requires_grad_(True)
        targets = torch.zeros(3, 1, dtype=D)
        mask = col(1.0, 1.0, 0.0)
        loss, stats = rl.value_loss(values, targets, mask)
        assert loss.item() == approx(1.25)
        assert flat(torch.autograd.grad(loss, values)[0]) == approx([0.5, 1.0, 0.0])
        assert stats["value_err"] == approx(1.5)
        loss, _ = rl.value_loss(values, targets, mask, kind="huber")
        assert loss.item() == approx(1.0)
        assert flat(torch.autograd.grad(loss, values)[0]) == approx([0.5, 0.5, 0.0])
        with pytest.raises(ValueError, match="kind"):
            rl.value_loss(values, targets, kind="l1")

    def test_explained_variance(self) -> None:
        # perfect prediction -> 1 ; predicting the mean -> 0
        g = col(1.0, 2.0, 3.0)
        assert rl.value_loss(g.clone(), g)[1]["explained_variance"] == approx(1.0)
        assert rl.value_loss(torch.full((3, 1), 2.0, dtype=D), g)[1]["explained_variance"] == approx(0.0)


def test_anneal() -> None:
    # 1-based iteration of 5: frac = (it - 1) / 4
    assert rl.anneal(0.5, 3, 5) == approx(0.5)
    assert rl.anneal(1.0, 1, 5, "linear") == approx(1.0)
    assert rl.anneal(1.0, 3, 5, "linear", end=0.2) == approx(0.6)  # 0.2 + 0.8 * 0.5
    assert rl.anneal(1.0, 5, 5, "linear", end=0.2) == approx(0.2)
    assert rl.anneal(1.0, 3, 5, "cosine") == approx(0.5)  # (1 + cos(pi/2)) / 2
    assert rl.anneal(1.0, 2, 5, "cosine") == approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert rl.anneal(1.0, 9, 5, "linear") == approx(0.0)  # past the end stays at end
    with pytest.raises(ValueError, match="kind"):
        rl.anneal(1.0, 1, 5, "cosin")


def test_self_imitation_advantages_by_hand():
    # R = [0 + 0.5 * 0.5, 0 + 0.5 * 1, 1] = [0.25, 0.5, 1]; V = [0.5, 0.2, 1.5]: only the middle move beat
    # its value (by 0.3); the others are left alone (0), not pushed down
    r = torch.tensor([[0.0], [0.0], [1.0]])
    v = torch.tensor([[0.5], [0.2], [1.5]])
    d = torch.tensor([[0.5], [0.5], [0.0]])
    adv = rl.self_imitation_advantages(r, v, d)
    assert torch.allclose(adv, torch.tensor([[0.0], [0.3], [0.0]]))
    # a discount of 0 ends the return: the next episode's reward never reaches back
    two = rl.self_imitation_advantages(torch.tensor([[1.0], [5.0]]), torch.zeros(2, 1), torch.tensor([[0.0], [0.0]]))
    assert torch.allclose(two, torch.tensor([[1.0], [5.0]]))
    # its loss on a rare move: d loss / d logp = -adv / n, whatever the move's probability
    logp = torch.log(torch.tensor([[0.9], [0.001], [0.5]])).requires_grad_()
    loss, _ = rl.policy_gradient_loss(logp, adv)
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[0.0], [-0.1], [0.0]]))


def test_the_all_actions_term_is_the_expected_sampled_gradient() -> None:
    """``all_actions_policy_loss``'s gradient on the logits is ``-pi(a) (Q(a) - V) / n``, which is the
    sampled term's gradient averaged over the policy's own moves; an illegal move (probability 0) and
    a masked row count nothing; the targets of the move's value are ``r + gamma v_next``."""
    import torch

    from arena.trainers.common import rl

    torch.manual_seed(0)
    logits = torch.randn(3, 4, requires_grad=True)
    legal = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 1, 1]], dtype=torch.bool)
    masked = logits.masked_fill(~legal, torch.finfo(logits.dtype).min)
    probs = torch.softmax(masked, -1)
    q = torch.randn(3, 4)
    mask = torch.tensor([1, 1, 0], dtype=torch.bool)
    loss, _ = rl.all_actions_policy_loss(probs, q, mask)
    loss.backward()
    p = probs.detach()
    v = (p * q).sum(-1, keepdim=True)
    want = -p * (q - v) / 2  # two valid rows
    want[2] = 0.0
    assert torch.allclose(logits.grad, want, atol=1e-6)
    # the same as the sampled term's gradient in expectation: sum_a pi(a) * d(-A(a) log pi(a))/dlogits
    row = 1
    sampled = torch.zeros(4)
    for a in range(4):
        lg = logits.detach().clone().requires_grad_(True)
        lp = torch.log_softmax(lg[row], -1)[a]
        (-(q[row, a] - v[row, 0]) * lp).backward()
        sampled += p[row, a] * lg.grad[row]
    assert torch.allclose(sampled / 2, want[row], atol=1e-6)
    vs = torch.tensor([[0.5, 0.2], [0.1, -0.3], [0.0, 0.0]])
    r = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    d = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    assert torch.allclose(rl.action_value_targets(r, d, vs), torch.tensor([[0.1, -0.3], [0.0, 1.0], [1.0, 0.0]]))


def test_dppo_exact_kl_masks_moves_past_the_bound_that_move_with_the_advantage() -> None:
    """A move is masked when its exact KL passes eps and pi moved the advantage's way; a move past the
    bound that moved against the advantage, or inside it, keeps the plain ``-A sg(r) logp`` gradient."""
    logp = torch.tensor([-1.0, -1.0, -1.0, -1.0], requires_grad=True)
    old = torch.tensor([-1.2, -1.2, -0.8, -1.2])  # pi rose, rose, fell, rose
    adv = torch.tensor([1.0, 1.0, 1.0, -1.0])
    div = torch.tensor([0.5, 0.01, 0.5, 0.5])  # past, inside, past, past (eps 0.1)
    mask = torch.ones(4, dtype=torch.bool)
    loss, stats = L.dppo_exact_kl(logp, old, adv, mask, divergence=div, eps=0.1)
    loss.backward()
    r = torch.exp(logp.detach() - old)
    # move 0: past the bound and moved with A>0: masked; 1: inside; 2: moved against A; 3: A<0 but pi rose
    want = torch.stack([torch.tensor(0.0), -adv[1] * r[1], -adv[2] * r[2], -adv[3] * r[3]]) / 4
    assert torch.allclose(logp.grad, want, atol=1e-6)
    assert stats["mask_frac"] == pytest.approx(0.25) and stats["kl"] == pytest.approx(float(div.mean()))
    with pytest.raises(ValueError, match="divergence shape"):
        L.dppo_exact_kl(logp, old, adv, mask, divergence=div[:3])
