"""Language-model players: a causal LM from a local folder (no hub at run time).

The observation goes through a prompt template (SPIRAL's, inside the model's
chat template, by default); the last ``\\boxed{}`` of the output is read as the
move and checked against the legal set. Anything else is an invalid move,
counted and penalised by the match loop's policy, never a crash.

Spec: ``llm:<model folder>`` with options ``template=auto|spiral|compact``,
``max_new_tokens=256``, ``temperature=1.0``, ``greedy=true``, ``dtype=fp32|bf16|fp16``,
``engine=hf|transformers|vllm`` (transformers, the default, or vLLM: in-process where it imports, else
in the worker process of the vLLM environment that ``make`` builds, `arena.inference.engine.VLLMEngine`;
bf16 unless ``dtype`` says otherwise).
One agent plays every seat it is given across the matches in flight: the match engine asks it for
all of their waiting moves at once (``act_batch``), one batched generation call.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from arena.agents.base import BaseAgent, derive_seed
from arena.agents.prompts import PromptTemplate, make_template, parse_move
from arena.envs.observation import Observation


class MalformedMove:
    """What an LLM agent returns when its output holds no legal move; the match loop refuses it."""

    __slots__ = ("text", "invalid_reason")

    def __init__(self, text: str, reason: str):
        self.text = text
        self.invalid_reason = reason

    def __repr__(self) -> str:
        snippet = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        return f"MalformedMove({self.invalid_reason!r}, text={snippet!r})"


@dataclass
class Turn:
    """One generation of an LLM player, kept for training."""

    game_id: str
    player: int
    step: int
    prompt: str
    generation: Any  # arena.inference.engine.Generation
    move: Any
    error: str | None


class LLMAgent(BaseAgent):
    """A language-model player. One object can play one match (reset per match, as any agent) or every
    seat given to it across the matches in flight: the match engine (`arena.match.loop.run_matches`)
    then hands it the waiting observations of all of them and ``act_batch`` generates for them in one
    engine call. What it keeps per match (the move counter its sampling seeds come from, the turns
    it recorded) is keyed by the match's game and the seat, so a move's sample is the same whichever
    other matches shared its call."""

    def __init__(self, engine: Any, tokenizer: Any = None, template: str | PromptTemplate = "auto",
                 max_new_tokens: int = 256, temperature: float = 1.0, greedy: bool = False,
                 top_k_logprobs: int = 0, record: bool = False, seed: int | None = None,
                 keep_privileged: bool = False):
        self.engine = engine
        self.template = template if isinstance(template, PromptTemplate) else make_template(template, tokenizer)
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.greedy = bool(greedy)
        self.top_k_logprobs = int(top_k_logprobs)
        self.record = record
        #: Keep what a privileged critic may see at each recorded turn (``observation.privileged``).
        self.keep_privileged = keep_privileged
        self.turns: list[Turn] = []
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        self._seed = seed
        self.turns = []
        #: Per (id(core), seat): [the seed of the seat's moves, moves asked, turns, privileged views].
        self._seats: dict[tuple[int, int], list] = {}

    def seat_match(self, core: Any, seat: int, seed: int | None) -> None:
        """A match starts with this agent in `seat` (called by the match engine for a batched agent):
        its moves draw from `seed`, as a per-match agent reset with it would."""
        self._seats[(id(core), seat)] = [seed, 0, [], []]

    def _seat(self, observation: Observation) -> list:
        key = (id(observation.core), observation.player)
        st = self._seats.get(key)
        if st is None:  # a per-match agent: its seat's seed is the agent's own
            st = self._seats[key] = [self._seed, 0, [], []]
        return st

    def turns_of(self, core: Any, seat: int) -> list[Turn]:
        """The turns recorded in `seat` of the match played on `core`."""
        st = self._seats.get((id(core), seat))
        return st[2] if st is not None else []

    def privileged_of(self, core: Any, seat: int) -> list[str | None]:
        st = self._seats.get((id(core), seat))
        return st[3] if st is not None else []

    def _kwargs(self) -> dict:
        return dict(max_new_tokens=self.max_new_tokens, temperature=self.temperature, greedy=self.greedy,
                    top_k_logprobs=self.top_k_logprobs, stop=list(self.template.stop) or None)

    def act(self, observation: Observation) -> Any:
        return self.act_batch([observation])[0]

    def act_batch(self, observations: list[Observation]) -> list[Any]:
        prompts, seeds, states = [], [], []
        for o in observations:
            st = self._seat(o)
            # one seed per move (the seat's seed and its move number), whichever prompts share the call
            seeds.append(derive_seed(st[0], st[1]) if st[0] is not None else None)
            st[1] += 1
            states.append(st)
            prompts.append(self.template.render(o.game_id, o.text, o.player))
        submit = getattr(self.engine, "submit", None)
        if submit is not None and len(prompts) == 1:  # a batching engine shared by concurrent callers
            gens = [submit(prompts[0], seed=seeds[0], **self._kwargs()).result()]
        else:
            gens = self.engine.generate(prompts, seeds=seeds, **self._kwargs())
            if len(gens) != len(prompts):
                raise RuntimeError(f"the engine returned {len(gens)} generations for {len(prompts)} prompts")
        moves = []
        for o, prompt, gen, st in zip(observations, prompts, gens, states):
            answer = self.template.parse_generation(gen.text, gen.stop_reason)
            move, why = parse_move(answer, o.action_kind, o.legal_actions, o.parse_action)
            if self.record:
                turn = Turn(o.game_id, o.player, o.step, prompt, gen, move, why)
                st[2].append(turn)
                self.turns.append(turn)
                if self.keep_privileged:
                    st[3].append(o.privileged)
            moves.append(move if why is None else MalformedMove(gen.text, why))
        return moves


_ENGINES: dict[tuple[str, str, str], Any] = {}
_ENGINES_LOCK = threading.Lock()


def cached_engine(path: str, dtype: str = "fp32", kind: str = "hf"):
    """One engine per (model folder, dtype, engine kind) per process.

    Loading is serialised: transformers' model loading patches process-wide state
    (default device, init contexts) and is not safe to run from several threads.
    """
    key = (str(path), dtype, kind)
    with _ENGINES_LOCK:
        return _ENGINES[key] if key in _ENGINES else _load_engine(key, path, dtype, kind)


def _load_engine(key, path: str, dtype: str, kind: str):
    from arena.errors import require
    from arena.inference.engine import make_engine

    if kind == "hf":  # the vLLM engine raises its own MissingExtra, naming the vllm extra
        require("torch", "LLM agents", "llm")
        require("transformers", "LLM agents", "llm")
    _ENGINES[key] = make_engine(kind, path, dtype=dtype, device="cuda" if kind == "vllm" else "cpu")
    return _ENGINES[key]


def check_model_folder(path) -> None:
    """An `AgentSpecError` naming the commands that make a model when `path` is not a model folder (or
    a training run folder, whose best checkpoint it names)."""
    from pathlib import Path

    from arena.errors import AgentSpecError
    from arena.inference.models import MAKE_A_MODEL

    folder = Path(str(path)).expanduser()
    if (folder / "config.json").is_file():
        return
    if (folder / "best" / "config.json").is_file() or (folder / "latest" / "config.json").is_file():
        raise AgentSpecError(f"{folder} is a training run, not a model folder: use llm:{folder / 'best'} "
                             f"(or llm:{folder / 'latest'})")
    what = "does not exist" if not folder.exists() else "is not a Hugging Face model folder (no config.json)"
    raise AgentSpecError(f"model folder {str(folder)!r} {what}: {MAKE_A_MODEL}")


def _factory(core, seed, positional, **opts):
    from arena.errors import AgentSpecError

    if not positional:
        raise AgentSpecError("llm agents need a model folder: llm:<path to a Hugging Face model folder>")
    check_model_folder(positional)  # before torch and transformers are imported (seconds)
    from arena.inference.engine import ENGINE_NAMES

    asked = str(opts.pop("engine", "hf"))
    kind = ENGINE_NAMES.get(asked.lower())
    if kind is None:
        raise AgentSpecError(f"llm engine must be one of {', '.join(ENGINE_NAMES)}, got {asked[:40]!r}")
    dtype = opts.pop("dtype", "bf16" if kind == "vllm" else "fp32")
    engine = cached_engine(positional, dtype, kind)
    return LLMAgent(engine, engine.tokenizer, seed=seed, **opts)
