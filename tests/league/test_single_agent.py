"""Leagues over one-player games (single-agent Gymnasium tasks): common seeds, exact means, resume."""

import io
import json
import statistics

import gymnasium
import pytest
from rich.console import Console
from typer.testing import CliRunner

from arena.cli import app
from arena.config import from_dict
from arena.errors import ConfigError
from arena.league.config import LeagueConfig
from arena.match.pool import JobsWork
from arena.league.manager import League, common_seed
from arena.league.queries import return_rows
from arena.league.storage import OVERALL
from arena.match.loop import MatchResult
from arena.replays import list_replays
from arena.replays.format import read_replay
from arena.ui.report import render_report
from arena.ui.views import status_view

CARTPOLE, TTT = "CartPole-v1", "openspiel/tic_tac_toe-v0"
PLAYERS = [{"name": "random", "agent": "random"}, {"name": "first", "agent": "first"}]


def league_cfg(**changes) -> LeagueConfig:
    data = {"name": "solo", "seed": 5, "games": [{"id": CARTPOLE}], "players": PLAYERS, "matches": 20, "seeds": 5,
            "in_flight": 4}
    data.update(changes)
    return from_dict(LeagueConfig, json.loads(json.dumps(data)))


def seeds_by_player(store, game=CARTPOLE) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for m in store.matches():
        if m.game == game:
            assert len(m.players) == 1
            out.setdefault(m.players[0], []).append(m.seed)
    return out


def cartpole_first(seed: int) -> float:
    """The return of always pushing left (action 0), played on gymnasium directly."""
    env = gymnasium.make(CARTPOLE)
    env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        _, r, term, trunc, _ = env.step(0)
        total, done = total + float(r), term or trunc
    return total


def by_hand(store, game=CARTPOLE) -> dict[str, list[float]]:
    """Each player's returns read back from its replays (seed checked against the match's)."""
    seeds = {m.match_id: m.seed for m in store.matches()}
    out: dict[str, list[float]] = {}
    for path in list_replays(store.dir):
        rep = read_replay(path)
        if rep.game_id != game:
            continue
        assert rep.header["seed"] == seeds[rep.match_id]
        player = store.result_for(rep.match_id).players[0]
        out.setdefault(player, []).append(MatchResult.from_replay(rep, str(path)).returns[0])
    return out


def assert_table(table: dict, expected: dict) -> None:
    assert table.keys() == expected.keys()
    for p, (n, mean, std) in expected.items():
        assert table[p][0] == n and table[p][1:] == pytest.approx((mean, std), rel=1e-12), p


def test_every_player_plays_the_same_seeds_and_means_are_exact(tmp_path):
    league = League(league_cfg(), tmp_path / "L", backend="inline")
    assert league.run()["results"] == 20
    store = league.store
    # round robin over (seed index, player): seed j to every player before seed j+1; two rounds of 5 seeds
    order = [(m.note, m.players[0]) for m in store.matches()]
    assert order == [(f"seed {j}", p) for j in range(10) for p in ("first", "random")]
    common = [common_seed(5, j) for j in range(10)]
    assert seeds_by_player(store) == {"first": common, "random": common} and len(set(common)) == 10
    assert store.common_seeds(CARTPOLE) == common
    # one-player results are not rated: no Elo, OpenSkill, payoff or records
    assert store.rated_games() == [] and store.elo() == {} and store.records() == {}
    assert store.payoff(CARTPOLE).players() == [] and store.one_player_games() == [CARTPOLE]
    hand = by_hand(store)
    assert hand["first"] == [cartpole_first(s) for s in common]
    assert sorted(r.returns[0] for r in store.results() if r.players == ["random"]) == sorted(hand["random"])
    expected = {p: (10, statistics.fmean(v), statistics.pstdev(v)) for p, v in hand.items()}
    assert_table(store.return_table(CARTPOLE), expected)
    assert_table(store.common_return_table(CARTPOLE), expected)
    # ranked by mean return on common seeds, best first
    ranked = [r.player for r in return_rows(store, CARTPOLE)]
    assert ranked == sorted(expected, key=lambda p: -expected[p][1])
    assert expected[ranked[0]][1] > expected[ranked[1]][1]


@pytest.mark.parametrize("replays", ["database", "files"])
def test_stopped_and_killed_league_plays_each_player_seed_once(tmp_path, replays):
    cfg = league_cfg(matches=12, in_flight=1, replays=replays)
    league = League(cfg, tmp_path / "L", backend="inline")
    league.run(stop=lambda: league.store.result_count() >= 5)
    store = league.store
    assert store.result_count() == 5
    # mid-run: first has seeds 0-2, random 0-1; the table compares them on the two common seeds
    assert store.common_seeds(CARTPOLE) == [common_seed(5, 0), common_seed(5, 1)]
    assert {p: n for p, (n, _, _) in store.common_return_table(CARTPOLE).items()} == {"first": 2, "random": 2}
    assert store.return_table(CARTPOLE)["first"][0] == 3
    # killed after scheduling: one match played but not committed (its replay file written, with files;
    # its replay lost with the process, with the database), one not played at all
    played = league.begin(league.next_pairing(), status="running")
    JobsWork([league.job(played)]).run()
    league.begin(league.next_pairing(), status="running")
    summary = League(cfg, tmp_path / "L", backend="inline").run()
    from_replay = 1 if replays == "files" else 0
    assert summary["committed_from_replay"] == from_replay and summary["requeued"] == 2 - from_replay
    store = League.open(tmp_path / "L").store
    assert store.result_count() == 12 and not store.matches(status=["queued", "running"])
    seeds = {m.match_id: m.seed for m in store.matches()}
    pairs = [(r.players[0], seeds[r.match_id]) for r in store.results()]
    assert sorted(pairs) == sorted((p, common_seed(5, j)) for j in range(6) for p in ("first", "random"))
    assert len(store.common_seeds(CARTPOLE)) == 6


