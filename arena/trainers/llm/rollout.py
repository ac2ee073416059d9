"""Rollouts: many concurrent matches whose LLM seats share one batching engine.

Each match runs the one match loop (`play_match`) on its own thread; the
language-model players submit their prompts to a shared `BatchingEngine`, which
turns the prompts of all concurrent matches into batched generation calls with
a KV cache. Fixed and historical opponents are ordinary agents.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Sequence

from arena.agents.base import derive_seed
from arena.agents.llm import LLMAgent
from arena.envs.registry import make_core
from arena.match.loop import InvalidMovePolicy, MatchResult
from arena.match.runner import MatchJob, run_match_job

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
    game_kwargs: dict | None = None,
    record_replays: bool = False,
) -> list[Episode]:
    """Play one match per pairing ``(seat specs, opponent name)`` concurrently; LEARNER seats use `engine`.
    Each match goes through the one job runner; the other seats are built from their specs."""

    def one(i: int) -> Episode:
        seats, opp_name = pairings[i]
        core = make_core(game, **(game_kwargs or {}))
        match_seed = derive_seed(seed, i)
        agents = [_RecordingLLM(engine, tokenizer, template, max_new_tokens=max_new_tokens, temperature=temperature,
                                greedy=greedy, top_k_logprobs=top_k_logprobs, record=True,
                                keep_privileged=keep_privileged) if spec == LEARNER else None for spec in seats]
        job = MatchJob(match_id=f"rollout-{seed}-{i}", game=core.game_id, specs=tuple(seats), seed=match_seed,
                       game_kwargs=dict(game_kwargs or {}), policy=policy, keep_replay=record_replays)
        res = run_match_job(job, agents=agents, core=core)
        ep = Episode(res, list(seats), opp_name)
        for s, a in enumerate(agents):
            if a is not None:
                ep.turns[s] = a.turns
                ep.privileged[s] = a.privileged
        return ep

    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(pairings))),
                            thread_name_prefix="arena-rollout") as pool:
        return list(pool.map(one, range(len(pairings))))


class LLMActors:
    """The Actors of the language-model trainer: one batching engine over the learner's model (every
    LLM seat of every concurrent match shares it), generating in the rollout precision on the
    learner's device, and the rollouts that turn pairings into episodes."""

    def __init__(self, model: Any, tokenizer: Any, template: Any, *, game: str, device: str, precision: str,
                 max_batch: int, max_new_tokens: int, temperature: float, top_k: int, keep_privileged: bool):
        from arena.inference.engine import BatchingEngine, HFEngine

        self.game, self.tok, self.template = game, tokenizer, template
        self.max_new_tokens, self.temperature, self.top_k = max_new_tokens, temperature, top_k
        self.keep_privileged = keep_privileged
        self.engine = HFEngine(model, tokenizer, device=device)
        # A 20 ms window: long enough for the first moves of all concurrent matches to share a call.
        self.rollout_engine = BatchingEngine(_AutocastEngine(self.engine, device, precision), max_batch=max_batch,
                                             max_wait_s=0.02)

    def encode_prompt(self, prompt: str) -> list[int]:
        return self.engine.encode(prompt)

    def play(self, pairings: Sequence[tuple[list[str], str]], *, greedy: bool, policy: InvalidMovePolicy, seed: int,
             concurrency: int, record: bool = False) -> list[Episode]:
        return play_episodes(self.game, pairings, self.rollout_engine, self.tok, self.template, seed=seed,
                             concurrency=concurrency, policy=policy, max_new_tokens=self.max_new_tokens,
                             temperature=self.temperature, greedy=greedy,
                             top_k_logprobs=0 if greedy else self.top_k, keep_privileged=self.keep_privileged,
                             record_replays=record)

    def close(self) -> None:
        self.rollout_engine.close()


class _AutocastEngine:
    """Runs an engine's generate under autocast (bf16/fp16 rollouts), in whichever thread calls it."""

    def __init__(self, engine: Any, device: str, precision: str):
        self.engine, self.device, self.precision = engine, device, precision
        self.tokenizer = getattr(engine, "tokenizer", None)

    def generate(self, prompts, **kw):
        from arena.trainers.common.device import autocast

        with autocast(self.device, self.precision):
            return self.engine.generate(prompts, **kw)
