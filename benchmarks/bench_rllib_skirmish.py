"""The arena's SCC learner against RLlib PPO on Skirmish 3m: same game, same budget, same machine.

Why: RLlib is the reference point for the arena's own learners. In one process this trains, one
after the other, for the same wall-clock budget (``--seconds``):

(a) the arena's SCC learner with ``configs/train/scc_skirmish.yaml`` (imitation of the scripted
    bots, then league RL with three learners and their entity network), or with each config
    ``--scc-config`` names (e.g. ``configs/train/scc_skirmish_selfplay.yaml``: self-play alone from
    untrained weights), one after the other;
(b) RLlib PPO self-play on the same game with RLlib's own default model
    (``configs/train/rllib_ppo_skirmish.yaml``, ``trainer: rllib_ppo``): the arena's parallel
    PettingZoo env through RLlib's ``ParallelPettingZooEnv``, seen flat (the observation as one
    float32 vector, the compound order as a MultiDiscrete, every flat action made the nearest legal
    order: `arena.inference.flat_view`);

then plays each final policy greedily in 200 seat-swapped games (``--eval-games``) against
``skirmish:attack_nearest`` and ``skirmish:focus_fire`` through the arena's match loop
(`arena.match.batch.play_matches` with ``policy:<checkpoint>,greedy=true`` and
``rllib:<checkpoint>``), and prints a table: env steps, env steps/s, the win rates with 95% Wilson
intervals, and the ratio of the env steps/s.

Method.
* The budget is the wall-clock of the trainer's ``run`` (everything it does to train: SCC's
  imitation stage, rollouts, updates, league bookkeeping and checkpoints; RLlib's sampling,
  learning and checkpoint). The trainer's build (Ray's start, RLlib's algorithm, the league's
  folder) is timed apart (``setup_s``), and so is the final evaluation. The trainers' own in-run
  evaluations are cut to 2 games per opponent (their minimum), which the budget includes.
* Both stop before the iteration that would cross the budget (at least one iteration): after each
  iteration, if the time spent plus that iteration's time exceeds the budget, the trainer is asked
  to stop (``stop_requested``) and checkpoints. SCC's KL to the imitation policy anneals over its
  configured ``iterations``, so its iteration count is set from a measurement: the imitation stage
  and iteration 1 run first (``run(iterations=1)``), then ``iterations = 1 + (budget - elapsed) //
  (iteration 1's time)`` and ``run`` goes on (resuming at iteration 2) with the stop rule above.
* One env step is one simultaneous tick of one game (both seats' moves), for both learners: the
  ticks of SCC's RL rollouts (the sum of ``train/env_steps``, the match loop's ``moves`` of a
  simultaneous game) and RLlib's ``num_env_steps_sampled`` of the parallel env. SCC's imitation
  stage plays teacher matches that are not counted as its env steps (their time is in its budget).
  env steps/s = env steps / the budget actually used.
* Win rate = wins / games (a draw is not a win, as everywhere in docs/skirmish.md), with Wilson's
  95% score interval; the draws are counted beside it.

Usage:
    python benchmarks/bench_rllib_skirmish.py --seconds 600 --seed 0
    python benchmarks/bench_rllib_skirmish.py --seconds 600 --scc-config configs/train/scc_skirmish_selfplay.yaml
    python benchmarks/bench_rllib_skirmish.py --smoke --seconds 5     # tiny settings, a check that it runs
"""

from __future__ import annotations

import os as _os
import sys as _sys

_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions  # noqa: E402
from skirmish_ladder import wilson  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GAME = "arena/Skirmish-3m-v0"
SCC_CONFIG = ROOT / "configs" / "train" / "scc_skirmish.yaml"
RLLIB_CONFIG = ROOT / "configs" / "train" / "rllib_ppo_skirmish.yaml"
OPPONENTS = ("skirmish:attack_nearest", "skirmish:focus_fire")
NEVER = 10**6

#: --smoke: each trainer shrunk to seconds (a check that the script runs, not a measurement).
SCC_SMOKE = dict(il={"matches": 6, "epochs": 1, "workers": 1, "patience": 1}, games_per_iter=4,
                 learner={"epochs": 1})
RLLIB_SMOKE = dict(train_batch_size=200, minibatch_size=100, num_epochs=1, hidden=[32, 32],
                   num_envs_per_env_runner=2)


