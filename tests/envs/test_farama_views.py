"""Text views of plain Farama envs: ansi where the env has it, board planes as a grid, else one line."""

import gzip

import numpy as np
import pytest

from arena.envs import load_plugin, make_core
from arena.envs.farama import MAX_PRINTED, planes_text, text_of
from arena.match import play_match
from arena.replays import replay_path, write_replay


@pytest.fixture(scope="module")
def classic():
    return load_plugin("plugins.classic_games")


def test_planes_as_a_grid_worked_by_hand():
    obs = np.zeros((2, 3, 3), dtype=np.int8)
    obs[0, 0, 0] = 1  # plane 0 at the top left
    obs[1, 2, 1] = 1  # plane 1 at the bottom right
    obs[:, :, 2] = 1  # a constant plane ("whose turn"): named, not drawn
    assert planes_text(obs) == "x . .\n. . o\n(x: plane 0, o: plane 1, plane 2: all 1)"
    both = np.zeros((1, 2, 2), dtype=bool)
    both[0, 0] = True
    assert planes_text(both) == "* .\n(x: plane 0, o: plane 1)"
    assert planes_text(np.full((2, 2, 2), 0.5)) is None  # not 0/1
    assert planes_text(np.zeros((4, 4, 17), dtype=bool)) is None  # too many planes
    assert planes_text(np.zeros((4, 4))) is None


def test_small_arrays_print_whole_large_ones_one_line():
    assert text_of(np.array([0.5, -1.0], dtype=np.float32)) == "[ 0.5,-1. ]"
    big = np.arange(MAX_PRINTED + 1, dtype=np.float32)
    line = text_of(big)
    assert "\n" not in line and len(line) < 100 and "digest" in line and str(MAX_PRINTED + 1) in line
    other = big.copy()
    other[3] = 0
    assert text_of(other) != line  # different observations, different text


def test_action_mask_is_not_in_the_text():
    obs = {"observation": np.zeros((3, 3, 2), dtype=np.int8), "action_mask": np.ones(9, dtype=np.int8)}
    assert text_of(obs) == "\n".join([". . ."] * 3) + "\n(plane 0: all 0, plane 1: all 0)"


def test_connect_four_text_is_a_board_grid(classic):
    core = make_core("plugin/ConnectFourPZ-v3")
    core.reset(0)
    core.apply(0, 3)
    core.apply(1, 3)
    text = core.text(0)
    rows = text.splitlines()
    assert len(rows) == 7 and all(len(r.split()) == 7 for r in rows[:6])
    assert rows[5].split()[3] == "x" and rows[4].split()[3] == "o"  # plane 0: the player to move
    assert "action_mask" not in text and "[" not in text
    res = play_match("plugin/ConnectFourPZ-v3", ["random", "random"], seed=1, match_id="c4")
    assert len(res.replay.to_text()) < 300 * (len(res.replay.steps) + 2)


def test_go_planes_are_one_line_not_the_tensor(classic):
    res = play_match("plugin/GoPZ-v5", ["random", "random"], seed=2, max_moves=40, match_id="go")
    texts = [s["obs"] for s in res.replay.steps]
    assert all("\n" not in t and "digest" in t and "9x9x17" in t for t in texts)
    assert len(set(texts)) > len(texts) // 2
    assert len(res.replay.to_text()) < 250 * (len(texts) + 2)


def test_chess_uses_its_ansi_view_and_replays_stay_small(classic, tmp_path):
    pytest.importorskip("chess")
    import chess

    res = play_match("plugin/ChessPZ-v6", ["random", "random"], seed=0, match_id="chess")
    assert res.moves > 300, "a long game is the case that made 13 MB replays"
    first = res.replay.steps[0]["obs"]
    assert first == str(chess.Board())  # python-chess's board, not the 8x8x111 tensor
    path = write_replay(res.replay, replay_path(tmp_path, "chess", compress=True))
    assert path.stat().st_size < 100_000
    assert len(gzip.decompress(path.read_bytes())) < 2_000_000
    core = make_core("plugin/ChessPZ-v6")
    core.reset(0)
    core.text(0)
    assert core.env.unwrapped.render_mode is None  # the env is left as it was made
