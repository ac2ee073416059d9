"""Reinforcement-learning maths for a neural-policy learner (IMPALA / AlphaStar / SCC style).

Every function is *pure*: tensors in, tensors out, no modules, no state.
Returns and advantages are detached; losses return ``(loss, stats)`` like
:mod:`arena.trainers.common.losses`, with ``loss`` a differentiable scalar
and ``stats`` a ``dict[str, float]`` of detached diagnostics.

Layout: **time-major** ``[T, B]``, T time steps of B trajectories (extra
trailing dimensions are allowed; a 1-D ``[T]`` input is one trajectory).

* ``behaviour_logp``  log mu(a_t | x_t) under the actor that generated the data.
* ``target_logp``     log pi(a_t | x_t) under the learner's current policy.
* ``rewards``         r_t, received after taking a_t in x_t.
* ``values``          V(x_t), the learner's value estimates.
* ``bootstrap_value`` V(x_T), the value of the state after the window: ``[B]``
                      (the trailing shape of ``values``); a float is broadcast.
* ``discounts``       gamma_t = gamma * (1 - done_t), where done_t says that the
                      episode ended with the transition x_t -> x_{t+1}.  A zero
                      stops every backward recursion at that step, so
                      episodes that end inside the window never bootstrap
                      from the next episode's states.  A float is a constant
                      gamma (no episode ends inside the window).

Returns and advantages
----------------------
* :func:`vtrace`                      IMPALA's off-policy corrected targets.
* :func:`upgo_returns`, :func:`upgo_advantages`   AlphaStar's UPGO.
* :func:`gae_tb`                      batched generalised advantage estimation
                                      (the 1-D :func:`~arena.trainers.common.advantages.gae`
                                      is this function on one column).
* :func:`clipped_importance_weights`  min(rho_bar, pi / mu).

Losses
------
* :func:`policy_gradient_loss`   ``-mean(A_t log pi(a_t | x_t))``.
* :func:`ppo_clip_loss`          PPO's clipped surrogate (delegates to
                                 :func:`arena.trainers.common.losses.ppo_clip`).
* :func:`value_loss`             ``0.5 (V - G)^2`` or Huber.
* :func:`anneal`                 coefficient schedules (constant / linear / cosine).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from arena.trainers.common.losses import aggregate, ppo_clip
from arena.trainers.common.schedules import lr_at

__all__ = [
    "ANNEAL_KINDS",
    "VALUE_LOSS_KINDS",
    "VTraceReturns",
    "anneal",
    "clipped_importance_weights",
    "gae_tb",
    "policy_gradient_loss",
    "ppo_clip_loss",
    "upgo_advantages",
    "upgo_returns",
    "value_loss",
    "vtrace",
]

Stats = dict[str, float]
LossOutput = tuple[Tensor, Stats]

ANNEAL_KINDS: tuple[str, ...] = ("constant", "linear", "cosine")
VALUE_LOSS_KINDS: tuple[str, ...] = ("mse", "huber")


class VTraceReturns(NamedTuple):
    """Outputs of :func:`vtrace`, all ``[T, B]`` and detached."""

    vs: Tensor
    """V-trace value targets v_s."""
    pg_advantages: Tensor
    """rho_s (r_s + gamma_s v_{s+1} - V(x_s)), the policy-gradient advantages."""
    rhos: Tensor
    """Clipped importance weights min(rho_bar, pi / mu)."""


# --------------------------------------------------------------------------- #
# Shared helpers
# --------------------------------------------------------------------------- #
def _float_dtype(*xs: Tensor) -> torch.dtype:
    dtype = xs[0].dtype
    for x in xs[1:]:
        dtype = torch.promote_types(dtype, x.dtype)
    return dtype if dtype.is_floating_point else torch.get_default_dtype()


def _time_major(
    name: str,
    rewards: Tensor,
    values: Tensor,
    bootstrap_value: Tensor | float,
    discounts: Tensor | float,
    *extra: tuple[str, Tensor],
) -> tuple[Tensor, Tensor, Tensor, Tensor | float, list[Tensor]]:
    """Validate and detach ``[T, ...]`` inputs; return them in one float dtype.

    ``discounts`` stays a Python float when given as one (so a constant gamma
    is multiplied in double precision exactly as a scalar would be).
    """
    r = torch.as_tensor(rewards)
    v = torch.as_tensor(values)
    tensors = [r, v] + [torch.as_tensor(t) for _, t in extra]
    if torch.is_tensor(bootstrap_value):
        tensors.append(bootstrap_value)
    if torch.is_tensor(discounts):
        tensors.append(discounts)
    dtype = _float_dtype(*tensors)
    r = r.detach().to(dtype)
    dev = r.device
    v = v.detach().to(dtype=dtype, device=dev)
    if r.dim() < 1:
        raise ValueError(f"{name}: rewards must be time-major [T, B] (or [T]), got a scalar")
    if v.shape != r.shape:
        raise ValueError(f"{name}: values shape {tuple(v.shape)} != rewards shape {tuple(r.shape)}")
    tail = r.shape[1:]
    boot = torch.as_tensor(bootstrap_value, dtype=dtype, device=dev).detach()
    if boot.dim() == 0:
        boot = boot.expand(tail)
    if boot.shape != tail:
        raise ValueError(
            f"{name}: bootstrap_value shape {tuple(boot.shape)} must be rewards.shape[1:] = {tuple(tail)}"
        )
    d: Tensor | float
    if torch.is_tensor(discounts):
        d_t = discounts.detach().to(dtype=dtype, device=dev)
        if d_t.shape != r.shape:
            raise ValueError(
                f"{name}: discounts shape {tuple(d_t.shape)} != rewards shape {tuple(r.shape)}; "
                "pass gamma * (1 - done) per step, or a float for a constant gamma"
            )
        d = d_t
    else:
        d = float(discounts)
    out = []
    for label, t in extra:
        t = torch.as_tensor(t).detach().to(dtype=dtype, device=dev)
        if t.shape != r.shape:
            raise ValueError(f"{name}: {label} shape {tuple(t.shape)} != rewards shape {tuple(r.shape)}")
        out.append(t)
    return r, v, boot, d, out


def _at(d: Tensor | float, t: int) -> Tensor | float:
    return d[t] if torch.is_tensor(d) else d  # type: ignore[index]


def _shift_next(values: Tensor, bootstrap: Tensor) -> Tensor:
    """``[V(x_1), ..., V(x_{T-1}), V(x_T)]``: the value of each step's successor."""
    return torch.cat([values[1:], bootstrap.unsqueeze(0)], dim=0)


