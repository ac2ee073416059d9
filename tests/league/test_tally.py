"""The league's tally: the rated two-player results counted, what the fitted tables read.

It is kept with each commit, caught up by a reader when results came without it (an older league, an
arena that kept none), and counted from the results where the database cannot be written; in every
case it holds what the result log holds, recounted here independently."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter

import numpy as np
import pytest

from arena.league import leaderboard as lb
from arena.league.bt import Results, fit_bt
from arena.league.storage import OVERALL, LeagueStore
from arena.match.loop import MatchResult

WIN, PAY, MANY = "openspiel/tic_tac_toe-v0", "openspiel/kuhn_poker-v0", "openspiel/liars_dice-v0"
PLAYERS = ["ann", "bob", "cy", "dee"]


def _commit(store: LeagueStore, rng: random.Random, k: int) -> None:
    """One result of a kind drawn by `rng`: a win game, a payoff game (some forfeits, invalid moves),
    a duplicate pair, self-play, or three seats."""
    kind = rng.choice(["win", "win", "pay", "pay", "pair", "self", "many"])
    if kind == "many":
        seats = rng.sample(PLAYERS, 3)
        m = store.enqueue(MANY, seats, ["random"] * 3)
        store.commit_result(m.match_id, MatchResult(m.match_id, MANY, k, seats, [1.0, -0.5, -0.5], 0, False, 9,
                                                    "normal", invalid=[0, 0, 0]))
        return
    a, b = rng.sample(PLAYERS, 2)
    if kind == "self":
        b = a
    game = WIN if kind == "win" else PAY
    ret = rng.choice([1.0, 0.0, -1.0]) if game == WIN else rng.choice([2.0, 1.0, -1.0, -2.0])
    forfeit = rng.random() < 0.15
    winner = None if ret == 0 else (0 if ret > 0 else 1)
    inv = [rng.choice([0, 0, 1, 3]), rng.choice([0, 2])]
    first = store.enqueue(game, [a, b], ["random", "random"], pair=True if kind == "pair" else None)
    store.commit_result(first.match_id, MatchResult(first.match_id, game, k, [a, b], [ret, -ret], winner, ret == 0, 5,
                                                    "forfeit" if forfeit else "normal", invalid=inv))
    if kind == "pair":
        second = store.enqueue(game, [b, a], ["random", "random"], pair=first.match_id)
        r2 = rng.choice([2.0, -1.0])
        store.commit_result(second.match_id, MatchResult(second.match_id, game, k, [b, a], [r2, -r2],
                                                         0 if r2 > 0 else 1, False, 5, "normal", invalid=[0, 0]))


def _league(tmp_path, n: int = 160, seed: int = 0) -> LeagueStore:
    store = LeagueStore(tmp_path / "lg")
    for p in PLAYERS:
        store.add_player(p, "fixed", "random", [WIN, PAY, MANY])
    rng = random.Random(seed)
    for k in range(n):
        _commit(store, rng, k)
    return store


def _recount(store: LeagueStore, game: str = OVERALL) -> tuple[Counter, Counter, int]:
    """From the result log, one result at a time: matches and invalid moves per tally key, and the
    results of more than two seats."""
    n: Counter = Counter()
    inv: Counter = Counter()
    many = 0
    for r in store.results(None if game == OVERALL else game):
        if len(r.players) > 2:
            many += 1
            continue
        if r.players[0] == r.players[1] or r.pair is not None:
            continue
        ff = 1 - r.winner if r.outcome == "forfeit" and r.winner in (0, 1) else -1
        key = (r.game, r.players[0], r.players[1], r.returns[0], r.returns[1], ff)
        n[key] += 1
        inv[key + ("a",)] += r.invalid[0]
        inv[key + ("b",)] += r.invalid[1]
    return n, inv, many


def _as_counters(rows: list[tuple]) -> tuple[Counter, Counter]:
    n, inv = Counter(), Counter()
    for g, a, b, r0, r1, ff, count, i0, i1 in rows:
        key = (g, a, b, r0, r1, ff)
        n[key] += count
        inv[key + ("a",)] += i0
        inv[key + ("b",)] += i1
    return n, +inv


def _check(store: LeagueStore) -> None:
    for game in (OVERALL, WIN, PAY):
        rows, many = store.tally_rows(game)
        n, inv, many_ref = _recount(store, game)
        assert _as_counters(rows) == (n, +inv) and many == many_ref
        assert len(rows) == len(n) < sum(n.values())  # alike matches counted once


def test_the_tally_holds_what_the_result_log_holds(tmp_path) -> None:
    store = _league(tmp_path)
    assert store.get_meta("tally_seq") == store.conn.execute("SELECT MAX(commit_seq) FROM results").fetchone()[0]
    _check(store)
    _, _, many = _recount(store)
    assert many > 0 and store.result_count() > sum(_recount(store)[0].values()) + many  # pairs, self-play left out


def test_results_written_without_the_tally_are_caught_up_by_the_next_reader(tmp_path, monkeypatch) -> None:
    store = _league(tmp_path, 60)
    seq_before = store.get_meta("tally_seq")
    # an arena that kept no tally writes some results; this one then writes more: it must not count its
    # own after a gap (the tally stays where it was until a reader counts the gap and what follows)
    monkeypatch.setattr(LeagueStore, "_tally_commit", lambda *a, **k: None)
    rng = random.Random(7)
    for k in range(30):
        _commit(store, rng, 100 + k)
    monkeypatch.undo()
    for k in range(30):
        _commit(store, rng, 200 + k)
    assert store.get_meta("tally_seq") == seq_before
    _check(store)  # caught up by the read
    assert store.get_meta("tally_seq") == store.conn.execute("SELECT MAX(commit_seq) FROM results").fetchone()[0]
    # a league from before the tally: none of it, counted whole on the first read
    store.conn.execute("DELETE FROM tally")
    store.conn.execute("DELETE FROM tally_many")
    store.conn.execute("DELETE FROM meta WHERE key='tally_seq'")
    _check(store)


def test_a_database_that_cannot_be_written_is_counted_from_its_results(tmp_path, monkeypatch) -> None:
    store = _league(tmp_path, 80)
    store.conn.execute("DELETE FROM tally")  # stale and behind: the reader would have to write
    store.conn.execute("DELETE FROM meta WHERE key='tally_seq'")

    def readonly(self):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(LeagueStore, "tx", readonly)
    assert store.catch_up_tally() is False
    _check(store)


def test_the_fitted_table_from_the_tally_is_the_table_from_every_match(tmp_path) -> None:
    """Rows of `count` matches alike give the same fit, intervals, records and payoffs as the matches
    one by one (the same cells, so the same bootstrap draws)."""
    store = _league(tmp_path, 240, seed=3)
    res = lb.two_player_results(store, PAY)
    assert res.count.max() > 1
    # every match on its own row
    rows = [r for r in store.results(PAY) if len(r.players) == 2 and r.players[0] != r.players[1]]
    code = {x: k for k, x in enumerate(res.names)}
    one = lb.TwoPlayerResults(
        res.games, res.names, np.zeros(len(rows), np.int64), np.array([code[r.players[0]] for r in rows]),
        np.array([code[r.players[1]] for r in rows]), np.array([r.returns[0] for r in rows]),
        np.array([r.returns[1] for r in rows]),
        np.array([code[r.players[1 - r.winner]] if r.outcome == "forfeit" and r.winner in (0, 1) else -1
                  for r in rows]),
        np.array([r.invalid[0] for r in rows]), np.array([r.invalid[1] for r in rows]), [r.pair for r in rows])
    assert one.matches == res.matches
    scorings = {PAY: "payoff"}

    def table(x: lb.TwoPlayerResults):
        unit = np.where([bool(p) for p in x.pair], lb._unit_codes(x), -1)
        return fit_bt(Results(x.game, x.a, x.b, lb._scores(x, scorings), x.games, x.names, unit, x.count),
                      scope=PAY, anchor=None, resamples=200, stability_replicates=50)

    t1, t2 = table(res), table(one)
    assert [(r.player, r.games) for r in t1.rows] == [(r.player, r.games) for r in t2.rows]
    assert [x for r in t1.rows for x in (r.rating, r.lo, r.hi)] == pytest.approx(
        [x for r in t2.rows for x in (r.rating, r.lo, r.hi)], abs=1e-9)
    assert t1.stability == t2.stability
    for s1, s2 in zip(lb._payoff_stats(res), lb._payoff_stats(one)):
        assert (s1.n, s1.mean, s1.lo, s1.hi) == pytest.approx((s2.n, s2.mean, s2.lo, s2.hi), abs=1e-12)
    n1, _ = lb.nash_payoffs(res, resamples=0)
    n2, _ = lb.nash_payoffs(one, resamples=0)
    assert [s.mean for s in n1] == pytest.approx([s.mean for s in n2], abs=1e-12)
    assert [s.n for s in n1] == [s.n for s in n2]
    board = lb.leaderboard(store, PAY, resamples=50)
    by = {r.player: r for r in board.rows}
    for p in res.names:
        mine = [r for r in rows if p in r.players]
        assert by[p].games == len(mine)
        assert by[p].invalid == sum(r.invalid[r.players.index(p)] for r in mine)
        assert by[p].forfeits == sum(1 for r in mine if r.outcome == "forfeit" and r.winner in (0, 1)
                                     and r.players[1 - r.winner] == p)
