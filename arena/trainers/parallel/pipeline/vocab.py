"""Vocabulary parallelism: the input embedding and the output layer split over every rank of the pipeline.

"Balancing Pipeline Parallelism with Vocabulary Parallelism" (Yeung et al., 2024): with the
vocabulary layers on the first and the last stage, a model whose vocabulary is large next to its
layers leaves those two ranks with far more parameters (the embedding table, the head) and the
last with far more compute (the head's matmul and the softmax over the vocabulary) than the rest.
Here the vocabulary ``[0, V)`` is cut into ``p`` contiguous shards, one per rank, and each
vocabulary layer becomes ``p`` pipeline stages of its own, one shard each, so a rank of ``p`` holds
three stages in a loop (``r``, ``p + r``, ``2p + r``) and the interleaved schedules
(``interleaved_1f1b``, ``zb1p``) group their passes:

* stages ``0 .. p-1``, **embedding shards**: shard ``r`` adds the rows of its tokens (zero for the
  others) to the partial embedding it receives; after stage ``p - 1`` every token has its row;
* stages ``p .. 2p-1``, the **decoder layers**, balanced, the final norm at the last of them;
* stages ``2p .. 3p-1``, **output shards**: shard ``r`` computes its logits ``h W_r^T`` and folds
  them into running softmax statistics per position -- the running max ``m`` (a constant for the
  gradient: the log-sum-exp is exact for any), ``s = sum exp(l - m)``, the target token's logit ``t``
  (the next input token's, from its shard) and ``a = sum exp(l - m) l`` for the entropy -- rescaled
  when the max moves (the online softmax). The last shard hands ``(m, s, t, a)`` to the loss:
  ``log p(target) = t - m - log s`` and ``entropy = m + log s - a / s``, the arithmetic of
  :func:`~arena.trainers.parallel.pipeline.loss.token_logprobs` without a ``[b, L, V]`` tensor.

Every boundary carries one float tensor (the pipeline runtime's stages pass one): the hidden
state with the token ids as one more channel (exact in fp32 below 2^24), plus the four statistics
between output shards. A tied head and embedding (the tiny Llama, SmolLM2) share each shard on its
rank, so autograd sums the two uses and no rank talks to another about them. The top-K losses need
the log-probs of arbitrary token ids at the last stage and are refused with vocabulary parallelism.
"""

from __future__ import annotations

from typing import Any

from arena.trainers.parallel.pipeline import PipelineError

STATS = 4  # m, s, t, a


def row_piece(lo: int, t) -> tuple:
    """A vocabulary shard's rows of a whole tensor, starting at row ``lo``, for :func:`merge_row_pieces`."""
    return ("rows", lo, t)


def merge_row_pieces(parts) -> dict[str, Any]:
    """Dicts merged into one; values that are :func:`row_piece` s of one key are concatenated in row order."""
    import torch

    out: dict[str, Any] = {}
    rows: dict[str, list] = {}
    for part in parts:
        for k, v in part.items():
            if isinstance(v, tuple) and v and v[0] == "rows":
                rows.setdefault(k, []).append(v[1:])
            else:
                out[k] = v
    for k, pieces in rows.items():
        out[k] = torch.cat([t for _, t in sorted(pieces, key=lambda r: r[0])], 0)
    return out


