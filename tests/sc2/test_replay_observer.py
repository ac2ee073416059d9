"""Imitation from StarCraft II's own replays (``.SC2Replay``) through pysc2's replay observer, on the
stand-in game of `arena/envs/sc2/stand_in.py`: its replays hold the seed, the settings and every player's actions,
and it plays them again (``RequestReplayInfo``, ``RequestStartReplay``, then steps and observations
from the observed player's perspective).

The check that matters: a match played with its seats observed keeps what each player saw and did
(``MatchResult.observed``); the same match's ``.SC2Replay``, read through the observer, gives the
same views and the same moves, so the demonstrations are the same whichever way they were read.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

try:
    from arena.envs.sc2 import stand_in as fake_sc2
except ImportError:  # it needs s2clientprotocol, which comes with the sc2 extra; the tests skip
    fake_sc2 = None

pytestmark = pytest.mark.timeout(120)

GAME = "sc2/Simple64-v0"
SMALL = {"max_steps": 30, "max_units": 16}


def _played(game: str, agents: list[str], seed: int, kwargs: dict):
    from arena.match import play_match

    seats = [s for s, a in enumerate(agents) if not a.startswith("sc2bot")]
    res = play_match(game, agents, seed=seed, game_kwargs=kwargs, observe=seats)
    assert res.outcome == "normal" and res.observed
    return res


def _same_moves(kept: list[tuple], read: list[tuple]) -> None:
    """The moves a match kept and those read from its replay: seat by seat, in order, equal views and moves."""
    for seat in sorted({m[0] for m in kept}):
        a = [m for m in kept if m[0] == seat]
        b = [m for m in read if m[0] == seat]
        assert len(a) == len(b), (seat, len(a), len(b))
        for t, (x, y) in enumerate(zip(a, b)):
            assert x[2] == y[2], (seat, t, x[2], y[2])
            assert x[1].keys() == y[1].keys()
            for k in x[1]:
                assert np.array_equal(x[1][k], y[1][k]), (seat, t, k)
    assert {m[0] for m in read} == {m[0] for m in kept}


def test_the_stand_in_answers_replay_info_and_start_replay_through_pysc2(sc2path, tmp_path):
    """pysc2's own client reads the stand-in's replay: its header, then the game again from player 1's
    perspective, with player 1's raw unit commands in the observations."""
    from pysc2_evolved import run_configs
    from s2clientprotocol import sc2api_pb2 as sc_pb

    res = _played(GAME, ["sc2:attack", "sc2bot:difficulty=easy"], 3, SMALL)
    data = res.attachments[".SC2Replay"]
    record = fake_sc2.read_replay(data)
    assert record["actions"] and {pid for _, pid, _ in record["actions"]} == {1}
    with run_configs.get().start(want_rgb=False) as c:
        info = c.replay_info(data)
        assert info.map_name == "Simple64" and info.local_map_path == "Melee/Simple64.SC2Map"
        assert info.base_build == fake_sc2.BASE_BUILD and info.game_version == fake_sc2.GAME_VERSION
        assert info.game_duration_loops == record["loop"] > 0
        assert [(p.player_info.player_id, p.player_info.type) for p in info.player_info] == [
            (1, sc_pb.Participant), (2, sc_pb.Computer)]
        assert [p.player_result.result for p in info.player_info] == [sc_pb.Victory, sc_pb.Defeat]
        options = sc_pb.InterfaceOptions(raw=True, score=True)
        c.start_replay(sc_pb.RequestStartReplay(replay_data=data, options=options, observed_player_id=1))
        assert c.status.name == "in_replay"
        first = c.observe()
        assert first.observation.game_loop == 0 and not first.actions
        c.step(8)
        obs = c.observe()
        assert obs.observation.game_loop == 8
        (action,) = obs.actions  # what player 1 sent at loop 0: sc2:attack's raw attack order
        cmd = action.action_raw.unit_command
        assert action.game_loop == 0 and cmd.ability_id == 3674 and len(cmd.unit_tags) == 3
        assert cmd.HasField("target_unit_tag")
        while not obs.player_result:
            c.step(8)
            obs = c.observe()
        assert obs.observation.game_loop == record["loop"] and c.status.name == "ended"
        assert {(r.player_id, r.result) for r in obs.player_result} == {(1, sc_pb.Victory), (2, sc_pb.Defeat)}
        # another file, and a player who did not play, are the game's errors
        from pysc2_evolved.lib.remote_controller import RequestError

        with pytest.raises(RequestError, match="InvalidReplayData"):
            c.replay_info(b"MPQ\x1b not the stand-in's")
        with pytest.raises(RequestError, match="InvalidObservedPlayerId"):
            c.start_replay(sc_pb.RequestStartReplay(replay_data=data, options=options, observed_player_id=2))


