import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from arena.errors import ArenaError
from arena.errors import ConfigError
from arena.league.config import LeagueConfig, load_league_config
from arena.league.play import play_against
from arena.league.manager import League, open_league
from arena.replays import list_replays, replay_id, replay_path
from arena.match.verify import verify_replay

ARENA = str(Path(sys.executable).with_name("arena"))

BASE = {
    "name": "t",
    "seed": 1,
    "games": [{"id": "openspiel/tic_tac_toe-v0"}, {"id": "openspiel/kuhn_poker-v0"}],
    "players": [
        {"name": "random", "agent": "random"},
        {"name": "first", "agent": "first"},
        {"name": "mcts", "agent": "mcts:simulations=10"},
        {"name": "cfr", "agent": "cfr:iterations=50"},
    ],
    "matches": 40,
    "workers": 2,
    "in_flight": 4,
}


def write_cfg(path: Path, **changes) -> Path:
    data = json.loads(json.dumps(BASE))
    data.update(changes)
    path.write_text(yaml.safe_dump(data))
    return path


def assert_consistent(directory: Path, expected: int):
    """Every result once, every result with its replay, ratings equal a recompute."""
    store = open_league(directory)
    results = store.results()
    ids = [r.match_id for r in results]
    assert len(ids) == len(set(ids)) == expected
    assert store.status_counts().get("done", 0) == expected
    assert store.result_count("league") + store.result_count("external") == expected
    assert not store.matches(status=["running"])
    replays = list_replays(directory)
    assert sorted(replay_id(p, directory) for p in replays) == sorted(ids)
    for r in results[:20]:
        assert store.read_replay(r.match_id).result["returns"] == r.returns
    for game in store.rated_games():
        elo, ts = store.recompute(game)
        assert elo.ratings() == store.elo(game)
        assert {p: ts.rating(p) for p in store.openskill(game)} == store.openskill(game)
    return store


# -- configuration ----------------------------------------------------------------------------
@pytest.mark.parametrize("change, message", [
    ({"matchez": 3}, "matchez: unknown key (did you mean 'matches'?)"),
    ({"matches": "many"}, "matches: expected an integer"),
    ({"pairing": "swiss"}, "pairing: 'swiss' is not one of"),
    ({"games": []}, "at least one game"),
    ({"players": [{"name": "a", "agent": "random", "speed": 3}]}, "players[0].speed: unknown key"),
    ({"players": [{"name": "a b", "agent": "random"}]}, "may not be empty or contain spaces"),
    ({"roles": {"main_pfsp": 0.9}}, "must be 1"),
])
def test_bad_config_names_the_key(tmp_path, change, message):
    with pytest.raises(ConfigError) as e:
        load_league_config(write_cfg(tmp_path / "c.yaml", **change))
    assert message in str(e.value)
    assert "c.yaml" in str(e.value)


