import io

import pytest

from arena.agents import make_agent
from arena.agents.human import HumanAgent
from arena.match.batch import play_matches, summarize
from arena.envs import make_core
from arena.errors import AgentSpecError
from arena.match import play_match
from plugins.agents import Custom


def test_spec_parsing_builds_the_right_agents():
    core = make_core("openspiel/tic_tac_toe-v0")
    m = make_agent("mcts:simulations=17,rollouts=2", core, 0)
    assert (m.simulations, m.rollouts) == (17, 2)
    c = make_agent("plugins.agents:Custom:depth=3", core)
    assert isinstance(c, Custom) and c.depth == 3 and c.spec == "plugins.agents:Custom:depth=3"


@pytest.mark.parametrize("spec, message", [
    ("nonsense", "unknown agent kind"),
    ("mcts:bogus=1", "unknown option .bogus."),
    ("random:5", "only key=value"),
    ("no_such_module_q:Thing", "no module .no_such_module_q."),
    ("no_such_module_q:x=1", "unknown agent kind .no_such_module_q."),
    ("plugins.agents:Missing", "no attribute"),
    ("", "non-empty"),
])
def test_bad_specs_are_clear_errors(spec, message):
    with pytest.raises(AgentSpecError, match=message):
        make_agent(spec, make_core("openspiel/tic_tac_toe-v0"))


def test_search_agents_refuse_games_they_cannot_play():
    with pytest.raises(ValueError, match="perfect-information"):
        make_agent("mcts", make_core("openspiel/kuhn_poker-v0"))
    with pytest.raises(ValueError, match="OpenSpiel games"):
        make_agent("cfr", make_core("arena/SimpleNegotiation-v2"))
    with pytest.raises(ValueError, match="negotiation view"):
        make_agent("trader", make_core("openspiel/kuhn_poker-v0"))
    with pytest.raises(ValueError, match="free text"):
        make_agent("first", make_core("arena/SimpleNegotiation-v2"))
    with pytest.raises(ValueError, match="two-player perfect-information"):
        make_agent("tactics", make_core("openspiel/kuhn_poker-v0"))
    with pytest.raises(ValueError, match="epsilon"):
        make_agent("tactics:epsilon=1.5", make_core("openspiel/tic_tac_toe-v0"))


def _ttt_state(moves):
    import pyspiel

    state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    for m in moves:
        state.apply_action(m)
    return state


@pytest.mark.parametrize("moves, expected", [
    ([0, 3, 1, 4], {2}),     # x holds 0 and 1: take the win at 2 (o also threatens 5: winning comes first)
    ([0, 3, 8, 4], {5}),     # o threatens 3-4-5 and x has no win: block at 5
    ([4, 0, 8, 2], {1}),     # x (to move) must block 0-1-2
])
def test_tactics_takes_wins_then_blocks(moves, expected):
    agent = make_agent("tactics", make_core("openspiel/tic_tac_toe-v0"), seed=0)
    state = _ttt_state(moves)
    assert {agent.choose(state) for _ in range(20)} == expected


def test_tactics_plays_at_random_without_threats_and_is_seeded():
    core = make_core("openspiel/tic_tac_toe-v0")
    a, b = make_agent("tactics", core, seed=3), make_agent("tactics", core, seed=3)
    first = [a.choose(_ttt_state([])) for _ in range(50)]
    assert first == [b.choose(_ttt_state([])) for _ in range(50)]
    assert len(set(first)) >= 7  # no threat on the empty board: uniform over the 9 cells


def test_tactics_beats_random_at_tic_tac_toe():
    res = play_matches("openspiel/tic_tac_toe-v0", ["tactics", "random"], 400, seed=1)
    tac, rnd = summarize(res, ["tactics", "random"])
    # one-ply tactics vs random, seat-averaged: about 0.79 wins and 0.05 losses (2,000 games)
    assert tac.win_rate >= 0.72 and tac.losses / tac.games <= 0.1


def test_mcts_beats_random_at_tic_tac_toe():
    res = play_matches("openspiel/tic_tac_toe-v0", ["mcts:simulations=100", "random"], 20, seed=1)
    mcts, rnd = summarize(res, ["mcts", "random"])
    assert mcts.win_rate >= 0.8 and mcts.losses <= 2


