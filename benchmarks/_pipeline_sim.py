"""The pipeline's bubble, measured and simulated: what ``bench_pipeline.py`` and the pipeline tests report.

Not part of training. :class:`ActionTimeline` (given to ``LMPipeline(timeline=...)``) records
every stage's ``forward_one_chunk`` (F), ``backward_one_chunk`` (B full, I input-only),
``backward_weight_one_chunk`` (W), the loss at the last stage and the schedule's waits on
send/recv while ``pipeline_step`` runs. Per rank: ``busy`` = the compute actions' time,
``idle = step - busy``, ``bubble = idle / step`` (:func:`bubble_of`). Beside it
:func:`bubble_report` puts the closed form the issue states (:data:`FORMULAS`,
:func:`theory`), which is ``bubble time / compute time`` (1F1B and GPipe ``(p-1)/m``,
interleaved 1F1B ``(p-1)/(v m)``, ZB1P ``(p-1)/(3m)``, ZB-V and DualPipeV about 0 at equal
F, B and W), as the matching fraction of the step ``r / (1 + r)`` (for 1F1B
``(p-1)/(m+p-1)``), and a simulation of the schedule's own ``pipeline_order``
(:func:`schedule_order`, :func:`simulate_order`) with unit costs (F = I = W = 1, B = 2) and
with the measured mean cost of each action.

Import it with ``benchmarks/`` on ``sys.path`` (as the benchmarks do): ``import _pipeline_sim``.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arena.trainers.parallel.pipeline.schedules import schedule_spec

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.parallel.pipeline.runtime import LMPipeline
    from arena.trainers.parallel.pipeline.step import StepOutput

#: Each schedule's closed form, as the issue states it: bubble time / compute time.
FORMULAS: dict[str, str] = {
    "gpipe": "(p-1)/m",
    "1f1b": "(p-1)/m",
    "interleaved_1f1b": "(p-1)/(v*m)",
    "zb1p": "(p-1)/(3m)",
    "zbv": "~0",
    "dualpipev": "~0 (as ZB-V)",
    "vhalf": "block, unit costs",
    "vmin": "block, unit costs",
    "vmin8": "block, unit costs",
    "vmin12": "block, unit costs",
}


def theory(name: str, p: int, m: int) -> float:
    """Bubble time over compute time at equal F, B and W times (the issue's figures)."""
    if name in ("gpipe", "1f1b"):
        return (p - 1) / m
    if name == "interleaved_1f1b":
        return (p - 1) / (schedule_spec(name).stages_per_rank * m)
    if name == "zb1p":
        return (p - 1) / (3 * m)
    if schedule_spec(name).own:  # no closed form: the building block's order on unit costs
        from arena.trainers.parallel.pipeline.vshape import BLOCKS, v_order

        order = {r: [SimAction(s, k, mb) for k, s, mb in acts] for r, acts in v_order(p, m, *BLOCKS[name]).items()}
        sim = simulate_order(order, {"F": 1.0, "I": 1.0, "W": 1.0}, 2 * p)
        return max(sim["makespan"] / b - 1 for b in sim["busy"].values())
    return 0.0  # zbv, dualpipev


class ActionTimeline:
    """Start and end times of each compute action and each communication wait of one rank.

    ``sync`` (CUDA: ``torch.cuda.synchronize``) runs before each clock reading, so an
    action's time is its kernels' time, not their launch time.
    """

    def __init__(self, sync=None):
        self.events: list[tuple[str, int, int, float, float]] = []  # (kind, stage, microbatch, t0, t1)
        self.active = False
        self.sync = sync

    @classmethod
    def for_device(cls, device) -> "ActionTimeline":
        """A timeline for a pipeline on ``device``: CUDA runs asynchronously, so the clock waits for the device
        around each action."""
        import torch

        dev = torch.device(device)
        return cls(sync=(lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else None)

    def now(self) -> float:
        if self.active and self.sync is not None:
            self.sync()
        return time.perf_counter()

    def add(self, kind: str, stage: int, mb: int, t0: float, t1: float) -> None:
        if self.active:
            self.events.append((kind, stage, mb, t0, t1))

    def wrap(self, stage) -> None:
        """Time this PipelineStage's forward, backward and weight-backward calls."""
        timeline, index = self, stage.stage_index

        def timed(orig, kind_of):
            def call(mb, *args, **kwargs):
                t0 = timeline.now()
                try:
                    return orig(mb, *args, **kwargs)
                finally:
                    timeline.add(kind_of(kwargs), index, mb, t0, timeline.now())
            return call

        stage.forward_one_chunk = timed(stage.forward_one_chunk, lambda kw: "F")
        stage.backward_one_chunk = timed(stage.backward_one_chunk,
                                         lambda kw: "B" if kw.get("full_backward", True) else "I")
        stage.backward_weight_one_chunk = timed(stage.backward_weight_one_chunk, lambda kw: "W")

    @contextlib.contextmanager
    def waits(self):
        """Time the schedule's waits on its send/recv work (torch's ``_wait_batch_p2p``) while active."""
        import torch.distributed.pipelining.schedules as S

        orig = getattr(S, "_wait_batch_p2p", None)
        if orig is None:  # a torch without it: waits are just part of the idle time
            yield
            return

        def timed(work):
            t0 = self.now()
            try:
                return orig(work)
            finally:
                self.add("wait", -1, -1, t0, self.now())

        S._wait_batch_p2p = timed
        try:
            yield
        finally:
            S._wait_batch_p2p = orig


COMPUTE_KINDS = ("F", "B", "I", "W", "loss")


@dataclass(frozen=True)
class SimAction:
    """A compute action for :func:`simulate_order` (the fields of torch's ``_Action`` it reads)."""

    stage_index: int
    computation_type: str
    microbatch_index: int
    sub_actions: tuple | None = None


def one_f_one_b_order(p: int, m: int) -> dict[int, list[SimAction]]:
    """The textbook 1F1B order (``memory.one_f_one_b_passes``): rank r runs min(p-1-r, m) warm-up forwards, then
    one F one B, then the rest of B."""
    from arena.trainers.parallel.pipeline.memory import one_f_one_b_passes

    return {r: [SimAction(s, k, mb) for k, s, mb in one_f_one_b_passes(r, p, m)] for r in range(p)}


def simulate_order(order: dict[int, list[Any]], costs: dict, n_stages: int) -> dict[str, Any] | None:
    """Run a schedule's ``pipeline_order`` on an ideal machine: comms are free, each action takes its cost.

    ``costs`` maps a kind (``"F"``, ``"B"``, ``"I"``, ``"W"``) or a ``(kind, stage)`` pair
    (which wins) to a duration.

    An action starts when its rank is free and what it needs is done: F of stage s after
    F of stage s-1 (same microbatch), B or I of stage s after F of stage s and B or I of
    stage s+1, W after I of the same stage. Returns the makespan and, per rank, the busy
    time and ``bubble = (makespan - busy) / makespan``; None if the order cannot finish.
    """
    acts: dict[int, list[tuple[str, int, int]]] = {}
    for rank, actions in order.items():
        flat = []
        for a in actions:
            if a is None:
                continue
            subs = getattr(a, "sub_actions", None) or (a,)
            for s in subs:
                kind = getattr(s.computation_type, "value", str(s.computation_type))
                if kind in ("F", "B", "I", "W"):
                    flat.append((kind, s.stage_index, s.microbatch_index))
        acts[rank] = flat
    done: dict[tuple[str, int, int], float] = {}
    free = {r: 0.0 for r in acts}
    busy = {r: 0.0 for r in acts}
    ptr = {r: 0 for r in acts}

    def ready(kind, s, mb):
        deps = []
        if kind == "F":
            if s > 0:
                deps.append([("F", s - 1, mb)])
        elif kind in ("B", "I"):
            deps.append([("F", s, mb)])
            if s < n_stages - 1:
                deps.append([("B", s + 1, mb), ("I", s + 1, mb)])
        else:
            deps.append([("I", s, mb)])
        t = 0.0
        for alts in deps:
            hit = [done[d] for d in alts if d in done]
            if not hit:
                return None
            t = max(t, min(hit))
        return t

    remaining = sum(len(v) for v in acts.values())
    while remaining:
        progressed = False
        for r in acts:
            while ptr[r] < len(acts[r]):
                kind, s, mb = acts[r][ptr[r]]
                t = ready(kind, s, mb)
                if t is None:
                    break
                start = max(t, free[r])
                cost = costs.get((kind, s), costs.get(kind, 0.0))
                free[r] = start + cost
                busy[r] += cost
                done[(kind, s, mb)] = free[r]
                ptr[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            return None
    span = max(free.values()) if free else 0.0
    return {"makespan": span, "busy": busy,
            "bubble": {r: (span - b) / span if span else 0.0 for r, b in busy.items()}}


def schedule_order(pipe: LMPipeline, rows: int, length: int) -> dict[int, list[Any]] | None:
    """Every rank's compute actions in the order the pipeline's schedule runs them (its ``pipeline_order``).

    ``Schedule1F1B`` runs a hard-coded loop and its ``pipeline_order`` (for display only)
    is off by one microbatch on ranks > 0 in torch 2.13 (rank 1 lists F1 ... F4 for
    m = 4); an order naming a microbatch >= m is replaced by the textbook 1F1B order,
    which is what its loop runs.
    """
    order = getattr(pipe.schedule_for(rows, length), "pipeline_order", None)
    m = pipe.n_microbatches
    bad = order is None or any(a is not None and a.microbatch_index is not None and a.microbatch_index >= m
                               for acts in order.values() for a in acts)
    if bad and pipe.spec.name == "1f1b":
        return one_f_one_b_order(pipe.world_size, m)
    return None if bad else order


def stage_costs(pipe: LMPipeline) -> dict[tuple[str, int], float]:
    """Mean time of each (kind, stage) action in the last step on this rank; the loss counts with the last F."""
    tot: dict[tuple[str, int], float] = defaultdict(float)
    cnt: dict[tuple[str, int], int] = defaultdict(int)
    loss = 0.0
    for kind, s, _mb, a, b in pipe.timeline.events:
        if kind == "loss":
            loss += b - a
        elif kind in COMPUTE_KINDS:
            tot[(kind, s)] += b - a
            cnt[(kind, s)] += 1
    last = ("F", pipe.n_stages - 1)
    if last in tot:
        tot[last] += loss
    out = {k: tot[k] / cnt[k] for k in tot}
    for s in pipe.stage_ids:  # a kind this schedule does not run costs what its parts cost
        f, b = out.get(("F", s), 0.0), out.get(("B", s))
        i, w = out.get(("I", s)), out.get(("W", s))
        if b is None and i is not None and w is not None:
            out[("B", s)] = i + w
        if b is not None:
            out.setdefault(("I", s), b / 2)
            out.setdefault(("W", s), b / 2)
        out.setdefault(("F", s), f)
    return out


def bubble_stats(pipe: LMPipeline, step_s: float, shape: tuple[int, int] | None = None,
                 costs: dict[tuple[str, int], float] | None = None) -> dict[str, Any]:
    """This rank's busy and idle time in the last step, next to the theory (see the module doc).

    ``shape``: the step's microbatch ``(rows, length)``, for the simulations of the schedule's order.
    ``costs``: every stage's measured action costs (:func:`stage_costs` of all ranks,
    merged) for the simulation with measured costs; this rank's own when omitted.
    """
    times: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for kind, _s, _mb, a, b in pipe.timeline.events:
        times[kind] += b - a
        counts[kind] += 1
    busy = sum(times[k] for k in COMPUTE_KINDS)
    idle = max(step_s - busy, 0.0)
    p, m = pipe.world_size, pipe.n_microbatches
    th = theory(pipe.spec.name, p, m)
    out: dict[str, Any] = {
        "schedule": pipe.spec.name, "rank": pipe.rank, "ranks": p, "microbatches": m,
        "stages": list(pipe.stage_ids), "step_s": step_s, "busy_s": busy, "idle_s": idle,
        "wait_s": times.get("wait", 0.0), "bubble": idle / step_s if step_s > 0 else 0.0,
        "idle_per_busy": idle / busy if busy > 0 else 0.0,
        "theory": th, "theory_fraction": th / (1 + th), "theory_formula": FORMULAS[pipe.spec.name],
        "time_s": dict(times), "count": dict(counts),
    }
    if shape is not None:
        order = schedule_order(pipe, *shape)
        if order:
            unit = simulate_order(order, {"F": 1.0, "I": 1.0, "W": 1.0, "B": 2.0}, pipe.n_stages)
            out["sim_unit_bubble"] = unit["bubble"].get(pipe.rank) if unit else None
            measured = simulate_order(order, costs if costs is not None else stage_costs(pipe), pipe.n_stages)
            out["sim_measured_bubble"] = measured["bubble"].get(pipe.rank) if measured else None
    return out


def bubble_of(pipe: LMPipeline, out: StepOutput) -> dict[str, Any]:
    """This rank's bubble in the step that returned ``out`` (:func:`bubble_stats` with every stage's measured
    costs). A collective: every rank calls it, right after ``pipeline_step``."""
    import torch.distributed as dist

    parts: list[Any] = [None] * pipe.world_size
    dist.all_gather_object(parts, stage_costs(pipe), group=pipe.group)
    costs = {k: v for part in parts for k, v in part.items()}
    bubble = bubble_stats(pipe, out.timing["step_s"], (out.packed["rows"], out.packed["length"]), costs)
    bubble["cpu_s"] = out.timing["cpu_s"]  # this process's CPU time: well below step_s when other jobs share the cores
    return bubble


def bubble_report(bubbles: Sequence[dict[str, Any]]) -> str:
    """One line per rank: measured bubble next to the closed form and the simulated schedule."""
    lines = []
    for b in sorted(bubbles, key=lambda b: b["rank"]):
        sim = b.get("sim_unit_bubble")
        simm = b.get("sim_measured_bubble")
        lines.append(
            f"{b['schedule']:>16} rank {b['rank']} stages {b['stages']}: step {b['step_s'] * 1e3:7.1f} ms, "
            f"busy {b['busy_s'] * 1e3:7.1f} ms, idle {b['idle_s'] * 1e3:6.1f} ms (waits {b['wait_s'] * 1e3:6.1f}); "
            f"bubble {b['bubble']:.3f} of the step (idle/busy {b['idle_per_busy']:.3f}) | theory "
            f"{b['theory_formula']} = {b['theory']:.3f} -> {b['theory_fraction']:.3f} of the step"
            + (f" | schedule simulated: unit costs {sim:.3f}" if sim is not None else "")
            + (f", measured costs {simm:.3f}" if simm is not None else ""))
    return "\n".join(lines)
