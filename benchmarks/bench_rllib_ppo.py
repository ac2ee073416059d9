"""RLlib PPO self-play on a game for a wall-clock budget: env steps, env steps/s, strength.

Why: RLlib is the reference point for the arena's own learners. `rllib_ppo_run` trains RLlib PPO
(the ``rllib_ppo`` trainer: RLlib's current API stack, the game's PettingZoo env, one shared
policy for both seats, the action mask honoured) on ``game`` for ``seconds`` of training, then
plays the final checkpoint greedily in 200 seat-swapped games against ``random`` through the
arena's match loop (``rllib:<checkpoint>``).

Method: the budget counts the time inside RLlib's ``algo.train()`` (sampling and learning); Ray's
start, the algorithm's build, the checkpoint and the evaluation games are timed apart
(``setup_s``, ``eval_s``). Training stops before the iteration that would cross the budget (one
iteration at least). ``env_steps`` counts every move of both seats. The untrained policy's
greedy win rate against random (``win_rate_vs_random_at_start``, from the same 200 games'
seeds) says what the learning added. The run folder is a temporary folder, removed afterwards.

Usage:
    python benchmarks/bench_rllib_ppo.py --game openspiel/connect_four-v0 --seconds 120 --seed 0

``rllib_ppo_run(game, seconds, seed)`` is importable: another script compares the arena's
learner against it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

EVAL_GAMES = 200


def rllib_ppo_run(game: str = "openspiel/connect_four-v0", seconds: float = 120.0, seed: int = 0,
                  opponents: tuple[str, ...] = ()) -> dict:
    """Train RLlib PPO self-play on `game` for `seconds` of training; return its figures:
    ``env_steps``, ``env_steps_per_s``, ``win_rate_vs_random`` (greedy, 200 seat-swapped games in
    the arena) and ``win_rate_vs_random_at_start``, ``invalid_rate``, ``iterations``, ``train_s``,
    ``setup_s``, ``eval_s``; ``win_rate_vs`` (opponent spec -> win rate on 200 games) for each of
    `opponents`."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from arena.match.batch import play_matches, summarize
    from arena.trainers.common.metrics import read_metrics
    from arena.trainers.rllib.ppo import RLlibPPOConfig, RLlibPPOTrainer

    never = 10**6
    cfg = RLlibPPOConfig(game=game, seed=seed, iterations=never, checkpoint_every=never, eval_every=never,
                         eval_games=EVAL_GAMES)
    folder = Path(tempfile.mkdtemp(prefix="bench-rllib-"))
    try:
        t0 = time.perf_counter()
        trainer = RLlibPPOTrainer(cfg, folder / "run")
        setup_s = time.perf_counter() - t0
        spent = {"train_s": 0.0, "last_s": 0.0}

        def budget(it: int, total: int, m: dict) -> None:
            spent["train_s"] += m["time/iteration_s"]
            spent["last_s"] = m["time/iteration_s"]
            if spent["train_s"] + spent["last_s"] > seconds:
                trainer.stop_requested = True  # checkpoints this iteration and returns

        try:
            trainer.run(progress=budget)
            iterations, env_steps = trainer.iteration, trainer.env_steps
        finally:
            trainer.close()
        t1 = time.perf_counter()
        specs = [f"rllib:{folder / 'run' / 'checkpoint'}", "random"]
        results = play_matches(game, specs, EVAL_GAMES, seed=seed * 1_000_003 + 17, swap_seats=True)
        me = summarize(results, specs)[0]
        versus = {}
        for opp in opponents:
            pair = [specs[0], opp]
            versus[opp] = summarize(play_matches(game, pair, EVAL_GAMES, seed=seed * 1_000_003 + 29, swap_seats=True),
                                    pair)[0].win_rate
        eval_s = time.perf_counter() - t1
        start = next((r["eval/win_rate/random"] for r in read_metrics(folder / "run" / "metrics.jsonl")
                      if r["step"] == 0 and "eval/win_rate/random" in r), float("nan"))
        return {
            "game": game, "seed": seed, "budget_s": float(seconds), "iterations": iterations,
            "env_steps": int(env_steps), "train_s": spent["train_s"],
            "env_steps_per_s": env_steps / max(spent["train_s"], 1e-9),
            "win_rate_vs_random": me.win_rate, "win_rate_vs_random_at_start": start,
            "invalid_rate": me.invalid / max(1, me.move_calls), "eval_games": me.games,
            "setup_s": setup_s, "eval_s": eval_s, "win_rate_vs": versus,
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--game", default="openspiel/connect_four-v0")
    ap.add_argument("--seconds", type=float, default=120.0, help="training budget (inside algo.train())")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out = rllib_ppo_run(args.game, args.seconds, args.seed)
    width = max(map(len, out))
    for k, v in out.items():
        print(f"{k:<{width}}  {v:.3f}" if isinstance(v, float) else f"{k:<{width}}  {v}")
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
