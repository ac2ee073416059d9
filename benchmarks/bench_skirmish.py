"""Benchmark: Skirmish games stepped together in one `SkirmishBatch` against one core at a time.

Side by side in one process: the same `--games` games (same seeds, the same pre-drawn random orders:
a type, a random set of units, a random target and cell each step) stepped

1. **batched**: every game's orders given to one `SkirmishBatch`, then one `step()` for all;
2. **one at a time**: one `SkirmishCore` a game, each `apply_joint`-ed in turn (what the match loop
   does);

and the same with every player's observation built after each step (one `observe()` against two
`observation(p)` a core), which is what a learner's actors pay. Throughput is unit-steps per second
(living units at the start of each step, summed). Both paths run the same code, so the end states
are checked equal before anything is printed.

Then, with ``--league N``, a league of the four scripted bots (`configs/leagues/skirmish_bots.yaml`:
3m and 2s3z, round robin, every match rated and its replay written) plays N matches in this process
(``inline``) and on 2 worker processes (``local``), each in a fresh folder: matches/s, start-up
included.

Run:  .venv/bin/python benchmarks/bench_skirmish.py [--games 64] [--steps 60] [--scenario 2s3z] [--rounds 3]
          [--league 600]
"""

from __future__ import annotations

import os as _os
import sys as _sys

_os.environ.setdefault("OMP_NUM_THREADS", "1")
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions  # noqa: E402

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def random_orders(rng: np.random.Generator, games: int, steps: int, units: int, grid: int) -> list:
    """``orders[step][game][player]``: moves drawn without looking at the game (dead units and dead
    targets in them are ignored by the game, as `SkirmishBatch.give` does)."""
    out = []
    for _ in range(steps):
        row = []
        for _ in range(games):
            pair = {}
            for p in (0, 1):
                kind = int(rng.integers(5))
                move = {"type": kind}
                if kind:
                    k = int(rng.integers(1, units + 1))
                    move["units"] = [int(u) for u in rng.choice(units, size=k, replace=False)]
                    move["target"] = int(units + rng.integers(units))
                    move["location"] = [int(rng.integers(grid)), int(rng.integers(grid))]
                pair[p] = move
            row.append(pair)
        out.append(row)
    return out


def run(config, seeds: list[int], orders: list, batched: bool, observe: bool):
    """(seconds, unit-steps, the end state) of one path."""
    from arena.envs.skirmish import SkirmishBatch, SkirmishCore

    if batched:
        batch = SkirmishBatch(len(seeds), config)
        batch.reset(seeds)
        t0, work = time.perf_counter(), 0
        for row in orders:
            work += int(batch.alive[~batch.over()].sum())
            for g, pair in enumerate(row):
                for p, move in pair.items():
                    batch.give(g, p, move)
            batch.step()
            if observe:
                batch.observe()
        return time.perf_counter() - t0, work, (batch.pos.copy(), batch.health.copy(), batch.t.copy())
    cores = [SkirmishCore("arena/Skirmish-bench", **config.settings()) for _ in seeds]
    for core, s in zip(cores, seeds):
        core.reset(s)
    t0, work = time.perf_counter(), 0
    for row in orders:
        for core, pair in zip(cores, row):
            if core.is_terminal():
                continue
            work += int(core.batch.alive.sum())
            core.apply_joint(pair)
            if observe:
                core.observation(0)
                core.observation(1)
    state = tuple(np.concatenate([getattr(c.batch, k) for c in cores]) for k in ("pos", "health", "t"))
    return time.perf_counter() - t0, work, state


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--games", type=int, default=64)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--scenario", default="2s3z")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--league", type=int, default=0, help="matches of the bots' league (0: skip)")
    args = ap.parse_args()
    from arena.envs.registry import SKIRMISH_GAMES
    from arena.envs.skirmish import GRID, SkirmishBatch, SkirmishConfig

    kwargs = dict(SKIRMISH_GAMES[f"arena/Skirmish-{args.scenario}-v0"][0])
    kwargs["max_steps"] = args.steps
    config = SkirmishConfig(**kwargs)
    units = SkirmishBatch(1, config).U
    seeds = list(range(args.games))
    orders = random_orders(np.random.default_rng(0), args.games, args.steps, units, GRID)
    print(versions(("numpy",)))
    rows = []
    for observe in (False, True):
        best = {}
        for batched in (True, False):
            rate = 0.0
            for _ in range(args.rounds):
                seconds, work, state = run(config, seeds, orders, batched, observe)
                rate = max(rate, work / seconds)
            best[batched] = (rate, state)
        for a, b in zip(best[True][1], best[False][1]):
            assert np.array_equal(a, b), "the batched and one-at-a-time games differ"
        what = "step + both players' observations" if observe else "step"
        rows.append([f"{args.scenario}, {args.games} games x {args.steps} steps: {what} (unit-steps/s)",
                     f"{best[True][0]:,.0f}", f"{best[False][0]:,.0f}", f"{best[True][0] / best[False][0]:.1f}x"])
    print(markdown_table(["comparison", "one SkirmishBatch", "one core at a time", "ratio"], rows, {1, 2, 3}))
    if args.league > 0:
        bench_league(args.league)


def bench_league(matches: int) -> None:
    """The bots' league, inline and on 2 worker processes: matches/s (start-up included)."""
    import tempfile
    from pathlib import Path

    from arena.league.config import load_league_config
    from arena.league.manager import League, open_league

    config = Path(__file__).resolve().parents[1] / "configs" / "leagues" / "skirmish_bots.yaml"
    rows, ratings = [], None
    with tempfile.TemporaryDirectory(prefix="skirmish-league-") as root:
        for backend, workers in (("inline", 1), ("local", 2)):
            cfg = load_league_config(config, workers=workers)
            league = League(cfg, Path(root) / backend, backend=backend)
            t0 = time.perf_counter()
            summary = league.run(matches=matches)
            seconds = time.perf_counter() - t0
            if summary["new"] != matches or summary["failures"]:
                raise SystemExit(f"the bots' league ({backend}) did not play its matches: {summary}")
            rows.append([f"league of the 4 bots, {matches} matches ({backend}, {workers} process"
                         f"{'es' if workers > 1 else ''})", f"{matches / seconds:,.1f}", f"{seconds:.1f}"])
            league.close()
            if ratings is None:
                store = open_league(Path(root) / backend)
                ratings = {g: store.elo(g) for g in ("arena/Skirmish-3m-v0", "arena/Skirmish-2s3z-v0")}
    print(markdown_table(["league", "matches/s", "seconds"], rows, {1, 2}))
    for game, elo in ratings.items():
        print(f"Elo on {game}: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(elo.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
