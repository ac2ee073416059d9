"""Benchmark: peak activation memory of the pipeline schedules, with step time and bubble beside it.

Why: V-Half and V-Min (``arena/trainers/parallel/pipeline/vshape.py``) trade bubble for
activation memory, and V-Min's block at a longer period (``vmin8``, ``vmin12``) step time for
more of it; this measures what each schedule holds on the same model and microbatches.
For each ``--ranks`` count one launch of gloo processes (1 torch thread each) builds the same
tiny Llama (``--hidden``, ``--layers``) and runs ``pipeline_step`` (the learner's policy loss,
forward and backward) for every schedule on one batch of ``--samples`` trajectories in
``--microbatches`` microbatches:

* **memory**: one step with an ``ActivationMeter`` (bytes of the tensors autograd saves for the
  backward, counted through saved-tensor hooks from each stage's forward to its release; a
  storage once; parameters excluded): each rank's peak, and the largest rank's against 1F1B's.
  The count is exact and deterministic: it depends on the order, not on timing.
* **model**: the same order's peak in chunk-units (one V stage's activations of one microbatch:
  +1 at F, -1 at W or B; a one-stage-per-rank schedule's stage is 2 units), the figure the
  papers' fractions (V-Half 1/2, V-Min 1/3 of 1F1B) speak of; printed for larger rank counts too.
* **time**: the median of ``--repeats`` timed steps (schedules take turns) and the measured
  bubble, as ``bench_pipeline.py`` reports it.
* **offload** (``--offload`` schedules): the same step with an ``ActivationOffload`` (``full``,
  ``selective``) against none: the device's peak saved bytes (what stays on the device), the
  host's, the copies back the backward had to wait for, and the step time against the plain
  pipeline (no hooks). On the CPU device and host are one memory: the copies are real, the
  saving is the accounting's (a GPU run measures the allocator instead: ``gpu_pipeline_check.py``).

Run:  .venv/bin/python benchmarks/bench_pipeline_memory.py [--ranks 2 4] [--microbatches 8]
      (the defaults take a few minutes on 2 cores; ``--quick`` a few seconds)
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
_sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))
from _common import markdown_table, versions  # noqa: E402

import os  # noqa: E402

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402

SCHEDULES = ["1f1b", "zb1p", "zbv", "vhalf", "vmin", "vmin8", "vmin12"]
#: the V orders of the model table, for larger rank counts
MODEL_V = ("vhalf", "vmin", "vmin8", "vmin12")
MiB = 1024 * 1024


def _order_units(pipe, rows: int, length: int) -> dict[int, int] | None:
    """Peak chunk-units per rank of the schedule's own order (a one-stage-per-rank stage counts 2)."""
    from _pipeline_sim import schedule_order

    from arena.trainers.parallel.pipeline.vshape import order_memory

    order = schedule_order(pipe, rows, length)
    if order is None:
        return None
    scale = 2 if pipe.spec.stages_per_rank == 1 else 1
    return {r: scale * v for r, v in order_memory(order).items()}


def _rank(info, args, schedules):
    from _pipeline_sim import ActionTimeline, bubble_of
    from bench_pipeline import _model, _samples

    from arena.trainers.parallel.pipeline.memory import ActivationMeter
    from arena.trainers.parallel.pipeline.runtime import LMPipeline
    from arena.trainers.parallel.pipeline.step import pipeline_step

    model, tok = _model(args)
    samples = _samples(args)
    out = {}
    for s in schedules:  # memory: one metered step after one warm-up
        meter = ActivationMeter()
        pipe = LMPipeline(model, s, n_microbatches=args.microbatches, meter=meter)
        pipeline_step(pipe, samples, pad_id=tok.pad_token_id)
        meter.reset()
        step = pipeline_step(pipe, samples, pad_id=tok.pad_token_id)
        out[s] = {"peak": meter.peak, "by_stage": dict(meter.peak_by_stage), "left": meter.current,
                  "units": _order_units(pipe, step.packed["rows"], step.packed["length"]), "stages": pipe.stage_ids}
    pipes = {s: LMPipeline(model, s, n_microbatches=args.microbatches, timeline=ActionTimeline.for_device("cpu"))
             for s in schedules}
    for s in schedules:
        pipeline_step(pipes[s], samples, pad_id=tok.pad_token_id)
    for s in schedules:
        out[s]["steps"] = []
    for k in range(args.repeats):
        for s in schedules[k % len(schedules):] + schedules[:k % len(schedules)]:
            out[s]["steps"].append(bubble_of(pipes[s], pipeline_step(pipes[s], samples, pad_id=tok.pad_token_id)))
    out["offload"] = _offload(args, model, tok, samples, device="cpu")
    return out


