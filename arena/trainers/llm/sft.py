"""Imitation warm start (SCC-style for LLMs): supervised fine-tuning on replays.

Every recorded move of the chosen seats becomes ``prompt -> \\boxed{move}``:
the prompt is the prompt template applied to the observation the player saw,
the target is the move as the template writes it. Replays of random agents
teach the format and the legal moves (not strategy); replays of strong agents
also teach play.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from arena.agents.prompts import PromptTemplate, move_text
from arena.replays.format import Replay


@dataclass
class Example:
    prompt: str
    answer: str


def examples_from_replays(replays: Iterable[Replay], template: PromptTemplate, kind: str,
                          seats: Sequence[int] | None = None) -> list[Example]:
    out = []
    for rep in replays:
        for s in rep.steps:
            if s["event"] != "ok" or s.get("obs") is None:
                continue
            if seats is not None and s["player"] not in seats:
                continue
            out.append(Example(template.render(rep.game_id, s["obs"], s["player"]),
                               template.answer(move_text(None, s["action"], kind))))
    return out


def encode_examples(tokenizer: Any, examples: Sequence[Example], encode_prompt) -> list[tuple[list[int], list[int]]]:
    eos = tokenizer.eos_token_id
    return [(encode_prompt(e.prompt), tokenizer(e.answer, add_special_tokens=False)["input_ids"] + [eos])
            for e in examples]


def supervised_finetune(model: Any, tokenizer: Any, pairs: Sequence[tuple[list[int], list[int]]], *, epochs: int,
                        lr: float, batch_size: int, seed: int, log=None, autocast=None, on_batch=None) -> list[float]:
    """Cross-entropy on the answer tokens only; returns the mean loss of each epoch. ``log(epoch, loss)``
    after each epoch, ``on_batch(examples trained on so far, over all epochs)`` after each batch."""
    import torch

    from arena.trainers.llm.logprobs import sequence_logprobs

    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    order = list(range(len(pairs)))
    for epoch in range(epochs):
        rng.shuffle(order)
        total, n = 0.0, 0
        for i in range(0, len(order), batch_size):
            batch = [pairs[j] for j in order[i:i + batch_size]]
            ctx = autocast() if autocast is not None else _null()
            with ctx:
                out = sequence_logprobs(model, [p for p, _ in batch], [r for _, r in batch],
                                        pad_id=tokenizer.pad_token_id or 0)
            logp, mask = out["logp"].float(), out["mask"].float()
            loss = -(logp * mask).sum() / mask.sum().clamp_min(1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            total += float(loss.detach()) * len(batch)
            n += len(batch)
            if on_batch is not None:
                on_batch(epoch * len(order) + n)
        losses.append(total / max(n, 1))
        if log is not None:
            log(epoch, losses[-1])
    model.eval()
    return losses


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
