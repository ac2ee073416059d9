"""Policy-gradient losses, shared by every learner: a language model's tokens (SPIRAL, ``loss:``) and a
neural policy's moves (SCC and PPO, ``learner.loss``, where ``T`` is 1: one move, its log-probability the
sum of its parts'). `register_loss` adds one; a config names it.

Every loss is a *pure function* of tensors: no state, no modules.  Each returns
``(loss, stats)`` where ``loss`` is a scalar tensor (differentiable w.r.t.
``logp``) and ``stats`` is a ``dict[str, float]`` of detached diagnostics.

Notation (all per token, shape ``[B, T]``; a 1-D ``[T]`` input is one sequence):

* ``logp``      log pi(a_t | s_t) of the *sampled* token under the current
                policy; carries the gradient.
* ``old_logp``  log mu(a_t | s_t) under the rollout / behaviour policy
                (treated as a constant).
* ``adv``       advantage per token, usually the sequence advantage broadcast
                over the response; a ``[B]`` tensor (or a float) is broadcast.
* ``mask``      1 for response tokens, 0 for prompt / padding (bool or 0/1).

pi = exp(logp), mu = exp(old_logp), r = pi / mu.

Losses
------
* :func:`ppo_clip`         standard PPO clipped surrogate, optional dual clip.
* DPPO family (Divergence PPO).  Per-token loss::

      -A * sg(min(r, c)) * tr_mask * logp

  ``sg`` = stop-gradient, ``c`` caps the importance weight (default 1e4) and
  ``tr_mask`` is a trust-region mask (1 keep, 0 masked) that zeroes tokens
  whose update would push pi *further* out of a divergence ball around mu.
  The gradient w.r.t. ``logp`` of a kept token is ``-A * min(r, c) / n``
  (``n`` the token count under ``token_mean``); a masked token gets exactly 0.

  - :func:`dppo_binary_tv`   binary (sampled token vs rest) total variation.
  - :func:`dppo_binary_kl`   binary KL.
  - :func:`dppo_topk_tv`     TV over the rollout top-K ids + a tail bucket.
  - :func:`dppo_topk_kl`     KL over the rollout top-K ids + a tail bucket.
  - :func:`drpo`             smooth quadratic penalty instead of a hard mask.
  - :func:`predictive_mask`  mask only if the next step is *predicted* to
                             increase the divergence (closed form, first order).

All losses take ``agg`` (see :func:`aggregate`) and ``max_len``.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

__all__ = [
    "AGG_MODES",
    "LOSSES",
    "TOPK_LOSSES",
    "aggregate",
    "binary_kl",
    "binary_tv",
    "dppo_binary_kl",
    "dppo_binary_tv",
    "dppo_topk_kl",
    "dppo_topk_tv",
    "drpo",
    "get_loss",
    "infer_sampled_index",
    "ppo_clip",
    "predicted_divergence_change",
    "predictive_mask",
    "register_loss",
    "topk_kl",
    "topk_tv",
    "with_tail_bucket",
]

Stats = dict[str, float]
LossOutput = tuple[Tensor, Stats]

AGG_MODES: tuple[str, ...] = ("token_mean", "seq_mean", "seq_sum_norm")

DEFAULT_C = 1e4
DEFAULT_TV_EPS = 0.15
DEFAULT_KL_EPS = 0.05


# --------------------------------------------------------------------------- #
# Aggregation
# --------------------------------------------------------------------------- #
def aggregate(
    per_token_loss: Tensor,
    mask: Tensor,
    mode: str = "token_mean",
    max_len: int | None = None,
) -> Tensor:
    """Reduce a per-token loss ``[B, T]`` (or ``[T]``) to a scalar.

    Only tokens with ``mask != 0`` count; values at masked positions are
    ignored entirely (even NaN/inf there does not leak into the result).

    * ``'token_mean'``   sum over all valid tokens / number of valid tokens
                         (DAPO-style token-level mean).
    * ``'seq_mean'``     GRPO: mean over each sequence's valid tokens, then mean
                         over the sequences that have at least one valid token.
    * ``'seq_sum_norm'`` Dr. GRPO: sum over each sequence's valid tokens divided
                         by the constant ``max_len``, then mean over all B
                         sequences.  ``max_len`` is required (ValueError).

    With no valid token at all the result is 0 (and the gradient is 0).
    Leading dimensions beyond ``[B, T]`` are flattened into B.
    """
    if mode not in AGG_MODES:
        raise ValueError(f"unknown aggregation mode {mode!r}; valid modes: {', '.join(AGG_MODES)}")
    if per_token_loss.shape != mask.shape:
        raise ValueError(
            f"per_token_loss shape {tuple(per_token_loss.shape)} != mask shape {tuple(mask.shape)}"
        )
    if per_token_loss.dim() == 0:
        raise ValueError("aggregate expects at least a 1-D per-token loss")
    valid = mask != 0
    weight = valid.to(per_token_loss.dtype)
    masked = torch.where(valid, per_token_loss, torch.zeros_like(per_token_loss))

    if mode == "token_mean":
        return masked.sum() / weight.sum().clamp_min(1.0)

    seq_loss = masked.sum(-1).reshape(-1)  # [B]
    seq_len = weight.sum(-1).reshape(-1)  # [B]
    if mode == "seq_mean":
        per_seq = seq_loss / seq_len.clamp_min(1.0)
        n_seq = (seq_len > 0).to(per_token_loss.dtype).sum().clamp_min(1.0)
        return per_seq.sum() / n_seq
    # seq_sum_norm
    if max_len is None:
        raise ValueError("aggregation mode 'seq_sum_norm' (Dr. GRPO) requires max_len")
    if max_len <= 0:
        raise ValueError(f"max_len must be positive, got {max_len}")
    return (seq_loss / float(max_len)).mean()


# --------------------------------------------------------------------------- #
# Shared helpers
# --------------------------------------------------------------------------- #
def _prepare(
    logp: Tensor, old_logp: Tensor, adv: Tensor | float, mask: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Validate shapes; return (logp, old_logp, adv, valid) sanitised at padding.

    At invalid positions logp and old_logp are replaced by 0 (ratio 1) and adv
    by 0, so nothing non-finite from padding can reach the loss or its
    gradient; ``logp`` keeps its gradient at valid positions.
    """
    if old_logp.shape != logp.shape:
        raise ValueError(f"old_logp shape {tuple(old_logp.shape)} != logp shape {tuple(logp.shape)}")
    if mask.shape != logp.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} != logp shape {tuple(logp.shape)}")
    adv_t = torch.as_tensor(adv, dtype=logp.dtype, device=logp.device).detach()
    if adv_t.dim() > 0 and adv_t.dim() == logp.dim() - 1 and adv_t.shape == logp.shape[:-1]:
        adv_t = adv_t.unsqueeze(-1)  # sequence advantage [B] -> [B, 1]
    try:
        adv_t = adv_t.expand_as(logp)
    except RuntimeError as exc:
        raise ValueError(
            f"adv shape {tuple(adv_t.shape)} cannot be broadcast to logp shape {tuple(logp.shape)}"
        ) from exc
    valid = mask != 0
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)
    logp_s = torch.where(valid, logp, zero)
    old_s = torch.where(valid, old_logp.detach().to(logp.dtype), zero)
    adv_s = torch.where(valid, adv_t, zero)
    return logp_s, old_s, adv_s, valid