class Budget:
    """``progress`` for `Trainer.run`: asks `trainer` to stop before the iteration that would cross
    `seconds` of wall-clock counted from `t0`."""

    def __init__(self, trainer, seconds: float, t0: float):
        self.trainer, self.seconds, self.t0 = trainer, seconds, t0
        #: The last iteration's seconds (its metrics' ``time/iteration_s``).
        self.last_s = 0.0

    def __call__(self, it: int, last: int, metrics: dict) -> None:
        self.last_s = float(metrics.get("time/iteration_s", 0.0))
        if time.perf_counter() - self.t0 + self.last_s > self.seconds:
            self.trainer.stop_requested = True


def evaluate(spec: str, games: int, seed: int) -> dict:
    """Greedy `spec` against each of `OPPONENTS` in `games` seat-swapped matches."""
    from arena.match.batch import play_matches, summarize

    out = {}
    for opp in OPPONENTS:
        results = play_matches(GAME, [spec, opp], games, seed=seed * 1_000_003 + 17, swap_seats=True)
        me = summarize(results, [spec, opp])[0]
        out[opp] = {"games": me.games, "wins": me.wins, "draws": me.draws, "win_rate": me.wins / me.games,
                    "wilson": wilson(me.wins, me.games), "invalid": me.invalid}
    return out


