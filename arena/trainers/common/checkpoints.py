"""Checkpoint folders of a run: ``checkpoints/iter-NNNNN`` and atomically re-pointed links
(``latest``, ``best``) relative to the run folder, so a run folder can be moved whole."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def checkpoint_path(iteration: int) -> Path:
    """Iteration `iteration`'s checkpoint folder, relative to the run folder."""
    return Path("checkpoints") / f"iter-{iteration:05d}"


def link(run_dir: str | Path, name: str, target: str | Path) -> None:
    """Atomically (re)point the symlink ``run_dir/name`` at `target` (a path relative to ``run_dir``)."""
    run_dir = Path(run_dir)
    tmp = run_dir / f".{name}.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(target)
    os.replace(tmp, run_dir / name)


def save_torch_atomic(obj: Any, path: str | Path) -> None:
    """``torch.save`` to a temporary name, then rename: a crash never leaves half a state file."""
    import torch

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)