def _prepare_topk(
    topk_old_logp: Tensor, topk_logp: Tensor, logp: Tensor, valid: Tensor
) -> tuple[Tensor, Tensor]:
    """Validate ``[..., K]`` top-K tensors; detach; make padding positions benign."""
    if topk_old_logp.shape != topk_logp.shape:
        raise ValueError(
            f"topk_old_logp shape {tuple(topk_old_logp.shape)} != topk_logp shape {tuple(topk_logp.shape)}"
        )
    if topk_logp.dim() != logp.dim() + 1 or topk_logp.shape[:-1] != logp.shape:
        raise ValueError(
            f"top-K tensors must have shape logp.shape + (K,) = {tuple(logp.shape)} + (K,), "
            f"got {tuple(topk_logp.shape)}"
        )
    k = topk_logp.shape[-1]
    if k < 1:
        raise ValueError("top-K tensors need K >= 1")
    # padding -> uniform over K+1 buckets under both policies (zero divergence)
    fill = torch.full((), -math.log(k + 1), dtype=logp.dtype, device=logp.device)
    v = valid.unsqueeze(-1)
    old = torch.where(v, topk_old_logp.detach().to(logp.dtype), fill)
    new = torch.where(v, topk_logp.detach().to(logp.dtype), fill)
    return old, new


