"""Exploitability (NashConv) of a neural policy on small OpenSpiel games.

NashConv (Lanctot et al. 2017, "A Unified Game-Theoretic Approach to
Multiagent Reinforcement Learning") of a joint policy pi is the sum
over players of what each could gain by a best response to the others::

    NashConv(pi) = sum_i ( max_{pi_i'} u_i(pi_i', pi_-i) - u_i(pi) )

It is 0 exactly at a Nash equilibrium; for two-player zero-sum games
exploitability is ``NashConv / 2``.

:func:`nash_conv_of` tabulates a policy *function* over every information
state of the game (the network is asked once per information state, with the
state's tensor and legal-action mask) and hands the table to OpenSpiel's exact
best-response computation.  :func:`uniform_nash_conv` and
:func:`cfr_nash_conv` give reference figures to compare a learner against.

Reference figures (OpenSpiel 2.0.2): uniform random kuhn_poker 0.916667,
leduc_poker 4.747222; vanilla CFR kuhn_poker 0.137 after 10 iterations, 0.0165
after 100, 0.0067 after 200; leduc_poker 1.777 after 10, 0.378 after 50 (about
4 s).  One leduc_poker NashConv (936 information states) takes about 0.2 s on
one CPU core, the table included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyspiel
from open_spiel.python import policy as os_policy
from open_spiel.python.algorithms import action_value, best_response, cfr, expected_game_score, exploitability

__all__ = [
    "TENSOR_KINDS",
    "PolicyFn",
    "cfr_nash_conv",
    "cfr_table",
    "exploitability_by_infostate",
    "expected_payoff",
    "logit_qre",
    "nash_conv_of",
    "policy_table",
    "tabulate",
    "uniform_nash_conv",
]

#: ``policy_fn(state_tensor, legal_mask, player) -> probabilities over num_distinct_actions``.
PolicyFn = Callable[[np.ndarray, np.ndarray, int], np.ndarray]

TENSOR_KINDS: tuple[str, ...] = ("information_state", "observation")

#: Probability mass a policy may leave on illegal actions (float round-off of a masked softmax).
ILLEGAL_MASS_TOL = 1e-6


def _load(game_name: str, params: Mapping[str, Any] | None) -> pyspiel.Game:
    try:
        return pyspiel.load_game(game_name, dict(params or {}))
    except pyspiel.SpielError as exc:
        raise ValueError(
            f"cannot load OpenSpiel game {game_name!r} with params {dict(params or {})}: {exc}; "
            "check the name against pyspiel.registered_names() and the game's parameters"
        ) from exc


def _check_game(game: pyspiel.Game, tensor: str) -> None:
    if tensor not in TENSOR_KINDS:
        raise ValueError(f"unknown tensor kind {tensor!r}; valid kinds: {', '.join(TENSOR_KINDS)}")
    gt = game.get_type()
    name = gt.short_name
    if gt.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
        raise ValueError(f"NashConv here needs a sequential (turn-based) game; {name!r} is not")
    if tensor == "information_state" and not gt.provides_information_state_tensor:
        raise ValueError(f"game {name!r} has no information_state_tensor; pass tensor='observation'")
    if tensor == "observation" and not gt.provides_observation_tensor:
        raise ValueError(f"game {name!r} has no observation_tensor; pass tensor='information_state'")


def _describe(game: pyspiel.Game, state: pyspiel.State, player: int) -> str:
    """``player P at 'info state'`` for error messages (the history when the game has no info-state string)."""
    if game.get_type().provides_information_state_string:
        key = state.information_state_string(player)
    else:
        key = state.history_str()
    return f"player {player} at {key!r}"


def tabulate(
    game: pyspiel.Game,
    policy_fn: PolicyFn,
    tensor: str = "information_state",
) -> os_policy.TabularPolicy:
    """Query ``policy_fn`` at every information state of ``game``; return the table.

    The table is an OpenSpiel ``TabularPolicy`` (one row per information
    state, keyed by the information-state string).  For each row
    ``policy_fn(x, legal_mask, player)`` gets ``x``, the state's
    ``information_state_tensor(player)`` or ``observation_tensor(player)``
    (``tensor``) as float32, and the 0/1 legal mask over
    ``num_distinct_actions``, and must return that many non-negative
    probabilities.  Mass on illegal actions up to ``1e-6`` is dropped and the
    row renormalised; anything else is a ValueError naming the state.
    """
    _check_game(game, tensor)
    table = os_policy.TabularPolicy(game)
    num_actions = game.num_distinct_actions()
    for index, state in enumerate(table.states):
        player = state.current_player()
        if tensor == "information_state":
            x = state.information_state_tensor(player)
        else:
            x = state.observation_tensor(player)
        legal = table.legal_actions_mask[index].astype(np.float32)
        probs = np.asarray(policy_fn(np.asarray(x, dtype=np.float32), legal.copy(), player), dtype=np.float64)
        where = _describe(game, state, player)
        if probs.shape != (num_actions,):
            raise ValueError(
                f"policy_fn returned shape {probs.shape} for {where}; "
                f"return one probability per distinct action, shape ({num_actions},)"
            )
        if not np.all(np.isfinite(probs)) or np.any(probs < 0):
            raise ValueError(f"policy_fn returned negative or non-finite probabilities {probs.tolist()} for {where}")
        illegal_mass = float(probs[legal == 0].sum())
        if illegal_mass > ILLEGAL_MASS_TOL:
            raise ValueError(
                f"policy_fn put probability {illegal_mass:.3g} on illegal actions for {where}; "
                "mask the logits with legal_mask before the softmax"
            )
        probs = np.where(legal > 0, probs, 0.0)
        total = probs.sum()
        if not total > 0:
            raise ValueError(f"policy_fn gave no probability to any legal action for {where}")
        table.action_probability_array[index] = probs / total
    return table


def nash_conv_of(
    game_name: str,
    policy_fn: PolicyFn,
    params: dict | None = None,
    tensor: str = "information_state",
) -> float:
    """NashConv of the policy ``policy_fn`` on the OpenSpiel game ``game_name`` (``params`` its parameters).

    ``policy_fn(state_tensor, legal_mask, player) -> probs`` is asked once at
    every information state (see :func:`tabulate` for the contract and
    ``tensor`` for which tensor it sees); the table goes to OpenSpiel's exact
    best response.  The same function plays every player, each seeing its own
    information state.  0 at a Nash equilibrium, larger is more exploitable.
    """
    game = _load(game_name, params)
    return float(exploitability.nash_conv(game, tabulate(game, policy_fn, tensor)))


def uniform_nash_conv(game_name: str, params: dict | None = None) -> float:
    """NashConv of the uniform random policy (OpenSpiel's own ``UniformRandomPolicy``): the starting point."""
    game = _load(game_name, params)
    return float(exploitability.nash_conv(game, os_policy.UniformRandomPolicy(game)))


def cfr_nash_conv(game_name: str, iterations: int, params: dict | None = None) -> float:
    """NashConv of the average policy of ``iterations`` iterations of vanilla CFR (Zinkevich et al. 2007).

    A reference for what a tabular equilibrium solver reaches with that much work.
    """
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    game = _load(game_name, params)
    solver = cfr.CFRSolver(game)
    for _ in range(iterations):
        solver.evaluate_and_update_policy()
    return float(exploitability.nash_conv(game, solver.average_policy()))


def cfr_table(game_name: str, iterations: int, params: dict | None = None) -> os_policy.TabularPolicy:
    """The average policy the arena's ``cfr:iterations=N`` agent plays (CFR+, solved once a machine:
    `arena.agents.search.cfr_average_policy`), as an OpenSpiel table."""
    from arena.agents.search import cfr_average_policy

    game = _load(game_name, params)
    solved = cfr_average_policy(game, int(iterations))
    table = os_policy.TabularPolicy(game)
    for key, row in table.state_lookup.items():
        probs = solved.policy_for_key(key)
        for a in range(table.action_probability_array.shape[1]):
            table.action_probability_array[row, a] = probs.get(a, 0.0) if isinstance(probs, dict) else probs[a]
    return table


def policy_table(game_name: str, source: str) -> os_policy.TabularPolicy:
    """A policy as an OpenSpiel table: ``cfr:N`` (CFR+'s average policy after N iterations, `cfr_table`)
    or a policy checkpoint folder of the game (its network asked at every information state)."""
    if source.startswith("cfr:"):
        return cfr_table(game_name, int(source[4:]))
    from arena.inference.policy_nets import load_policy

    net, _ = load_policy(source)
    return tabulate(_load(game_name, None), net_policy_fn(net))


def logit_qre(game_name: str, temperature: float, *, step: float = 0.05, iterations: int = 4000,
              tol: float = 1e-7, start: os_policy.TabularPolicy | None = None,
              magnet: os_policy.TabularPolicy | None = None,
              params: dict | None = None) -> tuple[os_policy.TabularPolicy, dict]:
    """The fixed point a learner regularised by ``KL(pi || magnet)`` settles at: the agent logit quantal
    response equilibrium at ``temperature`` (in the game's payoff units), where at every information
    state ``pi(a | s)`` is proportional to ``magnet(a | s) * exp(Q_pi(s, a) / temperature)`` and
    ``Q_pi`` is the exact value of playing ``a`` there and ``pi`` after (both players, the same table).
    The magnet is uniform unless one is given (a table of the same game, e.g. an imitation policy).

    A learner whose loss per state is ``-advantage * log pi + kl_coef * KL(pi || magnet)``, on rewards
    scaled by ``reward_scale``, has this fixed point at ``temperature = kl_coef / reward_scale``.

    Solved by magnetic mirror descent with exact values (Sokota et al. 2022, the behavioural form):
    ``pi <- (pi * magnet ** (step * temperature) * exp(step * Q)) ** (1 / (1 + step * temperature))``,
    normalised, until no probability moves more than ``tol`` (or ``iterations`` pass). ``start`` (a
    table of the same game) warm-starts it: solving a falling sequence of temperatures, each from the
    last, converges in far fewer iterations. Returns the table and ``{temperature, nash_conv,
    iterations, change, residual, entropy}``: ``change`` the last iteration's largest move,
    ``residual`` the largest gap between ``pi`` and the logit response to its own values (0 at the
    fixed point), ``entropy`` the mean over information states in nats. A step too large for the
    temperature oscillates instead of converging; ``change`` says so."""
    if not temperature > 0 or not step > 0 or iterations < 1:
        raise ValueError(f"temperature and step must be > 0 and iterations >= 1, got {temperature}, {step}, "
                         f"{iterations}")
    game = _load(game_name, params)
    table = os_policy.TabularPolicy(game)
    if start is not None:
        table.action_probability_array[:] = start.action_probability_array
    legal = table.legal_actions_mask.astype(bool)
    log_magnet = np.zeros(legal.shape)
    if magnet is not None:
        log_magnet = np.log(np.where(legal, np.maximum(magnet.action_probability_array, 1e-300), 1.0))
    calc = action_value.TreeWalkCalculator(game)

    def values() -> np.ndarray:
        return np.asarray(calc([table, table], table).action_values, dtype=np.float64)

    def normalised(logits: np.ndarray) -> np.ndarray:
        logits = np.where(legal, logits, -np.inf)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    change, done = float("inf"), 0
    while done < iterations and change > tol:
        pi = table.action_probability_array
        new = normalised((np.log(np.where(legal, pi, 1.0)) + step * (temperature * log_magnet + values()))
                         / (1.0 + step * temperature))
        change = float(np.abs(new - pi).max())
        table.action_probability_array[:] = new
        done += 1
    pi = table.action_probability_array
    residual = float(np.abs(normalised(log_magnet + values() / temperature) - pi).max())
    entropy = float(-np.where(legal & (pi > 0), pi * np.log(np.where(pi > 0, pi, 1.0)), 0.0).sum(axis=1).mean())
    return table, {"temperature": float(temperature), "nash_conv": float(exploitability.nash_conv(game, table)),
                   "iterations": done, "change": change, "residual": residual, "entropy": entropy}


def expected_payoff(game_name: str, policy_fn: PolicyFn, opponent: os_policy.Policy | None = None,
                    params: dict | None = None, tensor: str = "information_state") -> float:
    """The exact expected return a game of ``policy_fn`` against ``opponent`` (an OpenSpiel policy; None:
    uniform random), each seat half the games, over every deal: no sampling error, where 400 sampled
    Leduc games have a standard error of about 0.2 chips."""
    game = _load(game_name, params)
    mine = tabulate(game, policy_fn, tensor)
    other = opponent if opponent is not None else os_policy.UniformRandomPolicy(game)
    root = game.new_initial_state()
    seat0 = expected_game_score.policy_value(root, [mine, other])[0]
    seat1 = expected_game_score.policy_value(root, [other, mine])[1]
    return float((seat0 + seat1) / 2)


def exploitability_by_infostate(game: pyspiel.Game, table: os_policy.Policy) -> list[dict]:
    """Where a policy is exploited: NashConv split exactly over the best responder's information states.

    For each player ``p`` the performance-difference identity, rolled in with the policy and rolled out
    with ``p``'s best response ``b`` to the others, gives::

        u_p(b, pi_-p) - u_p(pi) = sum_I  reach_p(I) * ( max_a Q_b(I, a) - sum_a pi(a | I) Q_b(I, a) )

    over ``p``'s information states ``I``, where ``reach_p(I)`` is the probability of ``p``'s own moves
    to ``I`` under ``pi`` and ``Q_b(I, a)`` sums, over the histories of ``I`` weighted by their chance
    and opponent reach, ``p``'s value of playing ``a`` there and best-responding after. Each row:
    ``player``, ``infostate``, ``gain`` (its term; the rows of a player sum to that player's part of
    NashConv), ``visit`` (the chance that self-play under ``pi`` reaches ``I``), ``policy`` and
    ``best`` (``pi``'s probabilities at ``I`` and the best response's action). A term is large where the
    policy errs at a state it reaches; ``visit`` says whether self-play sees that state often enough
    to learn it."""
    rows: list[dict] = []
    for p in range(game.num_players()):
        br = best_response.BestResponsePolicy(game, p, table)
        for key, histories in br.infosets.items():
            state = histories[0][0]
            legal = state.legal_actions()
            probs = table.action_probabilities(state, p)
            q = {a: sum(w * br.q_value(h, a) for h, w in histories) for a in legal}
            own = _own_reach(game, state, p, table)
            best = max(legal, key=lambda a: q[a])
            gain = own * (q[best] - sum(probs.get(a, 0.0) * q[a] for a in legal))
            rows.append({"player": p, "infostate": key, "gain": float(gain),
                         "visit": float(own * sum(w for _, w in histories)),
                         "policy": {int(a): float(probs.get(a, 0.0)) for a in legal}, "best": int(best)})
    return rows


def _own_reach(game: pyspiel.Game, state: pyspiel.State, player: int, table: os_policy.Policy) -> float:
    """The product of ``player``'s own move probabilities under ``table`` on the way to ``state``."""
    s, reach = game.new_initial_state(), 1.0
    for action in state.history():
        if not s.is_chance_node() and s.current_player() == player:
            reach *= table.action_probabilities(s, player).get(action, 0.0)
        s.apply_action(action)
    return reach


def net_policy_fn(net) -> PolicyFn:
    """The `PolicyFn` of a neural policy of a one-tensor game (`arena.inference.structured`): its
    masked action probabilities at an information-state tensor, the tensor the arena's OpenSpiel
    games show for imperfect-information games."""
    import torch

    from arena.inference.policy_nets import policy_input

    def fn(state_tensor: np.ndarray, legal_mask: np.ndarray, player: int) -> np.ndarray:
        with torch.no_grad():
            x = torch.from_numpy(policy_input(np.asarray(state_tensor, dtype=np.float32), player, net.spec)[0])[None]
            m = torch.from_numpy(np.asarray(legal_mask) > 0)[None]
            dist, _ = net(x, m)
            return dist.probs[0].double().numpy()

    return fn
