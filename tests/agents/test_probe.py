"""The tactics probe: the one-ply tactics agent takes every win and blocks every single threat; a random
move scores its exact expectation within sampling error; positions are what they claim."""

import pytest

pytest.importorskip("pyspiel")

from arena.agents.probe import _wins, probe_positions, tactics_probe, agent_chooser, wilson  # noqa: E402
from arena.agents.specs import make_agent  # noqa: E402
from arena.envs.registry import make_core  # noqa: E402

C4 = "openspiel/connect_four-v0"


def test_tactics_agent_scores_one_and_random_its_expectation():
    core = make_core(C4)
    t = tactics_probe(C4, agent_chooser(make_agent("tactics", core, 0)), 200, seed=1)
    assert (t.win_taken, t.block_made) == (1.0, 1.0) and t.win_positions == t.block_positions == 200
    r = tactics_probe(C4, agent_chooser(make_agent("random", core, 0)), 200, seed=1)
    assert (r.win_random, r.block_random) == (t.win_random, t.block_random)  # the same positions
    for rate, n, expect in ((r.win_taken, r.win_positions, r.win_random), (r.block_made, r.block_positions, r.block_random)):
        lo, hi = wilson(rate, n)
        assert lo <= expect <= hi and 0.1 < expect < 0.3  # about one move in five or seven


def test_probe_positions_are_what_they_claim():
    core = make_core(C4)
    found = probe_positions(core, 30, seed=2)
    for moves, good in found["win"]:
        s = core.game.new_initial_state()
        for a in moves:
            s.apply_action(a)
        assert sorted(good) == sorted(_wins(s, s.current_player())) and good
    for moves, safe in found["block"]:
        s = core.game.new_initial_state()
        for a in moves:
            s.apply_action(a)
        me = s.current_player()
        assert not _wins(s, me) and 0 < len(safe) < len(s.legal_actions())
        for a in s.legal_actions():  # the safe moves are exactly those after which the opponent cannot win at once
            c = s.child(a)
            assert (a in safe) == (c.is_terminal() or not _wins(c, 1 - me))
    with pytest.raises(ValueError, match="two-player perfect-information"):
        tactics_probe("openspiel/leduc_poker-v0", lambda obs: [], 5)
