"""Where a league keeps its replays: files with group commit, or compressed blobs in SQLite.

Why: the league's per-match bookkeeping was dominated by the replay file (creation, two fsyncs)
and one commit a match. Two designs keep the exactly-once guarantee (a result is never committed
without its replay):

* **blobs in SQLite** (what the league does by default, ``replays: database``): each replay gzipped
  into a ``replays`` table row in the same transaction as its result (atomic by construction, no
  files);
* **files, group commit** (``replays: files``): each replay written atomically without fsync,
  then one ``syncfs`` for the batch, then one transaction for the batch's results and ratings.

Also shown for reference: the old path (each file fsynced twice, one transaction a match).
The same pre-played matches (random vs first at tic-tac-toe, actions-only replays) go through
each design into a fresh league store; only the storage work is timed; designs interleaved,
best of ``--rounds`` kept.

Run:  .venv/bin/python benchmarks/bench_replay_store.py [--matches 4000] [--batch 16] [--rounds 3]
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions as _versions  # noqa: E402

import argparse  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from arena.fsio import sync_folder  # noqa: E402
from arena.league.storage import LeagueStore  # noqa: E402
from arena.match.loop import play_match  # noqa: E402
from arena.replays.format import replay_bytes, replay_path, write_replay  # noqa: E402

GAME = "openspiel/tic_tac_toe-v0"


def _store(d: Path, results) -> tuple[LeagueStore, list]:
    store = LeagueStore(d)
    for name, spec in (("a", "random"), ("b", "first")):
        store.add_player(name, "fixed", spec, [GAME])
    rows = []
    with store.tx():
        for i, _ in enumerate(results):
            rows.append(store.enqueue(GAME, ["a", "b"] if i % 2 == 0 else ["b", "a"], ["random", "first"], seed=i,
                                      status="running"))
    return store, rows


def files_group_commit(d, results, batch):
    store, rows = _store(d, results)
    t0 = time.perf_counter()
    for i in range(0, len(results), batch):
        items = []
        for row, res in zip(rows[i:i + batch], results[i:i + batch]):
            res.replay_path = str(write_replay(res.replay, replay_path(store.replay_dir, row.match_id), durable=False))
            items.append((row.match_id, res))
        sync_folder(store.replay_dir)
        store.commit_results(items)
    dt = time.perf_counter() - t0
    store.close()
    return dt


def files_per_match(d, results, batch):
    store, rows = _store(d, results)
    t0 = time.perf_counter()
    for row, res in zip(rows, results):
        res.replay_path = str(write_replay(res.replay, replay_path(store.replay_dir, row.match_id)))
        store.commit_result(row.match_id, res)
    dt = time.perf_counter() - t0
    store.close()
    return dt


def blobs(d, results, batch):
    """What the league does by default (replays: database): the gzipped bytes on the result (a worker's
    work in a league: timed here too), kept by the commit in the same transaction."""
    store, rows = _store(d, results)
    t0 = time.perf_counter()
    for i in range(0, len(results), batch):
        items = []
        for row, res in zip(rows[i:i + batch], results[i:i + batch]):
            res.replay_blob = replay_bytes(res.replay)
            items.append((row.match_id, res))
        store.commit_results(items)
    dt = time.perf_counter() - t0
    store.close()
    for res in results:
        res.replay_blob = res.replay_path = None
    return dt


DESIGNS = [("files, group commit (syncfs + one transaction a batch)", files_group_commit),
           ("in the league database (one transaction a batch; the default)", blobs),
           ("files, each fsynced twice, one transaction a match (before)", files_per_match)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--matches", type=int, default=4000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    results = [play_match(GAME, ["random", "first"], seed=i, match_id=f"x{i}", record="actions")
               for i in range(args.matches)]
    root = Path(tempfile.mkdtemp(prefix="arena-replay-store-"))
    best: dict[str, float] = {}
    sizes: dict[str, int] = {}
    try:
        for r in range(args.rounds):
            for name, fn in DESIGNS:
                d = root / f"{r}-{fn.__name__}"
                dt = fn(d, results, args.batch)
                best[name] = min(best.get(name, dt), dt)
                sizes[name] = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
                shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = [[name, f"{1e3 * best[name] / args.matches:.3f}", f"{args.matches / best[name]:,.0f}",
             f"{sizes[name] / args.matches:,.0f}"] for name, _ in DESIGNS]
    print(markdown_table(["design", "ms a match", "matches/s", "bytes on disk a match"], rows, {1, 2, 3}))
    base = best[DESIGNS[0][0]]
    print()
    print(f"database / files with group commit (time): {best[DESIGNS[1][0]] / base:.2f}x; "
          f"before / files with group commit: {best[DESIGNS[2][0]] / base:.2f}x")
    print(f"\n_{_versions(('arena', 'open_spiel'))}; {args.matches} matches, batches of {args.batch}, "
          f"best of {args.rounds} interleaved rounds._")


if __name__ == "__main__":
    main()
