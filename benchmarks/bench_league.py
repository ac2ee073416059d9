"""Benchmark: league throughput against a bare match loop, process pool scaling, Ray, rating updates.

Why: the league wraps every match in bookkeeping (pairing, the match queue in
SQLite, an atomic replay write, one commit transaction with Elo, OpenSkill and
payoff updates).  That overhead must stay small next to the matches
themselves, and the process pool must scale with cores.  This script measures,
in one process, side by side:

1. ``League(...).run()`` with the ``inline`` backend (single process: pairing
   + play + replay write + commit + ratings) against a bare ``play_match``
   loop over exactly the same matches (same game, agent specs by seat and
   seed, taken from the league's own match table after its run), with cores
   and agents built once, ``record=True`` and no disk writes.  Both sides are
   warmed first (a short throw-away league fills the per-process core/agent
   caches and the CFR policy cache).  The bare loop replays the league's
   matches exactly, which the script checks (same returns and move counts).
   Goal: league / bare >= 0.8 matches/s.
2. The same league config with the ``local`` process pool, ``workers=2`` vs
   ``workers=1`` (fresh league folders, the forkserver started beforehand by a
   short warm-up).  Pool start-up (worker processes, their agent caches, the
   CFR policy per worker) is inside the timed run and amortised by the match
   count.  The two runs are interleaved over ``--pool-rounds`` rounds and the
   best of each is kept; the share of the machine's CPUs busy during each run
   is reported, since on a shared 2-core machine any other process eats
   directly into the 2-worker run.  Goal: 2 workers / 1 worker >= 1.8.
3. Ray (``workers=2``, ``num_cpus=2``) against the process pool with 2
   workers, same config.  ``ray.init`` is called (and timed) before the league
   so its start-up is reported separately; the Ray rate is reported run-only
   and including ``ray.init``.  Goal (run only) >= 0.9.  ``ray.shutdown()`` afterwards.
4. Rating updates/s: ``OpenSkillTable.update`` against openskill's own
   ``model.rate`` on one fixed two-player sequence (the sequence and the
   best-of timing helper come from ``benchmarks/bench_ratings.py``, which has
   no reusable measurement function).  Goal >= 0.9.

Workloads: the games and players of ``configs/leagues/quickstart.yaml`` (round
robin of random, first, mcts and cfr on three games) with cheaper or heavier
MCTS: ``--mcts-sims`` (default 50) for the inline comparison, where matches
are cheap and the league's per-match overhead shows; ``--pool-mcts-sims``
(default 800, mean match ~15-20 ms) for the pool and Ray runs, so the workers
have real work.  League folders live under one ``tempfile.mkdtemp`` folder,
removed at the end.

Run:  .venv/bin/python benchmarks/bench_league.py [--quick] [--skip-ray]
      .venv/bin/python benchmarks/bench_league.py --profile   # where the inline league spends its time
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions as _versions  # noqa: E402

import argparse
import cProfile
import functools
import gc
import os
import platform
import pstats
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from arena.agents.base import derive_seed
from arena.agents.specs import make_agent
from arena.envs.registry import make_core
from arena.league.config import LeagueConfig, load_league_config
from arena.league.manager import League
from arena.match import InvalidMovePolicy, play_match

_perf = time.perf_counter
ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "configs" / "leagues" / "quickstart.yaml"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ratings import best_rate, make_sequence  # noqa: E402  (the same sequence and timing helper)

# -- configuration -----------------------------------------------------------------------
def league_config(mcts_sims: int, workers: int = 1) -> LeagueConfig:
    """The quickstart league (games, players, round robin, settings) with MCTS at `mcts_sims` simulations."""
    cfg = load_league_config(QUICKSTART, workers=workers)
    for p in cfg.players:
        if p.agent.split(":", 1)[0] == "mcts":
            p.agent = f"mcts:simulations={mcts_sims}"
    return cfg


@dataclass
class Run:
    key: str
    label: str
    matches: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.matches / self.seconds if self.seconds > 0 else 0.0


def cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of the whole machine from /proc/stat (Linux), else None."""
    try:
        with open("/proc/stat") as f:
            vals = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    total = sum(vals[:8])
    return total - idle, total


