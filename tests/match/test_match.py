import random
import time

import numpy as np
import pytest

from arena.agents import BaseAgent, Forfeit
from arena.envs import list_game_ids, make_core
from arena.match import InvalidMovePolicy, play_match
from arena.replays import encode_action
from plugins.agents import Scripted

TWO_PLAYER = ["openspiel/tic_tac_toe-v0", "openspiel/kuhn_poker-v0", "arena/TicTacToe-v0", "arena/KuhnPoker-v1",
              "arena/SimpleNegotiation-v1"]


@pytest.mark.parametrize("game", TWO_PLAYER)
def test_same_seed_same_replay(game):
    a = play_match(game, ["random", "random"], seed=11, match_id="m").replay.without_timing()
    b = play_match(game, ["random", "random"], seed=11, match_id="m").replay.without_timing()
    c = play_match(game, ["random", "random"], seed=12, match_id="m").replay.without_timing()
    assert a.to_text() == b.to_text()
    assert a.steps != c.steps or game.endswith("kuhn_poker-v0")  # kuhn is short; other games differ


def test_textarena_does_not_touch_global_random():
    random.seed(123)
    before = random.getstate()
    r1 = play_match("arena/KuhnPoker-v1", ["random", "random"], seed=5, match_id="m")
    assert random.getstate() == before
    random.seed(999)  # a different global state must not change the match
    r2 = play_match("arena/KuhnPoker-v1", ["random", "random"], seed=5, match_id="m")
    assert r1.replay.without_timing().to_text() == r2.replay.without_timing().to_text()


GARBAGE = [999, -1, None, float("nan"), "x" * (1 << 20), [1, 2], {"a": 1}, object(), np.nan, True]


# StarCraft II ids need the game (each match launches it): tests/sc2 fuzzes them over the test game.
@pytest.mark.parametrize("game", [g for g in list_game_ids() if not g.startswith("sc2/")])
def test_illegal_move_fuzz_never_crashes(game):
    core = make_core(game)
    for k, junk in enumerate(GARBAGE):
        junk_agent = Scripted([junk, junk])
        res = play_match(core, [junk_agent, "random"] if len(core.players) > 1 else [junk_agent], seed=k,
                         match_id="fuzz")
        # Two garbage moves in a row: the first is retried, the second loses.
        assert res.outcome == "forfeit", (game, junk, res.reason)
        if len(core.players) > 1:
            assert res.forfeiter == 0 and res.returns[0] == -1.0
            assert all(r == 1.0 for r in res.returns[1:])
        else:  # a single-agent task: the episode ends with what it earned (nothing, before any move)
            assert res.forfeiter == 0 and res.returns == [0.0]
        assert res.invalid[0] == 2
        events = [s["event"] for s in res.replay.steps if s["player"] == 0]
        assert events[:2] == ["invalid", "invalid"]
        assert junk_agent.feedback[1]  # the retry was told why


def test_one_retry_then_a_legal_move_continues():
    agent = Scripted([999, 4])
    res = play_match("openspiel/tic_tac_toe-v0", [agent, "first"], seed=0, match_id="m")
    assert res.outcome == "normal"
    assert res.invalid == [1, 0]
    assert "not legal" in agent.feedback[1]
    first = res.replay.steps[:2]
    assert [s["event"] for s in first] == ["invalid", "ok"] and first[1]["action"] == 4


def test_allowance_zero_loses_at_first_invalid_move():
    res = play_match("openspiel/tic_tac_toe-v0", [Scripted([999]), "random"], seed=0,
                     policy=InvalidMovePolicy(allowance=0), match_id="m")
    assert res.outcome == "forfeit" and res.invalid == [1, 0] and res.returns == [-1.0, 1.0]


def test_text_game_invalid_move_judged_by_the_game():
    agent = Scripted(["[9]", "hello", "[4]"])
    res = play_match("arena/TicTacToe-v0", [agent, "random"], seed=0, policy=InvalidMovePolicy(allowance=2),
                     match_id="m")
    assert res.invalid[0] == 2
    reasons = [s["reason"] for s in res.replay.steps[:2]]
    assert "Must be between 0 and 8" in reasons[0] and "format" in reasons[1]
    assert res.replay.steps[2]["event"] == "ok"


def test_agent_exception_counts_as_invalid_and_never_escapes():
    agent = Scripted([RuntimeError("boom"), RuntimeError("boom again")])
    res = play_match("openspiel/connect_four-v0", [agent, "random"], seed=0, match_id="m")
    assert res.outcome == "forfeit"
    assert res.replay.steps[0]["event"] == "error" and "boom" in res.replay.steps[0]["reason"]


def test_forfeit_loses_at_once_even_with_allowance():
    res = play_match("openspiel/tic_tac_toe-v0", ["random", Scripted([Forfeit("bye")])], seed=0,
                     policy=InvalidMovePolicy(allowance=5), match_id="m")
    assert res.outcome == "forfeit" and res.forfeiter == 1 and res.returns == [1.0, -1.0]
    assert res.replay.result["outcome"] == "forfeit"


class Sleeper(BaseAgent):
    def act(self, obs):
        time.sleep(30)


def test_hanging_agent_hits_the_move_time_limit():
    res = play_match("openspiel/tic_tac_toe-v0", [Sleeper(), "random"], seed=0, move_time_limit=0.2,
                     match_id="m")
    assert res.outcome == "forfeit" and res.forfeiter == 0
    assert [s["event"] for s in res.replay.steps] == ["timeout", "timeout"]


