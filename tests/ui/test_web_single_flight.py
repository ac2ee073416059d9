"""The leaderboard while a league writes: one computation per league version, shared by the requests.

A security review measured the leaderboard recomputed once per waiting request while a league
committed (p99 14.8 s for the page, 23 s for /api/players under 50 clients). These tests count the
computations (`LeagueData.computed`, and the calls of the table's own computation), never the time:
a computation is held open with an event while requests come, so what each request takes does not
depend on how fast the machine is."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import arena.ui.web.data as web_data  # noqa: E402
from arena.league.config import GameEntry, LeagueConfig, PlayerEntry  # noqa: E402
from arena.league.manager import League  # noqa: E402
from arena.ui.web import start_in_background  # noqa: E402

TTT = "openspiel/tic_tac_toe-v0"
#: Generous bound on any one wait here (a loaded 2-core machine): what is counted is never a time.
WAIT = 60.0
CLIENTS = 20


def config(matches: int) -> LeagueConfig:
    return LeagueConfig(games=[GameEntry(TTT)], name="flight", matches=matches, pairing="round_robin",
                        players=[PlayerEntry("random", "random"), PlayerEntry("first", "first")], record="actions")


def commit_more(d: Path, matches: int) -> None:
    """The league commits more results (the writer, in this process: the server takes no lock)."""
    league = League(config(matches), d, backend="inline")
    try:
        league.run()
    finally:
        league.close()


@pytest.fixture
def league(tmp_path) -> Path:
    d = tmp_path / "league"
    commit_more(d, 6)
    return d


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=WAIT) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def last_commit(d: Path) -> int:
    db = sqlite3.connect(f"file:{d / 'league.db'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT MAX(commit_seq) FROM results").fetchone()[0]
    finally:
        db.close()


class Held:
    """The leaderboard's computation, counted, and held open until `release` (each call)."""

    def __init__(self, data, monkeypatch, fail: Exception | None = None):
        self.calls = 0
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.joined = 0
        self.fail = fail
        self._lock = threading.Lock()
        compute, join = data._leaderboard, data._join

        def held(game, sort):
            with self._lock:
                self.calls += 1
            self.entered.set()
            assert self.gate.wait(WAIT), "the test never released the computation"
            if self.fail is not None:
                raise self.fail
            return compute(game, sort)

        def counted_join(flight):
            with self._lock:
                self.joined += 1
            return join(flight)

        monkeypatch.setattr(data, "_leaderboard", held)
        monkeypatch.setattr(data, "_join", counted_join)

    def wait_joined(self, n: int) -> None:
        deadline = time.monotonic() + WAIT
        while self.joined < n:
            assert time.monotonic() < deadline, f"{self.joined} of {n} requests came to the computation"
            time.sleep(0.01)


def test_concurrent_requests_take_one_computation_and_a_commit_makes_a_new_one(league, monkeypatch):
    """The first table is being computed when the league commits and twenty requests come: they all
    take that one computation's result (before: each found it out of date once it came, and computed
    its own, one after another); the table is then reused until the league commits again, and the
    commit makes exactly one more."""
    monkeypatch.setattr(web_data, "REUSE_FOR", 0.0)  # no reuse past a commit: only the single flight
    with start_in_background(league, port=0) as srv:
        data = srv.app.state.data
        held = Held(data, monkeypatch)
        with ThreadPoolExecutor(CLIENTS) as pool:
            first = pool.submit(get, srv.url + "/api/players")
            assert held.entered.wait(WAIT)
            commit_more(league, 10)  # the league writes while the table is computed
            rest = [pool.submit(get, srv.url + "/api/players") for _ in range(CLIENTS - 1)]
            held.wait_joined(CLIENTS - 1)  # every other request waits for the one computation
            held.gate.set()
            answers = [first.result(WAIT)] + [f.result(WAIT) for f in rest]
        assert [status for status, _ in answers] == [200] * CLIENTS
        assert all(body == answers[0][1] for _, body in answers)
        assert held.calls == 1 and data.computed["leaderboard-json"] == 1

        # the league moved after the computation began (it is kept under the version it began at):
        # one new computation
        status, body = get(srv.url + "/api/players")
        assert status == 200 and body["version"][0] == last_commit(league)
        assert held.calls == 2 and data.computed["leaderboard-json"] == 2
        assert sum(r["games"] for r in body["rows"]) == 2 * 10  # two players a match

        for _ in range(5):  # the league did not move since: the same table
            assert get(srv.url + "/api/players") == (200, body)
        assert held.calls == 2 and data.computed["leaderboard-json"] == 2
        commit_more(league, 14)
        status, body = get(srv.url + "/api/players")
        assert status == 200 and body["version"][0] == last_commit(league) and held.calls == 3