def busy_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of all CPUs busy (any process) between two cpu_times() samples."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def fresh_dir(root: Path, name: str) -> Path:
    d = root / name
    if d.exists():
        shutil.rmtree(d)
    return d


def run_league(cfg: LeagueConfig, directory: Path, backend: str, matches: int) -> tuple[League, dict]:
    league = League(cfg, directory, backend=backend)
    gc.collect()
    summary = league.run(matches=matches)
    if summary["new"] != matches or summary["failures"]:
        raise SystemExit(f"league run ({backend}) in {directory}: {summary}")
    return league, summary


# -- 1. inline league vs bare play_match loop ---------------------------------------------------
class BareLoop:
    """play_match over given matches: cores/agents built once (outside the timing), record=True, no disk."""

    def __init__(self, cfg: LeagueConfig):
        self.kwargs = {g.id: dict(g.kwargs) for g in cfg.games}
        self.policy = InvalidMovePolicy(allowance=cfg.invalid_allowance)
        self.limit = cfg.move_time_limit
        self.cores: dict[str, Any] = {}
        self.agents: dict[tuple[str, str, int], Any] = {}

    def prepare(self, pairings: list[tuple[str, str, list[str], int]]) -> list[tuple]:
        for _mid, game, specs, _seed in pairings:
            if game not in self.cores:
                self.cores[game] = make_core(game, **self.kwargs[game])
            for seat, spec in enumerate(specs):
                if (game, spec, seat) not in self.agents:
                    self.agents[(game, spec, seat)] = make_agent(spec, self.cores[game], derive_seed(0, seat))
        return [(mid, self.cores[game], [self.agents[(game, sp, k)] for k, sp in enumerate(specs)], seed,
                 self.kwargs[game] or None) for mid, game, specs, seed in pairings]

    def play(self, jobs: list[tuple], out: dict) -> float:
        policy, limit = self.policy, self.limit
        t0 = _perf()
        for mid, core, seated, seed, gkw in jobs:
            res = play_match(core, seated, seed=seed, match_id=mid, policy=policy, move_time_limit=limit,
                             record=True, game_kwargs=gkw)
            out[mid] = (res.returns, res.moves)
        return _perf() - t0


def bench_inline(args, root: Path, console: Console) -> tuple[list[Run], dict]:
    """League and bare loop in interleaved chunks over the same matches, so load bursts from other processes
    hit both sides alike; the rates are totals over all chunks."""
    cfg = league_config(args.mcts_sims)
    cycle = 14  # quickstart round robin: 7 pairs x 2 seatings
    # Warm-up: fills this process's game-core/agent caches (run_job) and the CFR policy cache.
    run_league(cfg, fresh_dir(root, "warm-inline"), "inline", 2 * cycle)
    league = League(cfg, fresh_dir(root, "inline"), backend="inline")
    bare = BareLoop(cfg)
    n, chunks = args.inline_matches, max(1, args.inline_chunks)
    league_s = bare_s = 0.0
    busy = {"league": [0, 0], "bare": [0, 0]}
    seen: set[str] = set()
    bare_out: dict[str, tuple[list[float], int]] = {}
    chunk_ratios = []
    for k in range(1, chunks + 1):
        target = round(n * k / chunks)
        gc.collect()
        c0 = cpu_times()
        summary = league.run(matches=target)
        c1 = cpu_times()
        if summary["failures"] or summary["results"] != target:
            raise SystemExit(f"inline league run: {summary}")
        rows = [m for m in league.store.matches(status="done", source="league") if m.match_id not in seen]
        seen.update(m.match_id for m in rows)
        jobs = bare.prepare([(m.match_id, m.game, m.specs, m.seed) for m in rows])
        gc.collect()
        c2 = cpu_times()
        secs = bare.play(jobs, bare_out)
        c3 = cpu_times()
        league_s += summary["seconds"]
        bare_s += secs
        chunk_ratios.append((summary["new"] / summary["seconds"]) / (len(jobs) / secs))
        for key, a, b in (("league", c0, c1), ("bare", c2, c3)):
            if a is not None and b is not None:
                busy[key][0] += b[0] - a[0]
                busy[key][1] += b[1] - a[1]
    results = {r.match_id: (r.returns, r.moves) for r in league.store.results()}
    league.store.close()
    same = sum(1 for mid, rm in bare_out.items() if results.get(mid) == rm)
    console.print(f"[dim]1. inline league: {n} matches in {league_s:.2f} s; bare loop {len(bare_out)} matches in "
                  f"{bare_s:.2f} s ({chunks} interleaved chunks); identical results {same}/{len(bare_out)}[/dim]")
    if same != len(bare_out) or len(bare_out) != n:
        console.print(f"[yellow]warning: the bare loop reproduced {same} of {n} league results[/yellow]")
    sims = f"mcts {args.mcts_sims} sims"
    share = {key: (b / t if t else None) for key, (b, t) in busy.items()}
    chunk_ratios.sort()
    return [
        Run("league_inline", f"League.run, backend=inline ({sims})", n, league_s, {"busy": share["league"]}),
        Run("bare", f"bare play_match loop, record=True, no disk ({sims})", len(bare_out), bare_s,
            {"busy": share["bare"]}),
    ], {"identical": f"{same}/{len(bare_out)}", "chunk_ratios": chunk_ratios}


