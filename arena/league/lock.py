"""One league, one writer: an exclusive OS lock on ``DIR/league.lock``.

Every process that changes a league's players or schedules its matches (`arena league run`, a
trainer's `League`) takes the lock through `writer_lock` before it touches the database, and holds
it for its life. The kernel releases it when the process ends, however it ends (``kill -9``
included), so a lock file left behind never blocks anyone: it is the lock, not the file, that
counts. The file holds the PID of the process that last took it, for the one-line refusal a second
writer gets. Readers (`arena ratings`, `league status`, `arena serve`, `replay`) and passive clients
(`League.open`: a person playing a league player) never take it.

The lock is a POSIX record lock (``lockf``), which belongs to the process that took it: a child
forked afterwards (a pool of match workers started with ``fork``) does not hold it, so an orphaned
worker left by a ``kill -9`` never keeps the next run out (an ``flock`` would stay with every
forked copy of the descriptor). The one file of the lock is opened once per process and closed only
with the lock, as record locks require. Where ``fcntl`` is missing (Windows) no lock is taken. One process may
open several `League` objects on one folder (tests do, one after another): they share the
process's lock, which is released when the last of them is gone.
"""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path

from arena.errors import LeagueBusy

LOCK_FILE = "league.lock"

_held: "weakref.WeakValueDictionary[str, WriterLock]" = weakref.WeakValueDictionary()
_guard = threading.Lock()


class WriterLock:
    """The held lock of one league folder; released (its file closed) when no one refers to it."""

    def __init__(self, path: Path, fd: int):
        self.path, self.fd = path, fd
        self._finalizer = weakref.finalize(self, os.close, fd)

    def release(self) -> None:
        self._finalizer()


def writer_lock(directory: str | Path) -> WriterLock | None:
    """Take (or share, within this process) the writer lock of the league in `directory`, which must
    exist. LeagueBusy, naming the PID that holds it, when another process has it. Keep the returned
    object referenced as long as the process writes the league."""
    try:
        import fcntl
    except ImportError:  # no flock on this platform: one writer is then the user's to ensure
        return None
    path = Path(directory) / LOCK_FILE
    key = os.path.realpath(path)
    with _guard:
        lock = _held.get(key)
        if lock is not None:
            return lock
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"process {holder}" if holder else "another process"
            raise LeagueBusy(f"the league at {directory} is being run by {who} (it holds {path}): wait for it "
                             f"to finish or stop it, then run again; `arena league status {directory}` and "
                             f"`arena serve {directory}` read it meanwhile") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        lock = _held[key] = WriterLock(path, fd)
        return lock


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None
