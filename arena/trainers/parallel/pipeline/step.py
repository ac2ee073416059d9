"""One forward and backward of the policy loss through the pipeline, and the global gradient clip."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from arena.trainers.parallel.pipeline.packing import pack_samples

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.llm.learner import Sample
    from arena.trainers.parallel.pipeline.runtime import LMPipeline


@dataclass
class StepOutput:
    """What :func:`pipeline_step` returns on every rank."""

    loss: float  # the minibatch loss (computed at the last stage, broadcast)
    stats: dict[str, float]  # the loss's stats, entropy and mismatch, as LLMLearner reports them
    grads: dict[str, Any] | None  # this rank's gradients by full name (CPU copies), when asked
    #: this rank's seconds: ``step_s`` of ``schedule.step`` (the timeline's clock when the pipeline has one) and
    #: ``cpu_s``, this process's CPU time in it (well below step_s when other jobs share the cores)
    timing: dict[str, float]
    packed: dict[str, Any] = field(default_factory=dict)  # microbatch shape, token counts per microbatch


def pipeline_step(pipe: LMPipeline, samples: Sequence["Sample"], *, pad_id: int = 0,
                  return_grads: bool = False) -> StepOutput:
    """One forward and backward of the policy loss on ``samples`` through the pipeline (all ranks call it).

    Zeroes the gradients, packs the samples, runs ``schedule.step``, sums the tied
    weights' gradients across their owners. The optimizer step (and clipping with
    :func:`clip_grad_norm_`) is the caller's. Every rank must pass the same samples. With the
    pipeline's ``timeline``, its actions and waits are recorded during ``schedule.step``.
    """
    import torch
    import torch.distributed as dist

    st = pipe.settings
    packed = pack_samples(samples, pipe.n_microbatches, pad_id=pad_id, agg=st.agg, topk=pipe.topk,
                          pad_to=pipe.pad_to)
    pipe.loss.topk = packed.topk
    sched = pipe.schedule_for(packed.rows, packed.length)
    pipe.train()
    pipe.zero_grad()
    pipe.loss.reset()
    has_first, has_last = 0 in pipe.stages, pipe.n_stages - 1 in pipe.stages
    args = (packed.ids.to(pipe.device),) if has_first else ()
    kwargs = {"target": packed.target.to(pipe.device)} if has_last else {}
    tl = pipe.timeline
    if tl is not None:
        tl.events.clear()
        tl.active = True
    clock = tl.now if tl is not None else time.perf_counter
    try:
        with tl.waits() if tl is not None else contextlib.nullcontext():
            t0, c0 = clock(), time.process_time()
            sched.step(*args, losses=[] if has_last else None, return_outputs=False, **kwargs)
            t1, c1 = clock(), time.process_time()
    finally:
        if tl is not None:
            tl.active = False
    pipe._sync_tied_grads()
    payload = [pipe.loss.collect() if has_last else None]
    dist.broadcast_object_list(payload, src=pipe.global_rank(pipe.last_rank), group=pipe.group)
    loss, stats = payload[0]
    grads = None
    if return_grads:
        grads = {n: (p.grad.detach().cpu().clone() if p.grad is not None else torch.zeros_like(p, device="cpu"))
                 for n, p in pipe.named_parameters()}
    info = {"rows": packed.rows, "length": packed.length, "tokens": packed.tokens,
            "response_tokens": packed.response_tokens, "groups": packed.groups}
    return StepOutput(loss=loss, stats=stats, grads=grads, timing={"step_s": t1 - t0, "cpu_s": c1 - c0}, packed=info)


def clip_grad_norm_(pipe: LMPipeline, max_norm: float) -> float:
    """``torch.nn.utils.clip_grad_norm_`` over the whole pipelined model (a tied weight counted once).

    A collective: every rank calls it. Returns the total norm before clipping.
    """
    import torch
    import torch.distributed as dist

    skip = pipe._tied_aliases()
    sq = torch.zeros((), dtype=torch.float64, device=pipe.device)
    counted = set()
    for name, p in pipe.named_parameters():
        if name in skip or id(p) in counted or p.grad is None:
            continue
        counted.add(id(p))
        sq += p.grad.detach().double().pow(2).sum()
    dist.all_reduce(sq, group=pipe.group)
    total = float(sq.sqrt())
    coef = min(1.0, max_norm / (total + 1e-6))
    if coef < 1.0:
        for p in pipe.parameters():
            if p.grad is not None:
                p.grad.mul_(coef)
    return total
