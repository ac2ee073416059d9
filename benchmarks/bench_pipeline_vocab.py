"""Benchmark: vocabulary parallelism -- parameters and compute per rank with the vocabulary layers on the ends or split.

Why: with SmolLM2's 49,152-token vocabulary over a few layers, the embedding and the head are most of
the model; on the first and last stage they leave those ranks holding and computing far more than the
others. One launch of ``--ranks`` gloo processes (1 torch thread each) builds the same Llama
(``--vocab``, ``--hidden``, ``--layers``, tied embeddings as SmolLM2's) and runs ``pipeline_step`` (the
learner's policy loss, forward and backward) on the same batch of ``--samples`` trajectories (token ids
drawn over the whole vocabulary) for: 1F1B; interleaved 1F1B; interleaved 1F1B and ZB1P with
``vocab_parallel`` (three stages a rank: an embedding shard, the decoder layers, an output shard). Per
rank: the parameters it holds (MiB, fp32), its busy time (the stage passes and the loss, timed by the
benchmarks' ``ActionTimeline``), and the spread across ranks (largest / smallest - 1); the step time is
the median of ``--repeats`` steps, schedules taking turns.

Run:  .venv/bin/python benchmarks/bench_pipeline_vocab.py [--ranks 2] [--vocab 49152] [--hidden 256]
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
import math  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402

VARIANTS = [("1f1b", False), ("interleaved_1f1b", False), ("interleaved_1f1b", True), ("zb1p", True)]
MiB = 2**20


def _model(args):
    import torch
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.hidden * 3,
                                   num_hidden_layers=args.layers, num_attention_heads=max(1, args.hidden // 64),
                                   num_key_value_heads=max(1, args.hidden // 64), max_position_embeddings=1024,
                                   tie_word_embeddings=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(args.seed)
        return transformers.LlamaForCausalLM(cfg)


def _samples(args):
    from arena.trainers.llm.learner import Sample

    rng = random.Random(args.seed)
    out = []
    for _ in range(args.samples):
        p, r = rng.randint(args.prompt // 2, args.prompt), rng.randint(args.response // 2, args.response)
        out.append(Sample(prompt_ids=[rng.randrange(4, args.vocab) for _ in range(p)],
                          response_ids=[rng.randrange(4, args.vocab) for _ in range(r)],
                          old_logp=[math.log(rng.uniform(1e-5, 1e-4)) for _ in range(r)],
                          topk_ids=None, topk_logp=None, adv=rng.choice([-1.0, 1.0]), ret=0.0))
    return out


def _rank(info, args):
    from _pipeline_sim import COMPUTE_KINDS, ActionTimeline

    from arena.trainers.parallel.pipeline.runtime import LMPipeline
    from arena.trainers.parallel.pipeline.step import pipeline_step

    model, samples = _model(args), _samples(args)
    pipes = {}
    for sched, vp in VARIANTS:
        pipes[(sched, vp)] = LMPipeline(model, sched, n_microbatches=args.microbatches, vocab_parallel=vp,
                                        timeline=ActionTimeline.for_device("cpu"))
    out = {}
    for key, pipe in pipes.items():
        params = sum(p.numel() * p.element_size() for p in pipe.parameters())
        out[key] = {"params": params, "stages": pipe.stage_ids, "step": [], "busy": []}
        pipeline_step(pipe, samples, pad_id=0)
    keys = list(pipes)
    for k in range(args.repeats):
        for key in keys[k % len(keys):] + keys[:k % len(keys)]:
            pipe = pipes[key]
            step = pipeline_step(pipe, samples, pad_id=0)
            busy = sum(b - a for kind, _s, _m, a, b in pipe.timeline.events if kind in COMPUTE_KINDS)
            out[key]["step"].append(step.timing["step_s"])
            out[key]["busy"].append(busy)
    return out


def main(argv=None) -> None:
    doc = __doc__ or ""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=49152, help="vocabulary (default 49,152: SmolLM2's)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=48)
    ap.add_argument("--response", type=int, default=16)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run")
    args = ap.parse_args(argv)
    if args.quick:
        args.vocab, args.hidden, args.layers, args.samples, args.prompt, args.response = 4096, 64, 4, 8, 12, 6
        args.repeats = 1

    from arena.trainers.parallel.launch import launch

    print(f"# Vocabulary parallelism: vocabulary {args.vocab:,}, hidden {args.hidden}, {args.layers} layers, "
          f"{args.ranks} ranks (gloo, 1 thread each), {args.samples} samples in {args.microbatches} microbatches")
    print(versions(("torch", "transformers")))
    res = launch(_rank, args.ranks, (args,), timeout_s=3600)
    pr = args.ranks
    base = None
    rows = []
    for key in VARIANTS:
        sched, vp = key
        params = [res[r][key]["params"] for r in range(pr)]
        busy = [statistics.median(res[r][key]["busy"]) for r in range(pr)]
        step = statistics.median(max(res[r][key]["step"][k] for r in range(pr)) for k in range(args.repeats))
        base = base or step
        rows.append([sched + (" + vocab parallel" if vp else ""), " / ".join(str(res[r][key]["stages"]) for r in range(pr)),
                     " / ".join(f"{v / MiB:.1f}" for v in params), f"{max(params) / min(params) - 1:.1%}",
                     " / ".join(f"{v * 1e3:.0f}" for v in busy), f"{max(busy) / min(busy) - 1:.1%}",
                     f"{step * 1e3:.0f}", f"{step / base:.2f}x"])
    print()
    print(markdown_table(["schedule", "stages (per rank)", "parameters MiB (per rank)", "spread", "busy ms (per rank)",
                          "spread", "step ms", "vs 1f1b"], rows, right={3, 5, 6, 7}))
    print("\nspread: the largest rank over the smallest, minus 1 (the goal with vocabulary parallelism: within 10%)")


if __name__ == "__main__":
    main()
