"""What every trainer says when it stops and starts again (one line each, the same for all of them),
how it reports progress inside an iteration, and whose the players it adds to a league are.

``arena train`` and ``python -m arena.trainers.run`` print these; the iteration is the one the run
folder's ``latest`` link points at, which is where the same command resumes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def saved_iteration(run_dir: str | Path) -> int | None:
    """The iteration of the run folder's ``latest`` checkpoint (None: nothing saved yet)."""
    latest = Path(run_dir) / "latest"
    if not latest.exists():
        return None
    name = latest.resolve().name  # checkpoints/iter-NNNNN
    return int(name.removeprefix("iter-")) if name.startswith("iter-") else None


def stop_line(run_dir: str | Path) -> str:
    """The line a stopped run prints (exit status 130)."""
    it = saved_iteration(run_dir)
    if it is None:
        # (a trainer's imitation matches played so far are kept: the same command plays only the rest)
        return "stopped before iteration 0 was saved: run the same command again to resume"
    return f"stopped at iteration {it}: run the same command again to resume ({Path(run_dir) / 'latest'})"


def resume_line(run_dir: str | Path, total: int) -> str | None:
    """The line a run started on a folder with a checkpoint prints first (None: a new run)."""
    it = saved_iteration(run_dir)
    if it is None:
        return None
    return f"resuming from iteration {it} of {total} ({Path(run_dir) / 'latest'})"


class ReportsPhases:
    """A trainer that reports progress inside an iteration: ``run(phase=...)`` sets `_phase`, a
    ``phase(text, done, total)`` callable (None: nothing reported), and the trainer calls `_show`."""

    _phase: Callable[[str, int, int], None] | None = None

    def _show(self, text: str, done: int, total: int) -> None:
        if self._phase is not None:
            self._phase(text, done, total)


def owner_name(kind: str, run_dir: str | Path, league_dir: str | Path) -> str:
    """The owner a trainer of `kind` records on the players it adds to its league: `kind` when the run
    folder is the league's, else ``kind:RELATIVE/PATH`` (where the run sits in the league's folder, the
    same when the league's folder moves)."""
    rel = os.path.relpath(Path(run_dir).resolve(), Path(league_dir).resolve())
    return kind if rel == "." else f"{kind}:{Path(rel).as_posix()}"