def test_bad_yaml_is_a_clear_error(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("games: [\n  - id: x\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_league_config(p)
    p.write_text("- just a list\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_league_config(p)
    with pytest.raises(ConfigError, match="no config file"):
        load_league_config(tmp_path / "missing.yaml")


def test_shipped_configs_load():
    from arena.league.config import check_game_settings

    root = Path(__file__).parents[2] / "configs" / "leagues"
    files = sorted(root.glob("*.yaml"))
    assert len(files) >= 3
    for f in files:
        cfg = load_league_config(f)
        assert isinstance(cfg, LeagueConfig) and cfg.games
        check_game_settings(cfg)  # every game registered, given only settings it declares


# -- running ----------------------------------------------------------------------------------
def test_inline_league_records_every_match_once(tmp_path):
    cfg = load_league_config(write_cfg(tmp_path / "c.yaml"))
    league = League(cfg, tmp_path / "L", backend="inline")
    summary = league.run()
    assert summary["results"] == 40 and summary["failures"] == 0
    store = assert_consistent(tmp_path / "L", 40)
    # eligibility: mcts never plays kuhn (imperfect information), cfr never plays tic-tac-toe
    for r in store.results():
        assert not ("mcts" in r.players and r.game.endswith("kuhn_poker-v0"))
        assert not ("cfr" in r.players and r.game.endswith("tic_tac_toe-v0"))
    assert all(verify_replay(p).ok for p in list_replays(tmp_path / "L")[:10])
    # a second run with the same budget does nothing; a bigger budget continues
    assert League(cfg, tmp_path / "L", backend="inline").run()["new"] == 0
    assert League(cfg, tmp_path / "L", backend="inline").run(matches=50)["new"] == 10
    assert_consistent(tmp_path / "L", 50)


def test_config_changes_on_resume(tmp_path):
    c = write_cfg(tmp_path / "c.yaml", matches=4)
    League(load_league_config(c), tmp_path / "L", backend="inline").run()
    with pytest.raises(ConfigError, match="Game ids cannot change"):
        League(load_league_config(write_cfg(tmp_path / "c2.yaml", games=[{"id": "openspiel/tic_tac_toe-v0"}])),
               tmp_path / "L")
    changed = BASE["players"][:1] + [{"name": "first", "agent": "mcts:simulations=5"}]
    with pytest.raises(ConfigError, match="Give the new agent a new name"):
        League(load_league_config(write_cfg(tmp_path / "c3.yaml", players=changed)), tmp_path / "L")
    more = BASE["players"] + [{"name": "mcts50", "agent": "mcts:simulations=50"}]
    league = League(load_league_config(write_cfg(tmp_path / "c4.yaml", players=more, matches=30)), tmp_path / "L",
                    backend="inline")
    assert league.store.player("mcts50").games == ["openspiel/tic_tac_toe-v0"]
    league.run()
    assert any("mcts50" in r.players for r in league.store.results())


def _kill_and_resume(tmp_path, sig, total=400):
    # a budget far beyond the 15 results the kill waits for: the run must not finish while the test,
    # slowed by a loaded machine, gets round to killing it
    c = write_cfg(tmp_path / "c.yaml", matches=total, players=BASE["players"] + [
        {"name": "slow", "agent": "plugins.agents:Slow:delay=0.02"}])
    d = tmp_path / "L"
    err = open(tmp_path / "stderr.txt", "w+")
    # started with SIGINT ignored, as a background job of a script (or a test worker) would be:
    # `arena league run` must still stop on Ctrl-C
    ignore_int = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)  # noqa: E731
    proc = subprocess.Popen([ARENA, "league", "run", str(c), "--dir", str(d)], stdout=subprocess.DEVNULL,
                            stderr=err, text=True, preexec_fn=ignore_int)
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(0.3)
        assert proc.poll() is None, (tmp_path / "stderr.txt").read_text()
        if (d / "league.db").exists():
            try:
                if open_league(d).result_count() >= 15:
                    break
            except Exception:
                pass
    os.kill(proc.pid, sig)
    proc.wait(timeout=60)
    store = open_league(d)
    done_before = store.result_count()
    assert 15 <= done_before < total, f"the league should have been stopped mid-run ({done_before} results)"
    elo_before = store.elo()
    assert any(v != 1500.0 for v in elo_before.values())
    # the same command again finishes the budget
    p = subprocess.run([ARENA, "league", "run", str(c), "--dir", str(d)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    store = assert_consistent(d, total)
    # ratings continued from where they were: the first results' history rows are unchanged
    hist = store.rating_history()
    assert hist[0][2] != 1500.0 or hist[1][2] != 1500.0
    return done_before


def test_kill_9_mid_run_then_resume(tmp_path):
    _kill_and_resume(tmp_path, signal.SIGKILL)


def test_ctrl_c_mid_run_then_resume(tmp_path):
    _kill_and_resume(tmp_path, signal.SIGINT)


def test_worker_crash_requeues_only_that_match(tmp_path):
    marker = tmp_path / "crashed"
    c = write_cfg(tmp_path / "c.yaml", matches=12, games=[{"id": "openspiel/tic_tac_toe-v0"}],
                  players=[{"name": "random", "agent": "random"},
                           {"name": "crashy", "agent": f"plugins.agents:CrashOnce:marker='{marker}'"}])
    league = League(load_league_config(c), tmp_path / "L", backend="local")
    summary = league.run()
    assert marker.exists(), "the crashing agent should have killed a worker"
    assert summary["failures"] >= 1
    store = assert_consistent(tmp_path / "L", 12)
    attempts = [m.attempts for m in store.matches()]
    assert max(attempts) >= 2 and all(a >= 1 for a in attempts)


def test_two_processes_write_results(tmp_path):
    c = write_cfg(tmp_path / "c.yaml", matches=40, players=BASE["players"] + [
        {"name": "slow", "agent": "plugins.agents:Slow:delay=0.01"}])
    d = tmp_path / "L"
    League(load_league_config(c), d, backend="inline").run(matches=2)  # create the league
    proc = subprocess.Popen([ARENA, "league", "run", str(c), "--dir", str(d)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    human_matches = 0
    while proc.poll() is None and human_matches < 6:
        out = play_against(d, "first", "openspiel/tic_tac_toe-v0", seat=human_matches % 2, name="tester",
                           stdin=io.StringIO("0\n1\n2\n3\n4\n5\n6\n7\n8\n"), stdout=io.StringIO())
        assert out["outcome"] in ("normal", "forfeit")
        human_matches += 1
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    store = assert_consistent(d, 40 + human_matches)
    assert "human:tester" in store.elo("openspiel/tic_tac_toe-v0")


def test_human_vs_league_player_is_rated(tmp_path):
    d = tmp_path / "L"
    League(load_league_config(write_cfg(tmp_path / "c.yaml", matches=6)), d, backend="inline").run()
    out = play_against(d, "mcts", "openspiel/tic_tac_toe-v0", seat=0, seed=3, name="ada",
                       stdin=io.StringIO("4\n0\n8\n2\n6\n1\n3\n5\n7\n"), stdout=io.StringIO())
    store = assert_consistent(d, 7)
    last = store.results()[-1]
    assert last.players == ["human:ada", "mcts"] and last.match_id == out["match_id"]
    assert store.elo("openspiel/tic_tac_toe-v0")["human:ada"] == out["elo"]["human:ada"] != 1500.0
    with pytest.raises(ArenaError, match="no player 'nobody'"):
        play_against(d, "nobody", stdin=io.StringIO(""), stdout=io.StringIO())
    # the human is never scheduled by the league itself
    League(load_league_config(write_cfg(tmp_path / "c.yaml", matches=20)), d, backend="inline").run()
    assert sum("human:ada" in r.players for r in open_league(d).results()) == 1


def test_ray_backend(tmp_path):
    pytest.importorskip("ray")
    c = write_cfg(tmp_path / "c.yaml", matches=10, backend="ray", workers=2)
    league = League(load_league_config(c), tmp_path / "L")
    try:
        summary = league.run()
    finally:
        import ray

        ray.shutdown()
    assert summary["results"] == 10
    assert_consistent(tmp_path / "L", 10)


KILL_AT_COMMIT = """
import os, signal, sys
from arena.league.config import load_league_config
from arena.league.manager import League
from arena.league.storage import LeagueStore

batches = [0]
original = LeagueStore.commit_results

def commit_results(self, items):
    batches[0] += 1
    if batches[0] == 3:  # the batch's replays are on disk; the process dies before its one transaction
        os.kill(os.getpid(), signal.SIGKILL)
    return original(self, items)

LeagueStore.commit_results = commit_results
League(load_league_config(sys.argv[1]), sys.argv[2], backend="inline").run()
"""


@pytest.mark.parametrize("replays", ["files", "database"])
def test_kill_9_between_the_replays_and_the_commit_of_a_batch(tmp_path, replays):
    """Group commit. Files: a batch's replay files are durable before its one transaction; killed between
    the two, none of the batch is recorded, and the next run commits each of them once, from its replay.
    Database: a replay is written in its result's transaction; killed before it, neither is, and the next
    run plays the batch's matches again (same ids and seeds), each recorded once."""
    cfg = write_cfg(tmp_path / "c.yaml", matches=40, in_flight=4, workers=1, replays=replays)
    d = tmp_path / "league"
    p = subprocess.run([sys.executable, "-c", KILL_AT_COMMIT, str(cfg), str(d)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == -signal.SIGKILL, p.stderr
    store = open_league(d)
    recorded = store.result_count()
    running = store.matches(status="running")
    assert recorded == 2 * 4 and len(running) == 4  # two batches committed; the third batch in flight
    on_disk = [replay_path(store.replay_dir, m.match_id).exists() for m in running]
    blobs = store.conn.execute("SELECT COUNT(*) FROM replays").fetchone()[0]
    store.close()
    summary = League(load_league_config(cfg), d, backend="inline").run()
    if replays == "files":
        assert all(on_disk) and blobs == 0  # its replays made it to disk
        assert summary["committed_from_replay"] == 4 and summary["requeued"] == 0
    else:
        assert not any(on_disk) and blobs == 8  # the two committed batches' replays, not the third's
        assert summary["committed_from_replay"] == 0 and summary["requeued"] == 4
    assert_consistent(d, 40)


def test_pairs_are_unranked_in_the_order_of_listing_them():
    """Pairing picks the i-th pair of frozen players without listing all pairs (O(games), not O(players^2))."""
    import itertools

    for n in range(0, 12):
        names = [f"p{i:02d}" for i in range(n)]
        for games in ([("g", names)], [("g", names), ("h", names[::2])], [("g", []), ("h", names)]):
            listed = [(g, a, b) for g, ns in games for a, b in itertools.combinations(ns, 2)]
            assert [League._combo(games, i) for i in range(len(listed))] == listed


@pytest.mark.parametrize("pairing", ["round_robin", "uniform", "pfsp"])
def test_two_seats_the_game_plays_itself_are_never_paired(tmp_path, monkeypatch, pairing):
    # StarCraft II's built-in AI (sc2bot) is played by the game, which seats one at most: here two
    # tic-tac-toe players stand in for two of them
    import arena.league.manager as manager

    monkeypatch.setattr(manager, "played_by_game", lambda spec: spec.startswith("first"))
    c = write_cfg(tmp_path / "c.yaml", pairing=pairing, players=[
        {"name": "bot_a", "agent": "first"}, {"name": "bot_b", "agent": "first:seed=1"},
        {"name": "r", "agent": "random"}, {"name": "r2", "agent": "random:seed=2"}])
    league = League(load_league_config(c), tmp_path / "L")
    pairs = {tuple(sorted(league.next_pairing().players)) for _ in range(60)}
    assert ("bot_a", "bot_b") not in pairs and len(pairs) == 5
    monkeypatch.setattr(manager, "played_by_game", lambda spec: True)
    league = League(load_league_config(c), tmp_path / "L2")
    with pytest.raises(ConfigError, match="no two players can meet"):
        league.next_pairing()