def test_cfr_earns_against_random_at_kuhn():
    res = play_matches("openspiel/kuhn_poker-v0", ["cfr:iterations=200", "random"], 1000, seed=1)
    cfr, _ = summarize(res, ["cfr", "random"])
    assert cfr.mean_return > 0.08  # equilibrium play gains about +0.14/hand against uniform random


def test_random_agent_is_seeded_and_uses_its_own_generator():
    r1 = play_match("openspiel/connect_four-v0", ["random", "random"], seed=9, match_id="m")
    r2 = play_match("openspiel/connect_four-v0", ["random", "random"], seed=9, match_id="m")
    assert [s["action"] for s in r1.replay.steps] == [s["action"] for s in r2.replay.steps]


def _human(text: str):
    out = io.StringIO()
    return HumanAgent(stdin=io.StringIO(text), stdout=out), out


def test_human_reasks_on_bad_input_and_accepts_number_or_text():
    human, out = _human("9\nfoo\n4\nx(0,0)\n\n2\n8\n6\n")
    res = play_match("openspiel/tic_tac_toe-v0", [human, "first"], seed=0, match_id="m")
    shown = out.getvalue()
    assert "9 is not a legal move" in shown
    assert "legal moves:" in shown and "4=x(1,1)" in shown
    ok = [s for s in res.replay.steps if s["player"] == 0]
    assert ok[0]["action"] == 4 and ok[0]["event"] == "ok"
    assert res.invalid == [0, 0]  # bad input is re-asked by the agent, never sent as a move


def test_human_on_a_text_game_accepts_bare_cell_numbers():
    human, out = _human("4\n0\n8\n2\n6\n1\n3\n5\n7\n")
    res = play_match("arena/TicTacToe-v0", [human, "random"], seed=0, match_id="m")
    assert res.replay.steps[0]["action"] == "[4]"
    assert "Current Board" in out.getvalue()


@pytest.mark.parametrize("text", ["", "4\n", "quit\n"])
def test_human_eof_or_quit_forfeits_cleanly(text, tmp_path):
    from arena.replays import read_replay, replay_path, write_replay

    human, _ = _human(text)
    res = play_match("openspiel/tic_tac_toe-v0", [human, "first"], seed=0, match_id="h")
    assert res.outcome == "forfeit" and res.forfeiter == 0 and res.returns == [-1.0, 1.0]
    assert res.replay.steps[-1]["event"] == "forfeit"
    back = read_replay(write_replay(res.replay, replay_path(tmp_path, "h")))
    assert back.result["outcome"] == "forfeit"


def test_a_seed_option_is_accepted_by_every_kind():
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.errors import AgentSpecError

    core = make_core("openspiel/tic_tac_toe-v0")
    for spec in ("random:seed=3", "mcts:simulations=5,seed=3", "first:seed=3"):
        agent = make_agent(spec, core, 1)  # the spec's seed, not a clash with the factory's own argument
        assert agent.spec == spec
    with pytest.raises(AgentSpecError, match="seed must be an integer"):
        make_agent("random:seed=x", core, 0)


def test_constant_agent_plays_one_continuous_action():
    from arena.agents.specs import make_agent
    from arena.envs import make_core
    from arena.errors import AgentSpecError, IncompatibleAgent

    core = make_core("MountainCarContinuous-v0")
    core.reset(0)
    a = make_agent("constant:value=0.25", core, 0)
    assert a.act(None).tolist() == [0.25] and a.act(None).dtype == core.action_space(0).dtype
    assert make_agent("constant:value=7", core, 0).act(None).tolist() == [1.0]  # clipped to the box
    assert make_agent("constant", core, 0).act(None).tolist() == [0.0]
    with pytest.raises(AgentSpecError, match="does not fit"):
        make_agent("constant:value=abc", core, 0)
    with pytest.raises(AgentSpecError, match="unknown option 'level'"):
        make_agent("constant:level=1", core, 0)
    with pytest.raises(IncompatibleAgent, match="discrete actions"):
        make_agent("constant", make_core("CartPole-v1"), 0)
