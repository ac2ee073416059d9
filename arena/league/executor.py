"""Where league matches run: a local process pool (default) or Ray (scale-out), one interface.

Each job is a `MatchJob` (match id, game, agent specs, seed, settings); the
worker plays it with the one job runner, which writes the replay atomically
into the league's replay folder, and returns the `MatchResult` (without the
in-memory replay). A worker that dies
loses only the matches it held: the executor reports them as failed and the
league re-queues them. The league never blocks on a slow match: `wait` returns
whatever finished within its timeout. A full disk is not a failed match: `wait`
raises the worker's `DiskFull` at once (re-queueing would only fail the same way
until the matches are marked failed); matches whose replays made it to disk are
committed from them on the next run.

Pool workers die with the league, even on ``kill -9`` (see `arena.procs`).
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import tempfile
from typing import TYPE_CHECKING, Any

from arena.errors import DiskFull
from arena.procs import die_with, forkserver_preload

if TYPE_CHECKING:
    from arena.match.loop import MatchResult
    from arena.match.runner import MatchJob

_CORES: dict[tuple, Any] = {}
_AGENTS: dict[tuple, Any] = {}


class WorkerLost(RuntimeError):
    """The process running a match died before returning it."""


def run_job(job: MatchJob) -> MatchResult:
    """Play one league match in a worker through the one job runner (game cores and agents cached
    per process: a league replays the same few specs thousands of times)."""
    from arena.agents.base import derive_seed
    from arena.agents.specs import make_agent
    from arena.envs.registry import load_plugin, make_core
    from arena.match.runner import run_match_job

    for mod in job.plugins:
        load_plugin(mod)
    gkey = (job.game, repr(sorted(job.game_kwargs.items())))
    core = _CORES.get(gkey)
    if core is None:
        core = _CORES[gkey] = make_core(job.game, **job.game_kwargs)
    agents = []
    for seat, spec in enumerate(job.specs):
        akey = (gkey, spec, seat)
        agent = _AGENTS.get(akey)
        if agent is None:
            if len(_AGENTS) > 256:  # learners add a spec per weights version: keep the cache bounded
                _AGENTS.clear()
            agent = _AGENTS[akey] = make_agent(spec, core, derive_seed(job.seed, seat))
        elif callable(getattr(agent, "reset", None)):
            # A cached agent starts each match as a fresh one would: seeded by the match (the same seed
            # gives the same match whatever the worker played before) and without the last one's state.
            agent.reset(derive_seed(job.seed, seat))
        agents.append(agent)
    return run_match_job(job, agents=agents, core=core)


class InlineExecutor:
    """Runs each job in the calling process: for debugging and exact-order tests."""

    def __init__(self):
        self._done: list[tuple[str, Any]] = []

    def submit(self, job: MatchJob) -> None:
        try:
            self._done.append((job.match_id, run_job(job)))
        except DiskFull:
            raise
        except Exception as e:
            self._done.append((job.match_id, e))

    def wait(self, timeout: float) -> list[tuple[str, Any]]:
        out, self._done = self._done, []
        return out

    def shutdown(self) -> None:
        pass


class LocalExecutor:
    """A process pool sized to the cores; rebuilt if a worker dies."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        self._ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
        self._pool = self._new_pool()
        self._futures: dict[cf.Future, str] = {}

    def _new_pool(self):
        # Workers (and the forkserver) die with this process, even on kill -9 (arena.procs).
        forkserver_preload(self._ctx)
        return cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=self._ctx, initializer=die_with,
                                      initargs=(os.getpid(),))

    def submit(self, job: MatchJob) -> None:
        try:
            fut = self._pool.submit(run_job, job)
        except cf.process.BrokenProcessPool:
            self._pool = self._new_pool()
            fut = self._pool.submit(run_job, job)
        self._futures[fut] = job.match_id

    def wait(self, timeout: float) -> list[tuple[str, Any]]:
        if not self._futures:
            return []
        done, _ = cf.wait(list(self._futures), timeout=timeout, return_when=cf.FIRST_COMPLETED)
        out, broken = [], False
        for fut in done:
            mid = self._futures.pop(fut)
            try:
                out.append((mid, fut.result()))
            except DiskFull:
                raise
            except cf.process.BrokenProcessPool as e:
                broken = True
                out.append((mid, WorkerLost(f"worker process died while playing {mid}: {e}")))
            except Exception as e:
                out.append((mid, e))
        if broken:
            # Every match still held by the dead pool is lost with it; report them all.
            for fut, mid in list(self._futures.items()):
                out.append((mid, WorkerLost(f"worker pool broke while {mid} was queued")))
            self._futures.clear()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()
        return out

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class RayExecutor:
    """The same jobs as Ray tasks: a local Ray with the run's own temp dir, or an existing cluster."""

    def __init__(self, workers: int | None = None, address: str | None = None, temp_dir: str | None = None):
        from arena.errors import require

        self.ray = ray = require("ray", "the Ray backend", "ray")
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"ignore_reinit_error": True, "include_dashboard": False,
                                      "log_to_driver": False}
            if address:
                kwargs["address"] = address
            else:
                kwargs["num_cpus"] = workers or os.cpu_count() or 1
                # Ray's socket paths must stay short: keep its session files under a short temp path.
                kwargs["_temp_dir"] = temp_dir or tempfile.mkdtemp(prefix="arena-ray-")
            ray.init(**kwargs)
        self._remote = ray.remote(max_retries=0)(run_job)
        self._refs: dict[Any, str] = {}

    def submit(self, job: MatchJob) -> None:
        self._refs[self._remote.remote(job)] = job.match_id

    def wait(self, timeout: float) -> list[tuple[str, Any]]:
        if not self._refs:
            return []
        ready, _ = self.ray.wait(list(self._refs), num_returns=len(self._refs), timeout=timeout)
        out = []
        for ref in ready:
            mid = self._refs.pop(ref)
            try:
                out.append((mid, self.ray.get(ref)))
            except Exception as e:  # RayTaskError, WorkerCrashedError: the match is re-queued
                cause = e if isinstance(e, DiskFull) else getattr(e, "cause", None)
                if isinstance(cause, DiskFull):
                    raise cause from e
                out.append((mid, WorkerLost(f"Ray task for {mid} failed: {type(e).__name__}: {e}")))
        return out

    def shutdown(self) -> None:
        for ref in list(self._refs):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:
                pass
        self._refs.clear()


def make_executor(backend: str, workers: int, address: str | None = None, temp_dir: str | None = None):
    if backend == "local":
        return LocalExecutor(workers)
    if backend == "inline":
        return InlineExecutor()
    if backend == "ray":
        return RayExecutor(workers, address, temp_dir)
    raise ValueError(f"unknown backend {backend!r}: local, ray or inline")
