"""`arena ratings` end to end on a league of a thousand players and a million results.

Why: the fitted table (Bradley-Terry with bootstrap intervals, `arena.league.bt`) is what
`arena ratings DIR`, the HTML report and the web's leaderboard show first. It must come up in
a few seconds on a big league, the SQLite read included. This script:

1. Builds a league folder of ``--players`` players and ``--results`` two-player results of
   tic-tac-toe (a ``win`` game: win, draw, loss) with the league's own store (its schema), the
   outcomes drawn from known strengths (Davidson's model, like `bench_bt.py`), every result
   written in one transaction (a synthetic league: the matches are not played). ``--dir`` keeps
   it for the next run (then it is only built when missing).
2. Times the first read of the league (its tally of results counted once, `LeagueStore.tally_rows`);
   then `arena ratings DIR` in process, rendered to a null console at 80 columns, the fitted
   table with 1,000 resamples and its stability, as a user runs it; and the parts: the SQLite
   read, the point fit, the bootstrap, the stability. Best of ``--repeat``.
3. Times a bare numpy/scipy fit of the same matches: the rows read with sqlite3 and
   `json_extract`, counted per pair with numpy, the Bradley-Terry likelihood (draws as half a
   win) maximised by scipy's L-BFGS, with no intervals. The ratio is `arena ratings` over it.

Goal: the SQLite read, the fit and its intervals (bootstrap and stability) under 5 s at 1,000 players
and 1,000,000 results on 2 cores; `arena ratings` as a whole (the table drawn too) beside it.

Run:  .venv/bin/python benchmarks/bench_ratings_scale.py [--players 1000] [--results 1000000] [--dir DIR]
      .venv/bin/python benchmarks/bench_ratings_scale.py --quick      # 200 players, 100,000 results
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions as _versions  # noqa: E402

import argparse  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sqlite3  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import scipy.optimize  # noqa: E402

from bench_bt import synthetic_league  # noqa: E402

GAME = "openspiel/tic_tac_toe-v0"


def build(directory: Path, players: int, results: int, seed: int) -> float:
    """Write the synthetic league into `directory` (a new folder); seconds taken."""
    from arena.league.storage import LeagueStore

    t0 = time.perf_counter()
    res, _theta = synthetic_league(players, results, opponents=30, nu=0.3, scopes=1, seed=seed)
    store = LeagueStore(directory)
    names = res.players
    now = time.time()
    with store.tx() as c:
        c.executemany("INSERT INTO players(name, kind, role, spec, games, parent, created, state, owner) "
                      "VALUES(?,?,?,?,?,?,?,?,?)",
                      [(n, "fixed", None, "random", json.dumps([GAME]), None, now, None, None) for n in names])
        a, b, s = res.a.tolist(), res.b.tolist(), res.score_a.tolist()

        def matches():
            for k in range(len(a)):
                yield (f"m{k:08d}", k, GAME, json.dumps([names[a[k]], names[b[k]]]), '["random", "random"]', k,
                       "done", 1, now, now, now, "league")

        c.executemany("INSERT INTO matches(match_id, seq, game, players, specs, seed, status, attempts, created, "
                      "started, finished, source) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", matches())

        def rows():
            for k in range(len(a)):
                win = s[k] != 0.5
                ret = [1.0, -1.0] if s[k] == 1.0 else [-1.0, 1.0] if s[k] == 0.0 else [0.0, 0.0]
                yield (f"m{k:08d}", GAME, json.dumps([names[a[k]], names[b[k]]]), json.dumps(ret),
                       (0 if s[k] == 1.0 else 1) if win else None, int(not win), "win" if win else "draw",
                       None, 7, "[0, 0]", 0.01, None, now)

        c.executemany("INSERT INTO results(match_id, game, players, returns, winner, draw, outcome, reason, moves, "
                      "invalid, duration, replay, committed) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", rows())
    store.close()
    return time.perf_counter() - t0


def bare_fit(db: Path) -> tuple[float, np.ndarray]:
    """A plain numpy/scipy Bradley-Terry point fit of the league's results: (seconds, theta)."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT json_extract(players, '$[0]'), json_extract(players, '$[1]'), winner, draw "
                        "FROM results").fetchall()
    conn.close()
    p0, p1, winner, draw = zip(*rows)
    names, codes = np.unique(np.array(p0 + p1), return_inverse=True)
    n, m = len(names), len(rows)
    a, b = codes[:m], codes[m:]
    score = np.where(np.array(draw, dtype=bool), 0.5, np.where(np.array(winner, dtype=object) == 0, 1.0, 0.0))
    pair, idx = np.unique(a * n + b, return_inverse=True)
    wins = np.bincount(idx, score, len(pair))
    games = np.bincount(idx, minlength=len(pair)).astype(float)
    i, j = pair // n, pair % n

    def nll(th: np.ndarray) -> tuple[float, np.ndarray]:
        d = th[i] - th[j]
        lp = -np.logaddexp(0.0, -d)  # log P(i beats j)
        lq = -np.logaddexp(0.0, d)
        f = -(wins * lp + (games - wins) * lq).sum() + 0.5 * (th * th).sum() * 1e-3
        r = wins - games * np.exp(lp)  # d f / d d = -(wins - games * p)
        g = -np.bincount(i, r, n) + np.bincount(j, r, n) + 1e-3 * th
        return float(f), g

    out = scipy.optimize.minimize(nll, np.zeros(n), jac=True, method="L-BFGS-B", options={"maxiter": 500})
    return time.perf_counter() - t0, out.x


