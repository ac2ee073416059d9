"""Action distributions for continuous actions in a box ``[low, high]``.

The OpenSim prosthetics task, for one, acts with 19 muscle excitations in
``[0, 1]``.  Two policy heads map features to a distribution over such boxes:

* :class:`GaussianHead` -> :class:`Gaussian`: a diagonal normal.  The mean is
  ``center + half_width * Linear(features)`` and the standard deviation is
  ``half_width * exp(log_std)``, so ``init_log_std`` is in units of half the box
  width whatever the env's units (-0.5: a std of about 0.3 on ``[0, 1]``).
  ``log_std`` is either one learned vector (the default) or a second linear
  output (``state_dependent_std=True``), clamped to ``[-20, 2]``.  Dimensions
  with an infinite bound use centre 0 and half-width 1.  The support is the
  whole real line: **samples are not clipped**; the environment clips them to
  its box, and ``log_prob`` is of the unclipped sample, so a policy-gradient
  update scores the action the policy actually drew.  ``mode()`` (the greedy
  action) is the mean clipped to the box.
* :class:`BetaHead` -> :class:`Beta`: per dimension a Beta distribution on
  ``[0, 1]``, scaled affinely to ``[low, high]`` -- the Beta policy of Chou,
  Maturana and Scherer 2017 ("Improving stochastic policy gradients in
  continuous control with deep reinforcement learning using the Beta
  distribution", ICML).  Its support is the box itself, so there is no
  clipping bias at the bounds.  ``alpha, beta = 1 + softplus(Linear(features))``
  keep both parameters above 1, so each density is unimodal (and bounded).
  Both bounds must be finite.

Both distributions (and the categorical one of :mod:`arena.inference.policy_nets`)
have the same interface, over a batch ``[B]`` of actions with ``action_dim``
components each:

* ``sample(generator=None) -> [B, action_dim]`` in the env's units, without
  gradient;
* ``log_prob(actions) -> [B]``, summed over the action dimensions; for the Beta it
  includes the log-Jacobian ``-log(high - low)`` per dimension of the scaling;
* ``entropy() -> [B]``, the differential entropy in the env's units (so the
  Beta's includes ``+log(high - low)`` per dimension);
* ``mode() -> [B, action_dim]``, the greedy action, always inside the box;
* ``kl(other) -> [B]``, ``KL(self || other)`` for ``other`` of the same family
  (and, for the Beta, the same box), summed over dimensions.

Reproducible sampling: ``sample(generator)`` draws only from the given
``torch.Generator`` (the global generator when None), so the same seed gives the
same samples on the same device and torch version.  ``torch.distributions``
cannot take a generator, so the draws are written out here: the normal as
``mean + std * torch.randn(..., generator=g)``, and the Beta as
``X / (X + Y)`` with ``X ~ Gamma(alpha)``, ``Y ~ Gamma(beta)`` drawn (X first,
then Y) by ``torch._standard_gamma(..., generator=g)`` -- the same sampler
``torch.distributions.Gamma`` uses, called directly because it is the one that
accepts a generator.  The densities, entropies and KL divergences are the
closed forms; the tests check them against ``torch.distributions``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

__all__ = ["Beta", "BetaHead", "Gaussian", "GaussianHead"]

Bound = float | Sequence[float] | np.ndarray | Tensor

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _bounds(low: Bound, high: Bound, action_dim: int) -> tuple[Tensor, Tensor]:
    """``low`` and ``high`` as float32 tensors of shape ``[action_dim]`` (scalars broadcast)."""
    out = []
    for name, v in (("low", low), ("high", high)):
        # on the CPU whatever the default device (a checkpoint's size check builds the net on "meta")
        t = torch.as_tensor(np.asarray(v.detach().cpu() if isinstance(v, Tensor) else v, dtype=np.float32),
                            device="cpu")
        if t.dim() == 0:
            t = t.expand(action_dim)
        if t.shape != (action_dim,):
            raise ValueError(f"{name} has shape {tuple(t.shape)}; give a scalar or one value per action "
                             f"dimension (action_dim={action_dim})")
        if torch.isnan(t).any():
            raise ValueError(f"{name} contains NaN: {t.tolist()}")
        out.append(t.clone())
    lo, hi = out
    if not bool((hi > lo).all()):
        bad = [i for i in range(action_dim) if not hi[i] > lo[i]]
        raise ValueError(f"the box is empty in dimensions {bad}: need low < high, got low={lo[bad].tolist()}, "
                         f"high={hi[bad].tolist()}")
    return lo, hi


def _small_linear(in_dim: int, out_dim: int, bias: float = 0.0) -> nn.Linear:
    # Near-zero weights: the head starts at its prior (the box centre, init_log_std,
    # alpha = beta = 1 + softplus(0)) whatever the features are.
    layer = nn.Linear(in_dim, out_dim)
    nn.init.orthogonal_(layer.weight, gain=0.01)
    nn.init.constant_(layer.bias, bias)
    return layer


def _same_family(self: object, other: object) -> None:
    if type(other) is not type(self):
        raise TypeError(f"kl({type(self).__name__}, {type(other).__name__}): both must be {type(self).__name__}")


# --------------------------------------------------------------------------- Gaussian


class Gaussian:
    """Diagonal normal over ``[..., action_dim]``; samples are not clipped (see the module docstring)."""

    def __init__(self, mean: Tensor, std: Tensor, low: Tensor, high: Tensor):
        self.mean, self.std = mean, std
        self.low, self.high = low.to(mean), high.to(mean)

    def sample(self, generator: torch.Generator | None = None) -> Tensor:
        with torch.no_grad():
            eps = torch.randn(self.mean.shape, generator=generator, dtype=self.mean.dtype, device=self.mean.device)
            return self.mean + self.std * eps

    def log_prob(self, actions: Tensor) -> Tensor:
        z = (actions - self.mean) / self.std
        return (-0.5 * z.pow(2) - self.std.log() - _HALF_LOG_2PI).sum(-1)

    def entropy(self) -> Tensor:
        return (0.5 + _HALF_LOG_2PI + self.std.log()).expand_as(self.mean).sum(-1)

    def mode(self) -> Tensor:
        return torch.clamp(self.mean, self.low, self.high)

    def kl(self, other: Gaussian) -> Tensor:
        _same_family(self, other)
        var_ratio = (self.std / other.std).pow(2)
        mahalanobis = ((self.mean - other.mean) / other.std).pow(2)
        return (0.5 * (var_ratio + mahalanobis - 1.0 - var_ratio.log())).sum(-1)


class GaussianHead(nn.Module):
    """``features [B, in_dim] -> Gaussian`` over ``action_dim`` actions in ``[low, high]``."""

    def __init__(self, in_dim: int, action_dim: int, low: Bound, high: Bound, init_log_std: float = -0.5,
                 state_dependent_std: bool = False):
        super().__init__()
        lo, hi = _bounds(low, high, action_dim)
        finite = torch.isfinite(lo) & torch.isfinite(hi)
        self.action_dim = action_dim
        self.register_buffer("low", lo)
        self.register_buffer("high", hi)
        self.register_buffer("center", torch.where(finite, (lo + hi) / 2, torch.zeros_like(lo)))
        self.register_buffer("half_width", torch.where(finite, (hi - lo) / 2, torch.ones_like(lo)))
        self.mean = _small_linear(in_dim, action_dim)
        self.state_dependent_std = state_dependent_std
        if state_dependent_std:
            self.log_std = _small_linear(in_dim, action_dim, bias=init_log_std)
        else:
            self.log_std = nn.Parameter(torch.full((action_dim,), float(init_log_std)))

    def forward(self, features: Tensor) -> Gaussian:
        mean = self.center + self.half_width * self.mean(features)
        log_std = self.log_std(features) if self.state_dependent_std else self.log_std.expand_as(mean)
        std = self.half_width * log_std.clamp(LOG_STD_MIN, LOG_STD_MAX).exp()
        return Gaussian(mean, std, self.low, self.high)


# --------------------------------------------------------------------------- Beta


def _log_beta_fn(a: Tensor, b: Tensor) -> Tensor:
    return torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)


class Beta:
    """Per-dimension Beta(alpha, beta) on ``[0, 1]`` scaled to ``[low, high]`` (see the module docstring)."""

    def __init__(self, alpha: Tensor, beta: Tensor, low: Tensor, high: Tensor):
        self.alpha, self.beta = alpha, beta
        self.low, self.high = low.to(alpha), high.to(alpha)
        self.width = self.high - self.low

    @property
    def mean(self) -> Tensor:
        return self.low + self.width * self.alpha / (self.alpha + self.beta)

    def sample(self, generator: torch.Generator | None = None) -> Tensor:
        with torch.no_grad():
            a, b = self.alpha.detach(), self.beta.detach()
            x = torch._standard_gamma(a, generator=generator)
            y = torch._standard_gamma(b, generator=generator)
            tiny = torch.finfo(x.dtype).tiny
            u = x / (x + y).clamp(min=tiny)
            # Keep u strictly inside (0, 1): a draw rounded onto an edge would have log_prob -inf.
            u = u.clamp(tiny, 1.0 - torch.finfo(x.dtype).eps)
            return (self.low + self.width * u).clamp(self.low, self.high)

    def log_prob(self, actions: Tensor) -> Tensor:
        eps = torch.finfo(self.alpha.dtype).eps
        # Within eps of the edges, so that a sample rounded onto an edge keeps a finite log-probability.
        u = ((actions - self.low) / self.width).clamp(eps, 1.0 - eps)
        a, b = self.alpha, self.beta
        logp = (a - 1) * u.log() + (b - 1) * torch.log1p(-u) - _log_beta_fn(a, b) - self.width.log()
        return logp.sum(-1)

    def entropy(self) -> Tensor:
        a, b = self.alpha, self.beta
        h = (_log_beta_fn(a, b) - (a - 1) * torch.digamma(a) - (b - 1) * torch.digamma(b)
             + (a + b - 2) * torch.digamma(a + b))
        return (h + self.width.log()).sum(-1)

    def mode(self) -> Tensor:
        a, b = self.alpha, self.beta
        unimodal = (a > 1) & (b > 1)
        peak = (a - 1) / (a + b - 2).clamp(min=torch.finfo(a.dtype).tiny)
        u = torch.where(unimodal, peak, a / (a + b))
        return self.low + self.width * u

    def kl(self, other: Beta) -> Tensor:
        _same_family(self, other)
        if not (torch.equal(self.low, other.low) and torch.equal(self.high, other.high)):
            raise ValueError("kl of two Beta distributions on different boxes is infinite or undefined; "
                             "build both from the same BetaHead")
        a1, b1, a2, b2 = self.alpha, self.beta, other.alpha, other.beta
        kl = (_log_beta_fn(a2, b2) - _log_beta_fn(a1, b1) + (a1 - a2) * torch.digamma(a1)
              + (b1 - b2) * torch.digamma(b1) + (a2 - a1 + b2 - b1) * torch.digamma(a1 + b1))
        return kl.sum(-1)


class BetaHead(nn.Module):
    """``features [B, in_dim] -> Beta`` over ``action_dim`` actions in the finite box ``[low, high]``."""

    def __init__(self, in_dim: int, action_dim: int, low: Bound, high: Bound):
        super().__init__()
        lo, hi = _bounds(low, high, action_dim)
        if not (torch.isfinite(lo).all() and torch.isfinite(hi).all()):
            raise ValueError(f"BetaHead needs finite bounds, got low={lo.tolist()}, high={hi.tolist()}; "
                             "use GaussianHead for unbounded action dimensions")
        self.action_dim = action_dim
        self.register_buffer("low", lo)
        self.register_buffer("high", hi)
        self.params = _small_linear(in_dim, 2 * action_dim)

    def forward(self, features: Tensor) -> Beta:
        raw_alpha, raw_beta = self.params(features).chunk(2, dim=-1)
        return Beta(1.0 + F.softplus(raw_alpha), 1.0 + F.softplus(raw_beta), self.low, self.high)
