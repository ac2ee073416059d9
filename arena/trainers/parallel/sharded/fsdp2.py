"""The baseline engine: FSDP2 (``fully_shard``) on every decoder layer and the root, with ODC's plan and loss."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from arena.trainers.parallel.pipeline.stages import _llama_parts
from arena.trainers.parallel.sharded import ODCError
from arena.trainers.parallel.sharded.engine import StepResult, _exchange, _forward_backward, _Sharded
from arena.trainers.parallel.sharded.plan import _empty_microbatch

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.llm.learner import LearnerSettings, Sample


class FSDP2Sharded(_Sharded):
    """The baseline: ``fully_shard`` on every decoder layer and on the root, the same plan and loss as ODC.

    ``best=True``: ``reshard_after_forward=False`` and gradient sync and resharding after
    backward only on each rank's last microbatch (the least FSDP2 communicates);
    ``best=False``: FSDP2's defaults (reshard after forward, sync every microbatch). The
    reduction sums (``set_force_sum_reduction_for_comms``, divide factor 1): the
    microbatch losses already carry global weights. Every rank runs as many microbatches
    as the rank with the most (empty ones are one padding row of weight 0).
    """

    kind = "fsdp2"

    def __init__(self, model, *, settings: "LearnerSettings | None" = None, n_microbatches: int = 1, group=None,
                 pad_to: int = 8, balance: str = "tokens", best: bool = True,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, device: str = "cpu",
                 units: list[tuple[str, list[Any]]] | None = None):
        import torch

        try:
            from torch.distributed.fsdp import FSDPModule, fully_shard
        except ImportError as e:  # pragma: no cover - torch < 2.6
            raise ODCError(f"FSDP2 needs torch.distributed.fsdp.fully_shard, which torch {torch.__version__} "
                           "lacks: upgrade torch") from e
        from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

        self._setup(model, settings, n_microbatches, group, pad_to, balance, device, causal_lm=units is None)
        self.best = bool(best)
        kind = torch.device(device).type  # a mesh takes the device type ("cuda"), not "cuda:1"
        mesh = (init_device_mesh(kind, (self.world_size,)) if group is None
                else DeviceMesh.from_group(group, kind))
        inner = _llama_parts(model).layers if units is None else [m for _, mods in units for m in mods]
        for layer in inner:
            fully_shard(layer, mesh=mesh, reshard_after_forward=not self.best)
        fully_shard(model, mesh=mesh, reshard_after_forward=not self.best)
        for mod in model.modules():
            if isinstance(mod, FSDPModule):
                mod.set_force_sum_reduction_for_comms(True)
                mod.set_gradient_divide_factor(1.0)
        self.module = model.train()
        st = self.settings
        self.opt = torch.optim.AdamW(model.parameters(), lr=st.lr, betas=betas, eps=eps,
                                     weight_decay=st.weight_decay)

    def step(self, samples: Sequence["Sample"], pad_id: int = 0) -> StepResult:
        """One minibatch update (all ranks call it with the same samples)."""
        t_start = time.perf_counter()
        plan = self._start(samples, pad_id)
        m = max(len(r) for r in plan.ranks)
        mbs = list(plan.ranks[self.rank])
        mbs += [_empty_microbatch(plan.topk, pad_id, self.pad_to) for _ in range(m - len(mbs))]

        def compute():
            for i, mb in enumerate(mbs):
                last = i == m - 1
                if self.best:
                    self.module.set_requires_gradient_sync(last)
                    self.module.set_reshard_after_backward(last)
                _forward_backward(self.module, self.loss, [mb], self.device)
            return self.loss.collect()

        out = self.run_step(compute, t_start)
        out.tokens, out.padded = plan.tokens(), plan.tokens(True)
        return out

    def run_step(self, compute, t_start: float | None = None) -> StepResult:
        """One update around ``compute()`` (this rank's forward and backward; returns its weighted loss
        and stats): FSDP2 reduces the gradients in the backward; then the global norm is clipped and
        AdamW steps the shards. All ranks call it; any module (see ``units``)."""
        import torch

        st = self.settings
        t_start = time.perf_counter() if t_start is None else t_start
        t0 = time.perf_counter()
        mine = compute()
        t1 = time.perf_counter()
        norm = torch.nn.utils.clip_grad_norm_(list(self.module.parameters()), st.grad_clip)
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        t2 = time.perf_counter()
        loss, stats, _ = _exchange(mine, {}, self.group)
        t3 = time.perf_counter()
        stats["grad_norm"] = float(norm)
        stats["loss"] = loss
        timing = {"step_s": t3 - t_start, "plan_s": t0 - t_start, "compute_s": t1 - t0, "optimizer_s": t2 - t1,
                  "exchange_s": t3 - t2}
        self.last = StepResult(loss=loss, stats=stats, timing=timing)
        return self.last

    def full_state_dict(self) -> dict[str, Any]:
        """The unsharded model's state dict on every rank (a collective: all ranks call it)."""
        out = {}
        for k, v in self.module.state_dict().items():
            v = v.full_tensor() if hasattr(v, "full_tensor") else v
            out[k] = v.detach().cpu().clone()
        return out

    def logits(self, ids):
        """The model's logits for right-padded rows ``ids`` (a collective: all ranks call it)."""
        import torch

        with torch.no_grad():
            return self.module(input_ids=ids, use_cache=False).logits

    def close(self) -> None:
        pass
