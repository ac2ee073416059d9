"""The reference leaderboard: scoring declarations, payoff tables, Nash averaging, the fitted table
built from a league's result log, and where it shows (the CLI, the demo's tables)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from arena.envs.registry import game_scoring, register_game
from arena.errors import ConfigError
from arena.league.config import GameEntry, LeagueConfig, PlayerEntry
from arena.league.leaderboard import (
    NASH_RESAMPLES,
    leaderboard,
    nash_payoffs,
    pair_payoffs,
    ranked_by_payoff,
    two_player_results,
)
from arena.league.manager import League, open_league
from arena.league.queries import payoff_data
from arena.league.ratings import nash_average
from arena.league.storage import OVERALL

KUHN, TTT = "openspiel/kuhn_poker-v0", "openspiel/tic_tac_toe-v0"


# -- how games are scored ---------------------------------------------------------------------------
@pytest.mark.parametrize("game, scoring", [
    (TTT, "win"), ("openspiel/connect_four-v0", "win"), (KUHN, "payoff"), ("openspiel/leduc_poker-v0", "payoff"),
    ("arena/TicTacToe-v0", "win"), ("arena/KuhnPoker-v1", "payoff"), ("arena/KuhnPoker-v2", "payoff"),
    ("arena/SimpleNegotiation-v2", "payoff"), ("arena/Skirmish-3m-v0", "win"),
])
def test_games_declare_how_they_are_scored(game, scoring):
    assert game_scoring(game) == scoring


def test_a_plug_in_says_its_scoring_at_registration():
    register_game("testscoring/Dice-v0", "arena.envs.registry:openspiel_env", {"game": "tic_tac_toe"},
                  scoring="payoff")
    assert game_scoring("testscoring/Dice-v0") == "payoff"
    with pytest.raises(ConfigError, match="scoring 'points' is not one of win, payoff"):
        register_game("testscoring/Dice-v1", "arena.envs.registry:openspiel_env", {"game": "tic_tac_toe"},
                      scoring="points")


def test_a_league_config_overrides_and_records_the_scoring(tmp_path):
    with pytest.raises(ValueError, match="scoring must be win or payoff"):
        GameEntry(TTT, scoring="chips")
    cfg = LeagueConfig(games=[GameEntry(KUHN, scoring="win"), GameEntry(TTT)], matches=4,
                       players=[PlayerEntry("random", "random"), PlayerEntry("first", "first")])
    league = League(cfg, tmp_path / "l", backend="inline")
    league.run()
    assert league.store.get_meta("scoring") == {KUHN: "win", TTT: "win"}
    board = leaderboard(league.store, KUHN, resamples=10)
    assert board.scoring == "win" and all(r.payoff is None for r in board.rows)
    league.close()


# -- Nash averaging ------------------------------------------------------------------------------------
def test_nash_average_by_hand():
    # cfr beats both, random farms first: the field's mean puts random first, the Nash mixture does not
    P = np.array([[0.0, 0.1, 0.2], [-0.1, 0.0, 0.44], [-0.2, -0.44, 0.0]])
    p, r = nash_average(P)
    assert p == pytest.approx([1.0, 0.0, 0.0], abs=1e-6)
    assert r == pytest.approx([0.0, -0.1, -0.2], abs=1e-6)
    assert P.mean(1)[1] > P.mean(1)[0]  # the mean over the field would rank random first
    # rock-paper-scissors: the uniform mixture, every rating 0
    rps = np.array([[0.0, 1.0, -1.0], [-1.0, 0.0, 1.0], [1.0, -1.0, 0.0]])
    p, r = nash_average(rps)
    assert p == pytest.approx([1 / 3] * 3, abs=1e-6) and r == pytest.approx([0.0] * 3, abs=1e-6)
    # a clone of scissors: the maximum-entropy equilibrium splits scissors' mass, ratings unchanged
    clone = np.array([[0.0, 1.0, -1.0, -1.0], [-1.0, 0.0, 1.0, 1.0], [1.0, -1.0, 0.0, 0.0], [1.0, -1.0, 0.0, 0.0]])
    p, r = nash_average(clone)
    assert p == pytest.approx([1 / 3, 1 / 3, 1 / 6, 1 / 6], abs=1e-5) and r == pytest.approx([0.0] * 4, abs=1e-6)


# -- a poker league: payoffs, the Nash order, the fitted table -----------------------------------------
@pytest.fixture(scope="module")
def poker(tmp_path_factory):
    d = tmp_path_factory.mktemp("poker")
    cfg = LeagueConfig(games=[GameEntry(KUHN), GameEntry(TTT)], name="poker", matches=800, pairing="round_robin",
                       players=[PlayerEntry("random", "random"), PlayerEntry("first", "first"),
                                PlayerEntry("cfr", "cfr:iterations=200")])
    out = League(cfg, d, backend="inline").run()
    assert out["failures"] == 0
    s = open_league(d)
    yield s
    s.close()


def test_payoff_matrix_is_mean_payoffs_from_the_log(poker):
    res = two_player_results(poker, KUHN)
    assert len(res) == 600 and set(res.names) == {"random", "first", "cfr"}  # cfr plays no tic-tac-toe
    mean, count = pair_payoffs(res)
    # recounted independently from the stored results
    sums: dict[tuple[str, str], list[float]] = {}
    for r in poker.results(KUHN):
        for k in (0, 1):
            sums.setdefault((r.players[k], r.players[1 - k]), []).append(r.returns[k])
    for (a, b), xs in sums.items():
        i, j = res.names.index(a), res.names.index(b)
        assert mean[i, j] == pytest.approx(np.mean(xs)) and count[i, j] == len(xs)
        assert mean[i, j] == pytest.approx(-mean[j, i])  # zero-sum
    data = payoff_data(poker, KUHN)
    assert data.kind == "payoff" and data.alpharank is not None
    i, j = data.players.index("cfr"), data.players.index("random")
    assert data.mean_payoff[i, j] > 0 and data.games[i, j] == count[res.names.index("cfr"), res.names.index("random")]


def test_a_simplex_that_runs_out_of_time_falls_back_to_the_interior_point_method(monkeypatch):
    """HiGHS's simplex stalled on some bootstrap resamples of large poker leagues (no time limit: the
    command never ended). The real solver is given a time limit it cannot meet (1 ns): the simplex
    stops at its limit and the interior-point method gives the same equilibrium; where every method
    fails, one error names each."""
    from arena.league import ratings

    rng = np.random.default_rng(0)
    M = rng.normal(size=(60, 60))
    want = nash_average(M, maxent=False)
    calls = []
    from scipy import optimize

    real = optimize.linprog

    def watched(*a, method, options, **kw):
        res = real(*a, method=method, options=options, **kw)
        calls.append((method, options["time_limit"], res.status))
        return res

    monkeypatch.setattr(optimize, "linprog", watched)
    monkeypatch.setattr(ratings, "LP_METHODS", (("highs-ds", 1e-9), ("highs-ipm", 60.0)))
    p, r = nash_average(M, maxent=False)
    assert [c[:2] for c in calls] == [("highs-ds", 1e-9), ("highs-ipm", 60.0)] and calls[0][2] != 0
    assert p == pytest.approx(want[0], abs=1e-6) and r == pytest.approx(want[1], abs=1e-6)
    monkeypatch.setattr(ratings, "LP_METHODS", (("highs-ds", 1e-9), ("highs-ipm", 1e-9)))
    with pytest.raises(RuntimeError, match="linear program failed \\(highs-ds: .*; highs-ipm: .*\\)"):
        nash_average(M, maxent=False)


def test_kuhn_ranks_cfr_first_by_payoff_against_the_nash_mixture(poker):
    board = leaderboard(poker, KUHN, resamples=100)
    assert board.scoring == "payoff"
    rows = ranked_by_payoff(board)
    assert [r.player for r in rows][0] == "cfr"
    by = {r.player: r for r in rows}
    assert by["cfr"].nash.mean == pytest.approx(0.0, abs=1e-6)
    # random is beaten by the mixture: its interval is below 0
    assert by["random"].nash.hi < 0 and by["first"].nash.hi < 0
    # the mean payoff a match over the field, with its interval, from the log
    res = two_player_results(poker, KUHN)
    i = res.names.index("cfr")
    mine = np.concatenate([res.ra[res.a == i], res.rb[res.b == i]])
    # duplicate pairs (Kuhn has chance: auto) are one unit each, so the mean a match is the same
    assert by["cfr"].payoff.mean == pytest.approx(mine.mean())
    assert by["cfr"].payoff.lo < by["cfr"].payoff.mean < by["cfr"].payoff.hi
    assert by["cfr"].payoff.n == len(mine) // 2 == 200  # duplicate pairs
    assert all(r.games == 400 for r in rows) and sum(r.wins + r.draws + r.losses for r in rows) == 1200


def test_a_payoff_tables_rank_intervals_agree_with_its_order(poker):
    """A payoff game's table is ordered by payoff against the Nash mixture; its rank intervals come from
    the same resamples of that payoff (not from the rating: a third row used to read "1-2"), so each
    row's interval holds its place."""
    from arena.ui.views import fitted_board

    board = fitted_board(poker, KUHN, resamples=100)
    assert [r.rank for r in board.rows] == list(range(1, len(board.rows) + 1))
    for place, r in enumerate(board.rows, 1):
        assert r.nash_rank is not None and r.rank_lo <= place <= r.rank_hi, (place, r)
    by = {r.player: r for r in board.rows}
    assert by["cfr"].rank == 1 and by["cfr"].rank_lo == 1


