"""The cores' speed-ups change no answer: OpenSpiel's engine-bound methods and reward bookkeeping,
TextArena's views built on first read, the random agent's draws, the legal list an agent is shown."""

import random

import numpy as np
import pytest

from arena.agents import BaseAgent, make_agent
from arena.envs import make_core
from arena.envs.core import TERMINAL
from arena.envs.observation import Observation, ShownLegal
from arena.envs.openspiel_core import OpenSpielCore
from arena.envs.textarena_core import TextArenaCore, _PENDING
from arena.match import play_match


@pytest.mark.parametrize("game", ["openspiel/tic_tac_toe-v0", "openspiel/kuhn_poker-v0", "openspiel/2048-v0",
                                  "openspiel/cliff_walking-v0"])
def test_openspiel_bound_methods_and_rewards_answer_as_the_class_methods(game):
    core = make_core(game)
    rng = np.random.default_rng(0)
    core.reset(3)
    total = [0.0] * len(core.players)
    for _ in range(60):
        p = core.current_player()
        assert p == OpenSpielCore.current_player(core)
        if p == TERMINAL:
            break
        assert core.legal_actions(p) == OpenSpielCore.legal_actions(core, p)
        assert core.text(p) == OpenSpielCore.text(core, p)
        legal = core.legal_actions(p)
        assert core.apply(p, legal[int(rng.integers(len(legal)))]) is None
        step = core.step_rewards()
        total = [a + b for a, b in zip(total, step)]
        assert step == list(core.state.rewards())
        if not core.state.is_terminal():
            assert core.returns() == pytest.approx(total)
    assert core.returns() == pytest.approx(list(core.state.returns()))


def test_openspiel_engine_still_refuses_what_an_agent_slips_into_its_legal_list():
    class Sneaky(BaseAgent):
        def act(self, obs):
            obs.legal_actions.append(99)  # the list the loop checks the move against
            return 99

    res = play_match("openspiel/tic_tac_toe-v0", [Sneaky(), "random"], seed=0, match_id="m", record="text")
    assert res.outcome == "forfeit" and res.invalid == [2, 0]
    assert "OpenSpiel refused action 99" in res.replay.steps[0]["reason"]


def test_shown_legal_is_an_observation_with_its_list_as_an_attribute():
    core = make_core("openspiel/tic_tac_toe-v0")
    core.reset(0)
    legal = core.legal_actions(0)
    obs = ShownLegal(core, 0, 0, legal)
    assert isinstance(obs, Observation) and obs.legal_actions is legal and obs.feedback is None
    assert obs.text == Observation(core, 0, 0).text and obs.action_mask.sum() == 9


def test_random_agent_draws_as_random_randrange():
    agent = make_agent("random", None, 5)
    for seed in (0, 7, 123456789):
        agent.reset(seed)
        ref = random.Random(seed)

        class Obs:
            legal_actions = list(range(9))

        assert [agent.act(Obs) for _ in range(200)] == [Obs.legal_actions[ref.randrange(9)] for _ in range(200)]


def _eager(game):
    core = make_core(game)
    core._make_lazy = lambda: None  # TextArena's own get_observation every move, as before
    core._lazy = None
    return core


@pytest.mark.parametrize("game", ["arena/TicTacToe-v0", "arena/KuhnPoker-v1", "arena/SimpleNegotiation-v1",
                                  "textarena/TicTacToe-v0"])
def test_textarena_views_built_on_first_read_equal_textarenas_own(game):
    lazy, eager = make_core(game), _eager(game)
    assert isinstance(lazy, TextArenaCore) and lazy._lazy is not None
    rng = np.random.default_rng(1)
    for seed in range(3):
        lazy.reset(seed)
        eager.reset(seed)
        while lazy.current_player() != TERMINAL:
            p = lazy.current_player()
            assert p == eager.current_player()
            if seed == 1:  # read the views only now and then: a view left unread stays unbuilt
                assert lazy._texts[p] is _PENDING
            if seed != 1 or rng.random() < 0.3:
                assert [lazy.text(q) for q in range(2)] == [eager.text(q) for q in range(2)]
            action = lazy.sample_action(p, np.random.default_rng(int(rng.integers(1 << 30))))
            assert lazy.apply(p, action) == eager.apply(p, action)
        assert [lazy.text(q) for q in range(2)] == [eager.text(q) for q in range(2)]
        assert lazy.returns() == eager.returns()


def test_textarena_outside_get_observation_settles_the_pending_view_first():
    lazy, eager = make_core("arena/TicTacToe-v0"), _eager("arena/TicTacToe-v0")
    for core in (lazy, eager):
        core.reset(0)
        for a in ("[0]", "[3]", "[1]", "[4]", "[2]"):  # player 0 takes the top row
            core.apply(core.current_player(), a)
    assert lazy.current_player() == TERMINAL and lazy._texts[0] is _PENDING
    pid, closing = lazy.env.get_observation()  # the final view asks TextArena itself
    assert pid == 0 and "placed their symbol" in closing
    assert lazy.text(0) == eager.text(0) and lazy.text(0) != closing
