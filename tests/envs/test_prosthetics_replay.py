"""Replays of continuous-action tasks re-simulate to the same returns, and draw: `resimulate_steps`,
`arena.ui.video`, ``arena play --render`` and ``arena replay show`` on arena/Prosthetics-v0 (and on
Gymnasium's own continuous tasks, to show that nothing there is particular to OpenSim)."""

import importlib.util
import math
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from arena.cli import app
from arena.envs.prosthetics import ModelFileMissing, model_dir
from arena.envs.registry import make_core
from arena.match import play_match
from arena.match.verify import core_for_replay, resimulate_steps
from arena.replays import read_replay, replay_path, write_replay

pytest.importorskip("imageio_ffmpeg")


def _has_model() -> bool:
    if importlib.util.find_spec("opensim") is None:
        return False
    try:
        model_dir()
    except ModelFileMissing:
        return False
    return True


PROS = "arena/Prosthetics-v0"
#: A short episode (steps) for the tests that draw: the env's own step limit, a game kwarg.
SHORT = 30
needs_model = pytest.mark.skipif(not _has_model(), reason="needs the opensim extra and osim-rl's model files")
runner = CliRunner()


def _played(folder, game, seed, game_kwargs=None):
    res = play_match(game, ["random"], seed=seed, match_id=f"{game.replace('/', '_')}-{seed}", record="actions",
                     game_kwargs=game_kwargs)
    path = write_replay(res.replay, replay_path(folder, res.match_id))
    return res, path


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """A whole random episode of round 1 (until the body falls, about 100 steps), through JSON."""
    return _played(tmp_path_factory.mktemp("pros"), PROS, 0)


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    return _played(tmp_path_factory.mktemp("short"), PROS, 1, {"time_limit": SHORT})


@needs_model
def test_the_replay_re_simulates_to_the_recorded_returns(whole):
    res, path = whole
    replay = read_replay(path)
    assert replay.record == "actions" and len(replay.steps) == res.moves
    seen = []
    resim = resimulate_steps(replay, lambda core, moves, rewards: seen.append((moves, rewards[0])))
    assert 20 < res.moves < 300 and res.outcome == "normal"  # fell before the step limit
    assert resim.moves == resim.recorded_moves == res.moves == len(replay.steps)
    assert abs(resim.returns[0] - res.returns[0]) <= 1e-9 and resim.matches()
    assert [m for m, _ in seen] == list(range(1, res.moves + 1))  # a call after every step
    assert math.isclose(sum(r for _, r in seen), resim.returns[0], abs_tol=1e-9)


@needs_model
@pytest.mark.parametrize("game, kwargs", [(PROS, {"time_limit": 10}), ("Pendulum-v1", None),
                                          ("MountainCarContinuous-v0", None)])
def test_the_env_gets_exactly_the_recorded_actions(tmp_path, game, kwargs):
    """float32 vectors are stored as JSON floats: the re-simulation hands the env the same bits."""
    got = {"played": [], "again": []}

    def spy(core, key):
        step = core.env.step

        def stepped(action):
            got[key].append(np.array(action, copy=True))
            return step(action)

        core.env.step = stepped
        return core

    res = play_match(spy(make_core(game, **(kwargs or {})), "played"), ["random"], seed=4, match_id="m",
                     record="actions", game_kwargs=kwargs)
    replay = read_replay(write_replay(res.replay, tmp_path / "m.jsonl.gz"))
    resim = resimulate_steps(replay, core=spy(core_for_replay(replay), "again"))
    played, again = got["played"], got["again"]
    assert len(played) == len(again) == res.moves > 0
    assert all(a.dtype == b.dtype == np.float32 and np.array_equal(a, b) for a, b in zip(played, again))
    assert resim.returns == res.returns  # the same actions: the same returns, to the last bit


@pytest.mark.parametrize("game", ["Pendulum-v1", "MountainCarContinuous-v0"])
def test_re_simulation_is_generic(tmp_path, game):
    res, path = _played(tmp_path, game, 3)
    resim = resimulate_steps(read_replay(path))
    assert resim.moves == res.moves == len(read_replay(path).steps) > 0
    assert abs(resim.returns[0] - res.returns[0]) <= 1e-9