def test_ranks_by_payoff_share_ties_and_keep_provisional_players_out_of_the_established_ranks():
    from arena.league.leaderboard import _group_ranks

    values = np.array([[0.0, 0.0, -0.3, 0.9, -0.1],    # player 3 (provisional) above everyone
                       [0.0, -0.2, -0.1, -0.5, 0.2]])
    established = np.array([True, True, True, False, False])
    ranks = _group_ranks(values, established)
    # established: ties share the better rank, and a provisional player's value moves none of them
    assert ranks[0].tolist() == [1, 1, 3, 4, 5] and ranks[1].tolist() == [1, 3, 2, 5, 4]


def test_a_provisional_player_moves_no_one_elses_payoff_against_the_nash_mixture(poker):
    """A newcomer with two big wins over the best player: scored against the established players'
    mixture, which its matches never change; counted in the mixture, it would move everyone's."""
    from dataclasses import replace

    res = two_player_results(poker, KUHN)
    n = len(res.names)
    extra = lambda xs, *new: np.concatenate([xs, np.asarray(new, dtype=xs.dtype)])  # noqa: E731
    cfr = res.names.index("cfr")
    more = replace(res, names=res.names + ["newbie"], game=extra(res.game, 0, 0), a=extra(res.a, n, cfr),
                   b=extra(res.b, cfr, n), ra=extra(res.ra, 2.0, -2.0), rb=extra(res.rb, -2.0, 2.0),
                   forfeit=extra(res.forfeit, -1, -1), inv_a=extra(res.inv_a, 0, 0), inv_b=extra(res.inv_b, 0, 0),
                   pair=list(res.pair) + [None, None], count=extra(res.count, 1, 1))
    alone, _ = nash_payoffs(res, resamples=0)
    kept, _ = nash_payoffs(more, resamples=0, established=np.array([True] * n + [False]))
    counted, _ = nash_payoffs(more, resamples=0)
    assert [s.mean for s in kept[:n]] == pytest.approx([s.mean for s in alone], abs=1e-9)
    assert kept[n].mean > 0  # it beat the mixture's player, on its two hands
    assert max(abs(a.mean - c.mean) for a, c in zip(alone, counted)) > 0.01


