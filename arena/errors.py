"""Errors that say what went wrong and what to do about it."""

from __future__ import annotations


class ArenaError(Exception):
    """Base class of every error the arena raises on purpose."""


class GameNotFound(ArenaError, KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else "game not found"


class DuplicateGameId(ArenaError, ValueError):
    pass


class MissingExtra(ArenaError, ImportError):
    """An optional dependency is not installed; the message names the extra."""

    def __init__(self, what: str, extra: str, cause: BaseException | None = None):
        msg = f"{what} needs the optional dependencies of the '{extra}' extra: pip install \"arena[{extra}]\""
        if cause is not None:
            msg += f" (import failed: {cause})"
        super().__init__(msg)
        self.extra = extra


class AgentSpecError(ArenaError, ValueError):
    """An agent spec that cannot be built: unknown kind or option, a bad value, a missing file."""


class IncompatibleAgent(AgentSpecError):
    """A well-formed agent spec for an agent that cannot play this game (``cfr`` on tic-tac-toe)."""


class ConfigError(ArenaError, ValueError):
    pass


class ReplayError(ArenaError, ValueError):
    pass


class DiskFull(ArenaError):
    """A write failed because the file system is full (ENOSPC; SQLite's "database or disk is full").

    Every write the arena does is atomic (a temporary file renamed into place, one SQLite
    transaction per result), so the failed write left nothing half-done behind: the same command
    resumes once there is space. `folder` is where the write went; `what` names the write.
    """

    def __init__(self, folder, what: str = "", detail: str = ""):
        super().__init__(str(folder), what, detail)  # all three in args: it pickles across processes
        self.folder, self.what, self.detail = str(folder), what, detail

    def __str__(self) -> str:
        failed = f" ({self.what}: {self.detail or 'no space left'})" if self.what else ""
        return (f"the disk holding {self.folder} is full{failed}. Nothing was lost: what was written before "
                "is complete and committed. Free some space, then run the same command again to continue.")


def require(module: str, what: str, extra: str):
    """Import an optional module or raise MissingExtra naming the extra to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtra(what, extra, e) from e