OFFLOAD_MODES = ("plain", "none", "full", "selective")


def _offload(args, model, tok, samples, device: str) -> dict:
    """Per schedule and mode: device and host peaks, late copies back, step times (``plain``: no hooks)."""
    from arena.trainers.parallel.pipeline.memory import ActivationMeter, ActivationOffload
    from arena.trainers.parallel.pipeline.runtime import LMPipeline
    from arena.trainers.parallel.pipeline.step import pipeline_step

    out: dict = {}
    for s in args.offload:
        meters = {"plain": None, "none": ActivationMeter(),
                  "full": ActivationOffload("full", device), "selective": ActivationOffload("selective", device)}
        pipes = {m: LMPipeline(model, s, n_microbatches=args.microbatches, device=device, meter=meters[m])
                 for m in OFFLOAD_MODES}
        res = out[s] = {}
        for m in OFFLOAD_MODES:
            pipeline_step(pipes[m], samples, pad_id=tok.pad_token_id)
            if meters[m] is not None:
                meters[m].reset()
                pipeline_step(pipes[m], samples, pad_id=tok.pad_token_id)
                mt = meters[m]
                res[m] = {"peak": mt.peak, "host": getattr(mt, "host_peak", 0), "late": getattr(mt, "late", 0),
                          "copies": getattr(mt, "reloads", 0), "left": mt.current + getattr(mt, "host", 0)}
            else:
                res[m] = {}
            res[m]["times"] = []
        for k in range(args.repeats):
            for m in OFFLOAD_MODES[k % 4:] + OFFLOAD_MODES[:k % 4]:
                res[m]["times"].append(pipeline_step(pipes[m], samples, pad_id=tok.pad_token_id).timing["step_s"])
    return out


def offload_rows(results: list[dict], pr: int) -> list[list[str]]:
    """The offload table's rows for one rank count."""
    rows = []
    for s, per in results[0]["offload"].items():
        def step(m, s=s):
            return statistics.median(max(results[r]["offload"][s][m]["times"][k] for r in range(pr))
                                     for k in range(len(per[m]["times"])))
        base_peak = max(results[r]["offload"][s]["none"]["peak"] for r in range(pr))
        for m in ("none", "full", "selective"):
            peaks = [results[r]["offload"][s][m]["peak"] for r in range(pr)]
            hosts = [results[r]["offload"][s][m]["host"] for r in range(pr)]
            rows.append([str(pr), s, m, " / ".join(f"{v / MiB:.1f}" for v in peaks), f"{max(peaks) / base_peak:.2f}x",
                         " / ".join(f"{v / MiB:.1f}" for v in hosts),
                         str(sum(results[r]["offload"][s][m]["late"] for r in range(pr))),
                         f"{step(m) / step('plain'):.2f}x",
                         " / ".join(str(results[r]["offload"][s][m]["left"]) for r in range(pr))])
    return rows


def model_table(ranks: list[int], m: int) -> str:
    """Peak chunk-units of 1F1B and the V orders on unit costs, with the unit-cost bubble, for larger rank counts."""
    from _pipeline_sim import SimAction, one_f_one_b_order, simulate_order

    from arena.trainers.parallel.pipeline.vshape import BLOCKS, order_memory, v_order

    rows = []
    for p in ranks:
        ob = simulate_order(one_f_one_b_order(p, m), {"F": 1.0, "B": 2.0}, p)
        row = [str(p), f"{2 * p}", f"{max(ob['bubble'].values()):.3f}"]
        for name in MODEL_V:
            plain = v_order(p, m, *BLOCKS[name])
            peak = max(order_memory(plain).values())
            sim = simulate_order({r: [SimAction(s, k, mb) for k, s, mb in a] for r, a in plain.items()},
                                 {"F": 1.0, "I": 1.0, "W": 1.0}, 2 * p)
            row += [f"{peak} ({peak / (2 * p):.2f}x)", f"{max(sim['bubble'].values()):.3f}"]
        rows.append(row)
    head = ["ranks", "1f1b units", "1f1b bubble"] + [f"{n} {c}" for n in MODEL_V for c in ("units", "bubble")]
    return markdown_table(head, rows, right=set(range(len(head))))