def test_a_provisional_player_is_kept_out_of_the_alpha_rank(tmp_path):
    """Alpha-rank over the established players: a player with a handful of games gets no mass ("prov."
    in the tables) and the others' masses are those of the league without it."""
    import io

    from arena.league.play import play_against
    from arena.league.queries import payoff_data

    cfg = LeagueConfig(games=[GameEntry(TTT)], matches=90, pairing="round_robin",
                       players=[PlayerEntry("random", "random"), PlayerEntry("first", "first"),
                                PlayerEntry("mcts", "mcts:simulations=20")])
    d = tmp_path / "l"
    League(cfg, d, backend="inline").run()
    store = open_league(d)
    before = payoff_data(store, TTT)
    store.close()
    play_against(d, "mcts", TTT, seat=0, seed=3, name="ada", stdin=io.StringIO("4\n0\n8\n2\n6\n1\n3\n5\n7\n"),
                 stdout=io.StringIO())
    store = open_league(d)
    try:
        data = payoff_data(store, TTT)
        i = data.players.index("human:ada")
        assert data.mass(i) == "prov." and np.isnan(data.alpharank[i])
        for p in before.players:
            assert data.alpharank[data.players.index(p)] == pytest.approx(
                before.alpharank[before.players.index(p)], abs=1e-9)
    finally:
        store.close()


