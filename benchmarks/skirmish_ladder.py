"""The Skirmish bots' ladder: win rates of every pair over seeded, seat-swapped games.

For each scenario and each pair (A, B) of `arena.agents.skirmish.BOTS`, A plays B on seeds
``0..games/2-1`` once from each seat (``games`` matches); a draw counts half. Printed as a markdown
table with 95% Wilson score intervals of A's score (draws counted half, so the interval is
approximate where draws occur), the table docs/skirmish.md shows.

Run:  .venv/bin/python benchmarks/skirmish_ladder.py [--games 100] [--scenarios 3m 2s3z]
"""

from __future__ import annotations

import os as _os
import sys as _sys

_os.environ.setdefault("OMP_NUM_THREADS", "1")
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions  # noqa: E402

import argparse  # noqa: E402
import time  # noqa: E402


def wilson(score: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion `score` out of `n` (`arena.agents.probe.wilson` of its rate)."""
    from arena.agents.probe import wilson as wilson_of_rate

    return wilson_of_rate(score / n if n else 0.0, n, z)


def play_pair(game: str, a: str, b: str, games: int) -> tuple[int, int, int]:
    """(wins, draws, losses) of `a` over `games` seat-swapped matches against `b`."""
    from arena.match.loop import play_match

    won = drawn = lost = 0
    for seed in range(games // 2):
        for seat in (0, 1):
            specs = [a, b] if seat == 0 else [b, a]
            z = play_match(game, specs, seed=seed, record=False).returns[seat]
            won, drawn, lost = won + (z > 0), drawn + (z == 0), lost + (z < 0)
    return won, drawn, lost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--games", type=int, default=100)
    ap.add_argument("--scenarios", nargs="+", default=["3m", "2s3z"])
    args = ap.parse_args()
    from arena.agents.skirmish import BOTS

    print(versions(("numpy", "gymnasium", "pettingzoo")))
    rows = []
    t0 = time.perf_counter()
    for scenario in args.scenarios:
        game = f"arena/Skirmish-{scenario}-v0"
        for i, a in enumerate(BOTS):
            for b in BOTS[:i]:
                won, drawn, lost = play_pair(game, f"skirmish:{a}", f"skirmish:{b}", args.games)
                n = won + drawn + lost
                lo, hi = wilson(won + drawn / 2, n)
                rows.append([scenario, a, b, str(n), f"{won} / {drawn} / {lost}", f"{(won + drawn / 2) / n:.2f}",
                             f"[{lo:.2f}, {hi:.2f}]"])
    print(markdown_table(["scenario", "bot A", "bot B", "games", "A wins / draws / losses", "A's score",
                          "95% Wilson interval"], rows, {3, 5}))
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
