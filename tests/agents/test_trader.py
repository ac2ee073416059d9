"""The negotiation reference player: reads its own view, accepts only offers that raise its total value,
makes offers the game takes, never loses value, and beats random."""

from __future__ import annotations

import numpy as np

from arena.agents.specs import make_agent
from arena.envs.observation import Observation
from arena.envs.registry import make_core
from arena.match import play_match

GAME = "arena/SimpleNegotiation-v2"


def _value(core, p):
    gs = core.base.state.game_state
    return sum(q * gs["player_values"][p][r] for r, q in gs["player_resources"][p].items())


def test_it_accepts_exactly_the_offers_worth_taking_and_its_offers_are_legal():
    rng = np.random.default_rng(0)
    accepted = denied = 0
    for seed in range(20):
        core = make_core(GAME)
        core.reset(seed)
        trader = make_agent("trader", core, 0)
        while not core.is_terminal():
            p = core.current_player()
            if p == 0:
                offer = core._open_offer(0)
                move = trader.act(Observation(core, 0, 0))
                if offer is not None:
                    gs = core.base.state.game_state
                    vals = gs["player_values"][0]
                    worth = (sum(q * vals[r] for r, q in offer["offered_resources"].items())
                             - sum(q * vals[r] for r, q in offer["requested_resources"].items()))
                    can = all(gs["player_resources"][0].get(r, 0) >= q for r, q in offer["requested_resources"].items())
                    took = move == "[Accept]"
                    assert took == (worth > 0 and can), (move, worth, can)
                    accepted += took
                    denied += not took
                before = _value(core, 0)
                assert core.apply(0, move) is None, move  # every move it makes is one the game takes
                assert _value(core, 0) >= before  # an accepted offer never lowers its value
            else:
                assert core.apply(p, core.sample_action(p, rng)) is None
    assert accepted > 0 and denied > 0


def test_it_beats_random_and_makes_no_offer_on_the_last_turn():
    wins = 0.0
    for k in range(30):
        seats = ["trader", "random"] if k % 2 == 0 else ["random", "trader"]
        res = play_match(GAME, seats, seed=k)
        wins += res.returns[k % 2]
    assert wins / 30 > 0.7
    core = make_core(GAME)
    core.reset(1)
    st = core.base.state
    st.turn = st.max_turns - 1  # the last turn: an offer made now could not be answered
    move = make_agent("trader", core, 0).act(Observation(core, core.current_player(), 0))
    assert "[Offer" not in move
