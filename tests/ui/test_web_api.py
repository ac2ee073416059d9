"""The web API against the store's own numbers: leaderboard, match list and paging, replays, play,
the security rules (ids looked up, never paths; body limits; the token; escaping), and the CLI's errors."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from arena.agents.base import BaseAgent  # noqa: E402
from arena.league.config import load_league_config  # noqa: E402
from arena.league.manager import League, open_league  # noqa: E402
from arena.league.protocols import Pairing  # noqa: E402
from arena.league.queries import rating_rows, recompute_rows  # noqa: E402
from arena.league.storage import OVERALL  # noqa: E402
from arena.match.runner import run_match_job  # noqa: E402
from arena.ui.web import PlaySettings, start_in_background  # noqa: E402
from arena.ui.web.boards import board_of  # noqa: E402
from arena.match.verify import final_view  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EVIL = "<script>alert(1)</script>"
HTML_MOVE = "<img src=x onerror=alert(2)>"
TTT = "openspiel/tic_tac_toe-v0"


class HtmlAgent(BaseAgent):
    """An LLM-like player whose move is raw HTML."""

    spec = "html"

    def act(self, observation):
        return HTML_MOVE


def build_league(d: Path) -> Path:
    """A 40-match quickstart league, plus a player with a script for a name (rated in one match) and a
    match whose first move is raw HTML (refused, a forfeit)."""
    cfg = load_league_config(ROOT / "configs/leagues/quickstart.yaml", matches=40)
    out = League(cfg, d, backend="inline").run()
    assert out["results"] == 40
    league = League.open(d)
    league.store.add_player(EVIL, "fixed", "random", [TTT])
    m = league.begin(Pairing(TTT, [EVIL, "random"], ["random", "random"], "test"), status="running")
    league.commit(m.match_id, run_match_job(league.job(m)))
    m = league.begin(Pairing("arena/TicTacToe-v0", ["random", "first"], ["random", "first"], "html"), status="running")
    res = run_match_job(league.job(m, record="text"), agents=[HtmlAgent(), None])
    assert res.outcome == "forfeit"
    league.commit(m.match_id, res)
    league.store.close()
    return d


@pytest.fixture(scope="module")
def league_dir(tmp_path_factory) -> Path:
    return build_league(tmp_path_factory.mktemp("web"))


@pytest.fixture(scope="module")
def server(league_dir):
    srv = start_in_background(league_dir, port=0, play=PlaySettings(idle_timeout=1.5, move_time_limit=60))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def store(league_dir):
    s = open_league(league_dir)
    yield s
    s.close()


def get(server, path: str, headers: dict | None = None):
    req = urllib.request.Request(server.url + path, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
            return r.status, (json.loads(body) if r.headers.get_content_type() == "application/json" else body)
    except urllib.error.HTTPError as e:
        body = e.read()
        return e.code, (json.loads(body) if e.headers.get_content_type() == "application/json" else body)


def post(server, path: str, payload, headers: dict | None = None):
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    req = urllib.request.Request(server.url + path, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def raw_get(server, path: str) -> tuple[int, bytes, str]:
    """A GET with the path sent exactly as written (no client-side normalising)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("GET", path, skip_accept_encoding=True)
    conn.endheaders()
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body, r.getheader("content-type") or ""


# -- reading the league -------------------------------------------------------------------------
def test_leaderboard_is_the_stores_ratings(server, store):
    from arena.ui.views import fitted_board

    for game in [OVERALL, *store.rated_games()]:
        # sorted by Elo: the live table, row for row
        status, body = get(server, f"/api/players?game={urllib.request.quote(game)}&sort=elo")
        assert status == 200 and body["kind"] == "rated"
        want = rating_rows(store, game)
        assert [r["player"] for r in body["rows"]] == [r.player for r in want]
        for got, r in zip(body["rows"], want):
            assert got["elo"] == pytest.approx(r.elo) and got["mu"] == pytest.approx(r.mu)
            assert got["conservative"] == pytest.approx(r.conservative)
            assert (got["wins"], got["draws"], got["losses"], got["games"]) == (r.wins, r.draws, r.losses, r.games)
        # the default: the fitted table's order (payoff first in a payoff game), with its intervals and flags
        status, body = get(server, f"/api/players?game={urllib.request.quote(game)}")
        board = fitted_board(store, game)  # a payoff game's: in payoff order, its rank intervals by that payoff
        rows = board.rows
        assert body["scoring"] == board.scoring and body["fit"]["resamples"] == 1000
        assert [r["player"] for r in body["rows"]] == [r.player for r in rows]
        for got, r in zip(body["rows"], rows):
            assert (got["rating"], got["rating_lo"], got["rating_hi"]) == pytest.approx((r.rating, r.lo, r.hi))
            assert (got["rank_lo"], got["rank_hi"], got["provisional"]) == (r.rank_lo, r.rank_hi, r.provisional)
            assert got["rating_lo"] <= got["rating"] <= got["rating_hi"]
    status, body = get(server, "/api/players")
    assert sum(r["alpharank"] for r in body["rows"] if r["alpharank"] is not None) == pytest.approx(1.0)
    status, pay = get(server, "/api/payoff")
    assert status == 200 and len(pay["win_rate"]) == len(pay["players"]) == len(body["rows"])
    status, hist = get(server, "/api/history?top=3")
    assert status == 200 and len(hist["players"]) == 3
    top = hist["players"][0]
    assert hist["series"][top][-1][1] == pytest.approx(store.elo(OVERALL)[top])


