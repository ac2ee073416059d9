"""Seat balance by construction and duplicate matches (`arena.league.manager`, ``seat_balance`` and
``duplicate`` in `arena.league.config`): every fixed pairing on a two-player game is played in both seat
orders, a duplicate pair shares its seed and so its chance outcomes, the owed second match survives any
stop between the two, and the store's pair columns come to an older league folder on open."""

import collections
import sqlite3
from pathlib import Path

import pyspiel
import pytest
import yaml

from arena.config import from_dict
from arena.errors import ConfigError
from arena.league.config import LeagueConfig, load_league_config
from arena.league.manager import PAIR_NEXT, League, open_league
from arena.league.storage import LeagueStore
from arena.match.verify import core_for_replay

KUHN = "openspiel/kuhn_poker-v0"
TTT = "openspiel/tic_tac_toe-v0"


def config(**changes) -> LeagueConfig:
    data = {"name": "dup", "seed": 5, "games": [{"id": KUHN}, {"id": TTT}],
            "players": [{"name": "r1", "agent": "random"}, {"name": "r2", "agent": "random"},
                        {"name": "first", "agent": "first"}],
            "pairing": "uniform", "matches": 60, "workers": 1, "in_flight": 4}
    data.update(changes)
    return from_dict(LeagueConfig, data)


def seat_orders(store: LeagueStore) -> collections.Counter:
    return collections.Counter((m.game, tuple(m.players)) for m in store.matches())


@pytest.mark.parametrize("pairing", ["uniform", "pfsp"])
def test_every_pairing_is_played_in_both_seat_orders(tmp_path, pairing):
    league = League(config(pairing=pairing), tmp_path / "l", backend="inline")
    summary = league.run()
    assert summary["results"] == 60
    store = league.store
    counts = seat_orders(store)
    for (game, (a, b)), n in counts.items():
        assert counts[(game, (b, a))] == n, (game, a, b)  # exactly as many matches in each seat order
    assert len(store.seat_pairs()) == 30  # 60 matches: 30 complete pairs, in the order they were drawn
    rows = {m.match_id: m for m in store.matches()}
    for first, second in store.seat_pairs():
        m1, m2 = rows[first], rows[second]
        assert m2.seq == m1.seq + 1 and m1.pair == m2.pair == first
        assert m2.players == m1.players[::-1] and m1.game == m2.game
        assert (m1.seed == m2.seed) == (m1.game == KUHN)  # duplicate: auto is on for kuhn only
    assert {r.pair for r in store.results()} == {a for a, _ in store.seat_pairs()}


def test_round_robin_pairs_a_round_with_the_next_and_reuses_its_seeds(tmp_path):
    # A round: the 3 pairs of kuhn, then the 3 of tic-tac-toe, one match each (round_robin's order, as
    # without seat balance); the next round swaps the seats, and each of its matches is the second of
    # the pair the last round began, on the same seed for kuhn (duplicate: auto).
    league = League(config(pairing="round_robin", matches=24), tmp_path / "l", backend="inline")
    league.run()
    store = league.store
    rows = store.matches()
    assert [m.game for m in rows] == ([KUHN] * 3 + [TTT] * 3) * 4
    counts = seat_orders(store)
    assert all(counts[(g, (b, a))] == n for (g, (a, b)), n in counts.items())
    by_id = {m.match_id: m for m in rows}
    pairs = store.seat_pairs()
    assert len(pairs) == 12 and len(store.duplicate_pairs(KUHN)) == 6 and store.duplicate_pairs(TTT) == []
    for first, second in pairs:
        m1, m2 = by_id[first], by_id[second]
        assert m2.seq == m1.seq + 6 and m2.players == m1.players[::-1] and (m1.seed == m2.seed) == (m1.game == KUHN)
    unbalanced = League(config(pairing="round_robin", matches=24, seat_balance=False), tmp_path / "u",
                        backend="inline")
    unbalanced.run()
    old = unbalanced.store.matches()
    assert [(m.game, m.players) for m in old] == [(m.game, m.players) for m in rows]  # the same schedule
    assert [m.seed for m in old if m.game == TTT] == [m.seed for m in rows if m.game == TTT]


