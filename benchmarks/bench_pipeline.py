"""Benchmark: pipeline schedules side by side -- step time and measured bubble next to the theory.

Why: a zero-bubble schedule is only worth its extra bookkeeping if it shortens the step.
One launch of ``--ranks`` gloo processes (1 torch thread each) builds the same tiny Llama
(``build_tiny_llama``: ``--hidden``, ``--layers``) on every rank and runs, for every
schedule torch has (``gpipe``, ``1f1b``, ``interleaved_1f1b``, ``zb1p``, ``zbv``,
``dualpipev``), ``pipeline_step`` -- forward and backward of the learner's policy loss
(``dppo_binary_tv``, token mean) -- on the same batch of ``--samples`` variable-length
trajectories packed into ``--microbatches`` microbatches. The schedules take turns (the
order rotates every repeat) so drift on a shared machine hits them alike; ``--warmup``
steps each are not timed, then the median of ``--repeats`` steps is kept. A step's time is
the slowest rank's ``schedule.step`` wall time.

Per rank, ``busy`` is the time inside the stage's forward / backward / weight-backward
calls and the loss, ``bubble = (step - busy) / step``. Theory columns: the closed form
(bubble time / compute time: 1F1B and GPipe ``(p-1)/m``, interleaved ``(p-1)/(v m)``, ZB1P
``(p-1)/(3m)``, ZB-V and DualPipeV ~0) as a fraction of the step, ``r / (1 + r)``; and the
schedule's own action order simulated with unit costs (F = I = W = 1, B = 2) and with
the measured per-stage action costs (communication free). What the measured bubble has
beyond the simulated one is communication and the schedule's own Python overhead. A
single-process row (one thread, the same forward and backward in one minibatch, as
``LLMLearner.step`` does it) is the baseline.

Run:  .venv/bin/python benchmarks/bench_pipeline.py [--microbatches 8] [--layers 8] [--hidden 256]
      (the defaults take about a minute on 2 cores; ``--quick`` a few seconds)
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
import math  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402


def _model(args):
    from arena.inference.models import DEFAULT_CORPUS, build_tiny_llama, train_char_tokenizer

    tok = train_char_tokenizer(DEFAULT_CORPUS)
    heads = max(1, args.hidden // 32)
    return build_tiny_llama(tok, hidden=args.hidden, layers=args.layers, heads=heads,
                            intermediate=int(args.hidden * 2.75), max_positions=4096, seed=args.seed), tok


def _samples(args):
    from arena.trainers.llm.learner import Sample

    rng = random.Random(args.seed)
    out = []
    for _ in range(args.samples):
        p = rng.randint(max(1, args.prompt // 2), args.prompt)
        r = rng.randint(max(1, args.response // 2), args.response)
        out.append(Sample(prompt_ids=[1] + [rng.randint(4, 99) for _ in range(p - 1)],
                          response_ids=[rng.randint(4, 99) for _ in range(r)],
                          old_logp=[math.log(rng.uniform(0.005, 0.03)) for _ in range(r)],
                          topk_ids=None, topk_logp=None, adv=rng.choice([-1.0, 1.0]), ret=0.0))
    return out


def _rank(info, args, schedules):
    """Every schedule on this rank: warm-up, then ``repeats`` rotating rounds. Returns each step's bubble dict."""
    from _pipeline_sim import ActionTimeline, bubble_of

    from arena.trainers.parallel.pipeline.runtime import LMPipeline
    from arena.trainers.parallel.pipeline.step import pipeline_step

    model, tok = _model(args)
    samples = _samples(args)
    pipes = {s: LMPipeline(model, s, n_microbatches=args.microbatches, timeline=ActionTimeline.for_device("cpu"))
             for s in schedules}
    for s in schedules:
        for _ in range(args.warmup):
            bubble_of(pipes[s], pipeline_step(pipes[s], samples, pad_id=tok.pad_token_id))
    steps: dict[str, list] = {s: [] for s in schedules}
    packed = None
    for k in range(args.repeats):
        for s in schedules[k % len(schedules):] + schedules[:k % len(schedules)]:
            out = pipeline_step(pipes[s], samples, pad_id=tok.pad_token_id)
            steps[s].append(bubble_of(pipes[s], out))
            packed = out.packed
    return {"steps": steps, "packed": {k: packed[k] for k in ("rows", "length", "tokens")}}


