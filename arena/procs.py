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

A local Ray (``--backend ray``, the RLlib trainer) is started by ``ray.init`` in the league's own
process, and Ray's head processes die with it (Ray sets PDEATHSIG on them), but not everything:
measured with Ray 2.60, after a ``kill -9`` of the league the raylet's two agents
(``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) see the raylet gone within 2 s and then spend
60 s trying to report it to the dead GCS before they exit. :func:`start_local_ray` therefore puts the
session's processes under a `SessionReaper`, which kills whatever of the session is left once the
league is gone; it also keeps that Ray on the loopback interface (see its docstring).
"""

from __future__ import annotations

import atexit
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

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


# -- a session of processes that dies with its owner: a local Ray ------------------------------------
#: The environment variable that marks every process of a `SessionReaper`'s session.
SESSION_VAR = "ARENA_SESSION"


class SessionReaper:
    """Kills every process of a session once the process that owns it is gone (even by ``kill -9``),
    or at `stop`.

    A process belongs to the session when either

    * its environment holds ``ARENA_SESSION=<token>`` (the token is random): every process started
      while `marking` is in effect, and everything those start in turn, whatever its parent or process
      group is by then; or
    * it holds a file open for writing below a folder given to `watch` (Ray's session folder, where
      each of its processes writes its logs). This catches the processes that overwrite their
      environment's memory with a longer command line (``setproctitle``: Ray's agents, seen in
      ``/proc/<pid>/environ`` as blanks) and their children, which write to the same log files.

    The reaper is a small child of the owner (`_reap`: this file run in isolated mode, standard library
    only) that waits until the owner exits (a pidfd; else its own parent pid changing) or `stop` is
    called, then SIGKILLs the session's processes (this user's only: it cannot read another's), again
    until none is left. Linux only (it reads ``/proc``): `start` returns None elsewhere."""

    def __init__(self, proc: subprocess.Popen, token: str):
        self._proc = proc
        self.token = token

    @classmethod
    def start(cls) -> "SessionReaper | None":
        if not sys.platform.startswith("linux") or not os.path.isdir("/proc/self/fd"):
            return None
        token = secrets.token_hex(16)
        # -I: neither the working folder nor PYTHONPATH is on its import path (nothing there may run)
        try:
            proc = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__), "--reap", str(os.getpid()),
                                     token], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, close_fds=True)
        except OSError:  # no interpreter to run it with (an embedded Python)
            return None
        return cls(proc, token)

    @contextmanager
    def marking(self) -> Iterator[None]:
        """Processes started from this process while in the block (by any thread) join the session."""
        before = os.environ.get(SESSION_VAR)
        os.environ[SESSION_VAR] = self.token
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(SESSION_VAR, None)
            else:
                os.environ[SESSION_VAR] = before

    def _send(self, line: str) -> None:
        try:
            self._proc.stdin.write(line.encode() + b"\n")
            self._proc.stdin.flush()
        except (OSError, ValueError):  # the reaper is gone already
            pass

    def watch(self, folder: str) -> None:
        """A process that writes to a file below `folder` belongs to the session too."""
        folder = os.path.abspath(folder)
        if "\n" not in folder:
            self._send(f"dir {folder}")

    def stop(self, timeout: float = 30.0) -> None:
        """Kill what is left of the session now and wait (up to `timeout` s) until the reaper is done."""
        self._send("stop")
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _has_env(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:  # empty for a zombie; unreadable: not this user's
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def _writes_below(pid: int, folders: list[str]) -> bool:
    """Whether `pid` holds a file below one of `folders` open for writing."""
    if not folders:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone, or not this user's
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if not any(target == f or target.startswith(f.rstrip(os.sep) + os.sep) for f in folders):
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                flags = next(int(line.split()[1], 8) for line in f if line.startswith("flags:"))
        except (OSError, StopIteration, ValueError, IndexError):
            continue
        if (flags & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR):
            return True
    return False


def _of_session(pid: int, needle: bytes, dirs: list[str], spare: int | None) -> bool:
    if _has_env(pid, needle):
        return True
    # A live owner holds Ray's log files open too, and so does a process it forked (no exec) after Ray
    # started: neither is the session's (nor has the token: a fork's environment is the owner's first one).
    return _writes_below(pid, dirs) and (spare is None or _ppid(pid) != spare)


def _kill(pid: int, needle: bytes, dirs: list[str], spare: int | None) -> bool:
    """SIGKILL `pid` if it (still) belongs to the session: through a pidfd where the kernel has them,
    so a pid reused between the check and the signal is never hit."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except (AttributeError, OSError):
        fd = None
    try:
        if not _of_session(pid, needle, dirs, spare):
            return False
        if fd is not None:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        if fd is not None:
            os.close(fd)


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
        return int(raw[raw.rindex(b")") + 2:].split()[1])  # the command name may hold spaces, parentheses
    except (OSError, ValueError, IndexError):
        return None


