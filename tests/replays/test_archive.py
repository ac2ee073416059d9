"""The replay archive: the one table of replays a league database keeps, written in the caller's
transaction and read back on that connection or read-only from the file."""

import sqlite3

import pytest

from arena.errors import ReplayError, ReplayRefused
from arena.replays import archive


def test_put_get_read_and_ids(tmp_path):
    db = tmp_path / "league.db"
    conn = sqlite3.connect(db, isolation_level=None)
    archive.create_table(conn)
    archive.create_table(conn)  # a no-op once it is there
    conn.execute("BEGIN")
    archive.put(conn, "m2", b"two")
    archive.put(conn, "m1", b"one")
    archive.put(conn, "m1", b"again")  # kept once: the first stays
    conn.execute("COMMIT")
    assert archive.get(conn, "m1") == b"one" and archive.get(conn, "m3") is None
    conn.close()
    assert archive.read(db, "m2", max_bytes=3) == b"two"
    assert archive.read(db, "m9", max_bytes=3) is None
    with pytest.raises(ReplayRefused):
        archive.read(db, "m2", max_bytes=2)
    assert archive.ids(db) == ["m1", "m2"] and archive.ids(db, "m2") == ["m2"] and archive.ids(db, "x") == []


def test_a_database_without_the_table_and_a_file_that_is_none(tmp_path):
    db = tmp_path / "other.db"
    sqlite3.connect(db).close()
    assert archive.ids(db) == [] and archive.read(db, "m1", max_bytes=10) is None
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    with pytest.raises(ReplayError, match="junk.db"):
        archive.ids(junk)