def test_seat_balance_false_leaves_matches_unpaired(tmp_path):
    league = League(config(seat_balance=False), tmp_path / "l", backend="inline")
    league.run(matches=10)
    assert {m.pair for m in league.store.matches()} == {None}
    assert league.store.seat_pairs() == [] and not league.duplicate(KUHN)


def test_duplicate_auto_is_on_for_kuhn_and_off_for_tic_tac_toe(tmp_path):
    league = League(config(), tmp_path / "a", backend="inline")
    assert league.duplicate(KUHN) and not league.duplicate(TTT)
    assert league.seat_balanced(KUHN) and league.seat_balanced(TTT)
    league.close()
    forced = League(config(duplicate=True), tmp_path / "b", backend="inline")
    assert forced.duplicate(KUHN) and forced.duplicate(TTT)
    forced.close()
    off = League(config(duplicate=False), tmp_path / "c", backend="inline")
    assert not off.duplicate(KUHN)
    off.run(matches=20)
    assert off.store.duplicate_pairs() == [] and len(off.store.seat_pairs()) == 10


def dealt(store: LeagueStore, match_id: str) -> tuple[int, list[int]]:
    """(seed, chance outcomes) of a committed match, from its replay played again on a fresh core."""
    rep = store.read_replay(match_id)
    core = core_for_replay(rep)
    core.reset(rep.header["seed"])
    for step in rep.steps:
        core.apply(step["player"], step["action"])
    return rep.header["seed"], [h.action for h in core.state.full_history() if h.player == pyspiel.PlayerId.CHANCE]


def test_a_duplicate_pair_deals_the_same_cards_to_the_same_seats(tmp_path):
    cfg = config(games=[{"id": KUHN}], players=[{"name": "r", "agent": "random"}, {"name": "first", "agent": "first"}],
                 matches=24)
    league = League(cfg, tmp_path / "l", backend="inline")
    league.run()
    store = league.store
    pairs = store.duplicate_pairs(KUHN)
    assert len(pairs) == 12 and pairs == store.seat_pairs(KUHN)
    differ = 0
    for a, b in pairs:
        ra, rb = store.result_for(a), store.result_for(b)
        assert rb.players == ra.players[::-1] and ra.pair == rb.pair == a
        (seed_a, cards_a), (seed_b, cards_b) = dealt(store, a), dealt(store, b)
        assert seed_a == seed_b and len(cards_a) == 2 and cards_a == cards_b  # seat 0's card, then seat 1's
        differ += ra.returns != rb.returns[::-1]
    # each player held each seat's cards once; the pairs' scores still differ (the first agent always bets)
    assert differ > 0
    deals = {tuple(dealt(store, a)[1]) for a, _ in pairs}
    assert len(deals) > 1  # seeds differ from pair to pair


def test_a_league_stopped_between_the_two_matches_of_a_pair_schedules_the_second_once(tmp_path):
    d = tmp_path / "l"
    cfg = config(games=[{"id": KUHN}])
    league = League(cfg, d, backend="inline")
    first = league.begin(league.next_pairing())
    league.close()  # killed after the first match of the pair was enqueued
    league = League(cfg, d, backend="inline")
    owed = league.next_pairing()
    assert owed.pair == first.match_id and owed.players == first.players[::-1] and owed.seed == first.seed
    league.close()  # killed after drawing the second, before enqueueing it
    league = League(cfg, d, backend="inline")
    again = league.next_pairing()
    assert (again.pair, again.players, again.seed) == (owed.pair, owed.players, owed.seed)
    second = league.begin(again)
    assert second.pair == first.match_id and second.seed == first.seed
    assert league.begin(again).match_id == second.match_id  # the same second begun again: not a new match
    league.close()
    league = League(cfg, d, backend="inline")
    assert not league.store.get_meta(PAIR_NEXT)
    fresh = league.next_pairing()
    assert fresh.pair is True  # a new pair, not the old second again
    league.close()
    store = open_league(d)
    assert [m.match_id for m in store.matches()] == [first.match_id, second.match_id]
    assert store.paired_match(first.match_id).match_id == second.match_id


