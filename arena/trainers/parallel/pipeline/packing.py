"""Samples packed into microbatches of one shape, balanced by token count, with the loss's target tensor.

The target tensor's columns (``_NEXT`` ... ``_TOPK``) and the microbatch weights are what
:class:`~arena.trainers.parallel.pipeline.loss.PipelineLoss` reads, here and in the sharded engines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arena.trainers.parallel.pipeline import PipelineError

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.llm.learner import Sample

# target columns
_NEXT, _MASK, _OLD, _ADV, _WLOSS, _WTOK, _TOPK = range(7)


@dataclass
class Packed:
    """A minibatch packed for the pipeline: ``m`` microbatches of one shape ``[rows, length]``."""

    ids: Any  # [m * rows, length] long
    target: Any  # [m * rows, length, 6 + 2K] float64
    n_microbatches: int
    rows: int
    length: int
    topk: int
    groups: list[list[int]]  # sample indices of each microbatch
    tokens: list[int]  # prompt + response tokens of each microbatch
    response_tokens: list[int]


def _agg_weights(groups: list[list[int]], samples, rows: int, agg: str) -> list[float]:
    from arena.trainers.common.losses import AGG_MODES

    if agg not in AGG_MODES:
        raise PipelineError(f"unknown aggregation mode {agg!r}: use one of {', '.join(AGG_MODES)}")
    if agg == "token_mean":
        part = [sum(len(samples[j].response_ids) for j in g) for g in groups]
    elif agg == "seq_mean":
        part = [sum(1 for j in g if samples[j].response_ids) for g in groups]
    else:  # seq_sum_norm divides by every row of the tensor it sees, padding rows included
        part = [rows if g else 0 for g in groups]
        return [p / len(samples) for p in part]
    total = max(sum(part), 1)
    return [p / total for p in part]


def check_samples(samples: Sequence["Sample"], topk: bool, error: type | None = None) -> int:
    """Every sample has a prompt (its first response token is predicted from it) and, for a top-K loss,
    rollout top-K ids; returns K (0 without top-K). ``error``: the exception class to raise."""
    error = error or PipelineError
    for i, s in enumerate(samples):
        if not s.prompt_ids:
            raise error(f"sample {i} has an empty prompt: the first response token must be predicted from something")
    if not topk:
        return 0
    s0 = next((s for s in samples if s.topk_ids), None)
    if s0 is None or any(s.topk_ids is None for s in samples):
        raise error("a top-K loss needs every sample's rollout top-K ids and log-probs: set top_k > 0")
    return len(s0.topk_ids[0])


def pack_samples(samples: Sequence["Sample"], n_microbatches: int, *, pad_id: int = 0, agg: str = "token_mean",
                 topk: bool = False, pad_to: int = 8) -> Packed:
    """Pack ``samples`` into ``n_microbatches`` microbatches balanced by token count (see the module doc)."""
    import torch

    n, m = len(samples), int(n_microbatches)
    if n == 0:
        raise PipelineError("no samples to pack")
    if m < 1:
        raise PipelineError(f"need at least one microbatch, got {n_microbatches}")
    K = check_samples(samples, topk, PipelineError)
    cap = math.ceil(n / m)
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    groups: list[list[int]] = [[] for _ in range(m)]
    load = [0] * m
    for j in sorted(range(n), key=lambda j: (-lengths[j], j)):
        k = min((k for k in range(m) if len(groups[k]) < cap), key=lambda k: (load[k], k))
        groups[k].append(j)
        load[k] += lengths[j]
    rows = max(len(g) for g in groups)
    L = max(lengths)
    L = max(2, -(-L // pad_to) * pad_to)
    C = _TOPK + 2 * K  # 6 + 2K
    ids = torch.full((m * rows, L), pad_id, dtype=torch.long)
    target = torch.zeros((m * rows, L, C), dtype=torch.float64)
    if K:
        target[..., _TOPK + K:] = -1e4  # rollout top-K log-probs off the response, as LLMLearner fills them
    weights = _agg_weights(groups, samples, rows, agg)
    n_resp = sum(len(s.response_ids) for s in samples)
    for k, g in enumerate(groups):
        base = k * rows
        target[base:base + rows, :, _WLOSS] = weights[k]
        target[base:base + rows, :, _WTOK] = 1.0 / max(n_resp, 1)
        for r, j in enumerate(g):
            s = samples[j]
            P, R = len(s.prompt_ids), len(s.response_ids)
            row = base + r
            ids[row, :P + R] = torch.as_tensor(list(s.prompt_ids) + list(s.response_ids), dtype=torch.long)
            target[row, :, _ADV] = float(s.adv)
            if not R:
                continue
            span = slice(P - 1, P - 1 + R)  # logits at P-1 ... P+R-2 predict the response tokens
            target[row, span, _NEXT] = torch.as_tensor(s.response_ids, dtype=torch.float64)
            target[row, span, _MASK] = 1.0
            old = list(s.old_logp[:R])
            if old:
                target[row, P - 1:P - 1 + len(old), _OLD] = torch.as_tensor(old, dtype=torch.float32).double()
            if K:
                target[row, span, _TOPK:_TOPK + K] = torch.as_tensor(s.topk_ids, dtype=torch.float64)
                tl = list(s.topk_logp[:R])
                if tl:
                    target[row, P - 1:P - 1 + len(tl), _TOPK + K:] = (
                        torch.as_tensor(tl, dtype=torch.float32).double())
    return Packed(ids=ids, target=target, n_microbatches=m, rows=rows, length=L, topk=K, groups=groups,
                  tokens=[sum(lengths[j] for j in g) for g in groups],
                  response_tokens=[sum(len(samples[j].response_ids) for j in g) for g in groups])