# -- 2. + 3. process pool and Ray -----------------------------------------------------------------
def bench_pool(args, root: Path, console: Console) -> list[Run]:
    cfg = league_config(args.pool_mcts_sims, workers=2)
    # Warm-up: starts the forkserver (which imports this module and arena once) so neither timed run pays for it.
    run_league(cfg, fresh_dir(root, "warm-pool"), "local", 8)
    best: dict[int, Run] = {}
    for rnd in range(args.pool_rounds):
        for workers in ((2, 1) if rnd % 2 == 0 else (1, 2)):  # interleaved, alternating order; best round kept
            cfg.workers = workers
            c0 = cpu_times()
            league, s = run_league(cfg, fresh_dir(root, f"local-w{workers}-r{rnd}"), "local", args.pool_matches)
            busy = busy_share(c0, cpu_times())
            league.store.close()
            console.print(f"[dim]2. round {rnd + 1}/{args.pool_rounds}, local pool, {workers} worker(s): {s['new']} "
                          f"matches in {s['seconds']:.2f} s, machine CPUs busy "
                          f"{'?' if busy is None else f'{busy * 100:.0f}%'}[/dim]")
            run = Run(f"local_w{workers}", f"League.run, backend=local, workers={workers} "
                      f"(mcts {args.pool_mcts_sims} sims)", s["new"], s["seconds"], {"busy": busy})
            if workers not in best or run.rate > best[workers].rate:
                best[workers] = run
    return [best[2], best[1]]


def bench_ray(args, root: Path, console: Console) -> list[Run]:
    try:
        import ray
    except ImportError:
        console.print("[yellow]3. ray is not installed: skipped[/yellow]")
        return []
    cfg = league_config(args.pool_mcts_sims, workers=2)
    ray_tmp = root / "ray"
    ray_tmp.mkdir()
    try:
        # The same arguments RayExecutor uses for a local Ray; it skips ray.init when Ray is already up.
        c0 = cpu_times()
        t0 = _perf()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
                 _temp_dir=str(ray_tmp))
        init_s = _perf() - t0
        c1 = cpu_times()
        league, s = run_league(cfg, fresh_dir(root, "ray-w2"), "ray", args.pool_matches)
        busy = busy_share(c1, cpu_times())
        league.store.close()
    finally:
        ray.shutdown()
    console.print(f"[dim]3. ray, 2 workers: ray.init {init_s:.2f} s, {s['new']} matches in {s['seconds']:.2f} s[/dim]")
    label = f"League.run, backend=ray, workers=2 (mcts {args.pool_mcts_sims} sims)"
    return [
        Run("ray_w2", label + ", run only", s["new"], s["seconds"], {"init": init_s, "busy": busy}),
        Run("ray_w2_wall", label.replace("League.run, ", "") + " incl. ray.init", s["new"], s["seconds"] + init_s,
            {"busy": busy_share(c0, cpu_times())}),
    ]


