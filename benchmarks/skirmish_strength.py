"""Strength of trained Skirmish policies: greedy win rates against the scripted bots with 95% Wilson
intervals, the share of each order type the policy gives, and what its move orders do (what RL
changed in its play, beside whether it wins more).

A move order is, from the observation it was given on (positions in world units):
* a **pull back**: part of the living squad sent farther from the nearest enemy in sight than it
  stands (a unit taken out of the fight while the others fight on); the table gives the mean health
  of the units pulled back as a share of their squad's mean health then (below 1: the hurt ones);
* a **retreat**: the whole squad sent farther from the nearest enemy;
* an **advance**: towards the nearest enemy;
* **unseen**: with no enemy in sight (positioning before the fight).

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

#: The kinds of move order, in the table's order.
KINDS = ("pull_back", "retreat", "advance", "unseen")


def move_kind(obs: dict, move: dict, size: tuple[float, float]) -> tuple[str, float]:
    """What move order `move` given on observation `obs` does (the module docstring's kinds), and for
    a pull back the ordered units' mean health over their squad's (else nan)."""
    import numpy as np

    from arena.envs.skirmish import F_ENEMY, F_HEALTH, F_OWN, F_PRESENT, F_X, F_Y, GRID

    ent = np.asarray(obs["entities"], dtype=np.float64)
    scale = np.array(size, dtype=np.float64)
    present = ent[:, F_PRESENT] > 0
    own = np.flatnonzero(present & (ent[:, F_OWN] > 0))
    enemies = ent[present & (ent[:, F_ENEMY] > 0)][:, [F_X, F_Y]] * scale
    alive = set(own.tolist())
    ordered = [u for u in move["units"] if u in alive]
    if not ordered or not len(enemies):
        return "unseen", float("nan")
    row, col = move["location"]
    goal = np.array([(col + 0.5) / GRID, (row + 0.5) / GRID]) * scale
    here = ent[ordered][:, [F_X, F_Y]] * scale
    now = np.linalg.norm(here[:, None] - enemies[None], axis=-1).min(-1).mean()
    then = np.linalg.norm(goal[None] - enemies, axis=-1).min()
    if then <= now:
        return "advance", float("nan")
    if len(ordered) == len(own):
        return "retreat", float("nan")
    health = ent[own, F_HEALTH]
    return "pull_back", float(ent[ordered, F_HEALTH].mean() / max(health.mean(), 1e-9))


def strength(folder: str, game: str, opponent: str, games: int, seed: int,
             greedy: bool = True) -> tuple[float, float, Counter, Counter, list[float]]:
    """(win rate, draw rate, order types given, move orders by kind, the health ratios of the pull
    backs) of the policy in `folder` against `opponent`, greedy or sampling its moves (seeded per
    match)."""
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.envs.skirmish import MOVE
    from arena.match.pool import play_lockstep

    spec = f"policy:{folder},greedy={'true' if greedy else 'false'}"
    core = make_core(game)
    size = (float(core.cfg.width), float(core.cfg.height))
    me = make_agent(spec, core, 0)
    orders: Counter = Counter()
    kinds: Counter = Counter()
    health: list[float] = []
    decide = me.decide

    def counted(observations):
        moves, x = decide(observations)
        orders.update(int(t) for t in x["action"]["type"].tolist())
        for obs, move in zip(observations, moves):
            if int(move["type"]) == MOVE:
                kind, ratio = move_kind(obs.raw, move, size)
                kinds[kind] += 1
                if kind == "pull_back":
                    health.append(ratio)
        return moves, x

    me.decide = counted
    seats = [[spec, opponent] if i % 2 == 0 else [opponent, spec] for i in range(games)]
    results = play_lockstep(game, seats, [seed + i for i in range(games)], shared={spec: me})
    won = sum(r.winner == i % 2 for i, r in enumerate(results))
    drawn = sum(r.winner is None for r in results)
    return won / games, drawn / games, orders, kinds, health


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
    rows, shares, moves = [], [], []
    for ck in a.checkpoints:
        row, given, kinds, health = [ck], Counter(), Counter(), []
        for opp in a.opponents:
            w, d, orders, k, h = strength(ck, a.game, opp, a.games, a.seed, greedy=not a.sample)
            lo, hi = wilson(w, a.games)
            row.append(f"{w:.3f} [{lo:.2f}, {hi:.2f}] (draws {d:.2f})")
            given.update(orders)
            kinds.update(k)
            health += h
        rows.append(row)
        total = max(1, sum(given.values()))
        shares.append([ck] + [f"{given[k] / total:.3f}" for k in range(len(ACTION_TYPES))])
        n = sum(kinds.values())
        moves.append([ck, str(n)] + [f"{kinds[k] / max(n, 1):.3f}" for k in KINDS]
                     + [f"{sum(health) / len(health):.2f}" if health else "-"])
    print(f"{a.game}, {'sampled' if a.sample else 'greedy'}, {a.games} seat-swapped games a pair on seeds {a.seed}..{a.seed + a.games - 1}, "
          f"win rate [95% Wilson]; {versions(('torch',))}")
    print(markdown_table(["checkpoint", *[f"vs {o}" for o in a.opponents]], rows, set(range(1, 1 + len(a.opponents)))))
    print(f"\nshare of each order type the {'sampling' if a.sample else 'greedy'} policy gave, over all those games:")
    print(markdown_table(["checkpoint", *ACTION_TYPES], shares, set(range(1, 1 + len(ACTION_TYPES)))))
    print("\nwhat the move orders did (pull back: part of the squad sent away from the nearest enemy; retreat: "
          "the whole squad; advance: towards it; unseen: no enemy in sight), and the pulled-back units' health over "
          "their squad's:")
    print(markdown_table(["checkpoint", "move orders", *KINDS, "health pulled back / squad"], moves, set(range(1, 7))))


if __name__ == "__main__":
    main()
