"""The pipeline schedules by name: the torch class that runs each, and which stages a rank holds.

``gpipe`` and ``1f1b`` put one stage on a rank; ``interleaved_1f1b`` and ``zb1p`` two in a
loop (``r`` and ``r + p``); ``zbv``, ``dualpipev``, ``vhalf``, ``vmin``, ``vmin8`` and ``vmin12`` two
in a V (``r`` and ``2p - 1 - r``). The last four are this package's (:mod:`.vshape`): their orders run
on torch's pipeline runtime, ``_PipelineScheduleRuntime``.
"""

from __future__ import annotations

from dataclasses import dataclass

from arena.trainers.parallel.pipeline import PipelineError


@dataclass(frozen=True)
class ScheduleSpec:
    name: str
    torch_class: str
    stages_per_rank: int
    placement: str  # "single" (stage r), "loop" (r, r + p) or "v" (r, 2p - 1 - r)
    own: bool = False  # an order of .vshape on torch's runtime (torch_class names the runtime)


SCHEDULES: dict[str, ScheduleSpec] = {
    s.name: s
    for s in (
        ScheduleSpec("gpipe", "ScheduleGPipe", 1, "single"),
        ScheduleSpec("1f1b", "Schedule1F1B", 1, "single"),
        ScheduleSpec("interleaved_1f1b", "ScheduleInterleaved1F1B", 2, "loop"),
        ScheduleSpec("zb1p", "ScheduleInterleavedZeroBubble", 2, "loop"),
        ScheduleSpec("zbv", "ScheduleZBVZeroBubble", 2, "v"),
        ScheduleSpec("dualpipev", "ScheduleDualPipeV", 2, "v"),
        ScheduleSpec("vhalf", "_PipelineScheduleRuntime", 2, "v", own=True),
        ScheduleSpec("vmin", "_PipelineScheduleRuntime", 2, "v", own=True),
        ScheduleSpec("vmin8", "_PipelineScheduleRuntime", 2, "v", own=True),
        ScheduleSpec("vmin12", "_PipelineScheduleRuntime", 2, "v", own=True),
    )
}


def schedule_spec(name: str) -> ScheduleSpec:
    try:
        return SCHEDULES[name]
    except KeyError:
        raise PipelineError(f"unknown pipeline schedule {name!r}: use one of {', '.join(SCHEDULES)}") from None


def _torch_has(spec: ScheduleSpec) -> bool:
    import torch.distributed.pipelining as pp
    import torch.distributed.pipelining.schedules as pps

    return hasattr(pps if spec.own else pp, spec.torch_class)


def schedule_class(name: str):
    """The schedule class for ``name``; a one-line error if this torch lacks what it runs on."""
    import torch

    spec = schedule_spec(name)
    if not _torch_has(spec):
        raise PipelineError(f"pipeline schedule {name!r} needs torch.distributed.pipelining.{spec.torch_class}, "
                            f"which torch {torch.__version__} lacks: pick another schedule or upgrade torch")
    if spec.own:
        from arena.trainers.parallel.pipeline.vshape import schedule_class as v_schedule

        return v_schedule(name)
    import torch.distributed.pipelining as pp

    return getattr(pp, spec.torch_class)


def available_schedules() -> list[str]:
    """The schedule names this torch can run."""
    return [n for n, s in SCHEDULES.items() if _torch_has(s)]


def num_stages(schedule: str, world_size: int) -> int:
    return schedule_spec(schedule).stages_per_rank * world_size


def stage_indices(schedule: str, rank: int, world_size: int) -> list[int]:
    """The stages rank ``rank`` holds, in increasing order."""
    spec = schedule_spec(schedule)
    if spec.placement == "single":
        return [rank]
    if spec.placement == "loop":
        return [rank, rank + world_size]
    return sorted({rank, 2 * world_size - 1 - rank})


def stage_owner(schedule: str, stage: int, world_size: int) -> int:
    """The rank that holds ``stage``."""
    spec = schedule_spec(schedule)
    if spec.placement in ("single", "loop"):
        return stage % world_size
    return stage if stage < world_size else 2 * world_size - 1 - stage