def test_requests_during_a_recomputation_take_the_previous_table(league, monkeypatch):
    """While the table of a newer version is computed, requests are answered at once with the
    previous one (they never wait, nor compute a second table); then the new one is served."""
    monkeypatch.setattr(web_data, "REUSE_FOR", 0.0)
    with start_in_background(league, port=0) as srv:
        data = srv.app.state.data
        status, old = get(srv.url + "/api/players")
        assert status == 200
        commit_more(league, 10)
        held = Held(data, monkeypatch)
        with ThreadPoolExecutor(CLIENTS) as pool:
            leader = pool.submit(get, srv.url + "/api/players")
            assert held.entered.wait(WAIT)
            rest = [pool.submit(get, srv.url + "/api/players") for _ in range(CLIENTS - 1)]
            answers = [f.result(WAIT) for f in rest]  # answered while the computation is still held
            assert not held.gate.is_set() and not leader.done()
            held.gate.set()
            status, new = leader.result(WAIT)
        assert answers == [(200, old)] * (CLIENTS - 1) and held.joined == 0
        assert status == 200 and new["version"][0] == last_commit(league) > old["version"][0]
        assert held.calls == 1 and data.computed["leaderboard-json"] == 2
        assert get(srv.url + "/api/players") == (200, new) and held.calls == 1


def test_a_failed_computation_is_every_waiters_one_line_503(league, monkeypatch):
    """The requests that waited for a computation that failed get its error (each a 503 with one
    line), not a computation each."""
    with start_in_background(league, port=0) as srv:
        data = srv.app.state.data
        held = Held(data, monkeypatch, fail=sqlite3.OperationalError("database disk image is malformed"))
        with ThreadPoolExecutor(8) as pool:
            first = pool.submit(get, srv.url + "/api/players")
            assert held.entered.wait(WAIT)
            rest = [pool.submit(get, srv.url + "/api/players") for _ in range(7)]
            held.wait_joined(7)
            held.gate.set()
            answers = [first.result(WAIT)] + [f.result(WAIT) for f in rest]
        assert [status for status, _ in answers] == [503] * 8 and held.calls == 1
        assert all("cannot be read (database disk image is malformed)" in body["error"] and "\n" not in body["error"]
                   for _, body in answers)
        held.fail = None  # the next request computes again
        held.gate.set()
        assert get(srv.url + "/api/players")[0] == 200 and held.calls == 2


def test_a_table_is_reused_a_while_after_the_league_moves(league, monkeypatch):
    """A league that commits all the time does not keep the server computing tables back to back: a
    table is reused for `REUSE_FOR` times its computation after it was made; it says which version
    it is of, so the page asks again."""
    data = web_data.LeagueData(league)
    try:
        calls = []
        monkeypatch.setattr(web_data, "REUSE_FOR", 1e9)
        view = lambda: data.cached(("view",), lambda: calls.append(data.version()) or calls[-1])  # noqa: E731
        first = view()
        commit_more(league, 10)
        assert view() == first and len(calls) == 1  # reused: made just now
        data._cache[("view",)].until = 0.0  # its time is up
        monkeypatch.setattr(web_data, "REUSE_FOR", 0.0)
        assert view() == data.version() != first and len(calls) == 2
        commit_more(league, 14)
        assert view() == data.version() and len(calls) == 3  # not reused: the league moved
        assert view() == data.version() and len(calls) == 3  # and it did not since
    finally:
        data.close()