def test_nash_intervals_are_seeded(poker):
    res = two_player_results(poker, KUHN)
    a, b = nash_payoffs(res, resamples=30, seed=3), nash_payoffs(res, resamples=30, seed=3)
    assert a == b and NASH_RESAMPLES == 200


def test_fitted_overall_weighs_games_equally_and_anchors_random(poker):
    board = leaderboard(poker, OVERALL, resamples=100)
    assert board.anchor == "random" and board.games_in_scope == sorted([KUHN, TTT])
    by = {r.player: r for r in board.rows}
    assert by["random"].rating == by["random"].lo == by["random"].hi == 1000.0
    for r in board.rows:
        assert r.lo <= r.rating <= r.hi and 1 <= r.rank_lo <= r.rank <= r.rank_hi <= len(board.rows)
    assert "each of the 2 games weighs the same" in board.note()
    # a mixed league says what its order means, and names who played one game only (cfr: Kuhn alone)
    assert "a place here says how a player does in its own games" in board.note()
    assert board.played["cfr"] == [KUHN] and sorted(board.played["random"]) == sorted([KUHN, TTT])
    assert ("cfr", KUHN) in board.apart() and f"played one game only: cfr ({KUHN})" in board.note()
    assert leaderboard(poker, KUHN, resamples=100).apart() == []
    # the same league read again: the same table (seeded), kept until a new result lands
    assert leaderboard(poker, OVERALL, resamples=100) is board


def test_payoff_scores_count_the_margin(poker):
    """In a payoff game the fit sees the margin (a fractional score), not only who won: a player who
    wins fewer hands but more chips is not rated below the one who wins more hands."""
    board = leaderboard(poker, KUHN, resamples=50)
    by = {r.player: r for r in board.rows}
    assert by["cfr"].wins < by["random"].wins  # random wins more hands (it farms first)...
    res = two_player_results(poker, KUHN)
    i, j = res.names.index("cfr"), res.names.index("random")
    cfr_vs_random = np.concatenate([res.ra[(res.a == i) & (res.b == j)], res.rb[(res.b == i) & (res.a == j)]])
    assert cfr_vs_random.mean() > 0  # ...but cfr takes chips from random head to head
    # the fit on margins rates cfr higher against random than a fit on who won the hand would
    from arena.league.bt import Results, fit_bt
    from arena.league.leaderboard import _scores

    def gap(scoring: str) -> float:
        t = fit_bt(Results(res.game, res.a, res.b, _scores(res, {KUHN: scoring}), res.games, res.names),
                   resamples=0, stability_replicates=0)
        by = {r.player: r.rating for r in t.rows}
        return by["cfr"] - by["random"]

    assert gap("payoff") > gap("win")
    assert by["cfr"].rating - by["random"].rating == pytest.approx(gap("payoff"), abs=1e-6)


def test_provisional_players_rank_last(tmp_path):
    cfg = LeagueConfig(games=[GameEntry(TTT)], matches=60, pairing="round_robin",
                       players=[PlayerEntry("random", "random"), PlayerEntry("first", "first"),
                                PlayerEntry("mcts", "mcts:simulations=20")])
    league = League(cfg, tmp_path / "l", backend="inline")
    league.run()
    store = league.store
    board = leaderboard(store, TTT, resamples=50, provisional_games=20)
    assert all(not r.provisional for r in board.rows) and [r.games for r in board.rows] == [40, 40, 40]
    board = leaderboard(store, TTT, resamples=50, provisional_games=41)  # 40 games each: all provisional
    assert all(r.provisional for r in board.rows) and "3 provisional" in board.note()
    board = leaderboard(store, TTT, resamples=50, provisional_width=1.0)  # every interval is wider than 1
    assert all(r.provisional for r in board.rows if r.player != "random")
    league.close()


