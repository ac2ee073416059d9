"""Soak: a league killed with SIGKILL at random moments, resumed each time, must lose nothing.

``arena league run`` (the real command, worker processes and all) plays ``--matches`` cheap
matches (random and first on tic-tac-toe, 8 players); it is killed with SIGKILL a random 0-2 s
after it has committed its first new match, ``--kills`` times, and started again each time with
the same command; the last start runs to the end. Then, on the league folder:

* the result count equals the budget, with no match id twice;
* every result has its replay (in the league's database, or its file with ``--replays files``),
  and the replay's returns are the result's;
* the live Elo and OpenSkill ratings equal a recompute from the result log to the last bit;
* SQLite's ``integrity_check`` says ok.

(That no process of a killed run is left is tests/league/test_processes.py's check.)

Run:  .venv/bin/python benchmarks/soak_league.py [--matches 100000] [--kills 20] [--seed 0] [--replays files]
(tests/league/test_soak.py runs it, marked slow.)
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

from arena.replays.format import LEAGUE_DB

PLAYERS = ["random", "first"] * 4

CONFIG = """name: soak
seed: {seed}
games: [{{id: openspiel/tic_tac_toe-v0}}]
players:
{players}
matches: {matches}
pairing: uniform
replays: {replays}
workers: 2
in_flight: 16
"""


def _arena() -> list[str]:
    return [sys.executable, "-m", "arena.cli"]


def _committed(league: Path) -> int:
    """Results committed so far, read without disturbing the running league (0 before its database exists)."""
    db = league / LEAGUE_DB
    if not db.exists():
        return 0
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)) as conn:
            return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.Error:  # the schema not made yet, or the database busy this instant
        return 0


def soak(directory: Path, matches: int = 100_000, kills: int = 20, seed: int = 0, log=print,
         replays: str = "database") -> dict:
    from arena.league.manager import open_league
    from arena.league.queries import recompute_rows
    from arena.errors import ReplayError

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cfg = directory / "soak.yaml"
    players = "\n".join(f"  - {{name: p{i}, agent: {a}}}" for i, a in enumerate(PLAYERS))
    cfg.write_text(CONFIG.format(seed=seed, players=players, matches=matches, replays=replays))
    league = directory / "league"
    rng = random.Random(seed)
    env = dict(os.environ, COLUMNS="120")
    started = time.perf_counter()
    counts = []
    killed = 0
    for k in range(kills + 1):
        p = subprocess.Popen([*_arena(), "league", "run", str(cfg), "--dir", str(league)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if k < kills:
            # A random moment once the run is playing: after its first new commit (start-up is a few
            # seconds of imports, longer on a loaded machine), then 0-2 s more, so every kill lands
            # among matches being played and committed rather than in the imports.
            before = counts[-1] if counts else 0
            t0 = time.time()
            while p.poll() is None and time.time() - t0 < 120 and _committed(league) <= before:
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 2.0))
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                killed += 1
            p.wait()
        else:
            _, err = p.communicate(timeout=3600)
            if p.returncode != 0:
                raise RuntimeError(f"the last run failed ({p.returncode}): {err[-2000:]}")
        store = open_league(league)
        counts.append(store.result_count("league"))
        store.close()
        log(f"run {k + 1}/{kills + 1}: {'killed' if k < kills else 'finished'} at {counts[-1]:,} results")
    seconds = time.perf_counter() - started

    store = open_league(league)
    results = store.results()
    ids = [r.match_id for r in results]
    missing_replay = bad_replay = 0
    for r in results:
        try:
            replay = store.read_replay(r.match_id)
        except ReplayError:
            missing_replay += 1
            continue
        if replay.result["returns"] != r.returns:
            bad_replay += 1
    rows = recompute_rows(store)
    store.close()
    with closing(sqlite3.connect(league / LEAGUE_DB)) as conn:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    return {
        "matches": matches, "kills": kills, "seconds": seconds, "results": len(results),
        "league_results": counts[-1], "duplicates": len(ids) - len(set(ids)), "missing_replays": missing_replay,
        "replays_disagreeing": bad_replay, "ratings": len(rows), "ratings_equal": all(r.equal for r in rows),
        "integrity": integrity, "counts_after_each_run": counts, "killed_while_running": killed,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--matches", type=int, default=100_000)
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dir", type=Path, help="league folder (default: a temporary one)")
    p.add_argument("--replays", choices=("database", "files"), default="database", help="where the league keeps replays")
    args = p.parse_args()
    d = args.dir or Path(tempfile.mkdtemp(prefix="arena-soak-"))
    out = soak(d, args.matches, args.kills, args.seed, replays=args.replays)
    print(f"\nreplays kept in: {args.replays}\n")
    print("| measure | value |\n|---|---:|")
    for k in ("matches", "kills", "results", "duplicates", "missing_replays", "replays_disagreeing", "ratings",
              "ratings_equal", "integrity"):
        print(f"| {k.replace('_', ' ')} | {out[k]} |")
    print(f"| wall time | {out['seconds']:.0f} s |")
    print(f"\nresults after each run: {', '.join(f'{c:,}' for c in out['counts_after_each_run'])}")


if __name__ == "__main__":
    main()
