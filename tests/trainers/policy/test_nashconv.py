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


def _logit_response_gap(game: pyspiel.Game, table: os_policy.TabularPolicy, temperature: float,
                        magnet: os_policy.TabularPolicy | None = None) -> float:
    """Largest gap between `table` and magnet * exp(Q / temperature), normalised, at any information state,
    with Q summed here over every history (chance and opponent reach as weights, values by OpenSpiel's
    policy_value); the magnet uniform when None."""
    gap = 0.0
    for me in range(2):
        num, den = {}, {}

        def walk(state: pyspiel.State, w: float) -> None:
            if state.is_terminal():
                return
            if state.is_chance_node():
                for a, p in state.chance_outcomes():
                    walk(state.child(a), w * p)
                return
            if state.current_player() != me:
                probs = table.action_probabilities(state)
                for a in state.legal_actions():
                    walk(state.child(a), w * probs[a])
                return
            key = state.information_state_string()
            for a in state.legal_actions():  # my own reach is not a weight
                value = expected_game_score.policy_value(state.child(a), [table, table])[me]
                num[key, a] = num.get((key, a), 0.0) + w * value
                walk(state.child(a), w)
            den[key] = den.get(key, 0.0) + w

        walk(game.new_initial_state(), 1.0)
        for key, total in den.items():
            actions = sorted(a for k, a in num if k == key)
            q = np.array([num[key, a] / total for a in actions])
            want = np.exp((q - q.max()) / temperature)
            if magnet is not None:
                want = want * magnet.policy_for_key(key)[actions]
            gap = max(gap, float(np.abs(want / want.sum() - table.policy_for_key(key)[actions]).max()))
    return gap


def test_the_logit_qre_is_the_logit_response_to_its_own_values_and_sharpens_as_the_temperature_falls() -> None:
    """Kuhn: at each temperature the solved table is softmax(Q / temperature) at every information state
    (Q summed over the histories here, not by the solver's tree walk), NashConv falls with the
    temperature towards 0, and a step too large for the temperature oscillates and says so."""
    game = pyspiel.load_game("kuhn_poker")
    table, rows = None, []
    for t in (1.0, 0.3, 0.1):
        table, r = N.logit_qre("kuhn_poker", t, start=table)
        assert r["change"] <= 1e-7 and r["residual"] < 1e-4
        assert _logit_response_gap(game, table, t) < 1e-4
        assert r["nash_conv"] == pytest.approx(exploitability.nash_conv(game, table), abs=1e-12)
        rows.append(r)
    assert [round(r["nash_conv"], 3) for r in rows] == [0.340, 0.138, 0.038]
    assert rows[0]["entropy"] > rows[1]["entropy"] > rows[2]["entropy"]
    cold, r = N.logit_qre("kuhn_poker", 0.1, step=2.0, iterations=300)
    assert r["change"] > 0.1 and r["residual"] > 0.1 and r["nash_conv"] > 0.3
    with pytest.raises(ValueError, match="temperature and step must be > 0"):
        N.logit_qre("kuhn_poker", 0.0)


def test_a_logit_qre_with_a_magnet_stays_at_the_magnet_when_hot_and_responds_to_values_when_cold() -> None:
    """The magnet (here CFR's average policy after 3 iterations, NashConv 0.39): at a temperature of
    100 the fixed point is the magnet to within 0.01; at 0.2 it is magnet * exp(Q / 0.2) at every state
    (checked apart) and less exploitable than the magnet."""
    game = pyspiel.load_game("kuhn_poker")
    solver = cfr.CFRSolver(game)
    for _ in range(3):
        solver.evaluate_and_update_policy()
    magnet = os_policy.tabular_policy_from_callable(game, solver.average_policy())
    hot, r = N.logit_qre("kuhn_poker", 100.0, magnet=magnet)
    assert np.abs(hot.action_probability_array - magnet.action_probability_array).max() < 0.01
    cold, r = N.logit_qre("kuhn_poker", 0.2, magnet=magnet, start=hot)
    assert r["change"] <= 1e-7 and _logit_response_gap(game, cold, 0.2, magnet) < 1e-4
    assert _logit_response_gap(game, cold, 0.2) > 0.01  # the magnet matters: not the uniform one's point
    assert r["nash_conv"] < exploitability.nash_conv(game, magnet) - 0.05
