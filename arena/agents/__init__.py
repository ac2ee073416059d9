"""Agents: one protocol, ``act(observation) -> action``, built from spec strings."""

from arena.agents.base import Agent, BaseAgent, Forfeit, derive_seed
from arena.agents.specs import agent_kinds, make_agent, register_agent_kind

__all__ = [
    "Agent",
    "BaseAgent",
    "Forfeit",
    "agent_kinds",
    "derive_seed",
    "make_agent",
    "register_agent_kind",
]