@needs_model
def test_a_gif_of_the_replay_has_a_frame_every_other_step_and_moves(short, tmp_path):
    import imageio.v3 as iio

    from arena.ui.video import render_replay

    res, path = short
    assert res.moves == SHORT  # the time_limit kwarg is in the replay's header: the re-simulation keeps it
    out = tmp_path / "vid" / "random.gif"
    video, resim = render_replay(read_replay(path), out)
    assert resim.matches() and resim.moves == SHORT
    # frames 0 (the reset pose), 2, 4, ... of 100 a second, played at 50 fps: real time
    assert (video.fps, video.every, video.frames) == (50.0, 2, math.ceil((SHORT + 1) / 2))
    frames = iio.imread(out, index=None)
    assert frames.shape == (video.frames, 360, 480, 3) and frames.dtype == np.uint8
    body = frames[:, 40:, :, :].astype(int)  # below the caption (time and speed change in any case)
    changed = [np.count_nonzero(np.any(body[i] != body[i + 1], axis=-1)) for i in range(len(body) - 1)]
    assert min(changed) > 0 and np.count_nonzero(np.any(body[0] != body[-1], axis=-1)) > 500
    assert sorted(p.name for p in out.parent.iterdir()) == ["random.gif"]  # no temporary file left


@needs_model
def test_an_mp4_of_the_replay_is_readable(short, tmp_path):
    import imageio.v3 as iio

    from arena.ui.video import render_replay

    out = tmp_path / "random.mp4"
    video, _ = render_replay(read_replay(short[1]), out, fps=25)
    assert (video.fps, video.every) == (25.0, 4)
    frames = iio.imread(out, index=None)
    assert frames.shape == (video.frames, 360, 480, 3) == (math.ceil((SHORT + 1) / 4), 360, 480, 3)
    assert np.abs(frames[0].astype(int) - frames[-1].astype(int)).max() > 100


def _arena(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, check=False)


@pytest.mark.parametrize("args, words", [
    (["play", PROS, "-p", "random", "--render", "out.avi"], ["out.avi", ".gif", ".mp4"]),
    (["play", "openspiel/tic_tac_toe-v0", "-p", "random", "-p", "random", "--render", "out.gif"],
     ["openspiel/tic_tac_toe-v0 cannot be drawn", "rgb_array"]),
])
def test_render_errors_are_one_line_before_any_match(tmp_path, args, words):
    r = _arena(*args, cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr
    assert list(tmp_path.iterdir()) == []


@needs_model
def test_play_render_draws_the_match(tmp_path):
    import imageio.v3 as iio

    out = tmp_path / "runs" / "pros" / "random.gif"
    r = runner.invoke(app, ["play", PROS, "-p", "random", "--render", str(out), "--replays", str(tmp_path / "r")])
    assert r.exit_code == 0, r.output
    replay = read_replay(next((tmp_path / "r").iterdir()))
    frames = math.ceil((replay.result["moves"] + 1) / 2)
    assert iio.imread(out, index=None).shape[0] == frames
    text = " ".join(r.output.split())
    assert f"{out}: {frames} frames at 50 fps" in text and "(equal to the played)" in text


def test_play_render_with_n_draws_the_first_match(tmp_path):
    import imageio.v3 as iio

    pytest.importorskip("pygame")  # Gymnasium's classic-control frames

    out = tmp_path / "pendulum.mp4"
    r = runner.invoke(app, ["play", "Pendulum-v1", "-p", "random", "-n", "3", "--seed", "5", "--render", str(out)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "Video of match Pendulum-v1-00000005-00000" in text and "201 frames at 30 fps" in text, text
    assert iio.imread(out, index=None).shape[0] == 201  # the reset and 200 steps, at the env's own 30 fps


@needs_model
def test_replay_show_re_simulates_and_prints_the_return(short, tmp_path):
    res, path = short
    r = runner.invoke(app, ["replay", "show", str(path)], terminal_width=200)
    assert r.exit_code == 0, r.output
    ret = repr(float(res.returns[0]))
    assert f"re-simulated return {ret} in {SHORT} steps; recorded {ret} in {SHORT}: equal" in r.output
    assert "t=0.25s pelvis" in r.output  # the env's own text line, every 25 steps
    assert "--render out.gif" in r.output  # how to draw it
    out = tmp_path / "show.gif"
    r = runner.invoke(app, ["replay", "show", str(path), "--render", str(out)], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert f"video: {out}: {math.ceil((SHORT + 1) / 2)} frames at 50 fps" in r.output and out.exists()
    assert f"recorded {ret} in {SHORT}: equal" in r.output


def test_replay_show_render_of_a_game_that_cannot_be_drawn(tmp_path):
    res = play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=1, match_id="t")
    path = write_replay(res.replay, tmp_path / "t.jsonl")
    r = runner.invoke(app, ["replay", "show", str(path), "--render", str(tmp_path / "t.gif")])
    assert r.exit_code != 0 and "cannot be drawn" in str(r.exception) and "\n" not in str(r.exception)
    r = runner.invoke(app, ["replay", "show", str(path), "--all"], terminal_width=200)
    assert r.exit_code == 0 and "--render" not in r.output  # no hint for a game with no frames