def main(argv=None) -> None:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(description=doc.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, nargs="*", default=[2, 4], help="pipeline rank counts (default 2 4)")
    p.add_argument("--microbatches", type=int, default=8, help="microbatches per step (default 8)")
    p.add_argument("--layers", type=int, default=8, help="decoder layers (default 8: a V on 4 ranks has 8 stages)")
    p.add_argument("--hidden", type=int, default=256, help="hidden size (default 256)")
    p.add_argument("--samples", type=int, default=32, help="trajectories per step (default 32)")
    p.add_argument("--prompt", type=int, default=96, help="longest prompt, tokens (default 96)")
    p.add_argument("--response", type=int, default=32, help="longest response, tokens (default 32)")
    p.add_argument("--repeats", type=int, default=3, help="timed steps per schedule (default 3)")
    p.add_argument("--schedules", nargs="*", default=SCHEDULES, help=f"schedules (default {' '.join(SCHEDULES)})")
    p.add_argument("--offload", nargs="*", default=["1f1b", "zbv", "vmin"],
                   help="schedules for the offload table (default 1f1b zbv vmin; none: skip it)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes for a smoke run (1f1b, vhalf, vmin, vmin12; offload on zbv, vmin)")
    args = p.parse_args(argv)
    if args.quick:
        args.hidden, args.layers, args.samples, args.prompt, args.response = 32, 4, 8, 12, 6
        args.microbatches, args.repeats, args.ranks = 4, 1, [2]
        args.schedules, args.offload = ["1f1b", "vhalf", "vmin", "vmin12"], ["zbv", "vmin"]

    from arena.trainers.parallel.launch import launch
    from arena.trainers.parallel.pipeline.schedules import available_schedules, schedule_spec

    for s in args.schedules:
        schedule_spec(s)
    have = available_schedules()
    schedules = [s for s in args.schedules if s in have]
    print(f"# Pipeline activation memory: hidden {args.hidden}, {args.layers} layers, {args.samples} samples in "
          f"{args.microbatches} microbatches; gloo, 1 thread per rank")
    print(versions(("torch", "transformers")))
    rows, off_rows = [], []
    for pr in args.ranks:
        results = launch(_rank, pr, (args, schedules), timeout_s=3600)
        base = max(results[r]["1f1b"]["peak"] for r in range(pr)) if "1f1b" in schedules else None
        for s in schedules:
            peaks = [results[r][s]["peak"] for r in range(pr)]
            units = [results[r][s]["units"] for r in range(pr)]
            unit_txt = " / ".join(str(u[r]) for r, u in enumerate(units)) if all(units) else "-"
            step = statistics.median(max(results[r][s]["steps"][k]["step_s"] for r in range(pr))
                                     for k in range(args.repeats))
            bubble = " / ".join(f"{statistics.median(b['bubble'] for b in results[r][s]['steps']):.2f}"
                                for r in range(pr))
            rows.append([str(pr), s, " / ".join(f"{v / MiB:.1f}" for v in peaks),
                         f"{max(peaks) / base:.2f}x" if base else "-", unit_txt,
                         f"{step * 1e3:.0f}", bubble, " / ".join(str(results[r][s]["left"]) for r in range(pr))])
        off_rows += offload_rows(results, pr)
    head = ["ranks", "schedule", "peak saved MiB (per rank)", "largest vs 1f1b", "model: chunk-units (per rank)",
            "step ms", "bubble (per rank)", "bytes left after step"]
    print()
    print(markdown_table(head, rows, right={0, 3, 5}))
    if off_rows:
        print("\nActivation offload (device: what stays; host: what left; late: copies back a backward waited for; "
              "step time against the plain pipeline, no hooks)\n")
        print(markdown_table(["ranks", "schedule", "offload", "device peak MiB (per rank)", "largest vs none",
                              "host peak MiB (per rank)", "late", "step time", "bytes left"], off_rows,
                             right={0, 4, 6, 7}))
    print(f"\nThe orders on unit costs (F = I = W = 1, 1F1B's B = 2), {max(args.microbatches, 8)} microbatches: "
          "peak chunk-units of the largest rank (vs 1F1B's 2p) and the bubble")
    print()
    print(model_table(sorted(set(args.ranks) | {2, 4, 8, 16}), max(args.microbatches, 8)))


if __name__ == "__main__":
    main()
