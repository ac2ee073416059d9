"""Micro-benchmark: rating-table update throughput.

Why: the league updates ratings after every game, so ``OpenSkillTable`` must
stay a thin layer over openskill.  This script replays one fixed sequence of
two-player results through

1. openskill's ``model.rate`` called directly (ratings held in a list), and
2. ``OpenSkillTable.update`` (ratings held by player id),

and reports updates/s for both and their ratio (target >= 0.9x), plus plain
``EloTable.update`` throughput.  Each variant runs several times and the best
run is kept, which filters out scheduler noise better than the mean.

Run:  .venv/bin/python benchmarks/bench_ratings.py [--games N] [--repeats R]
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import numpy as np
from rich.console import Console
from rich.table import Table

from arena.league.ratings import EloTable, OpenSkillTable


def make_sequence(n_games: int, n_players: int, seed: int) -> list[tuple[int, int, list[float]]]:
    """A reproducible list of (player_i, player_j, ranks) with ~10% draws."""
    rng = np.random.default_rng(seed)
    seq = []
    for _ in range(n_games):
        i, j = (int(x) for x in rng.choice(n_players, size=2, replace=False))
        u = rng.random()
        ranks = [0.0, 0.0] if u < 0.1 else ([0.0, 1.0] if u < 0.55 else [1.0, 0.0])
        seq.append((i, j, ranks))
    return seq


def best_rate(fn: Callable[[], None], n_updates: int, repeats: int) -> float:
    """Highest updates/s over ``repeats`` fresh runs of ``fn``."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n_updates / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=20_000)
    parser.add_argument("--players", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    seq = make_sequence(args.games, args.players, args.seed)
    ids = [f"player_{k}" for k in range(args.players)]
    id_seq = [(ids[i], ids[j], ranks) for i, j, ranks in seq]
    score_seq = [(a, b, 1.0 if r[0] < r[1] else (0.0 if r[0] > r[1] else 0.5)) for a, b, r in id_seq]

    final: dict[str, object] = {}

    def run_direct() -> None:
        model = OpenSkillTable().model  # same model parameters as the wrapper
        ratings = [model.rating() for _ in range(args.players)]
        rate = model.rate
        for i, j, ranks in seq:
            (ri,), (rj,) = rate([[ratings[i]], [ratings[j]]], ranks=ranks)
            ratings[i] = ri
            ratings[j] = rj
        final["direct"] = {ids[k]: (r.mu, r.sigma) for k, r in enumerate(ratings)}

    def run_wrapper() -> None:
        table = OpenSkillTable()
        update = table.update
        for a, b, ranks in id_seq:
            update((a, b), ranks)
        final["wrapper"] = table.ratings()

    def run_elo() -> None:
        table = EloTable()
        update = table.update
        for a, b, s in score_seq:
            update(a, b, s)

    # Warm up imports and caches once so the first timed run is not penalised.
    run_direct()
    run_wrapper()

    # Interleave the two openskill variants so drift in machine load hits both.
    direct_best = wrapper_best = 0.0
    for _ in range(args.repeats):
        direct_best = max(direct_best, best_rate(run_direct, len(seq), 1))
        wrapper_best = max(wrapper_best, best_rate(run_wrapper, len(seq), 1))
    elo_rate = best_rate(run_elo, len(seq), args.repeats)

    same = final["direct"] == final["wrapper"]
    ratio = wrapper_best / direct_best

    table = Table(title=f"Rating updates ({len(seq):,} two-player games, best of {args.repeats})")
    table.add_column("variant")
    table.add_column("updates/s", justify="right")
    table.add_column("vs openskill direct", justify="right")
    table.add_row("openskill model.rate (direct)", f"{direct_best:,.0f}", "1.00x")
    table.add_row("OpenSkillTable.update", f"{wrapper_best:,.0f}", f"{ratio:.2f}x")
    table.add_row("EloTable.update", f"{elo_rate:,.0f}", f"{elo_rate / direct_best:.1f}x")
    console = Console()
    console.print(table)
    console.print(f"wrapper/direct ratio: {ratio:.3f} (goal >= 0.9) -> {'OK' if ratio >= 0.9 else 'BELOW GOAL'}")
    console.print(f"identical final ratings (wrapper vs direct): {same}")


if __name__ == "__main__":
    main()
