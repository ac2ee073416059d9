"""What a person sees: the final position of TextArena games, poker in words, rules once, the
one-match summary of `arena play`."""

import io
import re

import pytest
from typer.testing import CliRunner

from arena.agents.human import HumanAgent
from arena.cli import app
from arena.envs.registry import make_core
from arena.match import play_match
from arena.match.verify import replay_views

runner = CliRunner()


def _human(text: str):
    out = io.StringIO()
    return HumanAgent(stdin=io.StringIO(text), stdout=out), out


def _game_over(shown: str) -> str:
    return shown.rsplit("game over ===", 1)[1]


# -- 1. the final position of TextArena games ---------------------------------------------------

def test_tictactoe_final_screen_draws_the_winning_mark_and_offers_no_moves():
    # the README's tour: seed 3, the person plays 4, 2, 6 (random answers 0 and 1) and wins on the diagonal
    human, out = _human("4\n2\n6\n")
    res = play_match("arena/TicTacToe-v0", [human, "random"], seed=3, match_id="h")
    assert res.winner == 0 and res.moves == 5
    end = _game_over(out.getvalue())
    assert "Player 0 placed their symbol (O) in cell 6." in end
    assert " O | 7 | 8" in end  # the winning mark, drawn
    assert "Available Moves" not in end
    assert "result: you win; returns 1, -1 (Player 0 has won!)" in end


def test_tictactoe_final_view_of_both_players_is_after_the_last_move():
    replay = play_match("arena/TicTacToe-v0", ["random", "random"], seed=3, match_id="t").replay
    assert replay.result["winner"] == 0
    final = replay_views(replay).final
    assert final.note == ""
    for text in final.texts:  # both players, not only the one who moved last
        assert text is not None
        assert "Player 0 placed their symbol (O) in cell 8." in text
        assert " X | O | O" in text and "Available Moves" not in text


def test_the_core_text_after_the_end_is_the_final_position():
    core = make_core("arena/TicTacToe-v0")
    core.reset(0)
    for cell in ("[0]", "[3]", "[1]", "[4]", "[2]"):
        assert core.apply(core.current_player(), cell) is None
    assert core.is_terminal()
    for p in (0, 1):
        board = core.text(p).rsplit("Current Board:", 1)[1]
        assert board.split() == ["O", "|", "O", "|", "O", "---+---+---", "X", "|", "X", "|", "5",
                                 "---+---+---", "6", "|", "7", "|", "8"]


@pytest.mark.parametrize("game", ["arena/KuhnPoker-v1", "arena/KuhnPoker-v2"])
def test_kuhn_final_view_shows_round_five_and_no_sixth_round(game):
    replay = play_match(game, ["random", "random"], seed=3, match_id="k").replay
    final = replay_views(replay).final
    for text in final.texts:
        assert text is not None
        assert text.count("Current scores:") == 5  # every round's outcome, the last one too
        assert "Starting round 6" not in text and "available actions" not in text
        assert text.rstrip().endswith(f"Game over: {replay.result['reason']}")
    human, out = _human("0\n" * 20)
    play_match(game, [human, "random"], seed=3, match_id="h")
    assert _game_over(out.getvalue()).count("Current scores:") == 5


def test_replay_show_final_page_has_the_last_move(tmp_path):
    from arena.replays import replay_path, write_replay

    res = play_match("arena/TicTacToe-v0", ["random", "random"], seed=3, match_id="t", record="actions")
    path = write_replay(res.replay, replay_path(tmp_path, "t"))
    r = runner.invoke(app, ["replay", "show", str(path)], input="l\nq\n", terminal_width=200)
    assert r.exit_code == 0, r.output
    final = r.output.split("final position", 1)[1]
    assert "Player 0 placed their symbol (O) in cell 8." in final and "Available Moves" not in final


# -- 2. poker in words ------------------------------------------------------------------------------

def _play(game: str, moves: list[str], seed: int = 0):
    core = make_core(game)
    core.reset(seed)
    for m in moves:
        p = core.current_player()
        a = next(a for a in core.legal_actions(p) if core.action_to_text(p, a) == m)
        assert core.apply(p, a) is None
    return core


def _dealt(game: str, actions: list):
    """A core in the position of `actions` (chance outcomes as ints, moves by name) from the start."""
    core = make_core(game)
    core.reset(0)
    state = core.game.new_initial_state()
    for a in actions:
        state.apply_action(a if isinstance(a, int) else
                           next(x for x in state.legal_actions() if state.action_to_string(x) == a))
    core.state = state
    return core


def test_openspiel_kuhn_view_for_people_names_the_cards_and_the_betting():
    deal = [0, 2]  # player 0 holds J, player 1 K
    core = _dealt("openspiel/kuhn_poker-v0", deal + ["Bet"])
    # agents, tabular keys and text replays keep the engine's view
    assert core.state.information_state_string(1) == "2b"
    assert core.human_view(1) == ("Kuhn poker: you are player 1\nYour card: K\nBetting: player 0 bet 1\n"
                                  "Pot: 3 chips (you put in 1)")
    core = _dealt("openspiel/kuhn_poker-v0", deal + ["Pass", "Bet", "Bet"])
    assert core.human_view(0) == ("Kuhn poker: you are player 0\nYour card: J\n"
                                  "Betting: you checked, player 1 bet 1, you called\nPot: 4 chips (you put in 2)\n"
                                  "Showdown: you have J, player 1 has K\nYou lose 2 chips")
    core = _dealt("openspiel/kuhn_poker-v0", deal + ["Bet", "Pass"])
    assert core.human_view(1).endswith("Betting: player 0 bet 1, you folded\nPot: 3 chips (you put in 1)\n"
                                       "No showdown: everyone else folded to player 0\nYou lose 1 chip")
    assert "K" not in core.human_view(0).split("Your card: J", 1)[1]  # a fold shows no other card


