"""The lean move path keeps every behaviour of the match loop: results, timing counts, hooks, limits."""

import pytest

from arena.agents import BaseAgent, make_agent
from arena.match import InvalidMovePolicy, play_match
from arena.match.loop import MatchResult, _outcome
from plugins.agents import Scripted


class Watcher(BaseAgent):
    """Random moves; remembers what it is told of the others' moves and how the match ended."""

    spec = "watcher"

    def __init__(self, seed=0):
        self.inner = make_agent("random", None, seed)
        self.seen, self.ended = [], []

    def reset(self, seed=None):
        self.inner.reset(seed)
        self.seen = []

    def act(self, obs):
        return self.inner.act(obs)

    def observe(self, player, action):
        self.seen.append((player, action))

    def match_over(self, view, result, seat):
        self.ended.append((seat, result.returns, view))


@pytest.mark.parametrize("record", ["actions", "text", False])
def test_result_fields_and_counts_in_every_record_mode(record):
    res = play_match("openspiel/tic_tac_toe-v0", [Scripted([999, 4]), "random"], seed=1, match_id="m", record=record)
    assert isinstance(res, MatchResult)
    assert (res.match_id, res.game_id, res.seed, res.agents) == ("m", "openspiel/tic_tac_toe-v0", 1, ["?", "random"])
    assert res.outcome == "normal" and res.invalid == [1, 0] and res.forfeiter is None
    assert res.winner == _outcome(res.returns)[0] and res.draw == _outcome(res.returns)[1]
    assert res.move_calls[0] == (res.moves + 1) // 2 + 1 and res.move_calls[1] == res.moves // 2  # one retry
    assert all(0 <= m <= t for m, t in zip(res.move_time_max, res.move_time_total)) and res.duration > 0
    assert res.replay_path is None and res.seats is None
    if record:
        assert res.replay.result["moves"] == res.moves and res.replay.result["invalid"] == [1, 0]
        assert len(res.replay.steps) == res.moves + 1
    else:
        assert res.replay is None
    same = play_match("openspiel/tic_tac_toe-v0", [Scripted([999, 4]), "random"], seed=1, match_id="m",
                      record="text")
    assert (same.returns, same.moves, same.move_calls) == (res.returns, res.moves, res.move_calls)


def test_outcome():
    assert _outcome([1.0, -1.0]) == (0, False) and _outcome([-1.0, 1.0]) == (1, False)
    assert _outcome([0.0, 0.0]) == (None, True) and _outcome([1.0, 1.0, 0.0]) == (None, False)
    assert _outcome([3.0]) == (None, False)


@pytest.mark.parametrize("record", ["actions", False])
def test_agents_observe_the_others_moves_and_see_the_end(record):
    a, b = Watcher(1), Watcher(2)
    res = play_match("openspiel/connect_four-v0", [a, b], seed=3, match_id="m", record="text")
    moves = [(s["player"], s["action"]) for s in res.replay.steps]
    again = play_match("openspiel/connect_four-v0", [a, b], seed=3, match_id="m", record=record)
    assert again.returns == res.returns
    assert a.seen == [m for m in moves if m[0] == 1] and b.seen == [m for m in moves if m[0] == 0]
    assert [e[0] for e in a.ended] == [0, 0] and [e[0] for e in b.ended] == [1, 1] and a.ended[-1][2]


def test_simultaneous_observers(sample_plugin):
    a, b = Watcher(1), Watcher(2)
    res = play_match("plugin/RockPaperScissors-v2", [a, b], seed=3, match_id="m", record="actions")
    assert len(a.seen) == len(b.seen) == res.moves == 5
    assert [p for p, _ in a.seen] == [1] * 5 and [p for p, _ in b.seen] == [0] * 5


@pytest.mark.parametrize("record", ["actions", "text"])
def test_max_moves_stops_in_both_modes(record):
    res = play_match("openspiel/connect_four-v0", ["random", "random"], seed=0, max_moves=4, match_id="m",
                     record=record)
    assert res.outcome == "max_moves" and res.moves == 4 and res.reason == "stopped after 4 moves"
    assert len(res.replay.steps) == 4 and res.replay.header["max_moves"] == 4


def test_numpy_integer_moves_are_validated_then_recorded_as_ints():
    import numpy as np

    res = play_match("openspiel/tic_tac_toe-v0", [Scripted([np.int64(4)]), "first"], seed=0, match_id="m",
                     record="actions")
    assert res.invalid == [0, 0] and res.replay.steps[0]["action"] == 4 and type(res.replay.steps[0]["action"]) is int


def test_engine_refusal_in_a_text_game_retries_with_the_reason():
    agent = Scripted(["[4]", "[4]", "[8]"])
    res = play_match("arena/TicTacToe-v0", [agent, "first"], seed=0, policy=InvalidMovePolicy(allowance=1),
                     match_id="m", record="actions")
    steps = res.replay.steps
    assert [(s["player"], s["action"], s["event"]) for s in steps[:4]] == [
        (0, "[4]", "ok"), (1, "[0]", "ok"), (0, "[4]", "invalid"), (0, "[8]", "ok")]
    assert "occupied" in steps[2]["reason"] and "occupied" in agent.feedback[2]
    assert res.invalid[0] == 1 and res.outcome == "normal"
