"""Kuhn Poker v2's stakes against OpenSpiel's kuhn_poker, and v1 kept as it was (TextArena's pot quirk)."""

import itertools

import numpy as np
import pyspiel
import pytest

from arena.envs import make_core
from arena.match import play_match

#: Every betting sequence of one hand, as TextArena moves (the first to act moves first).
SEQUENCES = [
    ["[check]", "[check]"],
    ["[check]", "[bet]", "[fold]"],
    ["[check]", "[bet]", "[call]"],
    ["[bet]", "[fold]"],
    ["[bet]", "[call]"],
]
DEALS = list(itertools.permutations(range(3), 2))  # (card of player 0, card of player 1), 0=J 1=Q 2=K
#: OpenSpiel's kuhn_poker actions: 0 Pass (check, fold), 1 Bet (bet, call).
OPENSPIEL_ACTION = {"[check]": 0, "[fold]": 0, "[bet]": 1, "[call]": 1}


def openspiel_returns(first_card: int, second_card: int, moves: list[str]) -> list[float]:
    """Chips won by the first and the second to act in one OpenSpiel hand."""
    state = pyspiel.load_game("kuhn_poker").new_initial_state()
    for a in (first_card, second_card, *(OPENSPIEL_ACTION[m] for m in moves)):
        state.apply_action_with_legality_check(a)
    assert state.is_terminal()
    return state.returns()


def one_hand_core(game_id: str, deal: tuple[int, int]):
    """A one-round game of `game_id` whose seed deals `deal` (searched: the deal is TextArena's own)."""
    core = make_core(game_id, max_rounds=1)
    for seed in range(200):
        core.reset(seed)
        cards = core.base.state.game_state["player_cards"]
        if (cards[0], cards[1]) == deal:
            return core
    raise AssertionError(f"no seed below 200 deals {deal}")


def play_moves(core, moves: list[str]) -> None:
    for m in moves:
        p = core.current_player()
        assert m in core.legal_actions(p)
        assert core.apply(p, m) is None


@pytest.mark.parametrize("deal", DEALS)
@pytest.mark.parametrize("moves", SEQUENCES, ids="-".join)
def test_v2_hand_pays_what_openspiel_pays(deal, moves):
    core = one_hand_core("arena/KuhnPoker-v2", deal)
    first = core.current_player()  # TextArena's player 1 opens round 1; OpenSpiel's player 0 opens
    play_moves(core, moves)
    assert core.is_terminal()
    chips = core.base.state.game_state["player_chips"]
    os_first, os_second = openspiel_returns(deal[first], deal[1 - first], moves)
    assert (chips[first], chips[1 - first]) == (os_first, os_second)
    # the returns are the chips won
    assert core.returns()[first] == os_first and core.returns()[1 - first] == os_second


@pytest.mark.parametrize("deal", DEALS)
@pytest.mark.parametrize("moves", SEQUENCES, ids="-".join)
def test_v1_keeps_textarena_pot_quirk(deal, moves):
    """v1 is SPIRAL's game as published: a bet or a call never reaches the pot, every hand is worth 1."""
    core = one_hand_core("arena/KuhnPoker-v1", deal)
    first = core.current_player()
    play_moves(core, moves)
    chips = core.base.state.game_state["player_chips"]
    os_first, _ = openspiel_returns(deal[first], deal[1 - first], moves)
    # TextArena deals (and takes the antes of) a hand past the last round
    assert chips[first] + 1 == np.sign(os_first) and chips[1 - first] + 1 == -np.sign(os_first)


@pytest.mark.parametrize("seed", range(12))
def test_v2_five_rounds_each_round_matches_openspiel_and_the_total_is_their_sum(seed):
    core = make_core("arena/KuhnPoker-v2")
    assert core.base.max_rounds == 5 and core.base.ante == 1
    core.reset(seed)
    gs = core.base.state.game_state
    rng = np.random.default_rng(seed)
    net = [0, 0]  # chips before the round's ante
    rounds = []
    while not core.is_terminal():
        rnd, first, cards, moves = gs["current_round"], core.current_player(), dict(gs["player_cards"]), []
        while not core.is_terminal() and gs["current_round"] == rnd:
            p = core.current_player()
            legal = core.legal_actions(p)
            m = legal[int(rng.integers(len(legal)))]
            assert core.apply(p, m) is None
            moves.append(m)
        # a new round has taken its ante; the last round's chips are already the net
        after = [c + (0 if core.is_terminal() else 1) for c in gs["player_chips"].values()]
        os_first, os_second = openspiel_returns(cards[first], cards[1 - first], moves)
        assert (after[first] - net[first], after[1 - first] - net[1 - first]) == (os_first, os_second), (rnd, moves)
        rounds.append([after[0] - net[0], after[1] - net[1]])
        net = after
    assert len(rounds) == 5
    total = [gs["player_chips"][0], gs["player_chips"][1]]
    assert total == [sum(r[0] for r in rounds), sum(r[1] for r in rounds)] and sum(total) == 0
    assert core.returns() == [float(total[0]), float(total[1])]


def test_v2_has_v1s_text_interface():
    """Checks only: no chip is bet, so v1 and v2 play the same match, word for word."""
    class Checks:
        spec = "checks"

        def act(self, obs):
            return "[check]"

    v1 = play_match("arena/KuhnPoker-v1", [Checks(), Checks()], seed=6, match_id="m").replay.without_timing()
    v2 = play_match("arena/KuhnPoker-v2", [Checks(), Checks()], seed=6, match_id="m").replay.without_timing()
    assert v1.steps == v2.steps
    # the same winner; v2's returns are the chips won (three of the five check-check showdowns here)
    assert {k: v for k, v in v1.result.items() if k != "returns"} == {k: v for k, v in v2.result.items() if k != "returns"}
    assert v1.result["returns"] == [1.0, -1.0] and v2.result["returns"] == [3.0, -3.0]
    assert len(v2.steps) == 10  # 5 rounds of check-check
    core = make_core("arena/KuhnPoker-v2")
    core.reset(0)
    assert core.legal_actions(core.current_player()) == ["[check]", "[bet]"]
    assert core.privileged(0).startswith("Opponent's card: ")
    assert core.settings == {"env_id": "KuhnPoker-v0-short-train", "env_class": "arena.envs.kuhn:KuhnPokerStakesEnv"}


def test_v2_bet_call_pot_in_the_view():
    """The showdown message names the real pot: 4 chips after bet-call."""
    core = make_core("arena/KuhnPoker-v2")
    core.reset(1)
    play_moves(core, ["[bet]", "[call]"])
    p = core.current_player()
    assert "wins pot of 4 chips" in core.text(p)
