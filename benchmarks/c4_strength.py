"""How strong is a Connect Four policy against opponents it never trained against?

For each checkpoint: greedy seat-swapped games against each opponent (win rate, draws, 95% Wilson
interval), and the tactics probe (immediate wins taken, single threats blocked, on random positions;
a random move's expectation beside them). ``--search N`` also plays ``policy_mcts:<ckpt>,simulations=N``
(PUCT over the policy's priors and value) against the same opponents.

    python benchmarks/c4_strength.py runs/c4/checkpoints/il runs/c4/best \\
        [--opponents random mcts:simulations=400 mcts:simulations=1600] [--games 200] [--search 100]

Opponents default to random, MCTS-400 and MCTS-1600 (OpenSpiel's Python MCTS, random rollouts: the
reference opponents of docs/policy.md). Matches run on ``--workers`` processes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GAME = "openspiel/connect_four-v0"


def rate(player: str, opponent: str, games: int, workers: int, seed: int) -> tuple[float, float, int]:
    """(wins, draws) shares of `player` in `games` seat-swapped games, and the games played."""
    from arena.match.batch import play_matches, summarize

    res = play_matches(GAME, [player, opponent], games, seed=seed, workers=workers, record=False)
    me, _ = summarize(res, [player, opponent])
    return me.wins / me.games, me.draws / me.games, me.games


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--opponents", nargs="+", default=["random", "mcts:simulations=400", "mcts:simulations=1600"])
    ap.add_argument("--games", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--search", type=int, default=0, help="also policy_mcts with this many simulations")
    ap.add_argument("--probe", type=int, default=500, help="positions of each kind in the tactics probe")
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args()

    from arena.agents.probe import agent_chooser, tactics_probe, wilson
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core

    for ck in args.checkpoints:
        print(f"## {ck}")
        agent = make_agent(f"policy:{ck},greedy=true,threads=1", make_core(GAME), 0)
        print("tactics probe:", tactics_probe(GAME, agent_chooser(agent), args.probe, seed=args.seed).describe())
        players = [f"policy:{ck},greedy=true,threads=1"]
        if args.search:
            players.append(f"policy_mcts:{ck},simulations={args.search},threads=1")
        print(f"| player | opponent | games | wins | draws | 95% interval (wins) | seconds |")
        print("|---|---|---:|---:|---:|---|---:|")
        for player in players:
            for opp in args.opponents:
                t0 = time.perf_counter()
                w, d, n = rate(player, opp, args.games, args.workers, args.seed)
                lo, hi = wilson(w, n)
                short = player.split(":")[0] + (f" {args.search}" if player.startswith("policy_mcts") else " greedy")
                print(f"| {short} | {opp} | {n} | {w:.3f} | {d:.3f} | [{lo:.2f}, {hi:.2f}] | "
                      f"{time.perf_counter() - t0:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
