"""CFR on TextArena's Kuhn Poker with real stakes: the hand read from the text is OpenSpiel's own
information state, and the agent plays the same strategy there as on OpenSpiel's game."""

from __future__ import annotations

import numpy as np
import pyspiel
import pytest

from arena.agents.search import CFRAgent, kuhn_text_key
from arena.agents.specs import make_agent
from arena.envs.registry import make_core
from arena.match import play_match

OS_MOVE = {"[check]": 0, "[fold]": 0, "[bet]": 1, "[call]": 1}


@pytest.mark.parametrize("seed", range(6))
def test_the_text_key_is_openspiels_information_state(seed):
    core = make_core("arena/KuhnPoker-v2")
    core.reset(seed)
    gs = core.base.state.game_state
    rng = np.random.default_rng(seed)
    game = pyspiel.load_game("kuhn_poker")
    checked = 0
    while not core.is_terminal():
        rnd, opener = gs["current_round"], core.current_player()
        state = game.new_initial_state()
        state.apply_action(gs["player_cards"][opener])      # OpenSpiel's player 0 opens the hand
        state.apply_action(gs["player_cards"][1 - opener])
        while not core.is_terminal() and gs["current_round"] == rnd:
            p = core.current_player()
            assert kuhn_text_key(core.text(p)) == state.information_state_string(0 if p == opener else 1)
            checked += 1
            legal = core.legal_actions(p)
            move = legal[int(rng.integers(len(legal)))]
            assert core.apply(p, move) is None
            if not state.is_terminal():
                state.apply_action(OS_MOVE[move])
    assert checked >= 10  # five hands, two or three decisions each


def test_cfr_plays_the_text_game_and_beats_random():
    agent = make_agent("cfr:iterations=40", make_core("arena/KuhnPoker-v2"), 0)
    assert isinstance(agent, CFRAgent) and agent.text_kuhn
    total = 0.0
    for k in range(120):
        seats = ["cfr:iterations=40", "random"] if k % 2 == 0 else ["random", "cfr:iterations=40"]
        res = play_match("arena/KuhnPoker-v2", seats, seed=k)
        total += res.returns[k % 2]
    assert total / 120 > 0  # chips a match (5 hands) against random; +0.4 expected


def test_on_v1_cfr_plays_the_free_bet_game_it_is():
    """v1's bets cost nothing: its hands are another game (`free_bet_kuhn_game`), whose CFR+ strategy
    never folds and always bets, and which beats random on v1's own returns (+-1 a match)."""
    agent = make_agent("cfr:iterations=40", make_core("arena/KuhnPoker-v1"), 0)
    assert isinstance(agent, CFRAgent) and agent.text_kuhn
    assert agent.game.get_type().short_name == "arena_kuhn_poker_free_bets"
    for key in ("p0 card:0", "p0 card:1", "p0 card:2"):
        assert agent.policy.policy_for_key(key)[1] > 0.95  # opens with a bet whatever the card: it is free
    for key in ("p1 card:1 b", "p1 card:2 b"):
        assert agent.policy.policy_for_key(key)[1] > 0.95  # calls: folding loses the ante
    wins = 0.0
    for k in range(60):
        seats = ["cfr:iterations=40", "random"] if k % 2 == 0 else ["random", "cfr:iterations=40"]
        wins += play_match("arena/KuhnPoker-v1", seats, seed=k).returns[k % 2]
    assert wins / 60 > 0.2  # random folds to half of the bets; CFR never folds


@pytest.mark.parametrize("seed", range(3))
def test_the_v1_key_is_the_free_bet_games_information_state(seed):
    from arena.envs.kuhn import free_bet_kuhn_game

    core = make_core("arena/KuhnPoker-v1")
    core.reset(seed)
    gs = core.base.state.game_state
    agent = make_agent("cfr:iterations=5", core, 0)
    game, rng = free_bet_kuhn_game(), np.random.default_rng(seed)
    seen = set()
    while not core.is_terminal():
        rnd, opener = gs["current_round"], core.current_player()
        state = game.new_initial_state()
        state.apply_action(gs["player_cards"][opener])
        state.apply_action(gs["player_cards"][1 - opener])
        while not core.is_terminal() and gs["current_round"] == rnd:
            p = core.current_player()
            want = state.information_state_string(0 if p == opener else 1)
            seen.add(want)
            assert agent.hand_key(core.text(p)) == want
            legal = core.legal_actions(p)
            move = legal[int(rng.integers(len(legal)))]
            assert core.apply(p, move) is None
            if not state.is_terminal():
                state.apply_action(OS_MOVE[move])
    assert len(seen) >= 5


def test_a_view_it_cannot_read_says_what_is_missing():
    with pytest.raises(ValueError, match="Starting round"):
        kuhn_text_key("Your card is: 'K'")
    with pytest.raises(ValueError, match="Your card is"):
        kuhn_text_key("### Starting round 1 out of 5 rounds.")