def test_league_summary_and_openapi(server, store):
    status, s = get(server, "/api/league")
    assert status == 200 and s["name"] == "quickstart" and s["last_commit"] == store.result_count() == 42
    status, schema = get(server, "/openapi.json")
    assert status == 200
    for path in ("/api/players", "/api/matches", "/api/replays/{match_id}", "/api/play", "/api/play/{sid}/move"):
        assert path in schema["paths"]


def test_match_list_pages_through_every_result_once(server, store):
    everything = [r.match_id for r in reversed(store.results())]
    seen, cursor = [], None
    while True:
        status, page = get(server, "/api/matches?limit=7" + (f"&before={cursor}" if cursor else ""))
        assert status == 200
        seen += [m["match_id"] for m in page["matches"]]
        cursor = page["older"]
        if cursor is None:
            break
    assert seen == everything
    # back again with the newer cursor
    status, older = get(server, f"/api/matches?limit=5&before={store.results()[-10].commit_seq}")
    status, newer = get(server, f"/api/matches?limit=5&after={older['matches'][0]['commit_seq']}")
    assert [m["commit_seq"] for m in older["matches"]] == [r.commit_seq for r in reversed(store.results()[-15:-10])]
    assert [m["commit_seq"] for m in newer["matches"]] == [r.commit_seq for r in reversed(store.results()[-10:-5])]


@pytest.mark.parametrize("query,keep", [
    ("player=mcts", lambda r: "mcts" in r.players),
    ("game=openspiel/kuhn_poker-v0", lambda r: r.game == "openspiel/kuhn_poker-v0"),
    ("outcome=draw", lambda r: r.draw),
    ("outcome=forfeit", lambda r: r.outcome == "forfeit"),
    ("player=first&outcome=win", lambda r: r.winner is not None and r.players[r.winner] == "first"),
    ("player=first&outcome=loss", lambda r: "first" in r.players and r.winner is not None
     and r.players[r.winner] != "first"),
    ("player=" + urllib.request.quote(EVIL), lambda r: EVIL in r.players),
])
def test_match_filters_match_the_store(server, store, query, keep):
    status, page = get(server, f"/api/matches?limit=200&{query}")
    assert status == 200
    want = [r.match_id for r in reversed(store.results()) if keep(r)]
    assert want and [m["match_id"] for m in page["matches"]] == want


