"""People on the play page are players of their own: a name per browser (a cookie), ``human:NAME`` in
the league, a guest name when none is given, bad names refused with one line; and the rating change
shown after a match is that match's own commit's, even when another match of the same person was
committed in between."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from arena.config import from_dict  # noqa: E402
from arena.league.config import LeagueConfig  # noqa: E402
from arena.league.manager import League, open_league  # noqa: E402
from arena.league.ratings import EloTable  # noqa: E402
from arena.ui.web import PlaySettings, create_app  # noqa: E402
from arena.ui.web.api import NAME_COOKIE  # noqa: E402

TTT = "openspiel/tic_tac_toe-v0"
#: Against "first" (it takes the lowest free cell), seat 0: 2, (0), 4, (1), 6 is a win on the diagonal.
WIN = (2, 4, 6)
GUEST = re.compile(r"^guest-[a-z0-9]{6}$")


@pytest.fixture(scope="module")
def league_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("people") / "L"
    cfg = from_dict(LeagueConfig, {"name": "people", "seed": 1, "games": [{"id": TTT}], "matches": 4, "in_flight": 1,
                                   "players": [{"name": "random", "agent": "random"}, {"name": "first", "agent": "first"}]})
    League(cfg, d, backend="inline").run()
    return d


@pytest.fixture(scope="module")
def app(league_dir):
    app = create_app(league_dir, play=PlaySettings(idle_timeout=30, move_time_limit=60, starts_per_minute=0))
    yield app
    app.state.plays.shutdown()


@pytest.fixture()
def browser(app):
    """A fresh browser: a client with a cookie jar of its own."""
    return lambda: TestClient(app)


@pytest.fixture()
def store(league_dir):
    s = open_league(league_dir)
    yield s
    s.close()


def start(client, name: str | None = None, player: str = "first") -> dict:
    body = {"game": TTT, "player": player, "seat": 0}
    if name is not None:
        body["name"] = name
    r = client.post("/api/play", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def wait(client, sid: str, statuses=("your_turn", "over", "error"), timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = client.get(f"/api/play/{sid}").json()
        if s["status"] in statuses:
            return s
        time.sleep(0.02)
    raise AssertionError(f"session {sid}: still {s['status']}")


def win(client, s: dict) -> dict:
    """Play the winning line against "first"; the session's end."""
    for move in WIN:
        assert wait(client, s["session"])["status"] == "your_turn"
        r = client.post(f"/api/play/{s['session']}/move", json={"move": move})
        assert r.status_code == 200, r.text
    end = wait(client, s["session"], ("over", "error"))
    assert end["status"] == "over" and end["result"]["you_won"], end
    return end


def history_change(store, match_id: str, player: str) -> float:
    """The store's own numbers: this commit's Elo row minus the player's row before it."""
    seq = store.result_for(match_id).commit_seq
    rows = store.conn.execute("SELECT commit_seq, elo FROM rating_history WHERE game=? AND player=? AND commit_seq<=? "
                              "ORDER BY commit_seq", (TTT, player, seq)).fetchall()
    assert rows[-1][0] == seq
    return rows[-1][1] - (rows[-2][1] if len(rows) > 1 else EloTable().initial)


def test_two_browsers_with_two_names_are_two_players(browser, store):
    a, b = browser(), browser()
    sa, sb = start(a, "alice"), start(b, "bob")
    assert (sa["you"], sa["name"]) == ("human:alice", "alice") and (sb["you"], sb["name"]) == ("human:bob", "bob")
    ea, eb = win(a, sa), win(b, sb)
    assert store.result_for(ea["match_id"]).players == ["human:alice", "first"]
    assert store.result_for(eb["match_id"]).players == ["human:bob", "first"]
    for name in ("human:alice", "human:bob"):
        row = store.player(name)
        assert row.kind == "human" and row.spec == "human" and not row.active  # never scheduled by the league
    elo = store.elo(TTT)
    assert ea["elo_after"]["human:alice"] == pytest.approx(elo["human:alice"])
    assert eb["elo_after"]["human:bob"] == pytest.approx(elo["human:bob"])
    assert "human" not in elo  # no shared player
    roster = {p["name"]: p["kind"] for p in a.get("/api/roster").json()}
    assert roster["human:alice"] == roster["human:bob"] == "human"
    # each browser keeps its own name
    assert a.cookies.get(NAME_COOKIE) == "alice" and b.cookies.get(NAME_COOKIE) == "bob"
    assert a.get("/api/play/options").json()["name"] == "alice"
    assert browser().get("/api/play/options").json()["name"] is None


