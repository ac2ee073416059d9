"""Benchmark: the neural-policy learner's actors and league, and the learner against RLlib PPO.

Side by side in one process run, on Connect Four (`openspiel/connect_four-v0`):

1. **Vectorised actors**: 64 concurrent games in lock step with one batched forward pass a tick
   (`arena.match.pool.play_lockstep`, one shared `policy:` agent) against the same policy
   playing one game at a time through `play_match` (a forward pass a move). Both sides play
   policy vs policy, the same seeds, the same network. Goal: >= 10x moves/s.
2. **League matches/s** with two neural players (two `policy:` checkpoints) against two random
   agents, the same inline league otherwise (pairing, replays, commits, ratings). Reported.
3. **This learner against RLlib PPO**, the same wall-clock budget each (``--seconds``), RL only
   (no imitation), from scratch, sampling in the learner's process on both sides, an MLP policy
   on both sides (RLlib's: `arena.inference.rllib_module`; ours: ``arch: mlp``, 128 games an
   iteration): environment steps/s over the run (ours: the whole loop, league bookkeeping and
   checkpoints included; RLlib's: inside ``algo.train()``) and the greedy win rates at the end,
   through the arena's match loop for both, with 95% Wilson intervals: against random (400
   seat-swapped games ours, 200 RLlib's) and against OpenSpiel's MCTS with 100 simulations (200
   each; neither trained against it). Goal: >= 3x RLlib's steps/s and higher win rates.

Run:  .venv/bin/python benchmarks/bench_policy.py [--seconds 180] [--skip-rllib] [--quick]
"""

from __future__ import annotations

import os as _os
import sys as _sys

# Before torch loads: no spinning OpenMP threads (the learner and its neighbours share 2 cores).
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions as _versions  # noqa: E402

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

GAME = "openspiel/connect_four-v0"
#: The search opponent of the strength comparison (neither learner trains against it).
MCTS = "mcts:simulations=100"


def _policy_folder(root: Path, seed: int) -> Path:
    import torch

    from arena.envs.registry import make_core
    from arena.inference.policy_nets import build_policy, save_policy, spec_from_core

    torch.manual_seed(seed)
    return save_policy(root / f"policy-{seed}", build_policy(spec_from_core(make_core(GAME))))