def _single_process(args) -> float:
    """Median step time of the same forward + backward in one process, one minibatch (LLMLearner's math)."""
    import torch

    from arena.trainers.common.losses import get_loss
    from arena.trainers.llm.logprobs import sequence_logprobs

    torch.set_num_threads(1)
    model, tok = _model(args)
    model.train()
    samples = _samples(args)
    loss_fn = get_loss("dppo_binary_tv")
    times = []
    for i in range(args.warmup + args.repeats):
        t0 = time.perf_counter()
        out = sequence_logprobs(model, [s.prompt_ids for s in samples], [s.response_ids for s in samples],
                                pad_id=tok.pad_token_id)
        T = out["logp"].shape[1]
        old = torch.zeros_like(out["logp"])
        for b, s in enumerate(samples):
            old[b, :len(s.old_logp)] = torch.tensor(s.old_logp[:T])
        adv = torch.tensor([s.adv for s in samples])
        loss, _ = loss_fn(out["logp"], old, adv, out["mask"])
        model.zero_grad(set_to_none=True)
        loss.backward()
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> None:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(description=doc.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--microbatches", type=int, default=8, help="microbatches per step (default 8)")
    p.add_argument("--layers", type=int, default=8, help="decoder layers (default 8)")
    p.add_argument("--hidden", type=int, default=256, help="hidden size (default 256; heads = hidden / 32)")
    p.add_argument("--samples", type=int, default=32, help="trajectories per step (default 32)")
    p.add_argument("--prompt", type=int, default=96, help="longest prompt, tokens (default 96; shortest half)")
    p.add_argument("--response", type=int, default=32, help="longest response, tokens (default 32)")
    p.add_argument("--ranks", type=int, default=2, help="pipeline ranks (default 2)")
    p.add_argument("--repeats", type=int, default=7, help="timed steps per schedule (default 7)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per schedule (default 2)")
    p.add_argument("--schedules", nargs="*", default=None, help="subset of schedules (default: all torch has)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.hidden, args.layers, args.samples, args.prompt, args.response = 32, 4, 8, 12, 6
        args.microbatches, args.repeats, args.warmup = 4, 3, 1

    from _pipeline_sim import FORMULAS, theory

    from arena.trainers.parallel.launch import launch
    from arena.trainers.parallel.pipeline.schedules import SCHEDULES, available_schedules, schedule_spec

    have = available_schedules()
    wanted = args.schedules or list(SCHEDULES)
    missing = [s for s in wanted if s not in have]
    schedules = [s for s in wanted if s in have]
    for s in wanted:
        schedule_spec(s)  # an unknown name is an error here, before any process starts
    print(f"# Pipeline schedules: {args.ranks} ranks (gloo, 1 thread each), hidden {args.hidden}, "
          f"{args.layers} layers, {args.samples} samples in {args.microbatches} microbatches")
    print(versions(("torch", "transformers")))
    for s in missing:
        print(f"(skipped {s}: this torch lacks torch.distributed.pipelining.{SCHEDULES[s].torch_class})")

    t0 = time.perf_counter()
    results = launch(_rank, args.ranks, (args, schedules), timeout_s=3600)
    wall = time.perf_counter() - t0
    single = _single_process(args)
    packed = results[0]["packed"]
    print(f"microbatch shape [{packed['rows']}, {packed['length']}], tokens per microbatch {packed['tokens']}; "
          f"launch {wall:.1f} s")

    m, pr = args.microbatches, args.ranks
    step = {}
    rows = []
    for s in schedules:
        per_step = [max(r["steps"][s][k]["step_s"] for r in results) for k in range(args.repeats)]
        step[s] = statistics.median(per_step)
    base = step.get("1f1b")
    for s in schedules:
        spec = schedule_spec(s)
        def med(key, r, s=s):
            vals = [b.get(key) for b in results[r]["steps"][s] if b.get(key) is not None]
            return statistics.median(vals) if vals else float("nan")
        bub = " / ".join(f"{med('bubble', r):.3f}" for r in range(pr))
        ipb = " / ".join(f"{med('idle_per_busy', r):.2f}" for r in range(pr))
        busy = " / ".join(f"{med('busy_s', r) * 1e3:.1f}" for r in range(pr))
        cpu = " / ".join(f"{med('cpu_s', r) * 1e3:.1f}" for r in range(pr))
        simu = " / ".join(f"{med('sim_unit_bubble', r):.3f}" for r in range(pr))
        simm = " / ".join(f"{med('sim_measured_bubble', r):.3f}" for r in range(pr))
        th = theory(s, pr, m)
        rows.append([s, str(spec.stages_per_rank), f"{step[s] * 1e3:.1f}",
                     f"{step[s] / base:.2f}x" if base else "-", busy, cpu, bub, ipb,
                     f"{FORMULAS[s]} = {th:.3f} ({th / (1 + th):.3f})", simu, simm])
    rows.append(["single process", "-", f"{single * 1e3:.1f}", f"{single / base:.2f}x" if base else "-",
                 f"{single * 1e3:.1f}", "-", "-", "-", "-", "-", "-"])
    head = ["schedule", "stages/rank", "step ms", "vs 1f1b", "busy ms (per rank)", "CPU ms", "bubble measured",
            "idle/busy", "theory: idle/busy (fraction)", "simulated, unit costs", "simulated, measured costs"]
    print()
    print(markdown_table(head, rows, right={2, 3}))
    print()
    if base:
        for s, label in (("zb1p", "ZB1P / 1F1B"), ("zbv", "ZBV / 1F1B"), ("dualpipev", "DualPipeV / 1F1B"),
                         ("interleaved_1f1b", "interleaved 1F1B / 1F1B"), ("gpipe", "GPipe / 1F1B")):
            if s in step:
                print(f"step time {label}: {step[s] / base:.2f}x")
    print("\nbubble: idle / step per rank (rank 0 / rank 1 ...); theory: the closed form (bubble time / compute "
          "time) and, in brackets, the same as a fraction of the step, r / (1 + r), comparable to 'bubble measured'. "
          "CPU ms: the rank process's CPU time in the step (compute, Python, gloo's I/O threads); with 2 cores "
          "shared by other jobs every wall-clock figure here is stretched.")


if __name__ == "__main__":
    main()