def test_the_same_cookie_keeps_its_player_across_games(browser, store):
    c = browser()
    first = start(c, "carol")
    win(c, first)
    again = start(c, "")  # the field left empty: the browser's name
    assert again["you"] == "human:carol"
    third = start(c)  # no name at all
    assert third["you"] == "human:carol"
    for s in (again, third):
        c.post(f"/api/play/{s['session']}/resign", json={})
        wait(c, s["session"], ("over",))
        assert store.result_for(s["match_id"]).players[0] == "human:carol"
    assert sum(1 for p in store.players() if p.name.lower() == "human:carol") == 1
    # a name typed replaces the browser's
    other = start(c, "carol2")
    assert other["you"] == "human:carol2" and c.cookies.get(NAME_COOKIE) == "carol2"
    c.post(f"/api/play/{other['session']}/resign", json={})


def test_no_name_gets_a_guest_name_of_its_own(browser, store):
    x, y = browser(), browser()
    sx, sy = start(x, ""), start(y)
    gx, gy = sx["name"], sy["name"]
    assert GUEST.match(gx) and GUEST.match(gy) and gx != gy
    assert sx["you"] == f"human:{gx}" and store.player(f"human:{gx}").kind == "human"
    assert x.cookies.get(NAME_COOKIE) == gx
    assert start(x, "")["you"] == f"human:{gx}"  # the guest keeps its name
    for client, s in ((x, sx), (y, sy)):
        client.post(f"/api/play/{s['session']}/resign", json={})


@pytest.mark.parametrize("name, says", [
    ("x" * 25, "at most 24"),
    ("a\x01b", "characters a name may not have"),
    ("tab\there", "characters a name may not have"),
    ("../x", "characters a name may not have"),
    ("a/b", "characters a name may not have"),
    ("<script>", "characters a name may not have"),
    ("human:eve", "characters a name may not have"),
    ("first", "league player's name"),
    ("RANDOM", "league player's name"),
    ("human", "reserved"),
    ("Guest", "reserved"),
])
def test_bad_names_are_refused_with_one_line(browser, store, name, says):
    players = len(store.players())
    r = browser().post("/api/play", json={"game": TTT, "player": "first", "name": name})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert says in err and "\n" not in err and "\x01" not in err and "Traceback" not in err
    assert NAME_COOKIE not in r.cookies
    assert len(store.players()) == players  # nobody added


def test_a_name_in_other_case_and_hostile_requests(browser, store):
    c = browser()
    s = start(c, "Dave")
    c.post(f"/api/play/{s['session']}/resign", json={})
    r = browser().post("/api/play", json={"game": TTT, "player": "first", "name": "dave"})
    assert r.status_code == 400 and "taken as 'Dave'" in r.json()["error"] and "play as 'Dave'" in r.json()["error"]
    for body in ({"player": "first", "name": "x" * 500}, {"player": "first", "name": {"__class__": 1}},
                 {"player": "first", "name": ["a"]}):
        r = browser().post("/api/play", json=body)
        assert r.status_code == 422 and "name" in r.json()["error"]
    # a cookie that is no name is ignored: a guest name instead
    for bad in ("../../etc", "x" * 5000, "first", "a\\x00"):
        h = browser()
        h.cookies.set(NAME_COOKIE, bad)
        assert h.get("/api/play/options").json()["name"] in (None, "first")
        r = h.post("/api/play", json={"game": TTT, "player": "first"})
        if bad == "first":  # a valid spelling, but a league player's name: refused, never played as the bot
            assert r.status_code == 400 and "league player's name" in r.json()["error"]
            continue
        assert r.status_code == 200 and GUEST.match(r.json()["name"]), r.text
        h.post(f"/api/play/{r.json()['session']}/resign", json={})


def test_the_change_shown_is_the_matchs_own_commit(browser, store):
    """A win's change is its commit's even when a forfeit of the same person was committed after it
    started (the old "Elo now minus Elo at the start" showed the two together)."""
    c = browser()
    won = start(c, "erin")  # match A: started first, committed last
    lost = start(c, "erin", player="random")  # match B: given up at once, committed in between
    assert wait(c, lost["session"])["status"] == "your_turn"
    c.post(f"/api/play/{lost['session']}/resign", json={})
    gone = wait(c, lost["session"], ("over",))
    assert gone["result"]["outcome"] == "forfeit" and gone["elo_change"]["human:erin"] < 0
    end = win(c, won)
    seq_a, seq_b = (store.result_for(m).commit_seq for m in (won["match_id"], lost["match_id"]))
    assert seq_b < seq_a  # the forfeit's commit came between the start of A and its commit
    own = history_change(store, won["match_id"], "human:erin")
    assert own > 0
    assert end["elo_change"]["human:erin"] == pytest.approx(own)
    assert end["elo_after"]["human:erin"] - end["elo_before"]["human:erin"] == pytest.approx(own)
    assert end["elo_before"]["human:erin"] == pytest.approx(gone["elo_after"]["human:erin"])
    assert end["elo_change"]["first"] == pytest.approx(history_change(store, won["match_id"], "first"))
    # what the page computed before: the rating now minus at the start, the forfeit in it
    at_start = won["elo_before"].get("human:erin")
    old = end["elo_after"]["human:erin"] - (at_start if at_start is not None else EloTable().initial)
    assert old == pytest.approx(own + gone["elo_change"]["human:erin"]) and old < own
