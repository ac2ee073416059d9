"""The web server against strangers: bounded database connections, slow clients, the play cap and
rate limit, range-checked queries, a league database deleted under the server, the Host check, the
token from a file or the environment, the offline /docs, web matches of a killed server, request
heads over 16 KiB, and a start while `league run --serve` is still making the league."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from fastapi.testclient import TestClient  # noqa: E402

from arena.errors import ArenaError  # noqa: E402
from arena.league.config import load_league_config  # noqa: E402
from arena.league.manager import League, open_league  # noqa: E402
from arena.ui.web import PlaySettings, ServerLimits, create_app, read_token, start_in_background  # noqa: E402
from arena.ui.web.data import MAX_READERS  # noqa: E402
from arena.ui.web.play import WEB_NOTE  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TTT = "openspiel/tic_tac_toe-v0"
START = {"game": TTT, "player": "random", "seat": 0}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hard") / "league"
    League(load_league_config(ROOT / "configs/leagues/quickstart.yaml", matches=12), d, backend="inline").run()
    return d


@pytest.fixture
def league(built, tmp_path) -> Path:
    """A copy of the built league of its own (tests here play in it, delete it, kill servers on it)."""
    d = tmp_path / "league"
    shutil.copytree(built, d)
    return d


def request(url: str, payload=None, headers: dict | None = None, timeout: float = 30) -> tuple[int, object]:
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, method="GET" if payload is None else "POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body, ctype = r.read(), r.headers.get_content_type()
            status = r.status
    except urllib.error.HTTPError as e:
        body, ctype, status = e.read(), e.headers.get_content_type(), e.code
    return status, json.loads(body) if ctype == "application/json" else body


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- 1. database connections -------------------------------------------------------------------
@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="counts open files in /proc")
def test_read_connections_stay_bounded_over_bursts(league, monkeypatch):
    """The worker threads come and go between bursts; the server's open files do not grow with them."""
    aio = pytest.importorskip("anyio._backends._asyncio")
    monkeypatch.setattr(aio.WorkerThread, "MAX_IDLE_TIME", 0.2, raising=False)  # threads retire between bursts
    paths = ["/api/players", "/api/roster", "/api/league", "/api/payoff", "/api/games", "/api/history"]
    with start_in_background(league, port=0) as srv:
        start, after = fds(), []
        with ThreadPoolExecutor(30) as pool:
            for _ in range(8):
                codes = list(pool.map(lambda p: request(srv.url + p)[0], paths * 10))
                assert codes == [200] * len(codes)
                time.sleep(0.6)  # longer than the idle time: the next burst meets new threads
                after.append(fds())
        assert srv.app.state.data.connections <= MAX_READERS + 1  # the pool's and the event loop's
    # before the pool, from 13 at the start: 83, 113, 153, 215, 279, 317, 373, 423 (a connection per
    # thread, never closed); now at most the pool's connections (a database, WAL and index file each)
    assert max(after) - start <= 3 * (MAX_READERS + 1) + 4, (start, after)


