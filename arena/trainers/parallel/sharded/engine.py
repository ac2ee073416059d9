"""What the ODC and FSDP2 engines share: settings, the plan and the loss, the exchange of the ranks' losses,
checkpoints, and ``LLMLearner.step``'s loop over either engine."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from arena.trainers.parallel.pipeline.loss import PipelineLoss
from arena.trainers.parallel.pipeline.stages import _llama_parts
from arena.trainers.parallel.sharded import ODCError
from arena.trainers.parallel.sharded.plan import BALANCE, Microbatch, Plan, plan_minibatch

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.llm.learner import Batch


@dataclass
class StepResult:
    """What one sharded minibatch update returns on every rank."""

    loss: float  # the minibatch loss over all ranks
    stats: dict[str, float]  # the loss's stats, entropy, mismatch and grad_norm, as LLMLearner reports them
    timing: dict[str, float]  # this rank's seconds (step_s, compute_s, ...) and meeting count
    tokens: list[list[int]] = field(default_factory=list)  # [rank][microbatch] tokens of the plan
    padded: list[list[int]] = field(default_factory=list)  # [rank][microbatch] rows x length


def _check(settings, model, device: str, causal_lm: bool = True) -> None:
    if settings.precision != "fp32":
        raise ODCError(f"sharded training runs fp32 only for now, got train precision {settings.precision!r}: "
                       "set learner.train_precision: fp32")
    if causal_lm:
        _llama_parts(model)  # a PipelineError naming what a Llama-style causal LM has


def _exchange(mine: tuple[float, dict[str, float]], extra: dict[str, float],
              group) -> tuple[float, dict[str, float], list[dict[str, float]]]:
    """Sum the ranks' weighted losses and stats (rank order, so every rank gets the same floats)."""
    import torch.distributed as dist

    parts: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(parts, (mine[0], mine[1], extra), group=group)
    loss, stats = 0.0, {}
    for l_, s, _ in parts:
        loss += l_
        for k, v in s.items():
            stats[k] = stats.get(k, 0.0) + v
    return loss, stats, [p[2] for p in parts]


def _forward_backward(module, loss_obj, mbs: Sequence[Microbatch], device: str = "cpu") -> None:
    for mb in mbs:
        logits = module(input_ids=mb.ids.to(device), use_cache=False).logits
        loss_obj(logits, mb.target.to(device)).backward()


def _save_folder(state: dict[str, Any], model_cls, config, folder, tokenizer) -> None:
    import torch

    with torch.random.fork_rng(devices=[]):
        model = model_cls(config)
    model.load_state_dict(state, strict=True)
    model.save_pretrained(folder)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)


class _Sharded:
    """What ODC and FSDP2 share: settings, group, the plan and the loss."""

    kind = "base"

    def _setup(self, model, settings, n_microbatches, group, pad_to, balance, device, causal_lm=True):
        import torch.distributed as dist

        from arena.trainers.common.losses import TOPK_LOSSES
        from arena.trainers.llm.learner import LearnerSettings

        if not dist.is_initialized():
            raise ODCError("no process group: run inside arena.trainers.parallel.launch.launch (or torchrun)")
        self.settings = settings or LearnerSettings()
        _check(self.settings, model, device, causal_lm)
        if balance not in BALANCE:
            raise ODCError(f"unknown balance {balance!r}: use one of {', '.join(BALANCE)}")
        if int(n_microbatches) < 1:
            raise ODCError(f"n_microbatches must be >= 1, got {n_microbatches}")
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.n_microbatches = int(n_microbatches)
        self.pad_to, self.balance, self.device = pad_to, balance, device
        self.config, self.model_cls = getattr(model, "config", None), type(model)
        self.topk = self.settings.loss in TOPK_LOSSES
        self.loss = PipelineLoss(self.settings)
        self.last: StepResult | None = None  # the last step's result

    def _start(self, samples, pad_id: int) -> Plan:
        """The common start of a language-model step: the plan, the loss reset for it."""
        plan = self.plan(samples, pad_id)
        self.loss.topk = plan.topk
        self.loss.reset()
        return plan

    def plan(self, samples, pad_id: int = 0) -> Plan:
        return plan_minibatch(samples, self.world_size, self.n_microbatches, agg=self.settings.agg, topk=self.topk,
                              pad_id=pad_id, pad_to=self.pad_to, balance=self.balance)

    def set_lr(self, lr: float) -> None:
        for g in self.opt.param_groups:
            g["lr"] = lr

    def save_pretrained(self, folder, tokenizer=None, dst: int = 0) -> None:
        """Write the unsharded model as an ordinary Hugging Face folder from rank ``dst`` (all ranks call it)."""
        import torch.distributed as dist

        state = self.full_state_dict()
        if self.rank == dst:
            _save_folder(state, self.model_cls, self.config, folder, tokenizer)
        dist.barrier(group=self.group)


def learner_step(engine: _Sharded, batch: "Batch", pad_id: int = 0) -> dict[str, float]:
    """``LLMLearner.step`` on a sharded engine: its loop (:func:`arena.trainers.llm.learner.minibatch_loop`:
    the same shuffled minibatches, mean stats, the first minibatch's ``mismatch``) over
    :meth:`.odc.ODCSharded.step` / :meth:`.fsdp2.FSDP2Sharded.step`. No critic. Every rank calls it with the
    same batch and gets the same stats."""
    from arena.trainers.llm.learner import minibatch_loop

    return minibatch_loop(engine.settings, batch, lambda mb: engine.step(mb, pad_id).stats)