def bench_vectorised(root: Path, games: int = 64, rounds: int = 3) -> dict:
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.match.pool import play_lockstep
    from arena.match.loop import play_match

    spec = f"policy:{_policy_folder(root, 1)}"
    shared = make_agent(spec, make_core(GAME), 0)
    best_batched = best_single = 0.0
    for r in range(rounds):
        seeds = list(range(r * games, (r + 1) * games))
        t0 = time.perf_counter()
        res = play_lockstep(GAME, [[spec, spec]] * games, seeds, shared={spec: shared})
        dt = time.perf_counter() - t0
        best_batched = max(best_batched, sum(x.moves for x in res) / dt)
        t0 = time.perf_counter()
        moves = 0
        for s in seeds[: games // 4]:  # a quarter of the games: the single-game side is the slow one
            moves += play_match(GAME, [shared, shared], seed=s, record="actions").moves
        dt = time.perf_counter() - t0
        best_single = max(best_single, moves / dt)
    return {"batched": best_batched, "single": best_single, "ratio": best_batched / best_single}


def bench_league(root: Path, matches: int = 200) -> dict:
    from arena.league.config import GameEntry, LeagueConfig, PlayerEntry
    from arena.league.manager import League

    a, b = _policy_folder(root, 2), _policy_folder(root, 3)
    out = {}
    for label, specs in (("neural", [f"policy:{a}", f"policy:{b}"]), ("random", ["random", "random"])):
        cfg = LeagueConfig(games=[GameEntry(GAME)], players=[PlayerEntry("a", specs[0]), PlayerEntry("b", specs[1])],
                           matches=matches, backend="local", workers=1)
        league = League(cfg, root / f"league-{label}", backend="inline")
        league.run(matches=10)  # warm: caches, the checkpoint loaded once
        t0 = time.perf_counter()
        league.run(matches=matches + 10)
        out[label] = matches / (time.perf_counter() - t0)
    out["ratio"] = out["neural"] / out["random"]
    return out


def bench_learners(root: Path, seconds: float, skip_rllib: bool) -> dict:
    from arena.config import from_dict
    from arena.match.batch import play_matches
    from arena.trainers.policy.config import SCCConfig
    from arena.trainers.policy.scc import SCCTrainer

    # An MLP like RLlib's default model; half the games against random, half by the main agent's league rule.
    cfg = from_dict(SCCConfig, {"game": GAME, "seed": 0, "il": None, "learners": [{"name": "main", "role": "main"}],
                                "arch": "mlp", "fixed_share": 0.5, "iterations": 10_000, "games_per_iter": 128,
                                "lr": 1e-3, "kl_coef": 0.0, "eval": {"every": 10_000, "games": 2}})
    t = SCCTrainer(cfg, root / "scc")
    steps, it = 0, 0
    t0 = time.perf_counter()
    try:
        while time.perf_counter() - t0 < seconds:
            it += 1
            line = t.run(iterations=it)
            steps += int(line.get("train/env_steps", 0))
    finally:
        t.close()
    wall = time.perf_counter() - t0
    spec = f"policy:{root / 'scc' / 'latest'},greedy=true"
    res = play_matches(GAME, [spec, "random"], 400, seed=99)
    vs = play_matches(GAME, [spec, MCTS], 200, seed=101)
    ours = {"env_steps": steps, "env_steps_per_s": steps / wall, "iterations": it, "eval_games": 400,
            "win_rate_vs_random": sum(r.winner is not None and r.seats[r.winner] == 0 for r in res) / 400,
            "win_rate_vs": {MCTS: sum(r.winner is not None and r.seats[r.winner] == 0 for r in vs) / 200}}
    out = {"arena": ours}
    if not skip_rllib:
        from bench_rllib_ppo import rllib_ppo_run

        out["rllib"] = rllib_ppo_run(GAME, seconds, 0, opponents=(MCTS,))
    return out


def _rate(p: float, n: int) -> str:
    from arena.agents.probe import wilson

    lo, hi = wilson(p, n)
    return f"{p:.3f} [{lo:.2f}, {hi:.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=180.0, help="wall-clock budget of each learner")
    ap.add_argument("--skip-rllib", action="store_true")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    root = Path(tempfile.mkdtemp(prefix="bench-policy-"))
    print(_versions(("torch", "open_spiel", "ray")))
    vec = bench_vectorised(root, games=16 if args.quick else 64, rounds=1 if args.quick else 3)
    lg = bench_league(root, matches=20 if args.quick else 200)
    rows = [["vectorised actors: 64 games in lock step / one game at a time (moves/s)",
             f"{vec['batched']:,.0f}", f"{vec['single']:,.0f}", f"{vec['ratio']:.1f}x", ">= 10x"],
            ["league: two neural players / two random agents (matches/s)", f"{lg['neural']:,.1f}",
             f"{lg['random']:,.1f}", f"{lg['ratio']:.2f}x", "reported"]]
    learners = bench_learners(root, 10.0 if args.quick else args.seconds, args.skip_rllib)
    a = learners["arena"]
    if "rllib" in learners:
        r = learners["rllib"]
        rows.append([f"learner / RLlib PPO, {args.seconds:.0f} s each: env steps/s", f"{a['env_steps_per_s']:,.0f}",
                     f"{r['env_steps_per_s']:,.0f}", f"{a['env_steps_per_s'] / r['env_steps_per_s']:.1f}x", ">= 3x"])
        rows.append(["greedy win rate vs random after the same time", _rate(a['win_rate_vs_random'], a["eval_games"]),
                     _rate(r['win_rate_vs_random'], r["eval_games"]),
                     f"{a['win_rate_vs_random'] - r['win_rate_vs_random']:+.3f}", "higher"])
        rows.append([f"greedy win rate vs {MCTS} after the same time", _rate(a["win_rate_vs"][MCTS], 200),
                     _rate(r["win_rate_vs"][MCTS], 200), f"{a['win_rate_vs'][MCTS] - r['win_rate_vs'][MCTS]:+.3f}",
                     "higher"])
    else:
        rows.append([f"learner alone, {args.seconds:.0f} s: env steps/s, win rate vs random",
                     f"{a['env_steps_per_s']:,.0f}", f"{a['win_rate_vs_random']:.3f}", "-", "-"])
    print(markdown_table(["comparison", "arena", "other", "ratio", "goal"], rows, {1, 2, 3}))


if __name__ == "__main__":
    main()
