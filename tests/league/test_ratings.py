from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

import arena.league.ratings as ratings_module
import arena.league.storage as storage_module
from arena.league.payoff import Payoff
from arena.league.storage import OVERALL, LeagueStore
from arena.match.loop import MatchResult
from arena.league.ratings import (
    EloTable,
    LeagueRatings,
    RatedResult,
    OpenSkillTable,
    alpharank,
    elo_expected,
    elo_update,
    recompute,
    scores_to_ranks,
)

# ---------------------------------------------------------------- Elo


def test_elo_expected_by_hand() -> None:
    assert elo_expected(1500, 1500) == 0.5
    # 200 points up: 1 / (1 + 10**-0.5) = 0.7597469...
    assert elo_expected(1600, 1400) == pytest.approx(0.7597469266)
    assert elo_expected(1400, 1600) == pytest.approx(1 - 0.7597469266)
    # 400 points up is 10:1 odds
    assert elo_expected(1900, 1500) == pytest.approx(10 / 11)


def test_elo_update_equal_players() -> None:
    assert elo_update(1500, 1500, 1.0, k=32) == (1516.0, 1484.0)
    assert elo_update(1500, 1500, 0.0, k=32) == (1484.0, 1516.0)
    assert elo_update(1500, 1500, 0.5, k=32) == (1500.0, 1500.0)


@pytest.mark.parametrize(
    ("score", "ra", "rb"),
    [
        (1.0, 1607.6880983, 1392.3119017),  # favourite wins: +32 * 0.2403
        (0.5, 1591.6880983, 1408.3119017),  # draw costs the favourite 8.3
        (0.0, 1575.6880983, 1424.3119017),  # upset: -32 * 0.7597
    ],
)
def test_elo_update_unequal_players(score: float, ra: float, rb: float) -> None:
    new_a, new_b = elo_update(1600, 1400, score, k=32)
    assert new_a == pytest.approx(ra, abs=1e-6)
    assert new_b == pytest.approx(rb, abs=1e-6)
    assert new_a + new_b == 3000.0  # exactly zero-sum


def test_elo_update_k_and_score_validation() -> None:
    assert elo_update(1500, 1500, 1.0, k=10) == (1505.0, 1495.0)
    with pytest.raises(ValueError):
        elo_update(1500, 1500, 2.0)


def test_elo_table_update_and_defaults() -> None:
    t = EloTable(k=32, initial=1500)
    assert t.rating("new") == 1500
    assert t.update("a", "b", 1.0) == (1516.0, 1484.0)
    assert t.rating("a") == 1516.0 and t.rating("b") == 1484.0
    # a (1516) vs c (1500): E = 1 / (1 + 10**(-16/400))
    e = 1 / (1 + 10 ** (-16 / 400))
    t.update("c", "a", 1.0)
    assert t.rating("c") == pytest.approx(1500 + 32 * e)
    assert t.rating("a") == pytest.approx(1516 - 32 * e)
    with pytest.raises(ValueError):
        t.update("a", "a", 1.0)


def test_elo_update_multi_three_players_by_hand() -> None:
    t = EloTable(k=32)
    # All at 1500, k' = 32 / 2 = 16 per pair: winner +16*(0.5+0.5), middle 0, last -16.
    assert t.update_multi(["a", "b", "c"], [3, 2, 1]) == [1516.0, 1500.0, 1484.0]
    t2 = EloTable(k=32)
    # two share first: vs each other a draw (0), each beats c (+8) -> +8, +8, -16
    assert t2.update_multi(["a", "b", "c"], [1, 1, 0]) == [1508.0, 1508.0, 1484.0]


def test_elo_update_multi_order_independent_and_matches_two_player() -> None:
    t1, t2 = EloTable(), EloTable()
    for t in (t1, t2):
        t.update("a", "b", 1.0)
        t.update("b", "c", 0.5)
    r1 = t1.update_multi(["a", "b", "c", "d"], [4, 1, 2, 3])
    r2 = t2.update_multi(["d", "c", "b", "a"], [3, 2, 1, 4])
    assert r1 == pytest.approx(r2[::-1], abs=1e-9)
    assert sum(r1) == pytest.approx(4 * 1500)

    t3, t4 = EloTable(), EloTable()
    t3.update("x", "y", 0.0)
    t4.update_multi(["x", "y"], [0, 1])
    assert t3.ratings() == t4.ratings()  # bit-identical for n == 2