@pytest.mark.parametrize("game,agents,kwargs", [
    (GAME, ["sc2:attack", "sc2:idle"], SMALL),                                       # agent against agent
    (GAME, ["random", "sc2bot:difficulty=easy"], {**SMALL, "queued": True}),         # against the game's AI
    ("sc2/MoveToBeacon-v0", ["sc2:attack"], {"max_steps": 40, "minimap": 64}),        # Move_pt: a location
])
def test_a_replay_read_through_the_observer_gives_what_the_players_saw(sc2path, game, agents, kwargs):
    from arena.envs.registry import make_core
    from arena.envs.sc2.replay_observer import replay_moves

    res = _played(game, agents, 5, kwargs)
    folder = sc2path / "Replays"
    (folder / "m.SC2Replay").write_bytes(res.attachments[".SC2Replay"])
    core = make_core(game, **kwargs)
    ((index, returns, moves),) = list(replay_moves(core, [folder / "m.SC2Replay"]))
    assert index == 0 and returns == res.returns
    _same_moves(res.observed, moves)
    if game == GAME and agents[0] == "sc2:attack":  # both perspectives, and each alone
        ((_, _, first),) = list(replay_moves(core, [folder / "m.SC2Replay"], players=[1]))
        assert {m[0] for m in first} == {0} and len(first) == sum(m[0] == 0 for m in res.observed)


def test_imitation_from_a_folder_of_sc2replays_equals_the_recorded_views_and_trains(sc2path, tmp_path):
    pytest.importorskip("torch")
    import yaml

    from arena.envs.registry import make_core
    from arena.inference.policy_nets import spec_from_core
    from arena.trainers.policy.imitation import from_observed, sc2_replay_demonstrations
    from arena.trainers.registry import make_trainer

    folder = tmp_path / "sc2replays"
    folder.mkdir()
    played = []
    for i, agents in enumerate([["sc2:attack", "sc2:idle"], ["sc2:idle", "sc2:attack"], ["sc2:attack", "random"]]):
        res = _played(GAME, agents, 20 + i, SMALL)
        (folder / f"m{i}.SC2Replay").write_bytes(res.attachments[".SC2Replay"])
        played.append(res)
    spec = spec_from_core(make_core(GAME, **SMALL))
    recorded = from_observed(((i, r.returns, sorted(r.observed, key=lambda m: m[0])) for i, r in enumerate(played)),
                             spec)
    read, n = sc2_replay_demonstrations(GAME, SMALL, folder, None, spec)
    assert n == 3 and len(read.match) == len(recorded.match) > 0
    for name in ("obs", "actions"):
        a, b = getattr(recorded, name), getattr(read, name)
        assert a.keys() == b.keys()
        for k in a:
            assert np.array_equal(a[k], b[k]), (name, k)
    assert np.array_equal(read.outcome, recorded.outcome) and np.array_equal(read.match, recorded.match)
    # player 2 alone (named as a seat or by id)
    p2, _ = sc2_replay_demonstrations(GAME, SMALL, folder, ["player_2"], spec)
    assert len(p2.match) == sum(m[0] == 1 for r in played for m in r.observed)
    assert len(sc2_replay_demonstrations(GAME, SMALL, folder, ["2"], spec)[0].match) == len(p2.match)

    # the SCC trainer's imitation stage reads the folder (no teacher match played) and trains
    data = yaml.safe_load((Path(__file__).parents[2] / "configs" / "train" / "scc_sc2.yaml").read_text())
    cfg = {**data, "threads": 1, "iterations": 0, "learners": [{"name": "main", "role": "main"}],
           "il": {"teachers": data["il"]["teachers"], "matches": 0, "sc2_replays": str(folder), "epochs": 2,
                  "patience": 2, "batch_size": 16, "val_fraction": 0.34},
           "sizes": {"hidden": [16], "d_model": 16, "layers": 1, "heads": 2, "channels": 4},
           "game_kwargs": SMALL}
    path = tmp_path / "scc.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run = tmp_path / "run"
    trainer = make_trainer(path, run)
    try:
        report = trainer.imitation()
    finally:
        trainer.close()
    assert report["replays"] == 3 and report["train_moves"] + report["val_moves"] == len(read.match)
    assert (run / "checkpoints" / "il").is_dir()
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    losses = [x["il/train_loss"] for x in lines if "il/train_loss" in x]
    assert len(losses) == 2 and losses[1] < losses[0]  # sc2:attack and idle's orders are easy to fit


