"""Record modes: an actions-only replay holds what re-simulation needs and re-simulates to the same
result and the same per-step views as a text replay; the modes reach play_match through MatchJob,
`play_matches`, `arena play --record` and the league config."""

import gzip
import json
import pickle

import pytest
import yaml
from typer.testing import CliRunner

from arena.agents import BaseAgent, Forfeit
from arena.envs.core import SIMULTANEOUS, TERMINAL, GameCore
from arena.errors import ConfigError
from arena.match import play_match
from arena.match.runner import MatchJob, run_match_job
from arena.match.verify import ReplayAgent, final_view, replay_views, verify_replay
from arena.replays import read_replay, replay_path, write_replay
from plugins.agents import Scripted

GAMES = ["openspiel/tic_tac_toe-v0", "openspiel/kuhn_poker-v0", "openspiel/connect_four-v0", "arena/TicTacToe-v0",
         "arena/KuhnPoker-v1", "arena/SimpleNegotiation-v1", "arena/SimpleNegotiation-v2"]


def _pair(game, seed, **kw):
    text = play_match(game, ["random", "random"], seed=seed, match_id="m", record="text", **kw)
    actions = play_match(game, ["random", "random"], seed=seed, match_id="m", record="actions", **kw)
    return text, actions


def _gz(replay) -> int:
    return len(gzip.compress(replay.to_text().encode(), compresslevel=6, mtime=0))


@pytest.mark.parametrize("game", GAMES)
def test_actions_replay_is_smaller_and_resimulates_to_the_same_result_and_views(game):
    text, actions = _pair(game, 3)
    assert actions.replay.header["record"] == "actions" and text.replay.header["record"] == "text"
    assert actions.returns == text.returns and actions.moves == text.moves and actions.outcome == text.outcome
    assert [(s["t"], s["player"], s["action"], s["event"]) for s in actions.replay.steps] == \
           [(s["t"], s["player"], s["action"], s["event"]) for s in text.replay.steps]
    assert all("obs" not in s and "action_text" not in s for s in actions.replay.steps)
    assert len(actions.replay.to_text()) < len(text.replay.to_text())
    assert _gz(actions.replay) < _gz(text.replay)
    assert verify_replay(actions.replay).ok and verify_replay(text.replay).ok
    views = replay_views(actions.replay)
    assert not views.note
    assert views.steps == [s["obs"] for s in text.replay.steps]
    assert views.action_texts == [s["action_text"] for s in text.replay.steps]
    assert views.final == final_view(text.replay) and any(views.final.texts)


def test_actions_step_lines_hold_only_what_resimulation_needs():
    res = play_match("openspiel/tic_tac_toe-v0", [Scripted([999, 4]), "random"], seed=0, match_id="m",
                     record="actions")
    bad, good = res.replay.steps[:2]
    assert set(bad) == {"type", "t", "player", "action", "event", "reason", "time"}
    assert bad["action"] == 999 and bad["event"] == "invalid" and "not legal" in bad["reason"]
    assert set(good) == {"type", "t", "player", "action", "event", "time"}  # no reason: there is none
    assert good["action"] == 4 and good["event"] == "ok"
    assert all(s["time"] == round(s["time"], 7) for s in res.replay.steps)
    line = json.loads(res.replay.to_text().splitlines()[2])
    assert line == good


@pytest.mark.parametrize("game", ["openspiel/tic_tac_toe-v0", "arena/TicTacToe-v0"])
def test_faults_and_garbage_in_an_actions_replay_resimulate(game):
    moves = [None, "x" * 100_000] if game.startswith("openspiel") else [RuntimeError("boom"), "[4]"]
    res = play_match(game, [Scripted(moves), "random"], seed=1, match_id="g", record="actions")
    assert verify_replay(res.replay).ok
    forfeit = play_match(game, ["random", Scripted([Forfeit("bye")])], seed=1, match_id="f", record="actions")
    assert forfeit.outcome == "forfeit" and verify_replay(forfeit.replay).ok
    assert forfeit.replay.steps[-1]["event"] == "forfeit" and forfeit.replay.steps[-1]["reason"] == "bye"


def test_timeouts_resimulate_from_an_actions_replay():
    class Sleeper(BaseAgent):
        def act(self, obs):
            import time

            time.sleep(5)

    res = play_match("openspiel/tic_tac_toe-v0", [Sleeper(), "random"], seed=0, move_time_limit=0.05, match_id="s",
                     record="actions")
    assert [s["event"] for s in res.replay.steps] == ["timeout", "timeout"] and res.forfeiter == 0
    assert verify_replay(res.replay).ok


def test_simultaneous_and_single_agent_games_in_both_modes(sample_plugin):
    for game, n in (("plugin/RockPaperScissors-v2", 2), ("plugin/Pendulum-v1", 1)):
        text = play_match(game, ["random"] * n, seed=3, match_id="m", record="text")
        actions = play_match(game, ["random"] * n, seed=3, match_id="m", record="actions")
        assert actions.returns == text.returns and actions.moves == text.moves
        assert verify_replay(actions.replay).ok
        assert replay_views(actions.replay).steps == [s["obs"] for s in text.replay.steps]