def test_elo_update_multi_validation() -> None:
    t = EloTable()
    with pytest.raises(ValueError):
        t.update_multi(["a"], [1])
    with pytest.raises(ValueError):
        t.update_multi(["a", "a"], [1, 0])
    with pytest.raises(ValueError):
        t.update_multi(["a", "b"], [1])


def test_elo_table_round_trip() -> None:
    t = EloTable(k=24, initial=1200)
    t.update("a", "b", 1.0)
    t.update_multi(["a", "b", "c"], [0, 2, 1])
    u = EloTable.from_dict(json.loads(json.dumps(t.to_dict())))
    assert u == t and u.k == 24 and u.initial == 1200
    assert u.rating("c") == t.rating("c")


# ---------------------------------------------------------------- OpenSkill


def test_trueskill_winner_rises_loser_falls() -> None:
    t = OpenSkillTable()
    mu0, s0 = t.rating("a")
    assert (mu0, s0) == (25.0, 25.0 / 3.0)
    t.update(["a", "b"])  # finish order: a first
    (mu_a, s_a), (mu_b, s_b) = t.rating("a"), t.rating("b")
    assert mu_a > mu0 > mu_b
    assert s_a < s0 and s_b < s0
    assert t.conservative("a") == pytest.approx(mu_a - 3 * s_a)
    assert t.conservative("a") > t.conservative("b")


def test_trueskill_ranks_argument_and_draw_between_equals() -> None:
    t = OpenSkillTable()
    t.update(["a", "b"], ranks=[1, 0])  # b wins
    assert t.rating("b")[0] > t.rating("a")[0]
    d = OpenSkillTable()
    d.update(["x", "y"], ranks=[0, 0])
    (mu_x, s_x), (mu_y, s_y) = d.rating("x"), d.rating("y")
    assert mu_x == mu_y == pytest.approx(25.0)
    assert s_x == s_y < 25.0 / 3.0  # a draw is still information


def test_trueskill_multiplayer_and_teams() -> None:
    t = OpenSkillTable()
    t.update(["a", "b", "c", "d"], ranks=[0, 1, 1, 3])
    mus = [t.rating(p)[0] for p in "abcd"]
    assert mus[0] > mus[1] > mus[3]
    assert mus[1] == pytest.approx(mus[2])
    t.update([["a", "b"], ["c", "d"]])
    assert len(t) == 4
    with pytest.raises(ValueError):
        t.update(["a"])
    with pytest.raises(ValueError):
        t.update(["a", "a"])
    with pytest.raises(ValueError):
        t.update(["a", "b"], ranks=[0])
    with pytest.raises(ValueError):
        OpenSkillTable(model="glicko")


def _random_results(n: int, seed: int) -> list[RatedResult]:
    rng = np.random.default_rng(seed)
    ids = [f"p{i}" for i in range(6)]
    out = []
    for _ in range(n):
        k = 2 if rng.random() < 0.7 else 3
        players = tuple(ids[i] for i in rng.choice(len(ids), size=k, replace=False))
        if k == 2:
            scores = ((1.0, 0.0), (0.0, 1.0), (0.5, 0.5))[rng.integers(3)]
        else:
            scores = tuple(float(s) for s in rng.integers(0, 3, size=k))
        out.append(RatedResult(players, scores))
    return out


def test_trueskill_deterministic_and_round_trip() -> None:
    results = _random_results(60, seed=5)
    a, b = OpenSkillTable(), OpenSkillTable()
    for t in (a, b):
        for r in results:
            t.update(r.ids, ranks=scores_to_ranks(r.scores))
    assert a.ratings() == b.ratings()  # exact, not approx
    c = OpenSkillTable.from_dict(json.loads(json.dumps(a.to_dict())))
    assert c == a and c.ratings() == a.ratings()
    # the restored table keeps evolving identically
    a.update(["p0", "p1"])
    c.update(["p0", "p1"])
    assert c.ratings() == a.ratings()


def test_trueskill_other_model() -> None:
    t = OpenSkillTable(model="thurstone_mosteller_full")
    t.update(["a", "b"])
    assert t.rating("a")[0] > 25.0 > t.rating("b")[0]
    assert OpenSkillTable.from_dict(t.to_dict()) == t


