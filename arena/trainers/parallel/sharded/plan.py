"""One minibatch planned for the sharded engines: its samples split over the ranks and into microbatches by tokens.

Each microbatch is right-padded with the pipeline's target layout
(:mod:`arena.trainers.parallel.pipeline.packing`) and weighted by its share of what the
aggregation divides by over the whole minibatch on all ranks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arena.trainers.parallel.pipeline.packing import _TOPK, _WLOSS, _WTOK, _agg_weights, check_samples, pack_samples
from arena.trainers.parallel.sharded import ODCError

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.llm.learner import Sample

BALANCE = ("tokens", "none")


@dataclass
class Microbatch:
    """Right-padded rows of some samples, with the pipeline's target tensor (global loss weights)."""

    ids: Any  # [rows, length] long
    target: Any  # [rows, length, 6 + 2K] float64 (see arena.trainers.parallel.pipeline.packing)
    samples: list[int]  # indices into the minibatch
    tokens: int  # prompt + response tokens (unpadded)
    response_tokens: int

    @property
    def rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def length(self) -> int:
        return int(self.ids.shape[1])


@dataclass
class Plan:
    """Every rank's microbatches of one minibatch (each rank computes the same plan)."""

    ranks: list[list[Microbatch]]
    balance: str
    topk: int
    n_samples: int

    def tokens(self, padded: bool = False) -> list[list[int]]:
        """``[rank][microbatch]`` tokens (``padded``: rows x length, what the forward computes)."""
        return [[mb.rows * mb.length if padded else mb.tokens for mb in r] for r in self.ranks]


def _global_weights(groups: list[list[int]], samples, agg: str) -> list[float]:
    """Each microbatch's share of the minibatch's aggregation denominator (the pipeline's weighting)."""
    if agg == "seq_sum_norm":  # rows of the microbatch's own tensor over the minibatch's samples
        return [_agg_weights([g], samples, len(g), agg)[0] for g in groups]
    return _agg_weights(groups, samples, 0, agg)


def _groups_by_tokens(samples, parts: int) -> list[list[int]]:
    """The pipeline packer's assignment (longest first into the part with the fewest tokens)."""
    return pack_samples(samples, parts, pad_to=1).groups


def _pack_one(chunk, K: int, pad_id: int, agg: str, pad_to: int):
    """ids and target of one microbatch (the pipeline packer with one microbatch)."""
    import torch

    has_topk = K > 0 and any(s.topk_ids for s in chunk)
    pk = pack_samples(chunk, 1, pad_id=pad_id, agg=agg, topk=has_topk, pad_to=pad_to)
    target = pk.target
    if K and not has_topk:  # only empty responses here: top-K columns the shape needs, never read
        extra = torch.zeros(target.shape[:-1] + (2 * K,), dtype=target.dtype)
        extra[..., K:] = -1e4
        target = torch.cat([target, extra], dim=-1)
    assert target.shape[-1] == _TOPK + 2 * K
    return pk.ids, target


def plan_minibatch(samples: Sequence["Sample"], world_size: int, n_microbatches: int, *, agg: str = "token_mean",
                   topk: bool = False, pad_id: int = 0, pad_to: int = 8, balance: str = "tokens") -> Plan:
    """Split one minibatch over ``world_size`` ranks and each rank's share into microbatches (see the module doc)."""
    samples = list(samples)
    n, W, m = len(samples), int(world_size), int(n_microbatches)
    if n == 0:
        raise ODCError("no samples in the minibatch")
    if m < 1:
        raise ODCError(f"n_microbatches must be >= 1, got {n_microbatches}")
    if balance not in BALANCE:
        raise ODCError(f"unknown balance {balance!r}: use one of {', '.join(BALANCE)}")
    K = check_samples(samples, topk, ODCError)
    if balance == "tokens":
        rank_of = _groups_by_tokens(samples, W)
    else:
        rank_of = [list(range(r, n, W)) for r in range(W)]
    per_rank: list[list[list[int]]] = []
    for idx in rank_of:
        if not idx:
            per_rank.append([])
            continue
        if balance == "tokens":
            local = _groups_by_tokens([samples[j] for j in idx], m)
            groups = [[idx[k] for k in g] for g in local]
        else:
            c = math.ceil(len(idx) / m)
            groups = [idx[i:i + c] for i in range(0, len(idx), c)]
        per_rank.append([g for g in groups if g])
    flat = [g for r in per_rank for g in r]
    weights = iter(_global_weights(flat, samples, agg))
    n_resp = sum(len(s.response_ids) for s in samples)
    ranks = []
    for groups in per_rank:
        mbs = []
        for g in groups:
            chunk = [samples[j] for j in g]
            ids, target = _pack_one(chunk, K, pad_id, agg, pad_to)
            target[..., _WLOSS] = next(weights)
            target[..., _WTOK] = 1.0 / max(n_resp, 1)
            mbs.append(Microbatch(ids=ids, target=target, samples=list(g),
                                  tokens=sum(len(s.prompt_ids) + len(s.response_ids) for s in chunk),
                                  response_tokens=sum(len(s.response_ids) for s in chunk)))
        ranks.append(mbs)
    return Plan(ranks=ranks, balance=balance, topk=K, n_samples=n)


def _empty_microbatch(K: int, pad_id: int, pad_to: int) -> Microbatch:
    """A one-row all-padding microbatch with weight 0 (FSDP2's collectives need every rank to run as many)."""
    import torch

    L = max(2, pad_to)
    target = torch.zeros((1, L, _TOPK + 2 * K), dtype=torch.float64)
    return Microbatch(ids=torch.full((1, L), pad_id, dtype=torch.long), target=target, samples=[], tokens=0,
                      response_tokens=0)
