"""`arena replay list / show / verify`: whole ids, every file checked, the viewer's keys, plug-in games."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import arena.cli
from arena.cli import app
from arena.match import play_match
from arena.match.verify import final_view
from arena.replays import read_replay, replay_path, write_replay

runner = CliRunner()
ARENA = str(Path(sys.executable).with_name("arena"))


def _arena(*args, cwd=None):
    env = dict(os.environ, COLUMNS="80")
    return subprocess.run([ARENA, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300, check=False)


def _ttt(folder, match_id, seed=7):
    res = play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=seed, match_id=match_id)
    return write_replay(res.replay, replay_path(folder, match_id))


def test_show_help_lists_every_key():
    r = runner.invoke(app, ["replay", "show", "--help"], terminal_width=200)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    for key in ("Enter or n: next step", "p: previous step", "g N: go to step N", "f: first step",
                "l: last, the final position after the last move", "q: quit"):
        assert key in text, key


def test_show_prints_the_keys_whole_and_says_why_a_key_does_nothing(tmp_path):
    path = _ttt(tmp_path, "t")
    n = len(read_replay(path).steps)
    r = runner.invoke(app, ["replay", "show", str(path)], input="x\ng 99\ng\ng 0\nn\nq\n", terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "[n]ext (Enter), [p]revious, [g]o N, [f]irst, [l]ast (final position), [q]uit" in r.output
    assert "unknown key 'x': use n, p, g N, f, l, q" in r.output
    assert f"no step 99: the replay has {n} steps" in r.output
    assert "no step 0:" in r.output and "give a step number: g 5" in r.output
    assert r.output.count(f"step 1/{n}") == 1  # a refused key does not redraw the step
    assert f"step 2/{n}" in r.output


def test_last_key_and_all_show_the_final_position(tmp_path):
    path = _ttt(tmp_path, "t")
    replay = read_replay(path)
    final = final_view(replay).texts[0]
    assert final != replay.steps[-1]["obs"]
    r = runner.invoke(app, ["replay", "show", str(path)], input="l\nn\nq\n", terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "final position" in r.output and "this is the final position" in r.output
    for row in final.splitlines():
        assert row in r.output
    r = runner.invoke(app, ["replay", "show", str(path), "--all"], terminal_width=200)
    assert r.exit_code == 0, r.output
    last_panel = r.output.rsplit("╭", 1)[1]
    assert "final position" in last_panel and "result: " in last_panel and final.splitlines()[0] in last_panel


def test_step_out_of_range_is_a_one_line_error(tmp_path):
    path = _ttt(tmp_path, "t")
    n = len(read_replay(path).steps)
    p = _arena("replay", "show", str(path), "--step", "99")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == f"error: no step 99: the replay has {n} steps (1-{n})"


def _bad_folder(folder, sample_plugin):
    good = [_ttt(folder, f"good-{i}", seed=i) for i in range(2)]
    (folder / "cut.jsonl.gz").write_bytes(good[0].read_bytes()[:50])
    (folder / "notjson.jsonl").write_text("hello\n")
    tampered = read_replay(good[1])
    tampered.steps[0]["action"] = (tampered.steps[0]["action"] + 1) % 9
    tampered.header["match_id"] = "tampered"
    write_replay(tampered, replay_path(folder, "tampered"))
    plug = play_match("plugin/TicTacToePZ-v3", ["random", "random"], seed=1, match_id="plug").replay
    plug.header.update(game_id="nowhere/TicTacToe-v3", plugin="nowhere_games_xyz")
    write_replay(plug, replay_path(folder, "plug"))
    return good


def test_verify_folder_checks_every_file_and_counts(tmp_path, sample_plugin):
    _bad_folder(tmp_path, sample_plugin)
    r = runner.invoke(app, ["replay", "verify", str(tmp_path)], terminal_width=200)
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    assert not any(line.startswith("OK ") for line in lines)  # a line only for each file that fails
    assert len(lines) == 4 + 1  # the four that fail, and the count
    each = runner.invoke(app, ["replay", "verify", str(tmp_path), "--each"], terminal_width=200).output.splitlines()
    assert sum(line.startswith("OK ") and "good-" in line for line in each) == 2 and each[-1] == lines[-1]
    assert any(line.startswith("UNREADABLE ") and "cut.jsonl.gz" in line and "gzip" in line for line in lines)
    assert any(line.startswith("UNREADABLE ") and "notjson.jsonl" in line and "not JSON" in line for line in lines)
    assert any(line.startswith("MISMATCH ") and "tampered" in line and "(and " in line for line in lines)
    assert any(line.startswith("NOT CHECKED ") and "plug.jsonl.gz" in line and line.endswith("--plugin nowhere_games_xyz")
               for line in lines)
    assert lines[-1] == "6 replays: 2 verified, 1 mismatched, 2 unreadable, 0 refused, 1 not checked"
    assert "nowhere_games_xyz" not in sys.modules
    r = runner.invoke(app, ["replay", "verify", str(tmp_path), "good-0", "good-1"], terminal_width=200)
    assert r.exit_code == 0 and r.output.splitlines() == ["2 replays: 2 verified, 0 mismatched, 0 unreadable, 0 refused, 0 not checked"]


def test_list_folder_lists_the_good_and_names_each_bad_file(tmp_path, sample_plugin):
    _bad_folder(tmp_path, sample_plugin)
    r = runner.invoke(app, ["replay", "list", str(tmp_path)], terminal_width=200)
    assert r.exit_code == 1, r.output
    for rid in ("good-0", "good-1", "tampered", "plug"):
        assert rid in r.output
    assert sum(line.startswith("UNREADABLE ") for line in r.output.splitlines()) == 2
    assert "game nowhere/TicTacToe-v3 (1 replays) is not registered: pass --plugin nowhere_games_xyz" in r.output
    assert r.output.splitlines()[-1] == "4 replays, 2 unreadable"


@pytest.mark.parametrize("width", [80, 200])
def test_list_prints_ids_whole_and_show_verify_take_them(tmp_path, monkeypatch, width):
    ids = ["openspiel_tic_tac_toe-v0-s12345-0123abcd", "openspiel_tic_tac_toe-v0-00000007-00007-and-a-long-tail"]
    for i, mid in enumerate(ids):
        _ttt(tmp_path, mid, seed=i)
    monkeypatch.setattr(arena.cli, "console", Console(width=width))
    r = runner.invoke(app, ["replay", "list", str(tmp_path)], terminal_width=width)
    assert r.exit_code == 0, r.output
    for mid in ids:
        assert mid in r.output, r.output
    assert "2 replays" in r.output
    r = runner.invoke(app, ["replay", "show", str(tmp_path), ids[1], "--step", "1"], terminal_width=width)
    assert r.exit_code == 0 and "step 1/" in r.output, r.output
    r = runner.invoke(app, ["replay", "verify", str(tmp_path), "openspiel_tic_tac_toe-v0-s1"], terminal_width=width)
    assert r.exit_code == 0 and "1 verified" in r.output, r.output


def test_folder_without_id_or_ambiguous_prefix_is_a_one_line_error(tmp_path):
    _ttt(tmp_path, "game-a")
    _ttt(tmp_path, "game-b")
    p = _arena("replay", "show", str(tmp_path))
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert f"arena replay show {tmp_path} ID" in p.stderr
    p = _arena("replay", "show", str(tmp_path), "game-")
    assert p.returncode == 2 and "give more of the id" in p.stderr and len(p.stderr.strip().splitlines()) == 1


SIDE_EFFECT_PLUGIN = '''
import pathlib
import gymnasium
pathlib.Path({marker!r}).write_text("imported")
gymnasium.register(id="sidefx/TicTacToe-v3", entry_point="pettingzoo.classic.tictactoe_v3:env")
'''


def test_plugin_replays_need_the_flag_and_never_import_what_a_replay_names(tmp_path, sample_plugin):
    mods, marker, rdir = tmp_path / "mods", tmp_path / "imported", tmp_path / "replays"
    mods.mkdir()
    (mods / "sidefx_games.py").write_text(SIDE_EFFECT_PLUGIN.format(marker=str(marker)))
    res = play_match("plugin/TicTacToePZ-v3", ["random", "random"], seed=3, match_id="sidefx")
    assert res.replay.header["plugin"] == "plugins.sample_games"
    res.replay.header.update(game_id="sidefx/TicTacToe-v3", plugin="sidefx_games")
    path = write_replay(res.replay, replay_path(rdir, "sidefx"))

    p = _arena("replay", "verify", str(path), cwd=mods)
    assert p.returncode == 1 and "Traceback" not in p.stdout + p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("NOT CHECKED"))
    assert line.endswith("pass --plugin sidefx_games")
    p = _arena("replay", "show", str(path), "--all", cwd=mods)
    assert p.returncode == 0 and "--plugin sidefx_games" in p.stdout, p.stdout + p.stderr
    p = _arena("replay", "list", str(rdir), cwd=mods)
    assert p.returncode == 0 and "--plugin sidefx_games" in p.stdout, p.stdout + p.stderr
    assert not marker.exists(), "a module named by a replay was imported without --plugin"

    p = _arena("replay", "verify", str(path), "--plugin", "sidefx_games", cwd=mods)
    assert p.returncode == 0 and "1 verified" in p.stdout, p.stdout + p.stderr
    assert marker.exists()
    p = _arena("replay", "show", str(rdir), "sidefx", "--all", "--plugin", "sidefx_games", cwd=mods)
    assert p.returncode == 0 and "final position not shown" not in p.stdout, p.stdout + p.stderr
    assert "(x: plane 0, o: plane 1)" in p.stdout.split("final position")[-1]