@torch.no_grad()
def _masked_mean(x: Tensor, valid: Tensor) -> float:
    x = x.to(torch.float64)
    num = torch.where(valid, x, torch.zeros_like(x)).sum()
    den = valid.sum().clamp_min(1)
    return float(num / den)


def _check_c(c: float) -> None:
    if not c > 0:
        raise ValueError(f"ratio cap c must be positive, got {c}")


def _dppo(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor,
    valid: Tensor,
    masked: Tensor,
    c: float,
    agg: str,
    max_len: int | None,
) -> tuple[Tensor, Stats]:
    """``-A * sg(min(r, c)) * tr_mask * logp`` with ``tr_mask = ~masked``.

    Inputs must already be sanitised by :func:`_prepare`.
    """
    _check_c(c)
    keep = valid & ~masked
    with torch.no_grad():
        ratio = torch.exp(logp.detach() - old_logp)
        coef = adv * ratio.clamp(max=c)
        coef = torch.where(keep, coef, torch.zeros_like(coef))
    per_token = -coef * logp
    loss = aggregate(per_token, valid, agg, max_len)
    stats: Stats = {
        "mask_frac": _masked_mean((masked & valid).to(logp.dtype), valid),
        "ratio_mean": _masked_mean(ratio, valid),
    }
    return loss, stats


def _toward_adv(adv: Tensor, logp: Tensor, old_logp: Tensor) -> Tensor:
    """True where pi moved in the advantage's direction: pi>mu for A>0, pi<mu for A<0."""
    up = logp.detach() > old_logp
    down = logp.detach() < old_logp
    return ((adv > 0) & up) | ((adv < 0) & down)


def _log1mexp(x: Tensor) -> Tensor:
    """log(1 - exp(x)) for x <= 0, numerically stable, clamped to a finite value."""
    x = x.clamp(max=0.0)
    tiny = torch.finfo(x.dtype).tiny
    near0 = torch.log((-torch.expm1(x)).clamp_min(tiny))
    far = torch.log1p(-torch.exp(x).clamp(max=0.5))
    return torch.where(x > -math.log(2.0), near0, far)


# --------------------------------------------------------------------------- #
# Divergences (per token, detached use)
# --------------------------------------------------------------------------- #
def binary_tv(old_logp: Tensor, logp: Tensor) -> Tensor:
    """TV between Bernoulli(mu) and Bernoulli(pi) on {sampled token, rest} = |pi - mu|."""
    return (torch.exp(logp) - torch.exp(old_logp)).abs()


def binary_kl(old_logp: Tensor, logp: Tensor) -> Tensor:
    """KL(Bern(mu) || Bern(pi)) = mu log(mu/pi) + (1-mu) log((1-mu)/(1-pi)), >= 0."""
    mu = torch.exp(old_logp)
    kl = mu * (old_logp - logp) + (1.0 - mu) * (_log1mexp(old_logp) - _log1mexp(logp))
    return kl.clamp_min(0.0)


def with_tail_bucket(topk_logp: Tensor) -> Tensor:
    """``[..., K]`` log-probs -> ``[..., K+1]`` probabilities.

    The last bucket is the tail mass ``1 - sum_k p_k`` clamped at 0 (top-K
    log-probs from a real softmax can sum to slightly above 1 numerically).
    """
    p = torch.exp(topk_logp)
    tail = (1.0 - p.sum(-1, keepdim=True)).clamp_min(0.0)
    return torch.cat([p, tail], dim=-1)


def topk_tv(topk_old_logp: Tensor, topk_logp: Tensor) -> Tensor:
    """TV over K+1 buckets: 0.5 * sum_j |mu_j - pi_j| (top-K ids + tail)."""
    mu = with_tail_bucket(topk_old_logp)
    pi = with_tail_bucket(topk_logp)
    return 0.5 * (mu - pi).abs().sum(-1)


def topk_kl(topk_old_logp: Tensor, topk_logp: Tensor) -> Tensor:
    """KL(mu || pi) over K+1 buckets: sum_j mu_j log(mu_j / pi_j), with 0 log 0 = 0."""
    mu = with_tail_bucket(topk_old_logp)
    pi = with_tail_bucket(topk_logp)
    tiny = torch.finfo(pi.dtype).tiny
    kl = torch.xlogy(mu, mu) - mu * torch.log(pi.clamp_min(tiny))
    return kl.sum(-1).clamp_min(0.0)


