"""The StarCraft II adapter (`arena.envs.sc2.game`, `arena.agents.sc2bot`): its conversions on
hand-built arrays and on pysc2's own mock env, then whole matches over the fake game
(`fake_sc2.py`, through a temporary ``SC2PATH``: see `conftest.py`).

Skipped, with the reason, when the ``sc2`` extra (``pysc2-evolved``) is not installed (the pure
conversions of `entity_slots` and `RawView` run without it). Each match launches one fake game
process per arena seat (about 1 s each); the ``sc2path`` fixture checks that none is left running.
"""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np
import pytest

try:
    from arena.envs.sc2 import stand_in as fake_sc2
except ImportError:  # it needs s2clientprotocol, which comes with the sc2 extra; the tests skip
    fake_sc2 = None

from arena.envs.sc2.game import (F_ALLIANCE, F_TAG, F_X, F_Y, FEATURES, SCALES, RawView, SC2Config, entity_slots,
                                 feature_arrays, observation_space)

pytestmark = pytest.mark.timeout(60)

SELF, ALLY, NEUTRAL, ENEMY = 1, 2, 3, 4
FN = ("no_op", "Move_pt", "Attack_unit", "Attack_pt", "Stop_quick", "Smart_unit")


def raw_units(*units: tuple[int, int, float, float]) -> np.ndarray:
    """A raw_units array of (alliance, tag, x, y) marines (45 hp) in pysc2's 46 fields."""
    out = np.zeros((len(units), len(FEATURES)), np.int64)
    for i, (alliance, tag, x, y) in enumerate(units):
        out[i, FEATURES.index("unit_type")] = 48
        out[i, FEATURES.index("health")] = 45
        out[i, F_ALLIANCE], out[i, F_TAG], out[i, F_X], out[i, F_Y] = alliance, tag, x, y
    return out


#: rows: 0 enemy tag 7, 1 own tag 30, 2 neutral tag 1, 3 own tag 10, 4 ally tag 3, 5 enemy tag 2
UNITS = raw_units((ENEMY, 7, 40, 8), (SELF, 30, 16, 32), (NEUTRAL, 1, 63, 0), (SELF, 10, 8, 4), (ALLY, 3, 20, 20),
                  (ENEMY, 2, 48, 12))


# -- conversions without a game ----------------------------------------------------------------------

def test_entity_slots_own_then_enemy_then_rest_by_tag():
    assert entity_slots(UNITS, 32).tolist() == [3, 1, 5, 0, 4, 2]  # own 10, 30; enemy 2, 7; ally 3; neutral 1
    assert entity_slots(UNITS, 3).tolist() == [3, 1, 5]
    assert entity_slots(UNITS[:0], 4).tolist() == []


def test_raw_view_arrays_and_masks():
    cfg = SC2Config("Simple64", max_units=5, minimap=8, functions=FN, max_steps=40)
    player = np.array([1, 50, 0, 12, 15, 0, 6, 0, 6, 0, 0])
    view = RawView(cfg, {"raw_units": UNITS, "player": player}, 10, 40, 64)
    a = view.arrays
    assert view.rows.tolist() == [3, 1, 5, 0, 4]  # cut at max_units: the neutral unit has no slot
    ent = a["entities"]
    assert ent.shape == (5, 46) and ent.dtype == np.float32
    np.testing.assert_allclose(ent[:, F_X], np.array([8, 16, 48, 40, 20]) / 64)
    np.testing.assert_allclose(ent[:, F_Y], np.array([4, 32, 12, 8, 20]) / 64)
    np.testing.assert_allclose(ent[:, F_ALLIANCE], np.array([SELF, SELF, ENEMY, ENEMY, ALLY]) / SCALES["alliance"])
    np.testing.assert_allclose(ent[:, FEATURES.index("health")], 45 / 1500)
    assert not ent[:, F_TAG].any()  # the tag is an opaque id: 0
    assert a["entity_mask"].tolist() == [1, 1, 1, 1, 1]
    own = [1, 1, 0, 0, 0]
    assert a["type_mask"].tolist() == [1, 1, 1, 1, 1, 1]
    assert a["unit_mask"].tolist() == [[0] * 5] + [own] * 5
    assert a["target_mask"][FN.index("Attack_unit")].tolist() == [0, 0, 1, 1, 0]  # enemies only
    assert a["target_mask"][FN.index("Smart_unit")].tolist() == [0, 0, 1, 1, 1]  # any unit not the player's
    assert not a["target_mask"][[0, 1, 3, 4]].any()
    loc = a["location_mask"]
    assert loc.shape == (6, 64) and loc[[1, 3]].all() and not loc[[0, 2, 4, 5]].any()  # *_pt functions only
    np.testing.assert_allclose(a["scalars"][:11], np.clip(player / np.array([16, 1000, 1000, 200, 200, 200, 200, 50,
                                                                             200, 50, 50]), 0, 4), rtol=1e-6)
    assert a["scalars"][-1] == pytest.approx(10 / 40)
    assert a["spatial"].shape == (6, 8, 8) and not a["spatial"].any()  # no feature_minimap given
    assert cfg.settings()["functions"] == list(FN)
    assert observation_space(cfg).contains(a)


