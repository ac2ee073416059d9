"""NashConv of tabulated policy functions on kuhn_poker and leduc_poker.

Reference figures (OpenSpiel 2.0.2, exact best responses):
* kuhn_poker  uniform random NashConv = 0.916667 (11/12; exploitability 0.458333)
* leduc_poker uniform random NashConv = 4.747222 (exploitability 2.373611)
"""

from __future__ import annotations

import time

import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as os_policy
from open_spiel.python.algorithms import cfr, expected_game_score, exploitability

from arena.trainers.policy import nashconv as N


def uniform_fn(x: np.ndarray, legal: np.ndarray, player: int) -> np.ndarray:
    return legal / legal.sum()


def test_kuhn_uniform_equals_openspiel() -> None:
    game = pyspiel.load_game("kuhn_poker")
    theirs = exploitability.nash_conv(game, os_policy.UniformRandomPolicy(game))
    assert N.nash_conv_of("kuhn_poker", uniform_fn) == pytest.approx(theirs, abs=1e-12)
    assert N.uniform_nash_conv("kuhn_poker") == pytest.approx(theirs, abs=1e-12)
    assert theirs == pytest.approx(11 / 12, abs=1e-12)
    # the observation tensor drives the same uniform table
    assert N.nash_conv_of("kuhn_poker", uniform_fn, tensor="observation") == pytest.approx(theirs, abs=1e-12)


def test_cfr_policy_through_policy_fn() -> None:
    # A CFR average policy, looked up by information-state string from the tensor the function is handed,
    # must have the NashConv that OpenSpiel computes for the CFR policy itself.
    game = pyspiel.load_game("kuhn_poker")
    solver = cfr.CFRSolver(game)
    for _ in range(200):
        solver.evaluate_and_update_policy()
    average = solver.average_policy()
    theirs = exploitability.nash_conv(game, average)

    # information_state_tensor is a lossless encoding of the information state in Kuhn poker
    key_of: dict[tuple[float, ...], str] = {}
    for state in os_policy.TabularPolicy(game).states:
        p = state.current_player()
        key_of[tuple(state.information_state_tensor(p))] = state.information_state_string(p)
    assert len(key_of) == 12

    seen: list[tuple[int, np.ndarray]] = []

    def cfr_fn(x: np.ndarray, legal: np.ndarray, player: int) -> np.ndarray:
        seen.append((player, legal))
        return np.asarray(average.policy_for_key(key_of[tuple(x.tolist())]))

    ours = N.nash_conv_of("kuhn_poker", cfr_fn)
    assert ours == pytest.approx(theirs, abs=1e-9)
    assert len(seen) == 12 and {p for p, _ in seen} == {0, 1}
    assert ours < 0.02  # 200 CFR iterations are close to equilibrium
    assert N.cfr_nash_conv("kuhn_poker", 200) == pytest.approx(theirs, abs=1e-12)


def test_leduc_uniform() -> None:
    # leduc_poker uniform random NashConv = 4.747222 (exploitability 2.373611); 936 information states
    calls = []

    def fn(x: np.ndarray, legal: np.ndarray, player: int) -> np.ndarray:
        calls.append(x.shape)
        return uniform_fn(x, legal, player)

    start = time.perf_counter()
    value = N.nash_conv_of("leduc_poker", fn)
    elapsed = time.perf_counter() - start
    assert value == pytest.approx(4.747222222222222, abs=1e-9)
    assert value == pytest.approx(N.uniform_nash_conv("leduc_poker"), abs=1e-12)
    assert len(calls) == 936 and set(calls) == {(30,)}  # leduc's information_state_tensor has 30 entries
    assert elapsed < 30.0  # about 0.2 s on one core; generous for a loaded machine


