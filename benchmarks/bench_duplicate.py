"""Duplicate matches: how much less noise for the same number of hands (docs/league.md, "Fewer games for
the same confidence").

Why: a league that plays a seat-balanced pair of poker hands on one seed (``duplicate``) deals each
player the cards the other held, from the other seat; the pair's score (each player's returns summed)
then has the luck of the deal taken out. This measures what that buys on the real games and agents:
the CFR+ agent (``cfr``, arena.agents.specs) against ``random`` on OpenSpiel's Kuhn and Leduc poker,
N pairs of hands, each pair one hand with cfr in seat 0 and one with cfr in seat 1, played

* without duplication: the two hands of a pair on two independent seeds (seat balance alone), and
* with duplication: both hands on one seed (what ``duplicate: true`` schedules),

and reports cfr's mean payoff per hand (chips) with its 95% interval, the standard error of that
estimate, the variance of a pair's mean, and the variance reduction factor (independent / duplicate,
with a bootstrap 95% interval): the factor fewer hands a duplicate league needs for the same standard
error. Each hand is one `arena.match.play_match` of the real core with the agents as a league seats them
(one agent object per spec, reset per match with the seat's seed derived from the match seed, as
`arena.match.runner` does); the duplicate pairs are checked to have dealt the same cards.

Run:  .venv/bin/python benchmarks/bench_duplicate.py [--quick] [--hands N] [--cfr-iterations K]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pyspiel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, versions  # noqa: E402

from arena.agents.specs import make_agent  # noqa: E402
from arena.envs.registry import make_core  # noqa: E402
from arena.match.loop import play_match  # noqa: E402

GAMES = {"kuhn": "openspiel/kuhn_poker-v0", "leduc": "openspiel/leduc_poker-v0"}


def pair_seed(base: int, i: int, half: int) -> int:
    return (base * 1_000_003 + i * 7919 + half * 104_729 + 17) % (2**31)


def chance_of(core) -> list[int]:
    return [h.action for h in core.state.full_history() if h.player == pyspiel.PlayerId.CHANCE]


def play_pairs(game: str, n: int, duplicate: bool, cfr_spec: str, base: int) -> tuple[np.ndarray, int]:
    """cfr's mean return over each of `n` pairs of hands (cfr in seat 0, then in seat 1), and how many
    duplicate pairs dealt the same cards (n when all did; 0 without duplication)."""
    core = make_core(game)
    cfr, rnd = make_agent(cfr_spec, core, None), make_agent("random", core, None)
    out = np.empty(n)
    same = 0
    for i in range(n):
        s1 = pair_seed(base, i, 0)
        s2 = s1 if duplicate else pair_seed(base, i, 1)
        a = play_match(core, [cfr, rnd], seed=s1, record=False).returns[0]
        deal = chance_of(core)
        b = play_match(core, [rnd, cfr], seed=s2, record=False).returns[1]
        if duplicate:
            other = chance_of(core)
            same += deal[:len(other)] == other[:len(deal)]  # Leduc's public card only where both reached it
        out[i] = (a + b) / 2.0
    return out, same


def bootstrap_ratio(x: np.ndarray, y: np.ndarray, reps: int, seed: int) -> tuple[float, float]:
    """95% percentile bootstrap interval of var(x) / var(y)."""
    rng = np.random.default_rng(seed)
    ratios = np.empty(reps)
    for k in range(reps):
        ratios[k] = np.var(rng.choice(x, len(x)), ddof=1) / np.var(rng.choice(y, len(y)), ddof=1)
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=10_000, help="hands each way (pairs) per game and scheme")
    parser.add_argument("--quick", action="store_true", help="1,000 hands each way")
    parser.add_argument("--games", default="kuhn,leduc", help="of: " + ", ".join(GAMES))
    parser.add_argument("--cfr-iterations", type=int, default=100,
                        help="CFR+ iterations of the cfr agent (solved once a machine, then cached)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n = 1_000 if args.quick else args.hands
    spec = f"cfr:iterations={args.cfr_iterations}"
    rows, records = [], []
    t0 = time.perf_counter()
    for key in args.games.split(","):
        game = GAMES[key.strip()]
        make_agent(spec, make_core(game), None)  # the solve (or the cache read) outside the timing
        per = {}
        for scheme, dup, base in (("independent", False, args.seed), ("duplicate", True, args.seed + 1)):
            t = time.perf_counter()
            x, same = play_pairs(game, n, dup, spec, base)
            secs = time.perf_counter() - t
            if dup and same != n:
                raise SystemExit(f"{game}: {n - same} of {n} duplicate pairs dealt different cards")
            mean, var = float(x.mean()), float(x.var(ddof=1))
            se = math.sqrt(var / n)
            per[scheme] = (x, mean, var, se, secs)
        lo, hi = bootstrap_ratio(per["independent"][0], per["duplicate"][0], 1000, args.seed)
        ratio = per["independent"][2] / per["duplicate"][2]
        for scheme in ("independent", "duplicate"):
            x, mean, var, se, secs = per[scheme]
            r = f"{ratio:.2f} [{lo:.2f}, {hi:.2f}]" if scheme == "duplicate" else "1"
            rows.append([key, scheme, f"{2 * n:,}", f"{mean:+.3f} [{mean - 1.96 * se:+.3f}, {mean + 1.96 * se:+.3f}]",
                         f"{se:.4f}", f"{var:.3f}", r])
            records.append({"game": game, "scheme": scheme, "pairs": n, "hands": 2 * n, "mean": mean,
                            "ci95": [mean - 1.96 * se, mean + 1.96 * se], "se": se, "pair_variance": var,
                            "variance_ratio": ratio if scheme == "duplicate" else 1.0,
                            "variance_ratio_ci95": [lo, hi] if scheme == "duplicate" else None,
                            "seconds": secs})
    print(markdown_table(["game", "scheme", "hands", "cfr chips/hand [95% CI]", "std error", "variance of a pair",
                          "variance ratio [95% CI]"], rows, {2, 3, 4, 5, 6}))
    print(f"\n{spec} vs random, {n:,} hands each way (cfr in seat 0, then seat 1) per game and scheme; std error "
          f"of the mean per hand over the {n:,} pairs; variance ratio = independent / duplicate (95% bootstrap). "
          f"{time.perf_counter() - t0:.0f} s; {versions(('open_spiel',))}")
    print(json.dumps({"bench": "duplicate", "agent": spec, "opponent": "random", "results": records}))


if __name__ == "__main__":
    main()