# -- 2. slow clients ----------------------------------------------------------------------------
def test_trickling_clients_are_cut_and_the_rest_served(league):
    """Sockets that send a request a byte at a time (headers or body) are closed after the request
    timeout; past the connection cap the oldest of them make room; meanwhile requests are answered."""
    limits = ServerLimits(request_timeout=1.5, max_connections=40)
    n = 60
    with start_in_background(league, port=0, limits=limits) as srv:
        socks = []
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            if i % 6 == 0:  # whole headers, a body that never comes
                s.sendall(b"POST /api/play HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 900\r\n\r\n{")
            else:
                s.sendall(b"GET /api/league HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            socks.append(s)
        served = asked = 0
        for _ in range(12):  # about 3 s of trickling
            for s in socks:
                try:
                    s.send(b"X")
                except OSError:
                    pass
            asked += 1
            served += request(srv.url + "/api/league", timeout=10)[0] == 200
            time.sleep(0.25)
        closed = 0
        deadline = time.monotonic() + 15
        for s in socks:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                data = s.recv(4096)
                closed += data == b"" or b"HTTP/1.1" not in data[:9]
            except (ConnectionResetError, socket.timeout, OSError) as e:
                closed += not isinstance(e, socket.timeout)
            s.close()
        still = request(srv.url + "/api/league")[0]
    # before: every trickling socket stayed open (and 1,100 of them made every request a 503)
    assert (served, asked) == (12, 12)
    assert closed == n and still == 200


# -- 3. the play cap and rate limit -------------------------------------------------------------
def test_session_cap_holds_under_concurrent_starts(league):
    cap, tries = 4, 30
    play = PlaySettings(max_sessions=cap, idle_timeout=60, move_time_limit=60, starts_per_minute=0)
    with start_in_background(league, port=0, play=play) as srv:
        plays, most = srv.app.state.plays, [0]
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                most[0] = max(most[0], len(plays.active()))
                time.sleep(0.005)

        watcher = threading.Thread(target=watch)
        watcher.start()
        with ThreadPoolExecutor(tries) as pool:
            outs = list(pool.map(lambda i: request(srv.url + "/api/play", {**START, "name": f"c{i}"}), range(tries)))
        stop.set()
        watcher.join()
        live = len(plays.active())
    codes = [c for c, _ in outs]
    # before: 40 sessions live against a cap of 4 under 40 concurrent starts
    assert codes.count(200) == cap and live == cap and most[0] <= cap
    refused = [b for c, b in outs if c != 200]
    assert len(refused) == tries - cap and all(c == 429 for c in codes if c != 200)
    assert all(f"{cap} matches are being played" in b["error"] for b in refused)


def test_starts_without_a_token_are_rate_limited(league):
    play = PlaySettings(starts_per_minute=3, idle_timeout=60)
    with start_in_background(league, port=0, play=play) as srv:
        codes = [request(srv.url + "/api/play", {**START, "name": f"r{i}"})[0] for i in range(3)]
        status, body = request(srv.url + "/api/play", {**START, "name": "r3"})
    assert codes == [200, 200, 200]
    assert status == 429 and "3 a minute without a token" in body["error"]
    store = open_league(league)
    try:  # the refused start added no player
        assert store.player("human:r3") is None and store.player("human:r2") is not None
    finally:
        store.close()
    with start_in_background(league, port=0, token="t0ken-xyz", play=play) as srv:  # with a token: no limit
        auth = {"Authorization": "Bearer t0ken-xyz"}
        codes = [request(srv.url + "/api/play", {**START, "name": f"t{i}"}, auth)[0] for i in range(5)]
    assert codes == [200] * 5


# -- 4. query values ------------------------------------------------------------------------------
@pytest.mark.parametrize("query,status,word", [
    ("before=1000000000000000000000000000000", 422, "before"),
    ("after=9223372036854775807", 422, "after"),
    ("before=-1", 422, "before"),
    ("since=1e400", 400, "out of range"),
    ("until=nan", 400, "out of range"),
    ("since=0001-01-01T00:00%2B01:00", 400, "date"),
])
def test_paging_and_dates_are_range_checked(built, query, status, word):
    client = TestClient(create_app(built), raise_server_exceptions=False)
    r = client.get(f"/api/matches?{query}")
    assert r.status_code == status and r.headers["content-type"].startswith("application/json")
    assert word in r.json()["error"] and "\n" not in r.json()["error"]


def test_largest_cursor_pages_normally(built):
    client = TestClient(create_app(built))
    r = client.get(f"/api/matches?before={2**62}&limit=3")
    assert r.status_code == 200 and len(r.json()["matches"]) == 3


# -- 5. the database deleted or replaced under the server -----------------------------------------
@pytest.mark.parametrize("how", ["replaced", "deleted"])
def test_league_database_gone_is_a_503(league, tmp_path, how):
    other = tmp_path / "other"
    League(load_league_config(ROOT / "configs/leagues/quickstart.yaml", matches=2), other, backend="inline").run()
    client = TestClient(create_app(league), raise_server_exceptions=False)
    mid = client.get("/api/matches?limit=1").json()["matches"][0]["match_id"]
    assert client.get(f"/api/replays/{mid}").status_code == 200  # in the replay cache now
    assert client.get("/api/league").json()["last_commit"] == 12
    db = league / "league.db"
    if how == "replaced":
        os.replace(other / "league.db", db)
    else:
        db.unlink()
    for path in ("/api/league", "/api/players", "/api/matches", f"/api/matches/{mid}", f"/api/replays/{mid}",
                 f"/replay/{mid}"):
        r = client.get(path)
        assert r.status_code == 503, (path, r.status_code, r.text[:200])
        err = r.json()["error"]
        assert f"was {how} while the server ran" in err and "restart" in err and "\n" not in err
    r = client.post("/api/play", json=START)
    assert r.status_code == 503 and how in r.json()["error"]
    if how == "deleted":
        assert not db.exists()  # a start did not make a new, empty league there


# -- 6. Host, token, docs -------------------------------------------------------------------------
def test_host_header_must_name_this_server(league):
    with start_in_background(league, port=0) as srv:
        ok = [request(srv.url + "/api/league", headers={"Host": h})[0]
              for h in (f"127.0.0.1:{srv.port}", f"localhost:{srv.port}", "localhost", f"[::1]:{srv.port}")]
        status, body = request(srv.url + "/api/league", headers={"Host": "evil.example"})
        status2, body2 = request(srv.url + "/", headers={"Host": f"evil.example:{srv.port}"})
    assert ok == [200] * 4
    assert status == status2 == 400 and "evil.example" in body["error"] and "localhost" in body["error"]
    assert isinstance(body2, dict) and "error" in body2
    # bound to every interface, the server cannot know its names: any is accepted (use a token)
    client = TestClient(create_app(league, hosts=None))
    assert client.get("/api/league", headers={"Host": "evil.example"}).status_code == 200


def test_docs_work_offline(built):
    client = TestClient(create_app(built))
    r = client.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    assert "cdn" not in page.lower() and "<script" not in page and "https://" not in page and "http://" not in page
    assert 'href="/openapi.json"' in page and "/api/matches" in page and "/api/play/{sid}/move" in page
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert client.get("/redoc").status_code == 404


def test_token_from_a_file_or_the_environment(tmp_path):
    f = tmp_path / "token"
    f.write_text("s3cret-from-file\n")
    assert read_token(token_file=f, environ={}) == "s3cret-from-file"
    assert read_token(environ={"ARENA_TOKEN": "from-env"}) == "from-env"
    assert read_token("on-the-line", environ={"ARENA_TOKEN": "from-env"}) == "on-the-line"
    assert read_token(environ={}) is None
    with pytest.raises(ArenaError, match="not both"):
        read_token("a", f)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ArenaError, match="empty"):
        read_token(token_file=tmp_path / "empty", environ={})
    with pytest.raises(ArenaError, match="cannot read"):
        read_token(token_file=tmp_path / "nowhere", environ={})
    with pytest.raises(ArenaError, match="one word"):
        read_token("two words", environ={})