def test_a_stop_inside_the_first_matchs_transaction_leaves_neither_half(tmp_path, monkeypatch):
    d = tmp_path / "l"
    league = League(config(games=[{"id": KUHN}]), d, backend="inline")
    real = league.store.set_meta

    def dies_writing_the_owed_second(key, value):
        if key == PAIR_NEXT:
            raise KeyboardInterrupt  # the process stops between the enqueue and the owed second
        real(key, value)

    monkeypatch.setattr(league.store, "set_meta", dies_writing_the_owed_second)
    with pytest.raises(KeyboardInterrupt):
        league.begin(league.next_pairing())
    monkeypatch.undo()
    assert league.store.matches() == [] and not league.store.get_meta(PAIR_NEXT)


def test_runs_stopped_on_odd_budgets_finish_every_pair_once(tmp_path):
    d = tmp_path / "l"
    cfg = config(in_flight=3)
    for budget in (1, 4, 7, 12):  # each run stops with the last pair's second owed (odd) or not
        League(cfg, d, backend="inline").run(matches=budget)
        League(cfg, d, backend="inline").close()
    store = open_league(d)
    assert store.result_count() == 12 and store.status_counts() == {"done": 12}
    assert len(store.seat_pairs()) == 6
    counts = seat_orders(store)
    assert all(counts[(g, (b, a))] == n for (g, (a, b)), n in counts.items())


def test_learners_keep_their_share_and_fixed_pairs_stay_balanced(tmp_path):
    cfg = config(games=[{"id": KUHN}], matches=400, learners=[{"name": "main", "role": "main"}],
                 roles={"learner_share": 0.5})
    league = League(cfg, tmp_path / "l", backend="inline")
    league.run()
    rows = league.store.matches()
    fixed = [m for m in rows if m.note.startswith("uniform")]  # the learners' pairings name their rule
    assert 160 <= len(fixed) <= 240  # learner_share 0.5 of 400, not 0.5 of the draws (a pair is two)
    assert all(m.pair is None for m in rows if m not in fixed)  # the learners' pairings: unpaired, as before
    counts = collections.Counter(tuple(m.players) for m in fixed)
    owed = {tuple(o["players"]) for o in league.store.get_meta(PAIR_NEXT) or []}
    for a, b in counts:  # equal, counting a second still owed as played
        assert counts[(a, b)] + ((a, b) in owed) == counts[(b, a)] + ((b, a) in owed)


def test_two_pairs_begun_before_either_second_lose_neither(tmp_path):
    # the league begins one pair at a time; another process scheduling meanwhile must not overwrite it
    league = League(config(games=[{"id": KUHN}]), tmp_path / "l", backend="inline")
    firsts = [league.begin(league._fixed_pairing(*league._pairing_view())) for _ in range(2)]
    seconds = [league.begin(league.next_pairing()) for _ in range(2)]
    assert [s.pair for s in seconds] == [f.match_id for f in firsts]
    assert [s.players for s in seconds] == [f.players[::-1] for f in firsts]
    assert [s.seed for s in seconds] == [f.seed for f in firsts]
    assert not league.store.get_meta(PAIR_NEXT) and league.next_pairing().pair is True


def test_an_owed_second_whose_player_left_is_dropped(tmp_path):
    d = tmp_path / "l"
    cfg = config(games=[{"id": KUHN}], players=[{"name": "r", "agent": "random"}, {"name": "first", "agent": "first"}])
    league = League(cfg, d, backend="inline")
    league.begin(league.next_pairing())
    league.close()
    cfg2 = config(games=[{"id": KUHN}], players=[{"name": "r", "agent": "random"}, {"name": "r3", "agent": "random"}])
    league = League(cfg2, d, backend="inline")  # "first" retired while its pair's second was owed
    nxt = league.next_pairing()
    assert nxt.pair is True and "first" not in nxt.players
    assert not league.store.get_meta(PAIR_NEXT)
    assert [e["kind"] for e in league.store.events("pair_dropped")] == ["pair_dropped"]


