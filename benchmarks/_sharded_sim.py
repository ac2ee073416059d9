"""What the sharded engines are measured against: synthetic trajectories of given token counts, and the ideal
speed-ups of meeting once per minibatch (ODC) over meeting at every microbatch or layer (FSDP2).

Not part of training: ``bench_odc.py``, ``bench_parallel_learner.py`` and the ODC tests use it.
Import it with ``benchmarks/`` on ``sys.path`` (as the benchmarks do): ``import _sharded_sim``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from arena.trainers.parallel.sharded import ODCError

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.llm.learner import Sample


def samples_of_lengths(lengths: Sequence[tuple[int, int]], *, seed: int = 0, vocab: int = 100,
                       topk: int = 0) -> list["Sample"]:
    """Synthetic trajectories with the given ``(prompt, response)`` token counts (random ids and log-probs)."""
    from arena.trainers.llm.learner import Sample

    rng = random.Random(seed)
    out = []
    for p, r in lengths:
        if p < 1:
            raise ODCError(f"a prompt needs at least one token, got a length of {p}")
        resp = [rng.randint(4, vocab - 1) for _ in range(r)]
        tk = [[t] + [rng.randint(4, vocab - 1) for _ in range(topk - 1)] for t in resp] if topk else None
        tl = [[math.log(rng.uniform(0.005, 0.02)) for _ in range(topk)] for _ in resp] if topk else None
        out.append(Sample(prompt_ids=[1] + [rng.randint(4, vocab - 1) for _ in range(p - 1)], response_ids=resp,
                          old_logp=[math.log(rng.uniform(0.005, 0.03)) for _ in resp], topk_ids=tk, topk_logp=tl,
                          adv=rng.choice([-1.0, -0.5, 0.5, 1.0]), ret=0.0))
    return out


def lockstep_ratio(table: Sequence[Sequence[float]]) -> float:
    """``sum_i max_r t[r][i] / max_r sum_i t[r][i]``: ranks that wait for each other at every microbatch
    over ranks that meet once per minibatch, when a microbatch costs ``t`` (the ideal ODC / FSDP speed-up)."""
    m = max((len(r) for r in table), default=0)
    lock = sum(max((r[i] if i < len(r) else 0) for r in table) for i in range(m))
    once = max((sum(r) for r in table), default=0)
    return lock / once if once else 1.0


def fsdp2_best_ratio(table: Sequence[Sequence[float]], forward_share: float = 1 / 3) -> float:
    """FSDP2-best's step over ODC's when a microbatch costs ``t`` (forward ``forward_share * t``, backward the rest).

    FSDP2 at its best settings waits for the slowest rank only where it communicates: at
    every layer of the first forward (the all-gathers) and of the last backward (the
    reduce-scatters); between them each rank runs alone. So its step is about
    ``max_r F[r][0] + max_r (B[r][0] + sum_{0<i<m-1} t[r][i] + F[r][m-1]) + max_r B[r][m-1]``
    against ODC's ``max_r sum_i t[r][i]``. (For one microbatch both are ``max_r t``.)
    """
    f = forward_share
    rows = [list(r) for r in table if r]
    once = max((sum(r) for r in rows), default=0)
    if not once:
        return 1.0
    m = max(len(r) for r in rows)
    rows = [r + [0] * (m - len(r)) for r in rows]
    if m == 1:
        return max(r[0] for r in rows) / once
    first = max(f * r[0] for r in rows)
    middle = max((1 - f) * r[0] + sum(r[1:m - 1]) + f * r[m - 1] for r in rows)
    last = max((1 - f) * r[m - 1] for r in rows)
    return (first + middle + last) / once
