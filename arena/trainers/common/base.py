"""The one trainer lifecycle, and the config fields every trainer has.

TRL's config + trainer pairs (``GRPOConfig``/``GRPOTrainer``) are the model: a trainer's config is a
`TrainerConfig` that nests what the trainer's parts need (the neural-policy learner's settings under
``learner:``), and a trainer is a `Trainer`, whose base owns what every trainer does the same way:

* the run folder, its ``latest`` checkpoint (read back on start: `latest_state`) and the atomic
  checkpoint write (`checkpoint`: the subclass's `save` into ``checkpoints/iter-NNNNN`` under one
  disk-full guard, then ``latest`` re-pointed);
* ``best`` (`track_best`, `set_best`: ``best.json`` written atomically and the ``best`` link);
* the metrics logger (``metrics.jsonl`` and TensorBoard) and the learning curves;
* progress: ``run(iterations=None, progress=None, phase=None)``, the same for every trainer, with
  ``progress(it, last, metrics)`` after each iteration and ``phase(text, done, total)`` inside one;
* stopping: `request_stop` (Ctrl-C, SIGTERM) finishes the iteration, saves it and returns; the
  stop and resume lines (`arena.trainers.common.stopping`);
* the trainer's own seeded generator (`pairing_rng`), which it checkpoints with its state;
* the league, for a trainer that plays in one: `join_league` opens it (or takes a `SharedLeague`'s
  session) from what the trainer declares (`arena.league.session.LeagueSpec`), and exactly-once is
  here, once: `close_iteration` writes the iteration's checkpoint with what the iteration gives the
  league (`Bundle`) and then applies it (one transaction, idempotent on owner and iteration), and
  `reapply` applies a checkpoint's bundle again on resume (a run killed between the two).

A subclass implements its own parts only: `start` (iteration 0), `iterate` (one iteration, with its
own evaluation; returns its metrics line), `save` (its weights and state into a checkpoint folder),
and optionally `on_phase`, `needs_start` and `finish`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from arena.trainers.common.checkpoints import checkpoint_path, link
from arena.trainers.common.stopping import ReportsPhases, resume_line, stop_line

#: ``progress(iteration, last, metrics)``, after each iteration.
Progress = Callable[[int, int, dict], None]
#: ``phase(text, done, total)``, inside an iteration.
Phase = Callable[[str, int, int], None]


@dataclass
class TrainerConfig:
    """What every training config has; a trainer's config subclasses it (and may change the defaults)."""

    #: The registered game id the trainer learns.
    game: str = "openspiel/tic_tac_toe-v0"
    #: Every random draw of the run is seeded from this (same seed, same run).
    seed: int = 0
    #: Iterations to train to (``arena train --iterations`` overrides).
    iterations: int = 10


