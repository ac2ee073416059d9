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


class ReplayRefused(ReplayError):
    """A replay that is refused, not just unreadable: a header naming something that is not a game
    setting (code to import, a constructor-level key), or a replay over the size cap."""


class LeagueBusy(ArenaError):
    """Another process is writing this league (it holds the folder's lock file); the message names its PID."""


class LeagueDatabaseError(ArenaError):
    """A league database that SQLite cannot read (truncated, overwritten, not a database)."""


#: What SQLite says of a file it cannot read as a league database (truncated, overwritten, not one,
#: or with bytes flipped inside its text).
_UNREADABLE_DB = ("not a database", "malformed", "file is encrypted", "unable to open database", "could not decode")


def damaged_database(e: BaseException, db_path) -> "LeagueDatabaseError | None":
    """The one-line error for SQLite's "file is not a database" / "malformed" / an undecodable text
    value met while reading `db_path`, or None for any other error (busy, full disk)."""
    import sqlite3

    if not isinstance(e, sqlite3.DatabaseError) or not any(u in str(e).lower() for u in _UNREADABLE_DB):
        return None
    return unreadable_league_db(db_path, str(e))


def undecodable_db(e: UnicodeDecodeError, db_path) -> "LeagueDatabaseError":
    """The one line for a database whose damaged bytes are not even UTF-8 where SQLite reports them
    (its schema: Python cannot decode SQLite's own message)."""
    return unreadable_league_db(db_path, f"text that is not UTF-8: {e.reason} at byte {e.start}")


def database_errors(db_path, error: type[ArenaError] | None = None):
    """A context manager: SQLite's "not a database" / "malformed" / an undecodable text value met
    inside the block (a damaged league.db) becomes the one line of `damaged_database`, raised as
    `error` (default `LeagueDatabaseError`); other errors (busy, a full disk) pass unchanged."""
    import contextlib
    import sqlite3

    @contextlib.contextmanager
    def block():
        try:
            yield
        except sqlite3.DatabaseError as e:
            damaged = damaged_database(e, db_path)
            if damaged is None:
                raise
            raise (damaged if error is None else error(str(damaged))) from None
        except UnicodeDecodeError as e:
            damaged = undecodable_db(e, db_path)
            raise (damaged if error is None else error(str(damaged))) from None

    return block()


def unreadable_league_db(db_path, why: str) -> LeagueDatabaseError:
    """The one line for a league database that cannot be read, and what to do."""
    why = clipped(" ".join(why.split()), 80)
    return LeagueDatabaseError(
        f"{db_path}: SQLite cannot read this league database ({why}): it is damaged or not a league database; "
        "restore it from a backup (with its league.db-wal file, if any), or start a new league in another --dir")


#: The most characters of a value any error message shows (a config value can be a megabyte long, or an
#: alias-built structure whose full rendering would be exponential in the file's size).
SHOWN_CHARS = 200


def shown(value, limit: int = SHOWN_CHARS) -> str:
    """`repr(value)` for an error message, in bounded time and at most `limit` characters: nested
    containers are rendered a few items and levels deep (``reprlib``), and the result is cut with a
    note of how much was left out."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxdict, r.maxlist, r.maxtuple, r.maxset = 3, 8, 8, 8, 8
    r.maxstring = r.maxother = r.maxlong = limit
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value):,} characters)"
    text = r.repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class NotASetting(ConfigError):
    """A key given to a game that the game does not declare as a setting (a construction key such as
    ``core`` or ``env_class``, or an unknown name), or a value that is not plain data."""

    def __init__(self, key, game_id: str, message: str, detail: str = ""):
        super().__init__(key, game_id, message, detail)  # all in args: it pickles across processes
        self.key, self.game_id, self.message, self.detail = key, game_id, message, detail

    def __str__(self) -> str:
        return self.message


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


#: The longest error line printed, and the longest run of digits in it: a value a message did not cut
#: (a 5,000-digit number, a pasted file) is cut here, with its length.
MAX_ERROR_LINE = 2000
MAX_DIGITS_SHOWN = 40


def bounded_line(text: str) -> str:
    """An error message cut for a terminal: runs of more than `MAX_DIGITS_SHOWN` digits shortened,
    newlines folded into spaces, at most `MAX_ERROR_LINE` characters."""
    import re

    text = re.sub(r"\d{%d,}" % (MAX_DIGITS_SHOWN + 1),
                  lambda m: f"{m.group()[:12]}...({len(m.group()):,} digits)", text)
    text = " ".join(text.split("\n"))
    return clipped(text, MAX_ERROR_LINE)


def clipped(text: str, limit: int = SHOWN_CHARS) -> str:
    """Plain text (a list of names, a key) cut to `limit` characters for an error message."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