class Refusing(GameCore):
    """Three simultaneous rounds; the engine refuses player 1's action 2 (after validation)."""

    game_id = "test/Refusing-v0"
    players = ["a", "b"]
    settings: dict = {}
    engine: dict = {}

    def reset(self, seed=None):
        self.round, self.total = 0, [0.0, 0.0]

    def current_player(self):
        return SIMULTANEOUS if self.round < 3 else TERMINAL

    def acting_players(self):
        return [0, 1] if self.round < 3 else []

    def legal_actions(self, p):
        return [0, 1, 2]

    def apply_joint(self, actions):
        self.round += 1
        self.total[0] += actions[0]
        return {1: "the engine says no"} if actions.get(1) == 2 else {}

    def returns(self):
        return list(self.total)

    def text(self, p):
        return f"round {self.round}"


def test_engine_refusals_of_simultaneous_moves_are_marked_and_not_played_back():
    results = {}
    for mode in ("text", "actions"):
        res = play_match(Refusing(), [Scripted([0, 1, 2]), Scripted([2, 0, 1])], seed=0, match_id="r",
                         record=mode, policy=None)
        results[mode] = res
        refused = [s for s in res.replay.steps if s["reason"] == "the engine says no"] if mode == "text" else \
            [s for s in res.replay.steps if s.get("refused")]
        assert len(refused) == 1 and refused[0]["event"] == "invalid" and refused[0]["time"] == 0.0
        if mode == "text":
            assert refused[0]["obs"] is None and "refused" not in refused[0]
        # played back: the refusal is a consequence, not an attempt
        again = play_match(Refusing(), [ReplayAgent(res.replay.steps, s) for s in range(2)], seed=0, match_id="r",
                           record=mode)
        assert again.replay.without_timing().steps == res.replay.without_timing().steps
    assert results["text"].returns == results["actions"].returns and results["actions"].invalid == [0, 1]


def test_record_false_and_bad_values():
    assert play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=1, record=False).replay is None
    with pytest.raises(ValueError, match="record must be"):
        play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=1, record="obs")
    with pytest.raises(ValueError, match="record must be"):
        MatchJob(match_id="m", game="openspiel/tic_tac_toe-v0", specs=("random", "random"), seed=1, record="all")


def test_steps_are_built_on_first_read_and_pickle_either_way():
    res = play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=2, match_id="m", record="text")
    lazy = pickle.loads(pickle.dumps(res.replay))
    assert lazy._steps is None and len(lazy) == res.moves  # still rows, nothing built yet
    built = res.replay.steps
    assert res.replay._rows is None and lazy.steps == built and lazy == res.replay
    assert pickle.loads(pickle.dumps(res.replay)).to_text() == res.replay.to_text()


@pytest.mark.parametrize("compress", [True, False])
def test_actions_replay_file_round_trip(tmp_path, compress):
    res = play_match("arena/KuhnPoker-v1", ["random", "random"], seed=4, match_id="r", record="actions")
    back = read_replay(write_replay(res.replay, replay_path(tmp_path, "r", compress)))
    assert back.to_text() == res.replay.to_text() and back.record == "actions"
    assert verify_replay(back).ok
    tampered = read_replay(replay_path(tmp_path, "r", compress))
    tampered.steps[0]["action"] = "[fold]" if tampered.steps[0]["action"] != "[fold]" else "[check]"
    assert not verify_replay(tampered).ok


def test_match_job_record_modes(tmp_path):
    base = dict(game="openspiel/tic_tac_toe-v0", specs=("random", "random"), seed=5)
    written = run_match_job(MatchJob(match_id="w", replay_dir=str(tmp_path), record="actions", **base))
    assert written.replay is None and read_replay(written.replay_path).record == "actions"
    # play_matches passes its `record` as keep_replay: a mode string sets the mode; kept unless written
    job = MatchJob(match_id="k", replay_dir=str(tmp_path), keep_replay="text", **base)
    assert job.record == "text" and job.keep_replay is False
    job = MatchJob(match_id="k", keep_replay="actions", **base)
    assert job.record == "actions" and job.keep_replay is True
    assert run_match_job(job).replay.record == "actions"
    old = MatchJob(match_id="o", keep_replay=True, **base)  # as before: text
    assert old.record == "text" and run_match_job(old).replay.steps[0]["obs"] is not None


def test_play_matches_record_modes(tmp_path):
    from arena.match.batch import play_matches

    res = play_matches("openspiel/tic_tac_toe-v0", ["random", "first"], 3, seed=1, replay_dir=tmp_path / "a",
                       record="actions")
    assert all(r.replay is None and read_replay(r.replay_path).record == "actions" for r in res)
    kept = play_matches("openspiel/tic_tac_toe-v0", ["random", "first"], 2, seed=1, record=True)
    assert all(r.replay.record == "text" and r.replay.steps[0]["obs"] for r in kept)  # imitation reads these


