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
    pass


class ConfigError(ArenaError, ValueError):
    pass


class ReplayError(ArenaError, ValueError):
    pass


def require(module: str, what: str, extra: str):
    """Import an optional module or raise MissingExtra naming the extra to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtra(what, extra, e) from e
