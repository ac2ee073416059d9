"""Latency of the web API under concurrent clients: the leaderboard and match pages of a big league.

Why: the pages poll a running league, and a league grows to a thousand players and a million
matches; the leaderboard (cached per league version) and a page of the match list (keyset
paging on the commit order) must answer in well under 200 ms at the 99th percentile with 50
clients at once.

The server (`arena serve`) runs in a child process; the clients are threads of this process, each
with its own keep-alive connection on loopback. Per endpoint: median and p99 latency and the
requests a second over all clients.

With ``--writer``: the leaderboard while a league writes. The league is copied (or built) into a
temporary folder, served, and `arena league run` writes to that same folder in a third process
(loopback only, and for ``--seconds`` a phase): the clients load the leaderboard page (``/``, then
``/api/players``) for ``--seconds`` without the writer, then for ``--seconds`` with it. ``--code
DIR`` runs the server from another checkout's ``arena`` package (e.g. ``git archive COMMIT arena |
tar -x -C DIR``, the code before a change), so one command measures before and after on the same
league and machine.

Run:  .venv/bin/python benchmarks/bench_web.py --league DIR      # e.g. a league bench_scale.py --dir DIR kept
      .venv/bin/python benchmarks/bench_web.py --players 50 --matches 2000   # builds a small league first
      .venv/bin/python benchmarks/bench_web.py --writer --seconds 20 [--code /tmp/before]
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions as _versions  # noqa: E402

import argparse  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import sqlite3  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

GOAL_P99_MS = 200.0



def _timed_get(conn, path: str, port: int, timeout: float):
    """(answered 200, seconds, the connection to use next: a new one after a broken one) of one GET."""
    t0 = time.perf_counter()
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        ok = r.status == 200
    except OSError:
        ok = False
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    return ok, time.perf_counter() - t0, conn

def build_league(d: Path, players: int, matches: int) -> None:
    from arena.league.config import GameEntry, LeagueConfig, PlayerEntry
    from arena.league.manager import League

    cfg = LeagueConfig(games=[GameEntry("openspiel/tic_tac_toe-v0")], name="bench-web", matches=matches,
                       players=[PlayerEntry(f"p{i:04d}", "random" if i % 2 else "first") for i in range(players)],
                       pairing="uniform", in_flight=64, record="actions")
    league = League(cfg, d, backend="inline")
    league.run()
    league.close()  # its writer lock too: the writer process of --writer takes it next


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(port: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/api/league")
            if c.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the server did not come up")


def hammer(port: int, path: str, clients: int, requests: int) -> tuple[list[float], float, int]:
    """`requests` GETs of `path` spread over `clients` threads: (latencies in s, wall time, errors)."""
    lat: list[float] = []
    errors = [0]
    lock = threading.Lock()
    per = [requests // clients + (1 if i < requests % clients else 0) for i in range(clients)]
    start = threading.Barrier(clients + 1)

    def client(n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine = []
        start.wait()
        for _ in range(n):
            ok, seconds, conn = _timed_get(conn, path, port, 60)
            mine.append(seconds)
            if not ok:
                with lock:
                    errors[0] += 1
        with lock:
            lat.extend(mine)
        conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in per]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return lat, time.perf_counter() - t0, errors[0]


def hammer_for(port: int, paths: list[str], clients: int, seconds: float) -> tuple[dict, dict, float]:
    """`clients` threads each GET `paths` in turn (a page load) until `seconds` have passed:
    (latencies in s per path, errors per path, wall time)."""
    lat: dict[str, list[float]] = {p: [] for p in paths}
    errors = {p: 0 for p in paths}
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)
    deadline = [0.0]

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        mine: dict[str, list[float]] = {p: [] for p in paths}
        bad = {p: 0 for p in paths}
        start.wait()
        while time.perf_counter() < deadline[0]:
            for path in paths:
                ok, seconds, conn = _timed_get(conn, path, port, 120)
                mine[path].append(seconds)
                bad[path] += not ok
        with lock:
            for p in paths:
                lat[p].extend(mine[p])
                errors[p] += bad[p]
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    deadline[0] = time.perf_counter() + seconds
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return lat, errors, time.perf_counter() - t0


def results_in(d: Path) -> int:
    db = sqlite3.connect(f"file:{d / 'league.db'}?mode=ro", uri=True, timeout=60)
    try:
        return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    finally:
        db.close()


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, wait: float = 30.0) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(wait)


def writer_main(args) -> None:
    """The leaderboard page under `args.clients` clients, without and then with a league writing."""
    tmp = tempfile.TemporaryDirectory()
    d = Path(tmp.name) / "league"
    if args.league is not None:
        shutil.copytree(args.league, d)  # the writer adds matches: never to the league given
    else:
        t0 = time.perf_counter()
        build_league(d, args.players, args.matches)
        print(f"built a league of {args.players} players, {args.matches} matches in {time.perf_counter() - t0:.1f}s")
    db = sqlite3.connect(f"file:{d / 'league.db'}?mode=ro", uri=True)
    (cfg_json,) = db.execute("SELECT value FROM meta WHERE key='config'").fetchone()
    n_players = db.execute("SELECT COUNT(*) FROM players").fetchone()[0]
    db.close()
    cfg = json.loads(cfg_json)
    cfg["matches"] = results_in(d) + 10_000_000  # writes until it is stopped
    cfg["workers"] = args.writer_workers
    config = Path(tmp.name) / "writer.yaml"
    config.write_text(json.dumps(cfg))  # JSON is YAML
    n_results = results_in(d)
    port = free_port()
    code = args.code.resolve() if args.code is not None else Path(__file__).resolve().parents[1]
    env = dict(_os.environ, COLUMNS="200", PYTHONPATH=str(code))
    server = subprocess.Popen([sys.executable, "-m", "arena.cli", "serve", str(d), "--port", str(port)], env=env,
                              cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    writer = None
    paths = ["/", "/api/players"]
    names = {"/": "leaderboard page (/)", "/api/players": "/api/players"}
    rows, figures = [], []
    try:
        wait_up(port, server)
        for path in paths:  # warm: the first table computed
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            c.request("GET", path)
            c.getresponse().read()
            c.close()
        for phase in ("no writer", "league writing"):
            commits = 0
            if phase == "league writing":
                writer = subprocess.Popen([sys.executable, "-m", "arena.cli", "league", "run", str(config), "--dir",
                                           str(d)], env=dict(_os.environ, COLUMNS="200"), stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True)
                deadline = time.monotonic() + 120
                while results_in(d) == n_results:  # it writes before the clients start
                    if writer.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"the league writer did not start: {writer.stderr.read()[-2000:]}")
                    time.sleep(0.2)
            before = results_in(d)
            lat, errors, wall = hammer_for(port, paths, args.clients, args.seconds)
            commits = results_in(d) - before
            for path in paths:
                xs = lat[path]
                med, tail = statistics.median(xs) * 1e3, p99(xs) * 1e3
                figures.append({"phase": phase, "endpoint": path, "requests": len(xs), "errors": errors[path],
                                "median_ms": med, "p99_ms": tail, "max_ms": max(xs) * 1e3, "rps": len(xs) / wall,
                                "commits_per_s": commits / wall})
                rows.append([phase, names[path], f"{len(xs)}", f"{errors[path]}", f"{med:.1f}", f"{tail:.1f}",
                             f"{max(xs) * 1e3:.0f}", f"{len(xs) / wall:.0f}", f"{commits / wall:.0f}",
                             "yes" if tail < GOAL_P99_MS else "no"])
    finally:
        if writer is not None:
            stop(writer, signal.SIGINT)
        stop(server)
        tmp.cleanup()
    print()
    print(f"League: {n_players} players, {n_results} results at the start; {args.clients} concurrent clients (threads "
          f"of a second process, keep-alive, loopback), each loading / then /api/players for {args.seconds:g}s a "
          f"phase; the writer: `arena league run` with {args.writer_workers} worker(s) on the same folder; server "
          f"code: {code}.")
    print()
    print(markdown_table(["phase", "endpoint", "requests", "errors", "median (ms)", "p99 (ms)", "max (ms)", "req/s",
                          "commits/s", f"p99 < {GOAL_P99_MS:.0f} ms"], rows, {2, 3, 4, 5, 6, 7, 8}))
    print()
    print(_versions(("fastapi", "uvicorn", "starlette")))
    if args.json:
        args.json.write_text(json.dumps({"players": n_players, "results": n_results, "clients": args.clients,
                                         "seconds": args.seconds, "code": str(code), "figures": figures}, indent=2))


def p99(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--league", type=Path, help="an existing league folder (default: build one)")
    ap.add_argument("--players", type=int, default=50, help="players of the league built (without --league)")
    ap.add_argument("--matches", type=int, default=2000, help="matches of the league built (without --league)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=2000, help="requests per endpoint")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--writer", action="store_true", help="the leaderboard page without, then with, a league writing "
                    "to the same folder (`arena league run` in a third process)")
    ap.add_argument("--seconds", type=float, default=20.0, help="with --writer: seconds of each phase")
    ap.add_argument("--writer-workers", type=int, default=1, help="with --writer: the writer's worker processes")
    ap.add_argument("--code", type=Path, help="with --writer: run the server from this folder's arena package")
    args = ap.parse_args()
    if args.writer:
        return writer_main(args)
    tmp = None
    d = args.league
    if d is None:
        tmp = tempfile.TemporaryDirectory()
        d = Path(tmp.name) / "league"
        t0 = time.perf_counter()
        build_league(d, args.players, args.matches)
        print(f"built a league of {args.players} players, {args.matches} matches in {time.perf_counter() - t0:.1f}s")
    db = sqlite3.connect(f"file:{d / 'league.db'}?mode=ro", uri=True)
    n_players = db.execute("SELECT COUNT(*) FROM players").fetchone()[0]
    n_results, last = db.execute("SELECT COUNT(*), MAX(commit_seq) FROM results").fetchone()
    mid_id, mid_seq = db.execute("SELECT match_id, commit_seq FROM results WHERE commit_seq >= ? ORDER BY commit_seq "
                                 "LIMIT 1", (last // 2,)).fetchone()
    some_player = db.execute("SELECT json_extract(players, '$[0]') FROM results WHERE commit_seq=?",
                             (mid_seq,)).fetchone()[0]
    db.close()
    port = free_port()
    env = dict(_os.environ, COLUMNS="200")
    proc = subprocess.Popen([sys.executable, "-m", "arena.cli", "serve", str(d), "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.perf_counter()
        wait_up(port, proc)
        endpoints = [
            ("leaderboard", "/api/players"),
            ("match page (newest)", "/api/matches?limit=50"),
            ("match page (middle)", f"/api/matches?limit=50&before={mid_seq}"),
            ("match page (a player)", f"/api/matches?limit=50&player={some_player}"),
            ("one match", f"/api/matches/{mid_id}"),
        ]
        cold = {}
        for name, path in endpoints:  # the first request of each (a cold cache)
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            t1 = time.perf_counter()
            c.request("GET", path)
            c.getresponse().read()
            cold[name] = time.perf_counter() - t1
            c.close()
        print(f"server up and warm in {time.perf_counter() - t0:.1f}s")
        rows, figures = [], []
        for name, path in endpoints:
            lat, wall, errors = hammer(port, path, args.clients, args.requests)
            med, tail = statistics.median(lat) * 1e3, p99(lat) * 1e3
            figures.append({"endpoint": name, "path": path, "requests": len(lat), "errors": errors,
                            "median_ms": med, "p99_ms": tail, "rps": len(lat) / wall, "cold_ms": cold[name] * 1e3})
            rows.append([name, f"{len(lat)}", f"{errors}", f"{cold[name] * 1e3:.1f}", f"{med:.1f}", f"{tail:.1f}",
                         f"{len(lat) / wall:.0f}", "yes" if tail < GOAL_P99_MS else "no"])
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        if tmp is not None:
            tmp.cleanup()
    print()
    print(f"League: {n_players} players, {n_results} results; {args.clients} concurrent clients (threads of a "
          f"second process, keep-alive, loopback); {args.requests} requests per endpoint.")
    print()
    print(markdown_table(["endpoint", "requests", "errors", "first (ms)", "median (ms)", "p99 (ms)", "req/s",
                          f"p99 < {GOAL_P99_MS:.0f} ms"], rows, {1, 2, 3, 4, 5, 6}))
    print()
    print(_versions(("fastapi", "uvicorn", "starlette")))
    if args.json:
        args.json.write_text(json.dumps({"players": n_players, "results": n_results, "clients": args.clients,
                                         "endpoints": figures}, indent=2))


if __name__ == "__main__":
    main()