def test_a_mixed_league_rates_tic_tac_toe_by_elo_and_cartpole_by_return(tmp_path):
    league = League(league_cfg(games=[{"id": CARTPOLE}, {"id": TTT}], seeds=3, matches=14), tmp_path / "L",
                    backend="inline")
    league.run()
    store = league.store
    games = [r.game for r in store.results()]
    # a round: 3 seeds for each of the 2 players of CartPole, then the one tic-tac-toe pair
    assert games.count(TTT) == 2 and games.count(CARTPOLE) == 12
    assert store.rated_games() == [OVERALL, TTT]
    assert set(store.elo(TTT)) == set(store.elo(OVERALL)) == {"first", "random"}
    assert {p: sum(wdl) for p, wdl in store.records(OVERALL).items()} == {"first": 2, "random": 2}
    elo, _ = store.recompute(TTT)
    assert elo.ratings() == store.elo(TTT)
    common = [common_seed(5, j) for j in range(6)]
    assert seeds_by_player(store) == {"first": common, "random": common}
    hand = by_hand(store)
    assert_table(store.return_table(CARTPOLE), {p: (6, statistics.fmean(v), statistics.pstdev(v))
                                                for p, v in hand.items()})
    html = render_report(store)
    assert "Mean return (common seeds)" in html and f"{statistics.fmean(hand['first']):.2f}" in html
    assert "Elo" in html and TTT in html
    out = io.StringIO()
    Console(file=out, width=200).print(status_view(store))
    assert "episode" in out.getvalue() and " vs " in out.getvalue()


def test_identical_agents_on_common_seeds_tie_exactly(tmp_path):
    # MountainCarContinuous, a continuous task, drawn by uniform pairing: the same agent on the same seeds
    # returns the same, episode for episode
    players = [{"name": "a", "agent": "random"}, {"name": "b", "agent": "random"}]
    league = League(league_cfg(games=[{"id": "MountainCarContinuous-v0"}], players=players, matches=4, seeds=2,
                               pairing="uniform"), tmp_path / "L", backend="inline")
    league.run()
    eps = league.store.episodes("MountainCarContinuous-v0")
    assert sorted((s, r) for p, s, r in eps if p == "a") == sorted((s, r) for p, s, r in eps if p == "b")
    table = league.store.common_return_table("MountainCarContinuous-v0")
    assert table["a"] == table["b"] and table["a"][0] == 2


def test_a_learner_on_a_one_player_game_is_a_one_line_config_error(tmp_path):
    cfg = league_cfg(learners=[{"name": "learner", "role": "main"}])
    with pytest.raises(ConfigError) as e:
        League(cfg, tmp_path / "L", backend="inline")
    msg = str(e.value)
    assert "\n" not in msg and "CartPole-v1" in msg and "two-player game" in msg and "arena train" in msg
    # a learner kept to the two-player games of a mixed league is fine
    League(league_cfg(games=[{"id": CARTPOLE}, {"id": TTT}],
                      learners=[{"name": "learner", "role": "main", "games": [TTT]}]), tmp_path / "M")


def test_arena_ratings_prints_the_returns_table(tmp_path):
    d = tmp_path / "L"
    League(league_cfg(matches=8), d, backend="inline").run()
    store = League.open(d).store
    hand = {p: (statistics.fmean(v), statistics.pstdev(v)) for p, v in by_hand(store).items()}
    runner = CliRunner()
    for args in (["ratings", str(d)], ["ratings", str(d), "--game", CARTPOLE]):
        r = runner.invoke(app, args, terminal_width=200)
        assert r.exit_code == 0, r.output
        assert "Returns: CartPole-v1 (mean over 4 common seeds)" in r.output and "Elo" not in r.output
        rows = [line.split() for line in r.output.splitlines() if line.split()[:1] in (["1"], ["2"])]
        best = sorted(hand, key=lambda p: -hand[p][0])
        assert rows == [[str(i), p, f"{hand[p][0]:.2f}", f"{hand[p][1]:.2f}", "4", "4", "0"]
                        for i, p in enumerate(best, 1)], r.output
    for args in (["league", "status", str(d)], ["league", "report", str(d)]):
        r = runner.invoke(app, args, terminal_width=200)
        assert r.exit_code == 0, r.output


def test_a_forfeit_keeps_the_episode_return_and_ranks_last(tmp_path):
    """An agent that forfeits a single-agent task keeps what its episode earned (not the two-player
    -1), and ranks after every player that did not forfeit, whatever its mean."""
    cfg = league_cfg(players=[{"name": "first", "agent": "first"},
                              {"name": "quitter", "agent": "plugins.agents:ForfeitAfter:moves=20"}],
                     matches=6, seeds=3)
    league = League(cfg, tmp_path / "lg")
    league.run()
    results = {r.match_id: r for r in league.store.results()}
    quits = [r for r in results.values() if r.players == ["quitter"]]
    assert len(quits) == 3 and all(r.outcome == "forfeit" and r.returns == [20.0] for r in quits), [(r.outcome, r.returns, r.reason) for r in quits]
    assert league.store.forfeits(CARTPOLE) == {"quitter": 3}
    rows = return_rows(league.store, CARTPOLE)
    first = next(r for r in rows if r.player == "first")
    assert first.mean < 20.0  # the quitter's mean is higher ...
    assert [r.player for r in rows] == ["first", "quitter"]  # ... and it still ranks last
    assert rows[1].forfeits == 3 and rows[0].forfeits == 0