# -- 7. a web match of a killed server ------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(fn, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            out = fn()
        except OSError:
            out = None
        if out:
            return out
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def match_row(d: Path, mid: str):
    store = open_league(d)
    try:
        row = store.conn.execute("SELECT status, note FROM matches WHERE match_id=?", (mid,)).fetchone()
        return row, store.result_for(mid), store.result_count()
    finally:
        store.close()


def test_web_match_of_a_killed_server_is_closed_once_unrated(league, tmp_path):
    port = free_port()
    token_file = tmp_path / "tok"
    token_file.write_text("k1lled-server-token\n")
    proc = subprocess.Popen([sys.executable, "-m", "arena.cli", "serve", str(league), "--port", str(port),
                             "--token-file", str(token_file)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "200"})
    url = f"http://127.0.0.1:{port}"
    auth = {"X-Arena-Token": "k1lled-server-token"}
    try:
        wait_for(lambda: request(url + "/api/league", timeout=2)[0] == 200, 120, "the server")
        cmdline = Path(f"/proc/{proc.pid}/cmdline")
        assert not cmdline.exists() or b"k1lled" not in cmdline.read_bytes()  # not shown by ps
        assert request(url + "/api/play", {**START, "name": "nokey"})[0] == 401
        status, s = request(url + "/api/play", {**START, "name": "cut-off"}, auth)
        assert status == 200, s
        mid = s["match_id"]
        wait_for(lambda: request(url + f"/api/play/{s['session']}", headers=auth)[1]["status"] == "your_turn",
                 60, "the person's turn")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    (status, note), result, count = match_row(league, mid)
    assert status == "running" and note.startswith(WEB_NOTE) and result is None  # what the kill left
    app = create_app(league)  # the server opens the league again
    assert app.state.plays.aborted == [mid]
    (status, note), result, count2 = match_row(league, mid)
    assert status == "failed" and note.startswith("aborted:") and result is None and count2 == count
    store = open_league(league)
    try:
        assert "cut-off" not in store.records(TTT)  # never rated
    finally:
        store.close()
    assert create_app(league).state.plays.aborted == []  # closed once


