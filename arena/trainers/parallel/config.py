"""The ``parallel:`` section of a training config (no torch at import)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass
class ParallelConfig:
    """The learner's step on several processes (``parallel:``; ``arena train --parallel ...``); see
    `arena.trainers.parallel.learner` (the language-model learner: every mode) and
    `arena.trainers.parallel.policy` (the neural-policy learner: odc, fsdp). Rollouts stay on rank 0."""

    #: "none" (one process), "pipeline" (stages), "odc" (on-demand sharded) or "fsdp" (FSDP2, the baseline).
    mode: Literal["none", "pipeline", "odc", "fsdp"] = "none"
    #: Ranks (processes). Under torchrun, torchrun's ``--nproc-per-node`` decides.
    world_size: int = 2
    #: Pipeline schedule: gpipe, 1f1b, interleaved_1f1b, zb1p, zbv, dualpipev, vhalf, vmin, vmin8,
    #: vmin12 (all but the first two put two model stages on each rank; vhalf and the vmin ones cap
    #: activation memory, vmin12 the most, for a longer step).
    schedule: str = "1f1b"
    #: Microbatches per minibatch (pipeline) or per rank and minibatch (odc, fsdp).
    microbatches: int = 4
    #: Pipeline: the input embedding and the output layer split by vocabulary over every rank, three stages a
    #: rank (interleaved_1f1b or zb1p), instead of on the first and the last stage.
    vocab_parallel: bool = False
    #: Pipeline: saved activations off the device between a stage's forward and its backward (host memory),
    #: back in time for it: none, full (everything with a pass to hide behind) or selective (the long-lived).
    offload: Literal["none", "full", "selective"] = "none"
    #: ODC's transport: shm (one machine), pg (the process group, any machines), auto.
    transport: Literal["auto", "shm", "pg"] = "auto"
    #: Torch threads of each rank during a step.
    threads: int = 1
    #: How long a collective may wait for a rank, seconds.
    timeout_s: float = 1800.0

    def __post_init__(self):
        from arena.trainers.parallel.pipeline.schedules import SCHEDULES

        if self.mode != "none" and self.world_size < 2:
            raise ValueError(f"world_size must be >= 2 with mode {self.mode}, got {self.world_size} "
                             "(mode: none trains on one process)")
        if self.mode != "none":  # a process each
            from arena.workers import check_workers

            check_workers(self.world_size, "world_size", least=2)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule {self.schedule!r} is not one of {', '.join(SCHEDULES)}")
        if self.offload not in ("none", "full", "selective"):
            raise ValueError(f"offload {self.offload!r} is not one of none, full, selective")
        if self.offload != "none" and self.mode != "pipeline":
            raise ValueError(f"offload moves a pipeline stage's activations: it needs mode: pipeline, got {self.mode}")
        if self.vocab_parallel and self.mode != "pipeline":
            raise ValueError(f"vocab_parallel splits a pipeline's vocabulary layers: it needs mode: pipeline, got {self.mode}")
        if self.vocab_parallel and SCHEDULES[self.schedule].placement != "loop":
            raise ValueError(f"vocab_parallel runs on interleaved_1f1b or zb1p (three stages a rank in a loop), "
                             f"not {self.schedule}")
        if self.microbatches < 1 or self.threads < 1 or self.timeout_s <= 0:
            raise ValueError("microbatches and threads must be >= 1 and timeout_s > 0")
