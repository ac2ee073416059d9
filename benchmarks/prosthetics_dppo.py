"""DPPO's trust region on the exact Gaussian KL against PPO's clip, on the prosthetics task, several seeds.

Why: a flow policy's (and this learner's) per-step policy is Gaussian, so the divergence between the
policy that played a move and the current one is exact and cheap (Flow-DPPO). `learner.algo: dppo`
masks a move whose exact KL passes the bound once the policy has moved the advantage's way; PPO clips
the probability ratio of the move alone. Same config, same samples budget, one seed at a time:

1. Trains `configs/train/prosthetics_ppo.yaml` for ``--iterations`` with ``learner.algo`` ppo, then
   dppo (its ``eps``: ``--eps``), for each of ``--seeds``, each run alone (``--runs DIR`` keeps them;
   a run already there is read, not trained again).
2. Prints per algorithm: the evaluation return at the end (mean over seeds with a 95% t interval), the
   training return of the last iterations, the share of masked moves (dppo) and the mean KL between
   successive policies (`train/kl_update`, exact: how far one update moves the policy).
3. Draws the return curves (each seed thin, the mean thick) into ``--plot``.

Run:  .venv/bin/python benchmarks/prosthetics_dppo.py --iterations 25 --seeds 0 1 2 --runs /tmp/pros_dppo
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "train" / "prosthetics_ppo.yaml"
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def train(algo: str, seed: int, iterations: int, eps: float, runs: Path, config: Path) -> Path:
    out = runs / f"{algo}-{seed}"
    if (out / "metrics.jsonl").exists() and any(
            json.loads(x).get("step") == iterations for x in (out / "metrics.jsonl").read_text().splitlines()):
        return out
    cfg = yaml.safe_load(config.read_text())
    cfg["seed"] = seed
    cfg["iterations"] = iterations
    cfg["learner"] = {**cfg.get("learner", {}), "algo": algo}
    if algo == "dppo":
        cfg["learner"]["loss_kwargs"] = {"eps": eps}
    runs.mkdir(parents=True, exist_ok=True)
    path = runs / f"{algo}-{seed}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    subprocess.run([sys.executable, "-m", "arena.cli", "train", str(path), "--dir", str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    return out


def rows_of(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def mean_ci(xs: list[float]) -> str:
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return f"{m:+.1f}"
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    half = T95.get(len(xs) - 1, 1.96) * sd / math.sqrt(len(xs))
    return f"{m:+.1f} [{m - half:+.1f}, {m + half:+.1f}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iterations", type=int, default=25)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--eps", type=float, default=0.05, help="dppo's bound on a move's exact KL")
    p.add_argument("--runs", type=Path, default=Path("runs/prosthetics_dppo"))
    p.add_argument("--config", type=Path, default=CONFIG)
    p.add_argument("--plot", type=Path, default=None, help="a PNG of the return curves")
    args = p.parse_args()
    runs = {(a, s): rows_of(train(a, s, args.iterations, args.eps, args.runs, args.config))
            for a in ("ppo", "dppo") for s in args.seeds}
    table = []
    for algo in ("ppo", "dppo"):
        evals, trains, masks, kls = [], [], [], []
        for s in args.seeds:
            rows = runs[(algo, s)]
            evals.append([r["eval/return"] for r in rows if "eval/return" in r][-1])
            last = [r["train/return"] for r in rows if "train/return" in r][-5:]
            trains.append(sum(last) / len(last))
            masks += [r["train/mask_frac"] for r in rows if "train/mask_frac" in r]
            kls += [r["train/kl_update"] for r in rows if "train/kl_update" in r]
        table.append([algo, mean_ci(evals), " / ".join(f"{x:+.0f}" for x in evals), mean_ci(trains),
                      f"{sum(masks) / len(masks):.3f}" if masks else "-",
                      f"{sum(kls) / len(kls):.3f}" if kls else "-"])
    print(f"{len(args.seeds)} seeds, {args.iterations} iterations each (dppo eps {args.eps:g}):\n")
    print(markdown_table(["algo", f"eval return at {args.iterations} (mean, 95% t)", "per seed",
                          "train return, last 5 its", "masked moves", "KL per update"], table, {1, 3, 4, 5}))
    if args.plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for algo, colour in (("ppo", "tab:blue"), ("dppo", "tab:orange")):
            for key, ax in (("eval/return", axes[0]), ("train/kl_update", axes[1])):
                curves = []
                for s in args.seeds:
                    pts = [(r["step"], r[key]) for r in runs[(algo, s)] if key in r]
                    ax.plot(*zip(*pts), color=colour, alpha=0.3, linewidth=0.8)
                    curves.append(dict(pts))
                steps = sorted(set.intersection(*(set(c) for c in curves)))
                ax.plot(steps, [sum(c[t] for c in curves) / len(curves) for t in steps], color=colour, linewidth=2,
                        label=algo)
        axes[0].set(title="evaluation return", xlabel="iteration")
        axes[1].set(title="KL(before || after) an update", xlabel="iteration")
        for ax in axes:
            ax.grid(alpha=0.3)
            ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"\nwrote {args.plot}")


if __name__ == "__main__":
    main()
