"""Worker processes that die with the process they work for.

A ``kill -9`` of ``arena league run`` used to leave its forkserver, multiprocessing's resource
tracker and every pool worker running forever (parent pid 1). Why they survived, measured on
Python 3.11: a pool worker blocks reading its task queue, but it holds that queue's write end
itself, so it never sees end-of-file; every forkserver child also holds the write end of the
forkserver's "alive" pipe and the resource tracker's pipe, so neither of those two sees
end-of-file either while a worker lives. Once the workers are gone, the forkserver and the
tracker exit by themselves.

So the workers must go, and this module makes them go two ways:

* ``PR_SET_PDEATHSIG`` (Linux): the kernel sends SIGKILL when the parent dies. A forkserver
  worker's parent is the forkserver, not the league, so the forkserver gets it too (it imports
  this module as a preload, see :func:`forkserver_preload`): league dies -> kernel kills the
  forkserver -> kernel kills its workers. This needs no Python code to run in the dying chain,
  so it works even while a worker is stuck in C code holding the GIL.
* a watcher thread in each worker (:func:`die_with`, the pools' initializer) that waits on the
  league's pid (a pidfd where the kernel has them, else polling) and leaves with ``os._exit``
  when it is gone: the same result where prctl is missing (macOS) or the forkserver was started by
  someone else without the preload.

Either way alone passes ``tests/league/test_processes.py``; together they cover each other's gaps.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import sys
import threading
import time
from typing import Any, Callable

PR_SET_PDEATHSIG = 1
#: Exit status of a worker that exits because the process it worked for is gone.
ORPHAN_EXIT = 128 + signal.SIGKILL


def set_pdeathsig(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send `sig` to this process when its parent dies (Linux only; False
    elsewhere or when prctl fails). The parent is the *thread* that created this process: a
    process started from a thread that exits gets the signal then."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _wait_gone(pid: int, fd: int | None, poll: float) -> None:
    if fd is not None:
        poller = select.poll()  # not select(): that fails on fd numbers above 1023
        poller.register(fd, select.POLLIN)
        while not poller.poll():  # a pidfd turns readable when its process exits
            pass
        return
    while True:
        time.sleep(poll)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:  # exists, owned by someone else (a reused pid): keep waiting
            pass


#: What a worker must stop before it leaves (key -> a callable): a game process it launched (StarCraft
#: II's) would otherwise outlive it. Run when the worker is terminated (SIGTERM: a pool closing, a league
#: stopping), when the process it works for is gone (`die_with`'s watcher) and at a normal exit. A
#: SIGKILL runs nothing: such a game is left to its own end.
_CLEANUPS: dict[Any, Callable[[], None]] = {}
_in_worker = False
_on_sigterm = False
_at_exit_registered = False


def at_exit(key: Any, fn: Callable[[], None]) -> None:
    """Run `fn` before this process leaves (see `_CLEANUPS`), until `forget(key)`. In a pool worker
    this also turns SIGTERM into that cleanup and an exit (only once something registers: other
    workers keep the default)."""
    global _on_sigterm, _at_exit_registered
    if not _at_exit_registered:  # once a process, however often the cleanups come and go
        atexit.register(run_cleanups)
        _at_exit_registered = True
    _CLEANUPS[key] = fn
    if _in_worker and not _on_sigterm and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
        _on_sigterm = True


def forget(key: Any) -> None:
    _CLEANUPS.pop(key, None)


def run_cleanups() -> None:
    for fn in list(_CLEANUPS.values()):
        try:
            fn()
        except Exception:
            pass
    _CLEANUPS.clear()


def _terminated(signum, frame) -> None:
    run_cleanups()
    os._exit(128 + signum)


def die_with(pid: int, poll: float = 0.5) -> None:
    """Make this process exit when process `pid` is gone: PDEATHSIG on the direct parent plus a
    daemon thread that watches `pid`. Used as the initializer of every worker pool, with the pid of
    the process that owns the pool (for a forkserver worker that is not its parent)."""
    global _in_worker
    _in_worker = True
    set_pdeathsig()
    if pid == os.getpid():
        return
    # The owner may have died before prctl above (then no signal comes): the watcher sees that too.
    try:
        fd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:  # already gone (it died while this worker was starting)
        os._exit(ORPHAN_EXIT)
    except (AttributeError, OSError):  # no pidfds here (macOS, old kernels): poll
        fd = None

    def watch() -> None:
        _wait_gone(pid, fd, poll)
        run_cleanups()
        os._exit(ORPHAN_EXIT)

    threading.Thread(target=watch, name=f"arena-die-with-{pid}", daemon=True).start()


def forkserver_preload(ctx) -> None:
    """Have `ctx`'s forkserver (if this call starts it) die with this process.

    The forkserver imports its preload modules before serving; importing this module there sets
    PDEATHSIG (below). It is started here, in the calling thread, because PDEATHSIG fires when
    the creating *thread* exits: only the main thread lives as long as the process, so from any
    other thread the forkserver is started without the preload. A forkserver already running is
    left as it is (the workers' watcher threads still take them down)."""
    from multiprocessing import forkserver

    if ctx.get_start_method() != "forkserver":
        return
    # multiprocessing keeps no public getter; '__main__' is its default preload
    mods = [m for m in getattr(forkserver._forkserver, "_preload_modules", ["__main__"]) if m != __name__]
    if threading.current_thread() is threading.main_thread():
        mods.append(__name__)
    ctx.set_forkserver_preload(mods)
    forkserver.ensure_running()


def _imported_by_forkserver() -> bool:
    """True while multiprocessing's forkserver itself (not one of its children) imports us."""
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        if code.co_filename.endswith(os.path.join("multiprocessing", "forkserver.py")):
            if code.co_name == "_serve_one":  # a forked child of the forkserver
                return False
            if code.co_name == "main":
                return True
        f = f.f_back
    return False


if _imported_by_forkserver():
    set_pdeathsig()