def test_params_and_deterministic_policy() -> None:
    # three-player Kuhn: a policy that always checks/folds (action 0) is exploitable; the table sees 3 players
    players = set()

    def always_first(x: np.ndarray, legal: np.ndarray, player: int) -> np.ndarray:
        players.add(player)
        out = np.zeros_like(legal)
        out[np.flatnonzero(legal)[0]] = 1.0
        return out

    value = N.nash_conv_of("kuhn_poker", always_first, params={"players": 3})
    assert players == {0, 1, 2}
    assert value > 0.0


def test_bad_policies_are_named() -> None:
    with pytest.raises(ValueError, match="shape"):
        N.nash_conv_of("kuhn_poker", lambda x, legal, p: np.ones(3) / 3)
    with pytest.raises(ValueError, match="illegal"):
        # leduc: fold is illegal when there is nothing to call, so a mask-blind uniform leaks 1/3 there
        N.nash_conv_of("leduc_poker", lambda x, legal, p: np.full(legal.shape, 1 / 3))
    with pytest.raises(ValueError, match="negative or non-finite"):
        N.nash_conv_of("kuhn_poker", lambda x, legal, p: np.array([np.nan, 1.0]))
    with pytest.raises(ValueError, match="tensor kind"):
        N.nash_conv_of("kuhn_poker", uniform_fn, tensor="pixels")
    with pytest.raises(ValueError, match="cannot load"):
        N.nash_conv_of("no_such_game", uniform_fn)


def test_expected_payoff_is_exact_and_seat_balanced():
    # uniform against uniform: zero-sum and symmetric over the two seats, so exactly 0
    assert N.expected_payoff("leduc_poker", uniform_fn) == pytest.approx(0.0, abs=1e-12)
    # Kuhn's equilibrium value is -1/18 for the first seat and +1/18 for the second: 0 seat-balanced,
    # and the uniform policy loses to a near-equilibrium CFR+ table
    table = N.cfr_table("kuhn_poker", 40)
    assert N.expected_payoff("kuhn_poker", uniform_fn, table) < -0.1
    game = pyspiel.load_game("kuhn_poker")
    seat0 = expected_game_score.policy_value(game.new_initial_state(), [table, table])[0]
    assert seat0 == pytest.approx(-1 / 18, abs=5e-3)


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_the_split_over_information_states_sums_to_nash_conv(name) -> None:
    """The performance-difference split is exact: every term >= 0, each player's terms sum to what its
    best response gains, and the self-play reach of a player's states sums to its expected decisions."""
    game = pyspiel.load_game(name)
    solver = cfr.CFRSolver(game)
    for _ in range(5):
        solver.evaluate_and_update_policy()
    for policy in (os_policy.UniformRandomPolicy(game), solver.average_policy()):
        rows = N.exploitability_by_infostate(game, policy)
        assert len({(r["player"], r["infostate"]) for r in rows}) == len(rows) == (12 if name == "kuhn_poker" else 936)
        assert min(r["gain"] for r in rows) >= -1e-12
        assert sum(r["gain"] for r in rows) == pytest.approx(exploitability.nash_conv(game, policy), abs=1e-9)
        for r in rows:
            assert r["best"] in r["policy"] and sum(r["policy"].values()) == pytest.approx(1.0)


def test_the_self_play_reach_of_kuhns_first_decisions_is_a_third_each() -> None:
    game = pyspiel.load_game("kuhn_poker")
    rows = N.exploitability_by_infostate(game, os_policy.UniformRandomPolicy(game))
    first = sorted((r["infostate"], r["visit"]) for r in rows if r["player"] == 0 and len(r["infostate"]) == 1)
    assert first == [("0", pytest.approx(1 / 3)), ("1", pytest.approx(1 / 3)), ("2", pytest.approx(1 / 3))]
    # after a pass and a bet (half the games reach player 1's bet, half of those player 0's answer)
    answer = [r["visit"] for r in rows if r["player"] == 0 and r["infostate"].endswith("pb")]
    assert answer == pytest.approx([1 / 12] * 3)