def test_date_filter_uses_commit_times(server, store):
    rows = store.results()
    mid = rows[len(rows) // 2].committed
    status, page = get(server, f"/api/matches?limit=200&since={mid}")
    assert [m["match_id"] for m in page["matches"]] == [r.match_id for r in reversed(rows) if r.committed >= mid]
    status, page = get(server, f"/api/matches?limit=200&until={mid}")
    assert [m["match_id"] for m in page["matches"]] == [r.match_id for r in reversed(rows) if r.committed < mid]
    status, page = get(server, "/api/matches?since=2000-01-01&until=2000-01-02")
    assert status == 200 and page["matches"] == []
    status, err = get(server, "/api/matches?since=yesterday")
    assert status == 400 and "not a date" in err["error"]


def test_replay_has_every_frame_and_both_views(server, store):
    row = next(r for r in store.results() if r.game == TTT and r.outcome == "normal")
    status, rep = get(server, f"/api/replays/{row.match_id}")
    assert status == 200 and rep["players"] == row.players
    assert len(rep["frames"]) == row.moves + 1 and rep["note"] == ""
    assert rep["frames"][0]["boards"][0]["cells"] == [""] * 9
    last = rep["frames"][-1]
    final = final_view(store.read_replay(row.match_id))
    assert last["views"] == final.texts
    assert last["boards"][0] == board_of(TTT, final.texts[0])
    marks = [c for c in last["boards"][0]["cells"] if c]
    assert len(marks) == row.moves
    assert all(s["action_text"] for s in rep["steps"])  # an actions-only replay gets its moves' texts


def test_kuhn_replay_shows_each_players_card(server, store):
    row = next(r for r in store.results() if r.game == "openspiel/kuhn_poker-v0")
    status, rep = get(server, f"/api/replays/{row.match_id}")
    hands = [b["hand"] for b in rep["frames"][0]["boards"]]
    assert all(len(h) == 1 and h[0] in "JQK" for h in hands) and hands[0] != hands[1]
    assert rep["frames"][0]["boards"][0]["pot"] == 2


def test_download_is_the_replay_text(server, store):
    mid = store.results()[0].match_id
    status, body = get(server, f"/api/replays/{mid}/download")
    assert status == 200 and body.decode() == store.read_replay(mid).to_text()
    status, gz = get(server, f"/api/replays/{mid}/download?gzip=1")
    assert gzip.decompress(gz).decode() == store.read_replay(mid).to_text()


BAD_IDS = ["../../etc/passwd", "..%2f..%2fetc%2fpasswd", "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "%2Fetc%2Fpasswd",
           "/etc/passwd", "..", "%2e%2e", "m00000001%00", "m00000001/../../league.db", "..%5c..%5cleague.db",
           "C:%5Cwindows", "~root", "league.db", "replays", "m99999999", "%252e%252e%252fetc"]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_replay_ids_are_looked_up_never_paths(server, bad):
    for path in (f"/api/replays/{bad}", f"/api/replays/{bad}/download", f"/api/matches/{bad}"):
        status, body, ctype = raw_get(server, path)
        assert status == 404, (path, status, body[:200])
        assert ctype.startswith("application/json") and "error" in json.loads(body)
        assert b"root:" not in body


def test_a_page_not_found_is_the_sites_own_page(server):
    """A wrong address gets the site's page (its header, its links), status 404, the address escaped; the
    API keeps its JSON."""
    status, body, ctype = raw_get(server, "/nowhere/<b>x</b>")
    assert status == 404 and ctype.startswith("text/html")
    page = body.decode()
    assert '<link rel="stylesheet" href="/static/style.css">' in page and "<h2>Not found</h2>" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page and 'href="/matches"' in page
    status, body, _ = raw_get(server, "/replay/m99999999")
    assert status == 404 and "no such match" in body.decode()


def test_request_bodies_are_limited(server):
    status, body = post(server, "/api/play", b"{" + b" " * 100_000 + b"}")
    assert status == 413 and "over" in body["error"]
    status, body = post(server, "/api/play", {"player": "first", "name": "x" * 500})
    assert status == 422 and "name" in body["error"]


def test_escaping_pages_carry_no_league_data(server):
    """The pages are shells: names and moves reach the page only as JSON, set with textContent."""
    for path in ("/", "/matches", "/play"):
        status, html = get(server, path)
        assert status == 200 and EVIL.encode() not in html and b"alert" not in html
    status, body = get(server, "/api/players")
    assert EVIL in [r["player"] for r in body["rows"]]  # JSON keeps the name as it is
    js = (ROOT / "arena/ui/web/static/app.js").read_text() + (ROOT / "arena/ui/web/static/render.js").read_text()
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "document.write" not in js


# -- play -------------------------------------------------------------------------------------------
def wait_turn(server, sid: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, s = get(server, f"/api/play/{sid}")
        assert status == 200
        if s["status"] in ("your_turn", "over", "error"):
            return s
        time.sleep(0.05)
    raise AssertionError("no turn came")


def play_whole_game(server, player: str = "first", seat: int = 0, name: str = "api-human") -> dict:
    status, s = post(server, "/api/play", {"game": TTT, "player": player, "seat": seat, "name": name})
    assert status == 200, s
    sid = s["session"]
    while True:
        s = wait_turn(server, sid)
        if s["status"] != "your_turn":
            return s
        legal = s["turn"]["legal"]
        assert all(m["cell"] == m["value"] for m in legal)  # tic-tac-toe: a cell a move
        status, body = post(server, f"/api/play/{sid}/move", {"move": legal[-1]["value"]})
        assert status == 200, body


def test_play_a_whole_game_rated_and_recorded(server, store):
    before = store.result_count("external")
    status, s = post(server, "/api/play", {"game": TTT, "player": "first", "seat": 0, "name": "api-human"})
    sid = s["session"]
    # the page says which mark the person plays and the opponent's rating before the match
    assert s["mark"] == "x" and s["elo_before"]["first"] == pytest.approx(store.elo(TTT)["first"])
    s = wait_turn(server, sid)
    status, err = post(server, f"/api/play/{sid}/move", {"move": "42"})  # no such square: asked again
    assert status == 400 and "42 is not a legal move" in err["error"] and err["state"]["status"] == "your_turn"
    status, err = post(server, f"/api/play/{sid}/move", {"move": "hello"})
    assert status == 400 and err["state"]["status"] == "your_turn"
    while s["status"] == "your_turn":
        status, body = post(server, f"/api/play/{sid}/move", {"move": str(s["turn"]["legal"][0]["value"])})
        assert status == 200, body
        s = wait_turn(server, sid)
    assert s["status"] == "over" and s["result"]["outcome"] == "normal"
    row = store.result_for(s["match_id"])
    assert row is not None and row.players == ["human:api-human", "first"]  # a person is a player of their own
    assert store.result_count("external") == before + 1
    elo = store.elo(TTT)
    assert s["elo_after"]["human:api-human"] == pytest.approx(elo["human:api-human"]) != s["elo_before"].get("human:api-human")
    status, again = post(server, f"/api/play/{sid}/move", {"move": "0"})
    assert status == 409 and "over" in again["error"]


def test_a_closed_tab_forfeits_once(server, store):
    before = store.result_count("external")
    status, s = post(server, "/api/play", {"game": TTT, "player": "random", "seat": 0, "name": "leaver"})
    sid, mid = s["session"], s["match_id"]
    s = wait_turn(server, sid)
    assert s["status"] == "your_turn"
    time.sleep(2.5)  # no poll for longer than idle_timeout (1.5 s): the person left
    deadline = time.monotonic() + 20
    while store.result_for(mid) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    row = store.result_for(mid)
    assert row.outcome == "forfeit" and "left the page" in row.reason and row.winner == 1
    status, s = get(server, f"/api/play/{sid}")
    assert s["status"] == "over" and s["result"]["outcome"] == "forfeit"
    time.sleep(0.5)
    assert store.result_count("external") == before + 1
    assert store.conn.execute("SELECT COUNT(*) FROM results WHERE match_id=?", (mid,)).fetchone()[0] == 1


def test_resigning_is_a_forfeit_recorded_once_on_either_sides_turn(server, store):
    status, s = post(server, "/api/play", {"game": TTT, "player": "random", "seat": 0, "name": "quitter"})
    sid, mid = s["session"], s["match_id"]
    assert wait_turn(server, sid)["status"] == "your_turn"
    status, s = post(server, f"/api/play/{sid}/resign", {})
    assert status == 200
    deadline = time.monotonic() + 20
    while store.result_for(mid) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    row = store.result_for(mid)
    assert row.outcome == "forfeit" and row.reason.endswith("the player resigned") and row.winner == 1
    # on the other side's turn: the forfeit comes when the person is next asked
    from arena.agents.base import Forfeit
    from arena.ui.web.play import PlaySession, PlaySettings, WebHumanAgent

    session = PlaySession("x", TTT, "random", "me", 0, PlaySettings(), status="opponent")
    session.resign()
    assert session.resigned
    with pytest.raises(Forfeit, match="resigned"):
        WebHumanAgent(session).act(None)
    assert store.conn.execute("SELECT COUNT(*) FROM results WHERE match_id=?", (mid,)).fetchone()[0] == 1


def test_several_people_play_at_once(server, store):
    before = store.result_count("external")
    outs: list[dict] = []
    threads = [threading.Thread(target=lambda i=i: outs.append(play_whole_game(server, "first", i % 2, f"p{i}")))
               for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(outs) == 3 and all(o["status"] == "over" for o in outs)
    assert len({o["match_id"] for o in outs}) == 3
    assert store.result_count("external") == before + 3


def test_bad_play_requests_are_explained(server):
    status, body = post(server, "/api/play", {"game": TTT, "player": "nobody"})
    assert status == 400 and "no player 'nobody'" in body["error"]
    status, body = post(server, "/api/play", {"game": TTT, "player": "first", "name": "mcts"})
    assert status == 400 and "league player's name" in body["error"]
    status, body = get(server, "/api/play/not-a-session")
    assert status == 404 and "no play session" in body["error"]


def test_token_guards_play(league_dir):
    with start_in_background(league_dir, port=0, token="s3cret") as srv:
        status, body = post(srv, "/api/play", {"game": TTT, "player": "first"})
        assert status == 401 and "token" in body["error"]
        status, body = post(srv, "/api/play", {"game": TTT, "player": "first"}, {"Authorization": "Bearer nope"})
        assert status == 401
        status, body = post(srv, "/api/play", {"game": TTT, "player": "first", "name": "tok"},
                            {"Authorization": "Bearer s3cret"})
        assert status == 200 and body["status"] in ("starting", "opponent", "your_turn")
        status, body = get(srv, "/api/players")  # reading needs none
        assert status == 200
        status, league = get(srv, "/api/league")
        assert league["token_required"] is True


def test_league_and_person_commit_through_one_path(tmp_path):
    """A league running while a person plays it: both results counted once, ratings as recomputed."""
    d = tmp_path / "busy"
    cfg = load_league_config(ROOT / "configs/leagues/quickstart.yaml", matches=10)
    League(cfg, d, backend="inline").run()
    with start_in_background(d, port=0) as srv:
        run = threading.Thread(target=lambda: League(load_league_config(
            ROOT / "configs/leagues/quickstart.yaml", matches=80), d, backend="inline").run())
        run.start()
        outs = [play_whole_game(srv, "first", 0, "racer") for _ in range(2)]
        run.join(300)
    s = open_league(d)
    try:
        assert s.result_count("league") == 80 and s.result_count("external") == 2
        assert all(o["status"] == "over" and s.result_for(o["match_id"]) is not None for o in outs)
        assert all(r.equal for r in recompute_rows(s))  # no update lost or counted twice
        w, dr, lo = s.records(TTT)["human:racer"]
        assert w + dr + lo == 2
    finally:
        s.close()


# -- the CLI ------------------------------------------------------------------------------------------
def arena(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**__import__("os").environ, "COLUMNS": "200"})


def test_serve_nowhere_is_one_line(tmp_path):
    r = arena("serve", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and "no league at" in lines[0] and "arena league run" in lines[0]


def test_serve_on_a_busy_port_is_one_line(league_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = arena("serve", str(league_dir), "--port", str(port))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and f"cannot listen on 127.0.0.1:{port}" in lines[0] and "--port" in lines[0]


def test_serve_on_every_interface_warns():
    from arena.ui.web import host_warning

    assert host_warning("127.0.0.1") is None
    assert "warning" in host_warning("0.0.0.0") and "--token" in host_warning("0.0.0.0")


def test_serve_without_the_web_extra_names_it(league_dir, tmp_path):
    # fastapi made unimportable in the child (a module of that name that fails), the rest unchanged
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "fastapi.py").write_text("raise ImportError('No module named fastapi')\n")
    env = {**__import__("os").environ, "COLUMNS": "200", "PYTHONPATH": str(blocker)}
    r = subprocess.run([sys.executable, "-m", "arena.cli", "serve", str(league_dir)], cwd=ROOT, capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and 'pip install "arena[web]"' in lines[0]


def test_league_run_serve_follows_the_running_league_and_stops_with_it(tmp_path):
    import json as _json
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = tmp_path / "L"
    proc = subprocess.Popen([sys.executable, "-m", "arena.cli", "league", "run", str(ROOT / "configs/leagues/quickstart.yaml"),
                             "--dir", str(d), "--matches", "600", "--serve", "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**__import__("os").environ, "COLUMNS": "200"})
    seen = []
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/league", timeout=5) as r:
                    seen.append(_json.load(r)["last_commit"])
            except OSError:
                pass
            time.sleep(0.2)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"serving {d} at http://127.0.0.1:{port}" in out
    # read while the league ran: the commits moved under the page
    moving = sorted(set(x for x in seen if 0 < x < 600))
    assert len(moving) >= 2, seen
    with pytest.raises(OSError):  # the server ended with the run
        urllib.request.urlopen(f"http://127.0.0.1:{port}/api/league", timeout=5)
