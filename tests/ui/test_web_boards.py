"""The web viewer's boards, read from real games' text views (re-simulated from real replays)."""

import pytest

from arena.envs.registry import make_core
from arena.match import play_match
from arena.match.verify import resimulate_steps

pytest.importorskip("fastapi")

from arena.ui.web.boards import board_of, move_cell  # noqa: E402
from arena.ui.web.replays import replay_json  # noqa: E402


def _views(game, seed=1, record="actions", max_moves=None, **kwargs):
    """Every player's view after each move of a random match, by re-simulating its replay."""
    res = play_match(game, ["random", "random"], seed=seed, record=record, max_moves=max_moves,
                     game_kwargs=kwargs or None)
    frames = []
    resimulate_steps(res.replay, lambda core, *_: frames.append([core.text(p) for p in range(2)]),
                     on_reset=lambda core, *_: frames.append([core.text(p) for p in range(2)]))
    return res, frames


def test_connect_four_counts_each_players_discs_after_every_move():
    res, frames = _views("openspiel/connect_four-v0", seed=4)
    for k, views in enumerate(frames):
        b = board_of("openspiel/connect_four-v0", views[0])
        assert (b["kind"], b["style"], b["rows"], b["cols"]) == ("grid", "connect4", 6, 7)
        assert (b["cells"].count("x"), b["cells"].count("o")) == ((k + 1) // 2, k // 2)
    # a click on a column plays that column
    assert move_cell("openspiel/connect_four-v0", b, 3, "3") == 3


def test_go_reads_the_stones_and_the_labels():
    res, frames = _views("openspiel/go-v0", seed=2, max_moves=12, params={"board_size": 5})
    first, last = board_of("openspiel/go-v0", frames[0][0]), board_of("openspiel/go-v0", frames[-1][0])
    assert (first["rows"], first["cols"], first["style"]) == (5, 5, "go")
    assert first["cells"] == [""] * 25
    assert first["row_labels"] == ["5", "4", "3", "2", "1"] and first["col_labels"] == list("ABCDE")
    stones = last["cells"].count("x") + last["cells"].count("o")
    assert 0 < stones <= 12


def test_chess_reads_the_fen_placement():
    core = make_core("openspiel/chess-v0")
    core.reset(seed=0)
    b = board_of("openspiel/chess-v0", core.text(0))
    assert b["kind"] == "chess" and b["to_move"] == "w"
    assert "".join(b["squares"][0]) == "rnbqkbnr" and b["squares"][4] == [""] * 8
    assert "".join(b["squares"][7]) == "RNBQKBNR"
    res, frames = _views("openspiel/chess-v0", seed=3, max_moves=6)
    after = board_of("openspiel/chess-v0", frames[-1][0])
    pieces = sum(1 for row in after["squares"] for sq in row if sq)
    assert 30 <= pieces <= 32 and after["squares"] != b["squares"]


def test_leduc_shows_the_viewers_card_the_pot_and_the_actions():
    res, frames = _views("openspiel/leduc_poker-v0", seed=5)
    b0 = board_of("openspiel/leduc_poker-v0", frames[0][0])  # after the deal, before a move
    assert b0["kind"] == "cards" and b0["hand"][0] in "JQK" and b0["money"] == [99, 99] and b0["pot"] == 2
    assert b0["history"] == [] and b0["public"] == []
    last = board_of("openspiel/leduc_poker-v0", frames[-2][0])
    assert last["pot"] >= 2 and all(a in ("fold", "call", "raise") for a in last["history"])


def test_kuhn_shows_each_players_own_card():
    res, frames = _views("openspiel/kuhn_poker-v0", seed=6)
    b0, b1 = (board_of("openspiel/kuhn_poker-v0", v) for v in frames[-1])
    assert b0["hand"][0] in "JQK" and b1["hand"][0] in "JQK" and b0["hand"] != b1["hand"]
    assert b0["history"] == b1["history"] and len(b0["history"]) == res.moves


def test_textarena_kuhn_and_tic_tac_toe_views():
    res = play_match("arena/KuhnPoker-v2", ["random", "random"], seed=3, record="text")
    b = board_of("arena/KuhnPoker-v2", res.replay.steps[1]["obs"])
    assert b["kind"] == "cards" and b["hand"][0] in "JQK" and b["round"] == 1
    res = play_match("arena/TicTacToe-v0", ["random", "random"], seed=2, record="text")
    views = [s["obs"] for s in res.replay.steps if s["event"] == "ok"]
    assert board_of("arena/TicTacToe-v0", views[0])["cells"] == [""] * 9
    assert sum(1 for c in board_of("arena/TicTacToe-v0", views[-1])["cells"] if c) == len(views) - 1


def test_negotiation_resources_and_the_open_offer():
    res = play_match("arena/SimpleNegotiation-v2", ["random", "random"], seed=2, record="text")
    b = board_of("arena/SimpleNegotiation-v2", res.replay.steps[0]["obs"])
    assert b["kind"] == "negotiation" and [r[0] for r in b["resources"]] == ["Wheat", "Wood", "Sheep", "Brick", "Ore"]
    assert b["total"] == sum(q * v for _, q, v in b["resources"])
    out = replay_json(res.replay, res.match_id)
    assert out["transcript"] is True and len(out["steps"]) == len(res.replay.steps)


def test_an_unknown_shape_is_no_board():
    assert board_of("openspiel/connect_four-v0", "not a board") is None
    assert board_of("openspiel/chess-v0", "rnbqkbnr/pppppppp w") is None
    assert board_of("some/other-v0", "x.o") is None


def test_prosthetics_frames_carry_the_stick_figure():
    pytest.importorskip("opensim")
    res = play_match("arena/Prosthetics-v0", ["random"], seed=0, record="actions", max_moves=4)
    out = replay_json(res.replay, res.match_id)
    assert out["note"] == "" and len(out["frames"]) == res.moves + 1
    sk = [f["skeleton"] for f in out["frames"]]
    assert all(s is not None and s["segments"] and s["joints"] for s in sk)
    # the body moves (and time runs) from frame to frame
    assert sk[-1]["time"] > sk[0]["time"] and sk[-1]["joints"] != sk[0]["joints"]
