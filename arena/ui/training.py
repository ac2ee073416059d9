"""`arena train` at the terminal: the trainer a config names, made and resumed; its run with two
progress bars (iterations, and what the iteration is doing now); a safe Ctrl-C; the lines it ends with.

Ctrl-C once finishes the current iteration, checkpoints it and stops; twice (or before the first
iteration starts) stops at once, the last checkpoint standing. Either way the same command resumes."""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from arena.ui.progress import learning_signals


@dataclass
class TrainRequest:
    """The run `arena train` is asked for: a config, a run folder and the options that override the config."""

    config: Path
    directory: Path
    model: Optional[str] = None
    loss: Optional[str] = None
    iterations: Optional[int] = None
    parallel: Optional[str] = None
    world_size: Optional[int] = None
    stages: Optional[int] = None
    schedule: Optional[str] = None
    microbatches: Optional[int] = None
    vocab_parallel: Optional[bool] = None


@dataclass
class Training:
    """A trainer made from its config (`entry` is its registry entry, `cfg` its config)."""

    entry: Any
    cfg: Any
    trainer: Any


def make_training(req: TrainRequest) -> Training:
    """The trainer `req.config` names (its `trainer:` key), its config overridden by `req`'s options;
    a bad config or option is a ConfigError naming it."""
    from arena.trainers.parallel.learner import parallel_overrides
    from arena.trainers.registry import read_train_config

    par = parallel_overrides(req.parallel, req.world_size, req.stages, req.schedule, req.microbatches,
                             vocab_parallel=req.vocab_parallel)
    entry, cfg = read_train_config(req.config, model=req.model,
                                   learner={"loss": req.loss} if req.loss is not None else None,
                                   iterations=req.iterations, parallel=par)
    return Training(entry, cfg, entry.make(cfg, req.directory))


def train_with_progress(t: Training, console: Console) -> Optional[dict]:
    """Run the trainer to its last iteration with progress bars on `console`: its final metrics, or None
    when Ctrl-C stopped it (said on the console). The trainer is closed either way."""
    _say_setup(t, console)
    trainer = t.trainer
    cols = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
            TimeElapsedColumn())
    old_handler = signal.signal(signal.SIGINT, _on_sigint(trainer, console))
    interrupted = False
    try:
        with Progress(*cols, console=console) as progress:
            task = progress.add_task("train", total=t.cfg.iterations, completed=trainer.iteration, info="")
            # The second bar: what the iteration is doing now (rollout, update, evaluation, imitation), with a rate.
            step = progress.add_task("", total=None, info="", visible=False)
            show = _show_iteration(progress, task)
            phase = _show_phase(progress, step, console)
            final = trainer.run(progress=show, phase=phase)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        signal.signal(signal.SIGINT, old_handler)
        trainer.close()
    if interrupted or trainer.stop_requested:
        console.print(("\n" if console.is_terminal else "") + escape(trainer.stop_line()), style="yellow",
                      soft_wrap=True)
        return None
    return final


def _say_setup(t: Training, console: Console) -> None:
    """How the learner's step is shared out (with --parallel), and where a resumed run starts from."""
    pcfg = getattr(t.cfg, "parallel", None)
    if pcfg is not None and pcfg.mode != "none":
        what = (f"schedule {pcfg.schedule}" + (", vocabulary parallel" if pcfg.vocab_parallel else "")
                if pcfg.mode == "pipeline" else f"{pcfg.microbatches} microbatches a rank"
                if t.entry.name == "spiral" else "each minibatch shared out")
        console.print(f"learner step: {pcfg.mode} on {pcfg.world_size} ranks ({what}); rollouts on rank 0")
    resuming = t.trainer.resume_line()
    if resuming is not None:
        console.print(escape(resuming), soft_wrap=True)


