"""Run one function on every rank of a process group: local processes, or torchrun's.

:func:`launch` ``(fn, world_size, args)`` calls ``fn(info, *args)`` on each rank, where
``info`` is a :class:`RankInfo`, and returns the list of what each rank returned, in rank
order.

* **Local (default).** ``world_size`` processes are started with ``torch.multiprocessing``
  (``spawn``) on this machine, joined in a process group on a free localhost port: gloo on
  CPU, NCCL when CUDA is available (one GPU per rank, ``cuda:rank``). Each process gets
  ``threads`` torch threads (default 1) and ``OMP_WAIT_POLICY=PASSIVE``: several torch
  processes sharing a few cores otherwise lose most of their time to busy-waiting OpenMP
  threads (FACTS: a rollout went from 0.7 s to 25 s). Return values travel back through
  ``torch.save`` files in a temporary folder (no pipe to fill up and deadlock), so they
  must be picklable; tensors should be on the CPU.
* **torchrun.** When ``RANK`` and ``WORLD_SIZE`` are in the environment this process is
  one rank already: the group is joined from the environment (``env://``; an existing
  default group is used as it is), ``fn`` runs once here, and the results of all ranks
  are exchanged with ``all_gather_object`` so every rank returns the same list.

A rank that raises ends the run: the other processes are stopped and :class:`ParallelError`
names the rank and carries its traceback. A run that outlives ``timeout_s`` is stopped the
same way. The process group is always destroyed (unless it was there before ``launch``).

``fn`` must be importable by name (a module-level function; a script's ``__main__``
functions work when the script guards its entry point with ``if __name__ == "__main__"``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from arena.errors import ArenaError

BACKENDS = ("gloo", "nccl")


class ParallelError(ArenaError, RuntimeError):
    """A rank failed, the run timed out, or the process group could not be set up."""


@dataclass(frozen=True)
class RankInfo:
    """Where ``fn`` runs: its rank, the group size, the backend and the torch device for it."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: str  # "cpu" or "cuda:N"
    launcher: str  # "spawn" or "torchrun"