# --------------------------------------------------------------------------- #
# PPO
# --------------------------------------------------------------------------- #
def ppo_clip(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor | float,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
    agg: str = "token_mean",
    max_len: int | None = None,
) -> LossOutput:
    """Standard PPO clipped surrogate ``-min(r A, clip(r, 1-clip_low, 1+clip_high) A)``.

    ``r = exp(logp - old_logp)`` carries the gradient.  With ``dual_clip = c > 1``
    (Ye et al. 2020, "dual-clip PPO") the loss of tokens with ``A < 0`` is
    additionally capped at ``-c A``::

        L = min(max(-r A, -clip(r) A), -c A)   if A < 0
        L = max(-r A, -clip(r) A)              otherwise

    Stats: ``clip_frac`` (valid tokens where the clipped branch is strictly
    active, i.e. zero gradient from clipping), ``dual_clip_frac``,
    ``ratio_mean``, ``approx_kl`` (k3 estimator mean of ``r - 1 - log r``).
    """
    if clip_low < 0 or clip_high < 0:
        raise ValueError("clip_low and clip_high must be non-negative")
    if dual_clip is not None and not dual_clip > 1.0:
        raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    logp, old_logp, adv, valid = _prepare(logp, old_logp, adv, mask)
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    loss1 = -adv * ratio
    loss2 = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(loss1, loss2)
    clipped = loss2 > loss1
    dual = torch.zeros_like(valid)
    if dual_clip is not None:
        loss3 = -adv * dual_clip
        dual = (adv < 0) & (loss3 < per_token)
        per_token = torch.where(adv < 0, torch.minimum(per_token, loss3), per_token)
    loss = aggregate(per_token, valid, agg, max_len)
    with torch.no_grad():
        lr = log_ratio.detach()
        k3 = torch.expm1(lr) - lr
    stats: Stats = {
        "clip_frac": _masked_mean(clipped.to(logp.dtype), valid),
        "dual_clip_frac": _masked_mean(dual.to(logp.dtype), valid),
        "ratio_mean": _masked_mean(ratio.detach(), valid),
        "approx_kl": _masked_mean(k3, valid),
    }
    return loss, stats


# --------------------------------------------------------------------------- #
# DPPO family
# --------------------------------------------------------------------------- #
def dppo_binary_tv(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor | float,
    mask: Tensor,
    eps_low: float = DEFAULT_TV_EPS,
    eps_high: float = DEFAULT_TV_EPS,
    c: float = DEFAULT_C,
    agg: str = "token_mean",
    max_len: int | None = None,
) -> LossOutput:
    """DPPO with a binary total-variation trust region.

    A token is masked when ``A > 0 and pi - mu > eps_high`` or
    ``A < 0 and pi - mu < -eps_low`` (the update would push pi further out of
    the band in the direction the advantage pulls it); otherwise it gets the
    plain ``-A * sg(min(r, c)) * logp`` loss.

    Stats: ``mask_frac``, ``tv`` (mean |pi - mu|), ``ratio_mean``.
    """
    logp, old_logp, adv, valid = _prepare(logp, old_logp, adv, mask)
    with torch.no_grad():
        diff = torch.exp(logp.detach()) - torch.exp(old_logp)
        masked = ((adv > 0) & (diff > eps_high)) | ((adv < 0) & (diff < -eps_low))
    loss, stats = _dppo(logp, old_logp, adv, valid, masked, c, agg, max_len)
    stats["tv"] = _masked_mean(diff.abs(), valid)
    return loss, stats


def dppo_binary_kl(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor | float,
    mask: Tensor,
    eps: float = DEFAULT_KL_EPS,
    c: float = DEFAULT_C,
    agg: str = "token_mean",
    max_len: int | None = None,
) -> LossOutput:
    """DPPO with a binary KL trust region.

    ``KL = mu log(mu/pi) + (1-mu) log((1-mu)/(1-pi))`` (sampled token vs rest).
    A token is masked when ``KL > eps`` and pi has moved in the advantage's
    direction (``pi > mu`` for ``A > 0``, ``pi < mu`` for ``A < 0``).

    Stats: ``mask_frac``, ``kl`` (mean binary KL), ``ratio_mean``.
    """
    logp, old_logp, adv, valid = _prepare(logp, old_logp, adv, mask)
    with torch.no_grad():
        kl = binary_kl(old_logp, logp.detach())
        masked = (kl > eps) & _toward_adv(adv, logp, old_logp)
    loss, stats = _dppo(logp, old_logp, adv, valid, masked, c, agg, max_len)
    stats["kl"] = _masked_mean(kl, valid)
    return loss, stats