def _on_sigint(trainer: Any, console: Console) -> Callable[[int, Any], None]:
    def on_sigint(signum, frame):
        # First Ctrl-C: finish the current iteration, checkpoint it, stop. A second one (or one before the
        # first iteration starts) stops at once; the last checkpoint stands.
        if trainer.request_stop():
            console.print("[yellow]stopping after this iteration[/] (Ctrl-C again to stop at once)")
            return
        raise KeyboardInterrupt
    return on_sigint


def _show_iteration(progress: Progress, task: Any) -> Callable[[int, int, dict], None]:
    """The first bar's callback: the iteration reached and its figures (return, invalid moves, the
    evaluation's win rate, or a single-agent task's return, rate and evaluation), and `learning_signals`."""
    def show(it, total, m):
        wr = next((f"win {v:.2f} vs {k.split('/')[-1]}" for k, v in m.items() if k.startswith("eval/win_rate")), "")
        if "train/invalid_rate" in m or wr:
            info = f"return {m.get('train/return', 0):+.2f} invalid {m.get('train/invalid_rate', 0):.2f} {wr}"
        else:  # a single-agent task: returns only
            info = f"return {m.get('train/return', float('nan')):+.1f}"
            if "eval/return" in m:
                info += f" eval {m['eval/return']:+.1f}"
            if "train/samples_per_s" in m:
                info += f" {m['train/samples_per_s']:.0f} samples/s"
        signals = learning_signals(m)
        progress.update(task, description="train", completed=it, info=f"{info} | {signals}" if signals else info)
    return show


@dataclass
class _PhaseClock:
    """The phase now shown, since when, and the count it started from (for its rate)."""

    text: Optional[str] = None
    t: float = 0.0
    done: int = 0
    first: int = 0
    milestones: set = field(default_factory=set)


def _show_phase(progress: Progress, step: Any, console: Console) -> Callable[[str, int, int], None]:
    """The second bar's callback: the phase ("rollout: samples"), its count and how fast it goes. In a
    log (not a terminal) imitation also writes a line per epoch and per quarter of its matches."""
    since = _PhaseClock()

    def phase(text, done, total):
        stage, _, what = text.partition(":")
        what = what.strip()
        now = time.monotonic()
        if text != since.text or done < since.done:
            since.text, since.t, since.done, since.first = text, now, done, done
        since.done = done
        rate = (done - since.first) / (now - since.t) if now > since.t else 0.0
        info = what
        if what and " " not in what:  # "rollout: samples": the count's unit, and how fast it goes
            info = f"{what}, {rate:,.1f} {what}/s" if rate < 10 else f"{what}, {rate:,.0f} {what}/s"
        progress.update(step, description=stage, completed=done, total=max(total, 1), info=info, visible=True)
        if stage != "imitation":
            return
        if not console.is_terminal:  # a log (a pipe, CI): a line per epoch and per quarter of the matches
            quarter = (text, 4 * done // max(total, 1))
            if "epoch" in text or quarter not in since.milestones:
                since.milestones.add(quarter)
                progress.console.print(f"{text} ({done}/{total})")
    return phase


def training_summary(final: dict, directory: Path) -> Iterator[str]:
    """The lines a finished run ends with: its evaluation figures, its best checkpoint (from best.json)
    and where its checkpoints, curves and logs are."""
    for k in sorted(final):
        if k.startswith("eval/"):
            yield f"{k}: {final[k]:.3f}"
    best_json = directory / "best.json"
    if best_json.exists():
        best = json.loads(best_json.read_text())
        line = f"best: iteration {best['iteration']} ({best['metric']} {best['value']:.3f} in the run"
        if "confirm" in best:
            line += f"; {best['confirm']['win_rate']:.3f} on {best['confirm']['games']} fresh games"
        yield line + f") -> {directory}/best"
    yield (f"Run folder: {directory} (latest checkpoint: {directory}/latest; curves: {directory}/curves.png; "
           f"tensorboard --logdir {directory})")
