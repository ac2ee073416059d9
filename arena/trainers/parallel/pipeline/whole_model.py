"""The whole model seen from its stages: gathered gradients, full state dicts, Hugging Face folders, logits.

So checkpoints move between parallel settings: a pipeline saves what one process loads, and loads
what one process (or any other split) saved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from arena.trainers.parallel.pipeline import PipelineError
from arena.trainers.parallel.pipeline.vocab import merge_row_pieces, row_piece

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.parallel.pipeline.runtime import LMPipeline


def gather_named(pipe: LMPipeline, what: str = "grad", dst: int = 0) -> dict[str, Any] | None:
    """Every rank's parameters (``what="param"``) or gradients (``"grad"``) by full name, on rank ``dst``.

    A collective; CPU copies; ``None`` on the other ranks. A missing gradient is zeros.
    """
    import torch

    if what not in ("grad", "param"):
        raise PipelineError(f"gather_named what must be 'grad' or 'param', got {what!r}")
    local = {}
    shards = pipe.vocab_shards()
    for name, p in pipe.named_parameters():
        t = p if what == "param" else (p.grad if p.grad is not None else torch.zeros_like(p))
        local[name] = _piece(name, t.detach().cpu().clone(), shards)
    return _merged_on(pipe, local, dst)


def _piece(name: str, t, shards: dict[str, tuple[int, int]]):
    """A tensor, or the rows of a vocabulary-sharded one as a piece to concatenate."""
    return row_piece(shards[name][0], t) if name in shards else t


def _merged_on(pipe: LMPipeline, local: dict[str, Any], dst: int) -> dict[str, Any] | None:
    """Every rank's `local` dict merged on rank ``dst`` (a collective; None on the other ranks)."""
    import torch.distributed as dist

    parts = [None] * pipe.world_size if pipe.rank == dst else None
    dist.gather_object(local, parts, dst=pipe.global_rank(dst), group=pipe.group)
    return merge_row_pieces(parts) if pipe.rank == dst else None


def full_state_dict(pipe: LMPipeline, dst: int = 0) -> dict[str, Any] | None:
    """The unsplit model's state dict (its names; a tied weight under each name) on rank ``dst``.

    A collective; CPU tensors; ``None`` on the other ranks.
    """

    local = {}
    shards = pipe.vocab_shards()
    for st in pipe.stages.values():
        for k, v in st.state_dict().items():
            name = st.full_name(k)
            local[name] = _piece(name, v.detach().cpu().clone(), shards)
    return _merged_on(pipe, local, dst)


def load_full_state_dict(pipe: LMPipeline, state_dict: dict[str, Any]) -> None:
    """Load an unsplit model's state dict (e.g. ``model.state_dict()`` of a 1-process run) into this rank's stages.

    A tied weight missing under one of its names (Hugging Face folders store it once) is
    taken from another of its names.
    """
    aliases = {n: t["names"] for t in pipe._tied for n in t["names"]}
    if pipe.vocab_parallel and pipe.config.tie_word_embeddings:  # the shards tie on their rank: the names alias
        aliases.update({"model.embed_tokens.weight": ["lm_head.weight"], "lm_head.weight": ["model.embed_tokens.weight"]})
    shards = pipe.vocab_shards()
    for st in pipe.stages.values():
        want = {}
        for k in st.state_dict():
            full = st.full_name(k)
            src = full if full in state_dict else next((a for a in aliases.get(full, ()) if a in state_dict), None)
            if src is None:
                raise PipelineError(f"the state dict has no {full!r} (stage {st.index} needs it): is it from the "
                                    f"same model architecture ({pipe.model_cls.__name__})?")
            want[k] = state_dict[src][slice(*shards[full])] if full in shards else state_dict[src]
        st.load_state_dict(want, strict=True)


def save_pretrained(pipe: LMPipeline, folder, tokenizer=None, dst: int = 0) -> None:
    """Write the whole pipelined model as an ordinary Hugging Face folder from rank ``dst`` (a collective).

    One process loads it back with ``arena.inference.models.load_model(folder)`` or
    ``LLMLearner.load_weights(folder)``; another pipeline with :func:`load_pretrained`.
    """
    import torch
    import torch.distributed as dist

    sd = full_state_dict(pipe, dst)
    if pipe.rank == dst:
        with torch.random.fork_rng(devices=[]):
            model = pipe.model_cls(pipe.config)
        model.load_state_dict(sd, strict=True)
        model.save_pretrained(folder)
        if tokenizer is not None:
            tokenizer.save_pretrained(folder)
    dist.barrier(group=pipe.group)


def load_pretrained(pipe: LMPipeline, folder) -> None:
    """Load a Hugging Face folder (saved by one process or by :func:`save_pretrained`) into the stages."""
    from arena.inference.models import load_model

    model, _ = load_model(folder)
    load_full_state_dict(pipe, model.state_dict())


def pipeline_logits(pipe: LMPipeline, ids):
    """Forward only, stage by stage with plain send/recv: logits ``[b, L, V]`` on the last stage's rank, else None.

    ``ids`` are right-padded rows (every rank passes the same ids, for their shape). Not with vocabulary
    parallelism (no stage has the whole vocabulary's logits): a one-line error.
    """
    import torch
    import torch.distributed as dist

    if pipe.vocab_parallel:
        raise PipelineError("pipeline_logits needs the whole vocabulary on the last stage: save the model "
                            "(save_pretrained) and run it in one process, or split it without vocab_parallel")
    b, L = ids.shape
    x = None
    with torch.no_grad():
        for s in range(pipe.n_stages):
            if pipe.owner(s) != pipe.rank:
                continue
            if s == 0:
                inp = ids.to(pipe.device)
            elif pipe.owner(s - 1) == pipe.rank:
                inp = x
            else:
                inp = torch.empty((b, L, pipe.config.hidden_size), dtype=pipe.dtype, device=pipe.device)
                dist.recv(inp, src=pipe.global_rank(pipe.owner(s - 1)), group=pipe.group)
            x = pipe.stages[s](inp)
            if s + 1 < pipe.n_stages and pipe.owner(s + 1) != pipe.rank:
                dist.send(x.contiguous(), dst=pipe.global_rank(pipe.owner(s + 1)), group=pipe.group)
    return x if pipe.last_rank == pipe.rank else None