def dppo_exact_kl(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor | float,
    mask: Tensor,
    divergence: Tensor,
    eps: float = DEFAULT_KL_EPS,
    c: float = DEFAULT_C,
    agg: str = "token_mean",
    max_len: int | None = None,
) -> LossOutput:
    """DPPO with the exact divergence of the move's distributions: ``divergence`` is
    ``KL(mu(.|s) || pi(.|s))`` between the behaviour's and the current distribution at the move's state,
    in closed form (a Gaussian's or a Beta's summed over the box's dimensions, a categorical's over its
    choices: a flow policy's per-step Gaussian makes it exact and cheap, Flow-DPPO). A move is masked when
    that KL passes ``eps`` and pi has moved in the advantage's direction (the density of the move played
    rose for ``A > 0``, fell for ``A < 0``: the update would carry pi further out); otherwise it gets the
    plain ``-A * sg(min(r, c)) * logp`` loss. Where the binary losses see two buckets of one sampled
    token, this sees the whole distribution, which a density (a box's move) needs.

    Stats: ``mask_frac``, ``kl`` (mean exact KL), ``ratio_mean``.
    """
    logp, old_logp, adv, valid = _prepare(logp, old_logp, adv, mask)
    div = torch.as_tensor(divergence, dtype=logp.dtype, device=logp.device).detach()
    if div.shape != logp.shape:
        raise ValueError(f"divergence shape {tuple(div.shape)} != logp shape {tuple(logp.shape)}")
    with torch.no_grad():
        masked = (div > eps) & _toward_adv(adv, logp, old_logp)
    loss, stats = _dppo(logp, old_logp, adv, valid, masked, c, agg, max_len)
    stats["kl"] = _masked_mean(div, valid)
    return loss, stats


def dppo_topk_tv(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor | float,
    mask: Tensor,
    topk_old_logp: Tensor,
    topk_logp: Tensor,
    eps_low: float = DEFAULT_TV_EPS,
    eps_high: float = DEFAULT_TV_EPS,
    c: float = DEFAULT_C,
    agg: str = "token_mean",
    max_len: int | None = None,
) -> LossOutput:
    """DPPO with a top-K total-variation trust region.

    ``topk_old_logp`` and ``topk_logp`` are ``[B, T, K]`` log-probs of the SAME
    K token ids (the rollout policy's top-K at each position, with the sampled
    token forced into the set by the caller) under mu and pi respectively.
    One tail bucket holds the remaining mass ``1 - sum_k p_k`` (clamped >= 0),
    and ``TV = 0.5 * sum_{K+1 buckets} |mu_j - pi_j|``.

    Masked when pi moved in the advantage's direction on the sampled token
    (``pi > mu`` for ``A > 0``, ``pi < mu`` for ``A < 0``) and TV exceeds
    ``eps_high`` (A > 0) or ``eps_low`` (A < 0).  Both top-K tensors are only
    used for the mask and are detached.

    Stats: ``mask_frac``, ``tv`` (mean top-K TV), ``ratio_mean``.
    """
    logp, old_logp, adv, valid = _prepare(logp, old_logp, adv, mask)
    topk_old, topk_new = _prepare_topk(topk_old_logp, topk_logp, logp, valid)
    with torch.no_grad():
        tv = topk_tv(topk_old, topk_new)
        toward = _toward_adv(adv, logp, old_logp)
        masked = toward & (((adv > 0) & (tv > eps_high)) | ((adv < 0) & (tv > eps_low)))
    loss, stats = _dppo(logp, old_logp, adv, valid, masked, c, agg, max_len)
    stats["tv"] = _masked_mean(tv, valid)
    return loss, stats