def sweep_session(token: str, folders: Sequence[str] = (), spare: int | None = None, rounds: int = 100) -> int:
    """SIGKILL every process (of this user, but this one) of the session `token` (see `SessionReaper`),
    again until a round finds none (a process may start another while its siblings die). `spare`: the
    owner, still alive (a `stop`), with the processes it started itself that are not the session's. How
    many were killed."""
    needle, me, killed = f"{SESSION_VAR}={token}".encode(), os.getpid(), 0
    dirs = [os.path.join(os.path.realpath(f), "") for f in folders]  # as /proc/<pid>/fd shows them
    for _ in range(rounds):
        hit = 0
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in (me, spare) and _of_session(int(name), needle, dirs, spare):
                hit += _kill(int(name), needle, dirs, spare)
        if not hit:
            break
        killed += hit
        time.sleep(0.05)
    return killed


def _reap(owner: int, token: str) -> None:
    """The reaper (`SessionReaper`): take ``dir <folder>`` lines from stdin until `owner` (the parent)
    exits or sends ``stop``; then sweep the session (sparing a live owner and its children)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the owner decides
    folders: list[str] = []
    state = {"pending": b"", "stop": False, "eof": False}

    def drain() -> None:  # what the owner wrote so far (it may have died before this process ran)
        while not state["eof"]:
            try:
                data = os.read(0, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:  # the owner closed it: at stop, or dying
                state["eof"] = True
            *lines, state["pending"] = (state["pending"] + data).split(b"\n")
            for line in lines:
                if line.startswith(b"dir "):
                    folders.append(os.fsdecode(line[4:]))
                elif line == b"stop":
                    state["stop"] = True

    os.set_blocking(0, False)  # a process the owner forked may hold the pipe open: never wait on it
    try:
        fd: int | None = os.pidfd_open(owner)
    except (AttributeError, OSError):
        fd = None
    if os.getppid() == owner:  # else the owner died already (and the pidfd may be of a reused pid)
        poller = select.poll()
        poller.register(0, select.POLLIN)
        if fd is not None:
            poller.register(fd, select.POLLIN)  # readable once the owner has exited
        while os.getppid() == owner:
            events = dict(poller.poll(None if fd is not None else 500))
            if 0 in events and not state["eof"]:
                drain()
                if state["eof"]:
                    poller.unregister(0)
            if state["stop"] or (fd is not None and fd in events):
                break
    drain()
    sweep_session(token, folders, spare=owner if state["stop"] and os.getppid() == owner else None)


#: Where a local Ray listens: the loopback interface only.
RAY_LOCAL_IP = "127.0.0.1"
_ray_reaper: SessionReaper | None = None


def start_local_ray(ray: Any, **kwargs: Any) -> None:
    """``ray.init(**kwargs)`` a new Ray on this machine, for this process only: it listens on the
    loopback interface only, and none of its processes outlives this one (a `SessionReaper`; end it
    with `stop_local_ray`). Joining a cluster is ``ray.init(address=...)``, not this.

    Ray has no setting that does this (2.60): given ``_node_ip_address="127.0.0.1"``, ``ray.init``
    replaces it with the machine's external address (``services.resolve_ip_for_localhost``) unless
    Ray's "cluster" switch is off, as it is by default on macOS and Windows
    (``ray_constants.ENABLE_RAY_CLUSTER``, from ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``); it is turned
    off here while ``ray.init`` runs, and nowhere else. Every process then gets 127.0.0.1 as its node
    address: the GCS, the raylet and the workers bind their gRPC servers there, the agents, the
    autoscaler's monitor and the dashboard's head their ports. Without it they listen on every
    interface (``::``, ``0.0.0.0``) or the external address. ``address="local"``: a ``RAY_ADDRESS`` in
    the environment does not turn this into joining that cluster. Raises `ArenaError` (after shutting
    that Ray down) if the node address is not the loopback one after all (a Ray that changed this)."""
    global _ray_reaper
    from arena.errors import ArenaError

    if _ray_reaper is not None:  # a Ray started here before and shut down by someone else
        _ray_reaper.stop()
        _ray_reaper = None
    kwargs = {**kwargs, "address": "local", "_node_ip_address": RAY_LOCAL_IP}
    kwargs.setdefault("include_dashboard", False)
    try:
        from ray._private import ray_constants
    except ImportError:  # a Ray without it: the check below decides
        ray_constants = None
    cluster = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    reaper = SessionReaper.start()
    if reaper is not None and kwargs.get("_temp_dir"):
        reaper.watch(kwargs["_temp_dir"])  # until the session's own folder is known (below)
    try:
        if cluster is not None:
            ray_constants.ENABLE_RAY_CLUSTER = False
        try:
            if reaper is not None:
                with reaper.marking():
                    context = ray.init(**kwargs)
            else:
                context = ray.init(**kwargs)
        finally:
            if cluster is not None:
                ray_constants.ENABLE_RAY_CLUSTER = cluster
        session = (getattr(context, "address_info", None) or {}).get("session_dir")
        if reaper is not None and session:
            reaper.watch(session)
        # Ray makes its temp and session folders writable by everyone (0777: for a machine shared by
        # several users' Rays): this one is ours alone. (A caller keeps the window of ray.init closed by
        # putting `_temp_dir` in a private folder.)
        # Ray writes its cluster token to ~/.ray/auth_token readable by every user (0644): on loopback the
        # token is what keeps other users of the machine out, so it is made the owner's alone.
        token = os.path.join(os.path.expanduser("~"), ".ray", "auth_token")
        for folder, mode in ((kwargs.get("_temp_dir"), 0o700), (session, 0o700), (token, 0o600)):
            if folder and os.path.exists(folder):
                try:
                    os.chmod(folder, mode)
                except OSError:  # not ours: left as it is
                    pass
        ip = ray.util.get_node_ip_address()
        if ip != RAY_LOCAL_IP:
            raise ArenaError(f"the local Ray listens on {ip}, not only on {RAY_LOCAL_IP}: this version of Ray "
                             f"({getattr(ray, '__version__', '?')}) is not supported for a local Ray")
    except BaseException:
        try:
            ray.shutdown()
        finally:
            if reaper is not None:
                reaper.stop()
        raise
    _ray_reaper = reaper


def stop_local_ray(ray: Any) -> None:
    """``ray.shutdown()``, then kill whatever of the Ray `start_local_ray` started is still running."""
    global _ray_reaper
    if ray.is_initialized():
        ray.shutdown()
    reaper, _ray_reaper = _ray_reaper, None
    if reaper is not None:
        reaper.stop()


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


if __name__ == "__main__" and sys.argv[1:2] == ["--reap"]:
    _reap(int(sys.argv[2]), sys.argv[3])