runner = CliRunner()


def test_arena_play_records_actions_by_default_and_text_on_request(tmp_path):
    from arena.cli import app

    for flag, mode in (([], "actions"), (["--record", "text"], "text")):
        out = tmp_path / mode
        r = runner.invoke(app, ["play", "openspiel/tic_tac_toe-v0", "-p", "random", "-p", "random", "-n", "2",
                                "--replays", str(out), *flag], terminal_width=200)
        assert r.exit_code == 0, r.output
        files = sorted(out.glob("*.jsonl.gz"))
        assert len(files) == 2 and all(read_replay(f).record == mode for f in files)
        r = runner.invoke(app, ["replay", "verify", str(out)], terminal_width=200)
        assert r.exit_code == 0 and "2 verified" in r.output, r.output
    r = runner.invoke(app, ["play", "openspiel/tic_tac_toe-v0", "-p", "random", "-p", "random", "--record", "obs"])
    assert r.exit_code == 2 and "--record" in r.output


def test_replay_show_of_an_actions_replay_shows_each_players_view(tmp_path):
    from arena.cli import app

    text, actions = _pair("openspiel/tic_tac_toe-v0", 7)
    path = write_replay(actions.replay, replay_path(tmp_path, "a"))
    r = runner.invoke(app, ["replay", "show", str(path), "--all"], terminal_width=200)
    assert r.exit_code == 0, r.output
    panels = r.output.split("╭")[1:]
    assert len(panels) == len(text.replay.steps) + 1  # every step, then the final position
    for panel, s in zip(panels, text.replay.steps):
        for row in s["obs"].splitlines():
            assert row in panel
        assert f"plays: {s['action_text']!r}" in panel  # the move as the game writes it, re-simulated
    assert "records actions only" not in r.output
    r = runner.invoke(app, ["replay", "show", str(path), "--step", "3"], terminal_width=200)
    assert r.exit_code == 0 and all(row in r.output for row in text.replay.steps[2]["obs"].splitlines())


def test_replay_show_of_an_actions_replay_of_a_game_not_loaded_says_why(sample_plugin):
    from rich.console import Console

    from arena.ui.replay_viewer import show

    res = play_match("plugin/TicTacToePZ-v3", ["random", "random"], seed=2, match_id="p", record="actions")
    res.replay.header.update(game_id="elsewhere/TicTacToe-v3", plugin="elsewhere_games_xyz")
    console = Console(record=True, width=200)
    show(res.replay, console, interactive=False)
    out = console.export_text()
    assert "records actions only" in out and "--plugin elsewhere_games_xyz" in out
    assert "plays:" in out


# -- the league ------------------------------------------------------------------------------
LEAGUE = {
    "name": "t", "seed": 1, "games": [{"id": "openspiel/tic_tac_toe-v0"}],
    "players": [{"name": "random", "agent": "random"}, {"name": "first", "agent": "first"}],
    "matches": 4, "workers": 1, "in_flight": 2, "move_time_limit": None,
}


def _cfg(tmp_path, **changes):
    from arena.league.config import load_league_config

    data = json.loads(json.dumps(LEAGUE))
    data.update(changes)
    path = tmp_path / "league.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_league_config(path)


def test_league_config_record_field(tmp_path):
    assert _cfg(tmp_path).record == "actions"
    assert _cfg(tmp_path, record="text").record == "text"
    learner = [{"name": "me", "learner": "tabular"}]
    assert _cfg(tmp_path, learners=learner).record == "text"  # tabular learners read the observation text
    with pytest.raises(ConfigError, match="record: 'obs' is not one of 'actions', 'text'"):
        _cfg(tmp_path, record="obs")
    with pytest.raises(ConfigError, match="tabular learner 'me' learns from the observation text"):
        _cfg(tmp_path, record="actions", learners=learner)


@pytest.mark.parametrize("learners", [False, True])
def test_league_replays_follow_the_record_field(tmp_path, learners):
    from arena.league.manager import League
    from arena.replays import list_replays

    changes = {"learners": [{"name": "me", "learner": "tabular"}], "update_every": 2} if learners else {}
    cfg = _cfg(tmp_path, **changes)
    league = League(cfg, tmp_path / "L", backend="inline")
    league.run(matches=4)
    paths = list_replays(tmp_path / "L" / "replays")
    assert len(paths) == 4
    mode = "text" if learners else "actions"
    assert all(read_replay(p).record == mode for p in paths)
    assert all(verify_replay(p).ok for p in paths)
    if learners:
        assert league.learners["me"].q  # it learned from the observation text


def test_text_replay_gives_an_actions_replay_its_views():
    from arena.match.verify import text_replay

    text, actions = _pair("arena/KuhnPoker-v1", 2)
    full = text_replay(actions.replay)
    assert full.record == "text" and full.result == actions.replay.result
    assert full.without_timing().steps == text.replay.without_timing().steps
    assert [s["time"] for s in full.steps] == [s["time"] for s in actions.replay.steps]
    assert text_replay(text.replay) is text.replay
