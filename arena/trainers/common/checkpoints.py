"""Checkpoint folders of a run: ``checkpoints/iter-NNNNN`` and atomically re-pointed links
(``latest``, ``best``) relative to the run folder, so a run folder can be moved whole."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from arena.fsio import atomic_write, disk_full_as_error


def checkpoint_path(iteration: int) -> Path:
    """Iteration `iteration`'s checkpoint folder, relative to the run folder."""
    return Path("checkpoints") / f"iter-{iteration:05d}"


def link(run_dir: str | Path, name: str, target: str | Path) -> None:
    """Atomically (re)point the symlink ``run_dir/name`` at `target` (a path relative to ``run_dir``).
    A full disk raises DiskFull and leaves the old link as it was."""
    run_dir = Path(run_dir)
    tmp = run_dir / f".{name}.tmp"
    with disk_full_as_error(run_dir, f"pointing {name} at {target}"):
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        try:
            tmp.symlink_to(target)
            os.replace(tmp, run_dir / name)
        except BaseException:
            if tmp.is_symlink():
                tmp.unlink()
            raise


def save_torch_atomic(obj: Any, path: str | Path) -> None:
    """``torch.save`` to a temporary name, fsync, then rename: a crash never leaves half a state file.
    A full disk raises DiskFull naming the folder and removes the partial temporary file."""
    import torch

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with disk_full_as_error(path.parent, f"saving {path.name}"):
        # Through a Python file, not a path: torch's own writer turns ENOSPC into an
        # "iostream error"; a Python file's OSError stays on the chain of torch's RuntimeError.
        atomic_write(path, lambda f: torch.save(obj, f), tmp=tmp)
