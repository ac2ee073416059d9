"""A league at scale, by simulation: thousands of players, up to a million matches.

Why: a league grows to thousands of players (every snapshot is a player) and millions of
matches. Its per-match bookkeeping (pairing, the match queue, the replay, the commit with
Elo, OpenSkill and payoff) must stay flat as it grows, and the views (ratings, status,
recompute, alpha-rank) must stay usable. Cheap agents (random and first on tic-tac-toe) make
the bookkeeping dominate. In one process run, this script measures:

1. A league of ``--players`` players (half random, half first) run inline to ``--matches``
   results in ``--chunks`` chunks: matches/s per chunk (flat, not decaying), the group-commit
   latency per batch (median and p99), the SQLite size at the end.
2. Pairing cost per match against the number of players (10, 100, 1,000 by default).
3. On the final league: `arena ratings` and `arena league status` as rendered (to a null
   console), `ratings --recompute` (every rating rebuilt from the result log), and the restart
   after a kill -9 (a last chunk run in a child process killed mid-run; then the time of
   opening the league and recovering the matches it left running).
4. alpha-rank time against the number of players (10 to 1,000 by default) on random payoffs,
   and what the payoff view does at the largest size (it caps at the top players by Elo).

Run:  .venv/bin/python benchmarks/bench_scale.py [--players 1000] [--matches 1000000] [--chunks 20]
      .venv/bin/python benchmarks/bench_scale.py --quick          # a smoke run, about a minute
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions as _versions  # noqa: E402

import argparse  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402

from arena.league.config import GameEntry, LeagueConfig, PlayerEntry  # noqa: E402
from arena.league.manager import League  # noqa: E402

GAME = "openspiel/tic_tac_toe-v0"


def config(players: int, matches: int, pairing: str = "uniform") -> LeagueConfig:
    return LeagueConfig(name=f"scale-{players}", seed=0, games=[GameEntry(GAME)], matches=matches,
                        players=[PlayerEntry(f"p{i:04d}", "random" if i % 2 == 0 else "first") for i in range(players)],
                        pairing=pairing, backend="inline", workers=1, in_flight=16)


def _db_size(d: Path) -> int:
    return sum((d / f).stat().st_size for f in ("league.db", "league.db-wal") if (d / f).exists())


def _dir_size(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def run_league(d: Path, players: int, matches: int, chunks: int, console: Console) -> dict:
    league = League(config(players, matches), d, backend="inline")
    latencies: list[tuple[float, int]] = []  # (seconds, matches) per group commit
    original = league.commit_many

    def timed(items):
        t0 = time.perf_counter()
        out = original(items)
        latencies.append((time.perf_counter() - t0, len(items)))
        return out

    league.commit_many = timed
    rates = []
    step = max(1, matches // chunks)
    done = league.store.result_count("league")
    start = time.perf_counter()
    while done < matches:
        target = min(matches, done + step)
        t0 = time.perf_counter()
        league.run(matches=target)
        dt = time.perf_counter() - t0
        rates.append((target, (target - done) / dt))
        done = target
        console.print(f"  {target:>9,} matches  {rates[-1][1]:8.0f} matches/s  db {_db_size(d) / 2**20:7.1f} MiB")
    total = time.perf_counter() - start
    league.store.close()
    per_batch = sorted(s for s, _ in latencies)
    per_match = [s / n for s, n in latencies if n]
    return {"rates": rates, "seconds": total, "batch_median_ms": 1e3 * statistics.median(per_batch),
            "batch_p99_ms": 1e3 * per_batch[int(0.99 * (len(per_batch) - 1))],
            "batch_size": statistics.mean(n for _, n in latencies),
            "match_median_ms": 1e3 * statistics.median(per_match), "db": _db_size(d), "folder": _dir_size(d)}


def pairing_cost(root: Path, sizes: list[int], calls: int) -> list[tuple[int, float]]:
    out = []
    for n in sizes:
        d = root / f"pair-{n}"
        league = League(config(n, 0), d, backend="inline")
        league.next_pairing()  # builds the pairing view once
        t0 = time.perf_counter()
        for _ in range(calls):
            league.next_pairing()
        out.append((n, (time.perf_counter() - t0) / calls))
        league.store.close()
        shutil.rmtree(d, ignore_errors=True)
    return out


def views(d: Path) -> dict[str, float]:
    from arena.league.manager import open_league
    from arena.league.queries import recompute_rows
    from arena.ui.views import payoff_view, ratings_per_game_views, ratings_view, status_view

    null = Console(file=io.StringIO(), width=200)
    out = {}
    store = open_league(d)
    t0 = time.perf_counter()
    null.print(ratings_view(store))
    for v in ratings_per_game_views(store):
        null.print(v)
    out["arena ratings"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    null.print(status_view(store))
    out["arena league status"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    null.print(payoff_view(store))
    out["arena ratings --payoff (top 50 by Elo)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    rows = recompute_rows(store)
    out["arena ratings --recompute"] = time.perf_counter() - t0
    out["_recompute_equal"] = float(all(r.equal for r in rows))
    store.close()
    return out


KILLED_CHUNK = """
import sys
from bench_scale import config
from arena.league.manager import League
League(config(int(sys.argv[2]), int(sys.argv[3])), sys.argv[1], backend="inline").run()
"""


def kill_and_restart(d: Path, players: int, more: int) -> dict[str, float]:
    """Run `more` matches in a child, kill -9 it mid-run, then time the restart (open + recover)."""
    from arena.league.manager import open_league

    store = open_league(d)
    start = store.result_count("league")
    store.close()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, "-c", KILLED_CHUNK, str(d), str(players), str(start + more)], env=env)
    deadline = time.time() + 600
    while time.time() < deadline and p.poll() is None:
        time.sleep(0.1)
        s = open_league(d)
        n = s.result_count("league")
        s.close()
        if n > start + more // 4:
            break
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    t0 = time.perf_counter()
    league = League(config(players, start + more), d, backend="inline")
    opened = time.perf_counter() - t0
    t0 = time.perf_counter()
    rec = league.recover()
    recovered = time.perf_counter() - t0
    league.store.close()
    return {"open": opened, "recover": recovered, **{k: float(v) for k, v in rec.items()}}


def alpharank_cost(sizes: list[int]) -> list[tuple[int, float]]:
    from arena.league.ratings import alpharank

    rng = np.random.default_rng(0)
    out = []
    for n in sizes:
        m = rng.uniform(0, 1, (n, n))
        m = (m + (1 - m.T)) / 2  # a consistent win-rate matrix: m[i, j] + m[j, i] = 1
        np.fill_diagonal(m, 0.5)
        t0 = time.perf_counter()
        alpharank(m)
        out.append((n, time.perf_counter() - t0))
        if out[-1][1] > 120:
            break  # larger sizes only take longer
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--players", type=int, default=1000)
    p.add_argument("--matches", type=int, default=1_000_000)
    p.add_argument("--chunks", type=int, default=20)
    p.add_argument("--pairing-sizes", type=int, nargs="*", default=[10, 100, 1000])
    p.add_argument("--alpharank-sizes", type=int, nargs="*", default=[10, 30, 100, 300, 1000])
    p.add_argument("--quick", action="store_true", help="100 players, 20,000 matches")
    p.add_argument("--dir", type=Path, help="keep the league here (default: a temporary folder, removed)")
    args = p.parse_args()
    if args.quick:
        args.players, args.matches, args.chunks = 100, 20_000, 5
        args.alpharank_sizes = [10, 30, 100]
    console = Console()
    root = Path(tempfile.mkdtemp(prefix="arena-scale-"))
    d = args.dir or root / "league"
    try:
        console.print(f"[bold]1. A league of {args.players:,} players to {args.matches:,} matches[/] (inline, "
                      f"random/first on {GAME})")
        run = run_league(d, args.players, args.matches, args.chunks, console)
        console.print("[bold]2. Pairing cost per match[/]")
        pairing = pairing_cost(root, args.pairing_sizes, 5000)
        console.print("[bold]3. Views and restart on the final league[/]")
        v = views(d)
        restart = kill_and_restart(d, args.players, max(20_000, args.matches // 50))
        console.print("[bold]4. alpha-rank[/]")
        ar = alpharank_cost(args.alpharank_sizes)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)

    rates = [r for _, r in run["rates"]]
    print()
    print(markdown_table(["matches reached", "matches/s in the chunk"],
                         [[f"{n:,}", f"{r:,.0f}"] for n, r in run["rates"]], {0, 1}))
    print()
    first, last = statistics.mean(rates[: max(1, len(rates) // 5)]), statistics.mean(rates[-max(1, len(rates) // 5):])
    rows = [
        ["players / matches", f"{args.players:,} / {args.matches:,}"],
        ["wall time", f"{run['seconds']:,.0f} s ({args.matches / run['seconds']:,.0f} matches/s overall)"],
        ["matches/s, first fifth -> last fifth", f"{first:,.0f} -> {last:,.0f} ({last / first:.2f}x)"],
        ["group commit a batch: median / p99", f"{run['batch_median_ms']:.2f} / {run['batch_p99_ms']:.2f} ms "
                                               f"(mean batch {run['batch_size']:.1f} matches)"],
        ["group commit per match (median)", f"{run['match_median_ms']:.3f} ms"],
        ["SQLite size (db + wal)", f"{run['db'] / 2**20:,.1f} MiB ({run['db'] / args.matches:,.0f} B/match)"],
        ["league folder (db + replays)", f"{run['folder'] / 2**20:,.1f} MiB"],
    ]
    rows += [[f"next_pairing, {n:,} players", f"{1e6 * s:,.1f} us"] for n, s in pairing]
    rows += [[k, f"{s:,.2f} s"] for k, s in v.items() if not k.startswith("_")]
    rows += [["recompute equals the live ratings", "yes" if v["_recompute_equal"] else "NO"]]
    rows += [["restart after kill -9: open the league", f"{restart['open']:.2f} s"],
             ["restart after kill -9: recover in-flight matches",
              f"{restart['recover']:.2f} s ({restart['committed_from_replay']:.0f} from replays, "
              f"{restart['requeued']:.0f} re-queued)"]]
    rows += [[f"alpha-rank, {n:,} players", f"{s:,.2f} s"] for n, s in ar]
    print(markdown_table(["measure", "value"], rows, {1}))
    print()
    print(f"_{_versions(('arena', 'open_spiel', 'openskill'))}; {os.cpu_count()} CPUs; pairing: uniform; "
          f"in_flight 16; chunks {args.chunks}._")


if __name__ == "__main__":
    main()
