"""The agent protocol: ``act(observation) -> action``.

Optional hooks: ``reset(seed)`` before each match and ``observe(player, action)``
after another player's move. Random, search, human, neural and LLM agents all
implement this one protocol, and the one match loop plays them all.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from arena.envs.observation import Observation


@runtime_checkable
class Agent(Protocol):
    def act(self, observation: Observation) -> Any: ...


class BaseAgent:
    """Convenience base with no-op hooks; agents need not inherit from it."""

    #: The spec string that rebuilds this agent (written into replays).
    spec: str = "?"
    #: Optional hooks, None where an agent has none (a class attribute is found faster than a missing
    #: one is ruled out, and the match loop looks them up every match): ``observe(player, action)``
    #: after another player's move, ``match_over(view, result, seat)`` at the end.
    observe = None
    match_over = None
    #: Optional fast path, None where an agent has none: ``act_legal(legal)``, the move `act` would
    #: return for an observation whose legal list is `legal` (a non-empty list), for agents whose move
    #: depends on that list alone (``random``, ``first``). The match loop then calls it with the list
    #: and builds no `Observation`. A subclass that overrides `act` without `act_legal` has none (see
    #: `__init_subclass__`), so an inherited `act_legal` never plays in place of a new `act`.
    act_legal = None
    #: Optional, None where an agent has none: ``action_probabilities(observation)``, the probability
    #: `act` gives each legal move (a list in ``observation.legal_actions``' order), for agents whose
    #: strategy can be read (CFR's table). Imitation distils these instead of the sampled moves.
    action_probabilities = None
    #: Optional, None where an agent has none: ``search_policy(observation)``, the policy a search
    #: computes at the position (the share of its root's visits each legal move received, in
    #: ``observation.legal_actions``' order), which is not the strategy `act` plays (the most visited
    #: move) and so is not read as one (`arena.agents.exploitability`). Imitation distils it as a
    #: target, as AlphaZero trains on visit counts.
    search_policy = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "act" in cls.__dict__ and "act_legal" not in cls.__dict__:
            cls.act_legal = None

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, observation: Observation) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        pass


class Forfeit(Exception):
    """Raised by an agent that gives up (a human who quits): it loses at once."""


def derive_seed(seed: int | None, salt: int) -> int | None:
    """A per-seat seed from the match seed; cheap and stable across processes."""
    if seed is None:
        return None
    return (int(seed) * 1_000_003 + 7919 * (salt + 1)) % (2**32)
