"""The fitted Bradley-Terry table (arena.league.bt) at league scale, on a synthetic league.

Why: the league shows a fitted Bradley-Terry table with bootstrap intervals; it must stay
usable when the league has a thousand players and a million results. This script builds a
synthetic league with known strengths and measures:

1. The point fit alone (aggregation into per-pair cells and Newton's method).
2. The bootstrap (``--resamples`` replicates, 1,000 by default): seconds on top of the fit.
3. The stability figure (``--stability`` drop-1% replicates, 200 by default): seconds on top.
4. What comes out: the median 95% interval width in Elo, how often the true rating lies in
   its interval (about 95% if the intervals are honest), how many players are provisional,
   the fitted draw parameter against the true one, and the correlation of the fitted strength
   with the true one (Pearson on theta; Spearman on the order).

The league: true strengths theta ~ N(0, 1) (natural-log odds; 1 is about 174 Elo). Pairs are
drawn like a PFSP-ish league: every player picks ``--opponents`` opponents, half among its
neighbours in strength (within 40 places), half uniformly, so each player meets a few dozen
opponents, repeatedly. Results are drawn uniformly over those pairs, the outcome from
Davidson's model with ``nu = --nu`` (some draws). With ``--scopes S`` > 1 the results are
split over S games (the last one without draws) and the overall, equally weighted, table is
fitted.

Goal: fit + bootstrap + stability under 30 s on 2 cores at 1,000 players, 1,000,000 results.

Run:  .venv/bin/python benchmarks/bench_bt.py [--players 1000] [--results 1000000] [--resamples 1000]
      .venv/bin/python benchmarks/bench_bt.py --quick      # 200 players, 100,000 results, 200 resamples
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions as _versions  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from arena.league.bt import ELO_PER_NAT, Results, fit_bt  # noqa: E402


def synthetic_league(players: int, results: int, opponents: int, nu: float, scopes: int,
                     seed: int) -> tuple[Results, np.ndarray]:
    """A reproducible league: (results, true theta per player code)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.0, players)
    by_strength = np.argsort(theta)
    place = np.empty(players, dtype=np.int64)
    place[by_strength] = np.arange(players)
    half = opponents // 2
    me = np.repeat(np.arange(players), opponents)
    offs = rng.integers(1, 41, size=(players, half)) * rng.choice([-1, 1], size=(players, half))
    near = by_strength[np.clip(place[:, None] + offs, 0, players - 1)].ravel()
    far = rng.integers(0, players, size=(players, opponents - half)).ravel()
    other = np.concatenate([near.reshape(players, half), far.reshape(players, -1)], axis=1).ravel()
    keep = me != other
    pairs = np.unique(np.stack([np.minimum(me, other)[keep], np.maximum(me, other)[keep]], 1), axis=0)
    pick = rng.integers(0, len(pairs), size=results)
    flip = rng.random(results) < 0.5
    a = np.where(flip, pairs[pick, 1], pairs[pick, 0])
    b = np.where(flip, pairs[pick, 0], pairs[pick, 1])
    scope = rng.integers(0, scopes, size=results)
    nus = np.full(scopes, nu)
    if scopes > 1:
        nus[-1] = 0.0
    h = 0.5 * (theta[a] - theta[b])
    z = np.exp(h) + np.exp(-h) + nus[scope]
    p_win, p_draw = np.exp(h) / z, nus[scope] / z
    u = rng.random(results)
    score = np.where(u < p_win, 1.0, np.where(u < p_win + p_draw, 0.5, 0.0))
    res = Results(scope, a, b, score, [f"game{s}" for s in range(scopes)],
                  [f"p{i:05d}" for i in range(players)])
    return res, theta


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx = np.argsort(np.argsort(x)).astype(float)
    ry = np.argsort(np.argsort(y)).astype(float)
    return float(np.corrcoef(rx, ry)[0, 1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--players", type=int, default=1000)
    p.add_argument("--results", type=int, default=1_000_000)
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--stability", type=int, default=200, help="drop-1%% replicates")
    p.add_argument("--opponents", type=int, default=30, help="opponents picked per player")
    p.add_argument("--nu", type=float, default=0.3, help="true Davidson draw parameter")
    p.add_argument("--scopes", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="200 players, 100,000 results, 200 resamples")
    args = p.parse_args()
    if args.quick:
        args.players, args.results, args.resamples, args.stability = 200, 100_000, 200, 100

    t0 = time.perf_counter()
    res, true_theta = synthetic_league(args.players, args.results, args.opponents, args.nu, args.scopes, args.seed)
    t_gen = time.perf_counter() - t0
    common = {"anchor": None, "seed": args.seed}

    t0 = time.perf_counter()
    fit_bt(res, resamples=0, stability_replicates=0, **common)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    table = fit_bt(res, resamples=args.resamples, stability_replicates=0, **common)
    t_boot = time.perf_counter() - t0 - t_fit
    t0 = time.perf_counter()
    stab = fit_bt(res, resamples=0, stability_replicates=args.stability, **common)
    t_stab = time.perf_counter() - t0 - t_fit
    total = t_fit + t_boot + t_stab

    code = {name: k for k, name in enumerate(res.players)}
    fitted = np.array([r.rating for r in table.rows]) / ELO_PER_NAT
    truth = true_theta[[code[r.player] for r in table.rows]]
    pearson = float(np.corrcoef(fitted, truth)[0, 1])
    spearman = _spearman(fitted, truth)
    widths = np.array([r.hi - r.lo for r in table.rows])
    # the fit pins the mean rating at 1000 (anchor=None): put the truth on the same scale
    true_rating = 1000.0 + ELO_PER_NAT * (truth - truth.mean())
    covered = float(np.mean([r.lo <= t <= r.hi for r, t in zip(table.rows, true_rating)]))
    provisional = sum(r.provisional for r in table.rows)
    pairs = len(np.unique(np.minimum(res.a, res.b) * args.players + np.maximum(res.a, res.b)))

    rows = [
        ["players / results / pairs met", f"{args.players:,} / {args.results:,} / {pairs:,}"],
        ["scopes; true nu; fitted nu (mean over scopes)", f"{args.scopes}; {args.nu:g}; {table.draw_nu:.3f}"],
        ["synthetic league built", f"{t_gen:.2f} s"],
        ["fit alone (aggregate + Newton)", f"{t_fit:.2f} s"],
        [f"bootstrap, {args.resamples:,} resamples", f"{t_boot:.2f} s"],
        [f"stability, {args.stability:,} drop-1% replicates", f"{t_stab:.2f} s"],
        ["fit + bootstrap + stability", f"{total:.2f} s (goal < 30 s)"],
        ["median 95% interval width", f"{np.median(widths):.1f} Elo"],
        ["true rating inside its 95% interval", f"{100 * covered:.1f}% of players"],
        ["provisional players", f"{provisional:,} of {len(table.rows):,}"],
        ["top-3 stability", f"{stab.stability:.3f}"],
        ["fitted vs true strength: Pearson / Spearman", f"{pearson:.4f} / {spearman:.4f}"],
    ]
    print(markdown_table(["measure", "value"], rows, {1}))
    print()
    print(f"_{_versions(('numpy', 'scipy'))}; {os.cpu_count()} CPUs._")
    print(json.dumps({"players": args.players, "results": args.results, "pairs": pairs, "scopes": args.scopes,
                      "resamples": args.resamples, "stability_replicates": args.stability,
                      "seconds": {"generate": t_gen, "fit": t_fit, "bootstrap": t_boot, "stability": t_stab,
                                  "total": total},
                      "median_width_elo": float(np.median(widths)), "coverage": covered, "provisional": provisional,
                      "draw_nu": table.draw_nu, "stability": stab.stability,
                      "pearson": pearson, "spearman": spearman, "goal_met": total < 30.0}))


if __name__ == "__main__":
    main()
