"""arena.inference.continuous: Gaussian and Beta action heads against torch.distributions, and a learning check."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import distributions as D  # noqa: E402

from arena.inference.continuous import Beta, BetaHead, Gaussian, GaussianHead  # noqa: E402

torch.set_num_threads(1)

LOW = torch.tensor([-1.0, 0.0, 2.0])
HIGH = torch.tensor([1.0, 1.0, 5.0])
WIDTH = HIGH - LOW


def _gaussian() -> Gaussian:
    mean = torch.tensor([[0.2, 0.5, 2.5], [-1.5, 0.9, 4.0]])
    std = torch.tensor([[0.3, 0.05, 1.0], [0.7, 0.2, 2.0]])
    return Gaussian(mean, std, LOW, HIGH)


def _beta() -> Beta:
    alpha = torch.tensor([[1.5, 2.0, 7.0], [1.01, 30.0, 3.0]])
    beta = torch.tensor([[1.2, 5.0, 2.0], [4.0, 1.3, 3.0]])
    return Beta(alpha, beta, LOW, HIGH)


def _features(batch: int = 4, dim: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, dim, generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------- densities


def test_gaussian_log_prob_and_entropy_match_torch_normal():
    dist = _gaussian()
    # inside the box, outside it (samples are not clipped), and on an edge
    actions = torch.tensor([[0.0, 0.45, 3.0], [1.7, -0.3, 5.0]])
    ref = D.Normal(dist.mean, dist.std)
    torch.testing.assert_close(dist.log_prob(actions), ref.log_prob(actions).sum(-1))
    torch.testing.assert_close(dist.entropy(), ref.entropy().sum(-1))
    assert dist.log_prob(actions).shape == dist.entropy().shape == (2,)


def test_beta_log_prob_includes_the_jacobian_of_the_scaling_and_entropy_matches():
    dist = _beta()
    actions = torch.tensor([[0.5, 0.1, 2.3], [-0.99, 0.75, 4.999]])
    u = (actions - LOW) / WIDTH
    ref = D.Beta(dist.alpha, dist.beta)
    torch.testing.assert_close(dist.log_prob(actions), (ref.log_prob(u) - WIDTH.log()).sum(-1))
    torch.testing.assert_close(dist.entropy(), (ref.entropy() + WIDTH.log()).sum(-1))
    # the same through a head, whose alpha and beta are above 1
    head = BetaHead(5, 3, LOW.numpy(), HIGH.tolist())
    d = head(_features())
    assert (d.alpha > 1).all() and (d.beta > 1).all()
    torch.testing.assert_close(d.entropy(), (D.Beta(d.alpha, d.beta).entropy() + WIDTH.log()).sum(-1))


@pytest.mark.parametrize("state_dependent_std", [False, True])
def test_gaussian_head_starts_at_the_box_centre_with_init_log_std(state_dependent_std):
    head = GaussianHead(5, 3, LOW, HIGH, init_log_std=-0.5, state_dependent_std=state_dependent_std)
    d = head(_features())
    torch.testing.assert_close(d.mean, ((LOW + HIGH) / 2).expand(4, 3), atol=0.05 * WIDTH.max().item(), rtol=0)
    torch.testing.assert_close(d.std, (WIDTH / 2 * math.exp(-0.5)).expand(4, 3), rtol=0.05, atol=0)
    torch.testing.assert_close(d.entropy(), D.Normal(d.mean, d.std).entropy().sum(-1))
    (d.log_prob(d.sample()).sum() + d.entropy().sum()).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in head.parameters())


# --------------------------------------------------------------------------- sampling


def test_beta_samples_stay_inside_the_box_even_when_concentrated_on_an_edge():
    alpha = torch.tensor([[1.0, 1.0, 500.0], [1.5, 2.0, 3.0]]).repeat(5000, 1)
    beta = torch.tensor([[500.0, 1.0, 1.0], [1.5, 2.0, 3.0]]).repeat(5000, 1)
    dist = Beta(alpha, beta, LOW, HIGH)
    s = dist.sample(torch.Generator().manual_seed(0))
    assert s.shape == (10000, 3)
    assert ((s >= LOW) & (s <= HIGH)).all()
    assert torch.isfinite(dist.log_prob(s)).all()
    # and they follow the distribution: sample means are near the means
    torch.testing.assert_close(s[1::2].mean(0), dist.mean[1], atol=0.02 * WIDTH.max().item(), rtol=0)


def test_gaussian_samples_are_not_clipped_and_follow_the_distribution():
    mean = torch.tensor([1.0, 0.0, 2.0]).expand(20000, 3)  # on the box's edges
    std = torch.tensor([0.5, 0.1, 1.0]).expand(20000, 3)
    dist = Gaussian(mean, std, LOW, HIGH)
    s = dist.sample(torch.Generator().manual_seed(0))
    assert ((s < LOW) | (s > HIGH)).any(dim=0).all()  # the environment clips, not the policy
    torch.testing.assert_close(s.mean(0), mean[0], atol=0.02, rtol=0)
    torch.testing.assert_close(s.std(0), std[0], rtol=0.03, atol=0)
    assert not s.requires_grad


@pytest.mark.parametrize("make", [lambda: GaussianHead(5, 3, LOW, HIGH), lambda: BetaHead(5, 3, LOW, HIGH)],
                         ids=["gaussian", "beta"])
def test_seeded_samples_are_reproducible(make):
    dist = make()(_features())
    a = dist.sample(torch.Generator().manual_seed(7))
    b = dist.sample(torch.Generator().manual_seed(7))
    c = dist.sample(torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)
    g = torch.Generator().manual_seed(7)
    first, second = dist.sample(g), dist.sample(g)
    assert torch.equal(first, a) and not torch.equal(first, second)  # one generator, a stream of draws


# --------------------------------------------------------------------------- kl and mode


def test_kl_is_zero_to_itself_and_matches_torch_kl_divergence():
    g1, b1 = _gaussian(), _beta()
    torch.testing.assert_close(g1.kl(g1), torch.zeros(2))
    torch.testing.assert_close(b1.kl(b1), torch.zeros(2))
    g2 = Gaussian(g1.mean.flip(0), g1.std.flip(0) * 1.3, LOW, HIGH)
    b2 = Beta(b1.beta + 0.5, b1.alpha.flip(0), LOW, HIGH)
    ref_g = D.kl_divergence(D.Normal(g1.mean, g1.std), D.Normal(g2.mean, g2.std)).sum(-1)
    ref_b = D.kl_divergence(D.Beta(b1.alpha, b1.beta), D.Beta(b2.alpha, b2.beta)).sum(-1)
    torch.testing.assert_close(g1.kl(g2), ref_g)
    torch.testing.assert_close(b1.kl(b2), ref_b)
    assert (g1.kl(g2) > 0).all() and (b1.kl(b2) > 0).all()
    with pytest.raises(TypeError, match="Gaussian"):
        g1.kl(b1)
    with pytest.raises(ValueError, match="same BetaHead"):
        b1.kl(Beta(b1.alpha, b1.beta, LOW, HIGH + 1))


def test_mode_is_inside_the_box():
    g = _gaussian()  # its second row's mean is below the box in dimension 0
    torch.testing.assert_close(g.mode(), torch.tensor([[0.2, 0.5, 2.5], [-1.0, 0.9, 4.0]]))
    b = Beta(torch.tensor([[3.0, 1.0, 2.0]]), torch.tensor([[2.0, 4.0, 2.0]]), LOW, HIGH)
    # (a-1)/(a+b-2) = 2/3 where both > 1; the mean 1/5 where alpha = 1; 1/2 in the symmetric case
    expected = LOW + WIDTH * torch.tensor([2 / 3, 1 / 5, 1 / 2])
    torch.testing.assert_close(b.mode(), expected[None])
    for dist in (GaussianHead(5, 3, LOW, HIGH, init_log_std=1.0)(10 * _features(256)),
                 BetaHead(5, 3, LOW, HIGH)(10 * _features(256)), _beta()):
        m = dist.mode()
        assert ((m >= LOW) & (m <= HIGH)).all()


def test_bad_bounds_say_what_to_do():
    with pytest.raises(ValueError, match="low < high"):
        GaussianHead(5, 3, LOW, torch.tensor([1.0, 0.0, 5.0]))
    with pytest.raises(ValueError, match="one value per action dimension"):
        BetaHead(5, 3, [0.0, 0.0], 1.0)
    with pytest.raises(ValueError, match="use GaussianHead"):
        BetaHead(5, 3, 0.0, np.inf)
    # unbounded dimensions are fine for the Gaussian: centre 0, unit half-width, mode unclipped there
    d = GaussianHead(5, 2, [-np.inf, 0.0], [np.inf, 1.0])(_features())
    assert torch.isfinite(d.log_prob(d.sample())).all()
    torch.testing.assert_close(d.mode()[:, 0], d.mean[:, 0])


# --------------------------------------------------------------------------- learning


@pytest.mark.parametrize("head_cls", [GaussianHead, BetaHead], ids=["gaussian", "beta"])
def test_reinforce_moves_the_mean_to_a_target(head_cls):
    torch.manual_seed(0)
    target = torch.tensor([0.15, 0.5, 0.85])
    head = head_cls(4, 3, 0.0, 1.0)
    features = torch.ones(256, 4)
    start = (head(features[:1]).mean[0] - target).abs().max().item()
    opt = torch.optim.Adam(head.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        dist = head(features)
        actions = dist.sample(g)
        # Scored unclipped: with an env's clip, the best Gaussian mean for a wide std sits past the
        # target towards the nearer edge (the clipping bias Chou et al. 2017 remove with the Beta).
        reward = -(actions - target).pow(2).sum(-1)
        loss = -((reward - reward.mean()) * dist.log_prob(actions)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        mean = head(features[:1]).mean[0]
    assert start > 0.3
    assert (mean - target).abs().max().item() < 0.1, f"mean {mean.tolist()} vs target {target.tolist()}"
