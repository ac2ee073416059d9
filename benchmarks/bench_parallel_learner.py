"""Benchmark: the language-model learner's step as ``arena train --parallel ...`` runs it, against one process.

Why: ``bench_pipeline.py`` and ``bench_odc.py`` time the engines alone. A training run adds
what the wiring costs (:mod:`arena.trainers.parallel.learner`): the batch broadcast from
rank 0 to the other ranks, the learner's loop over minibatches, and the copy of the new
weights back into rank 0's rollout model after every step. This script times
``learner.step(batch)`` -- the call the SPIRAL trainer makes -- for one process
(``LLMLearner``) and for each parallel mode on ``--ranks`` local ranks (``ParallelLearner``,
the ranks started by this script as ``arena train`` starts them), on the same model and
the same batches, one mode after the other in one run.

The second row is one process with as many torch threads as the ranks have together (the
same cores, intra-op parallelism instead of ranks). Columns: the median step over ``--repeats`` timed steps (after one warm-up step, which
builds the pipeline schedules), its ratio to one process (> 1: faster), the share of the
step spent copying the weights back into the rollout model, and the largest parameter
difference to one process after the same steps (the modes compute the same update).

Run:  .venv/bin/python benchmarks/bench_parallel_learner.py
      (8 layers, hidden 256, batches of 32 trajectories: a few minutes on 2 cores; ``--quick`` is a
      smoke run of a few seconds)
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
import time  # noqa: E402

#: (label, parallel section or None for one process)
MODES = (
    ("one process", None),
    ("one process, every core", None),  # ranks x threads torch threads: the same cores as the ranks
    ("odc", {"mode": "odc"}),
    ("fsdp (FSDP2)", {"mode": "fsdp"}),
    ("pipeline 1f1b", {"mode": "pipeline", "schedule": "1f1b"}),
    ("pipeline zbv", {"mode": "pipeline", "schedule": "zbv"}),
)


def _batches(args):
    from _sharded_sim import samples_of_lengths

    from arena.trainers.llm.learner import Batch

    lengths = [(args.prompt + (7 * i) % args.prompt, args.response) for i in range(args.samples)]
    return [Batch(samples_of_lengths(lengths, seed=args.seed + k), shuffle_seed=k) for k in range(args.repeats + 1)]


def _model(args):
    from arena.inference.models import DEFAULT_CORPUS, build_tiny_llama, train_char_tokenizer

    tok = train_char_tokenizer(DEFAULT_CORPUS)
    return build_tiny_llama(tok, seed=0, hidden=args.hidden, layers=args.layers, heads=max(1, args.hidden // 32),
                            intermediate=args.hidden * 11 // 4), tok


def _run(label, section, args, batches):
    import torch

    from arena.trainers.parallel.config import ParallelConfig
    from arena.trainers.llm.learner import LearnerSettings, LLMLearner
    from arena.trainers.parallel.learner import ParallelLearner

    settings = LearnerSettings(lr=1e-5, minibatch=args.minibatch, epochs=1)
    model, tok = _model(args)
    torch.set_num_threads(args.threads * (args.ranks if label.endswith("every core") else 1))
    if section is None:
        learner = LLMLearner(model, tok, settings)
    else:
        pc = ParallelConfig(world_size=args.ranks, microbatches=args.microbatches, threads=args.threads, **section)
        learner = ParallelLearner.start(model, tok, settings, pc)
    times, weights = [], []
    try:
        learner.step(batches[0])  # warm-up: schedules, allocator
        for b in batches[1:]:
            t0 = time.perf_counter()
            learner.step(b)
            times.append(time.perf_counter() - t0)
            weights.append(getattr(learner, "timing", {}).get("weights_s", 0.0))
        state = {k: v.detach().clone() for k, v in learner.model.state_dict().items()}
    finally:
        learner.close()
    return {"label": label, "step_s": statistics.median(times), "weights_s": statistics.median(weights),
            "state": state}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--samples", type=int, default=32, help="trajectories per batch")
    ap.add_argument("--minibatch", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=96, help="prompt tokens (they vary by up to this much again)")
    ap.add_argument("--response", type=int, default=32)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1, help="torch threads of each rank and of one process")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", action="append", help="labels to run (repeatable; default all)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, one repeat")
    args = ap.parse_args(argv)
    if args.quick:
        args.layers, args.hidden, args.samples, args.minibatch, args.prompt, args.response = 4, 32, 8, 8, 12, 4
        args.repeats, args.microbatches = 1, 2
    batches = _batches(args)
    modes = [m for m in MODES if not args.only or m[0] in args.only]
    print(f"{versions(('torch', 'transformers'))}; {args.ranks} ranks x {args.threads} thread(s); Llama "
          f"{args.layers} layers, hidden {args.hidden}; {args.samples} trajectories a batch, minibatch "
          f"{args.minibatch}, {args.microbatches} microbatches; median of {args.repeats} steps", flush=True)
    results = []
    for label, section in modes:
        results.append(_run(label, section, args, batches))
        print(f"  {label}: {results[-1]['step_s'] * 1e3:.0f} ms a step", flush=True)
    base = next((r for r in results if r["label"] == "one process"), results[0])
    rows = []
    for r in results:
        diff = max(float((v - base["state"][k]).abs().max()) for k, v in r["state"].items())
        rows.append([r["label"], f"{r['step_s'] * 1e3:.0f}", f"{base['step_s'] / r['step_s']:.2f}x",
                     f"{r['weights_s'] / r['step_s']:.3f}" if r["weights_s"] else "-", f"{diff:.1e}"])
    print()
    print(markdown_table(["learner step", "ms a step", "speed / one process", "weights back to rollouts, share",
                          "largest parameter difference"], rows, right={1, 2, 3, 4}))


if __name__ == "__main__":
    main()