def test_scores_to_ranks() -> None:
    assert scores_to_ranks([3, 1, 3, 0]) == [0.0, 2.0, 0.0, 3.0]
    assert scores_to_ranks([1.0, 0.0]) == [0.0, 1.0]
    assert scores_to_ranks([0.5, 0.5]) == [0.0, 0.0]


# ---------------------------------------------------------------- recompute


def test_recompute_equals_live_tables() -> None:
    results = _random_results(80, seed=11)
    elo, ts = EloTable(), OpenSkillTable()
    for r in results:  # how a live league records results
        if len(r.ids) == 2:
            elo.update(r.ids[0], r.ids[1], r.scores[0])
        else:
            elo.update_multi(r.ids, r.scores)
        ts.update(r.ids, ranks=scores_to_ranks(r.scores))
    elo2, ts2 = recompute(results)
    assert elo2 == elo
    assert ts2 == ts
    # plain tuples work too
    elo3, ts3 = recompute([(r.ids, r.scores) for r in results])
    assert elo3 == elo and ts3 == ts


def test_recompute_order_matters() -> None:
    results = [RatedResult(("a", "b"), (1.0, 0.0)), RatedResult(("b", "c"), (1.0, 0.0)),
               RatedResult(("a", "c"), (0.0, 1.0))]
    e1, _ = recompute(results)
    e2, _ = recompute(results[::-1])
    assert e1.ratings() != e2.ratings()


# ---------------------------------------------------------------- alpha-rank


def test_alpharank_cycle_is_uniform() -> None:
    rps = np.array([[0.5, 1.0, 0.0], [0.0, 0.5, 1.0], [1.0, 0.0, 0.5]])
    pi = alpharank(rps)
    np.testing.assert_allclose(pi, np.full(3, 1 / 3), atol=1e-9)


def test_alpharank_dominant_strategy_takes_the_mass() -> None:
    w = np.array([[0.5, 0.9, 0.8], [0.1, 0.5, 0.6], [0.2, 0.4, 0.5]])
    pi = alpharank(w)
    assert pi.shape == (3,)
    assert pi.sum() == pytest.approx(1.0)
    assert np.all(pi >= 0)
    assert pi[0] > 0.99
    # the dominant player wins regardless of where it sits
    perm = [2, 0, 1]
    pi_p = alpharank(w[np.ix_(perm, perm)])
    assert int(np.argmax(pi_p)) == perm.index(0)


def test_alpharank_trivial_and_invalid() -> None:
    np.testing.assert_array_equal(alpharank(np.array([[0.5]])), [1.0])
    with pytest.raises(ValueError):
        alpharank(np.zeros((2, 3)))
    with pytest.raises(ValueError):
        alpharank(np.array([[0.5, 2.0], [-1.0, 0.5]]))


def test_trueskill_fast_path_matches_team_path() -> None:
    fast, slow = OpenSkillTable(), OpenSkillTable()
    for ranks in ([0, 1], [1, 0], [0, 0], np.array([1, 0])):
        fast.update(["a", "b"], ranks=ranks)
        slow.update([["a"], ["b"]], ranks=ranks)
    assert fast.ratings() == slow.ratings()
    with pytest.raises(TypeError):
        fast.update("ab")


# ---------------------------------------------------------------- a league's ratings


def _league_results(n: int, seed: int) -> list[tuple[str, list[str], list[float]]]:
    """(game, players, returns): mostly two players, some free-for-alls, draws and self-play (not rated)."""
    rng = np.random.default_rng(seed)
    ids = [f"p{i}" for i in range(5)]
    out = []
    for _ in range(n):
        game = ("g1", "g2")[rng.integers(2)]
        if rng.random() < 0.1:
            players = ["p0", "p0"]
        else:
            k = 2 if rng.random() < 0.75 else 3
            players = [ids[i] for i in rng.choice(len(ids), size=k, replace=False)]
        out.append((game, players, [float(x) for x in rng.choice([-1.0, 0.0, 0.5, 1.0], size=len(players))]))
    return out