def test_a_running_servers_web_match_is_left_alone(league):
    with start_in_background(league, port=0, play=PlaySettings(idle_timeout=60)) as srv:
        status, s = request(srv.url + "/api/play", {**START, "name": "alive"})
        assert status == 200
        assert create_app(league).state.plays.aborted == []  # another server opening the same league
        (st, note), result, _ = match_row(league, s["match_id"])
        assert st == "running" and note.startswith(WEB_NOTE)
    (st, _), result, _ = match_row(league, s["match_id"])  # stopped in order: the person's forfeit, once
    assert st == "done" and result.outcome == "forfeit"
    assert not list((league / ".web-servers").glob("*.lock"))


def test_unexpected_errors_are_one_json_line(built, monkeypatch):
    import sqlite3

    app = create_app(built)
    client = TestClient(app, raise_server_exceptions=False)

    def broken():
        raise RuntimeError("boom\nTraceback (most recent call last): secret detail")

    monkeypatch.setattr(app.state.data, "summary", broken)
    r = client.get("/api/league")
    assert r.status_code == 500 and r.json() == {"error": "internal error (RuntimeError); the server's log has "
                                                          "the details"}

    def locked(*a, **k):
        raise sqlite3.OperationalError("database disk image is malformed")

    monkeypatch.setattr(app.state.data, "players", locked)
    r = client.get("/api/roster")
    assert r.status_code == 503 and "cannot be read (database disk image is malformed)" in r.json()["error"]


