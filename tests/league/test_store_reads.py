"""The store's reads and state changes the views use (the web pages issue no SQL of their own)."""

import pytest

from arena.league.queries import result_page
from arena.league.storage import LeagueStore
from arena.match.loop import MatchResult


@pytest.fixture
def store(tmp_path):
    s = LeagueStore(tmp_path / "lg")
    for name, kind in (("a", "fixed"), ("b", "fixed"), ("c", "fixed"), ("human:x", "human")):
        s.add_player(name, kind, "random", ["g"])
    yield s
    s.close()


def _play(store, players, returns, outcome="normal", source="league"):
    m = store.enqueue("g", players, ["random"] * len(players), status="running", source=source)
    best = max(returns)
    winner = returns.index(best) if returns.count(best) == 1 else None
    store.commit_result(m.match_id, MatchResult(m.match_id, "g", 0, players, returns, winner, winner is None, 3,
                                                outcome))
    return m.match_id


def test_counts_version_and_match_info(store):
    assert store.state_version() == (0, 4, 4, 0) and store.last_commit() == 0
    first = _play(store, ["a", "b"], [1.0, -1.0])
    store.enqueue("g", ["a", "c"], ["random"] * 2, status="running")
    assert store.last_commit() == 1 and store.state_version()[0] == 1
    assert store.match_count() == 2 and store.match_count("running") == 1 and store.match_count("failed") == 0
    assert store.player_count() == 4 and store.player_count(humans=False) == 3
    info = store.match_info(first)
    assert info.seed == 0 and info.specs == ["random", "random"] and info.source == "league"
    assert info.created <= info.started <= info.finished
    assert store.match_info("m99999999") is None


def test_rating_history_of_some_players(store):
    _play(store, ["a", "b"], [1.0, -1.0])
    _play(store, ["b", "c"], [0.0, 0.0])
    assert [p for _, p, *_ in store.rating_history("g")] == ["a", "b", "b", "c"]
    assert [p for _, p, *_ in store.rating_history("g", ["c", "a"])] == ["a", "c"]


def test_result_pages_by_cursor_player_and_outcome(store):
    ids = [_play(store, ["a", "b"], [1.0, -1.0]), _play(store, ["b", "c"], [0.0, 0.0]),
           _play(store, ["a", "b", "c"], [0.0, 0.0, 1.0], outcome="forfeit"), _play(store, ["c", "a"], [1.0, -1.0])]
    seqs = lambda page: [r.commit_seq for r in page.results]  # noqa: E731
    page = result_page(store, limit=2)
    assert seqs(page) == [4, 3] and not page.ascending and page.last_commit == 4
    assert seqs(result_page(store, before=3, limit=2)) == [2, 1]
    after = result_page(store, after=1, limit=2)
    assert seqs(after) == [3, 2] and after.ascending  # the two just after 1, newest first
    assert seqs(result_page(store, player="c")) == [4, 3, 2]  # the third seat too
    assert seqs(result_page(store, player="c", wide=False)) == [4, 2]  # told there are no wide results
    assert seqs(result_page(store, player="a", outcome="win")) == [1]
    assert seqs(result_page(store, player="a", outcome="loss")) == [4, 3]
    assert seqs(result_page(store, outcome="draw")) == [2]
    assert seqs(result_page(store, outcome="forfeit")) == [3]
    assert seqs(result_page(store, since=store.result_for(ids[2]).committed)) == [4, 3]
    assert store.first_commit_at(0.0) == 1 and store.first_commit_at(float("inf")) == 5


def test_abandon_only_a_running_match_without_a_result(store):
    open_ = store.enqueue("g", ["human:x", "a"], ["human", "random"], status="running", source="external",
                          note="web play, server 1")
    done = _play(store, ["human:x", "b"], [1.0, -1.0], source="external")
    queued = store.enqueue("g", ["a", "b"], ["random"] * 2)
    assert store.abandon(open_.match_id, "aborted: gone")
    assert not store.abandon(open_.match_id, "again")  # failed already
    assert not store.abandon(done, "aborted") and not store.abandon(queued.match_id, "aborted")
    failed = store.matches(status="failed")
    assert [(m.match_id, m.note) for m in failed] == [(open_.match_id, "aborted: gone")]
    assert store.match_info(open_.match_id).finished is not None and store.result_for(open_.match_id) is None


def test_matches_by_note_prefix_take_the_prefix_literally(store):
    for note in ("web play, server 1", "web play, server 2", "web_play% other", "WEB PLAY, SERVER 3", None):
        store.enqueue("g", ["a", "b"], ["random"] * 2, status="running", source="external", note=note)
    notes = lambda prefix: [m.note for m in store.matches(status="running", note_prefix=prefix)]  # noqa: E731
    assert notes("web play, server ") == ["web play, server 1", "web play, server 2", "WEB PLAY, SERVER 3"]
    assert notes("web_play%") == ["web_play% other"]
    assert notes("web_") == ["web_play% other"]  # '_' is no wildcard
