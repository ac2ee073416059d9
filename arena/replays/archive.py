"""The replay archive: the table a league database keeps replays in, and the one place its SQL lives.

``replays(match_id TEXT PRIMARY KEY, data BLOB NOT NULL)``: per committed match, the gzipped bytes a
``.jsonl.gz`` replay file holds (`arena.replays.format.replay_bytes`). The league's store makes the
table with its own, writes a row in the transaction that records the match and reads it back
(`create_table`, `put`, `get`, on the store's connection); a reader without a store (``arena replay``,
a path ``DB#MATCH_ID``) opens the database read-only (`read`, `ids`). Nothing here parses a replay:
the format does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from arena.errors import ReplayError, ReplayRefused, damaged_database, database_errors, undecodable_db

#: The table a league database keeps replays in: the gzipped bytes a ``.jsonl.gz`` file holds.
BLOB_TABLE = "replays"
BLOB_SCHEMA = f"CREATE TABLE IF NOT EXISTS {BLOB_TABLE} (match_id TEXT PRIMARY KEY, data BLOB NOT NULL);"

if TYPE_CHECKING:
    import sqlite3

__all__ = ["BLOB_SCHEMA", "BLOB_TABLE", "TooLarge", "create_table", "get", "ids", "put", "read"]


class TooLarge(ReplayRefused):
    """A kept replay longer than the reader takes; its bytes were left unread."""


# -- on a league store's connection (its transactions) ---------------------------------------
def create_table(conn: sqlite3.Connection) -> None:
    """Make the table in the database of `conn` (a no-op once it is there)."""
    conn.execute(BLOB_SCHEMA)


def put(conn: sqlite3.Connection, match_id: str, data: bytes) -> None:
    """Keep `data` as the replay of `match_id`, in the transaction `conn` is in (the one recording the
    match: both or neither); a replay kept already stays as it is."""
    conn.execute(f"INSERT INTO {BLOB_TABLE} VALUES(?,?) ON CONFLICT(match_id) DO NOTHING", (match_id, data))


def get(conn: sqlite3.Connection, match_id: str) -> bytes | None:
    """The kept bytes of `match_id`'s replay; None when the database keeps none."""
    row = conn.execute(f"SELECT data FROM {BLOB_TABLE} WHERE match_id=?", (match_id,)).fetchone()
    return None if row is None else bytes(row[0])


# -- on a database file, read-only ------------------------------------------------------------
def _connect(db: Path) -> sqlite3.Connection | None:
    """A read-only connection to `db`; None when it has no replay table. ReplayError when `db`
    cannot be read as a database."""
    import sqlite3  # here, not at the top: a match worker that never reads a database does not load it

    try:
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=60.0)
        has = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (BLOB_TABLE,)).fetchone()
    except sqlite3.Error as e:
        damaged = damaged_database(e, db)
        raise ReplayError(str(damaged) if damaged else f"{db}: cannot be read as a league database ({e})") from None
    except UnicodeDecodeError as e:
        raise ReplayError(str(undecodable_db(e, db))) from None
    if has is None:
        conn.close()
        return None
    return conn


def read(db: Path, match_id: str, max_bytes: int) -> bytes | None:
    """The kept bytes of `match_id`'s replay in database `db` (None: it keeps none); `TooLarge`, before
    they are taken, when they are more than `max_bytes`."""
    conn = _connect(db)
    if conn is None:
        return None
    try:
        with database_errors(db, ReplayError):
            row = conn.execute(f"SELECT length(data) <= ?, data FROM {BLOB_TABLE} WHERE match_id=?",
                               (max_bytes, match_id)).fetchone()
    finally:
        conn.close()
    if row is None:
        return None
    if not row[0]:
        raise TooLarge(f"{db}#{match_id}: more than {max_bytes} bytes kept")
    return bytes(row[1])


def ids(db: Path, prefix: str | None = None) -> list[str]:
    """The match ids of the replays kept in database `db`, sorted; with `prefix`, the first four that
    start with it."""
    conn = _connect(db)
    if conn is None:
        return []
    try:
        with database_errors(db, ReplayError):
            if prefix is None:
                return [r[0] for r in conn.execute(f"SELECT match_id FROM {BLOB_TABLE} ORDER BY match_id")]
            # a prefix range over the primary key: no scan of a million ids
            return [r[0] for r in conn.execute(f"SELECT match_id FROM {BLOB_TABLE} WHERE match_id >= ? AND "
                                               "match_id < ? ORDER BY match_id LIMIT 4",
                                               (prefix, prefix + "\U0010ffff"))]
    finally:
        conn.close()