def dppo_topk_kl(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor | float,
    mask: Tensor,
    topk_old_logp: Tensor,
    topk_logp: Tensor,
    eps: float = DEFAULT_KL_EPS,
    c: float = DEFAULT_C,
    agg: str = "token_mean",
    max_len: int | None = None,
) -> LossOutput:
    """DPPO with a top-K KL trust region.

    Same inputs as :func:`dppo_topk_tv` (``[B, T, K]`` log-probs of the same
    ids under mu and pi, sampled token included, plus a clamped tail bucket);
    ``KL = sum_{K+1 buckets} mu_j log(mu_j / pi_j)``.  Masked when
    ``KL > eps`` and pi moved in the advantage's direction on the sampled
    token.

    Stats: ``mask_frac``, ``kl`` (mean top-K KL), ``ratio_mean``.
    """
    logp, old_logp, adv, valid = _prepare(logp, old_logp, adv, mask)
    topk_old, topk_new = _prepare_topk(topk_old_logp, topk_logp, logp, valid)
    with torch.no_grad():
        kl = topk_kl(topk_old, topk_new)
        masked = (kl > eps) & _toward_adv(adv, logp, old_logp)
    loss, stats = _dppo(logp, old_logp, adv, valid, masked, c, agg, max_len)
    stats["kl"] = _masked_mean(kl, valid)
    return loss, stats


def drpo(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor | float,
    mask: Tensor,
    eps: float = DEFAULT_TV_EPS,
    agg: str = "token_mean",
    max_len: int | None = None,
) -> LossOutput:
    """Divergence-regularised PO: a smooth penalty instead of a hard mask.

    Per token (``r = exp(logp - old_logp)`` with gradient, ``mu`` constant)::

        L = -A r + |A| mu (r - 1)^2 / (2 eps)
          = -A r + |A| (pi - mu)^2 / (2 eps mu)

    ``dL/dlogp = -A r + |A| mu (r - 1) r / eps``; at ``r = 1`` this is ``-A``,
    the plain policy-gradient gradient.  The penalty's stationary point in pi
    is at ``|pi - mu| ~ eps`` for ``|A|`` of order one, a soft TV band.

    Stats: ``mask_frac`` (always 0, nothing is hard-masked), ``tv`` (mean
    |pi - mu|), ``ratio_mean``, ``penalty`` (mean penalty term).
    """
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps}")
    logp, old_logp, adv, valid = _prepare(logp, old_logp, adv, mask)
    ratio = torch.exp(logp - old_logp)
    mu = torch.exp(old_logp)
    penalty = adv.abs() * mu * (ratio - 1.0) ** 2 / (2.0 * eps)
    per_token = -adv * ratio + penalty
    loss = aggregate(per_token, valid, agg, max_len)
    with torch.no_grad():
        tv = (torch.exp(logp.detach()) - mu).abs()
    stats: Stats = {
        "mask_frac": 0.0,
        "tv": _masked_mean(tv, valid),
        "ratio_mean": _masked_mean(ratio.detach(), valid),
        "penalty": _masked_mean(penalty.detach(), valid),
    }
    return loss, stats


# --------------------------------------------------------------------------- #
# Predictive mask
# --------------------------------------------------------------------------- #
def infer_sampled_index(
    logp: Tensor, old_logp: Tensor, topk_old_logp: Tensor, topk_logp: Tensor
) -> Tensor:
    """Index in ``[0, K)`` of the sampled token inside the top-K set.

    Picks the slot whose (mu, pi) log-probs are nearest to the sampled token's
    ``(old_logp, logp)``.  Exact when the caller gathered both from the same
    log-softmax; if two slots tie exactly they are interchangeable for every
    divergence used here.  Pass ``sampled_index`` explicitly when unsure.
    """
    dist = (topk_old_logp.detach() - old_logp.detach().unsqueeze(-1)).abs() + (
        topk_logp.detach() - logp.detach().unsqueeze(-1)
    ).abs()
    dist = torch.nan_to_num(dist, nan=math.inf)
    return dist.argmin(-1)