def _valid(mask: Tensor | None, like: Tensor) -> Tensor:
    if mask is None:
        return torch.ones_like(like, dtype=torch.bool)
    if mask.shape != like.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} != shape {tuple(like.shape)}")
    return mask != 0


@torch.no_grad()
def _masked_mean(x: Tensor, valid: Tensor) -> float:
    x = x.detach().to(torch.float64)
    num = torch.where(valid, x, torch.zeros_like(x)).sum()
    return float(num / valid.sum().clamp_min(1))


def _same_shape(name: str, a: Tensor, a_name: str, b: Tensor, b_name: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{name}: {b_name} shape {tuple(b.shape)} != {a_name} shape {tuple(a.shape)}")


# --------------------------------------------------------------------------- #
# Importance weights and V-trace
# --------------------------------------------------------------------------- #
def clipped_importance_weights(behaviour_logp: Tensor, target_logp: Tensor, rho_bar: float = 1.0) -> Tensor:
    """``min(rho_bar, pi(a|x) / mu(a|x))``, detached; ``rho_bar = inf`` leaves them unclipped."""
    if not rho_bar > 0:
        raise ValueError(f"rho_bar must be positive, got {rho_bar}")
    _same_shape("clipped_importance_weights", behaviour_logp, "behaviour_logp", target_logp, "target_logp")
    log_rho = (target_logp.detach() - behaviour_logp.detach().to(target_logp.dtype))
    return torch.exp(log_rho).clamp(max=rho_bar)


@torch.no_grad()
def vtrace(
    behaviour_logp: Tensor,
    target_logp: Tensor,
    rewards: Tensor,
    values: Tensor,
    bootstrap_value: Tensor | float,
    discounts: Tensor | float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    lam: float = 1.0,
    pg_rho_bar: float | None = None,
) -> VTraceReturns:
    """V-trace targets and policy-gradient advantages (Espeholt et al. 2018, IMPALA, eq. 1).

    With importance ratios ``rho_t = pi(a_t|x_t) / mu(a_t|x_t)``, truncated
    weights ``rho_t' = min(rho_bar, rho_t)`` and trace coefficients
    ``c_i = lam * min(c_bar, rho_i)`` (lam is the paper's Retrace-style
    extra discount), the n-step V-trace target for ``V(x_s)`` is::

        v_s = V(x_s) + sum_{t=s}^{s+n-1} (prod_{k=s}^{t-1} gamma_k)
                                         (prod_{i=s}^{t-1} c_i) delta_t V
        delta_t V = rho_t' (r_t + gamma_t V(x_{t+1}) - V(x_t))

    computed backward (the paper's recursive form) as::

        v_s - V(x_s) = delta_s V + gamma_s c_s (v_{s+1} - V(x_{s+1})),   v_T = V(x_T)

    with ``V(x_T) = bootstrap_value``.  The policy-gradient advantage (section 4.2) is::

        A_s = rho_s'' (r_s + gamma_s v_{s+1} - V(x_s)),   rho_s'' = min(pg_rho_bar, rho_s)

    (``pg_rho_bar`` defaults to ``rho_bar``).  With all ratios 1 (on-policy)
    and ``lam = 1``, ``v_s`` is the n-step return
    ``sum_t gamma^(t-s) r_t + gamma^(T-s) V(x_T)``; with ``lam < 1`` it is the
    lambda-return of :func:`gae_tb`.  When ``c_bar = rho_bar`` and
    ``lam = 1``, ``A_s`` equals ``v_s - V(x_s)`` step for step.

    Shapes: ``[T, B]`` (or ``[T, B, ...]``) for everything but
    ``bootstrap_value`` (``[B]``).  ``discounts = gamma * (1 - done)``.
    Outputs are detached.
    """
    if not rho_bar > 0 or not c_bar > 0:
        raise ValueError(f"rho_bar and c_bar must be positive, got rho_bar={rho_bar}, c_bar={c_bar}")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    pg_bar = rho_bar if pg_rho_bar is None else pg_rho_bar
    if not pg_bar > 0:
        raise ValueError(f"pg_rho_bar must be positive, got {pg_rho_bar}")
    r, v, boot, d, (mu_lp, pi_lp) = _time_major(
        "vtrace", rewards, values, bootstrap_value, discounts,
        ("behaviour_logp", behaviour_logp), ("target_logp", target_logp),
    )
    ratio = torch.exp(pi_lp - mu_lp)
    rhos = ratio.clamp(max=rho_bar)
    cs = lam * ratio.clamp(max=c_bar)
    v_next = _shift_next(v, boot)
    deltas = rhos * (r + d * v_next - v)
    diff = torch.empty_like(v)  # v_s - V(x_s)
    acc = torch.zeros_like(boot)
    for t in range(r.shape[0] - 1, -1, -1):
        acc = deltas[t] + _at(d, t) * cs[t] * acc
        diff[t] = acc
    vs = v + diff
    vs_next = _shift_next(vs, boot)
    pg_advantages = ratio.clamp(max=pg_bar) * (r + d * vs_next - v)
    return VTraceReturns(vs=vs, pg_advantages=pg_advantages, rhos=rhos)


# --------------------------------------------------------------------------- #
# UPGO
# --------------------------------------------------------------------------- #
@torch.no_grad()
def upgo_returns(
    rewards: Tensor,
    values: Tensor,
    bootstrap_value: Tensor | float,
    discounts: Tensor | float,
) -> Tensor:
    """AlphaStar's upgoing policy update target (Vinyals et al. 2019, Methods, "UPGO").

    The return follows the trajectory only while the next action looked at
    least as good as the average, and bootstraps from the value otherwise::

        G_t = r_t + gamma_t * ( G_{t+1}      if Q(x_{t+1}, a_{t+1}) >= V(x_{t+1})
                                V(x_{t+1})   otherwise )

    with ``Q(x_{t+1}, a_{t+1})`` estimated one step ahead as
    ``r_{t+1} + gamma_{t+1} V(x_{t+2})`` (AlphaStar's pseudocode).  At the last
    step the return bootstraps: ``G_{T-1} = r_{T-1} + gamma_{T-1} V(x_T)``,
    ``V(x_T) = bootstrap_value``.  ``discounts = gamma * (1 - done)``: a zero
    ends the return there, whatever the next episode's values say.

    Returns ``G`` (``[T, B]``, detached).
    """
    r, v, boot, d, _ = _time_major("upgo_returns", rewards, values, bootstrap_value, discounts)
    v_next = _shift_next(v, boot)
    q = r + d * v_next  # Q(x_t, a_t) ~ r_t + gamma_t V(x_{t+1})
    g = torch.empty_like(v)
    acc = boot
    for t in range(r.shape[0] - 1, -1, -1):
        if t + 1 < r.shape[0]:
            acc = torch.where(q[t + 1] >= v[t + 1], acc, v[t + 1])
        acc = r[t] + _at(d, t) * acc
        g[t] = acc
    return g


@torch.no_grad()
def upgo_advantages(
    rewards: Tensor,
    values: Tensor,
    bootstrap_value: Tensor | float,
    discounts: Tensor | float,
    rhos: Tensor | None = None,
) -> Tensor:
    """UPGO advantages ``rho_t (G_t - V(x_t))`` with ``G`` from :func:`upgo_returns`.

    ``rhos`` are clipped importance weights ``min(1, pi / mu)`` (AlphaStar
    clips at 1), e.g. ``vtrace(...).rhos`` or
    :func:`clipped_importance_weights`; ``None`` means on-policy (1).
    Detached; the loss is ``policy_gradient_loss(logp, upgo_advantages(...))``.
    """
    g = upgo_returns(rewards, values, bootstrap_value, discounts)
    adv = g - torch.as_tensor(values).detach().to(dtype=g.dtype, device=g.device)
    if rhos is not None:
        _same_shape("upgo_advantages", adv, "rewards", rhos, "rhos")
        adv = adv * rhos.detach().to(dtype=g.dtype, device=g.device)
    return adv


@torch.no_grad()
def self_imitation_advantages(rewards: Tensor, values: Tensor, discounts: Tensor | float) -> Tensor:
    """Self-imitation learning's advantages (Oh et al. 2018, "Self-Imitation Learning"):
    ``max(R_t - V(x_t), 0)`` with ``R_t = r_t + gamma_t R_{t+1}`` the trajectory's own discounted return
    (complete episodes: 0 after the last step).

    The loss ``policy_gradient_loss(logp, self_imitation_advantages(...))`` raises the log-probability of
    a move that was followed by more than the value expected, whoever's policy chose it, and no
    importance weight shrinks it: a move the policy gives almost no probability (one an explorer
    chose) is learned at full strength when it paid off, where a weighted policy gradient moves it in
    proportion to that tiny probability. Moves that went worse than expected are left alone.
    Detached, ``[T, B]``.
    """
    r, v, _, d, _ = _time_major("self_imitation_advantages", rewards, values, 0.0, discounts)
    g = torch.empty_like(v)
    acc = torch.zeros_like(v[0])
    for t in range(r.shape[0] - 1, -1, -1):
        acc = r[t] + _at(d, t) * acc
        g[t] = acc
    return (g - v).clamp(min=0.0)


# --------------------------------------------------------------------------- #
# GAE
# --------------------------------------------------------------------------- #
@torch.no_grad()
def gae_tb(
    rewards: Tensor,
    values: Tensor,
    bootstrap_value: Tensor | float,
    discounts: Tensor | float,
    lam: float,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation on time-major ``[T, B]`` batches (Schulman et al. 2016, eq. 16)::

        delta_t = r_t + gamma_t V(x_{t+1}) - V(x_t),      V(x_T) = bootstrap_value
        A_t     = delta_t + gamma_t lam A_{t+1},          A_T = 0
        G_t     = A_t + V(x_t)                            (the lambda-return, value target)

    ``discounts = gamma * (1 - done)`` (a float: constant gamma).  ``lam = 1``
    gives n-step / Monte-Carlo returns, ``lam = 0`` one-step TD.  Returns
    ``(advantages, returns)``, detached, shaped like ``rewards``.
    """
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    r, v, boot, d, _ = _time_major("gae_tb", rewards, values, bootstrap_value, discounts)
    adv = torch.zeros_like(r)
    running = torch.zeros_like(boot)
    next_value = boot
    for t in range(r.shape[0] - 1, -1, -1):
        d_t = _at(d, t)
        delta = r[t] + d_t * next_value - v[t]
        running = delta + d_t * lam * running
        adv[t] = running
        next_value = v[t]
    return adv, adv + v


# --------------------------------------------------------------------------- #
# Losses
# --------------------------------------------------------------------------- #
def policy_gradient_loss(logp: Tensor, advantages: Tensor, mask: Tensor | None = None) -> LossOutput:
    """REINFORCE with a baseline: ``L = -(1/n) sum_valid A_t log pi(a_t | x_t)``.

    ``advantages`` are constants (detached here) of ``logp``'s shape, e.g.
    ``vtrace(...).pg_advantages`` or :func:`upgo_advantages`; ``n`` is the
    number of valid steps, so ``dL / dlogp_t = -A_t / n`` (0 where masked).

    Stats: ``pg_loss``, ``adv_mean``, ``adv_abs_mean``.
    """
    adv = torch.as_tensor(advantages, dtype=logp.dtype, device=logp.device).detach()
    _same_shape("policy_gradient_loss", logp, "logp", adv, "advantages")
    valid = _valid(mask, logp)
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)
    per_step = -torch.where(valid, adv, zero) * torch.where(valid, logp, zero)
    loss = aggregate(per_step, valid, "token_mean")
    stats: Stats = {
        "pg_loss": float(loss.detach()),
        "adv_mean": _masked_mean(adv, valid),
        "adv_abs_mean": _masked_mean(adv.abs(), valid),
    }
    return loss, stats


def all_actions_policy_loss(probs: Tensor, q: Tensor, mask: Tensor | None = None) -> LossOutput:
    """The all-actions policy gradient (the "mean actor-critic"): every move of a state at once,
    ``L = -(1/n) sum_valid sum_a pi(a | x_t) A_t(a)`` with ``A_t(a) = Q(x_t, a) - sum_b pi(b | x_t)
    Q(x_t, b)`` held constant, so ``dL / dlogit_t(a) = -pi(a) A_t(a) / n``: the expectation, over
    the policy's own moves, of the sampled term's gradient, without the sampled move's noise.
    ``probs`` and ``q`` are ``[n, A]`` (a move the policy never plays, probability 0, counts
    nothing); ``mask`` ``[n]``. Stats: ``pg_loss``, ``adv_abs_mean`` (pi-weighted)."""
    _same_shape("all_actions_policy_loss", probs, "probs", q, "q")
    valid = _valid(mask, probs[..., 0])
    with torch.no_grad():
        adv = q - (probs * q).sum(-1, keepdim=True)
        adv = torch.where(probs > 0, adv, torch.zeros((), dtype=adv.dtype, device=adv.device))
    per_step = -(probs * adv).sum(-1)
    loss = aggregate(torch.where(valid, per_step, torch.zeros((), dtype=per_step.dtype, device=per_step.device)),
                     valid, "token_mean")
    stats: Stats = {"pg_loss": float(loss.detach()),
                    "adv_abs_mean": _masked_mean((probs.detach() * adv.abs()).sum(-1), valid)}
    return loss, stats


def action_value_targets(rewards: Tensor, discounts: Tensor, vs: Tensor) -> Tensor:
    """``[T, B]`` targets of the value of the move played at each step: ``r_t + gamma_t v_{t+1}``
    with ``vs`` V-trace's value targets (the step after the last: 0)."""
    return rewards + discounts * _shift_next(vs, torch.zeros_like(vs[0]))


def ppo_clip_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor | None = None,
    clip: float = 0.2,
) -> LossOutput:
    """PPO's clipped surrogate (Schulman et al. 2017, eq. 7)::

        L = -(1/n) sum_valid min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t),   r_t = pi / pi_old

    A thin wrapper over :func:`arena.trainers.common.losses.ppo_clip` (one
    implementation of the maths) with a symmetric ``clip`` and
    ``advantages`` of ``logp``'s shape; mask ``None`` means every step counts.
    Stats as ``ppo_clip``: ``clip_frac``, ``dual_clip_frac``, ``ratio_mean``, ``approx_kl``.
    """
    adv = torch.as_tensor(advantages, dtype=logp.dtype, device=logp.device)
    _same_shape("ppo_clip_loss", logp, "logp", adv, "advantages")
    _same_shape("ppo_clip_loss", logp, "logp", old_logp, "old_logp")
    valid = _valid(mask, logp)
    return ppo_clip(logp, old_logp, adv, valid, clip_low=clip, clip_high=clip)


def value_loss(
    values: Tensor,
    targets: Tensor,
    mask: Tensor | None = None,
    kind: str = "mse",
    delta: float = 1.0,
) -> LossOutput:
    """Value regression onto detached targets (e.g. ``vtrace(...).vs``).

    * ``'mse'``    ``0.5 (V - G)^2``, gradient ``(V - G) / n``.
    * ``'huber'``  ``0.5 e^2`` for ``|e| <= delta``, ``delta (|e| - delta / 2)``
                   beyond (``e = V - G``), gradient clipped to ``±delta / n``.

    Averaged over the ``n`` valid steps.  Stats: ``value_loss``,
    ``value_err`` (mean |V - G|), ``explained_variance`` (``1 - Var(G - V) / Var(G)``,
    0 when the targets do not vary).
    """
    if kind not in VALUE_LOSS_KINDS:
        raise ValueError(f"unknown value loss kind {kind!r}; valid kinds: {', '.join(VALUE_LOSS_KINDS)}")
    if not delta > 0:
        raise ValueError(f"huber delta must be positive, got {delta}")
    g = torch.as_tensor(targets, dtype=values.dtype, device=values.device).detach()
    _same_shape("value_loss", values, "values", g, "targets")
    valid = _valid(mask, values)
    err = torch.where(valid, values - g, torch.zeros((), dtype=values.dtype, device=values.device))
    if kind == "mse":
        per_step = 0.5 * err.square()
    else:
        a = err.abs()
        per_step = torch.where(a <= delta, 0.5 * err.square(), delta * (a - 0.5 * delta))
    loss = aggregate(per_step, valid, "token_mean")
    with torch.no_grad():
        gv = g[valid].to(torch.float64)
        ev = 0.0
        if gv.numel() > 1:
            var_g = gv.var(unbiased=False)
            if var_g > 0:
                ev = float(1.0 - err[valid].to(torch.float64).var(unbiased=False) / var_g)
    stats: Stats = {
        "value_loss": float(loss.detach()),
        "value_err": _masked_mean(err.abs(), valid),
        "explained_variance": ev,
    }
    return loss, stats


def anneal(coef: float, iteration: int, iterations: int, kind: str = "constant", end: float = 0.0) -> float:
    """A loss coefficient at ``iteration`` (1-based) of ``iterations``: ``coef`` at the first and,
    for ``'linear'`` and ``'cosine'``, ``end`` at the last.

    The same curve as the learning-rate schedule
    :func:`arena.trainers.common.schedules.lr_at` (one implementation), with
    the kind checked here so a typo is an error rather than a cosine::

        frac = (iteration - 1) / (iterations - 1), clamped to [0, 1]
        linear: end + (coef - end) (1 - frac)
        cosine: end + (coef - end) (1 + cos(pi frac)) / 2
    """
    if kind not in ANNEAL_KINDS:
        raise ValueError(f"unknown anneal kind {kind!r}; valid kinds: {', '.join(ANNEAL_KINDS)}")
    if not math.isfinite(coef) or not math.isfinite(end):
        raise ValueError(f"coef and end must be finite, got coef={coef}, end={end}")
    return lr_at(coef, iteration, iterations, kind, end)  # type: ignore[arg-type]
