"""Ablation study: what each part of the SPIRAL recipe buys on tiny-model tic-tac-toe.

The base run is ``configs/train/spiral_tictactoe_tiny.yaml`` (imitation warm
start, then RAE + ``dppo_binary_tv`` with league opponents).  Each variant
changes one thing:

* ``base``             the config as it is.
* ``no_rae``           ``advantage: none`` (the raw return, i.e. a baseline of 0).
* ``selfplay``         ``opponent_mode: selfplay`` (no league opponents).
* ``ppo_clip``, ``dppo_binary_tv``, ``dppo_topk_kl``, ``drpo``, ``predictive_mask``:
                       the base run with that loss.  ``dppo_binary_tv`` is the base
                       loss, so it is the same configuration as ``base``; such
                       duplicates share one set of runs (the table says so).

Note: the base config trains 4 epochs over each iteration's samples in
minibatches of 128, so later steps run off-policy and the trust regions bite
(a few percent of tokens masked); with ``--epochs 1`` every step is close to
on-policy, the masks almost never fire and the loss variants differ little.

Every variant x seed is one ``SpiralTrainer`` run in its own folder
``<out>/<variant>/seed-<k>``, ``--jobs`` at a time, each in a fresh Python process
(so a crash or a leak in one run cannot take the study down).  From each run's
``metrics.jsonl`` the script reads the evaluation win-rate curve against
``random`` (``eval/win_rate/random``), the evaluation invalid-move rate
(``eval/invalid_rate``) and the fraction of tokens the trust-region mask touched
(mean of ``train/mask_frac``; for ``ppo_clip`` the clipped fraction
``train/clip_frac``, marked "clip"; ``drpo`` masks nothing by construction).

Output: ``<out>/ablation.png`` (one panel per variant: win rate against random,
mean over seeds with a +-1 std band and each seed faint, evaluation invalid rate
dotted; a last panel overlays the means), ``<out>/ablation.md`` (the table:
variant, final win rate mean +- std over seeds, best (highest point of the
seed-mean curve), final invalid rate, mean mask fraction, wall time per run) and
``<out>/ablation.json`` (the curves); the table is printed too.

Resuming: ``--reuse`` skips runs that finished with the same configuration,
extends finished runs when only ``--iterations`` grew, and resumes interrupted
runs from their latest checkpoint (the trainer's own resume; a run interrupted
before its first snapshot after iteration 0 is restarted instead, see
``launch``).  The wall time of a resumed run counts from the resume.  Without
``--reuse`` the selected variants' run folders are deleted and run afresh.

The README's study (7 distinct variants x 3 seeds x 30 iterations of 128 games,
``--iterations 30 --eval-every 10 --eval-games 200 --jobs 2 --threads 1``) took
64 minutes on 2 cores, on the base recipe of that time (constant lr 1e-4, 50%
fixed random, RAE by role); the shipped config's 150 iterations take about five
times as long.  A smoke run in about a minute:

    .venv/bin/python benchmarks/ablation.py --variants base --iterations 2 --seeds 1 \\
        --games-per-iter 16 --eval-games 20 --il-matches 100 --out /tmp/ablation

Run:  .venv/bin/python benchmarks/ablation.py [--variants a,b,c] [--seeds 3] [--iterations N] [--reuse]
          [--out runs/ablation] [--report-only]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # several torch processes on 2 cores: no busy-waiting
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from dataclasses import asdict  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BASE_CONFIG = ROOT / "configs" / "train" / "spiral_tictactoe_tiny.yaml"
DONE = "ablation_done.json"
STARTED = "ablation_config.json"
WIN_KEY = "eval/win_rate/random"
INVALID_KEY = "eval/invalid_rate"

#: variant -> (what it changes, SpiralConfig overrides: a dict for a section)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "base": ("RAE + dppo_binary_tv + league opponents", {}),
    "no_rae": ("advantage: none (baseline 0)", {"learner": {"advantage": "none"}}),
    "selfplay": ("opponent_mode: selfplay", {"opponent_mode": "selfplay"}),
    "ppo_clip": ("loss: ppo_clip", {"learner": {"loss": "ppo_clip"}}),
    "dppo_binary_tv": ("loss: dppo_binary_tv", {"learner": {"loss": "dppo_binary_tv"}}),
    "dppo_topk_kl": ("loss: dppo_topk_kl", {"learner": {"loss": "dppo_topk_kl"}}),
    "drpo": ("loss: drpo", {"learner": {"loss": "drpo"}}),
    "predictive_mask": ("loss: predictive_mask", {"learner": {"loss": "predictive_mask"}}),
}


# -- configuration ------------------------------------------------------------------------------
def make_config(args, variant: str, seed: int):
    """The SpiralConfig of one variant x seed: the base YAML, the variant's overrides, the study's settings."""
    from arena.trainers.registry import load_train_config

    cfg = load_train_config(args.config, **VARIANTS[variant][1])
    cfg.seed = seed
    if args.iterations is not None:
        cfg.iterations = args.iterations
    if args.games_per_iter is not None:
        cfg.games_per_iter = args.games_per_iter
    if args.threads is not None:
        cfg.threads = args.threads
    if args.epochs is not None:
        cfg.learner.epochs = args.epochs
    if args.minibatch is not None:
        cfg.learner.minibatch = args.minibatch
    if args.eval_games is not None:
        cfg.eval.games = args.eval_games
    if args.eval_every is not None:
        cfg.eval.every = args.eval_every
    if cfg.il is not None:
        if args.il_matches is not None:
            cfg.il.matches = args.il_matches
        if args.il_epochs is not None:
            cfg.il.epochs = args.il_epochs
    if "random" not in cfg.eval.opponents:
        raise SystemExit(f"{args.config}: eval.opponents must include 'random' (the ablation reads {WIN_KEY})")
    return cfg


def config_key(cfg) -> str:
    d = asdict(cfg)
    d.pop("seed", None)
    d.pop("threads", None)  # how fast, not what is trained
    return json.dumps(d, sort_keys=True, default=str)


# -- one run (in a worker process) -------------------------------------------------------------------
def run_one(spec: dict[str, Any]) -> None:
    """Worker: train one variant x seed in ``spec['dir']`` and write the done marker."""
    import torch

    from arena.trainers.llm.config import SpiralConfig
    from arena.trainers.llm.spiral import SpiralTrainer
    from arena.config import from_dict

    torch.set_num_threads(spec["threads"])
    cfg = from_dict(SpiralConfig, spec["config"])
    run_dir = Path(spec["dir"])
    prefix = f"[{spec['variant']} seed {cfg.seed}]"
    t0 = time.perf_counter()

    def progress(it: int, last: int, m: dict) -> None:
        wr = f" win {m[WIN_KEY]:.2f}" if WIN_KEY in m else ""
        mf = m.get("train/mask_frac", m.get("train/clip_frac"))
        mf_txt = f" mask {mf:.3f}" if mf is not None else ""
        print(f"{prefix} iter {it}/{last}: return {m.get('train/return', 0.0):+.2f} invalid "
              f"{m.get('train/invalid_rate', 0.0):.2f}{mf_txt}{wr} ({time.perf_counter() - t0:.0f} s)", flush=True)

    trainer = SpiralTrainer(cfg, run_dir)
    resumed_from = trainer.iteration
    try:
        trainer.run(progress=progress)
    finally:
        trainer.close()
    wall = time.perf_counter() - t0
    marker = {"variant": spec["variant"], "seed": cfg.seed, "status": "ok", "iterations": cfg.iterations,
              "wall_s": spec.get("prior_wall_s", 0.0) + wall, "resumed_from": resumed_from,
              "config": json.loads(config_key(cfg)), "finished": time.time()}
    (run_dir / (DONE + ".tmp")).write_text(json.dumps(marker, indent=1))
    os.replace(run_dir / (DONE + ".tmp"), run_dir / DONE)


def launch(args, owner: str, seed: int, cfg, console) -> dict[str, Any]:
    """Run (or skip / extend / resume) one variant x seed; returns its done marker (or a failure record)."""
    run_dir = Path(args.out) / owner / f"seed-{seed}"
    done_path = run_dir / DONE
    prior_wall = 0.0
    key = json.loads(config_key(cfg))
    if args.reuse and done_path.exists():
        done = json.loads(done_path.read_text())
        old = dict(done.get("config", {}))
        same_but_iters = {k: v for k, v in old.items() if k != "iterations"} == \
                         {k: v for k, v in key.items() if k != "iterations"}
        if old == key:
            console.print(f"[dim]{owner} seed {seed}: finished already, reused ({run_dir})[/dim]")
            return done
        if same_but_iters and done.get("iterations", 0) < cfg.iterations:
            console.print(f"{owner} seed {seed}: extending from {done['iterations']} to {cfg.iterations} iterations")
            prior_wall = float(done.get("wall_s", 0.0))
            done_path.unlink()
        else:
            raise SystemExit(f"{run_dir} finished with a different configuration: drop --reuse to rerun it, "
                             f"or use another --out")
    elif args.reuse and run_dir.exists() and (run_dir / "latest").exists():
        started = run_dir / STARTED
        old = json.loads(started.read_text()) if started.exists() else None
        if old is None or {k: v for k, v in old.items() if k != "iterations"} != \
                {k: v for k, v in key.items() if k != "iterations"}:
            raise SystemExit(f"{run_dir} holds an unfinished run with a different configuration: drop --reuse "
                             f"to rerun it, or use another --out")
        latest = (run_dir / "latest").resolve().name
        if latest == "iter-00000":
            # SpiralTrainer.run redoes snapshot(0) when it resumes from the iteration-0 checkpoint, and the
            # league refuses the duplicate snapshot name: start such runs afresh (little is lost)
            console.print(f"{owner} seed {seed}: interrupted before its first snapshot after iteration 0, restarting")
            shutil.rmtree(run_dir)
        else:
            console.print(f"{owner} seed {seed}: resuming an interrupted run from {latest}")
    elif run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / STARTED).write_text(json.dumps(key, indent=1))
    spec = {"variant": owner, "dir": str(run_dir), "config": asdict(cfg), "threads": cfg.threads,
            "prior_wall_s": prior_wall}
    console.print(f"[bold]{owner}[/bold] seed {seed}: {cfg.iterations} iterations x {cfg.games_per_iter} games, "
                  f"loss {cfg.learner.loss}, advantage {cfg.learner.advantage}, opponents {cfg.opponent_mode} "
                  f"-> {run_dir}")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
                          cwd=str(ROOT))
    if proc.returncode != 0 or not done_path.exists():
        console.print(f"[red]{owner} seed {seed}: run failed (exit {proc.returncode}) after "
                      f"{time.perf_counter() - t0:.0f} s; continuing with the next run[/red]")
        return {"variant": owner, "seed": seed, "status": f"failed (exit {proc.returncode})"}
    return json.loads(done_path.read_text())


# -- collection ------------------------------------------------------------------------------------------
def read_run(run_dir: Path) -> dict[str, Any]:
    """Curves of one run from metrics.jsonl; a step logged twice (resumed run) keeps its last value."""
    from arena.trainers.common.metrics import read_metrics

    by_key: dict[str, dict[int, float]] = {}
    for row in read_metrics(run_dir / "metrics.jsonl"):
        step = int(row.get("step", 0))
        for k, v in row.items():
            if k in ("step", "time") or not isinstance(v, (int, float)) or not math.isfinite(v):
                continue
            by_key.setdefault(k, {})[step] = float(v)
    win = sorted(by_key.get(WIN_KEY, {}).items())
    invalid = sorted(by_key.get(INVALID_KEY, {}).items())
    mask_key = "train/mask_frac" if "train/mask_frac" in by_key else "train/clip_frac"
    mask = [v for s, v in sorted(by_key.get(mask_key, {}).items()) if s > 0]
    return {"win": win, "invalid": invalid, "mask_key": mask_key.split("/")[-1],
            "mask_mean": statistics.fmean(mask) if mask else float("nan")}


def mean_curve(curves: list[list[tuple[int, float]]]) -> tuple[list[int], list[float], list[float]]:
    """Steps, mean and std (population, 0 with one seed) over the seeds that have each step."""
    steps = sorted({s for c in curves for s, _ in c})
    means, stds = [], []
    for s in steps:
        vals = [v for c in curves for t, v in c if t == s]
        means.append(statistics.fmean(vals))
        stds.append(statistics.pstdev(vals) if len(vals) > 1 else 0.0)
    return steps, means, stds


def summarise(variant: str, owner: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r.get("curves") and r["curves"]["win"]]
    finals = [r["curves"]["win"][-1][1] for r in ok]
    inval = [r["curves"]["invalid"][-1][1] for r in ok if r["curves"]["invalid"]]
    masks = [r["curves"]["mask_mean"] for r in ok if not math.isnan(r["curves"]["mask_mean"])]
    steps, means, stds = mean_curve([r["curves"]["win"] for r in ok])
    walls = [r["done"].get("wall_s", float("nan")) for r in ok if "done" in r]
    return {
        "variant": variant, "owner": owner, "description": VARIANTS[variant][0], "seeds": [r["seed"] for r in ok],
        "failed": [r["seed"] for r in runs if r not in ok], "final_mean": statistics.fmean(finals) if finals else None,
        "final_std": statistics.pstdev(finals) if len(finals) > 1 else 0.0, "best": max(means) if means else None,
        "invalid": statistics.fmean(inval) if inval else None, "mask": statistics.fmean(masks) if masks else None,
        "mask_key": ok[0]["curves"]["mask_key"] if ok else "mask_frac",
        "wall_s": statistics.fmean(walls) if walls else None,
        "iterations": max((r["curves"]["win"][-1][0] for r in ok), default=0),
        "curve": {"steps": steps, "mean": means, "std": stds},
        "seed_curves": {str(r["seed"]): r["curves"]["win"] for r in ok},
        "invalid_curve": mean_curve([r["curves"]["invalid"] for r in ok if r["curves"]["invalid"]])[:2],
    }


# -- output -------------------------------------------------------------------------------------------------
def markdown_table(header: list[str], rows: list[list[str]], right: set[int]) -> str:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


HEAD = ["variant", "change", "seeds", "final win rate", "best", "final invalid rate", "mask frac", "wall min/run"]


def table_rows(summaries: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for s in summaries:
        def f(x, fmt="{:.3f}"):
            return "-" if x is None else fmt.format(x)
        change = s["description"] + (f" (= {s['owner']}: same runs)" if s["owner"] != s["variant"] else "")
        seeds = str(len(s["seeds"])) + (f" ({len(s['failed'])} failed)" if s["failed"] else "")
        final = "-" if s["final_mean"] is None else f"{s['final_mean']:.3f} ± {s['final_std']:.3f}"
        mask = f(s["mask"]) + (" (clip)" if s["mask_key"] == "clip_frac" and s["mask"] is not None else "")
        rows.append([s["variant"], change, seeds, final, f(s["best"]), f(s["invalid"]), mask,
                     f(None if s["wall_s"] is None else s["wall_s"] / 60, "{:.1f}")])
    return rows


def plot(summaries: list[dict[str, Any]], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    n = len(summaries) + (1 if len(summaries) > 1 else 0)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(3.6 * cols, 3.0 * rows + 0.5))
    colors = matplotlib.colormaps["tab10"]
    axes = []
    for i, s in enumerate(summaries):
        ax = fig.add_subplot(rows, cols, i + 1)
        axes.append(ax)
        c = colors(i % 10)
        for curve in s["seed_curves"].values():
            if curve and len(s["seed_curves"]) > 1:
                xs, ys = zip(*curve)
                ax.plot(xs, ys, color=c, alpha=0.25, lw=0.8)
        st = s["curve"]
        if st["steps"]:
            lo = [m - d for m, d in zip(st["mean"], st["std"])]
            hi = [m + d for m, d in zip(st["mean"], st["std"])]
            ax.fill_between(st["steps"], lo, hi, color=c, alpha=0.2, lw=0)
            ax.plot(st["steps"], st["mean"], color=c, marker="o" if len(st["steps"]) < 25 else None, ms=3,
                    label="win rate vs random")
        isteps, imean = s["invalid_curve"]
        if isteps:
            ax.plot(isteps, imean, color="gray", ls=":", lw=1.2, label="invalid rate")
        final = "-" if s["final_mean"] is None else f"{s['final_mean']:.2f}"
        ax.set_title(f"{s['variant']} (n={len(s['seeds'])}, final {final})", fontsize=9)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("iteration", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if i == 0:
            ax.legend(fontsize=7, loc="best")
    if len(summaries) > 1:
        ax = fig.add_subplot(rows, cols, len(summaries) + 1)
        for i, s in enumerate(summaries):
            st = s["curve"]
            if st["steps"]:
                ax.plot(st["steps"], st["mean"], color=colors(i % 10), label=s["variant"], lw=1.2)
        ax.set_title("all variants (seed mean)", fontsize=9)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("iteration", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="best")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


# -- main --------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(description=doc.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(BASE_CONFIG), help="base training YAML (default: the tiny TicTacToe run)")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma-separated subset of: {', '.join(VARIANTS)} (default: all)")
    p.add_argument("--seeds", type=int, default=3, help="seeds per variant: 0 .. N-1 plus --seed-offset (default 3)")
    p.add_argument("--seed-offset", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--iterations", type=int, default=None, help="RL iterations per run (default: the config's)")
    p.add_argument("--games-per-iter", type=int, default=None, help="rollout games per iteration (default: the config's)")
    p.add_argument("--eval-games", type=int, default=None, help="evaluation games vs random (default: the config's)")
    p.add_argument("--eval-every", type=int, default=None, help="iterations between evaluations (default: the config's)")
    p.add_argument("--il-matches", type=int, default=None, help="imitation matches (default: the config's)")
    p.add_argument("--il-epochs", type=int, default=None, help="imitation epochs (default: the config's)")
    p.add_argument("--threads", type=int, default=None, help="torch threads per run (default: the config's)")
    p.add_argument("--epochs", type=int, default=None,
                   help="learner epochs per iteration (default: the config's; > 1 makes the trust regions bite)")
    p.add_argument("--minibatch", type=int, default=None, help="learner minibatch (default: the config's)")
    p.add_argument("--jobs", type=int, default=1,
                   help="runs at once, each in its own process (default 1; with 2 cores: --jobs 2 --threads 1)")
    p.add_argument("--out", default="runs/ablation", help="output folder (default runs/ablation)")
    p.add_argument("--reuse", action="store_true",
                   help="skip runs that already finished with the same settings; resume interrupted ones")
    p.add_argument("--report-only", action="store_true", help="no training: tabulate and plot the runs under --out")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = [v for v in names if v not in VARIANTS]
    if bad or not names:
        p.error(f"unknown variant(s) {', '.join(bad) or '(none given)'}; choose from {', '.join(VARIANTS)}")
    args.variant_list = list(dict.fromkeys(names))
    if args.seeds < 1:
        p.error("--seeds must be >= 1")
    if args.jobs < 1:
        p.error("--jobs must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        run_one(json.loads(args.worker))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 140))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [args.seed_offset + i for i in range(args.seeds)]
    # identical configurations (e.g. dppo_binary_tv = base) share the runs of the first variant that has them
    owners: dict[str, str] = {}
    first_of: dict[str, str] = {}
    for v in args.variant_list:
        cfg = make_config(args, v, seeds[0])
        key = config_key(cfg)
        owners[v] = first_of.setdefault(key, v)
    base_cfg = make_config(args, "base", seeds[0])  # the settings line describes the base recipe
    console.print(f"[bold]ablation[/bold]: {len(args.variant_list)} variant(s) x {len(seeds)} seed(s), base "
                  f"{Path(args.config).name}, {base_cfg.iterations} iterations x {base_cfg.games_per_iter} games, "
                  f"eval {base_cfg.eval.games} games every {base_cfg.eval.every}, "
                  f"IL {base_cfg.il.matches if base_cfg.il else 0} matches -> {out}")
    t_all = time.perf_counter()
    results: dict[tuple[str, int], dict[str, Any]] = {}
    todo = []
    for v in args.variant_list:
        if owners[v] != v:
            console.print(f"[dim]{v}: same configuration as {owners[v]}, sharing its runs[/dim]")
            continue
        for seed in seeds:
            if args.report_only:
                p = out / v / f"seed-{seed}" / DONE
                results[(v, seed)] = json.loads(p.read_text()) if p.exists() else {"status": "missing"}
            else:
                todo.append((v, seed))
    # --jobs N: N runs at once, each in its own process (give each run cores // N threads)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(launch, args, v, seed, make_config(args, v, seed), console): (v, seed)
                   for v, seed in todo}
        for fut, key in futures.items():
            results[key] = fut.result()

    summaries = []
    for v in args.variant_list:
        runs = []
        for seed in seeds:
            done = results.get((owners[v], seed), {})
            run_dir = out / owners[v] / f"seed-{seed}"
            rec: dict[str, Any] = {"seed": seed}
            if done.get("status") == "ok":
                rec["done"] = done
                rec["curves"] = read_run(run_dir)
            runs.append(rec)
        summaries.append(summarise(v, owners[v], runs))

    settings = (f"base `{Path(args.config).name}`; {base_cfg.iterations} iterations x {base_cfg.games_per_iter} games "
                f"per iteration, {base_cfg.learner.epochs} epoch(s) in minibatches of {base_cfg.learner.minibatch}; "
                f"eval {base_cfg.eval.games} greedy games vs random every {base_cfg.eval.every} "
                f"iterations; imitation {base_cfg.il.matches if base_cfg.il else 0} matches; seeds {seeds}; "
                f"{base_cfg.threads} torch threads; {platform.machine()}, {os.cpu_count()} CPUs")
    recipe = (f"base recipe: loss {base_cfg.learner.loss}, advantage {base_cfg.learner.advantage}, "
              f"opponents {base_cfg.opponent_mode} "
              f"{base_cfg.opponents}, lr {base_cfg.learner.lr:g}, max_new_tokens {base_cfg.max_new_tokens}, top_k "
              f"{base_cfg.top_k}, template {base_cfg.template}")
    title = (f"Win rate vs random (mean ± std over seeds): {base_cfg.iterations} iterations x "
             f"{base_cfg.games_per_iter} games, {len(seeds)} seed(s)")
    png = plot(summaries, out / "ablation.png", title)
    rows = table_rows(summaries)
    t = Table(title="Ablation: tiny-model tic-tac-toe")
    for i, h in enumerate(HEAD):
        t.add_column(h, justify="left" if i < 2 else "right")
    for r in rows:
        t.add_row(*r)
    console.print(t)
    notes = ["final win rate: last evaluation (greedy, vs random), mean ± std over seeds; best: highest point of the "
             "seed-mean curve; final invalid rate: invalid moves / moves in the last evaluation (seed mean)",
             "mask frac: mean over iterations of train/mask_frac (tokens the trust-region mask zeroed); "
             "(clip): train/clip_frac for ppo_clip; drpo has no hard mask (always 0)"]
    md = "\n\n".join([
        "# Ablation: SPIRAL recipe on tiny-model tic-tac-toe",
        f"_{settings}; {time.strftime('%Y-%m-%d %H:%M')}._",
        f"_{recipe}._",
        markdown_table(HEAD, rows, {2, 3, 4, 5, 6, 7}),
        "\n".join(f"- {n}" for n in notes),
        f"![win rate vs random]({png.name})",
    ]) + "\n"
    (out / "ablation.md").write_text(md)
    (out / "ablation.json").write_text(json.dumps({"settings": settings, "base_config": asdict(base_cfg),
                                                   "variants": summaries}, indent=1, default=str))
    console.print(f"[dim]wrote {out / 'ablation.md'}, {png}, {out / 'ablation.json'} "
                  f"({time.perf_counter() - t_all:.0f} s)[/dim]")
    console.print("\n[bold]Markdown:[/bold]\n")
    print(md)
    failed = [s for s in summaries if s["failed"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
