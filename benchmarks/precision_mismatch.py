"""Benchmark: rollouts in fp32, fp16 and bf16 against an fp32 trainer -- the log-prob mismatch and the throughput.

Why: an RL stack that generates in low precision and trains in fp32 optimises a policy a little
different from the one that played. The mismatch is the learner's ``train/mismatch``: the mean
absolute difference between the rollout's log-prob of each generated token and the trainer's,
measured on the first minibatch, before any update. Precision is one of its sources; fp16 keeps
more mantissa than bf16, so it should show less. Each precision gets one short SPIRAL run of
``--iterations`` (same seed, same games) on ``--device``. Columns: the mismatch at the first
iteration and its mean, rollout tokens/s, and the learner's update seconds.

This is the single-device part of scaling the learner; it is meant for a GPU:

    .venv/bin/python benchmarks/precision_mismatch.py --device cuda --model smollm2

On the CPU (``--device cpu``, the default) it runs the tiny model: torch's CPU autocast covers
bf16 and fp16, but the figures say little about a GPU.

Run:  .venv/bin/python benchmarks/precision_mismatch.py            (tiny model, CPU, about a minute)
      .venv/bin/python benchmarks/precision_mismatch.py --quick    (a smoke run of a few seconds)
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
_sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))
from _common import markdown_table, versions  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

PRECISIONS = ("fp32", "fp16", "bf16")


def _run(precision: str, args, folder: Path) -> dict:
    import yaml

    from arena.trainers.registry import make_trainer

    cfg = {"trainer": "spiral", "game": args.game, "model": args.model, "template": "auto", "seed": args.seed,
           "iterations": args.iterations, "games_per_iter": args.games, "concurrency": args.games,
           "opponent_mode": "fixed", "opponents": ["random"],
           "learner": {"epochs": 1, "minibatch": args.games * 8, "train_precision": "fp32"},
           "max_new_tokens": args.max_new_tokens, "top_k": 0, "device": args.device, "rollout_precision": precision,
           "threads": args.threads, "snapshot_every": 10 ** 6,
           "eval": {"every": 10 ** 6, "games": 2, "opponents": ["random"], "concurrency": 2}}
    if args.model == "tiny" and args.quick:
        cfg["tiny_sizes"] = {"hidden": 32, "layers": 2, "heads": 2, "intermediate": 64}
    path = folder / f"{precision}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    t = make_trainer(path, folder / precision)
    try:
        t.run()
    finally:
        t.close()
    lines = [json.loads(x) for x in (folder / precision / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in lines if "train/mismatch" in r]
    mean = lambda k: sum(r[k] for r in train) / len(train)  # noqa: E731
    return {"precision": precision, "first": train[0]["train/mismatch"], "mean": mean("train/mismatch"),
            "tokens_per_s": mean("train/rollout_tokens_per_s"), "update_s": mean("time/update_s")}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--model", default="tiny", help="tiny, smollm2 or a local Hugging Face folder")
    ap.add_argument("--game", default="openspiel/tic_tac_toe-v0")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--games", type=int, default=32, help="games a iteration")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: 6 for tiny, 64 otherwise")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", action="append", choices=PRECISIONS)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one iteration of 4 games")
    args = ap.parse_args(argv)
    if args.max_new_tokens is None:
        args.max_new_tokens = 6 if args.model == "tiny" else 64
    if args.quick:
        args.iterations, args.games = 1, 4
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no GPU (use --device cpu for the CPU figures)")
    print(f"{versions(('torch', 'transformers'))}; {args.model} on {args.device}; {args.iterations} iteration(s) of "
          f"{args.games} games of {args.game}; trainer fp32", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="arena-precision-") as tmp:
        for p in args.only or PRECISIONS:
            r = _run(p, args, Path(tmp))
            print(f"  rollout {p}: mismatch {r['first']:.2e}", flush=True)
            rows.append([f"rollout {p}", f"{r['first']:.2e}", f"{r['mean']:.2e}", f"{r['tokens_per_s']:.0f}",
                         f"{r['update_s']:.2f}"])
    print()
    print(markdown_table(["rollout precision (trainer fp32)", "mismatch, iteration 1", "mismatch, mean",
                          "rollout tokens/s", "update s"], rows, right={1, 2, 3, 4}))


if __name__ == "__main__":
    main()
