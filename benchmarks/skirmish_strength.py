"""Strength of trained Skirmish policies: greedy win rates against the scripted bots with 95% Wilson
intervals, and the share of each order type the policy gives (what RL changed in its play, beside
whether it wins more).

For each checkpoint and each opponent, ``--games`` seat-swapped greedy (``--sample``: sampled) games (match i on seed
``--seed + i``, the policy in seat i % 2: seeds 500 and up, which no training run plays) in lock step.

Run:  .venv/bin/python benchmarks/skirmish_strength.py RUN/checkpoints/iter-00000 RUN/latest \\
          [--opponents skirmish:attack_nearest skirmish:focus_fire] [--games 200] [--game arena/Skirmish-3m-v0]
"""

from __future__ import annotations

import os as _os
import sys as _sys

_os.environ.setdefault("OMP_NUM_THREADS", "1")
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions  # noqa: E402

import argparse  # noqa: E402
from collections import Counter  # noqa: E402


def strength(folder: str, game: str, opponent: str, games: int, seed: int,
             greedy: bool = True) -> tuple[float, float, Counter]:
    """(win rate, draw rate, order types given) of the policy in `folder` against `opponent`, greedy or
    sampling its moves (seeded per match)."""
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.match.pool import play_lockstep

    spec = f"policy:{folder},greedy={'true' if greedy else 'false'}"
    me = make_agent(spec, make_core(game), 0)
    orders: Counter = Counter()
    decide = me.decide

    def counted(observations):
        moves, x = decide(observations)
        orders.update(int(t) for t in x["action"]["type"].tolist())
        return moves, x

    me.decide = counted
    seats = [[spec, opponent] if i % 2 == 0 else [opponent, spec] for i in range(games)]
    results = play_lockstep(game, seats, [seed + i for i in range(games)], shared={spec: me})
    won = sum(r.winner == i % 2 for i, r in enumerate(results))
    drawn = sum(r.winner is None for r in results)
    return won / games, drawn / games, orders


def main() -> None:
    from arena.agents.probe import wilson
    from arena.envs.skirmish import ACTION_TYPES

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--opponents", nargs="+", default=["skirmish:attack_nearest", "skirmish:focus_fire"])
    ap.add_argument("--games", type=int, default=200)
    ap.add_argument("--seed", type=int, default=500)
    ap.add_argument("--game", default="arena/Skirmish-3m-v0")
    ap.add_argument("--sample", action="store_true", help="the policy samples its moves (default: greedy)")
    a = ap.parse_args()
    rows, shares = [], []
    for ck in a.checkpoints:
        row, given = [ck], Counter()
        for opp in a.opponents:
            w, d, orders = strength(ck, a.game, opp, a.games, a.seed, greedy=not a.sample)
            lo, hi = wilson(w, a.games)
            row.append(f"{w:.3f} [{lo:.2f}, {hi:.2f}] (draws {d:.2f})")
            given.update(orders)
        rows.append(row)
        total = max(1, sum(given.values()))
        shares.append([ck] + [f"{given[k] / total:.3f}" for k in range(len(ACTION_TYPES))])
    print(f"{a.game}, {'sampled' if a.sample else 'greedy'}, {a.games} seat-swapped games a pair on seeds {a.seed}..{a.seed + a.games - 1}, "
          f"win rate [95% Wilson]; {versions(('torch',))}")
    print(markdown_table(["checkpoint", *[f"vs {o}" for o in a.opponents]], rows, set(range(1, 1 + len(a.opponents)))))
    print(f"\nshare of each order type the {'sampling' if a.sample else 'greedy'} policy gave, over all those games:")
    print(markdown_table(["checkpoint", *ACTION_TYPES], shares, set(range(1, 1 + len(ACTION_TYPES)))))


if __name__ == "__main__":
    main()
