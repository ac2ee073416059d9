"""SmolLM2-135M-Instruct on Kuhn Poker (arena/KuhnPoker-v1, SPIRAL's setting), CPU only:
greedy evaluation against the random agent, one SPIRAL RL step (RAE + dppo_binary_tv),
and the evaluation again. Prints a markdown table for the README.

``--il-matches N`` first fine-tunes the model on the moves of N matches between
random agents, rendered in SPIRAL's prompt with ``\boxed{move}`` answers (the
imitation warm start): it teaches the answer format, not poker.

Run:  .venv/bin/python benchmarks/smollm2_kuhn.py [--games 16] [--max-new-tokens 128] [--il-matches 0]
          [--out runs/smollm2-kuhn]
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", type=int, default=16, help="evaluation games (seat-swapped)")
    ap.add_argument("--train-games", type=int, default=8, help="games in the RL step")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--il-matches", type=int, default=0, help="imitation warm start on N random-agent matches")
    ap.add_argument("--il-lr", type=float, default=1e-5)
    ap.add_argument("--out", default="runs/smollm2-kuhn")
    args = ap.parse_args()

    from arena.trainers.llm.config import EvalConfig, ILConfig, SpiralConfig, SpiralLearnerSettings
    from arena.trainers.llm.spiral import SpiralTrainer

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    cfg = SpiralConfig(game="arena/KuhnPoker-v1", model="smollm2", template="spiral", iterations=1,
                      games_per_iter=args.train_games, concurrency=args.train_games, opponents=["random"],
                      opponent_mode="fixed", learner=SpiralLearnerSettings(loss="dppo_binary_tv", lr=1e-6, minibatch=8),
                      max_new_tokens=args.max_new_tokens, threads=2,
                      eval=EvalConfig(every=1, games=args.games, opponents=["random"], concurrency=args.games),
                      il=ILConfig(agents=["random", "random"], matches=args.il_matches, epochs=1, lr=args.il_lr,
                                  batch_size=8) if args.il_matches else None)
    t0 = time.perf_counter()
    trainer = SpiralTrainer(cfg, out)
    try:
        trainer.run()
    finally:
        trainer.close()
    import json

    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval/win_rate/random" in r]
    step = next(r for r in rows if "train/return" in r)
    print("| model | iteration | games | win rate vs random | mean return | invalid-move rate |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in evals:
        print(f"| SmolLM2-135M-Instruct | {r['step']} | {args.games} | {r['eval/win_rate/random']:.3f} | "
              f"{r['eval/return/random']:+.3f} | {r['eval/invalid_rate']:.3f} |")
    il = [r["il/loss"] for r in rows if "il/loss" in r]
    if il:
        print(f"\nImitation warm start: {args.il_matches} random-agent matches, 1 epoch, lr {args.il_lr:g}, "
              f"loss {il[-1]:.3f}; iteration 0 is evaluated after it.")
    print(f"\nRL step: {int(step['train/samples'])} samples, loss {step.get('train/loss', float('nan')):+.4f}, "
          f"mask fraction {step.get('train/mask_frac', 0):.3f}, rollout {step['time/rollout_s']:.0f} s; "
          f"total {time.perf_counter() - t0:.0f} s; max_new_tokens {args.max_new_tokens}, 2 CPU threads.")


if __name__ == "__main__":
    main()
