"""Replays kept in a league's database (the default) or as files: every reader takes either form."""

import gzip
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.cli import app
from arena.errors import ReplayError
from arena.league.config import load_league_config
from arena.league.manager import League, open_league
from arena.match.verify import verify_replay
from arena.replays import (find_replay, is_replay_source, league_db, list_replays, read_replay, replay_bytes,
                           replay_id)

runner = CliRunner()
CONFIG = """name: store
games: [{id: openspiel/tic_tac_toe-v0}]
players:
  - {name: r, agent: random}
  - {name: f, agent: first}
matches: 12
replays: REPLAYS
"""


@pytest.fixture(scope="module", params=["database", "files"])
def league(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    cfg = d / "c.yaml"
    cfg.write_text(CONFIG.replace("REPLAYS", request.param))
    out = League(load_league_config(cfg), d / "L", backend="inline").run()
    assert out["results"] == 12
    return request.param, d / "L"


def test_a_league_keeps_its_replays_where_its_config_says(league):
    form, d = league
    store = open_league(d)
    blobs = store.conn.execute("SELECT COUNT(*) FROM replays").fetchone()[0]
    files = list((d / "replays").glob("*.jsonl.gz")) if (d / "replays").is_dir() else []
    assert (blobs, len(files)) == ((12, 0) if form == "database" else (0, 12))
    for r in store.results():
        rep = store.read_replay(r.match_id)
        assert rep.match_id == r.match_id and rep.result["returns"] == r.returns
        # the stored name reads back the same replay, whichever form
        assert read_replay(r.replay) == rep
        if form == "database":
            assert r.replay == f"{store.db_path}#{r.match_id}"
    store.close()


def test_a_database_replay_is_the_bytes_of_its_file(league):
    form, d = league
    store = open_league(d)
    r = store.results()[0]
    rep = store.read_replay(r.match_id)
    if form == "database":
        (data,) = store.conn.execute("SELECT data FROM replays WHERE match_id=?", (r.match_id,)).fetchone()
        assert data == replay_bytes(rep) and gzip.decompress(data).decode() == rep.to_text()
    else:
        assert (d / "replays" / f"{r.match_id}.jsonl.gz").read_bytes() == replay_bytes(rep)
    store.close()


def test_listing_finding_and_ids_work_on_the_league_folder_its_replays_folder_and_its_database(league):
    form, d = league
    store = open_league(d)
    ids = sorted(r.match_id for r in store.results())
    store.close()
    sources = [d, d / "replays"] + ([d / "league.db"] if form == "database" else [])
    for src in sources:
        assert is_replay_source(src)
        paths = list_replays(src)
        assert sorted(replay_id(p, src) for p in paths) == ids, src
        assert all(verify_replay(p).ok for p in paths[:3])
        assert replay_id(find_replay(src, ids[3]), src) == ids[3]
        with pytest.raises(ReplayError, match="start of several"):
            find_replay(src, ids[3][:-1])
        with pytest.raises(ReplayError, match="shows the ids"):
            find_replay(src, "no-such-id")
    assert league_db(d) == (d / "league.db")


def test_the_cli_lists_shows_and_verifies_a_leagues_replays(league):
    form, d = league
    store = open_league(d)
    first = store.results()[0]
    store.close()
    r = runner.invoke(app, ["replay", "list", str(d)], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "12 replays" in r.output and first.match_id in r.output
    r = runner.invoke(app, ["replay", "show", str(d), first.match_id, "--all"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert first.match_id in r.output
    r = runner.invoke(app, ["replay", "verify", str(d)], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "12 verified" in r.output
    if form == "database":  # a replay in the database by its name, as `arena play --vs` prints it
        r = runner.invoke(app, ["replay", "verify", f"{d}/league.db#{first.match_id}"], terminal_width=200)
        assert r.exit_code == 0 and "1 verified" in r.output, r.output


def _db_league(d: Path, matches: int = 4) -> Path:
    cfg = d / "c.yaml"
    cfg.write_text(CONFIG.replace("REPLAYS", "database").replace("matches: 12", f"matches: {matches}"))
    League(load_league_config(cfg), d / "L", backend="inline").run()
    return d / "L"


def test_bad_names_of_database_replays_are_one_line_errors(tmp_path):
    d = _db_league(tmp_path)
    db = d / "league.db"
    with pytest.raises(ReplayError, match="no replay 'nope' in"):
        read_replay(f"{db}#nope")
    with pytest.raises(ReplayError, match="is a league database; give a replay in it"):
        read_replay(db)
    # ids are looked up, never used as paths
    for hostile in ("../../etc/passwd", "/etc/passwd", "..", "replays/../../x"):
        with pytest.raises(ReplayError):
            find_replay(d, hostile)
        with pytest.raises(ReplayError):
            open_league(d).read_replay(hostile)
    p = subprocess.run([sys.executable, "-m", "arena.cli", "replay", "show", str(d), "nope"], capture_output=True,
                       text=True, timeout=120, check=False)
    assert p.returncode == 2 and "Traceback" not in p.stderr + p.stdout, p.stderr
    assert len((p.stderr + p.stdout).strip().splitlines()) == 1 and "no replay 'nope'" in p.stderr + p.stdout


def test_a_corrupt_database_replay_is_reported_and_the_others_still_checked(tmp_path):
    d = _db_league(tmp_path)
    store = open_league(d)
    bad = store.results()[1].match_id
    store.close()
    with sqlite3.connect(d / "league.db") as conn:
        good = conn.execute("SELECT data FROM replays LIMIT 1").fetchone()[0]
        conn.execute("INSERT INTO replays VALUES(?,?)", ("zz-extra", good))
        conn.execute("UPDATE replays SET data=? WHERE match_id=?", (b"\x1f\x8bnot gzip", bad))
    assert find_replay(d, "zz") == Path(f"{d}/league.db#zz-extra")  # a unique start of an id
    conn = sqlite3.connect(d / "league.db")
    conn.execute("DELETE FROM replays WHERE match_id='zz-extra'")
    conn.commit()
    conn.close()
    with pytest.raises(ReplayError, match="corrupt gzip"):
        open_league(d).read_replay(bad)
    r = runner.invoke(app, ["replay", "verify", str(d)], terminal_width=200)
    assert r.exit_code == 1
    assert "3 verified" in r.output and "1 unreadable" in r.output and bad in r.output
