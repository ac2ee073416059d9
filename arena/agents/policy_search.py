"""`policy_mcts:<checkpoint>`: search at play time with a trained policy, AlphaZero's way.

Spec: ``policy_mcts:<folder>`` (a checkpoint folder, as for ``policy:``), options ``simulations=N``
(default 200), ``uct_c=C`` (PUCT's exploration constant, default 2.0), ``explore=K`` (the first K
moves of a game are drawn in proportion to the root's visits instead of taken greedily, AlphaZero's
opening temperature, so self-play games differ; default 0), ``threads=N`` (this process's torch
threads).

OpenSpiel's MCTS with PUCT selection (``SearchNode.puct_value``: ``Q + c * P * sqrt(N) / (1 + n)``,
AlphaZero's rule): the network's action probabilities are the priors of a node's moves and its
value head evaluates the leaf, in place of random rollouts; proven wins and losses are propagated
(``solve``). The most visited move is played (a proven win where there is one). Two-player zero-sum perfect-information OpenSpiel games
(the network's value is the player to move's; the other player's is its negative).

One forward pass per new leaf (its priors and its value together, kept for the search's other
visits to it). `search_policy` is the share of the root's visits each legal move received:
distilling it is expert iteration's target. Asked at the position it has just moved from, it answers
from the search that chose the move (``answers_own_move``: no second search, and the match is the
same whether it is asked or not), which is how expert iteration labels the searcher's own games
(`arena.match.observe`, the ``"played"`` reader).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arena.agents.base import BaseAgent
from arena.agents.search import _openspiel_game, visit_shares
from arena.envs.observation import Observation
from arena.errors import AgentSpecError, IncompatibleAgent


class _NetEvaluator:
    """OpenSpiel's `Evaluator` interface over a policy network: `prior` and `evaluate` of a state, from
    one forward pass kept until the next move."""

    def __init__(self, net: Any, core: Any):
        import torch

        from arena.inference.policy_nets import policy_inputs

        self.net, self.core, self._torch, self._inputs = net, core, torch, policy_inputs
        self._seen: dict[str, tuple[list[tuple[int, float]], float]] = {}

    def clear(self) -> None:
        self._seen.clear()

    def _look(self, state) -> tuple[list[tuple[int, float]], float]:
        key = state.history_str()
        hit = self._seen.get(key)
        if hit is None:
            torch = self._torch
            p = state.current_player()
            x = self._inputs(self.core.observation_of(state, p), p, self.net.spec)
            with torch.no_grad():
                dist, value = self.net({k: torch.as_tensor(v)[None] for k, v in x.items()})
                probs = dist.probs[0].numpy()
            legal = state.legal_actions()
            pl = np.asarray([probs[a] for a in legal], dtype=np.float64)
            pl = pl / pl.sum() if pl.sum() > 0 else np.full(len(legal), 1.0 / len(legal))
            hit = self._seen[key] = ([(int(a), float(q)) for a, q in zip(legal, pl)], float(value[0]))
        return hit

    def prior(self, state) -> list[tuple[int, float]]:
        return self._look(state)[0]

    def evaluate(self, state) -> np.ndarray:
        v = float(np.clip(self._look(state)[1], -1.0, 1.0))
        p = state.current_player()
        out = np.full(2, -v)
        out[p] = v
        return out


class PolicyMCTSAgent(BaseAgent):
    #: `search_policy` at the position of the agent's last move is that move's own search.
    answers_own_move = True

    def __init__(self, core: Any, net: Any, *, path: str, simulations: int = 200, uct_c: float = 2.0,
                 explore: int = 0, seed: int | None = None):
        import pyspiel
        from open_spiel.python.algorithms import mcts

        game = _openspiel_game(core, "policy_mcts")
        if not core.perfect_information or game.num_players() != 2 or \
                game.get_type().utility != pyspiel.GameType.Utility.ZERO_SUM:
            raise IncompatibleAgent(f"policy_mcts needs a two-player zero-sum perfect-information game; "
                                    f"{core.game_id} is not")
        if net.spec.action_kind != "discrete":
            raise IncompatibleAgent(f"policy_mcts searches discrete moves; {path} has {net.spec.action_kind} ones")
        self._mcts, self.game, self.net = mcts, game, net
        self.simulations, self.uct_c, self.explore = int(simulations), float(uct_c), int(explore)
        self.evaluator = _NetEvaluator(net, core)
        self.spec = f"policy_mcts:{path},simulations={self.simulations}" + (
            f",uct_c={self.uct_c:g}" if self.uct_c != 2.0 else "") + (f",explore={self.explore}" if self.explore else "")
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        rs = np.random.RandomState(seed)
        self.bot = self._mcts.MCTSBot(self.game, self.uct_c, self.simulations, self.evaluator, solve=True,
                                      random_state=rs, child_selection_fn=self._mcts.SearchNode.puct_value,
                                      verbose=False)
        # the opening draws have their own stream: the searches' tie-breaks are those of explore=0
        self._draw = np.random.RandomState(None if seed is None else (int(seed) + 0x5EED) % 2**32)
        self._last: tuple[str, Any] | None = None  # (the position's history, its root) of the last search

    def _search(self, state: Any) -> Any:
        key = state.history_str()
        if self._last is None or self._last[0] != key:
            self.evaluator.clear()
            self._last = (key, self.bot.mcts_search(state))
        return self._last[1]

    def act(self, observation: Observation) -> Any:
        state = observation.engine_state()
        root = self._search(state)
        if len(state.history()) < self.explore:
            legal = observation.legal_actions
            shares = np.asarray(visit_shares(root, legal))
            return int(legal[int(self._draw.choice(len(legal), p=shares / shares.sum()))])
        return root.best_child().action

    def search_policy(self, observation: Observation) -> list[float]:
        """The share of a search's root visits each legal move received (``legal_actions``' order): the
        search that chose the agent's last move where `observation` is that move's position, else a
        new one."""
        return visit_shares(self._search(observation.engine_state()), observation.legal_actions)


def _factory(core, seed, positional, **opts):
    import torch

    from arena.agents.neural import load_cached
    from arena.inference.policy_nets import spec_from_core

    if not positional:
        raise AgentSpecError("policy_mcts agents need a checkpoint: policy_mcts:<folder>,simulations=N, "
                             "e.g. policy_mcts:runs/c4/best,simulations=200")
    known = {"simulations", "uct_c", "explore", "threads"}  # (make_agent takes seed= itself)
    for k in opts:
        if k not in known:
            raise AgentSpecError(f"policy_mcts: unknown option {k!r} (it takes {', '.join(sorted(known))})")
    sims, c = opts.get("simulations", 200), opts.get("uct_c", 2.0)
    if isinstance(sims, bool) or not isinstance(sims, int) or sims < 2:  # the first only evaluates the root
        raise AgentSpecError(f"policy_mcts: simulations must be an integer >= 2, got {sims!r}")
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0:
        raise AgentSpecError(f"policy_mcts: uct_c must be a number > 0, got {c!r}")
    explore = opts.get("explore", 0)
    if isinstance(explore, bool) or not isinstance(explore, int) or explore < 0:
        raise AgentSpecError(f"policy_mcts: explore is a number of opening moves >= 0, got {explore!r}")
    threads = opts.get("threads")
    if threads is not None and torch.get_num_threads() != int(threads):
        torch.set_num_threads(int(threads))
    if core is None:
        raise IncompatibleAgent("policy_mcts plays OpenSpiel games (openspiel/<name>-v0)")
    net, _meta = load_cached(positional, spec_from_core(core))
    return PolicyMCTSAgent(core, net, path=positional, simulations=int(sims), uct_c=float(c),
                           explore=int(explore), seed=seed)