def test_an_older_league_folder_gains_the_pair_columns_on_open(tmp_path):
    d = tmp_path / "l"
    league = League(config(seat_balance=False), d, backend="inline")
    league.run(matches=4)
    league.close()
    with sqlite3.connect(d / "league.db") as c:  # back to the tables of a league from before pairs
        for index in ("matches_pair", "results_pair"):
            c.execute(f"DROP INDEX {index}")
        for table in ("matches", "results"):
            c.execute(f"ALTER TABLE {table} DROP COLUMN pair")
    c.close()
    store = LeagueStore(d)
    assert all("pair" in {r[1] for r in store.conn.execute(f"PRAGMA table_info({t})")} for t in ("matches", "results"))
    assert [r.pair for r in store.results()] == [None] * 4 and store.get_meta("schema") == 2
    store.close()
    league = League(config(), d, backend="inline")  # seat balance from here on
    league.run(matches=8)
    store = league.store
    assert [m.pair is None for m in store.matches()] == [True] * 4 + [False] * 4
    assert len(store.seat_pairs()) == 2


#: The matches and results tables of a league from before seat balance, as that arena made them.
OLD_TABLES = """
CREATE TABLE matches (
    match_id TEXT PRIMARY KEY, seq INTEGER UNIQUE NOT NULL, game TEXT NOT NULL, players TEXT NOT NULL,
    specs TEXT NOT NULL, seed INTEGER NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    note TEXT, created REAL NOT NULL, started REAL, finished REAL,
    source TEXT NOT NULL DEFAULT 'league'  -- 'league' (scheduled by the league) or 'external' (a human, a trainer)
);
CREATE TABLE results (
    commit_seq INTEGER PRIMARY KEY AUTOINCREMENT, match_id TEXT UNIQUE NOT NULL REFERENCES matches(match_id),
    game TEXT NOT NULL, players TEXT NOT NULL, returns TEXT NOT NULL, winner INTEGER, draw INTEGER NOT NULL,
    outcome TEXT NOT NULL, reason TEXT, moves INTEGER NOT NULL, invalid TEXT, duration REAL, replay TEXT,
    committed REAL NOT NULL
);
"""


def test_the_tables_of_an_older_arena_gain_the_pair_columns_and_keep_their_rows(tmp_path):
    d = tmp_path / "l"
    d.mkdir()
    with sqlite3.connect(d / "league.db") as c:
        c.executescript(OLD_TABLES)
        c.execute("INSERT INTO matches VALUES('m00000000', 0, ?, '[\"r1\", \"r2\"]', '[\"random\", \"random\"]', 7, "
                  "'queued', 0, 'uniform', 0.0, NULL, NULL, 'league')", (KUHN,))
    c.close()
    league = League(config(), d, backend="inline")
    assert league.store.matches()[0].pair is None
    league.store.set_meta("next_seq", 1)
    league.run(matches=5)  # the old queued match first, unpaired, then pairs
    store = league.store
    assert [m.pair for m in store.matches()] == [None, "m00000001", "m00000001", "m00000003", "m00000003"]
    assert store.result_for("m00000000").pair is None and len(store.seat_pairs()) == 2
    sql = store.conn.execute("SELECT sql FROM sqlite_master WHERE name='matches'").fetchone()[0]
    assert sql.rstrip().endswith("pair TEXT)")


BAD = [
    ({"duplicate": "yes"}, "LeagueConfig: duplicate: must be true, false or auto, got 'yes'"),
    ({"duplicate": 1}, "LeagueConfig: duplicate: must be true, false or auto, got 1"),
    ({"seat_balance": "on"}, "seat_balance: expected true or false, got 'on'"),
    ({"seat_balance": False, "duplicate": True},
     ("LeagueConfig: duplicate: true needs seat_balance: true (a duplicate is the seat-swapped second match of a "
      "pair, on the first's seed): set seat_balance: true, or duplicate: false")),
]


@pytest.mark.parametrize("change,message", BAD, ids=[str(c) for c, _ in BAD])
def test_config_errors_are_one_line_naming_the_fix(tmp_path, change, message):
    path = Path(tmp_path / "bad.yaml")
    data = {"games": [{"id": KUHN}], "players": [{"name": "a", "agent": "random"}, {"name": "b", "agent": "first"}]}
    path.write_text(yaml.safe_dump(dict(data, **change)))
    with pytest.raises(ConfigError) as e:
        load_league_config(path)
    assert str(e.value) == f"{path}: {message}" and "\n" not in str(e.value)
    for good in ({"duplicate": "auto"}, {"duplicate": True}, {"duplicate": False, "seat_balance": False}):
        path.write_text(yaml.safe_dump(dict(data, **good)))
        load_league_config(path)
