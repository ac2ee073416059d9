"""The language-model Learner: model, optimizer, device and precision, and one update step.

`LLMLearner.step(batch)` is the whole update: minibatches of the batch's samples over
``epochs`` passes, the configured policy loss on the generated tokens (with the rollout
log-probs as the behaviour policy), the optional critic's value loss and the entropy
bonus, gradient clipping, the (fp16) loss scaler. It knows nothing of games, leagues or
rollouts; the pipeline-parallel and sharded wrappers wrap exactly this object.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from arena.trainers.common.device import autocast, grad_scaler, resolve_device


@dataclass
class Sample:
    """One generated response of one turn, with what the loss needs."""

    prompt_ids: list[int]
    response_ids: list[int]
    old_logp: list[float]
    topk_ids: list[list[int]] | None
    topk_logp: list[list[float]] | None
    adv: float
    ret: float
    critic_text: str | None = None


@dataclass
class Batch:
    samples: list[Sample]
    #: Seeds the minibatch shuffle (the trainer derives it from the run seed and the iteration).
    shuffle_seed: int = 0

    @property
    def tokens(self) -> int:
        return sum(len(s.response_ids) for s in self.samples)


@dataclass(frozen=True)
class LearnerSettings:
    """What the update needs from a training config."""

    loss: str = "dppo_binary_tv"
    loss_kwargs: tuple[tuple[str, Any], ...] = ()
    agg: str = "token_mean"
    lr: float = 1e-4
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    epochs: int = 1
    minibatch: int = 128
    max_new_tokens: int = 256
    temperature: float = 1.0
    entropy_coef: float = 0.0
    critic_coef: float = 0.5
    device: str = "cpu"
    precision: str = "fp32"

    @classmethod
    def of(cls, cfg: Any) -> "LearnerSettings":
        """From a `SpiralConfig`: its ``learner:`` section, and the rollouts' length, temperature and device."""
        s = cfg.learner
        return cls(loss=s.loss, loss_kwargs=tuple(sorted(s.loss_kwargs.items())), agg=s.agg, lr=s.lr,
                   weight_decay=s.weight_decay, grad_clip=s.grad_clip, epochs=s.epochs,
                   minibatch=s.minibatch, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                   entropy_coef=s.entropy_coef, critic_coef=s.critic_coef, device=cfg.device,
                   precision=s.train_precision)


def minibatch_loop(settings: LearnerSettings, batch: Batch,
                   update: Callable[[list[Sample]], dict[str, float]],
                   on_epoch: Callable[[int, int], None] | None = None) -> dict[str, float]:
    """``LLMLearner.step``'s loop: ``epochs`` passes over ``batch`` shuffled by ``batch.shuffle_seed``,
    ``update(minibatch)`` on each ``minibatch`` samples, the mean of each stat over the updates
    (``mismatch`` is the first update's: measured before any update of this batch). Every
    parallel learner runs this same loop, so all of them see the same minibatches."""
    samples = batch.samples
    if not samples:
        return {}
    rng = random.Random(batch.shuffle_seed)
    order = list(range(len(samples)))
    agg: dict[str, list[float]] = {}
    first = True
    for e in range(settings.epochs):
        rng.shuffle(order)
        for i in range(0, len(order), settings.minibatch):
            stats = dict(update([samples[j] for j in order[i:i + settings.minibatch]]))
            if not first:
                stats.pop("mismatch", None)
            first = False
            for k, v in stats.items():
                agg.setdefault(k, []).append(float(v))
        if on_epoch is not None:
            on_epoch(e + 1, settings.epochs)
    return {k: float(np.mean(v)) for k, v in agg.items()}


