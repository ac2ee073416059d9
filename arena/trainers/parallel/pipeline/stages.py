"""A Llama-style causal LM cut into pipeline stages of balanced layer counts, sharing the model's parameters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from arena.trainers.parallel.pipeline import PipelineError


def balanced_layers(n_layers: int, n_stages: int) -> list[tuple[int, int]]:
    """``[start, stop)`` decoder layers per stage: counts differ by at most one.

    The extra layers go to the inner stages first (stage 0 also runs the embedding and
    the last stage the norm, the head and the loss), then to stage 0, then to the last.
    """
    if n_stages < 1:
        raise PipelineError(f"need at least one stage, got {n_stages}")
    if n_layers < n_stages:
        raise PipelineError(f"{n_layers} decoder layers cannot fill {n_stages} stages: use a model with at least "
                            f"{n_stages} layers, fewer ranks, or a schedule with one stage per rank (gpipe, 1f1b)")
    base, extra = divmod(n_layers, n_stages)
    inner = list(range(1, n_stages - 1))
    order = inner + [0] + ([n_stages - 1] if n_stages > 1 else [])
    counts = [base] * n_stages
    for s in order[:extra]:
        counts[s] += 1
    out, start = [], 0
    for c in counts:
        out.append((start, start + c))
        start += c
    return out


def _llama_parts(model):
    body = getattr(model, "model", None)
    need = ("embed_tokens", "layers", "norm", "rotary_emb")
    if body is None or not all(hasattr(body, a) for a in need) or not hasattr(model, "lm_head"):
        raise PipelineError(f"{type(model).__name__} is not a Llama-style causal LM (model.model.embed_tokens, "
                            ".layers, .norm, .rotary_emb and model.lm_head): only those can be split into stages")
    return body


def _make_stage_class():
    import torch
    from torch import nn

    class LlamaStage(nn.Module):
        """Decoder layers ``[start, stop)`` of a Llama, plus the embedding (stage 0) or norm and head (last).

        ``forward(x)``: token ids ``[b, L]`` (stage 0) or hidden states ``[b, L, H]`` ->
        hidden states, or logits ``[b, L, V]`` at the last stage. Rows are right-padded:
        causal attention and positions ``0 .. L-1``, as ``LlamaModel.forward`` builds them.
        The parameters are the source model's own (no copy).
        """

        def __init__(self, model, index: int, n_stages: int, layers: tuple[int, int], parts=None):
            super().__init__()
            body = _llama_parts(model)
            self.config = model.config
            self.index, self.n_stages = index, n_stages
            self.layer_start, self.layer_stop = layers
            self.is_first, self.is_last = index == 0, index == n_stages - 1
            embed, norm, head = parts or (self.is_first, self.is_last, self.is_last)
            self.embed_tokens = body.embed_tokens if embed else None
            self.layers = nn.ModuleList(body.layers[layers[0]:layers[1]])
            self.norm = body.norm if norm else None
            self.lm_head = model.lm_head if head else None
            self.rotary_emb = body.rotary_emb  # buffers only (inv_freq, not persistent)

        def forward(self, x):
            from transformers.masking_utils import create_causal_mask

            h = self.embed_tokens(x) if self.embed_tokens is not None else x
            pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0).expand(h.shape[0], -1)
            pe = self.rotary_emb(h, position_ids=pos)
            mask = create_causal_mask(config=self.config, inputs_embeds=h, attention_mask=None, cache=None,
                                      position_ids=pos)
            for layer in self.layers:
                h = layer(h, attention_mask=mask, position_ids=pos, position_embeddings=pe)
            if self.norm is not None:
                h = self.norm(h)
            if self.lm_head is not None:
                h = self.lm_head(h)
            return h

        def full_name(self, local: str) -> str:
            """A parameter's or buffer's name in the unsplit model."""
            head, _, rest = local.partition(".")
            if head == "layers":
                i, _, tail = rest.partition(".")
                return f"model.layers.{self.layer_start + int(i)}.{tail}"
            if head == "lm_head":
                return local
            return f"model.{local}"

    return LlamaStage


_STAGE_CLASS = None


def _stage_class():
    global _STAGE_CLASS
    if _STAGE_CLASS is None:
        _STAGE_CLASS = _make_stage_class()
    return _STAGE_CLASS


def llama_stage(model, index: int, n_stages: int, layers: tuple[int, int], *, embed: bool, norm: bool, head: bool):
    """One stage of decoder layers ``[start, stop)`` with the embedding, final norm and head as asked."""
    return _stage_class()(model, index, n_stages, layers, (embed, norm, head))


def split_llama(model, n_stages: int, indices: Sequence[int] | None = None) -> dict[int, Any]:
    """``{stage index: LlamaStage}`` for ``indices`` (default: all), sharing ``model``'s parameters."""
    cls = _stage_class()
    _llama_parts(model)
    ranges = balanced_layers(model.config.num_hidden_layers, n_stages)
    wanted = range(n_stages) if indices is None else indices
    return {i: cls(model, i, n_stages, ranges[i]) for i in wanted}