def test_a_bad_replay_folder_is_one_line(sc2path, tmp_path, monkeypatch):
    from arena.envs.sc2 import _pysc2
    from arena.errors import ArenaError, MissingExtra
    from arena.inference.policy_nets import spec_from_core
    from arena.envs.registry import make_core
    from arena.trainers.policy.imitation import sc2_replay_demonstrations

    spec = spec_from_core(make_core(GAME, **SMALL))

    def error(folder, game=GAME, kwargs=SMALL, kind=ArenaError) -> str:
        with pytest.raises(kind) as e:
            sc2_replay_demonstrations(game, kwargs, folder, None, spec)
        text = str(e.value)
        assert text and "\n" not in text, text
        return text

    assert "is not a folder" in error(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    assert "no .SC2Replay files in" in error(tmp_path / "empty")
    assert "not a StarCraft II game" in error(tmp_path / "empty", "openspiel/tic_tac_toe-v0", {})
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.SC2Replay").write_bytes(b"MPQ\x1b not a replay the stand-in wrote")
    assert "is not a replay the game here can read" in error(bad)
    other = tmp_path / "other"
    other.mkdir()
    res = _played("sc2/MoveToBeacon-v0", ["sc2:idle"], 1, {"max_steps": 5})
    (other / "beacon.SC2Replay").write_bytes(res.attachments[".SC2Replay"])
    assert "is a game on mini_games/MoveToBeacon.SC2Map, not sc2/Simple64-v0's map" in error(other)
    monkeypatch.setitem(__import__("sys").modules, "pysc2_evolved", None)
    monkeypatch.setattr(_pysc2, "_LOADED", {})
    assert 'pip install "arena[sc2]"' in error(other, kind=MissingExtra)


def test_a_config_naming_a_bad_replay_folder_is_one_line_before_anything_runs(sc2path, tmp_path):
    pytest.importorskip("torch")
    import yaml

    from arena.errors import ConfigError
    from arena.trainers.registry import make_trainer

    data = yaml.safe_load((Path(__file__).parents[2] / "configs" / "train" / "scc_sc2.yaml").read_text())
    for il, says in ((
            {"matches": 0, "sc2_replays": str(tmp_path / "nowhere")}, "il.sc2_replays: "),
            ({"matches": 4, "sc2_replays": str(tmp_path), "players": ["1"]}, "il.players names the replays' players")):
        path = tmp_path / "scc.yaml"
        path.write_text(yaml.safe_dump({**data, "il": {"teachers": data["il"]["teachers"], **il}}))
        with pytest.raises(ConfigError) as e:
            make_trainer(path, tmp_path / "run")
        assert says in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert not (tmp_path / "run" / "checkpoints").exists()
