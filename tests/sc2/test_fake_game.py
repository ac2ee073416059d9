"""The unmodified pysc2 client path (`SC2Env` -> `StarcraftProcess` -> `RemoteController`)
against the fake game in `arena/envs/sc2/stand_in.py`, through a temporary ``SC2PATH``.

Skipped, with the reason, when the ``sc2`` extra (``pysc2-evolved``) is not installed. Each test
launches one or two fake game processes (about 1 s each: pysc2's first connection attempt comes
before the game listens, and it retries once a second).

This folder has no ``__init__.py`` on purpose: as a package it would be importable as ``sc2``
(``tests/`` is on ``sys.path``), the name of burnysc2's package.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

try:
    from arena.envs.sc2 import stand_in as fake_sc2
except ImportError:  # it needs s2clientprotocol, which comes with the sc2 extra; the tests skip
    fake_sc2 = None

pytestmark = pytest.mark.timeout(60)


def _env(pysc2_env, map_name="MoveToBeacon", players=None, **aif_kwargs):
    from pysc2_evolved.lib import features

    sc2_env = pysc2_env
    players = players or [sc2_env.Agent(sc2_env.Race.terran)]
    aif = features.AgentInterfaceFormat(**aif_kwargs)
    return sc2_env.SC2Env(map_name=map_name, players=players, agent_interface_format=aif, random_seed=1)


@pytest.fixture
def sc2_env(sc2path):
    from pysc2_evolved.env import sc2_env

    return sc2_env


RAW = {"use_raw_units": True, "use_raw_actions": True, "raw_resolution": 64}


def _raw_units(ts):
    from pysc2_evolved.lib import features

    units = ts.observation["raw_units"]
    return units, features.FeatureUnit


# -- the mock env: the import path works --------------------------------------------------------

def test_pysc2_mock_env_runs(pysc2):
    from pysc2_evolved.env import mock_sc2_env, sc2_env
    from pysc2_evolved.lib import actions, features

    from arena.envs.sc2 import _pysc2

    assert _pysc2.sc2_env() is sc2_env
    env = mock_sc2_env.SC2TestEnv(
        map_name="MoveToBeacon", players=[sc2_env.Agent(sc2_env.Race.terran)],
        agent_interface_format=features.AgentInterfaceFormat(
            feature_dimensions=features.Dimensions(screen=16, minimap=16)))
    ts = env.reset()
    assert ts[0].first() and ts[0].observation["feature_screen"].shape[1:] == (16, 16)
    steps = 0
    while not ts[0].last():
        ts = env.step([actions.FUNCTIONS.no_op()])
        steps += 1
    assert steps == 10  # SC2TestEnv's episode
    env.close()


def test_missing_extra_names_the_fix(monkeypatch):
    from arena.envs.sc2 import _pysc2
    from arena.errors import MissingExtra

    monkeypatch.setitem(sys.modules, "pysc2_evolved", None)  # import pysc2_evolved -> ImportError
    monkeypatch.setattr(_pysc2, "_LOADED", {})  # as in a process that never imported it
    with pytest.raises(MissingExtra, match=r'pip install "arena\[sc2\]"'):
        _pysc2.sc2_env()


# -- single agent --------------------------------------------------------------------------------

def test_mini_game_episode_raw(sc2_env, sc2path, monkeypatch):
    """MoveToBeacon with the raw interface: walk the marine onto the beacon, score, episode ends."""
    from pysc2_evolved.lib import actions

    monkeypatch.setenv("FAKE_SC2_EPISODE_LOOPS", "160")
    env = _env(sc2_env, **RAW)
    try:
        ts = env.reset()[0]
        assert ts.first() and ts.observation["game_loop"][0] == 0
        total, steps = 0.0, 0
        while not ts.last():
            units, FU = _raw_units(ts)
            marine = np.flatnonzero(units[:, FU.unit_type] == fake_sc2.MARINE)[0]
            beacon = units[units[:, FU.unit_type] == fake_sc2.BEACON][0]
            act = actions.RAW_FUNCTIONS.Move_pt("now", [marine], (beacon[FU.x], beacon[FU.y]))
            ts = env.step([act])[0]
            total += ts.reward
            steps += 1
        assert steps == 160 // 8 and ts.observation["game_loop"][0] == 160
        assert total >= 1  # score_index 0 for mini-games: the reward is the score's change
        assert ts.observation["score_cumulative"][0] == total
        assert ts.discount == 0  # the game ended: a player_result came with the last observation
    finally:
        env.close()
    (launch,) = fake_sc2.launches(sc2path)
    argv = launch["argv"]
    assert argv[:2] == ["-listen", "127.0.0.1"] and argv[2] == "-port"
    assert argv[argv.index("-dataDir") + 1] == os.path.join(str(sc2path), "")


def test_feature_layer_action(sc2_env, monkeypatch):
    """select_army and Move_screen onto the beacon, read from feature_screen.player_relative."""
    from pysc2_evolved.lib import actions, features

    monkeypatch.setenv("FAKE_SC2_EPISODE_LOOPS", "400")
    env = _env(sc2_env, feature_dimensions=features.Dimensions(screen=32, minimap=16))
    try:
        ts = env.reset()[0]
        screen = ts.observation["feature_screen"]
        assert screen.shape == (len(features.SCREEN_FEATURES), 32, 32)
        assert (screen.player_relative == 1).any() and (screen.player_relative == 3).any()
        available = set(ts.observation["available_actions"])
        assert actions.FUNCTIONS.select_army.id in available
        assert actions.FUNCTIONS.Move_screen.id not in available  # nothing selected yet

        ts = env.step([actions.FUNCTIONS.select_army("select")])[0]
        available = set(ts.observation["available_actions"])
        assert {actions.FUNCTIONS.Move_screen.id, actions.FUNCTIONS.Attack_screen.id,
                actions.FUNCTIONS.Stop_quick.id} <= available
        assert len(ts.observation["single_select"]) == 1
        assert ts.observation["last_actions"].tolist() == [actions.FUNCTIONS.select_army.id]

        score = 0
        for _ in range(30):
            ys, xs = np.nonzero(ts.observation["feature_screen"].player_relative == 3)
            target = (int(xs.mean()), int(ys.mean()))
            ts = env.step([actions.FUNCTIONS.Move_screen("now", target)])[0]
            assert actions.FUNCTIONS.Move_screen.id in ts.observation["last_actions"]
            score = ts.observation["score_cumulative"][0]
            if score:
                break
        assert score >= 1
    finally:
        env.close()


def test_agent_vs_builtin_bot(sc2_env, sc2path):
    """An idle agent against the bot on a melee map: the bot attacks and wins."""
    from pysc2_evolved.lib import actions

    env = _env(sc2_env, "Simple64", [sc2_env.Agent(sc2_env.Race.terran, "me"),
                                     sc2_env.Bot(sc2_env.Race.zerg, sc2_env.Difficulty.very_easy)], **RAW)
    try:
        info = env.game_info[0]
        assert [(p.player_id, p.type) for p in info.player_info] == [(1, 1), (2, 2)]  # Participant, Computer
        assert info.player_info[1].race_requested == sc2_env.Race.zerg
        ts = env.reset()[0]
        units, FU = _raw_units(ts)
        assert sorted(units[:, FU.alliance].tolist()) == [1, 1, 1, 4, 4, 4]
        steps = 0
        while not ts.last():
            ts = env.step([actions.RAW_FUNCTIONS.no_op()])[0]
            steps += 1
        assert ts.reward == -1 and steps < 200
        units, FU = _raw_units(ts)
        assert (units[:, FU.alliance] == 1).sum() == 0
    finally:
        env.close()
    assert len(fake_sc2.launches(sc2path)) == 1


def test_ladder_map_vs_bot_launches(sc2_env):
    """A ladder map name (Ladder2017Season4/AbyssalReefLE) resolves and starts a game."""
    env = _env(sc2_env, "AbyssalReef", [sc2_env.Agent(sc2_env.Race.protoss),
                                        sc2_env.Bot(sc2_env.Race.random, sc2_env.Difficulty.hard)], **RAW)
    try:
        assert env.game_info[0].local_map_path == "Ladder2017Season4/AbyssalReefLE.SC2Map"
        assert env.reset()[0].first()
    finally:
        env.close()


# -- two agents ------------------------------------------------------------------------------------

def _trace(path) -> dict[int, list[str]]:
    """The request kinds each fake game process received, in order (FAKE_SC2_TRACE)."""
    out: dict[int, list[str]] = {}
    for line in path.read_text().splitlines():
        pid, _, kind = line.split(" ", 3)[:3]
        out.setdefault(int(pid), []).append(kind)
    return out


def test_agent_vs_agent_one_winner(sc2_env, sc2path, tmp_path, monkeypatch):
    """Two game processes share one world: agent 1 attacks, agent 2 idles; exactly one wins.
    Then a second episode (leave, create, join again) starts on the same two processes."""
    from pysc2_evolved.lib import actions

    monkeypatch.setenv("FAKE_SC2_TRACE", str(tmp_path / "trace.txt"))
    env = _env(sc2_env, "Simple64", [sc2_env.Agent(sc2_env.Race.terran, "a"),
                                     sc2_env.Agent(sc2_env.Race.terran, "b")], **RAW)
    try:
        launched = fake_sc2.launches(sc2path)
        assert len(launched) == 2 and len({r["pid"] for r in launched}) == 2
        for episode in range(2):
            ts = env.reset()
            assert [t.observation["game_loop"][0] for t in ts] == [0, 0]
            assert [t.observation["player"][0] for t in ts] == [1, 2]  # player ids
            steps = 0
            while not ts[0].last():
                units, FU = _raw_units(ts[0])
                mine = np.flatnonzero(units[:, FU.alliance] == 1).tolist()
                enemy = units[units[:, FU.alliance] == 4]
                attack = (actions.RAW_FUNCTIONS.Attack_pt("now", mine, (enemy[0, FU.x], enemy[0, FU.y]))
                          if mine and len(enemy) else actions.RAW_FUNCTIONS.no_op())
                ts = env.step([attack, actions.RAW_FUNCTIONS.no_op()])
                steps += 1
                assert ts[0].observation["game_loop"][0] == ts[1].observation["game_loop"][0]
            assert ts[1].last() and steps < 200
            assert sorted(t.reward for t in ts) == [-1, 1]  # exactly one winner
        assert len(fake_sc2.launches(sc2path)) == 2  # the second episode reused both games
    finally:
        env.close()
    host, joiner = (r["pid"] for r in fake_sc2.launches(sc2path))
    trace = _trace(tmp_path / "trace.txt")
    start = ["save_map", "create_game", "join_game", "game_info", "observation"]
    assert trace[host][:6] == ["ping", *start]
    assert trace[joiner][:5] == ["ping", "save_map", "join_game", "game_info", "observation"]
    assert trace[host].count("leave_game") == trace[joiner].count("leave_game") == 1  # before episode 2
    assert trace[host].count("create_game") == 2 and "create_game" not in trace[joiner]
    assert trace[host][-1] == trace[joiner][-1] == "quit"


# -- restarts, replays, failures -------------------------------------------------------------------

def test_restart_resets_twice(sc2_env, sc2path, tmp_path, monkeypatch):
    """One player, one race, one map: pysc2 restarts the game in place (no new process)."""
    from pysc2_evolved.lib import actions

    monkeypatch.setenv("FAKE_SC2_EPISODE_LOOPS", "40")
    monkeypatch.setenv("FAKE_SC2_TRACE", str(tmp_path / "trace.txt"))
    env = _env(sc2_env, **RAW)
    try:
        for _ in range(3):
            ts = env.reset()[0]
            assert ts.first() and ts.observation["game_loop"][0] == 0
            ts = env.step([actions.RAW_FUNCTIONS.no_op()])[0]
            assert ts.observation["game_loop"][0] == 8
    finally:
        env.close()
    assert len(fake_sc2.launches(sc2path)) == 1
    (kinds,) = _trace(tmp_path / "trace.txt").values()
    assert kinds[:5] == ["ping", "create_game", "join_game", "game_info", "observation"]
    assert kinds.count("create_game") == 1 and kinds.count("restart_game") == 2 and kinds[-1] == "quit"


def test_save_replay(sc2_env, tmp_path, monkeypatch):
    from pysc2_evolved.lib import actions, features

    monkeypatch.setenv("FAKE_SC2_EPISODE_LOOPS", "16")
    aif = features.AgentInterfaceFormat(**RAW)
    env = sc2_env.SC2Env(map_name="MoveToBeacon", players=[sc2_env.Agent(sc2_env.Race.terran)],
                         agent_interface_format=aif, save_replay_episodes=1, replay_dir=str(tmp_path / "replays"))
    try:
        ts = env.reset()[0]
        while not ts.last():
            ts = env.step([actions.RAW_FUNCTIONS.no_op()])[0]
        path = env.save_replay(str(tmp_path / "more"), prefix="fake")
    finally:
        env.close()
    (auto,) = (tmp_path / "replays").iterdir()  # written by SC2Env at the episode's end
    assert auto.name.startswith("MoveToBeacon_") and auto.suffix == ".SC2Replay"
    with open(path, "rb") as f:
        data = f.read()
    assert data.startswith(b"FAKE-SC2Replay\n") and b'"loop": 16' in data


def test_game_dying_mid_match_raises(sc2_env, monkeypatch):
    from pysc2_evolved.lib import actions, protocol

    monkeypatch.setenv("FAKE_SC2_DIE_AT_LOOP", "24")
    env = _env(sc2_env, **RAW)
    try:
        env.reset()
        env.step([actions.RAW_FUNCTIONS.no_op()])
        env.step([actions.RAW_FUNCTIONS.no_op()])
        with pytest.raises(protocol.ConnectionError, match="SC2 probably crashed"):
            env.step([actions.RAW_FUNCTIONS.no_op()])
    finally:
        env.close()  # quits what is left, reaps the dead process: the fixture checks none remain


def test_rejected_and_invalid_actions(sc2_env, monkeypatch):
    """A rejected ability and a command to a unit that is not the player's come back as action
    errors in the next observation; the game goes on."""
    from pysc2_evolved.lib import actions
    from s2clientprotocol import error_pb2

    monkeypatch.setenv("FAKE_SC2_REJECT_ABILITY", "3794")  # Move
    env = _env(sc2_env, **RAW)
    try:
        ts = env.reset()[0]
        units, FU = _raw_units(ts)
        marine = np.flatnonzero(units[:, FU.unit_type] == fake_sc2.MARINE)[0]
        beacon = np.flatnonzero(units[:, FU.unit_type] == fake_sc2.BEACON)[0]
        ts = env.step([actions.RAW_FUNCTIONS.Move_pt("now", [marine], (5, 5))])[0]
        assert ts.observation["action_result"].tolist() == [error_pb2.ActionResult.Value("Error")]
        ts = env.step([actions.RAW_FUNCTIONS.Attack_pt("now", [beacon], (5, 5))])[0]
        assert ts.observation["action_result"].tolist() == [error_pb2.ActionResult.Value("YouCantControlThatUnit")]
        ts = env.step([actions.RAW_FUNCTIONS.Attack_pt("now", [marine], (5, 5))])[0]
        assert ts.observation["action_result"].tolist() == []
        assert ts.observation["game_loop"][0] == 24
    finally:
        env.close()


def test_close_leaves_no_process(sc2_env, sc2path):
    """close() quits both games of a two-agent env; the fixture then checks every launched pid."""
    env = _env(sc2_env, "Simple64", [sc2_env.Agent(sc2_env.Race.terran), sc2_env.Agent(sc2_env.Race.zerg)], **RAW)
    pids = [p.pid for p in env._sc2_procs]
    assert all(fake_sc2.alive(pid) for pid in pids)
    env.close()
    assert not any(fake_sc2.alive(pid) for pid in pids)
    assert sorted(pids) == sorted(r["pid"] for r in fake_sc2.launches(sc2path))
