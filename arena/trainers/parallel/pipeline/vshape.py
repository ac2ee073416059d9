"""V-shaped schedules with controllable activation memory: V-Min and V-Half.

"Pipeline Parallelism with Controllable Memory" (Qi et al., 2024) sees a pipeline schedule as
one building block repeated once per microbatch. In the V placement rank ``r`` of ``p`` holds
stages ``r`` and ``2p - 1 - r``; each microbatch brings it two forwards (F), two input
backwards (I) and two weight backwards (W), six unit-time passes, so the block repeats every
6 ticks. A stage's activations for a microbatch live from its F to its W, and a rank's
activation memory is the sum of its stages' lifespans over the interval, 6: the block's
offsets set the memory. 1F1B keeps ``p`` microbatches of a ``1/p`` stage on rank 0, ``2p``
chunk-units here (a chunk-unit: one V stage's activations of one microbatch).

The block here: the forward walks down the V, one stage every ``d_first`` ticks on the first
leg (stages ``0 .. p-1``), one tick to turn (stages ``p - 1`` and ``p`` are on one rank), one
stage every ``d_second`` ticks on the second leg; the input backward starts ``g`` ticks after the
last stage's forward and walks back the same way (``d_first`` over the second leg's stages, the
first leg's at ``d_second``). Stage 0's activations then live about ``(d_first + d_second) p``
ticks twice over, ``(d_first + d_second) 2p / 6`` chunk-units:

* ``vmin``: ``d_first = d_second = 1``: ``4p / 6``, a third of 1F1B's ``2p`` (the paper's V-Min);
* ``vhalf``: ``d_first = 2, d_second = 1``: ``6p / 6``, a half (the paper's V-Half), whose slack
  absorbs unequal pass times and communication that V-Min's tight offsets turn into bubble.

``g`` is the smallest gap that gives the rank's four passes distinct ticks modulo 6 and, among
those, the lowest peak memory (:func:`order_memory`); W passes fill the two free ticks of each
block, oldest first. These are the paper's asymptotic figures: the two W ticks of a block come
after its two F ticks, so the peak sits one or two chunk-units above the average, and rank 0
holds a microbatch's first and last stage at once (at least 2 units) -- at ``p = 2`` V-Min
holds 1F1B's 4, at ``p = 4`` half, toward a third as ``p`` grows (docs/parallel.md has the table).

A longer ``period`` (ticks per block, at least 6) brings the next microbatch's forwards later: the
``period - 6`` extra ticks are idle, fewer microbatches are in flight and a rank's average drops to
the lifespans over ``period``, for a step up to ``period / 6`` as long. The F and I ticks must still
differ modulo the period: an odd one leaves V-Min no gap from a few ranks on (7 from 3 ranks, 9 from
4, 11 from 5), the even ones up to 20 have one on up to 64 ranks. A W still takes the first free tick
after its I, oldest first: no later tick holds less. Running it right after its I instead (its rank's
next F or I a tick later) saves no more than a longer period does for the same time: on unit costs
V-Min at period 10 that way takes at least as long as period 12 and holds as much at ``p = 2 .. 8``,
more at 16 (8 units against 6).

* ``vmin8``: V-Min at period 8: half of V-Min's 4 units at ``p = 2``, no less at 4, 0.38x of 1F1B at 8;
* ``vmin12``: V-Min at period 12, the shortest that brings ``p = 4`` under 0.4x of 1F1B (2 units of 8).

The order runs on torch's pipeline runtime (``_PipelineScheduleRuntime``, the one that runs ZB-V
and DualPipeV), which adds the sends and receives itself: :func:`schedule_class`.
"""

from __future__ import annotations

from typing import Any

#: the block's stage spacing and period ``(d_first, d_second, period)`` by schedule name
BLOCKS = {"vmin": (1, 1, 6), "vhalf": (2, 1, 6), "vmin8": (1, 1, 8), "vmin12": (1, 1, 12)}
KINDS = ("F", "I", "W")


def v_stages(rank: int, p: int) -> tuple[int, int]:
    """The rank's two stages in the V: the first leg's and the second leg's."""
    return rank, 2 * p - 1 - rank


def block_times(p: int, d_first: int, d_second: int, gap: int,
                period: int = 6) -> tuple[dict[int, int], dict[int, int]] | None:
    """Microbatch 0's F and I tick of every stage, or None when a rank's passes share a tick modulo ``period``."""
    n = 2 * p
    f, t = {}, 0
    for s in range(n):
        if s:
            t += 1 if s == p else (d_first if s < p else d_second)
        f[s] = t
    i, t = {}, f[n - 1] + 1 + gap
    for s in range(n - 1, -1, -1):
        if s < n - 1:
            t += 1 if s == p - 1 else (d_first if s >= p else d_second)
        i[s] = t
    for r in range(p):
        a, b = v_stages(r, p)
        if len({f[a] % period, f[b] % period, i[a] % period, i[b] % period}) < 4:
            return None
    return f, i