def vocab_ranges(vocab: int, p: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` of each of ``p`` contiguous shards; sizes differ by at most one."""
    if vocab < p:
        raise PipelineError(f"a vocabulary of {vocab} cannot be split over {p} ranks")
    base, extra = divmod(vocab, p)
    out, lo = [], 0
    for r in range(p):
        hi = lo + base + (1 if r < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


def vp_stage_indices(rank: int, p: int) -> list[int]:
    """The three stages rank ``rank`` holds: its embedding shard, its decoder part and its output shard."""
    return [rank, p + rank, 2 * p + rank]


def boundary_width(stage: int, p: int, hidden: int) -> int:
    """The last dimension of what ``stage`` sends on (its output)."""
    if stage < 2 * p:
        return hidden + 1
    return STATS if stage == 3 * p - 1 else hidden + 1 + STATS


def _classes():
    import torch
    from torch import nn

    class EmbeddingShard(nn.Module):
        """Stage ``r < p``: the embedding rows of shard ``r`` added to the partial embedding."""

        def __init__(self, weight, lo: int, hi: int, index: int, name: str):
            super().__init__()
            self.weight, self.lo, self.hi, self.index = weight, lo, hi, index
            self.is_first, self.is_last, self._name = index == 0, False, name

        def forward(self, x):
            if self.index == 0:
                ids, partial = x, None
            else:
                ids, partial = x[..., -1].long(), x[..., :-1]
            local = ids - self.lo
            inside = (local >= 0) & (local < self.hi - self.lo)
            rows = torch.nn.functional.embedding(local.clamp(0, self.hi - self.lo - 1), self.weight)
            rows = rows * inside.unsqueeze(-1).to(rows.dtype)
            out = rows if partial is None else partial + rows
            return torch.cat([out, ids.unsqueeze(-1).to(out.dtype)], -1)

        def full_name(self, local: str) -> str:
            return self._name

        def shard(self, local: str) -> tuple[int, int]:
            return self.lo, self.hi

    class DecoderPart(nn.Module):
        """Stages ``p .. 2p-1``: decoder layers (the final norm at the last), the token ids carried along."""

        def __init__(self, inner, index: int):
            super().__init__()
            self.inner, self.index, self.is_first, self.is_last = inner, index, False, False

        def forward(self, x):
            return torch.cat([self.inner(x[..., :-1]), x[..., -1:]], -1)

        def full_name(self, local: str) -> str:
            return self.inner.full_name(local.partition(".")[2])

        def shard(self, local: str) -> None:
            return None

    class OutputShard(nn.Module):
        """Stage ``2p + r``: logits of shard ``r`` folded into the running softmax statistics."""

        def __init__(self, weight, lo: int, hi: int, index: int, p: int, name: str, temperature: float):
            super().__init__()
            self.weight, self.lo, self.hi, self.index = weight, lo, hi, index
            self.first, self.is_first, self.is_last = index == 2 * p, False, index == 3 * p - 1
            self._name, self.temperature = name, float(temperature)

        def forward(self, x):
            hidden = self.weight.shape[1]
            h, ids = x[..., :hidden], x[..., hidden]
            logits = torch.matmul(h, self.weight.t()) / self.temperature
            top = logits.detach().amax(-1)
            target = torch.full_like(ids, -1.0)
            target[..., :-1] = ids[..., 1:]  # position i predicts the token at i + 1
            local = target.long() - self.lo
            inside = (local >= 0) & (local < self.hi - self.lo)
            picked = logits.gather(-1, local.clamp(0, self.hi - self.lo - 1).unsqueeze(-1)).squeeze(-1)
            picked = picked * inside.to(picked.dtype)
            if self.first:
                m = top
                e = torch.exp(logits - m.unsqueeze(-1))
                s, a, t = e.sum(-1), (e * logits).sum(-1), picked
            else:
                m0, s0, t0, a0 = x[..., hidden + 1:].unbind(-1)
                m = torch.maximum(m0.detach(), top)
                scale = torch.exp(m0.detach() - m)
                e = torch.exp(logits - m.unsqueeze(-1))
                s, a, t = s0 * scale + e.sum(-1), a0 * scale + (e * logits).sum(-1), t0 + picked
            stats = torch.stack([m, s, t, a], -1)
            return stats if self.is_last else torch.cat([h, ids.unsqueeze(-1), stats], -1)

        def full_name(self, local: str) -> str:
            return self._name

        def shard(self, local: str) -> tuple[int, int]:
            return self.lo, self.hi

    return EmbeddingShard, DecoderPart, OutputShard


_CLASSES = None


def split_vocab_parallel(model, p: int, indices, temperature: float = 1.0) -> dict[int, Any]:
    """``{stage: module}`` for ``indices`` of the ``3p`` stages; the shards are new parameters, the layers the model's."""
    from torch import nn

    from arena.trainers.parallel.pipeline.stages import _llama_parts, balanced_layers, llama_stage

    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _classes()
    EmbeddingShard, DecoderPart, OutputShard = _CLASSES
    body = _llama_parts(model)
    emb, head = body.embed_tokens.weight, model.lm_head.weight
    tied = emb is head
    ranges = vocab_ranges(model.config.vocab_size, p)
    layers = balanced_layers(model.config.num_hidden_layers, p)
    shards: dict[int, tuple[Any, Any]] = {}

    def shard_params(r):
        if r not in shards:
            lo, hi = ranges[r]
            e = nn.Parameter(emb.detach()[lo:hi].clone())
            shards[r] = (e, e if tied else nn.Parameter(head.detach()[lo:hi].clone()))
        return shards[r]

    out = {}
    for i in indices:
        r = i % p
        if i < p:
            out[i] = EmbeddingShard(shard_params(r)[0], *ranges[r], i, "model.embed_tokens.weight")
        elif i < 2 * p:
            inner = llama_stage(model, r, p, layers[r], embed=False, norm=r == p - 1, head=False)
            out[i] = DecoderPart(inner, i)
        else:
            out[i] = OutputShard(shard_params(r)[1], *ranges[r], i, p, "lm_head.weight", temperature)
    return out


def stats_logprobs(stats, mask, entropy_grad: bool = False) -> dict[str, Any]:
    """``logp`` and ``entropy`` per position from the output shards' ``(m, s, t, a)`` (0 off the mask)."""
    import torch

    m, s, t, a = stats.float().unbind(-1)
    lse = m + torch.log(s)
    logp = (t - lse) * mask
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        entropy = (lse - a / s) * mask
    return {"logp": logp, "mask": mask, "entropy": entropy if entropy_grad else entropy.detach()}
