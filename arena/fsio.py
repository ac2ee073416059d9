"""Atomic file writes: a temporary file in the same folder, fsync, rename, fsync of the folder.

A killed process leaves at most a hidden ``.<name>.tmp-*`` file, never a partial file under the real name.
A full disk raises :class:`arena.errors.DiskFull` naming the folder, and leaves no temporary file.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Iterator

from arena.errors import DiskFull

#: errno values that mean "no room": a full file system, or a full quota.
_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_SQLITE_FULL = 13
_SQLITE_IOERR = 10
#: Below this many free bytes an SQLite "disk I/O error" is taken for a full disk: SQLite reports
#: ENOSPC while growing its WAL index (-shm) as an I/O error, not as SQLITE_FULL.
_NEARLY_FULL = 256 * 1024

#: What a match id may look like: it names files (``<id>.jsonl.gz``, a game's ``<id>.SC2Replay``) and
#: URLs, so an id read from a replay or a request is checked against this before it names either.
MATCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


def valid_match_id(match_id: object) -> bool:
    """Whether `match_id` has the shape of a match id: letters, digits and ``_.:-``, at most 128
    characters, no ``..`` (so, joined to a folder, it names a file in that folder)."""
    return isinstance(match_id, str) and bool(MATCH_ID.match(match_id)) and ".." not in match_id


def sha256_file(path: str | os.PathLike, max_bytes: int) -> str | None:
    """The sha256 of a file read in 1 MiB chunks, or None when it is larger than `max_bytes` (it is
    never read past that: memory stays at one chunk whatever the file)."""
    h, seen = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            seen += len(chunk)
            if seen > max_bytes:
                return None
            h.update(chunk)
    return h.hexdigest()


def _no_space_oserror(e: BaseException) -> OSError | None:
    """The ENOSPC/EDQUOT OSError that is `e` or lies down its chain (a library may wrap it:
    torch.save into a Python file raises RuntimeError "unexpected pos" with it as the context)."""
    for _ in range(8):
        if e is None:
            return None
        if isinstance(e, OSError) and e.errno in _NO_SPACE:
            return e
        e = e.__cause__ or e.__context__
    return None


def is_disk_full(e: BaseException, folder: str | os.PathLike | None = None) -> bool:
    """Whether `e` is a write that failed for want of space (OSError ENOSPC/EDQUOT, also wrapped;
    SQLite's "database or disk is full"; an SQLite I/O error while `folder`'s disk is nearly full)."""
    if isinstance(e, DiskFull) or _no_space_oserror(e) is not None:
        return True
    import sqlite3

    if isinstance(e, sqlite3.Error):
        code = getattr(e, "sqlite_errorcode", None)
        if (code is not None and code & 0xFF == _SQLITE_FULL) or "disk is full" in str(e):
            return True
        if folder is not None and ((code is not None and code & 0xFF == _SQLITE_IOERR) or "disk I/O error" in str(e)):
            try:
                return shutil.disk_usage(folder).free < _NEARLY_FULL
            except OSError:
                return False
    return False


@contextlib.contextmanager
def disk_full_as_error(folder: str | os.PathLike, what: str) -> Iterator[None]:
    """Translate a full-disk failure inside the block into DiskFull(folder, what); others pass."""
    try:
        yield
    except DiskFull:
        raise
    except Exception as e:
        if not is_disk_full(e, folder):
            raise
        os_err = _no_space_oserror(e)
        detail = (os_err.strerror or str(os_err)) if os_err is not None else str(e)
        raise DiskFull(folder, what, detail) from e


def atomic_write_bytes(path: str | os.PathLike, data: bytes, durable: bool = True) -> Path:
    """Write `data` to `path` atomically (a temporary file renamed into place). ``durable``: fsync the
    file before the rename and the folder after it, so the file survives a power loss once this returns."""
    path = Path(path)
    with disk_full_as_error(path.parent, f"writing {path.name}"):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: f.write(data), durable=durable)
    return path


def atomic_write(path: Path, write, durable: bool = True, tmp: Path | None = None) -> None:
    """Call ``write(file)`` on a temporary file next to `path`, then rename it into place (fsynced first
    with ``durable``); whatever goes wrong, the temporary file is removed and `path` is untouched."""
    tmp = tmp or path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    with _renamed_into_place(tmp, path, durable):
        with open(tmp, "wb") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def sweep_orphans(folder: str | os.PathLike) -> int:
    """Remove the hidden temporary files (``.<name>.tmp-<pid>-*``) in `folder` whose writing process
    is gone: a writer killed mid-write (a terminated pool worker, a ``kill -9``) never removes its
    own. Files of live processes (this one included) are kept. Returns how many were removed."""
    removed = 0
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return 0
    for name in names:
        if not name.startswith(".") or ".tmp-" not in name:
            continue
        pid = name.rsplit(".tmp-", 1)[1].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _pid_alive(int(pid)):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(folder, name))
            removed += 1
    return removed


@contextlib.contextmanager
def _renamed_into_place(tmp: Path, path: Path, durable: bool) -> Iterator[None]:
    """Rename `tmp` onto `path` once the block has written it (then fsync the folder with ``durable``);
    remove `tmp` if the block raises."""
    try:
        yield
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if durable:
        _fsync_path(path.parent)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, durable: bool = True) -> Iterator[Path]:
    """A temporary path next to `path` for a writer that wants a file name, not a file object (an
    ffmpeg process): renamed into place when the block ends (fsynced first with ``durable``),
    removed if it raises. The temporary name ends with `path`'s suffix, so a tool that picks its
    format by the name still does; it is hidden (``.<name>.tmp-*<suffix>``)."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}{path.suffix}")
    with disk_full_as_error(path.parent, f"writing {path.name}"):
        path.parent.mkdir(parents=True, exist_ok=True)
        with _renamed_into_place(tmp, path, durable):
            yield tmp
            if durable:
                _fsync_path(tmp)


@functools.cache
def _libc():
    """libc with syncfs, or None (not Linux, or no syncfs)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    return libc if hasattr(libc, "syncfs") else None


def sync_folder(folder: str | os.PathLike) -> None:
    """Make every file written under `folder` durable in one call: Linux's syncfs on the folder's file
    system (one flush for a whole batch of files, instead of two fsyncs a file), else a full sync."""
    with disk_full_as_error(folder, "syncing written files"):
        fd = os.open(folder, os.O_RDONLY)
        try:
            libc = _libc()
            if libc is None or libc.syncfs(fd) != 0:
                os.sync()
        finally:
            os.close(fd)