def test_raw_view_without_own_units_or_enemies():
    cfg = SC2Config("Simple64", max_units=8, minimap=8, functions=FN)
    none_own = RawView(cfg, {"raw_units": UNITS[[0, 2, 5]]}, 0, 0, 64).arrays
    assert none_own["type_mask"].tolist() == [1, 0, 0, 0, 0, 0]  # only no_op
    assert not none_own["unit_mask"].any() and not none_own["location_mask"].any()
    no_enemy = RawView(cfg, {"raw_units": UNITS[[1, 2, 3]]}, 0, 0, 64).arrays
    assert no_enemy["type_mask"].tolist() == [1, 1, 0, 1, 1, 1]  # no enemy to attack; the neutral unit to smart
    empty = RawView(cfg, None, 0, 0, 64)
    assert empty.rows.size == 0 and empty.arrays["type_mask"].tolist() == [1, 0, 0, 0, 0, 0]


def test_function_call_per_raw_kind(pysc2):
    from pysc2_evolved.lib import actions

    from arena.envs.sc2.game import function_call, function_table

    cfg = SC2Config("Simple64", max_units=5, minimap=16, functions=FN)
    view = RawView(cfg, {"raw_units": UNITS}, 0, 0, 64)
    fns = {f.name: f for f in function_table(cfg)}
    R = actions.RAW_FUNCTIONS

    def call(name, **move):
        c = function_call(cfg, fns[name], {"type": FN.index(name), **move}, view.rows, 64)
        return int(c.function), [list(map(int, arg)) for arg in c.arguments]

    assert call("no_op") == (int(R.no_op.id), [])
    # slots 0, 1 are rows 3, 1 (own tags 10, 30): pysc2 takes raw_units row positions as tags
    assert call("Stop_quick", units=[1, 0]) == (int(R.Stop_quick.id), [[0], [1, 3]])
    assert call("Attack_unit", units=[0], target=2) == (int(R.Attack_unit.id), [[0], [3], [5]])
    # cell [row 3, col 5] of the 16 x 16 grid: its centre in 64-pixel raw coordinates is x = 22, y = 14
    assert call("Move_pt", units=[0, 1], location=[3, 5]) == (int(R.Move_pt.id), [[0], [3, 1], [22, 14]])
    assert call("Attack_pt", units=[1], location=[15, 0]) == (int(R.Attack_pt.id), [[0], [1], [2, 62]])
    with pytest.raises(IndexError):  # a slot past the units shown: the core refuses the move
        function_call(cfg, fns["Stop_quick"], {"type": 4, "units": [7]}, view.rows, 64)


def test_the_queued_setting_adds_a_part_and_sends_it(pysc2, sc2path):
    from pysc2_evolved.lib import actions

    from arena.envs import make_core
    from arena.envs.sc2.game import action_model, function_call, function_table
    from arena.match import play_match

    cfg = SC2Config("Simple64", max_units=5, minimap=16, functions=FN, queued=True)
    model = action_model(cfg)
    assert model.names[:2] == ["type", "queued"]
    assert model.used(FN.index("no_op")) == ("type",)
    assert model.used(FN.index("Move_pt")) == ("type", "queued", "units", "location")
    view = RawView(cfg, {"raw_units": UNITS}, 0, 0, 64)
    fns = {f.name: f for f in function_table(cfg)}
    c = function_call(cfg, fns["Move_pt"], {"type": FN.index("Move_pt"), "queued": 1, "units": [0],
                                              "location": [3, 5]}, view.rows, 64)
    assert int(c.function) == int(actions.RAW_FUNCTIONS.Move_pt.id) and [list(map(int, a)) for a in c.arguments] == \
        [[1], [3], [22, 14]]
    assert SC2Config("Simple64").settings()["queued"] is False and "queued" not in action_model(
        SC2Config("Simple64")).names  # the default: Skirmish's parts exactly
    with pytest.raises(ValueError, match="queued must be true or false"):
        SC2Config("Simple64", queued="yes")
    res = play_match(make_core("sc2/Simple64-v0", queued=True, max_steps=20), ["random", "sc2bot:race=zerg"], seed=2)
    assert res.outcome in ("normal", "forfeit") and res.moves >= 1


