"""Prompt templates and answer parsing for language-model players.

A template turns what a player sees (game id, observation text, seat) into the
model's input, and a move into the answer text a model should produce; the
parser reads the last ``\\boxed{...}`` of the model's output. SPIRAL's template
goes inside the model's chat template when the tokenizer has one; the
``compact`` template is for tiny models trained from scratch: a short board view
with empty cells numbered, and nothing else.
"""

from __future__ import annotations

import re
from typing import Any, Callable

SPIRAL_PROMPT = (
    "You are playing a two-player zero-sum game. Make valid actions to win.\n"
    "Observation: {obs}\n"
    "Please reason step by step, and put your final answer within \\boxed{{}}."
)

_BOXED = "\\boxed{"


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` in `text` (nested braces allowed), or None."""
    start = text.rfind(_BOXED)
    while start != -1:
        i, depth = start + len(_BOXED), 1
        while i < len(text):
            c = text[i]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    return text[start + len(_BOXED): i].strip()
            i += 1
        start = text.rfind(_BOXED, 0, start)  # unclosed: try an earlier one
    return None


def boxed(move_text: str) -> str:
    return f"\\boxed{{{move_text}}}"


# -- compact views for tiny models ------------------------------------------------------------
def _compact_tic_tac_toe(text: str, player: int) -> str:
    rows = [r for r in text.strip().splitlines() if r][-3:]
    cells = "".join(rows)
    board = "".join(str(i) if c == "." else c for i, c in enumerate(cells))
    return f"{'xo'[player]}:{board[0:3]}/{board[3:6]}/{board[6:9]}="


COMPACT_VIEWS: dict[str, Callable[[str, int], str]] = {
    "openspiel/tic_tac_toe-v0": _compact_tic_tac_toe,
}


class PromptTemplate:
    """``render(game_id, text, player)`` -> model input; ``answer(move_text)`` -> target output.

    A template may end the prompt with the start of the answer (`answer_prefix`,
    e.g. ``\boxed{``): the model then writes only the rest, and `parse` reads
    prefix + output.  A template may also end generation at a `stop` string
    (the compact one at the answer's closing ``}``): nothing after the answer is
    generated, so nothing after it is trained on or sampled with noise.
    """

    name = "base"
    answer_prefix = ""
    stop: tuple[str, ...] = ()

    def render(self, game_id: str, text: str, player: int) -> str:
        raise NotImplementedError

    def answer(self, move_text: str) -> str:
        return boxed(move_text)[len(self.answer_prefix):]

    def parse(self, output: str) -> str | None:
        return last_boxed(self.answer_prefix + output)

    def parse_generation(self, text: str, stop_reason: str | None = None) -> str | None:
        """`parse` of an engine's output; an output that ended at a stop string gets it back
        (engines cut the text before the stop string, as vLLM does)."""
        return self.parse(text + stop_reason if stop_reason else text)


class SpiralTemplate(PromptTemplate):
    name = "spiral"

    def __init__(self, tokenizer: Any = None):
        self.tokenizer = tokenizer
        self.chat = bool(getattr(tokenizer, "chat_template", None))

    def render(self, game_id: str, text: str, player: int) -> str:
        content = SPIRAL_PROMPT.format(obs=text)
        if self.chat:
            return self.tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                      add_generation_prompt=True)
        return content + "\n"


class CompactTemplate(PromptTemplate):
    """For tiny models: a short view and the answer already opened, so the model writes ``4}`` and stops."""

    name = "compact"
    answer_prefix = _BOXED
    stop = ("}",)

    def render(self, game_id: str, text: str, player: int) -> str:
        view = COMPACT_VIEWS.get(game_id)
        body = f"p{player}:{text.strip()}=" if view is None else view(text, player)
        return body + self.answer_prefix


def make_template(name: str, tokenizer: Any = None) -> PromptTemplate:
    if name in ("auto", "spiral"):
        return SpiralTemplate(tokenizer)
    if name == "compact":
        return CompactTemplate()
    raise ValueError(f"unknown prompt template {name!r}: auto, spiral or compact")


def move_text(core_or_obs: Any, action: Any, kind: str) -> str:
    """How a move is written inside ``\\boxed{}``: the action id for discrete games, the text otherwise."""
    return str(int(action)) if kind == "discrete" else str(action)


def parse_move(answer: str | None, kind: str, legal: list | None, parse_text: Callable[[str], Any] | None = None
               ) -> tuple[Any, str | None]:
    """(move, None) or (None, why) from the content of a ``\\boxed{}``."""
    if answer is None:
        return None, "no \\boxed{} answer in the output"
    a = answer.strip()
    if kind == "discrete":
        if re.fullmatch(r"-?\d+", a):
            move = int(a)
            if legal is not None and move not in legal:
                return None, f"\\boxed{{{a}}} is not a legal move"
            return move, None
        if parse_text is not None:
            try:
                return parse_text(a), None
            except (ValueError, KeyError) as e:
                return None, f"\\boxed{{{a}}}: {e}"
        return None, f"\\boxed{{{a}}} is not a move number"
    if legal:
        for cand in (a, f"[{a}]", f"[{a.strip('[]')}]"):
            for m in legal:
                if m.lower() == cand.lower():
                    return m, None
        return None, f"\\boxed{{{a}}} is not one of the legal moves"
    return (a if a.startswith("[") else f"[{a}]"), None