def scc_run(seconds: float, seed: int = 0, eval_games: int = 200, smoke: bool = False,
            config: Path = SCC_CONFIG) -> dict:
    """Train the SCC learner of `config` for `seconds` (see the module docstring); its figures."""
    from arena.trainers.common.metrics import read_metrics
    from arena.trainers.registry import read_train_config

    import yaml

    overrides = dict(SCC_SMOKE) if smoke else {}
    if yaml.safe_load(Path(config).read_text()).get("il") is None:
        overrides.pop("il", None)  # a config with no imitation stage keeps none
    folder = Path(tempfile.mkdtemp(prefix="bench-scc-"))
    try:
        entry, cfg = read_train_config(config, seed=seed, iterations=max(2, int(seconds // 10)),
                                       eval={"every": NEVER, "games": 2}, **overrides)
        t0 = time.perf_counter()
        trainer = entry.builder()(cfg, folder / "run")
        setup_s = time.perf_counter() - t0
        try:
            t1 = time.perf_counter()
            budget = Budget(trainer, seconds, t1)
            trainer.run(iterations=1, progress=budget)
            first_s = budget.last_s
            left = seconds - (time.perf_counter() - t1)
            if not trainer.stop_requested and left > first_s:
                trainer.cfg.iterations = 1 + int(left // max(first_s, 1e-9))
                trainer.run(iterations=trainer.cfg.iterations, progress=budget)
            train_s = time.perf_counter() - t1
            iterations = trainer.iteration
            spec = f"policy:{(folder / 'run' / 'latest').resolve()},greedy=true"
        finally:
            trainer.close()
        rows = read_metrics(folder / "run" / "metrics.jsonl")
        env_steps = int(sum(r.get("train/env_steps", 0) for r in rows if r["step"] >= 1))
        rollout_s = sum(r.get("time/rollout_s", 0.0) for r in rows if r["step"] >= 1)
        t2 = time.perf_counter()
        ev = evaluate(spec, eval_games, seed)
        return {"learner": f"arena SCC ({Path(config).stem})", "iterations": iterations, "env_steps": env_steps,
                "train_s": train_s,
                "env_steps_per_s": env_steps / max(train_s, 1e-9),
                "rollout_env_steps_per_s": env_steps / max(rollout_s, 1e-9),
                "setup_s": setup_s, "eval_s": time.perf_counter() - t2, "eval": ev}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def rllib_run(seconds: float, seed: int = 0, eval_games: int = 200, smoke: bool = False) -> dict:
    """Train RLlib PPO self-play for `seconds` (see the module docstring); its figures."""
    from arena.trainers.common.metrics import read_metrics
    from arena.trainers.registry import read_train_config

    overrides = dict(RLLIB_SMOKE) if smoke else {}
    folder = Path(tempfile.mkdtemp(prefix="bench-rl-"))
    try:
        entry, cfg = read_train_config(RLLIB_CONFIG, seed=seed, iterations=NEVER, checkpoint_every=NEVER,
                                       eval_every=NEVER, eval_games=2, **overrides)
        t0 = time.perf_counter()
        trainer = entry.builder()(cfg, folder / "run")
        setup_s = time.perf_counter() - t0
        try:
            t1 = time.perf_counter()
            trainer.run(progress=Budget(trainer, seconds, t1))
            train_s = time.perf_counter() - t1
            iterations, env_steps = trainer.iteration, trainer.env_steps
        finally:
            trainer.close()
        rows = read_metrics(folder / "run" / "metrics.jsonl")
        sample_s = sum(r.get("time/sample_s", 0.0) for r in rows if r["step"] >= 1)
        t2 = time.perf_counter()
        ev = evaluate(f"rllib:{folder / 'run' / 'checkpoint'}", eval_games, seed)
        return {"learner": "RLlib PPO", "iterations": iterations, "env_steps": int(env_steps), "train_s": train_s,
                "env_steps_per_s": env_steps / max(train_s, 1e-9),
                "rollout_env_steps_per_s": env_steps / max(sample_s, 1e-9),
                "setup_s": setup_s, "eval_s": time.perf_counter() - t2, "eval": ev}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def table(runs: list[dict]) -> str:
    header = ["learner", "iterations", "env steps", "train s", "env steps/s"]
    for opp in OPPONENTS:
        header += [f"win rate vs {opp.split(':')[1]}", "95% Wilson", "draws"]
    rows = []
    for r in runs:
        row = [r["learner"], str(r["iterations"]), f"{r['env_steps']:,}", f"{r['train_s']:.0f}",
               f"{r['env_steps_per_s']:.0f}"]
        for opp in OPPONENTS:
            e = r["eval"][opp]
            row += [f"{e['win_rate']:.3f}", f"[{e['wilson'][0]:.2f}, {e['wilson'][1]:.2f}]", str(e["draws"])]
        rows.append(row)
    return markdown_table(header, rows, {1, 2, 3, 4, 5, 7, 8, 10})


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=600.0, help="training budget of each learner (wall-clock)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-games", type=int, default=200, help="seat-swapped games against each bot")
    ap.add_argument("--smoke", action="store_true", help="tiny trainer settings: checks that the script runs")
    ap.add_argument("--only", choices=("scc", "rllib"), help="train one learner only")
    ap.add_argument("--scc-config", action="append", type=Path, default=[],
                    help=f"an SCC training config (repeatable; default {SCC_CONFIG.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    runs = []
    if args.only in (None, "scc"):
        for config in args.scc_config or [SCC_CONFIG]:
            runs.append(scc_run(args.seconds, args.seed, args.eval_games, args.smoke, config))
    if args.only in (None, "rllib"):
        runs.append(rllib_run(args.seconds, args.seed, args.eval_games, args.smoke))
    print(f"{GAME}, {args.seconds:.0f} s of training each, seed {args.seed}, {args.eval_games} greedy seat-swapped "
          f"games per opponent{' (smoke settings)' if args.smoke else ''}; {versions(('torch', 'ray'))}, "
          f"{_os.cpu_count()} CPUs")
    print(table(runs))
    print("\n(train s: the budget each used, stopping before the iteration that would cross it; SCC's includes its "
          "imitation stage, whose teacher matches are not counted as env steps. One env step: one simultaneous "
          "tick of one game. Win rate: wins / games, draws beside it.)")
    rllib = [r for r in runs if r["learner"] == "RLlib PPO"]
    for r in runs if rllib else []:
        if r is rllib[0]:
            continue
        ratio = r["env_steps_per_s"] / max(rllib[0]["env_steps_per_s"], 1e-9)
        print(f"\nenv steps/s, {r['learner']} / RLlib PPO: {ratio:.2f}x (rollouts alone: "
              f"{r['rollout_env_steps_per_s']:.0f} vs {rllib[0]['rollout_env_steps_per_s']:.0f} env steps/s, "
              f"{r['rollout_env_steps_per_s'] / max(rllib[0]['rollout_env_steps_per_s'], 1e-9):.2f}x)")
    out = {"game": GAME, "seconds": args.seconds, "seed": args.seed, "smoke": args.smoke, "runs": runs}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
