import pytest

from arena.agents.prompts import CompactTemplate, SpiralTemplate, last_boxed, parse_move


@pytest.mark.parametrize("text, expected", [
    ("I play \\boxed{4}", "4"),
    ("\\boxed{1} no wait \\boxed{7}.", "7"),
    ("\\boxed{[Offer: 1 Wheat -> 2 Ore]}", "[Offer: 1 Wheat -> 2 Ore]"),
    ("\\boxed{\\text{bet}}", "\\text{bet}"),
    ("\\boxed{3} then \\boxed{unclosed", "3"),
    ("no answer", None),
    ("\\box{4}", None),
    ("\\boxed{ 5 }", "5"),
])
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


def test_parse_move_discrete():
    assert parse_move("4", "discrete", [0, 4]) == (4, None)
    move, why = parse_move("5", "discrete", [0, 4])
    assert move is None and "not a legal move" in why
    assert parse_move(None, "discrete", [0])[1] == "no \\boxed{} answer in the output"
    assert parse_move("x(1,1)", "discrete", [4], parse_text=lambda s: 4) == (4, None)


def test_parse_move_text_games():
    legal = ["[check]", "[bet]"]
    assert parse_move("bet", "text", legal) == ("[bet]", None)
    assert parse_move("[Check]", "text", legal) == ("[check]", None)
    assert parse_move("fold", "text", legal)[0] is None
    assert parse_move("Accept", "text", None) == ("[Accept]", None)
    assert parse_move("[Offer: 1 Ore -> 2 Wheat]", "text", None) == ("[Offer: 1 Ore -> 2 Wheat]", None)


def test_compact_tic_tac_toe_numbers_empty_cells():
    t = CompactTemplate()
    prompt = t.render("openspiel/tic_tac_toe-v0", "x.o\n...\n..x", 1)
    assert prompt == "o:x1o/345/67x=\\boxed{"
    assert t.answer("4") == "4}"  # the answer is already opened in the prompt
    assert t.parse("4}") == "4" and t.parse("4") is None and t.parse("x}") == "x"
    # generation stops at the closing brace; engines cut the stop string off the text
    assert t.stop == ("}",)
    assert t.parse_generation("4", "}") == "4" and t.parse_generation("4", None) is None  # EOS or length
    assert t.parse_generation("4}") == "4"


def test_spiral_template_without_chat_template():
    t = SpiralTemplate(None)
    p = t.render("arena/KuhnPoker-v1", "Your card is: 'K'", 0)
    assert p.startswith("You are playing a two-player zero-sum game. Make valid actions to win.\nObservation: ")
    assert "Your card is: 'K'" in p and "\\boxed{}" in p
