"""Rollouts: many concurrent matches whose LLM seats share one batching engine.

Each match runs the one match loop (`play_match`) on its own thread; the
language-model players submit their prompts to a shared `BatchingEngine`, which
turns the prompts of all concurrent matches into batched generation calls with
a KV cache. Fixed and historical opponents are ordinary agents.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from arena.agents.base import derive_seed
from arena.agents.llm import LLMAgent
from arena.agents.specs import make_agent
from arena.envs.registry import make_core
from arena.match import InvalidMovePolicy, MatchResult, play_match

#: Seat marker in a pairing: this seat is played by the learning model.
LEARNER = "<learner>"


@dataclass
class Episode:
    result: MatchResult
    seats: list[str]  # spec per seat; LEARNER for the model's seats
    opponent: str  # league name of the opponent ("self" for self-play)
    turns: dict[int, list] = field(default_factory=dict)  # learner seat -> its Turns
    privileged: dict[int, list[str | None]] = field(default_factory=dict)

    @property
    def learner_seats(self) -> list[int]:
        return [i for i, s in enumerate(self.seats) if s == LEARNER]

    def invalid_moves(self) -> int:
        return sum(1 for seat in self.learner_seats for t in self.turns.get(seat, []) if t.error)

    def moves(self) -> int:
        return sum(len(self.turns.get(seat, [])) for seat in self.learner_seats)


class _RecordingLLM(LLMAgent):
    """An LLM seat that also keeps what a privileged critic may see at each of its turns."""

    def __init__(self, *a, keep_privileged: bool = False, **kw):
        super().__init__(*a, **kw)
        self.keep_privileged = keep_privileged
        self.privileged: list[str | None] = []

    def reset(self, seed=None):
        super().reset(seed)
        self.privileged = []

    def act(self, observation):
        if self.keep_privileged:
            self.privileged.append(observation.privileged)
        return super().act(observation)


def play_episodes(
    game: str,
    pairings: Sequence[tuple[list[str], str]],
    engine: Any,
    tokenizer: Any,
    template: Any,
    *,
    seed: int,
    concurrency: int,
    policy: InvalidMovePolicy,
    max_new_tokens: int,
    temperature: float = 1.0,
    greedy: bool = False,
    top_k_logprobs: int = 0,
    keep_privileged: bool = False,
    opponent_factory: Callable[[str, Any, int], Any] | None = None,
    game_kwargs: dict | None = None,
    record_replays: bool = False,
) -> list[Episode]:
    """Play one match per pairing ``(seat specs, opponent name)`` concurrently; LEARNER seats use `engine`."""

    def one(i: int) -> Episode:
        seats, opp_name = pairings[i]
        core = make_core(game, **(game_kwargs or {}))
        match_seed = derive_seed(seed, i)
        agents = []
        for s, spec in enumerate(seats):
            if spec == LEARNER:
                agents.append(_RecordingLLM(engine, tokenizer, template, max_new_tokens=max_new_tokens,
                                            temperature=temperature, greedy=greedy, top_k_logprobs=top_k_logprobs,
                                            record=True, keep_privileged=keep_privileged))
            elif opponent_factory is not None:
                agents.append(opponent_factory(spec, core, derive_seed(match_seed, s)))
            else:
                agents.append(make_agent(spec, core, derive_seed(match_seed, s)))
        res = play_match(core, agents, seed=match_seed, policy=policy, record=record_replays,
                         match_id=f"rollout-{seed}-{i}")
        ep = Episode(res, list(seats), opp_name)
        for s, a in enumerate(agents):
            if isinstance(a, _RecordingLLM):
                ep.turns[s] = a.turns
                ep.privileged[s] = a.privileged
        return ep

    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(pairings))),
                            thread_name_prefix="arena-rollout") as pool:
        return list(pool.map(one, range(len(pairings))))
