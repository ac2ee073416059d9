"""Metrics: JSONL lines and TensorBoard scalars from one call, and PNG learning curves."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any


class MetricsLogger:
    def __init__(self, directory: str | Path, tensorboard: bool = True):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "metrics.jsonl"
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(log_dir=str(self.dir / "tensorboard"))
            except ImportError:  # tensorboard not installed: JSONL still has everything
                self._tb = None

    def log(self, step: int, **scalars: Any) -> None:
        clean = {k: (float(v) if isinstance(v, (int, float)) or hasattr(v, "item") else v) for k, v in scalars.items()}
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": step, "time": time.time(), **clean}) + "\n")
        if self._tb is not None:
            for k, v in clean.items():
                if isinstance(v, float) and math.isfinite(v):
                    self._tb.add_scalar(k, v, step)
            self._tb.flush()

    def size(self) -> int:
        """The JSONL file's length in bytes (a checkpoint records it: see `rewind`)."""
        return self.path.stat().st_size if self.path.exists() else 0

    def rewind(self, size: int) -> None:
        """Cut the JSONL file back to `size` bytes: a resumed run drops what a killed one wrote after
        its checkpoint (a line, or half of one) and writes it again, so the file equals a run's that
        never stopped. (TensorBoard's event files only append: a viewer shows the later value.)"""
        if self.path.exists() and self.path.stat().st_size > size:
            with open(self.path, "r+b") as f:
                f.truncate(size)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def read_metrics(path: str | Path) -> list[dict]:
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def plot_curves(metrics_path: str | Path, out: str | Path,
                keys: tuple[str, ...] = ("eval/win_rate/random", "eval/invalid_rate", "train/win_rate/random",
                                         "train/return", "train/mask_frac", "train/entropy", "train/loss")) -> Path:
    """One PNG with a panel per metric (learning curves). A key ending in ``/*`` is one panel with a line
    for every metric under that prefix (``train/entropy/*``: each action part's entropy)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    rows = read_metrics(metrics_path)
    seen = {k for r in rows for k in r}
    panels = []
    for k in keys:
        lines = sorted(m for m in seen if m.startswith(k[:-1])) if k.endswith("/*") else [k] if k in seen else []
        if lines:
            panels.append((k, lines))
    fig = Figure(figsize=(4.0 * max(1, min(3, len(panels))), 3.2 * math.ceil(max(1, len(panels)) / 3)))
    for i, (k, lines) in enumerate(panels):
        ax = fig.add_subplot(math.ceil(len(panels) / 3), min(3, len(panels)), i + 1)
        # imitation metrics are logged per epoch (at step 0): drawn against the epoch
        xkey = "il/epoch" if k.startswith("il/") else "step"
        for m in lines:
            pts = [(r.get(xkey, r["step"]), r[m]) for r in rows if m in r and isinstance(r[m], (int, float))]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker="." if len(pts) < 30 else None,
                        label=m[len(k) - 1:] if k.endswith("/*") else None)
        if k.endswith("/*"):
            ax.legend(fontsize=7)
        ax.set_title(k, fontsize=9)
        ax.set_xlabel("imitation epoch" if xkey == "il/epoch" else "iteration", fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return out