class Trainer(ReportsPhases):
    """The lifecycle every trainer shares (see the module docstring)."""

    #: Whether the trainer keeps its own ``metrics.jsonl`` (a trainer made of other trainers does not).
    keeps_metrics = True
    #: The metrics drawn in ``curves.png`` at the end of a run (None: `plot_curves`' defaults).
    curve_keys: tuple[str, ...] | None = None
    #: The checkpoint's state file, read back by `latest_state`.
    state_file = "trainer_state.pt"
    #: Iterations done (the latest checkpoint's, on resume); a subclass sets it as it goes.
    iteration: int = 0

    #: The trainer's session with its league (`arena.league.session.LeagueSession`); None for a trainer
    #: that plays in none.
    session: Any = None

    def __init__(self, cfg: Any, directory: str | Path):
        self.cfg = cfg
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        #: Set by `request_stop` (Ctrl-C in `arena train`): the loop saves the iteration and stops after it.
        self.stop_requested = False
        #: True while `run` is inside its iterations (a stop asked before waits for none).
        self.in_loop = False
        self.latest = self.dir / "latest"
        self.metrics = None
        if self.keeps_metrics:
            from arena.trainers.common.metrics import MetricsLogger

            self.metrics = MetricsLogger(self.dir)

    # -- the run folder --------------------------------------------------------------------------
    def latest_state(self, map_location: Any = None) -> dict | None:
        """The state of the ``latest`` checkpoint (None: a new run)."""
        if not self.latest.exists():
            return None
        import torch

        return torch.load(self.latest.resolve() / self.state_file, map_location=map_location, weights_only=False)

    def checkpoint_dir(self, it: int) -> Path:
        return self.dir / checkpoint_path(it)

    def checkpoint(self, it: int, **extra: Any) -> Path:
        """Write iteration `it`'s checkpoint (`save`) and point ``latest`` at it. A full disk is one line
        and leaves ``latest`` at the previous, complete checkpoint."""
        from arena.fsio import disk_full_as_error

        rel = checkpoint_path(it)
        with disk_full_as_error(self.dir, f"saving checkpoint {rel}"):
            self.save(self.dir / rel, it, **extra)
        link(self.dir, "latest", rel)
        return self.dir / rel

    def save_state(self, folder: Path, state: dict) -> None:
        """The trainer's state file in a checkpoint folder, written atomically (with the bundle
        `close_iteration` is about to apply)."""
        from arena.trainers.common.checkpoints import save_torch_atomic

        save_torch_atomic({**state, "league_bundle": getattr(self, "_closing", None)}, folder / self.state_file)

    # -- the league ---------------------------------------------------------------------------------
    def join_league(self, kind: str, spec: Any, shared: Any = None) -> None:
        """Open the league the trainer declares (`spec`, a `LeagueSpec`) in its run folder, or take a
        session of `shared` (a `SharedLeague` several trainers play in). The players the trainer adds are
        recorded under its owner name, `kind` and where the run folder sits in the league's folder."""
        from arena.league.session import open_session
        from arena.trainers.common.stopping import owner_name

        #: The league's folder: the run folder, or a shared league's.
        self.league_dir = Path(shared.dir) if shared is not None else self.dir
        #: The owner of the players this trainer adds to the league: the league's config sync never retires them.
        self.owner = owner_name(kind, self.dir, self.league_dir)
        self.session = shared.session(self.owner) if shared is not None else open_session(spec, self.dir, self.owner)

    def close_iteration(self, it: int, bundle: Any, **extra: Any) -> Path:
        """Iteration `it`'s checkpoint (`checkpoint`), holding `bundle` (what the iteration gives the
        league), then `bundle` applied in one transaction. A run killed between the two applies it on
        resume (`reapply`); one killed before the checkpoint plays the iteration again; the league
        applies an owner's iteration once. `extra` goes to `save`. Returns the checkpoint folder."""
        self._closing = bundle
        try:
            folder = self.checkpoint(it, **extra)
        finally:
            self._closing = None
        self.session.apply(it, bundle)
        return folder

    def reapply(self, state: dict) -> bool:
        """Apply the bundle a checkpoint's state holds, if the league has not (True when it did now)."""
        bundle = state.get("league_bundle")
        return bundle is not None and self.session.apply(int(state["iteration"]), bundle)

    # -- best -------------------------------------------------------------------------------------
    def track_best(self, it: int, metric: str, value: float, **extra: Any) -> bool:
        """Point ``best`` at iteration `it`'s checkpoint if `value` of `metric` beats the recorded one
        (ties keep the earlier; a record of another metric is replaced). ``best.json`` says which and why."""
        prev = self.best_record()
        if prev is not None and prev.get("metric") == metric and value <= prev["value"]:
            return False
        self.set_best({"iteration": it, "metric": metric, "value": value, **extra,
                       "checkpoint": str(checkpoint_path(it))})
        return True

    def best_record(self) -> dict | None:
        path = self.dir / "best.json"
        return json.loads(path.read_text()) if path.exists() else None

    def set_best(self, record: dict) -> None:
        """Write ``best.json`` (atomically) and point ``best`` at ``record["checkpoint"]``."""
        from arena.fsio import atomic_write_bytes

        atomic_write_bytes(self.dir / "best.json", json.dumps(record, indent=1).encode())
        link(self.dir, "best", Path(record["checkpoint"]))

    # -- stopping and resuming ------------------------------------------------------------------
    def request_stop(self) -> bool:
        """Ask the loop to stop after the current iteration (saved first). False when that cannot be
        waited for (not in the loop yet, or asked already): the caller stops at once."""
        if self.in_loop and not self.stop_requested:
            self.stop_requested = True
            return True
        return False

    def resume_line(self) -> str | None:
        return resume_line(self.dir, self.cfg.iterations)

    def stop_line(self) -> str:
        return stop_line(self.dir)

    def pairing_rng(self) -> Any:
        """The trainer's own generator for its draws (opponents, role resets): seeded by the config's
        seed alone, so a run started again on an existing league draws what a new run does; the
        trainer checkpoints its state."""
        import numpy as np

        return np.random.default_rng([self.cfg.seed, 0])

    # -- the loop --------------------------------------------------------------------------------
    def run(self, iterations: int | None = None, progress: Progress | None = None,
            phase: Phase | None = None) -> dict[str, float]:
        """Train to iteration `iterations` (default: the config's), resuming where the run folder left
        off; ``progress(it, last, metrics)`` after each iteration, ``phase(text, done, total)`` inside
        one. Returns the last iteration's metrics."""
        last = self.cfg.iterations if iterations is None else iterations
        self._phase = phase
        self.on_phase(phase)
        result: dict[str, float] = {}
        if self.needs_start():
            result = self.start(last) or {}
        self.in_loop = True
        stopped = False
        try:
            for it in range(self.iteration + 1, last + 1):
                result = self.iterate(it, last)
                if progress is not None:
                    progress(it, last, result)
                if self.stop_requested:
                    self.save_finished(it)
                    stopped = True
                    break
        finally:
            self.in_loop = False
        self.finish(last, stopped)
        return result

    def save_finished(self, it: int) -> None:
        """Before a stop: iteration `it` checkpointed if it is not yet (finished iterations are not
        redone on resume)."""
        if not self.checkpoint_dir(it).is_dir():
            self.checkpoint(it)

    def needs_start(self) -> bool:
        """Whether `start` is still to be done (default: nothing saved yet)."""
        return self.iteration == 0 and not self.latest.exists()

    def on_phase(self, phase: Phase | None) -> None:
        """Hand `phase` to the trainer's parts (a learner's passes); called at the start of `run`."""

    def start(self, last: int) -> dict[str, float] | None:
        """Iteration 0: what comes before the first update (imitation, a first evaluation, the first
        checkpoint). Returns metrics (or None)."""
        return None

    def iterate(self, it: int, last: int) -> dict[str, float]:
        """Iteration `it` of `last`: play, learn, evaluate, checkpoint. Returns its metrics line."""
        raise NotImplementedError

    def save(self, folder: Path, it: int, **extra: Any) -> None:
        """Write the trainer's weights and state into checkpoint folder `folder`."""
        raise NotImplementedError

    def finish(self, last: int, stopped: bool) -> None:
        """After the loop (default: the learning curves, once the config's last iteration is done)."""
        if self.iteration >= self.cfg.iterations:
            self.plot_curves()

    def plot_curves(self) -> None:
        if self.metrics is None:
            return
        from arena.trainers.common.metrics import plot_curves

        if self.curve_keys is None:
            plot_curves(self.metrics.path, self.dir / "curves.png")
        else:
            plot_curves(self.metrics.path, self.dir / "curves.png", keys=self.curve_keys)

    def close(self) -> None:
        """Close the metrics and the league session (the league itself if the trainer opened it)."""
        try:
            if self.session is not None:
                self.session.close()
        finally:
            if self.metrics is not None:
                self.metrics.close()
