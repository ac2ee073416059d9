"""Entity encoder and pointer head: policies over a variable-length set of units.

Games like StarCraft II observe a *set* of entities (units, buildings, resources),
each a feature vector, with a count that changes every step.  AlphaStar (Vinyals
et al. 2019, "Grandmaster level in StarCraft II using multi-agent reinforcement
learning", Nature 575) and SCC (Wang et al. 2021, "SCC: an efficient deep
reinforcement learning agent mastering the game of StarCraft II", arXiv
2012.13169) encode that set with a transformer and choose units with a pointer
network over the per-entity embeddings.  This module holds those two pieces:

* :class:`EntityEncoder` -- ``(entities [B, N, F], entity_mask [B, N]) ->
  (embeddings [B, N, d_model], pooled [B, d_model])``.  A pre-LayerNorm
  transformer encoder with **no positional encoding**: the input is a set, so
  the per-entity embeddings are permutation-equivariant and the pooled summary
  (the mean over present entities) is permutation-invariant.  Padding entities
  (mask False) are zeroed on the way in, are never attended to, are left out of
  the mean, and come out as zero embeddings; so appending padding does not change
  the outputs of the real entities, and a row with no entities at all gives zero
  embeddings and a zero summary rather than NaN.
* :class:`PointerHead` -- ``(query [B, Q], keys [B, N, K], key_mask [B, N]) ->
  logits [B, N]``: scaled dot-product logits ``<W_q q, W_k k_i> / sqrt(d)``, the
  AlphaStar selected-units head.  Masked entries hold ``torch.finfo(dtype).min``,
  so their softmax probability is exactly 0 and a row with a single valid
  entity puts probability exactly 1 on it.  A row with no valid entity at all
  gives a uniform softmax (no NaN); callers that can produce such rows should
  treat the action as a no-op.

Masks follow one convention throughout: ``True`` means the entity is present
(or, for the pointer, may be chosen).  Attention is written out here rather
than through ``nn.MultiheadAttention`` because a fully padded row there makes a
softmax over only ``-inf`` entries, which is NaN.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["EntityEncoder", "PointerHead"]


def _check_mask(mask: Tensor, x: Tensor, name: str) -> None:
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} is required: a [B, N] bool tensor, True where an entity is present "
                        f"(torch.ones(B, N, dtype=torch.bool) if all are), got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} must be a bool tensor (True = present), got {mask.dtype}; pass mask.bool()")
    if mask.shape != x.shape[:2]:
        raise ValueError(f"{name} has shape {tuple(mask.shape)}, expected {tuple(x.shape[:2])} "
                         "([B, N] of the entities)")


class _SetAttention(nn.Module):
    """Multi-head self-attention whose keys are limited to the present entities."""

    def __init__(self, d_model: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)  # [B, H, N, N]
        # finfo.min rather than -inf: an all-padding row softmaxes to uniform, not NaN
        # (its outputs are zeroed by the encoder anyway).
        scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
        attn = self.dropout(scores.softmax(dim=-1))
        return self.out((attn @ v).transpose(1, 2).reshape(b, n, d))


class _Block(nn.Module):
    """Pre-LayerNorm transformer block (attention, then a ReLU feed-forward)."""

    def __init__(self, d_model: int, heads: int, ff: int, dropout: float):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = _SetAttention(d_model, heads, dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ff, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = x + self.dropout(self.attn(self.ln1(x), mask))
        return x + self.dropout(self.ff(self.ln2(x)))


class EntityEncoder(nn.Module):
    """Transformer over a set of entities; see the module docstring.

    ``forward(entities [B, N, entity_dim], entity_mask [B, N] bool) ->
    (embeddings [B, N, d_model], pooled [B, d_model])``.  ``out_dim == d_model``.
    """

    def __init__(self, entity_dim: int, d_model: int = 64, heads: int = 4, layers: int = 2, ff: int = 128,
                 dropout: float = 0.0):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model ({d_model}) must be a multiple of heads ({heads}); e.g. d_model={heads * 16}")
        self.entity_dim = entity_dim
        self.out_dim = d_model
        self.embed = nn.Linear(entity_dim, d_model)
        self.blocks = nn.ModuleList(_Block(d_model, heads, ff, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, entities: Tensor, entity_mask: Tensor) -> tuple[Tensor, Tensor]:
        if entities.dim() != 3 or entities.shape[-1] != self.entity_dim:
            raise ValueError(f"entities has shape {tuple(entities.shape)}, expected [B, N, {self.entity_dim}]")
        _check_mask(entity_mask, entities, "entity_mask")
        present = entity_mask.unsqueeze(-1)
        # Zero padding first, so junk (even NaN) in padded slots cannot leak into anything.
        x = self.embed(entities.masked_fill(~present, 0.0))
        for block in self.blocks:
            x = block(x, entity_mask)
        x = self.norm(x).masked_fill(~present, 0.0)
        count = entity_mask.sum(dim=1, keepdim=True).clamp(min=1).to(x.dtype)
        return x, x.sum(dim=1) / count


class PointerHead(nn.Module):
    """Scaled dot-product pointer logits over entities; see the module docstring.

    ``forward(query [B, query_dim], keys [B, N, key_dim], key_mask [B, N] bool) -> logits [B, N]``.
    """

    def __init__(self, query_dim: int, key_dim: int, d: int = 64):
        super().__init__()
        self.d = d
        self.query = nn.Linear(query_dim, d)
        # No key bias: it would add the same q.b to every entity's logit, which softmax ignores.
        self.key = nn.Linear(key_dim, d, bias=False)

    def forward(self, query: Tensor, keys: Tensor, key_mask: Tensor) -> Tensor:
        if query.dim() != 2 or keys.dim() != 3 or query.shape[0] != keys.shape[0]:
            raise ValueError(f"query {tuple(query.shape)} and keys {tuple(keys.shape)}: expected [B, Q] and [B, N, K]")
        _check_mask(key_mask, keys, "key_mask")
        q = self.query(query)  # [B, d]
        k = self.key(keys.masked_fill(~key_mask.unsqueeze(-1), 0.0))  # [B, N, d]
        logits = torch.einsum("bnd,bd->bn", k, q) / math.sqrt(self.d)
        return logits.masked_fill(~key_mask, torch.finfo(logits.dtype).min)

