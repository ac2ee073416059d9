"""Rollouts: many concurrent matches whose LLM seats share one batched generation call a round.

The matches run on the one match engine (`arena.match.pool.play_lockstep`): each plays until its
language-model seats must move, and the learner (one `LLMAgent` for every seat it plays, in every
match in flight) answers all of those moves with one ``generate`` call; language-model opponents
(frozen snapshots) are batched the same way, each by its own engine. Other opponents are ordinary
agents. Each move samples with its own seed (match seed, seat, move number), so an episode is the
same whichever matches shared its calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from arena.agents.base import derive_seed
from arena.agents.llm import LLMAgent
from arena.agents.specs import make_agent
from arena.envs.registry import make_core
from arena.match.loop import InvalidMovePolicy, MatchResult
from arena.match.pool import play_lockstep

#: Seat marker in a pairing: this seat is played by the learning model.
LEARNER = "<learner>"


@dataclass
class Episode:
    result: MatchResult
    seats: list[str]  # spec per seat; LEARNER for the model's seats
    opponent: str  # league name of the opponent ("self" for self-play)
    turns: dict[int, list] = field(default_factory=dict)  # learner seat -> its Turns
    privileged: dict[int, list[str | None]] = field(default_factory=dict)
    #: The version of the learner's weights the episode was played with (`LLMActors.sync`).
    weights_version: int | None = None

    @property
    def learner_seats(self) -> list[int]:
        return [i for i, s in enumerate(self.seats) if s == LEARNER]

    def invalid_moves(self) -> int:
        return sum(1 for seat in self.learner_seats for t in self.turns.get(seat, []) if t.error)

    def moves(self) -> int:
        return sum(len(self.turns.get(seat, [])) for seat in self.learner_seats)


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
    game_kwargs: dict | None = None,
    record_replays: bool = False,
) -> list[Episode]:
    """Play one match per pairing ``(seat specs, opponent name)``, `concurrency` in flight at once;
    LEARNER seats are played by one agent over `engine`, the other seats are built from their specs
    (one shared object per spec for agents that answer in batches). Match i has seed
    ``derive_seed(seed, i)``."""
    learner = LLMAgent(engine, tokenizer, template, max_new_tokens=max_new_tokens, temperature=temperature,
                       greedy=greedy, top_k_logprobs=top_k_logprobs, record=True, keep_privileged=keep_privileged)
    shared: dict[str, Any] = {LEARNER: learner}
    cores = [make_core(game, **(game_kwargs or {})) for _ in pairings]
    for spec in dict.fromkeys(s for seats, _ in pairings for s in seats):
        if spec != LEARNER:
            agent = make_agent(spec, cores[0], derive_seed(seed, 1_000_003))
            if callable(getattr(agent, "act_batch", None)):
                shared[spec] = agent
    for agent in shared.values():
        agent.reset(seed)

    results = play_lockstep(game, [list(seats) for seats, _ in pairings],
                            [derive_seed(seed, i) for i in range(len(pairings))], policy=policy,
                            record="text" if record_replays else False, game_kwargs=dict(game_kwargs or {}) or None,
                            match_ids=[f"rollout-{seed}-{i}" for i in range(len(pairings))], shared=shared,
                            cores=cores, width=max(1, concurrency))
    episodes = []
    for i, (seats, opp_name) in enumerate(pairings):
        ep = Episode(results[i], list(seats), opp_name)
        for s in ep.learner_seats:
            ep.turns[s] = learner.turns_of(cores[i], s)
            ep.privileged[s] = learner.privileged_of(cores[i], s)
        episodes.append(ep)
    return episodes


class LLMActors:
    """The Actors of the language-model trainer: one engine over the learner's model (every LLM seat of
    every concurrent match shares its calls) and the rollouts that turn pairings into episodes.

    The engine comes by injection (`engine`), else it is the transformers engine over the learner's own
    model object (`HFEngine`: generating in the rollout precision on the learner's device, it sees
    every update at once). An engine with weights of its own (`arena.inference.engine.VLLMEngine`) is
    brought to the learner's weights by `sync` before each batch of games, and every episode records
    the weights' version it was played with."""

    def __init__(self, model: Any, tokenizer: Any, template: Any, *, game: str, device: str, precision: str,
                 max_new_tokens: int, temperature: float, top_k: int, keep_privileged: bool, engine: Any = None):
        self.game, self.tok, self.template = game, tokenizer, template
        self.max_new_tokens, self.temperature, self.top_k = max_new_tokens, temperature, top_k
        self.keep_privileged = keep_privileged
        if engine is None:
            from arena.inference.engine import HFEngine

            engine = HFEngine(model, tokenizer, device=device)
            self.rollout_engine = _AutocastEngine(engine, device, precision)
            self.shares_weights = True  # the learner's model object itself: nothing to push
        else:
            self.rollout_engine = engine
            self.shares_weights = False
        self.engine = engine
        self.weights_version: int | None = None
        self.sync_seconds = 0.0  # the last sync's

    def sync(self, model: Any, version: int) -> float:
        """Bring the engine to the learner's weights of `version` (pushed only when the engine holds
        another version); returns the seconds it took (0 for an engine that shares the model)."""
        self.sync_seconds = 0.0
        if not self.shares_weights and self.engine.weights_version != version:
            self.sync_seconds = self.engine.update_weights(model, version)
        self.weights_version = version
        return self.sync_seconds

    def encode_prompt(self, prompt: str) -> list[int]:
        return self.engine.encode(prompt)

    def play(self, pairings: Sequence[tuple[list[str], str]], *, greedy: bool, policy: InvalidMovePolicy, seed: int,
             concurrency: int, record: bool = False) -> list[Episode]:
        episodes = play_episodes(self.game, pairings, self.rollout_engine, self.tok, self.template, seed=seed,
                                 concurrency=concurrency, policy=policy, max_new_tokens=self.max_new_tokens,
                                 temperature=self.temperature, greedy=greedy,
                                 top_k_logprobs=0 if greedy else self.top_k, keep_privileged=self.keep_privileged,
                                 record_replays=record)
        for ep in episodes:
            ep.weights_version = self.weights_version
        return episodes

    def close(self) -> None:
        close = getattr(self.engine, "close", None)
        if close is not None and not self.shares_weights:
            close()


class _AutocastEngine:
    """Runs an engine's generate under autocast (bf16/fp16 rollouts)."""

    def __init__(self, engine: Any, device: str, precision: str):
        self.engine, self.device, self.precision = engine, device, precision
        self.tokenizer = getattr(engine, "tokenizer", None)

    def generate(self, prompts, **kw):
        from arena.trainers.common.device import autocast

        with autocast(self.device, self.precision):
            return self.engine.generate(prompts, **kw)