def test_feature_type_mask_from_available_actions(pysc2):
    from pysc2_evolved.lib import actions

    from arena.envs.sc2.game import FEATURE_FUNCTIONS, function_call, function_table

    cfg = SC2Config("MoveToBeacon", interface="features", screen=16, minimap=8)
    fns = function_table(cfg)
    ids = [int(f.id) for f in fns]
    F = actions.FUNCTIONS
    avail = np.array([int(F.no_op.id), int(F.select_army.id), int(F.Move_screen.id), int(F.Stop_quick.id), 999])
    a = feature_arrays(cfg, {"available_actions": avail}, 0, 0, ids)
    assert [FEATURE_FUNCTIONS[i] for i in np.flatnonzero(a["type_mask"])] == ["no_op", "select_army", "Move_screen",
                                                                               "Stop_quick"]
    assert feature_arrays(cfg, {"available_actions": np.zeros(0)}, 0, 0, ids)["type_mask"].tolist() == \
        [1, 0, 0, 0, 0, 0, 0, 0]
    assert a["screen"].shape == (7, 16, 16) and a["minimap"].shape == (6, 8, 8)
    call = function_call(cfg, fns[FEATURE_FUNCTIONS.index("Move_screen")], {"type": 2, "screen": [3, 9]}, None, 64)
    assert int(call.function) == int(F.Move_screen.id) and [list(x) for x in call.arguments] == [[0], [9, 3]]
    call = function_call(cfg, fns[FEATURE_FUNCTIONS.index("select_army")], {"type": 1}, None, 64)
    assert [list(x) for x in call.arguments] == [[0]]


def _mock_env(raw: bool):
    from pysc2_evolved.env import mock_sc2_env, sc2_env
    from pysc2_evolved.lib import features

    kw = dict(use_raw_units=True, use_raw_actions=True, raw_resolution=64, action_space=features.ActionSpace.RAW) \
        if raw else dict(action_space=features.ActionSpace.FEATURES)
    aif = features.AgentInterfaceFormat(feature_dimensions=features.Dimensions(screen=16, minimap=16), **kw)
    return mock_sc2_env.SC2TestEnv(map_name="Simple64", players=[sc2_env.Agent(sc2_env.Race.terran)],
                                   agent_interface_format=aif)


def test_conversions_over_pysc2_mock_env(pysc2):
    """pysc2's SC2TestEnv (one neutral unit, blank layers): the views read its observations; a raw
    order built from our slots goes through pysc2's own `transform_action` to the game's tags."""
    from pysc2_evolved.lib import features
    from pysc2_evolved.tests import dummy_observation
    from s2clientprotocol import common_pb2

    from arena.envs.sc2.game import function_call, function_table

    cfg = SC2Config("Simple64", max_units=8, minimap=16)
    env = _mock_env(raw=True)
    try:
        obs = env.reset()[0].observation
        view = RawView(cfg, obs, 0, 0, 64)
        (row,) = view.rows
        assert view.arrays["entity_mask"].tolist() == [1] + [0] * 7
        assert view.arrays["entities"][0, F_ALLIANCE] * SCALES["alliance"] == NEUTRAL
        x, y = obs["raw_units"][row, [F_X, F_Y]]
        np.testing.assert_allclose(view.arrays["entities"][0, [F_X, F_Y]], [x / 64, y / 64])
        assert view.arrays["type_mask"].tolist() == [1, 0, 0, 0, 0]  # nothing of the player's: only no_op
        assert view.arrays["spatial"].shape == (6, 16, 16)

        # own units with game tags 901 and 77, an enemy with 555: the move names slots, the game gets tags
        feats = env._features[0]
        builder = dummy_observation.Builder(env.observation_spec()[0]).game_loop(0)

        def unit(alliance, owner, x, y):
            return dummy_observation.FeatureUnit(48, alliance, owner=owner, pos=common_pb2.Point(x=x, y=y, z=0),
                                                 radius=0.5, health=45, health_max=45, is_on_screen=True)

        proto = builder.feature_units([unit(ENEMY, 2, 100, 100), unit(SELF, 1, 20, 30), unit(SELF, 1, 40, 50)]).build()
        for u, tag in zip(proto.observation.raw_data.units, (555, 901, 77)):
            u.tag = tag
        obs = feats.transform_obs(proto)
        view = RawView(cfg, obs, 0, 0, 64)
        assert view.arrays["type_mask"].tolist() == [1, 1, 1, 1, 1]
        fns = function_table(cfg)
        attack = function_call(cfg, fns[2], {"type": 2, "units": [0, 1], "target": 2}, view.rows, 64)
        cmd = feats.transform_action(proto.observation, attack, skip_available=True).action_raw.unit_command
        assert list(cmd.unit_tags) == [77, 901] and cmd.target_unit_tag == 555  # slots by tag: 77 before 901
        move = function_call(cfg, fns[1], {"type": 1, "units": [1], "location": [3, 5]}, view.rows, 64)
        cmd = feats.transform_action(proto.observation, move, skip_available=True).action_raw.unit_command
        world = feats._world_to_minimap_px.back_pt(features.point.Point(22, 14))
        assert list(cmd.unit_tags) == [901]
        assert (cmd.target_world_space_pos.x, cmd.target_world_space_pos.y) == pytest.approx((world.x, world.y))
    finally:
        env.close()

    cfg = SC2Config("MoveToBeacon", interface="features", screen=16, minimap=16)
    env = _mock_env(raw=False)
    try:
        obs = env.reset()[0].observation
        fids = [int(f.id) for f in function_table(cfg)]
        a = feature_arrays(cfg, obs, 0, 0, fids)
        assert a["screen"].shape == (7, 16, 16) and a["minimap"].shape == (6, 16, 16)
        assert a["type_mask"][0] == 1
        assert set(np.flatnonzero(a["type_mask"])) == {i for i, f in enumerate(fids)
                                                      if f in set(obs["available_actions"].tolist())} | {0}
    finally:
        env.close()


