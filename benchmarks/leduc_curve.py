"""NashConv against wall time on Leduc poker: the SCC trainer beside OpenSpiel's CFR and CFR+, each
given the same seconds, every figure exact (OpenSpiel's best responses over all 936 information states).

    python benchmarks/leduc_curve.py                              # 20 minutes each
    python benchmarks/leduc_curve.py --seconds 180 --out /tmp/leduc_curve.png --dir /tmp/leduc_curve
    python benchmarks/leduc_curve.py --run runs/leduc             # an SCC run already trained: its metrics
    python benchmarks/leduc_curve.py --run runs/leduc_imitation --run runs/leduc_selfplay --goal 0.3 --seconds 720
                                                                  # docs/leduc_curve.png (docs/policy.md)

CFR and CFR+ (`open_spiel.python.algorithms.cfr`) run one after the other in this process; their
clock counts the solver's iterations only, not the NashConv measurements of the average policy
(taken at geometrically spaced iterations). The SCC run is trained here (``--config``, in ``--dir``)
until ``--seconds`` have passed (it finishes the iteration under way) or its iterations are done;
its clock is the wall time from the start of the run (teacher matches, imitation, RL and its own
evaluations), its points the ``eval/nash_conv`` lines of ``metrics.jsonl``. With ``--run`` (once or
more), existing run folders are read instead (each clock starts at ``curve.json``'s start if this
script trained it, else at its first metrics line, after any teacher matches). ``--goal`` is the
NashConv the table's last column and the plot's dashed line mark.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOAL = 0.1


def cfr_curve(kind: str, seconds: float, growth: float = 1.15) -> list[tuple[float, int, float]]:
    """``(solver seconds, iterations, NashConv of the average policy)`` for CFR or CFR+ on Leduc."""
    import pyspiel
    from open_spiel.python.algorithms import cfr, exploitability

    game = pyspiel.load_game("leduc_poker")
    solver = (cfr.CFRPlusSolver if kind == "cfr+" else cfr.CFRSolver)(game)
    points, spent, it, due = [], 0.0, 0, 1
    while spent < seconds:
        t = time.perf_counter()
        solver.evaluate_and_update_policy()
        spent += time.perf_counter() - t
        it += 1
        if it >= due or spent >= seconds:
            points.append((spent, it, float(exploitability.nash_conv(game, solver.average_policy()))))
            due = max(it + 1, int(it * growth))
    return points


def train_scc(config: Path, folder: Path, seconds: float, threads: int | None, iterations: int | None) -> None:
    """Train the SCC config into `folder` until `seconds` have passed (after the iteration under way)."""
    from arena.trainers.registry import read_train_config

    _, cfg = read_train_config(config)
    if threads is not None:
        cfg.threads = threads
    if iterations is not None:
        cfg.iterations = iterations
    folder.mkdir(parents=True, exist_ok=True)
    start = time.time()
    (folder / "curve.json").write_text(json.dumps({"start": start, "config": str(config)}))
    from arena.trainers.policy.scc import SCCTrainer

    t = SCCTrainer(cfg, folder)

    def progress(it: int, last: int, line: dict) -> None:
        print(f"scc: iteration {it}/{last}, {time.time() - start:.0f} s", flush=True)
        if time.time() - start >= seconds:
            t.request_stop()

    try:
        t.run(progress=progress)
    finally:
        t.close()


def scc_curve(folder: Path) -> list[tuple[float, int, float]]:
    """``(seconds from the run's start, iteration, NashConv)`` from a run folder's evaluations."""
    rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines() if x.strip()]
    meta = folder / "curve.json"
    start = json.loads(meta.read_text())["start"] if meta.exists() else min(r["time"] for r in rows)
    return [(r["time"] - start, int(r["step"]), float(r["eval/nash_conv"])) for r in rows if "eval/nash_conv" in r]


def at(points: list[tuple[float, int, float]], s: float) -> str:
    """The last NashConv measured by second `s` ("-" before the first)."""
    seen = [p for p in points if p[0] <= s]
    return f"{seen[-1][2]:.3f} ({seen[-1][1]})" if seen else "-"


def first_below(points: list[tuple[float, int, float]], goal: float, seconds: float) -> str:
    hit = next((p for p in points if p[2] <= goal and p[0] <= seconds), None)
    return "-" if hit is None else f"{hit[0]:.0f} s (iteration {hit[1]})"


def plot(curves: dict[str, list[tuple[float, int, float]]], path: Path, seconds: float, goal: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    for (name, pts), color in zip(curves.items(), ("tab:red", "tab:purple", "tab:orange", "tab:brown", "tab:blue",
                                                   "tab:green")):
        if pts:
            ax.plot([p[0] for p in pts], [p[2] for p in pts], color=color, marker="o" if len(pts) < 40 else None,
                    ms=3, lw=1.4, label=name)
    ax.axhline(goal, color="gray", ls="--", lw=1, label=f"NashConv {goal:g}")
    ax.set_yscale("log")
    ax.set_xlim(0, max([seconds] + [p[0] for pts in curves.values() for p in pts]))
    ax.set_xlabel("seconds (one process)")
    ax.set_ylabel("NashConv (exact)")
    ax.set_title("Leduc poker: NashConv against wall time", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1200.0, help="wall time each method gets (default 20 minutes)")
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "train" / "scc_leduc.yaml")
    ap.add_argument("--dir", type=Path, default=ROOT / "runs" / "leduc_curve", help="the SCC run folder (trained here)")
    ap.add_argument("--run", type=Path, action="append", default=None,
                    help="read this SCC run folder instead of training one (repeat for several)")
    ap.add_argument("--goal", type=float, default=GOAL, help=f"the NashConv marked (default {GOAL})")
    ap.add_argument("--threads", type=int, default=None, help="the SCC trainer's torch threads (default: the config's)")
    ap.add_argument("--iterations", type=int, default=None, help="the SCC run's iterations (default: the config's)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "leduc_curve.png")
    args = ap.parse_args()

    from benchmarks._common import markdown_table, versions

    if args.run is None:
        if (args.dir / "metrics.jsonl").exists():
            raise SystemExit(f"{args.dir} holds a run already: give another --dir, or read it with --run {args.dir}")
        train_scc(args.config, args.dir, args.seconds, args.threads, args.iterations)
    if args.run is None:
        curves = {f"SCC ({args.config.name})": scc_curve(args.dir)}
    else:
        curves = {f"SCC ({folder.name})": scc_curve(folder) for folder in args.run}
    for kind, label in (("cfr", "CFR"), ("cfr+", "CFR+")):
        print(f"{label}: {args.seconds:.0f} s", flush=True)
        curves[label] = cfr_curve(kind, args.seconds)

    marks = [s for s in (15, 30, 60, 120, 180, 300, 600, 900, 1200) if s < args.seconds] + [args.seconds]
    rows = [[name] + [at(pts, s) for s in marks] + [first_below(pts, args.goal, args.seconds)]
            for name, pts in curves.items()]
    print(f"\nNashConv (exact; in brackets the iteration) by wall time, {args.seconds:.0f} s each; "
          f"{versions(('torch', 'open_spiel'))}\n")
    header = ["method"] + [f"{s:.0f} s" for s in marks] + [f"first <= {args.goal:g}, by {args.seconds:.0f} s"]
    print(markdown_table(header, rows, set(range(1, len(marks) + 2))))
    plot(curves, args.out, args.seconds, args.goal)
    print(f"\nfigure: {args.out}")


if __name__ == "__main__":
    main()
