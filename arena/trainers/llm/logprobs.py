"""Current-policy log-probs of stored responses (the learner's side of a rollout).

:func:`sequence_logprobs` runs one forward pass over ``prompt + response`` for
a batch and returns, per response token, the log-prob under the model's
temperature-scaled distribution -- the same quantity the rollout engine
(:mod:`arena.inference.engine`) reports as ``Generation.logprobs``, so
``exp(logp - old_logp)`` is the importance ratio the losses in
:mod:`arena.trainers.common.losses` expect.

Layout: prompts are left-padded to the longest prompt ``P`` and responses
right-padded to the longest response ``T``; position ids count real tokens
only (as in generation), so padding does not shift positions.  The logit at
position ``i`` predicts token ``i + 1``: the logits at ``P - 1 ... P + T - 2``
predict response tokens ``0 ... T - 1``.
"""

from __future__ import annotations

from typing import Any

from arena.errors import ArenaError


def sequence_logprobs(
    model,
    batch_prompt_ids: list[list[int]],
    batch_response_ids: list[list[int]],
    topk_ids: list[list[list[int]]] | None = None,
    pad_id: int = 0,
    temperature: float = 1.0,
    entropy_grad: bool = False,
) -> dict[str, Any]:
    """Log-probs of each response token under ``model`` (differentiable).

    Returns a dict of tensors (on the model's device, float32):

    * ``logp``      ``[B, T]`` log-prob of each response token, with grad; 0 on padding.
    * ``mask``      ``[B, T]`` 1.0 on response tokens, 0.0 on padding.
    * ``topk_logp`` ``[B, T, K]`` current log-probs of the stored rollout top-K
                    ids (only when ``topk_ids`` is given; 0 on padding), with grad.
    * ``entropy``   ``[B, T]`` entropy of the temperature-scaled distribution (detached unless
                    ``entropy_grad``, for an entropy bonus).

    ``topk_ids[b][t]`` is the list of K ids stored for response token ``t`` of
    row ``b`` (as :class:`~arena.inference.engine.Generation.topk_ids`).
    """
    import torch

    B = len(batch_prompt_ids)
    if B == 0 or len(batch_response_ids) != B:
        raise ArenaError(f"need one response per prompt and at least one row, got {B} prompts and {len(batch_response_ids)} responses")
    if any(len(p) == 0 for p in batch_prompt_ids):
        raise ArenaError("every prompt needs at least one token (the first response token must be predicted from something)")
    if not temperature > 0:
        raise ArenaError(f"temperature must be > 0, got {temperature}")
    P = max(len(p) for p in batch_prompt_ids)
    T = max(1, max(len(r) for r in batch_response_ids))
    K = 0
    if topk_ids is not None:
        if len(topk_ids) != B:
            raise ArenaError(f"topk_ids has {len(topk_ids)} rows for {B} responses")
        K = max((len(k) for row in topk_ids for k in row), default=0)
        if K == 0:
            raise ArenaError("topk_ids given but empty")

    device = next(model.parameters()).device
    L = P + T
    ids = torch.full((B, L), pad_id, dtype=torch.long)
    attn = torch.zeros((B, L), dtype=torch.long)
    mask = torch.zeros((B, T), dtype=torch.float32)
    tk = torch.zeros((B, T, K), dtype=torch.long) if K else None
    for b, (p, r) in enumerate(zip(batch_prompt_ids, batch_response_ids)):
        ids[b, P - len(p) : P] = torch.as_tensor(p, dtype=torch.long)
        attn[b, P - len(p) : P] = 1
        if r:
            ids[b, P : P + len(r)] = torch.as_tensor(r, dtype=torch.long)
            attn[b, P : P + len(r)] = 1
            mask[b, : len(r)] = 1.0
        if K:
            rows = topk_ids[b]
            if len(rows) != len(r):
                raise ArenaError(f"row {b}: {len(rows)} top-K lists for {len(r)} response tokens")
            for t, k in enumerate(rows):
                if len(k) != K:
                    raise ArenaError(f"row {b}, token {t}: {len(k)} top-K ids, expected {K}")
            if rows:
                tk[b, : len(r)] = torch.as_tensor(rows, dtype=torch.long)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)

    out = model(
        input_ids=ids.to(device),
        attention_mask=attn.to(device),
        position_ids=pos.to(device),
        use_cache=False,
        logits_to_keep=T + 1,  # positions P-1 ... L-1; the last one predicts nothing we need
    )
    logits = out.logits[:, :-1, :].float() / temperature  # [B, T, V]: logits[:, t] predicts response token t
    logsm = torch.log_softmax(logits, dim=-1)
    mask = mask.to(device)
    target = ids[:, P:].to(device)
    logp = logsm.gather(-1, target.unsqueeze(-1)).squeeze(-1) * mask
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        entropy = -(logsm.exp() * logsm).sum(-1) * mask
    result = {"logp": logp, "mask": mask, "entropy": entropy if entropy_grad else entropy.detach()}
    if K:
        result["topk_logp"] = logsm.gather(-1, tk.to(device)) * mask.unsqueeze(-1)
    return result