def test_ratings_cli_fitted_table_to_a_pipe_is_not_cut(poker):
    out = subprocess.run([sys.executable, "-m", "arena.cli", "ratings", str(poker.dir), "--resamples", "50"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    head = next(line for line in lines if "vs Nash" in line)
    assert "95% CI" in head and "Rank CI" in head and "Elo" in head  # one line: not cut at 80 columns
    assert len(head) > 120
    kuhn = lines[lines.index(next(x for x in lines if x.startswith("Ratings: openspiel/kuhn_poker-v0"))):]
    first_row = next(x for x in kuhn if x.strip().startswith("1 "))
    assert first_row.split()[1] == "cfr"
    ex = subprocess.run([sys.executable, "-m", "arena.cli", "ratings", str(poker.dir), "--game", KUHN,
                         "--exploitability", "--resamples", "20"], capture_output=True, text=True, timeout=300)
    assert ex.returncode == 0, ex.stderr
    cells = [[c.strip() for c in line.split("│") if c.strip()] for line in ex.stdout.splitlines() if KUHN in line]
    nashconv = {c[1]: float(c[-1]) for c in cells if len(c) == 5}
    assert nashconv["random"] == pytest.approx(11 / 12, abs=1e-4) and nashconv["first"] == pytest.approx(2.0)
    assert nashconv["cfr"] < 0.01
    bad = subprocess.run([sys.executable, "-m", "arena.cli", "ratings", str(poker.dir), "--method", "glicko"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "use bt (fitted, the default), elo or openskill" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_web_json_carries_intervals_and_flags(poker):
    from arena.ui.web.data import LeagueData

    data = LeagueData(poker.dir)
    try:
        body = data.leaderboard(KUHN)
        assert body["scoring"] == "payoff" and body["rows"][0]["player"] == "cfr"
        row = body["rows"][0]
        for key in ("rating", "rating_lo", "rating_hi", "rank_lo", "rank_hi", "provisional", "nash", "nash_lo",
                    "payoff", "payoff_lo", "payoff_hi", "forfeits", "invalid_per_game"):
            assert key in row
        assert "Bradley-Terry" in body["fit"]["note"]
        pay = data.payoff(KUHN)
        assert pay["kind"] == "payoff" and len(pay["mean_payoff"]) == 3
        json.dumps(body)
    finally:
        data.close()


def test_a_person_with_one_game_is_provisional_and_ranked_after_the_established(tmp_path):
    """The issue's own case: one lost game must not put a person above a bot with hundreds."""
    import io

    from arena.league.play import play_against

    cfg = LeagueConfig(games=[GameEntry(TTT)], matches=120, pairing="round_robin",
                       players=[PlayerEntry("random", "random"), PlayerEntry("first", "first"),
                                PlayerEntry("mcts", "mcts:simulations=20")])
    d = tmp_path / "l"
    League(cfg, d, backend="inline").run()
    play_against(d, "random", TTT, seat=0, seed=3, name="ada", stdin=io.StringIO("4\n0\n8\n2\n6\n1\n3\n5\n7\n"),
                 stdout=io.StringIO())
    store = open_league(d)
    try:
        board = leaderboard(store, TTT, resamples=100)
        names = [r.player for r in board.rows]
        person = next(r for r in board.rows if r.player == "human:ada")
        assert person.games == 1 and person.provisional and names[-1] == "human:ada"
        assert all(not r.provisional for r in board.rows if r.player != "human:ada")
        assert person.rank_hi - person.rank_lo >= 1  # one game: its rank is uncertain
    finally:
        store.close()


def test_the_demo_ranks_the_reference_players_first_on_every_payoff_game(tmp_path):
    """`make demo`'s own league (seeded): its poker tables put CFR first (by payoff against the Nash
    mixture) and CFR takes chips from random head to head, on Kuhn, Leduc and TextArena's Kuhn (v1, with
    free bets, and v2); its negotiation table puts the trader first, above random, the same way."""
    from rich.console import Console

    from arena.demo import DemoConfig, run_demo

    console = Console(record=True, width=250, color_system=None)
    run_demo(DemoConfig(out=str(tmp_path / "demo")), console)
    text = console.export_text()
    store = open_league(tmp_path / "demo")
    try:
        for game, best in ((KUHN, "cfr"), ("openspiel/leduc_poker-v0", "cfr"), ("arena/KuhnPoker-v1", "cfr"),
                           ("arena/KuhnPoker-v2", "cfr"), ("arena/SimpleNegotiation-v2", "trader")):
            board = leaderboard(store, game)
            assert board.scoring == "payoff" and ranked_by_payoff(board)[0].player == best
            data = payoff_data(store, game)
            i, j = data.players.index(best), data.players.index("random")
            assert data.mean_payoff[i, j] > 0
            assert f"Ratings: {game} (payoff against the Nash mixture" in text
            assert f"Payoff: {game} (row vs column" in text  # (the title wraps at the table's width)
    finally:
        store.close()