def predicted_divergence_change(
    topk_old_logp: Tensor,
    topk_logp: Tensor,
    sampled_index: Tensor,
    adv: Tensor,
    divergence: str = "tv",
    lr_scale: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """Return ``(D, dD)``: divergence D(mu, pi) over K+1 buckets and its
    predicted first-order change under one policy-gradient step.

    Shapes: top-K ``[..., K]``, ``sampled_index``/``adv`` ``[...]``.
    See :func:`predictive_mask` for the derivation.
    """
    if divergence not in ("tv", "kl"):
        raise ValueError(f"divergence must be 'tv' or 'kl', got {divergence!r}")
    mu = with_tail_bucket(topk_old_logp)  # [..., K+1]
    p = with_tail_bucket(topk_logp)
    p = p / p.sum(-1, keepdim=True).clamp_min(torch.finfo(p.dtype).tiny)
    onehot = torch.zeros_like(p).scatter_(-1, sampled_index.long().unsqueeze(-1), 1.0)
    dz = lr_scale * adv.unsqueeze(-1) * (onehot - p)  # eta A (e_a - p)
    dlogp = dz - (p * dz).sum(-1, keepdim=True)  # d log p_j = dz_j - <p, dz>
    dp = p * dlogp  # J_softmax(p) dz
    if divergence == "tv":
        diff = p - mu
        d = 0.5 * diff.abs().sum(-1)
        # one-sided directional derivative of |x|: sign(x) dx, or |dx| at x = 0
        dd = 0.5 * torch.where(diff != 0, torch.sign(diff) * dp, dp.abs()).sum(-1)
    else:
        d = topk_kl(topk_old_logp, topk_logp)
        # d/dpi_j [sum mu log(mu/pi)] = -mu_j / pi_j, and dp_j / p_j = dlogp_j
        dd = -(mu * dlogp).sum(-1)
    return d, dd


def predictive_mask(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor | float,
    mask: Tensor,
    topk_old_logp: Tensor,
    topk_logp: Tensor,
    eps: float | None = None,
    divergence: str = "tv",
    lr_scale: float = 1.0,
    sampled_index: Tensor | None = None,
    c: float = DEFAULT_C,
    agg: str = "token_mean",
    max_len: int | None = None,
) -> LossOutput:
    """DPPO with a *predictive* trust-region mask.

    A token is masked only when pi is already outside the divergence region
    (``D(mu, pi) > eps``) AND the next gradient step on this token is
    predicted to increase D.  Tokens whose update would pull pi back toward mu
    keep their gradient even outside the region.

    Inputs are as for :func:`dppo_topk_tv` (``[B, T, K]`` log-probs of the SAME
    ids under mu and pi, sampled token included; a clamped tail bucket makes
    K+1 buckets).  ``sampled_index`` (``[B, T]`` in ``[0, K)``) says which slot
    is the sampled token; if None it is inferred by
    :func:`infer_sampled_index`.  ``eps`` defaults to 0.15 for ``'tv'`` and
    0.05 for ``'kl'``.

    Derivation (closed form, first order).  Treat the K+1 buckets as a
    softmax ``p = softmax(z)`` over logits z (the tail is one logit).  For the
    sampled bucket a, ``d log p_a / dz = e_a - p``, so a gradient step of size
    eta (``eta = lr_scale``) on ``-A log p_a`` moves the logits by::

        delta_z = eta * A * (e_a - p)

    The softmax Jacobian ``J = diag(p) - p p^T`` gives the probability change::

        dp = J delta_z = p ⊙ (delta_z - <p, delta_z>)
        dp_j = eta A p_j (1[j=a] - p_j - p_a + ||p||^2)

    and the first-order change of the divergence is ``dD = sum_j dD/dp_j dp_j``:

    * TV, ``D = 1/2 sum_j |p_j - mu_j|``:
      ``dD = 1/2 sum_j sign(p_j - mu_j) dp_j`` (with ``|dp_j|`` where
      ``p_j = mu_j``, the one-sided directional derivative).
    * KL, ``D = sum_j mu_j log(mu_j / p_j)``: ``dD/dp_j = -mu_j / p_j`` so
      ``dD = -sum_j mu_j (delta_z_j - <p, delta_z>)``
      ``= eta A [(p_a - mu_a) - <p - mu, p>]`` (using ``sum mu = 1``).

    Mask iff ``D > eps and dD > 0``.  ``eta > 0`` only scales dD, so the mask
    does not depend on ``lr_scale``; it is kept so the predicted change can be
    reported in real units.  ``A = 0`` gives ``dD = 0`` (never masked).  With
    K = 1 (sampled token + tail) this reduces to the binary direction rule.

    Stats: ``mask_frac``, ``tv`` or ``kl`` (mean D), ``ratio_mean``,
    ``outside_frac`` (D > eps), ``increase_frac`` (dD > 0), ``pred_change``
    (mean dD).
    """
    if divergence not in ("tv", "kl"):
        raise ValueError(f"divergence must be 'tv' or 'kl', got {divergence!r}")
    if not lr_scale > 0:
        raise ValueError(f"lr_scale must be positive, got {lr_scale}")
    if eps is None:
        eps = DEFAULT_TV_EPS if divergence == "tv" else DEFAULT_KL_EPS
    logp, old_logp, adv, valid = _prepare(logp, old_logp, adv, mask)
    topk_old, topk_new = _prepare_topk(topk_old_logp, topk_logp, logp, valid)
    with torch.no_grad():
        if sampled_index is None:
            idx = infer_sampled_index(logp, old_logp, topk_old, topk_new)
        else:
            if sampled_index.shape != logp.shape:
                raise ValueError(
                    f"sampled_index shape {tuple(sampled_index.shape)} != logp shape {tuple(logp.shape)}"
                )
            k = topk_new.shape[-1]
            idx = torch.where(valid, sampled_index.long(), torch.zeros_like(sampled_index.long()))
            if bool(((idx < 0) | (idx >= k)).any()):
                raise ValueError(f"sampled_index must lie in [0, {k})")
        d, dd = predicted_divergence_change(topk_old, topk_new, idx, adv, divergence, lr_scale)
        outside = d > eps
        increase = dd > 0
        masked = outside & increase
    loss, stats = _dppo(logp, old_logp, adv, valid, masked, c, agg, max_len)
    stats[divergence] = _masked_mean(d, valid)
    stats["outside_frac"] = _masked_mean(outside.to(logp.dtype), valid)
    stats["increase_frac"] = _masked_mean(increase.to(logp.dtype), valid)
    stats["pred_change"] = _masked_mean(dd, valid)
    return loss, stats


# --------------------------------------------------------------------------- #
# Registry
# --------------------------------------------------------------------------- #
LOSSES: dict[str, Callable[..., LossOutput]] = {
    "ppo_clip": ppo_clip,
    "dppo_binary_tv": dppo_binary_tv,
    "dppo_binary_kl": dppo_binary_kl,
    "dppo_exact_kl": dppo_exact_kl,
    "dppo_topk_tv": dppo_topk_tv,
    "dppo_topk_kl": dppo_topk_kl,
    "drpo": drpo,
    "predictive_mask": predictive_mask,
}


#: Losses that read the rollout's top-K log-probs (``topk_old_logp`` / ``topk_logp`` keywords): the
#: learner passes them only to these, and a run whose rollouts keep no top-K (``top_k: 0``) is refused.
TOPK_LOSSES: frozenset[str] = frozenset({"dppo_topk_tv", "dppo_topk_kl", "predictive_mask"})


#: Losses that read the exact divergence of each move's behaviour and current distributions
#: (``divergence`` keyword): the neural-policy learner computes it from its weights before the update
#: (``learner.algo: dppo``); the language-model learner, which keeps no distribution whole, refuses them.
DIVERGENCE_LOSSES: frozenset[str] = frozenset({"dppo_exact_kl"})


def register_loss(name: str, fn: Callable[..., LossOutput], *, topk: bool = False) -> None:
    """Add a loss under `name` for every learner's config: ``fn(logp, old_logp, adv, mask, *, agg,
    max_len, **settings) -> (loss, stats)`` as the losses here (``topk``: it also reads the rollout's
    top-K log-probs, ``topk_old_logp``/``topk_logp``, which only language-model rollouts keep). A name
    already taken is a ValueError."""
    global TOPK_LOSSES
    if not name or not name.replace("_", "").isalnum():
        raise ValueError(f"a loss name is letters, digits and _, got {name!r}")
    if name in LOSSES:
        raise ValueError(f"loss {name!r} is registered already")
    LOSSES[name] = fn
    if topk:
        TOPK_LOSSES = TOPK_LOSSES | {name}


def get_loss(name: str) -> Callable[..., LossOutput]:
    """Look up a loss by name; ValueError lists the valid names."""
    try:
        return LOSSES[name]
    except KeyError:
        raise ValueError(
            f"unknown loss {name!r}; valid names: {', '.join(sorted(LOSSES))}"
        ) from None
