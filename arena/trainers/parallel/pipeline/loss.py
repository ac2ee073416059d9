"""The learner's policy loss at the last stage: per-token log-probs from logits, one weighted microbatch at a time."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from arena.trainers.parallel.pipeline.packing import _ADV, _MASK, _NEXT, _OLD, _TOPK, _WLOSS, _WTOK

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.llm.learner import LearnerSettings


def token_logprobs(logits, target_ids, mask, temperature: float = 1.0, topk_ids=None, entropy_grad: bool = False):
    """Per-token log-probs from logits: ``sequence_logprobs``'s arithmetic after its forward pass.

    ``logits[..., t, :]`` predicts ``target_ids[..., t]``; ``mask`` is 1.0 where a
    response token is predicted. Returns ``logp`` (with grad, 0 off the mask), ``mask``,
    ``entropy`` of the temperature-scaled distribution (detached unless ``entropy_grad``)
    and, when ``topk_ids [..., K]`` is given, ``topk_logp`` (0 off the mask).
    """
    import torch

    logsm = torch.log_softmax(logits.float() / temperature, dim=-1)
    logp = logsm.gather(-1, target_ids.unsqueeze(-1)).squeeze(-1) * mask
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        entropy = -(logsm.exp() * logsm).sum(-1) * mask
    out = {"logp": logp, "mask": mask, "entropy": entropy if entropy_grad else entropy.detach()}
    if topk_ids is not None:
        out["topk_logp"] = logsm.gather(-1, topk_ids) * mask.unsqueeze(-1)
    return out


class PipelineLoss:
    """The last stage's ``loss_fn(logits, target)``: LLMLearner's policy loss on one microbatch, weighted.

    Records, per call, the loss and the loss's stats; :meth:`collect` combines them over
    the step's microbatches (a sum for the loss, token-weighted means for the stats).
    """

    def __init__(self, settings: "LearnerSettings", topk: int = 0, from_stats: bool = False):
        from arena.trainers.common.losses import get_loss

        self.settings = settings
        self.from_stats = from_stats  # the last stage gives the vocabulary shards' softmax statistics, not logits
        self.loss_fn = get_loss(settings.loss)
        self.topk = topk
        self.timeline: Any = None  # times each call when set (LMPipeline's timeline)
        self.reset()

    def reset(self) -> None:
        self._loss = 0.0
        self._stats: dict[str, float] = defaultdict(float)
        self.calls = 0

    def __call__(self, logits, target):
        import torch

        t0 = self.timeline.now() if self.timeline is not None else 0.0
        st, K = self.settings, self.topk
        if target.device.type == "meta" or logits.device.type == "meta":  # shape inference only
            return logits.float().sum() * 0.0
        ids = target[..., _NEXT].long()
        mask = target[..., _MASK].float()
        old = target[..., _OLD].float()
        adv = target[:, 0, _ADV].float()
        w_loss = float(target[0, 0, _WLOSS])
        w_tok = float(target[0, 0, _WTOK])
        topk_ids = target[..., _TOPK:_TOPK + K].long() if K else None
        if self.from_stats:
            from arena.trainers.parallel.pipeline.vocab import stats_logprobs

            out = stats_logprobs(logits, mask, entropy_grad=st.entropy_coef > 0)
        else:
            out = token_logprobs(logits, ids, mask, st.temperature, topk_ids, entropy_grad=st.entropy_coef > 0)
        logp = out["logp"].float()
        kwargs: dict[str, Any] = dict(st.loss_kwargs)
        if K:
            kwargs.update(topk_old_logp=target[..., _TOPK + K:].float(), topk_logp=out["topk_logp"].float())
        loss, stats = self.loss_fn(logp, old, adv, mask, agg=st.agg, max_len=st.max_new_tokens, **kwargs)
        loss = loss * w_loss
        ent_sum = (out["entropy"].float() * mask).sum()
        if st.entropy_coef > 0:
            loss = loss - st.entropy_coef * ent_sum * w_tok
        with torch.no_grad():
            share = float(mask.sum()) * w_tok  # this microbatch's share of the minibatch's response tokens
            for k, v in stats.items():
                self._stats[k] += float(v) * share
            self._stats["entropy"] += float(ent_sum) * w_tok
            self._stats["mismatch"] += float(((logp - old).abs() * mask).sum()) * w_tok
            self._loss += float(loss.detach())
        self.calls += 1
        if self.timeline is not None:
            self.timeline.add("loss", -1, -1, t0, self.timeline.now())
        return loss

    def collect(self) -> tuple[float, dict[str, float]]:
        return self._loss, dict(self._stats)