# -- 4. ratings -----------------------------------------------------------------------------------
def bench_ratings(args, console: Console) -> list[Run]:
    from arena.league.ratings import OpenSkillTable

    n_players = 64
    seq = make_sequence(args.rating_games, n_players, 0)
    ids = [f"player_{k}" for k in range(n_players)]
    id_seq = [(ids[i], ids[j], ranks) for i, j, ranks in seq]

    def direct() -> None:
        model = OpenSkillTable().model
        ratings = [model.rating() for _ in range(n_players)]
        rate = model.rate
        for i, j, ranks in seq:
            (ri,), (rj,) = rate([[ratings[i]], [ratings[j]]], ranks=ranks)
            ratings[i] = ri
            ratings[j] = rj

    def wrapper() -> None:
        table = OpenSkillTable()
        update = table.update
        for a, b, ranks in id_seq:
            update((a, b), ranks)

    direct()
    wrapper()
    d = w = 0.0
    for _ in range(args.rating_repeats):  # interleaved, best of
        d = max(d, best_rate(direct, len(seq), 1))
        w = max(w, best_rate(wrapper, len(seq), 1))
    console.print(f"[dim]4. ratings: {len(seq):,} updates, best of {args.rating_repeats}[/dim]")
    return [Run("os_direct", "openskill model.rate (direct)", len(seq), len(seq) / d),
            Run("ts_table", "OpenSkillTable.update", len(seq), len(seq) / w)]


# -- profile --------------------------------------------------------------------------------------
_TIMED = [
    # (label, module or class path, attribute)
    ("play_match (in the job runner)", "arena.match.runner", "play_match"),
    ("write_replay (to_text + gzip + rename)", "arena.match.runner", "write_replay"),
    ("League.next_pairing", "arena.league.manager:League", "next_pairing"),
    ("League.begin (enqueue + seed UPDATE)", "arena.league.manager:League", "begin"),
    ("LeagueStore.mark_running", "arena.league.storage:LeagueStore", "mark_running"),
    ("League.commit_many (replay sync + one transaction a batch)", "arena.league.manager:League", "commit_many"),
    ("LeagueStore.commit_results (results + ratings + payoff)", "arena.league.storage:LeagueStore", "commit_results"),
    ("LeagueStore.result_count (budget check)", "arena.league.storage:LeagueStore", "result_count"),
    ("LeagueStore.matches (queued scan)", "arena.league.storage:LeagueStore", "matches"),
]


def _resolve(path: str):
    import importlib

    mod, _, cls = path.partition(":")
    obj = importlib.import_module(mod)
    return getattr(obj, cls) if cls else obj


def profile(args, root: Path, console: Console) -> None:
    """Where the inline league's time goes: timed wrappers (cheap, accurate), then cProfile's top functions."""
    cfg = league_config(args.mcts_sims)
    run_league(cfg, fresh_dir(root, "warm-inline"), "inline", 28)
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    originals = []
    for label, path, attr in _TIMED:
        owner = _resolve(path)
        fn = getattr(owner, attr)

        def timed(*a, __fn=fn, __label=label, **k):
            t0 = _perf()
            try:
                return __fn(*a, **k)
            finally:
                tot = totals[__label]
                tot[0] += _perf() - t0
                tot[1] += 1

        originals.append((owner, attr, fn))
        setattr(owner, attr, functools.wraps(fn)(timed))
    try:
        _league, s = run_league(cfg, fresh_dir(root, "timed-inline"), "inline", args.inline_matches)
    finally:
        for owner, attr, fn in originals:
            setattr(owner, attr, fn)
    wall = s["seconds"]
    t = Table(title=f"Inline league, {s['new']} matches in {wall:.2f} s ({s['matches_per_s']:.0f}/s), timed wrappers")
    for i, h in enumerate(["function", "calls", "total s", "ms/match", "share of run"]):
        t.add_column(h, justify="right" if i else "left")
    for label, _p, _a in _TIMED:
        tot, n = totals[label]
        t.add_row(label, str(n), f"{tot:.3f}", f"{tot / s['new'] * 1e3:.3f}", f"{tot / wall * 100:.1f}%")
    console.print(t)

    prof = cProfile.Profile()
    _league, s = run_league(cfg, fresh_dir(root, "prof-inline"), "inline", 28)  # tiny run: cache warm in new dir
    prof.enable()
    _league, s = run_league(cfg, fresh_dir(root, "prof-inline2"), "inline", args.inline_matches)
    prof.disable()
    console.print(f"[bold]cProfile[/bold] of the inline league ({s['new']} matches, {s['seconds']:.2f} s under the "
                  "profiler; Python-heavy code such as MCTS is inflated relative to C calls like fsync)")
    st = pstats.Stats(prof, stream=sys.stdout)
    st.sort_stats("tottime").print_stats(args.profile_top)
    st.sort_stats("cumulative").print_stats(args.profile_top)