def test_openspiel_leduc_view_for_people_names_cards_with_suits():
    deal = [3, 5]  # Q♥, K♥; the public card J♠ (0) after round 1
    core = _dealt("openspiel/leduc_poker-v0", deal + ["Call", "Raise"])
    assert core.state.information_state_string(0).startswith("[Observer: 0][Private: 3]")
    assert core.human_view(0) == (
        "Leduc poker: you are player 0\nYour card: Q♥\n"
        "Public card: not dealt yet (it comes after the first betting round)\n"
        "Round 1 betting: you checked, player 1 bet 2\nPot: 4 chips (you put in 1)")
    core = _dealt("openspiel/leduc_poker-v0", deal + ["Call", "Raise", "Raise", "Call", 0, "Call", "Call"])
    assert core.state.is_terminal()
    assert core.human_view(1) == (
        "Leduc poker: you are player 1\nYour card: K♥\nPublic card: J♠\n"
        "Round 1 betting: player 0 checked, you bet 2, player 0 raised 2, you called\n"
        "Round 2 betting: player 0 checked, you checked\nPot: 10 chips (you put in 5)\n"
        "Showdown: player 0 has Q♥, you have K♥\nYou win 5 chips")


def test_the_human_player_and_replay_show_read_kuhn_in_words(tmp_path):
    from arena.replays import replay_path, write_replay

    human, out = _human("0\n" * 5)
    play_match("openspiel/kuhn_poker-v0", [human, "random"], seed=1, match_id="h")
    shown = out.getvalue()
    assert "Your card: " in shown and "Pot: 2 chips" in shown
    assert not re.search(r"^[012][pb]*$", shown, re.M)  # never the engine's "1pb"
    for record in ("text", "actions"):
        res = play_match("openspiel/kuhn_poker-v0", ["cfr:iterations=20", "random"], seed=3, match_id=record,
                         record=record)
        if record == "text":
            assert [s["obs"] for s in res.replay.steps][:1] == ["0"]  # stored views are the engine's
        path = write_replay(res.replay, replay_path(tmp_path, record))
        r = runner.invoke(app, ["replay", "show", str(path), "--all"], terminal_width=200)
        assert r.exit_code == 0, r.output
        assert "Kuhn poker: you are player 0" in r.output and "Your card: J" in r.output
        assert "Showdown: " in r.output or "No showdown" in r.output


def test_textarena_kuhn_view_for_people_has_the_card_and_the_pot():
    core = _play("arena/KuhnPoker-v2", [], 0)
    p = core.current_player()
    core.apply(p, "[bet]")
    q = core.current_player()
    view = core.human_view(q)
    assert re.search(r"Round 1 of 5: your card is [JQK], the pot is 3 chips$", view)
    assert "Game Rules" not in view and "available actions" not in view
    assert "Game Rules" in core.text(q)  # the language models' view keeps them


# -- 3. the rules once ----------------------------------------------------------------------------------

@pytest.mark.parametrize("game,rule", [("arena/TicTacToe-v0", "Your goal is to win three in a row"),
                                       ("arena/KuhnPoker-v2", "Kuhn Poker uses a 3-card deck"),
                                       ("textarena/KuhnPoker-v0", "Kuhn Poker uses a 3-card deck")])
def test_the_rules_are_printed_once_at_the_start(game, rule):
    human, out = _human("0\n" * 30)
    res = play_match(game, [human, "random"], seed=2, match_id="r")
    shown = out.getvalue()
    assert shown.count(rule) == 1
    assert shown.index(rule) < shown.index("your move>")
    assert shown.count("your move>") >= 2
    assert res.replay.steps[0]["obs"].count(rule) == 1  # what agents read is unchanged


def test_the_rules_are_printed_again_for_a_new_match():
    human, out = _human("0\n" * 60)
    for seed in (1, 2):
        play_match("arena/TicTacToe-v0", [human, "random"], seed=seed, match_id=f"m{seed}")
    assert out.getvalue().count("Your goal is to win three in a row") == 2


# -- arena play's one-match summary -----------------------------------------------------------------------

def test_one_match_summary_separates_the_reason_and_counts_one_match():
    r = runner.invoke(app, ["play", "arena/TicTacToe-v0", "-p", "random", "-p", "random", "--seed", "3"],
                      terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "returns 1, -1; 9 moves; normal (Player 0 has won!)" in r.output
    assert "1 match" in r.output and "1 matches" not in r.output


def test_one_player_summary_rounds_the_return_and_has_no_win_columns():
    r = runner.invoke(app, ["play", "Pendulum-v1", "-p", "random", "--seed", "1"], terminal_width=200)
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.output.splitlines() if "returns" in ln)
    assert re.search(r"returns -?\d+\.\d{1,3};", line), line
    assert "[" not in line
    header = next(ln for ln in r.output.splitlines() if "mean return" in ln)
    assert "win rate" not in header and " W " not in header


def test_ctrl_c_in_arena_play_starts_the_stopped_line_on_a_new_line(monkeypatch):
    import arena.match.batch as batch

    def interrupted(game, specs, n, on_result=None, **kw):
        on_result(play_match(game, specs, seed=0, match_id="m0"))
        raise KeyboardInterrupt

    monkeypatch.setattr(batch, "play_matches", interrupted)
    r = runner.invoke(app, ["play", "openspiel/tic_tac_toe-v0", "-p", "random", "-p", "random", "-n", "3"],
                      terminal_width=200)
    assert r.exit_code == 130, r.output
    before = r.output.split("stopped after 1 of 3 matches", 1)[0]
    assert before.endswith("\n")  # the terminal's ^C is left on a line of its own