def time_ratings(directory: Path, repeat: int) -> dict[str, float]:
    """Best-of-`repeat` seconds of `arena ratings DIR` in process, and of its parts."""
    from rich.console import Console

    from arena.cli import app
    from arena.league import leaderboard as lb
    from arena.league.bt import Results, fit_bt
    from arena.league.storage import LeagueStore

    best: dict[str, float] = {}

    def keep(name: str, seconds: float) -> None:
        best[name] = min(best.get(name, float("inf")), seconds)

    # the first read of a league whose results came without the tally (this synthetic one, or a league
    # from before it): the reader counts them all once
    store = LeagueStore(directory, create=False)
    with store.tx() as c:
        c.execute("DELETE FROM tally")
        c.execute("DELETE FROM tally_many")
        c.execute("DELETE FROM meta WHERE key='tally_seq'")
    t0 = time.perf_counter()
    lb.two_player_results(store, GAME)
    best["first read (the tally counted from the results, once)"] = time.perf_counter() - t0
    store.close()

    for _ in range(repeat):
        lb._memo.clear()
        out = io.StringIO()
        t0 = time.perf_counter()
        with _console_to(Console(file=out, width=80, force_terminal=False)):
            try:
                app(["ratings", str(directory)])
            except SystemExit as e:
                if e.code:
                    raise
        keep("arena ratings", time.perf_counter() - t0)
        store = LeagueStore(directory, create=False)
        t0 = time.perf_counter()
        res = lb.two_player_results(store, GAME)
        keep("read (the tally, SQLite to arrays)", time.perf_counter() - t0)
        scores = lb._scores(res, lb.game_scorings(store, res.games))
        fit_input = Results(res.game, res.a, res.b, scores, res.games, res.names, None)
        t0 = time.perf_counter()
        fit_bt(fit_input, scope=GAME, resamples=0, stability_replicates=0)
        t_fit = time.perf_counter() - t0
        keep("point fit", t_fit)
        t0 = time.perf_counter()
        fit_bt(fit_input, scope=GAME, resamples=1000, stability_replicates=0)
        keep("bootstrap, 1,000 resamples", time.perf_counter() - t0 - t_fit)
        t0 = time.perf_counter()
        fit_bt(fit_input, scope=GAME, resamples=0, stability_replicates=200)
        keep("stability, 200 replicates", time.perf_counter() - t0 - t_fit)
        store.close()
        parts = [k for k in best if k.startswith(("read (", "point", "bootstrap", "stability"))]
        best["the goal's parts: read + fit + intervals + stability"] = sum(best[k] for k in parts)
        best["lines"] = len(out.getvalue().splitlines())
    return best


class _console_to:
    """Route the CLI's console to `console` for the block."""

    def __init__(self, console) -> None:
        self.console = console

    def __enter__(self):
        import arena.cli as cli

        self.saved = cli.console
        cli.console = self.console

    def __exit__(self, *exc) -> None:
        import arena.cli as cli

        cli.console = self.saved


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--players", type=int, default=1000)
    p.add_argument("--results", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dir", type=Path, help="keep the league here (built when missing)")
    p.add_argument("--quick", action="store_true", help="200 players, 100,000 results")
    args = p.parse_args()
    if args.quick:
        args.players, args.results = 200, 100_000
    tmp = None
    directory = args.dir
    if directory is None:
        tmp = tempfile.TemporaryDirectory(prefix="arena-ratings-scale-")
        directory = Path(tmp.name) / "league"
    t_build = None
    if not (directory / "league.db").exists():
        t_build = build(directory, args.players, args.results, args.seed)
    times = time_ratings(directory, args.repeat)
    t_bare, _ = min((bare_fit(directory / "league.db") for _ in range(args.repeat)), key=lambda x: x[0])
    total = times["arena ratings"]
    goal = times["the goal's parts: read + fit + intervals + stability"]
    rows = [[k, f"{v:.2f} s"] for k, v in times.items() if k != "lines"]
    rows.append(["bare numpy/scipy point fit (read + count + L-BFGS)", f"{t_bare:.2f} s"])
    rows.append(["arena ratings / bare point fit", f"{total / t_bare:.2f}x"])
    print(f"{args.players:,} players, {args.results:,} results"
          + (f" (league built in {t_build:.0f} s)" if t_build else "") + f"; best of {args.repeat}:\n")
    print(markdown_table(["part", "seconds"], rows, {1}))
    print()
    print(f"_{_versions(('numpy', 'scipy'))}; {os.cpu_count()} CPUs; goal: read + fit + intervals < 5 s._")
    print(json.dumps({"players": args.players, "results": args.results, "seconds": times, "bare": t_bare,
                      "ratio": total / t_bare, "goal_met": goal < 5.0}))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
