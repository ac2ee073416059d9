"""`policy_mcts:<checkpoint>`: search at play time with a trained policy, AlphaZero's way.

Spec: ``policy_mcts:<folder>`` (a checkpoint folder, as for ``policy:``), options ``simulations=N``
(default 200), ``uct_c=C`` (PUCT's exploration constant, default 2.0), ``threads=N`` (this
process's torch threads).

OpenSpiel's MCTS with PUCT selection (``SearchNode.puct_value``: ``Q + c * P * sqrt(N) / (1 + n)``,
AlphaZero's rule): the network's action probabilities are the priors of a node's moves and its
value head evaluates the leaf, in place of random rollouts; proven wins and losses are propagated
(``solve``). The most visited move is played. Two-player zero-sum perfect-information OpenSpiel games
(the network's value is the player to move's; the other player's is its negative).

One forward pass per new leaf (its priors and its value together, kept for the search's other
visits to it). `search_policy` is the share of the root's visits each legal move received:
distilling it is expert iteration's target.
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
    def __init__(self, core: Any, net: Any, *, path: str, simulations: int = 200, uct_c: float = 2.0,
                 seed: int | None = None):
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
        self.simulations, self.uct_c = int(simulations), float(uct_c)
        self.evaluator = _NetEvaluator(net, core)
        self.spec = f"policy_mcts:{path},simulations={self.simulations}" + (
            f",uct_c={self.uct_c:g}" if self.uct_c != 2.0 else "")
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        rs = np.random.RandomState(seed)
        self.bot = self._mcts.MCTSBot(self.game, self.uct_c, self.simulations, self.evaluator, solve=True,
                                      random_state=rs, child_selection_fn=self._mcts.SearchNode.puct_value,
                                      verbose=False)

    def act(self, observation: Observation) -> Any:
        self.evaluator.clear()
        return self.bot.step(observation.engine_state())

    def search_policy(self, observation: Observation) -> list[float]:
        """The share of a search's root visits each legal move received (``legal_actions``' order)."""
        self.evaluator.clear()
        return visit_shares(self.bot.mcts_search(observation.engine_state()), observation.legal_actions)


def _factory(core, seed, positional, **opts):
    import torch

    from arena.agents.neural import load_cached
    from arena.inference.policy_nets import spec_from_core

    if not positional:
        raise AgentSpecError("policy_mcts agents need a checkpoint: policy_mcts:<folder>,simulations=N, "
                             "e.g. policy_mcts:runs/c4/best,simulations=200")
    known = {"simulations", "uct_c", "threads"}  # (make_agent takes seed= itself)
    for k in opts:
        if k not in known:
            raise AgentSpecError(f"policy_mcts: unknown option {k!r} (it takes {', '.join(sorted(known))})")
    sims, c = opts.get("simulations", 200), opts.get("uct_c", 2.0)
    if isinstance(sims, bool) or not isinstance(sims, int) or sims < 2:  # the first only evaluates the root
        raise AgentSpecError(f"policy_mcts: simulations must be an integer >= 2, got {sims!r}")
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0:
        raise AgentSpecError(f"policy_mcts: uct_c must be a number > 0, got {c!r}")
    threads = opts.get("threads")
    if threads is not None and torch.get_num_threads() != int(threads):
        torch.set_num_threads(int(threads))
    if core is None:
        raise IncompatibleAgent("policy_mcts plays OpenSpiel games (openspiel/<name>-v0)")
    net, _meta = load_cached(positional, spec_from_core(core))
    return PolicyMCTSAgent(core, net, path=positional, simulations=int(sims), uct_c=float(c), seed=seed)