def test_league_ratings_alone_equal_a_league_that_committed_them(tmp_path) -> None:
    """The rater fed the results by itself gives the league's stored tables exactly: the store only keeps
    its numbers. Two connections commit by turns, in batches, some twice (counted once), so each finds
    the other's commits and must drop its live tables to agree."""
    d = tmp_path / "lg"
    stores = [LeagueStore(d, elo_k=20.0, payoff_decay=0.9), LeagueStore(d)]
    for p in ("p0", "p1", "p2", "p3", "p4"):
        stores[0].add_player(p, "fixed", "random", ["g1", "g2"])
    rater = LeagueRatings(elo_k=20.0, payoff_decay=0.9)
    payoff: dict[str, dict[tuple[str, str], tuple]] = {}
    history: list[tuple] = []
    results = _league_results(90, seed=3)
    for start in range(0, len(results), 4):
        store = stores[(start // 4) % 2]
        batch = []
        for game, players, returns in results[start:start + 4]:
            m = store.enqueue(game, players, ["random"] * len(players), status="running")
            batch.append((m.match_id, MatchResult(m.match_id, game, 0, players, returns, None, False, 5, "normal")))
        assert store.commit_results(batch) == [True] * len(batch)
        assert store.commit_results(batch[:1]) == [False]
        for match_id, result in batch:
            seq = store.result_for(match_id).commit_seq
            rows = rater.rate(seq, result.agents, result.returns, (result.game_id, OVERALL), payoff)
            assert bool(rows.history) == LeagueRatings.rated(result.agents)
            history += rows.history
            for scope, home, away, *counts in rows.payoff:
                payoff.setdefault(scope, {})[(home, away)] = tuple(counts)
    store = stores[0]
    for scope in ("g1", "g2", OVERALL):
        elo, ts = rater.tables(scope)
        assert store.elo(scope) == elo.ratings()  # exact, not approx
        assert store.openskill(scope) == ts.ratings()
        assert store.rating_history(scope) == [(seq, p, r, mu, sigma) for seq, s, p, r, mu, sigma in history
                                               if s == scope]
        pairs = [[h, a, *c] for (h, a), c in payoff[scope].items()]
        assert store.payoff(scope) == Payoff.from_dict({"decay": 0.9, "pairs": pairs})
        assert store.recompute(scope) == (elo, ts)  # recompute takes the rater's path too
        alone = LeagueRatings(elo_k=20.0, payoff_decay=0.9)
        assert alone.replay(((p, r) for g, p, r in results if scope in (g, OVERALL)), scope) == (elo, ts)
    for s in stores:
        s.close()


def test_league_ratings_start_from_what_is_stored() -> None:
    """Tables loaded from stored rows go on from them; `forget` drops them for the next load."""
    rater = LeagueRatings(elo_k=16.0)
    rows = rater.rate(1, ["a", "b"], [1.0, -1.0], ["g"])
    stored = [(system, p, value) for system, _, p, value in rows.ratings]
    rater.rate(2, ["a", "b"], [1.0, -1.0], ["g"])
    again = LeagueRatings(elo_k=16.0)
    again.load("g", stored)
    again.rate(2, ["a", "b"], [1.0, -1.0], ["g"])
    assert again.tables("g") == rater.tables("g") and again.tables("g")[0].k == 16.0
    rater.forget()
    assert not rater.loaded("g") and rater.tables("g")[0].ratings() == {}
    assert LeagueRatings().rate(1, ["a", "a"], [1.0, 0.0], ["g"]).history == []  # self-play is not rated
    # payoff: the stored counts of the pair decay before the new game counts
    rows = LeagueRatings(payoff_decay=0.5).rate(3, ["a", "b"], [0.0, 1.0], ["g"],
                                                {"g": {("a", "b"): (1.0, 0.0, 0.0, 1.0)}})
    assert rows.payoff == [("g", "a", "b", 0.5, 0.0, 1.0, 1.5), ("g", "b", "a", 1.0, 0.0, 0.0, 1.0)]


def _imported_and_used(module) -> set[str]:
    tree = ast.parse(Path(module.__file__).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return names


def test_storage_leaves_the_arithmetic_to_the_rater() -> None:
    """The store writes what the rater hands it; the rater issues no SQL."""
    arithmetic = {"rate_result", "decayed_update", "recompute", "elo_update", "update_multi", "scores_to_ranks"}
    assert not _imported_and_used(storage_module) & arithmetic
    assert not _imported_and_used(ratings_module) & {"sqlite3", "execute", "executemany"}
