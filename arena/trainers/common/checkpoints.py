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


#: The ``format`` key of an optimizer state keyed by parameter name (see :func:`named_optimizer_state`).
NAMED_OPTIMIZER = "arena-named-optimizer/1"


def named_optimizer_state(native: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """An optimizer's ``state_dict()`` with parameter names in the place of its indices.

    ``names[i]`` is the name of the optimizer's i-th parameter (torch numbers them across the
    param groups in order). Every parallel setting writes and reads this form, so an optimizer
    saved by one split of the model (one process, pipeline stages, shards) loads into another.
    """
    if sum(len(g["params"]) for g in native["param_groups"]) != len(names):
        raise ValueError(f"the optimizer has {sum(len(g['params']) for g in native['param_groups'])} parameters, "
                         f"but {len(names)} names were given")
    return {"format": NAMED_OPTIMIZER,
            "state": {names[i]: s for i, s in native["state"].items()},
            "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in native["param_groups"]]}


#: The hyper-parameters a saved optimizer state brings along; the live optimizer keeps its other
#: options (fused, foreach, ...: how it runs, which differs between parallel settings).
HYPER = ("lr", "betas", "eps", "weight_decay")


def optimizer_groups(saved: list[dict[str, Any]], live: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The live optimizer's param groups with the saved groups' :data:`HYPER` (and their ``params``)."""
    if len(saved) != len(live):
        raise ValueError(f"the saved optimizer has {len(saved)} parameter groups, this one {len(live)}")
    return [{**{k: v for k, v in lg.items() if k != "params"}, **{k: sg[k] for k in HYPER if k in sg},
             "params": sg["params"]} for sg, lg in zip(saved, live)]


def native_optimizer_state(named: dict[str, Any], names: list[str],
                           live: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """:func:`named_optimizer_state` inverted for an optimizer whose i-th parameter is ``names[i]``
    (``live``: its param groups, whose run options are kept; see :func:`optimizer_groups`).

    A saved parameter name the optimizer lacks (or the other way round) is a ``ValueError``
    naming it: the checkpoint is of another model.
    """
    index = {n: i for i, n in enumerate(names)}
    saved = [n for g in named["param_groups"] for n in g["params"]]
    missing, extra = sorted(set(names) - set(saved)), sorted(set(saved) - set(names))
    if missing or extra:
        raise ValueError("the saved optimizer state is of another model: "
                         + (f"it lacks {missing[:3]}" if missing else f"it has {extra[:3]} this model lacks"))
    groups = named["param_groups"] if live is None else optimizer_groups(named["param_groups"], live)
    return {"state": {index[n]: s for n, s in named["state"].items()},
            # torch pairs saved and live parameters by position: each group in the live order
            "param_groups": [{**g, "params": sorted(index[n] for n in g["params"])} for g in groups]}