def test_scripted_player_orders():
    """sc2:attack: every own unit (at most 64 an order) attacks the enemy nearest their centre; with no
    enemy shown it moves onto the nearest neutral unit's cell; its moves pass the action model's check."""
    from types import SimpleNamespace

    from arena.agents import make_agent
    from arena.envs import make_core

    core = make_core("sc2/Simple64-v0", max_units=100)
    army = raw_units(*[(SELF, 100 + i, 10 + i % 8, 10 + i // 8) for i in range(70)], (ENEMY, 5, 50, 50),
                     (ENEMY, 6, 30, 30))
    arrays = RawView(core.cfg, {"raw_units": army}, 0, 0, 64).arrays
    agent = make_agent("sc2:attack", core, 0)
    move = agent.act(SimpleNamespace(raw=arrays))
    assert move == {"type": 2, "units": list(range(64)), "target": 71}  # slot 71: the enemy at (30, 30)
    assert core.action_model(0).check(move, arrays) == (move, None)

    core = make_core("sc2/MoveToBeacon-v0", minimap=16)
    arrays = RawView(core.cfg, {"raw_units": raw_units((SELF, 9, 10, 10), (NEUTRAL, 4, 41, 22))}, 0, 0, 64).arrays
    move = make_agent("sc2:attack", core, 0).act(SimpleNamespace(raw=arrays))
    assert move == {"type": 1, "units": [0], "location": [22 // 4, 41 // 4]}  # the cell holding the beacon
    assert make_agent("sc2:idle", core, 0).act(SimpleNamespace(raw=arrays)) == {"type": 0}


# -- matches over the fake game ------------------------------------------------------------------------

def _one_line(e: BaseException) -> str:
    text = str(e)
    assert text and "\n" not in text, text
    return text


def test_mini_game_episode(sc2path, monkeypatch):
    from arena.match import play_match

    monkeypatch.setenv("FAKE_SC2_EPISODE_LOOPS", "400")
    res = play_match("sc2/MoveToBeacon-v0", ["sc2:attack"], seed=4, game_kwargs={"minimap": 64})
    assert res.outcome == "normal" and res.moves == 400 // 8 and res.invalid == [0]
    assert res.returns[0] >= 3 and res.returns[0] == int(res.returns[0])  # the score, a point a beacon
    assert res.winner is None
    engine = res.replay.header["engine"]
    assert engine["sc2_game_version"] == "4.10.0" and engine["sc2_base_build"] == 75689
    assert engine["sc2_data_version"] == fake_sc2.DATA_VERSION
    assert list(res.replay.header["attachments"]) == [".SC2Replay"]
    (launch,) = fake_sc2.launches(sc2path)
    assert not fake_sc2.alive(launch["pid"])  # quit at the episode's end


def test_agent_vs_builtin_bot(sc2path):
    from arena.match import play_match

    res = play_match("sc2/Simple64-v0", ["sc2:attack", "sc2bot:difficulty=easy,race=zerg"], seed=3)
    assert res.outcome == "normal" and res.returns == [1.0, -1.0] and res.winner == 0
    assert res.reason == ""  # who won is the result's winner seat, said once
    assert {s["player"] for s in res.replay.steps} == {0}  # the bot's seat never acts in the loop
    assert res.agents[1] == "sc2bot:difficulty=easy,race=zerg"
    summary = json.loads(res.attachments[".SC2Replay"].split(b"\n", 1)[1])
    assert summary["players"][1][1] == "Computer" and summary["results"] == {"1": "Victory", "2": "Defeat"}

    # the other way round, and an idle agent: the bot wins
    res = play_match("sc2/Simple64-v0", ["sc2bot", "sc2:idle"], seed=5)
    assert res.returns == [1.0, -1.0] and res.winner == 0 and res.reason == ""
    assert {s["player"] for s in res.replay.steps} == {1}
    assert res.agents[0] == "sc2bot"
    assert len(fake_sc2.launches(sc2path)) == 2  # one process a match: the bot plays inside the game


def test_agent_vs_agent_one_winner(sc2path):
    from arena.match import play_match

    res = play_match("sc2/Simple64-v0", ["sc2:idle", "sc2:attack"], seed=1)
    assert res.outcome == "normal" and res.returns == [-1.0, 1.0] and res.winner == 1
    assert res.reason == ""
    assert len(fake_sc2.launches(sc2path)) == 2  # one game per agent
    res = play_match("sc2/Simple64-v0", ["random", "random"], seed=4)
    assert res.outcome == "normal" and res.invalid == [0, 0]
    assert sorted(res.returns) in ([-1.0, 1.0], [0.0, 0.0]) and bool(res.reason) == (res.returns == [0.0, 0.0])
    assert {s["player"] for s in res.replay.steps} == {0, 1}


def test_timeout_is_a_draw(sc2path, monkeypatch):
    from arena.match import play_match

    monkeypatch.setenv("FAKE_SC2_BOT_PASSIVE", "1")
    res = play_match("sc2/Simple64-v0", ["sc2:idle", "sc2bot"], seed=1, game_kwargs={"max_steps": 5})
    assert res.outcome == "normal" and res.moves == 5 and res.returns == [0.0, 0.0] and res.draw
    assert "draw" in res.reason


def test_feature_interface(sc2path, monkeypatch):
    from arena.agents import BaseAgent
    from arena.envs.sc2.game import FEATURE_FUNCTIONS
    from arena.match import play_match

    monkeypatch.setenv("FAKE_SC2_EPISODE_LOOPS", "160")
    kw = {"interface": "features", "screen": 32, "minimap": 16}
    res = play_match("sc2/MoveToBeacon-v0", ["random"], seed=2, game_kwargs=kw)
    assert res.outcome == "normal" and res.moves == 20 and res.invalid == [0]

    class ToBeacon(BaseAgent):
        """select_army, then Move_screen onto the beacon's cells (the neutral plane)."""

        def act(self, observation):
            o = observation.raw
            move = FEATURE_FUNCTIONS.index("Move_screen")
            if not o["type_mask"][move]:
                return {"type": FEATURE_FUNCTIONS.index("select_army")}
            rows, cols = np.nonzero(o["screen"][2])
            return {"type": move, "screen": [int(rows.mean()), int(cols.mean())]}

    res = play_match("sc2/MoveToBeacon-v0", [ToBeacon()], seed=2, game_kwargs=kw)
    assert res.outcome == "normal" and res.invalid == [0] and res.returns[0] >= 1
    texts = [s["action_text"] for s in res.replay.steps]
    assert texts[0] == "select_army" and texts[1].startswith("Move_screen screen=")


def test_pysc2_refusal_blames_only_its_seat(sc2path):
    """A call pysc2 itself refuses (Move_screen with nothing selected) is that seat's refused move; the
    other seat's order goes through in the same step."""
    from arena.envs import make_core
    from arena.envs.sc2.game import FEATURE_FUNCTIONS

    core = make_core("sc2/Simple64-v0", interface="features")
    try:
        core.reset(1)
        select, move = FEATURE_FUNCTIONS.index("select_army"), FEATURE_FUNCTIONS.index("Move_screen")
        assert not core.observation(0)["type_mask"][move]
        refused = core.apply_joint({0: {"type": move, "screen": [3, 3]}, 1: {"type": select}})
        assert list(refused) == [0] and refused[0].startswith("pysc2 refused the order: ")
        assert "not available" in refused[0]
        assert core.observation(1)["type_mask"][move] and not core.observation(0)["type_mask"][move]
    finally:
        core.close()
    from arena.errors import ArenaError

    with pytest.raises(ArenaError, match="no match in progress"):
        core.apply_joint({0: {"type": 0}, 1: {"type": 0}})


def test_restart_same_core_twice(sc2path):
    from arena.envs import make_core
    from arena.match import play_match

    core = make_core("sc2/Simple64-v0")
    try:
        first = play_match(core, ["sc2:attack", "sc2bot"], seed=1)
        second = play_match(core, ["sc2:attack", "sc2bot"], seed=2)
        assert first.returns == second.returns == [1.0, -1.0]
        assert first.replay.header["seed"] == 1 and second.replay.header["seed"] == 2
        launched = [r["pid"] for r in fake_sc2.launches(sc2path)]
        assert len(launched) == 2 and not any(fake_sc2.alive(p) for p in launched)
        core.reset(3)  # a reset mid-match quits the game it had
        core.reset(4)
        launched = [r["pid"] for r in fake_sc2.launches(sc2path)]
        assert len(launched) == 4 and not fake_sc2.alive(launched[2]) and fake_sc2.alive(launched[3])
    finally:
        core.close()


def test_replay_saving_through_a_job(sc2path, tmp_path):
    from arena.match.runner import MatchJob, run_match_job
    from arena.replays.format import read_replay

    job = MatchJob("m-sc2-1", "sc2/Simple64-v0", ("sc2:attack", "sc2bot:race=terran"), seed=7,
                   replay_dir=str(tmp_path / "replays"))
    res = run_match_job(job)
    assert res.returns == [1.0, -1.0] and res.attachments is None  # on disk now
    arena_replay = tmp_path / "replays" / "m-sc2-1.jsonl.gz"
    assert res.replay_path == str(arena_replay)
    sc2_replay = tmp_path / "replays" / "m-sc2-1.SC2Replay"
    data = sc2_replay.read_bytes()
    assert data.startswith(b"FAKE-SC2Replay\n")
    summary = json.loads(data.split(b"\n", 1)[1])
    assert summary["map"].endswith("Simple64.SC2Map") and summary["seed"] == 7
    assert (res.moves - 1) * 8 < summary["loop"] <= res.moves * 8  # the last side fell mid-step
    header = read_replay(arena_replay).header
    assert list(header["attachments"]) == [".SC2Replay"] and header["match_id"] == "m-sc2-1"
    assert header["attachments"][".SC2Replay"] == hashlib.sha256(data).hexdigest()  # each file's sha256
    assert header["engine"]["sc2_base_build"] == 75689


def test_a_replay_is_checked_not_resimulated_and_shows_how_to_watch_it(sc2path, tmp_path):
    import gzip

    from typer.testing import CliRunner

    from arena import cli
    from arena.match.runner import MatchJob, run_match_job
    from arena.match.verify import verify_replay

    folder = tmp_path / "replays"
    run_match_job(MatchJob("m-sc2-2", "sc2/Simple64-v0", ("sc2:attack", "sc2bot:race=zerg"), seed=3,
                           replay_dir=str(folder)))
    path, game_file = folder / "m-sc2-2.jsonl.gz", folder / "m-sc2-2.SC2Replay"
    rep = verify_replay(path)
    assert rep.ok and not rep.resimulated and "cannot re-simulate" in rep.warnings[0]
    assert any("base build 75689" in c for c in rep.checks) and any("orders are well-formed" in c for c in rep.checks)
    assert any("m-sc2-2.SC2Replay is the file the match saved" in c for c in rep.checks)
    r = CliRunner().invoke(cli.app, ["replay", "verify", str(folder)])
    assert r.exit_code == 0 and "CHECKED" in r.output and "1 checked (not re-simulated)" in r.output, r.output
    r = CliRunner().invoke(cli.app, ["replay", "show", str(path), "--all"])
    assert r.exit_code == 0, r.output
    assert f"python -m pysc2_evolved.bin.play --replay {game_file}" in " ".join(r.output.split())
    # moves drawn as the game names them (its action model, read from the replay's settings), not as dicts
    assert "plays: 'Attack_unit units=[" in r.output and "plays: {" not in r.output, r.output
    result = next(line for line in r.output.splitlines() if line.strip().startswith("result"))
    assert "player_1 wins (normal;" in result and result.count("wins") == 1, result
    # another build here: one line names the folder to install; the game's file changed: a failed check
    (sc2path / "Versions" / "Base75689").rename(sc2path / "Versions" / "Base81009")
    rep = verify_replay(path)
    assert rep.ok and any("install Versions/Base75689 under $SC2PATH" in w for w in rep.warnings), rep.warnings
    game_file.write_bytes(b"something else")
    rep = verify_replay(path)
    assert not rep.ok and "not the file the match saved" in rep.differences[0]
    r = CliRunner().invoke(cli.app, ["replay", "verify", str(path)])
    assert r.exit_code == 1 and "MISMATCH" in r.output
    game_file.unlink()
    assert "m-sc2-2.SC2Replay is missing" in verify_replay(path).differences[0]
    # a recorded order that is no move of the game
    lines = [json.loads(x) for x in gzip.decompress(path.read_bytes()).decode().splitlines()]
    order = next(x for x in lines if x.get("type") == "step" and isinstance(x.get("action"), dict))
    order["action"] = {"type": 99}
    path.write_bytes(gzip.compress("\n".join(json.dumps(x) for x in lines).encode() + b"\n"))
    assert any("not a move of this game" in d for d in verify_replay(path).differences)


def test_a_game_port_taken_before_the_game_binds_it_is_started_again_not_a_failed_match(sc2path, monkeypatch):
    """pysc2 picks free ports, then the host game binds its game port: another process can take it in
    between (seen as 'Address already in use' in the join). The start is made again on new ports, and
    the failed start's games do not outlive it (the fixture checks that no game process is left)."""
    import socket

    from pysc2_evolved.lib import portspicker

    from arena.envs import make_core
    from arena.match import play_match

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    real, picked = portspicker.pick_unused_ports, []

    def pick(num_ports, *args, **kwargs):  # the first start's game port is one this test holds
        ports = real(num_ports, *args, **kwargs)
        picked.append(ports)
        return [taken.getsockname()[1], *ports[1:]] if len(picked) == 1 else ports

    monkeypatch.setattr(portspicker, "pick_unused_ports", pick)
    try:
        res = play_match(make_core("sc2/Simple64-v0", max_steps=10), ["sc2:attack", "sc2:idle"], seed=1)
    finally:
        taken.close()
    assert res.outcome == "normal" and len(picked) == 2
    assert len(fake_sc2.launches(sc2path)) == 4  # two games a start


def test_game_dying_mid_match(sc2path, monkeypatch):
    from arena.envs import make_core
    from arena.envs.sc2.game import SC2GameCrashed
    from arena.match import play_match

    monkeypatch.setenv("FAKE_SC2_DIE_AT_LOOP", "24")
    core = make_core("sc2/MoveToBeacon-v0")
    with pytest.raises(SC2GameCrashed) as info:
        play_match(core, ["sc2:attack"], seed=1)
    text = _one_line(info.value)
    assert "StarCraft II stopped mid-match (step 2)" in text and "fault" in text
    assert core._env is None  # already quit: the fixture checks the process is gone


def test_rejected_order_is_a_refused_move(sc2path, monkeypatch):
    from arena.match import InvalidMovePolicy, play_match

    monkeypatch.setenv("FAKE_SC2_REJECT_ABILITY", "3794")  # Move (sc2:attack moves to the beacon)
    monkeypatch.setenv("FAKE_SC2_EPISODE_LOOPS", "160")
    res = play_match("sc2/MoveToBeacon-v0", ["sc2:attack"], seed=1)
    assert res.outcome == "forfeit" and res.invalid == [2] and res.forfeiter == 0
    assert res.reason == "player forfeits: the game rejected the order: Error"
    # the replay: the move as played ("ok"), then the game's refusal of it at the same tick ("invalid")
    steps = [(s["t"], s["event"], s["reason"]) for s in res.replay.steps]
    assert steps == [(0, "ok", None), (0, "invalid", "the game rejected the order: Error"),
                     (1, "ok", None), (1, "invalid", "the game rejected the order: Error")]
    res = play_match("sc2/MoveToBeacon-v0", ["sc2:attack"], seed=1, policy=InvalidMovePolicy(allowance=100),
                     record="actions")
    assert res.outcome == "normal" and res.invalid == [20] and res.returns == [0.0]
    refused = [s for s in res.replay.steps if s.get("refused")]
    assert len(refused) == 20 and all(s["event"] == "invalid" for s in refused)


def test_missing_game_and_map_are_one_line_errors(pysc2, tmp_path, monkeypatch):
    from arena.envs.sc2.game import SC2MapMissing, SC2NotFound
    from arena.match import play_match

    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("SC2PATH", str(empty))
    with pytest.raises(SC2NotFound) as info:
        play_match("sc2/Simple64-v0", ["sc2:attack", "sc2bot"], seed=1)
    assert str(empty) in _one_line(info.value) and "set SC2PATH" in str(info.value)

    root = fake_sc2.make_sc2path(tmp_path / "StarCraftII")
    (root / "Maps" / "Melee" / "Simple64.SC2Map").unlink()
    monkeypatch.setenv("SC2PATH", str(root))
    with pytest.raises(SC2MapMissing) as info:
        play_match("sc2/Simple64-v0", ["sc2:attack", "sc2bot"], seed=1)
    assert "Melee/Simple64.SC2Map" in _one_line(info.value) and "$SC2PATH/Maps" in str(info.value)
    assert fake_sc2.launches(root) == []  # nothing was started


def test_seating_errors(sc2path):
    from arena.errors import ArenaError, IncompatibleAgent
    from arena.match import play_match

    with pytest.raises(ArenaError, match="both seats are the built-in AI") as info:
        play_match("sc2/Simple64-v0", ["sc2bot", "sc2bot:difficulty=hard"], seed=1)
    _one_line(info.value)
    with pytest.raises(ArenaError, match="one-player mini-game") as info:
        play_match("sc2/MoveToBeacon-v0", ["sc2bot"], seed=1)
    _one_line(info.value)
    with pytest.raises(IncompatibleAgent, match="raw interface") as info:
        play_match("sc2/MoveToBeacon-v0", ["sc2:attack"], seed=1, game_kwargs={"interface": "features"})
    _one_line(info.value)
    with pytest.raises(IncompatibleAgent, match="StarCraft II games") as info:
        play_match("openspiel/tic_tac_toe-v0", ["sc2bot", "random"], seed=1)
    assert fake_sc2.launches(sc2path) == []


def test_cli_play(sc2path, tmp_path):
    import os
    import subprocess
    from pathlib import Path

    from typer.testing import CliRunner

    from arena import cli

    r = CliRunner().invoke(cli.app, ["play", "sc2/Simple64-v0", "-p", "sc2:attack", "-p", "sc2bot:difficulty=hard"],
                           terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "sc2:attack (seat 0) wins; returns 1, -1" in r.output and "player_1" not in r.output  # one name
    assert "sc2bot:difficulty=hard" in r.output

    # the console script in a fresh process (nothing imported yet): one line, no traceback
    empty = tmp_path / "empty"
    empty.mkdir()
    arena = str(Path(sys.executable).with_name("arena"))
    p = subprocess.run([arena, "play", "sc2/Simple64-v0", "-p", "sc2:attack", "-p", "sc2bot"], cwd=empty,
                       env={**os.environ, "SC2PATH": str(empty)}, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    err = p.stderr.strip()
    assert err.startswith(f"error: no StarCraft II game at {empty}") and "set SC2PATH" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err


def test_parallel_api(sc2path, monkeypatch):
    from pettingzoo.test import parallel_api_test

    from arena.envs import make

    monkeypatch.setenv("FAKE_SC2_BOT_PASSIVE", "1")
    env = make("sc2/Simple64-v0", max_steps=30)
    try:
        parallel_api_test(env, num_cycles=30)
    finally:
        env.close()


GARBAGE = [999, None, "x" * (1 << 20), {"a": 1}]


def test_illegal_move_fuzz_never_crashes(sc2path):
    """As tests/match/test_match.py does for the other games, on one StarCraft II id and fewer values."""
    from plugins.agents import Scripted

    from arena.envs import make_core
    from arena.match import play_match

    core = make_core("sc2/Simple64-v0")
    try:
        for k, junk in enumerate(GARBAGE):
            junk_agent = Scripted([junk, junk])
            res = play_match(core, [junk_agent, "random"], seed=k, match_id="fuzz")
            assert res.outcome == "forfeit", (junk, res.reason)
            assert res.forfeiter == 0 and res.returns == [-1.0, 1.0] and res.invalid[0] == 2
            events = [s["event"] for s in res.replay.steps if s["player"] == 0]
            assert events[:2] == ["invalid", "invalid"]
            assert junk_agent.feedback[1]
    finally:
        core.close()
