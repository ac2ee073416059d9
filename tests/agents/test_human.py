"""The human player on text games: moves numbered, read by number or by text."""

import io

import pytest

from arena.agents.human import HumanAgent, text_move_numbers
from arena.match import play_match


def _human(text: str):
    out = io.StringIO()
    return HumanAgent(stdin=io.StringIO(text), stdout=out), out


@pytest.mark.parametrize("game", ["arena/KuhnPoker-v1", "arena/KuhnPoker-v2"])
def test_kuhn_moves_are_numbered_and_read_by_number(game):
    # "1" every time: [bet] with no bet on the table, [call] facing one
    human, out = _human("1\n" * 30)
    res = play_match(game, [human, "random"], seed=0, match_id="h")
    assert res.outcome == "normal" and res.invalid == [0, 0]
    shown = out.getvalue()
    assert "legal moves: 0=[check], 1=[bet]" in shown
    mine = [s for s in res.replay.steps if s["player"] == 0]
    assert mine and all(s["event"] == "ok" and s["action"] in ("[bet]", "[call]") for s in mine)


def test_kuhn_moves_read_by_text_in_any_case_with_or_without_brackets():
    # Against "first" (always the first legal move: [check], or [fold] facing a bet), seed 0:
    # player 1 opens rounds 1, 3, 5 and player 0 (the human) rounds 2 and 4.
    human, out = _human("7\nBET\n[Check]\ncheck\nbet\n0\n")
    res = play_match("arena/KuhnPoker-v2", [human, "first"], seed=0, match_id="h")
    assert res.outcome == "normal" and res.invalid == [0, 0]
    shown = out.getvalue()
    assert "7 is not one of the move numbers (0, 1)" in shown
    mine = [s["action"] for s in res.replay.steps if s["player"] == 0]
    assert mine == ["[bet]", "[check]", "[check]", "[bet]", "[check]"]


def test_number_out_of_range_and_unknown_text_are_re_asked():
    human, out = _human("5\n-1\nraise\n[fold]\n1\n" + "0\n" * 20)
    res = play_match("arena/KuhnPoker-v1", [human, "random"], seed=0, match_id="h")
    shown = out.getvalue()
    assert "5 is not one of the move numbers" in shown and "-1 is not one of the move numbers" in shown
    assert "'raise' is not one of the legal moves" in shown
    assert "'[fold]' is not one of the legal moves" in shown  # no bet to fold to yet
    assert res.invalid == [0, 0]
    assert res.replay.steps[[s["player"] for s in res.replay.steps].index(0)]["action"] == "[bet]"


def test_textarena_tictactoe_numbers_are_the_cells():
    """Where the moves are numbers themselves, a number is that move (not a list position)."""
    human, out = _human("4\n0\n8\n2\n6\n1\n3\n5\n7\n")
    res = play_match("arena/TicTacToe-v0", [human, "random"], seed=0, match_id="m")
    assert res.replay.steps[0]["action"] == "[4]"
    assert "legal moves: 0=[0], 1=[1], 2=[2], 3=[3], 4=[4]" in out.getvalue()
    assert text_move_numbers(["[1]", "[5]"]) == {1: "[1]", 5: "[5]"}
    assert text_move_numbers(["[check]", "[bet]"]) == {0: "[check]", 1: "[bet]"}
    assert text_move_numbers(["[1]", "[pass]"]) is None  # a number would read two ways: text only


def test_discrete_games_keep_action_ids():
    human, out = _human("4\n0\n8\n2\n6\n1\n3\n5\n7\n")
    res = play_match("openspiel/tic_tac_toe-v0", [human, "first"], seed=0, match_id="m")
    assert res.replay.steps[0]["action"] == 4
    assert "4=x(1,1)" in out.getvalue()