def _rank_order(r: int, p: int, m: int, f: dict[int, int], i: dict[int, int],
                period: int = 6) -> list[tuple[str, int, int]]:
    """Rank ``r``'s passes in block order: F and I at their ticks, W in the free ticks, oldest first."""
    timed = sorted((tick + period * mb, kind, s, mb) for s in v_stages(r, p) for mb in range(m)
                   for tick, kind in ((f[s], "F"), (i[s], "I")))
    out: list[tuple[str, int, int]] = []
    waiting: list[tuple[int, int]] = []
    k = t = 0
    while k < len(timed) or waiting:
        if k < len(timed) and timed[k][0] == t:
            _, kind, s, mb = timed[k]
            out.append((kind, s, mb))
            k += 1
            if kind == "I":
                waiting.append((s, mb))
        elif waiting:
            s, mb = waiting.pop(0)
            out.append(("W", s, mb))
        t += 1
    return out


def v_order(p: int, m: int, d_first: int, d_second: int, period: int = 6) -> dict[int, list[tuple[str, int, int]]]:
    """Each rank's ``(kind, stage, microbatch)`` passes (kind F, I or W) for the block ``(d_first, d_second)``
    repeated every ``period`` ticks.

    Every stage runs every microbatch's F, I and W once, each kind in microbatch order. The gap is
    the one with the lowest peak memory over the first ``2 * period`` that are collision-free.
    """
    if p < 1 or m < 1:
        raise ValueError(f"need at least one rank and one microbatch, got p={p}, m={m}")
    if period < 6:
        raise ValueError(f"a block holds a rank's six passes: period must be >= 6, got {period}")
    best = None
    for gap in range(2 * period):
        times = block_times(p, d_first, d_second, gap, period)
        if times is None:
            continue
        order = {r: _rank_order(r, p, m, *times, period) for r in range(p)}
        peak = max(order_memory(order).values())
        if best is None or peak < best[0]:
            best = (peak, order)
    if best is None:
        raise ValueError(f"no collision-free gap for the block ({d_first}, {d_second}) with period {period} "
                         f"on {p} ranks")
    return best[1]


def order_memory(order: dict[int, list[Any]]) -> dict[int, int]:
    """The most chunk-units each rank holds under an order: +1 at a forward, -1 at a W or a full backward B.

    Accepts :func:`v_order`'s tuples or torch ``_Action`` objects (``None`` entries skipped).
    """
    peak = {}
    for r, acts in order.items():
        cur = best = 0
        for a in acts:
            if a is None:
                continue
            kind = a[0] if isinstance(a, tuple) and isinstance(a[0], str) else \
                getattr(a.computation_type, "value", str(a.computation_type))
            cur += 1 if kind == "F" else -1 if kind in ("W", "B") else 0
            best = max(best, cur)
        peak[r] = best
    return peak


def schedule_class(name: str):
    """The torch schedule class that runs :func:`v_order` for the block named ``name`` (a key of :data:`BLOCKS`)."""
    from torch.distributed.pipelining.schedules import (
        BACKWARD_INPUT,
        BACKWARD_WEIGHT,
        FORWARD,
        _Action,
        _PipelineScheduleRuntime,
    )

    kinds = dict(zip(KINDS, (FORWARD, BACKWARD_INPUT, BACKWARD_WEIGHT)))
    d_first, d_second, ticks = BLOCKS[name]

    class ScheduleVShape(_PipelineScheduleRuntime):
        """Two stages per rank in a V, each rank running its passes in the building block's order."""

        block = (d_first, d_second)
        period = ticks

        def __init__(self, stages, n_microbatches: int, loss_fn=None, scale_grads: bool = True, **kwargs):
            if len(stages) != 2:
                raise ValueError(f"a V schedule holds exactly 2 stages per rank, got {len(stages)}")
            super().__init__(stages=stages, n_microbatches=n_microbatches, loss_fn=loss_fn, scale_grads=scale_grads,
                             **kwargs)
            p = self.pp_group_size
            self.stage_index_to_group_rank = {s: r for r in range(p) for s in v_stages(r, p)}
            for st in self._stages:
                st.stage_index_to_group_rank = self.stage_index_to_group_rank
            plain = v_order(p, n_microbatches, d_first, d_second, ticks)
            self.pipeline_order = {r: [_Action(s, kinds[k], mb) for k, s, mb in acts] for r, acts in plain.items()}
            self._prepare_schedule_with_comms(self.pipeline_order)

    ScheduleVShape.__name__ = ScheduleVShape.__qualname__ = f"ScheduleV{name[1:].capitalize()}"
    return ScheduleVShape