def test_league_run_serve_takes_the_token_from_a_file(tmp_path):
    """`league run --serve` reads its token as `arena serve` does (--token-file, $ARENA_TOKEN), so it
    need not show in `ps`; both at once is one line."""

    root = Path(__file__).resolve().parents[2]
    token_file = tmp_path / "token"
    token_file.write_text("s3rve-t0ken\n")
    base = [sys.executable, "-m", "arena.cli", "league", "run", str(root / "configs/leagues/quickstart.yaml"),
            "--dir", str(tmp_path / "L"), "--matches", "4", "--serve", "--port", "0"]
    env = dict(os.environ, COLUMNS="200")
    r = subprocess.run(base + ["--token-file", str(token_file)], cwd=root, capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "(token required to play)" in r.stdout
    r = subprocess.run(base + ["--token-file", str(token_file), "--token", "x"], cwd=root, capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 2 and r.stderr.strip().endswith("--token-file PATH (preferred) or --token, not both")


def test_a_web_match_is_claimed_in_the_transaction_that_schedules_it(league, monkeypatch):
    """No moment between scheduling a web match and claiming it for its server: the match row is
    written with the server's claim in its note, so a kill at any moment leaves a match the next
    server can close."""
    from arena.league.storage import LeagueStore
    from arena.ui.web.play import WEB_NOTE

    notes = []
    enqueue = LeagueStore.enqueue

    def watched(self, *args, **kw):
        notes.append(kw.get("note"))
        return enqueue(self, *args, **kw)

    monkeypatch.setattr(LeagueStore, "enqueue", watched)
    play = PlaySettings(idle_timeout=60, move_time_limit=60, starts_per_minute=0)
    with start_in_background(league, port=0, play=play) as srv:
        status, _ = request(srv.url + "/api/play", {**START, "name": "claimed"})
    assert status == 200 and len(notes) == 1 and notes[0].startswith(WEB_NOTE), notes


# -- 8. request heads over 16 KiB -----------------------------------------------------------------
def raw_exchange(port: int, head: bytes, piece: int | None = None) -> tuple[int | None, dict, bytes]:
    """Send `head` on a socket (at once, or `piece` bytes at a time) and read the answer: (status,
    headers, body); status None when the connection was closed without one."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        for i in range(0, len(head), piece or len(head)):
            s.sendall(head[i:i + (piece or len(head))])
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                return None, {}, data
            data += chunk
        top, _, body = data.partition(b"\r\n\r\n")
        lines = top.decode("latin-1").split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in lines[1:])
        while len(body) < int(headers.get("content-length", 0)):
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        return int(lines[0].split()[1]), headers, body
    finally:
        s.close()


def head_of(size: int) -> bytes:
    """A GET whose head (request line and headers) is `size` bytes, most of it one cookie."""
    start = b"GET /api/league HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: a="
    return start + b"x" * (size - len(start) - 4) + b"\r\n\r\n"


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_request_heads_over_16_kib_are_413(league, monkeypatch, http):
    """docs/security.md promises 413 for request headers over 16 KiB: a 70 KB head sent at once (h11
    parsed and answered it: it measures only what it holds incomplete) or a piece at a time is refused
    with one JSON line and the connection closed; a 15 KiB head is answered."""
    if http == "httptools":
        pytest.importorskip("httptools")
    else:
        monkeypatch.setitem(sys.modules, "httptools", None)  # uvicorn's h11 protocol, as without httptools
    with start_in_background(league, port=0) as srv:
        assert any(c.__module__.endswith(f"{http}_impl") for c in srv.server.config.http.__mro__)
        assert len(head_of(70_000)) == 70_000
        # at once; a piece at a time; 17 KiB of a head that has not ended, a piece at a time (the server
        # answers when it holds more than 16 KiB: the client sends no more than that, so no reset can
        # overtake the answer)
        for head, piece in ((head_of(70_000), None), (head_of(17 * 1024), 1024), (head_of(17 * 1024)[:-4], 1024)):
            status, headers, body = raw_exchange(srv.port, head, piece)
            assert status == 413, (len(head), piece, status, body[:200])
            assert headers["content-type"] == "application/json" and headers.get("connection") == "close"
            error = json.loads(body)["error"]
            assert error.startswith("request headers over 16384 bytes") and "\n" not in error
        status, headers, body = raw_exchange(srv.port, head_of(15 * 1024))
        assert status == 200 and json.loads(body)["name"]
        status, headers, body = raw_exchange(srv.port, head_of(15 * 1024), 1024)
        assert status == 200 and json.loads(body)["name"]


# -- 9. the league being made under `league run --serve` ----------------------------------------------
def request_headers(url: str, payload=None) -> tuple[int, dict, object]:
    req = urllib.request.Request(url, data=None if payload is None else json.dumps(payload).encode(),
                                 method="GET" if payload is None else "POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            body, headers, status = r.read(), r.headers, r.status
    except urllib.error.HTTPError as e:
        body, headers, status = e.read(), e.headers, e.code
    return status, headers, json.loads(body) if headers.get_content_type() == "application/json" else body


def test_play_while_the_league_is_being_made_is_a_503_with_retry_after(tmp_path):
    """`league run --serve` serves the league from the moment its database exists; its players and
    config are written after. A start in that window was a 500 (TypeError: no config to open the
    league by); now it is a 503 with Retry-After and one line, and every page answers."""
    from arena.league.config import GameEntry, LeagueConfig, PlayerEntry
    from arena.league.storage import LeagueStore

    d = tmp_path / "L"
    LeagueStore(d).close()  # what `league run --serve` makes before it starts the server
    with start_in_background(d, port=0) as srv:
        status, headers, body = request_headers(srv.url + "/api/play", {**START, "name": "early"})
        assert status == 503, body
        assert int(headers["Retry-After"]) >= 1
        assert list(body) == ["error"] and "is starting" in body["error"] and "\n" not in body["error"]
        for path in ("/", "/matches", "/play", "/api/league", "/api/games", "/api/players", "/api/roster",
                     "/api/payoff", "/api/history", "/api/matches", "/api/play/options"):
            assert request_headers(srv.url + path)[0] == 200, path
        # the league writes its players, then its config (as `League` does when `league run` starts it)
        cfg = LeagueConfig(games=[GameEntry(TTT)], players=[PlayerEntry("random", "random")], matches=0)
        League(cfg, d, backend="inline").close()
        status, headers, body = request_headers(srv.url + "/api/play", {**START, "name": "early"})
        assert status == 200 and body["players"] == ["human:early", "random"], body
        assert request_headers(srv.url + f"/api/play/{body['session']}/resign", {})[0] == 200


def test_league_run_serve_never_answers_play_with_a_500(tmp_path):
    """From the first answer of `arena league run --serve` on, starting a match is a 503 with
    Retry-After until the league is made, then the match (a run with no server up yet is a refused
    connection, not an answer)."""
    config = tmp_path / "league.yaml"
    config.write_text(json.dumps({"name": "early", "games": [{"id": TTT}], "matches": 100_000, "workers": 1,
                                  "players": [{"name": "random", "agent": "random"},
                                              {"name": "first", "agent": "first"}]}))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "arena.cli", "league", "run", str(config), "--dir",
                             str(tmp_path / "L"), "--serve", "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "200"})
    answers = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status, headers, body = request_headers(f"http://127.0.0.1:{port}/api/play",
                                                        {**START, "name": f"early{len(answers)}"})
            except OSError:  # not listening yet
                time.sleep(0.02)
                continue
            answers.append((status, headers.get("Retry-After"), body))
            if status != 503:
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
    assert answers and answers[-1][0] == 200, (answers[-3:], proc.stderr.read()[-2000:])
    assert all(status == 503 and int(retry) >= 1 and "is starting" in body["error"]
               for status, retry, body in answers[:-1]), answers
