"""StarCraft II in the league and the SCC learner, on the stand-in game of `arena/envs/sc2/stand_in.py`.

The fake's toy world on a 1v1 map is three marines a side, 12 apart (out of range): ``sc2:attack``
focus-fires the nearest enemy, the fake's built-in AI (any difficulty: the fake plays them all the
same) attacks with every idle unit, ``sc2:idle`` only fires back at what comes in range, and
``random`` wanders. So ``sc2:attack`` beats everyone, the bots beat ``sc2:idle`` and ``random``, and
that is the order the league's ratings must show. On MoveToBeacon, ``sc2:attack`` walks onto the
beacon (exactly, with a 64-cell minimap) and scores; ``random`` rarely does.

Skipped, with the reason, without the ``sc2`` extra. Each league match launches one fake game
process (two for agent against agent, about 1 s each); no process may outlive a test.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

try:
    from arena.envs.sc2 import stand_in as fake_sc2
except ImportError:  # it needs s2clientprotocol, which comes with the sc2 extra; the tests skip
    fake_sc2 = None

from league.test_league import assert_consistent

pytestmark = pytest.mark.timeout(120)

GAME = "sc2/Simple64-v0"


def _league(tmp_path: Path, players: dict[str, str], matches: int, game: str = GAME, **changes):
    from arena.league.config import load_league_config
    from arena.league.manager import League

    cfg = {"name": "sc2", "seed": 1, "games": [{"id": game, "kwargs": {"max_steps": 40}}],
           "players": [{"name": n, "agent": a} for n, a in players.items()], "matches": matches,
           "workers": 2, "in_flight": 4, "replays": "files", "invalid_allowance": 40, **changes}
    path = tmp_path / "league.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return League(load_league_config(path), tmp_path / "L", backend="local")


def test_a_league_of_sc2_players_rates_them_in_the_toy_worlds_order(sc2path, tmp_path):
    players = {"attack": "sc2:attack", "idle": "sc2:idle", "random": "random",
               "bot_very_easy": "sc2bot:difficulty=very_easy", "bot_hard": "sc2bot:difficulty=hard,race=zerg"}
    summary = _league(tmp_path, players, 20).run()
    assert summary["results"] == 20
    store = assert_consistent(tmp_path / "L", 20)
    # the game seats at most one built-in AI: the league never pairs the two bots (the round robin
    # passes over that pair), so nothing fails and each of the other 9 pairs is played 2 or 3 times
    assert summary["failures"] == 0 and not store.matches(status=["failed"])
    pairs = [tuple(sorted(r.players)) for r in store.results()]
    assert ("bot_hard", "bot_very_easy") not in pairs and len(set(pairs)) == 9 and all(pairs.count(p) in (2, 3) for p in pairs)
    elo = store.elo(GAME)
    assert set(elo) == set(players)
    for bot in ("bot_very_easy", "bot_hard"):
        assert elo["attack"] > elo[bot] > max(elo["idle"], elo["random"]), elo
    # every match against a bot ends in a decision; idle against random runs to max_steps (a draw)
    for r in store.results():
        if any(p.startswith("bot") or p == "attack" for p in r.players):
            assert not r.draw and r.players[r.winner] in ("attack", "bot_very_easy", "bot_hard"), r
    # every replay is a file, with the game's own .SC2Replay beside it
    replays = tmp_path / "L" / "replays"
    for r in store.results():
        arena_replay = replays / f"{r.match_id}.jsonl.gz"
        game_replay = replays / f"{r.match_id}.SC2Replay"
        assert arena_replay.is_file() and game_replay.is_file(), r.match_id
        assert game_replay.read_bytes().startswith(b"FAKE-SC2Replay")
        header = store.read_replay(r.match_id).header
        assert header["engine"]["sc2_base_build"] == fake_sc2.BASE_BUILD


def test_a_game_dying_mid_match_is_a_fault_the_worker_lives_and_the_match_is_played_again(sc2path, tmp_path,
                                                                                          monkeypatch):
    from arena.match.pool import MatchPool

    # The launcher passes FAKE_SC2_DIE_AT_LOOP on to the first game only (mkdir is atomic): that game
    # exits at loop 40 (step 5) without answering; every later one plays to the end.
    exe = next((sc2path / "Versions").glob("Base*/SC2_x64"))
    died = sc2path / "died_once"
    exe.write_text(exe.read_text().replace(
        "exec ", f"if [ -n \"$FAKE_SC2_DIE_AT_LOOP\" ] && ! mkdir {fake_sc2._sh(str(died))} 2>/dev/null; then\n"
                 "  unset FAKE_SC2_DIE_AT_LOOP\nfi\nexec ", 1))
    # A forkserver started before the variable is set (as by an earlier test) must not hide it from
    # the league's workers: they take the environment of the process that made their pool.
    with MatchPool("local", 1) as pool:
        pool.play([])
    monkeypatch.setenv("FAKE_SC2_DIE_AT_LOOP", "40")
    league = _league(tmp_path, {"attack": "sc2:attack", "bot": "sc2bot:difficulty=very_easy"}, 6)
    summary = league.run()
    assert died.is_dir(), "the variable did not reach the game launched by the worker"
    assert summary["results"] == 6 and summary["failures"] == 1
    store = assert_consistent(tmp_path / "L", 6)
    again = [m for m in store.matches() if m.attempts > 1]
    assert len(again) == 1 and again[0].status == "done" and max(m.attempts for m in store.matches()) == 2
    # the fault came back from a living worker as the game's crash, not as a lost worker
    assert "SC2GameCrashed" in again[0].note and "WorkerLost" not in again[0].note, again[0].note
    assert "mid-match" in again[0].note
    assert len(fake_sc2.launches(sc2path)) == 7  # 6 matches and the one played again


@pytest.mark.parametrize("when", ["starting", "playing"])
def test_a_league_stopped_mid_match_leaves_no_game_running(sc2path, tmp_path, monkeypatch, when):
    # long matches (the bot does not come, the episode is 400,000 loops): the league stops while both
    # workers are starting their games or playing them; closing its pool terminates the workers, and
    # each stops its game first
    monkeypatch.setenv("FAKE_SC2_BOT_PASSIVE", "1")
    monkeypatch.setenv("FAKE_SC2_EPISODE_LOOPS", "400000")
    league = _league(tmp_path, {"idle": "sc2:idle", "bot": "sc2bot:difficulty=very_easy"}, 4,
                     games=[{"id": GAME, "kwargs": {"max_steps": 0}}])
    started, seen = time.time(), []

    def stop() -> bool:
        if len(fake_sc2.launches(sc2path)) >= 2 and not seen:
            seen.append(time.time())
        return bool(seen) and (when == "starting" or time.time() > seen[0] + 3) or time.time() > started + 60

    summary = league.run(stop=stop)
    assert summary["results"] == 0 and len(fake_sc2.launches(sc2path)) >= 2
    deadline = time.time() + 10  # SIGKILLed games are reaped by the init process a moment later
    while any(fake_sc2.alive(r["pid"]) for r in fake_sc2.launches(sc2path)) and time.time() < deadline:
        time.sleep(0.1)
    # the sc2path fixture then asserts that no fake game process is alive


def test_a_one_player_league_on_move_to_beacon_ranks_by_return(sc2path, tmp_path):
    league = _league(tmp_path, {"attack": "sc2:attack", "random": "random"}, 4, game="sc2/MoveToBeacon-v0",
                     games=[{"id": "sc2/MoveToBeacon-v0", "kwargs": {"max_steps": 40, "minimap": 64}}], seeds=2)
    assert league.run()["results"] == 4
    store = assert_consistent(tmp_path / "L", 4)
    table = store.common_return_table("sc2/MoveToBeacon-v0")
    assert set(table) == {"attack", "random"}
    (n_attack, mean_attack, _), (n_random, mean_random, _) = table["attack"], table["random"]
    assert n_attack == n_random == 2
    assert mean_attack >= 2 and mean_attack > mean_random, table  # 40 steps reach several beacons
    assert all((tmp_path / "L" / "replays" / f"{r.match_id}.SC2Replay").is_file() for r in store.results())


def test_two_iterations_of_the_scc_learner_on_simple64(sc2path, tmp_path, monkeypatch):
    """Plumbing, not learning: the shipped config with only sizes and counts changed. Imitation reads
    what the teacher saw as it played: no replay is re-simulated (the game's rules live in its process)."""
    pytest.importorskip("torch")
    from arena.league.manager import open_league
    from arena.match import play_match, verify
    from arena.trainers.registry import make_trainer

    def no_resimulation(*a, **kw):
        raise AssertionError("imitation re-simulated a StarCraft II replay")

    monkeypatch.setattr(verify, "observed_moves", no_resimulation)

    data = yaml.safe_load((Path(__file__).parents[2] / "configs" / "train" / "scc_sc2.yaml").read_text())
    assert data["game"] == GAME
    small = {"threads": 1, "iterations": 2, "games_per_iter": 2, "learners": [{"name": "main", "role": "main"}],
             "il": {**data["il"], "matches": 4, "epochs": 2, "patience": 1},
             "sizes": {"hidden": [16], "d_model": 16, "layers": 1, "heads": 2, "channels": 4},
             "eval": {"every": 2, "games": 2, "opponents": ["sc2bot:difficulty=very_easy"]},
             "game_kwargs": {"max_steps": 30, "max_units": 16}}
    changed = {k for k in small if small[k] != data.get(k)}
    assert changed <= {"threads", "iterations", "games_per_iter", "learners", "il", "sizes", "eval", "game_kwargs"}
    path = tmp_path / "scc.yaml"
    path.write_text(yaml.safe_dump({**data, **small}))
    run = tmp_path / "run"
    trainer = make_trainer(path, run)
    try:
        trainer.run()
    finally:
        trainer.close()
    for ckpt in ("il", "iter-00001", "iter-00002"):
        assert (run / "checkpoints" / ckpt).is_dir(), ckpt
    assert (run / "best" / "policy.pt").is_file() and (run / "latest" / "policy.pt").is_file()
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert sorted(m["step"] for m in metrics if "train/pg_loss" in m) == [1, 2]
    assert any(k.startswith("il/") for m in metrics for k in m) and any(k.startswith("eval/") for m in metrics for k in m)
    store = open_league(trainer.league_dir)
    results = store.results(GAME)
    assert len(results) >= 4 + 2 * 2  # the teacher matches and each iteration's games
    assert any("main" in r.players for r in results) and "main" in store.elo(GAME)
    res = play_match(GAME, [f"policy:{run / 'latest'},greedy=true", "sc2bot:difficulty=very_easy"], seed=11,
                     game_kwargs={"max_steps": 30, "max_units": 16})
    assert res.outcome == "normal" and len(res.returns) == 2 and res.moves >= 1
