"""The pipeline's memory checks on GPUs, as one script of a few minutes (run it where CUDA GPUs are present;
it measures what the CPU suite can only account for):

1. Every schedule's step on ``cuda:r`` per rank (NCCL; one rank per GPU, ``--ranks`` at most the GPU
   count; on one GPU the V schedules hold both their stages on it): the allocator's peak over the step
   (``torch.cuda.max_memory_allocated`` minus what was allocated before it: activations, gradients,
   logits) beside the saved-activation meter's count, and the step time.
2. Activation offload (``ActivationOffload``, side stream into pinned host memory) off, full and
   selective on 1F1B, ZB-V and V-Min: the same two memory figures and the step time against no
   offload. The goal for the offload: at most half the device memory at under 10% more step time.
3. The offloaded step's gradients against the plain step's (the copies must not change a bit).

    python benchmarks/gpu_pipeline_check.py [--ranks 2] [--hidden 1024] [--layers 8] [--microbatches 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SCHEDULES = ["1f1b", "zbv", "vhalf", "vmin", "vmin8", "vmin12"]
OFFLOAD = ["1f1b", "zbv", "vmin"]
MiB = 2**20


def _rank(info, args):
    import torch
    from bench_pipeline import _model, _samples

    from arena.trainers.parallel.pipeline.memory import ActivationMeter, ActivationOffload
    from arena.trainers.parallel.pipeline.runtime import LMPipeline
    from arena.trainers.parallel.pipeline.step import pipeline_step
    from arena.trainers.parallel.pipeline.whole_model import gather_named

    dev = torch.device(info.device)
    model, tok = _model(args)  # LMPipeline moves this rank's stages to its GPU
    samples = _samples(args)
    out = {}

    def measure(sched, mode):
        meter = None if mode == "plain" else ActivationMeter() if mode == "none" else ActivationOffload(mode, dev)
        pipe = LMPipeline(model, sched, n_microbatches=args.microbatches, device=info.device, meter=meter)
        pipeline_step(pipe, samples, pad_id=tok.pad_token_id)
        times, peaks = [], []
        for _ in range(args.repeats):
            pipe.zero_grad()
            torch.cuda.synchronize(dev)
            before = torch.cuda.memory_allocated(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            if meter is not None:
                meter.reset()
            t0 = time.perf_counter()
            pipeline_step(pipe, samples, pad_id=tok.pad_token_id)
            torch.cuda.synchronize(dev)
            times.append(time.perf_counter() - t0)
            peaks.append(torch.cuda.max_memory_allocated(dev) - before)
        grads = gather_named(pipe, "grad")  # every rank's, on rank 0 (None elsewhere)
        return {"step_s": statistics.median(times), "alloc_peak": max(peaks),
                "meter_peak": meter.peak if meter is not None else None,
                "host_peak": getattr(meter, "host_peak", 0), "late": getattr(meter, "late", 0), "grads": grads}

    for s in SCHEDULES:
        out[(s, "plain")] = measure(s, "plain")
    for s in OFFLOAD:
        for mode in ("none", "full", "selective"):
            out[(s, mode)] = measure(s, mode)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--ranks", type=int, default=None, help="pipeline ranks (default: min(GPUs, 2))")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=384)
    ap.add_argument("--response", type=int, default=128)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU here: nothing checked")
        return 0
    from _common import markdown_table, versions

    from arena.trainers.parallel.launch import launch

    pr = args.ranks or min(torch.cuda.device_count(), 2)
    print(f"# Pipeline memory on {pr} x {torch.cuda.get_device_name(0)}: hidden {args.hidden}, {args.layers} layers, "
          f"{args.samples} samples in {args.microbatches} microbatches")
    print(versions(("torch", "transformers")))
    res = launch(_rank, pr, (args,), timeout_s=1800)

    def largest(key, s, mode):
        return max(res[r][(s, mode)][key] or 0 for r in range(pr))

    rows = []
    base = largest("alloc_peak", "1f1b", "plain")
    for s in SCHEDULES:
        rows.append([s, " / ".join(f"{res[r][(s, 'plain')]['alloc_peak'] / MiB:.0f}" for r in range(pr)),
                     f"{largest('alloc_peak', s, 'plain') / base:.2f}x",
                     f"{statistics.median(res[r][(s, 'plain')]['step_s'] for r in range(pr)) * 1e3:.0f}"])
    print()
    print(markdown_table(["schedule", "allocator peak MiB (per rank)", "largest vs 1f1b", "step ms"], rows,
                         right={2, 3}))
    rows, failures = [], []
    for s in OFFLOAD:
        none_alloc = largest("alloc_peak", s, "none")
        none_t = largest("step_s", s, "none")
        for mode in ("none", "full", "selective"):
            same = all(torch.equal(res[0][(s, mode)]["grads"][k], g) for k, g in res[0][(s, "none")]["grads"].items())
            if not same:
                failures.append(f"{s} {mode}: gradients differ from no offload")
            rows.append([s, mode, f"{largest('alloc_peak', s, mode) / MiB:.0f}",
                         f"{largest('alloc_peak', s, mode) / none_alloc:.2f}x",
                         f"{largest('meter_peak', s, mode) / MiB:.0f}", f"{largest('host_peak', s, mode) / MiB:.0f}",
                         str(sum(res[r][(s, mode)]["late"] for r in range(pr))),
                         f"{largest('step_s', s, mode) / none_t:.2f}x", "yes" if same else "NO"])
    print()
    print(markdown_table(["schedule", "offload", "allocator peak MiB", "vs none", "saved on device MiB",
                          "host MiB", "late", "step time vs none", "same gradients"], rows, right={2, 3, 4, 5, 6, 7}))
    print("\ngoal: offload full or selective at <= 0.50x the device memory of none, at < 1.10x its step time")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