class LLMLearner:
    def __init__(self, model: Any, tokenizer: Any, settings: LearnerSettings, critic: Any = None):
        import torch

        from arena.trainers.common.losses import TOPK_LOSSES, get_loss

        self.settings = settings
        self.device = resolve_device(settings.device)
        self.model = model.to(self.device)
        self.tok = tokenizer
        self.critic = critic.to(self.device) if critic is not None else None
        self.loss_fn = get_loss(settings.loss)
        self.needs_topk = settings.loss in TOPK_LOSSES
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
        if self.critic is not None:
            self.opt.add_param_group({"params": self.critic.parameters()})
        self.scaler = grad_scaler(self.device, settings.precision)
        #: Called with (passes done, epochs) after each pass over a batch (a trainer's progress display).
        self.on_epoch: Callable[[int, int], None] | None = None

    def autocast(self):
        """The training precision's autocast context on the learner's device."""
        return autocast(self.device, self.settings.precision)

    def set_lr(self, lr: float) -> None:
        for group in self.opt.param_groups:
            group["lr"] = lr

    def values(self, texts: list[str]) -> list[float]:
        """The critic's V(s) of each text (no grad); [] without a critic."""
        if self.critic is None:
            return []
        return self.critic.batched_values(self.model, self.tok, texts)

    def step(self, batch: Batch) -> dict[str, float]:
        """One update on `batch`: ``epochs`` shuffled passes of ``minibatch`` samples. Returns mean stats."""
        if batch.samples and self.needs_topk and batch.samples[0].topk_ids is None:
            raise ValueError(f"loss {self.settings.loss} needs top-K rollout log-probs: set top_k > 0")
        self.model.train()
        try:
            return minibatch_loop(self.settings, batch, self._minibatch, self.on_epoch)
        finally:
            self.model.eval()

    def _minibatch(self, mb: list[Sample]) -> dict[str, float]:
        """Forward, loss, backward, clip and optimizer step on one minibatch; its stats."""
        import torch

        from arena.trainers.llm.logprobs import sequence_logprobs

        st, dev = self.settings, self.device
        pad = self.tok.pad_token_id or 0
        with self.autocast():
            out = sequence_logprobs(self.model, [s.prompt_ids for s in mb], [s.response_ids for s in mb],
                                    topk_ids=[s.topk_ids for s in mb] if self.needs_topk else None,
                                    pad_id=pad, temperature=st.temperature, entropy_grad=st.entropy_coef > 0)
        logp, mask = out["logp"].float(), out["mask"].float()
        T = logp.shape[1]
        old = torch.zeros_like(logp)
        for b, s in enumerate(mb):
            old[b, : len(s.old_logp)] = torch.tensor(s.old_logp[:T])
        adv = torch.tensor([s.adv for s in mb], dtype=torch.float32, device=dev)
        kwargs: dict[str, Any] = dict(st.loss_kwargs)
        if self.needs_topk:
            # K from a sample that generated something (an empty response has no top-K rows)
            K = next((len(s.topk_ids[0]) for s in mb if s.topk_ids), 1)
            told = torch.full((len(mb), T, K), -1e4, device=dev)
            for b, s in enumerate(mb):
                n = min(len(s.topk_logp), T)
                if n:
                    told[b, :n] = torch.tensor(s.topk_logp[:n])
            kwargs.update(topk_old_logp=told, topk_logp=out["topk_logp"].float())
        loss, stats = self.loss_fn(logp, old, adv, mask, agg=st.agg, max_len=st.max_new_tokens, **kwargs)
        with torch.no_grad():  # rollout/trainer log-prob mismatch (the loop keeps the first minibatch's)
            stats["mismatch"] = float(((logp - old).abs() * mask).sum() / mask.sum().clamp_min(1))
        if self.critic is not None:
            vloss = self.critic.value_loss(self.model, self.tok, [s.critic_text for s in mb], [s.ret for s in mb])
            loss = loss + st.critic_coef * vloss
            stats["value_loss"] = float(vloss.detach())
        entropy = (out["entropy"].float() * mask).sum() / mask.sum().clamp_min(1)
        if st.entropy_coef > 0:
            loss = loss - st.entropy_coef * entropy
        stats["entropy"] = float(entropy.detach())
        self.opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.opt)
        params = [p for g in self.opt.param_groups for p in g["params"]]
        stats["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, st.grad_clip))
        self.scaler.step(self.opt)
        self.scaler.update()
        stats["loss"] = float(loss.detach())
        return stats

    # -- state ---------------------------------------------------------------------------
    def save_weights(self, folder: str | Path) -> None:
        """The model and tokenizer as a Hugging Face folder (loadable by ``llm:<folder>``)."""
        self.model.save_pretrained(folder)
        self.tok.save_pretrained(folder)

    def load_weights(self, folder: str | Path) -> None:
        """Load the model weights of a Hugging Face folder into the live model (cast to its dtype)."""
        saved = type(self.model).from_pretrained(folder)
        self.model.load_state_dict(saved.state_dict())

    def model_changed(self) -> None:
        """The model's weights were changed in place outside :meth:`step` (imitation, a restore).

        Nothing to do here: this learner trains the model object itself. A learner that trains
        a sharded or pipelined copy (`arena.trainers.parallel.learner.ParallelLearner`) copies
        the new weights into it.
        """

    def optimizer_names(self) -> list[str]:
        """The name of each optimizer parameter, in the optimizer's order (the critic's as ``critic.*``)."""
        names = [n for n, _ in self.model.named_parameters()]
        if self.critic is not None:
            names += [f"critic.{n}" for n, _ in self.critic.named_parameters()]
        return names

    def state_dict(self) -> dict[str, Any]:
        """Optimizer (keyed by parameter name, so any parallel setting loads it), loss scaler and critic
        (the model weights go to the folder: `save_weights`)."""
        from arena.trainers.common.checkpoints import named_optimizer_state

        return {"optimizer": named_optimizer_state(self.opt.state_dict(), self.optimizer_names()),
                "scaler": self.scaler.state_dict(),
                "critic": self.critic.state_dict() if self.critic is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        from arena.trainers.common.checkpoints import NAMED_OPTIMIZER, native_optimizer_state

        opt = state["optimizer"]
        if opt.get("format") == NAMED_OPTIMIZER:
            opt = native_optimizer_state(opt, self.optimizer_names(), self.opt.param_groups)
        self.opt.load_state_dict(opt)  # a checkpoint written before names: torch's own index form
        if state.get("scaler"):  # a parallel run (fp32 only) saves none
            self.scaler.load_state_dict(state["scaler"])
        if self.critic is not None and state.get("critic") is not None:
            self.critic.load_state_dict(state["critic"])

    def close(self) -> None:
        """Nothing to release (a parallel learner stops its ranks)."""