def test_move_time_limit_off_the_main_thread():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        res = pool.submit(play_match, "openspiel/tic_tac_toe-v0", [Sleeper(), "random"], 0,
                          move_time_limit=0.2, match_id="m").result()
    assert res.outcome == "forfeit" and res.replay.steps[0]["event"] == "timeout"


def test_simultaneous_moves_parallel_env(sample_plugin):
    res = play_match("plugin/RockPaperScissors-v2", ["random", "random"], seed=3, match_id="m")
    assert res.outcome == "normal"
    assert res.moves == 5  # max_cycles=5 in the plug-in registration
    assert sum(res.returns) == 0
    assert len(res.replay.steps) == 10  # two players a step
    same = play_match("plugin/RockPaperScissors-v2", ["random", "random"], seed=3, match_id="m")
    assert same.replay.without_timing().to_text() == res.replay.without_timing().to_text()


def test_simultaneous_illegal_move_forfeits(sample_plugin):
    res = play_match("plugin/RockPaperScissors-v2", ["random", Scripted([7, 8])], seed=3, match_id="m")
    assert res.outcome == "forfeit" and res.forfeiter == 1


def test_single_agent_continuous_task(sample_plugin):
    res = play_match("plugin/Pendulum-v1", ["random"], seed=2, match_id="m")
    assert res.outcome == "normal" and res.moves == 50
    assert res.returns[0] < 0 and res.winner is None and not res.draw
    assert len(res.replay.steps[0]["action"]) == 1
    nan = play_match("plugin/Pendulum-v1", [Scripted([[float("nan")], [float("nan")]])], seed=2, match_id="m")
    assert nan.outcome == "forfeit" and "NaN" in nan.replay.steps[0]["reason"]
    # out-of-bounds torques are clipped to the box, not refused
    big = play_match("plugin/Pendulum-v1", [Scripted([[100.0]])], seed=2, max_moves=1, match_id="m")
    assert big.invalid == [0] and big.outcome == "max_moves"


def test_plain_pettingzoo_aec_env_plays_unchanged(sample_plugin):
    res = play_match("plugin/TicTacToePZ-v3", ["random", "random"], seed=4, match_id="m")
    assert res.outcome == "normal" and sorted(res.returns) in ([-1.0, 1.0], [0.0, 0.0])
    mcts_vs = play_match("plugin/TicTacToePZ-v3", [Scripted([99, 99]), "random"], seed=4, match_id="m")
    assert mcts_vs.outcome == "forfeit"


def test_wrong_number_of_agents_is_a_clear_error():
    with pytest.raises(ValueError, match="has 2 players"):
        play_match("openspiel/tic_tac_toe-v0", ["random"], seed=0)


def test_wrong_player_is_refused_by_the_core():
    core = make_core("openspiel/tic_tac_toe-v0")
    core.reset(0)
    assert core.current_player() == 0
    action, reason = core.validate(1, 4)
    assert action is None and "not player_1's turn" in reason


def test_result_fields_and_move_timing():
    res = play_match("openspiel/tic_tac_toe-v0", ["mcts:simulations=20", "random"], seed=1, match_id="m")
    assert res.moves == len([s for s in res.replay.steps if s["event"] == "ok"])
    assert all(s["time"] >= 0 for s in res.replay.steps)
    assert res.move_time_max[0] <= res.move_time_total[0]
    assert res.replay.header["agents"] == ["mcts:simulations=20", "random"]  # the spec as given
    assert res.replay.steps[0]["action_text"] is not None


def test_encode_action_bounds_garbage():
    assert encode_action(3) == 3 and encode_action(np.int64(3)) == 3
    assert encode_action("x" * 10_000) == {"truncated": "x" * 200, "length": 10_000}
    assert encode_action(float("nan")) == {"repr": "nan"}
    assert encode_action(np.array([0.5, 1.0])) == [0.5, 1.0]


@pytest.mark.parametrize("game", ["arena/TicTacToe-v0", "arena/KuhnPoker-v1", "arena/SimpleNegotiation-v1"])
def test_reused_core_does_not_leak_history_between_matches(game):
    core = make_core(game)
    for s in range(3):
        reused = play_match(core, ["random", "random"], seed=s, match_id="m").replay.without_timing()
    fresh = play_match(game, ["random", "random"], seed=2, match_id="m").replay.without_timing()
    assert reused.to_text() == fresh.to_text()


def test_batch_worker_processes_give_the_same_results():
    from arena.match.batch import play_matches, summarize

    one = play_matches("openspiel/connect_four-v0", ["random", "first"], 12, seed=4, workers=1, record=True)
    two = play_matches("openspiel/connect_four-v0", ["random", "first"], 12, seed=4, workers=2, record=True)
    assert [r.match_id for r in one] == [r.match_id for r in two]
    assert [r.returns for r in one] == [r.returns for r in two]
    assert [r.seats for r in one] == [r.seats for r in two]
    # seats rotate: each agent sits first in half the matches
    assert sum(r.seats[0] == 0 for r in one) == 6
    a, b = summarize(one, ["random", "first"])
    assert a.games == b.games == 12 and a.wins + a.draws + a.losses == 12