# -- output ---------------------------------------------------------------------------------------


def versions() -> str:
    return _versions(("arena", "open_spiel", "textarena", "openskill", "ray"))


RATIOS = [
    # (label, numerator, denominator, goal or None)
    ("1. inline league / bare play_match loop", "league_inline", "bare", 0.8),
    ("2. process pool: 2 workers / 1 worker", "local_w2", "local_w1", 1.8),
    ("3. Ray / process pool, 2 workers (run only)", "ray_w2", "local_w2", 0.9),
    ("   Ray / process pool, 2 workers (incl. ray.init)", "ray_w2_wall", "local_w2", None),
    ("4. OpenSkillTable.update / openskill rate", "ts_table", "os_direct", 0.9),
]


def report(runs: dict[str, Run], info: dict, args, console: Console) -> None:
    head = ["variant", "matches / updates", "seconds", "per second", "ms each", "CPUs busy"]
    rrows = []
    for r in runs.values():
        busy = r.extra.get("busy")
        rrows.append([r.label, f"{r.matches:,}", f"{r.seconds:.2f}", f"{r.rate:,.1f}",
                      f"{1e3 / r.rate:.3f}" if r.rate else "-", "-" if busy is None else f"{busy * 100:.0f}%"])
    t = Table(title="Throughput")
    for i, h in enumerate(head):
        t.add_column(h, justify="right" if i else "left")
    for r in rrows:
        t.add_row(*r)
    console.print(t)

    qhead = ["comparison (rate ratio)", "ratio", "goal", "status"]
    qrows: list[tuple[list[str], bool | None]] = []
    ncpu = os.cpu_count() or 1
    # Runs that use one CPU (plus a little): more than 1.5 CPUs' worth busy means other processes took CPU time.
    one_cpu = {"league_inline", "bare", "local_w1"}
    shared = {k for k, r in runs.items() if k in one_cpu and (r.extra.get("busy") or 0.0) > 1.5 / ncpu}
    for label, num, den, goal in RATIOS:
        if num not in runs or den not in runs:
            continue
        ratio = runs[num].rate / runs[den].rate
        ok = None if goal is None else ratio >= goal
        status = "-" if ok is None else ("PASS" if ok else "below goal")
        if ok is not None and shared & {num, den}:
            status += " (CPUs shared: unreliable)"
        qrows.append(([label, f"{ratio:.2f}x", "-" if goal is None else f">= {goal:g}x", status], ok))
    t = Table(title="Ratios")
    for i, h in enumerate(qhead):
        t.add_column(h, justify="left" if i in (0, 3) else "right")
    for r, ok in qrows:
        t.add_row(*r, style=None if ok is None else ("green" if ok else "red"))
    console.print(t)

    notes = []
    if "league_inline" in runs and "bare" in runs:
        over = 1e3 / runs["league_inline"].rate - 1e3 / runs["bare"].rate
        cr = info.get("chunk_ratios") or []
        spread = f"; per-chunk ratios {cr[0]:.2f}-{cr[-1]:.2f}x over {len(cr)} chunks" if cr else ""
        notes.append(f"inline league overhead over the bare loop: {over:.2f} ms/match "
                     f"(bare play {1e3 / runs['bare'].rate:.2f} ms/match){spread}; the bare loop reproduced "
                     f"{info.get('identical', '?')} league results exactly")
    if "local_w1" in runs:
        notes.append("CPUs busy: share of all the machine's CPUs in use (by any process) during the run; with "
                     f"{ncpu} CPUs a one-process run (inline, bare loop, 1 worker) should show about "
                     f"{100 / ncpu:.0f}%; above {150 / ncpu:.0f}% other processes competed for the CPUs and the "
                     "ratio is marked unreliable")
    if "ray_w2" in runs:
        notes.append(f"ray.init (local, num_cpus=2): {runs['ray_w2'].extra['init']:.2f} s, reported separately")
    for n in notes:
        console.print(f"[dim]{n}[/dim]")

    setup = (f"quickstart games/players, round robin; inline: {args.inline_matches} matches, mcts {args.mcts_sims} "
             f"sims; pool/Ray: {args.pool_matches} matches, mcts {args.pool_mcts_sims} sims, pool best of "
             f"{args.pool_rounds} interleaved rounds; ratings: "
             f"{args.rating_games:,} updates, best of {args.rating_repeats}")
    load = getattr(args, "load", None)
    load_txt = f", 1-min load average {load:.2f} at start" if load is not None else ""
    note = f"_{versions()}; {platform.machine()}, {os.cpu_count()} CPUs{load_txt}; {setup}._"
    md = "\n\n".join([markdown_table(head, rrows, {1, 2, 3, 4, 5}),
                      markdown_table(qhead, [r for r, _ in qrows], {1, 2}),
                      *(["\n".join(f"- {n}" for n in notes)] if notes else []), note])
    console.print("\n[bold]Markdown (for the README):[/bold]\n")
    print(md)  # plain print: no rich markup or wrapping in the pasteable text