def free_port() -> int:
    """A TCP port on localhost that nothing listens on (there is a small race until rank 0 binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_torchrun(env: dict[str, str] | None = None) -> bool:
    """True when this process was started by torchrun (or anything that sets RANK and WORLD_SIZE)."""
    env = os.environ if env is None else env
    return "RANK" in env and "WORLD_SIZE" in env


def default_backend() -> str:
    """NCCL when torch sees a CUDA device, else gloo."""
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


def _check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ParallelError(f"unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if backend == "nccl":
        import torch

        if not torch.cuda.is_available():
            raise ParallelError("backend nccl needs CUDA, but torch sees no GPU: use backend gloo")
    return backend


def _device_for(backend: str, local_rank: int) -> str:
    if backend != "nccl":
        return "cpu"
    import torch

    n = torch.cuda.device_count()
    if local_rank >= n:
        raise ParallelError(f"rank {local_rank} needs cuda:{local_rank}, but torch sees {n} GPU(s): run fewer ranks")
    torch.cuda.set_device(local_rank)
    return f"cuda:{local_rank}"


def launch(fn: Callable[..., Any], world_size: int | None = None, args: Sequence[Any] = (), *,
           backend: str | None = None, timeout_s: float = 600.0, threads: int = 1) -> list[Any]:
    """``[fn(info_0, *args), ..., fn(info_{n-1}, *args)]``, each on its own rank.

    ``world_size`` defaults to 2 for local processes; under torchrun it is taken from the
    environment (a different explicit value is an error). ``backend`` defaults to
    :func:`default_backend`.
    """
    backend = _check_backend(backend or default_backend())
    if in_torchrun():
        return _run_torchrun(fn, world_size, tuple(args), backend, timeout_s, threads)
    n = 2 if world_size is None else int(world_size)
    if n < 1:
        raise ParallelError(f"world_size must be >= 1, got {world_size}")
    return _run_spawn(fn, n, tuple(args), backend, timeout_s, threads)


# --------------------------------------------------------------------------- torchrun


def join_torchrun(backend: str | None = None, timeout_s: float = 600.0, threads: int = 1) -> tuple[RankInfo, bool]:
    """Join the process group torchrun described in the environment (``env://``); an existing
    default group is used as it is. Returns (this rank's info, whether this call created the group)."""
    import torch
    import torch.distributed as dist

    backend = _check_backend(backend or default_backend())
    world = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    torch.set_num_threads(threads)
    owned = not dist.is_initialized()
    if owned:
        device = _device_for(backend, local_rank)
        dist.init_process_group(backend, init_method="env://", timeout=timedelta(seconds=timeout_s))
    else:
        backend = dist.get_backend()
        device = _device_for(backend, local_rank)
    return RankInfo(rank, world, local_rank, backend, device, "torchrun"), owned


def _run_torchrun(fn, world_size, args, backend, timeout_s, threads) -> list[Any]:
    import torch.distributed as dist

    env_world = int(os.environ["WORLD_SIZE"])
    if world_size is not None and int(world_size) != env_world:
        raise ParallelError(f"launch asked for {world_size} ranks, but torchrun started {env_world}: "
                            f"pass --nproc-per-node {world_size} to torchrun or drop world_size")
    info, owned = join_torchrun(backend, timeout_s, threads)
    try:
        try:
            result = fn(info, *args)
        except Exception as e:
            raise ParallelError(f"rank {info.rank} of {env_world} failed: {type(e).__name__}: {e}") from e
        gathered: list[Any] = [None] * env_world
        dist.all_gather_object(gathered, result)
        return gathered
    finally:
        if owned:
            dist.destroy_process_group()


# --------------------------------------------------------------------------- local processes


def _spawned(rank: int, fn, args, world_size: int, backend: str, port: int, out: str, threads: int,
             timeout_s: float) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set (only allowed once per process)
        pass
    device = _device_for(backend, rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=timeout_s))
    try:
        result = fn(RankInfo(rank, world_size, rank, backend, device, "spawn"), *args)
        tmp = Path(out) / f".rank{rank}.pt"
        torch.save(result, tmp)
        os.replace(tmp, Path(out) / f"rank{rank}.pt")
        # every rank done before any tears its group down: a rank destroying its group while a peer's
        # last transfer is in flight can abort the peer in native code ("terminate called ...")
        dist.barrier()
    except BaseException:
        # When one rank fails its peers fail soon after (a closed connection): the first
        # failure in time is the cause, so each failure is stamped.
        (Path(out) / f"rank{rank}.err").write_text(json.dumps({"time": time.time(), "traceback": traceback.format_exc()}))
        raise
    finally:
        dist.destroy_process_group()


def _run_spawn(fn, n, args, backend, timeout_s, threads) -> list[Any]:
    import torch
    import torch.multiprocessing as mp

    out = tempfile.mkdtemp(prefix="arena-launch-")
    try:
        with _child_env(threads):
            ctx = mp.start_processes(_spawned, args=(fn, args, n, backend, free_port(), out, threads, timeout_s),
                                     nprocs=n, join=False, start_method="spawn")
        deadline = time.monotonic() + timeout_s
        try:
            while not ctx.join(timeout=0.2, grace_period=5.0):
                if time.monotonic() > deadline:
                    _stop(ctx)
                    raise ParallelError(f"{n} ranks of {getattr(fn, '__qualname__', fn)} did not finish within "
                                        f"{timeout_s:.0f} s: stopped them (raise timeout_s if the work is that long)")
        except mp.ProcessRaisedException as e:
            rank, text = _first_failure(out, e.error_index, e.msg)
            raise ParallelError(f"rank {rank} of {n} failed running {getattr(fn, '__qualname__', fn)}:"
                                f"{_tail(text)}") from None
        except mp.ProcessExitedException as e:
            raise ParallelError(f"rank {e.error_index} of {n} died: {e} (killed for memory, or a crash in native "
                                f"code; the other ranks were stopped)") from None
        results = []
        for r in range(n):
            f = Path(out) / f"rank{r}.pt"
            if not f.is_file():
                raise ParallelError(f"rank {r} of {n} finished without a result")
            results.append(torch.load(f, weights_only=False))
        return results
    finally:
        shutil.rmtree(out, ignore_errors=True)


@contextlib.contextmanager
def _child_env(threads: int):
    """The environment spawned ranks start with (they copy it when they start): ``threads`` OpenMP
    threads that sleep when idle (see the module doc)."""
    child_env = {"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    saved = {k: os.environ.get(k) for k in child_env}
    os.environ.update(child_env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _stop(ctx) -> None:
    """Stop the processes this launch started (by their own handles), then reap them."""
    _stop_processes(ctx.processes)


def _stop_processes(processes) -> None:
    for p in processes:
        if p.is_alive():
            p.terminate()
    for p in processes:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join(5)


def _failure_stamp(out: str) -> tuple[int, str] | None:
    """The rank that failed first (by the stamps the ranks wrote in ``out``) and its traceback."""
    stamps = []
    for f in Path(out).glob("rank*.err"):
        try:
            d = json.loads(f.read_text())
            stamps.append((d["time"], int(f.stem[4:]), d["traceback"]))
        except (OSError, ValueError, KeyError):
            continue
    if not stamps:
        return None
    _, first, text = min(stamps)
    return first, text


def _first_failure(out: str, rank: int, msg: str) -> tuple[int, str]:
    return _failure_stamp(out) or (rank, msg)


def _tail(msg: str, lines: int = 40) -> str:
    """The failing rank's traceback, at most the last ``lines`` lines."""
    text = msg.rstrip().splitlines()
    return "\n" + "\n".join(text[-lines:]) if text else " (no traceback)"



# --------------------------------------------------------------------------- this process as rank 0


@dataclass
class Workers:
    """Ranks 1 .. N-1 started by :func:`start_workers`, each running ``fn(info, *args)`` to its end."""

    info: RankInfo  # this process: rank 0
    processes: list[Any]
    folder: str  # where a failing rank leaves its traceback

    def failure(self) -> str | None:
        """The first failed rank's name and traceback tail, or None while every rank is alive and well."""
        dead = [(r, p.exitcode) for r, p in enumerate(self.processes, 1) if p.exitcode not in (None, 0)]
        stamp = _failure_stamp(self.folder)
        if stamp:
            rank, text = stamp
            return f"rank {rank} of {self.info.world_size} failed:{_tail(text, 20)}"
        if dead:
            rank, code = dead[0]
            return (f"rank {rank} of {self.info.world_size} died (exit code {code}: killed for memory, or a crash "
                    f"in native code)")
        return None

    def join(self, timeout_s: float = 30.0) -> None:
        """Wait for the ranks to finish (after they were told to stop), then end any that did not."""
        deadline = time.monotonic() + timeout_s
        for p in self.processes:
            p.join(max(0.0, deadline - time.monotonic()))
        _stop_processes(self.processes)
        shutil.rmtree(self.folder, ignore_errors=True)


def _worker_entry(rank: int, fn, args, world_size: int, backend: str, port: int, folder: str, threads: int,
                  timeout_s: float) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    device = _device_for(backend, rank)
    try:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout_s))
        fn(RankInfo(rank, world_size, rank, backend, device, "spawn"), *args)
    except BaseException:
        (Path(folder) / f"rank{rank}.err").write_text(json.dumps({"time": time.time(),
                                                                   "traceback": traceback.format_exc()}))
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def start_workers(fn: Callable[..., Any], world_size: int, args: Sequence[Any] = (), *, backend: str | None = None,
                  timeout_s: float = 1800.0, threads: int = 1) -> Workers:
    """Make this process rank 0 of a new local group of ``world_size`` and start ranks 1 .. N-1.

    Each started rank runs ``fn(info, *args)`` (a module-level function) and ends when it
    returns; this process joins the group and returns at once, so it can lead the others
    (:mod:`arena.trainers.parallel.learner`). ``timeout_s`` is the process group's: how long
    forming the group and any collective may wait for a rank.
    """
    import multiprocessing as mp

    import torch.distributed as dist

    backend = _check_backend(backend or default_backend())
    n = int(world_size)
    if n < 2:
        raise ParallelError(f"start_workers needs world_size >= 2, got {world_size}")
    if dist.is_initialized():
        raise ParallelError("this process is already in a process group: run one parallel learner at a time")
    folder = tempfile.mkdtemp(prefix="arena-ranks-")
    port = free_port()
    ctx = mp.get_context("spawn")
    procs = []
    with _child_env(threads):
        for r in range(1, n):
            p = ctx.Process(target=_worker_entry, args=(r, fn, tuple(args), n, backend, port, folder, threads,
                                                         timeout_s), daemon=True, name=f"arena-rank{r}")
            p.start()
            procs.append(p)
    device = _device_for(backend, 0)
    workers = Workers(RankInfo(0, n, 0, backend, device, "spawn"), procs, folder)
    try:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=n,
                                timeout=timedelta(seconds=timeout_s))
    except BaseException as e:
        why = workers.failure()
        workers.join(0)
        raise ParallelError(f"the {n} ranks could not form a process group: {why or e}") from None
    return workers