# -- main -----------------------------------------------------------------------------------------
def main() -> None:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(description=doc.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes for a smoke run (~15 s)")
    p.add_argument("--skip-ray", action="store_true", help="skip the Ray comparison")
    p.add_argument("--inline-matches", type=int, help="matches of the inline league and bare loop (default 4200)")
    p.add_argument("--pool-matches", type=int, help="matches of each pool / Ray run (default 400)")
    p.add_argument("--pool-rounds", type=int, help="interleaved rounds of the two pool runs, best kept (default 2)")
    p.add_argument("--inline-chunks", type=int, default=6,
                   help="league and bare loop alternate in this many chunks (default 6)")
    p.add_argument("--mcts-sims", type=int, default=50, help="MCTS simulations in the inline comparison (default 50)")
    p.add_argument("--pool-mcts-sims", type=int, default=800,
                   help="MCTS simulations in the pool and Ray runs (default 800)")
    p.add_argument("--rating-games", type=int, help="two-player rating updates per repeat (default 3000)")
    p.add_argument("--rating-repeats", type=int, default=9, help="interleaved repeats, best kept (default 9)")
    p.add_argument("--only", choices=["inline", "pool", "ray", "ratings"], action="append",
                   help="run only these parts (repeatable)")
    p.add_argument("--profile", action="store_true",
                   help="instead of the benchmark: time the inline league's steps and cProfile it")
    p.add_argument("--profile-top", type=int, default=25)
    args = p.parse_args()
    if args.inline_matches is None:
        args.inline_matches = 420 if args.quick else 4200
    if args.pool_matches is None:
        args.pool_matches = 120 if args.quick else 400
    if args.pool_rounds is None:
        args.pool_rounds = 1 if args.quick else 2
    if args.rating_games is None:
        args.rating_games = 1000 if args.quick else 3000
    if args.quick:
        args.rating_repeats = min(args.rating_repeats, 3)
        args.inline_chunks = min(args.inline_chunks, 2)

    console = Console(width=max(Console().width, 120))
    root = Path(tempfile.mkdtemp(prefix="arena-bench-league-"))
    try:
        if args.profile:
            profile(args, root, console)
            return
        parts = set(args.only or ["inline", "pool", "ray", "ratings"])
        if args.skip_ray:
            parts.discard("ray")
        console.print(f"[bold]bench_league[/bold]: {versions()}; {os.cpu_count()} CPUs; temp folder {root}")
        args.load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        if args.load is not None and args.load > 0.5:
            console.print(f"[yellow]load average {args.load:.2f} before the run: other processes share the CPUs, "
                          "the pool and Ray numbers will be noisy[/yellow]")
        t_all = _perf()
        runs: list[Run] = []
        info: dict = {}
        if "inline" in parts:
            r, info = bench_inline(args, root, console)
            runs += r
        if "pool" in parts or "ray" in parts:
            runs += bench_pool(args, root, console)
        if "ray" in parts:
            runs += bench_ray(args, root, console)
        if "ratings" in parts:
            runs += bench_ratings(args, console)
        console.print(f"[dim]total {_perf() - t_all:.1f} s[/dim]")
        report({r.key: r for r in runs}, info, args, console)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
