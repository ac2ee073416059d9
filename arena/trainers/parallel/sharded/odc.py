"""The ODC engine: each rank owns a shard of every unit, gathers a unit's weights on demand, and meets the other
ranks three times a minibatch (the reduction, the exchange of norms and losses, the new shards)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from arena.trainers.parallel.sharded import ODCError
from arena.trainers.parallel.sharded.engine import StepResult, _exchange, _forward_backward, _Sharded
from arena.trainers.parallel.sharded.layout import _unit_modules, make_layout
from arena.trainers.parallel.sharded.transports import Transport, make_transport

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.llm.learner import LearnerSettings, Sample


class ODCSharded(_Sharded):
    """This rank's view of an ODC-sharded causal LM: the module, its shards, the optimizer of its shards.

    ``model``: the full model (every rank builds the same; rank 0's weights are used). Its
    parameters are replaced by views of one local buffer per unit that the on-demand
    gathers fill; the model object keeps working as an ordinary module (``odc.module``):
    any forward (a rollout's generation too) first gathers the units it runs if they are
    older than the last update; call :meth:`ensure_all` before reading the weights any other
    way. ``betas`` and ``eps`` are AdamW's (the learner's are torch's defaults).
    """

    kind = "odc"

    def __init__(self, model, *, settings: "LearnerSettings | None" = None, n_microbatches: int = 1,
                 transport: str | Transport = "auto", group=None, pad_to: int = 8, balance: str = "tokens",
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, device: str = "cpu",
                 units: list[tuple[str, list[Any]]] | None = None):
        import torch
        from torch import nn

        self._setup(model, settings, n_microbatches, group, pad_to, balance, device, causal_lm=units is None)
        self.module = model.train()
        self.layout = make_layout(model, self.world_size, units)
        self.transport = transport if isinstance(transport, Transport) else make_transport(transport, group, device)
        L = self.layout
        params = dict(model.named_parameters())
        # one buffer per unit: autograd's version counter is shared by all views of a buffer, so a
        # gather into one big buffer would look like an in-place change of the layers already run
        dev = torch.device(device)
        self.full = [torch.zeros(L.world_size * u.shard, dtype=torch.float32, device=dev) for u in L.units]
        init = torch.zeros(L.total, dtype=torch.float32, device=dev)
        self._params: list[tuple[Any, int, int]] = []  # (parameter, flat offset, numel)
        replace: dict[int, Any] = {}
        for ui, unit in enumerate(L.units):
            for name, shape, off in zip(unit.params, unit.shapes, unit.offsets):
                old = params[name]
                if old.dtype != torch.float32:
                    raise ODCError(f"parameter {name} is {old.dtype}: sharded training runs fp32 only for now")
                n, start = old.numel(), unit.base + off
                init[start:start + n] = old.detach().reshape(-1)
                new = nn.Parameter(self.full[ui][off:off + n].view(shape), requires_grad=old.requires_grad)
                replace[id(old)] = new
                self._params.append((new, start, n))
        for mod in model.modules():  # a tied parameter gets the one new parameter under each of its names
            for k, p in list(mod._parameters.items()):
                if p is not None and id(p) in replace:
                    mod._parameters[k] = replace[id(p)]
        self.transport.open(L, self.rank, group, init)
        st = self.settings
        self.opt = torch.optim.AdamW(self.transport.owned(), lr=st.lr, betas=betas, eps=eps,
                                     weight_decay=st.weight_decay)
        self.version = 0
        self._have = [-1] * len(L.units)
        self._gather_s = 0.0
        unit_of = {id(p): i for i, u in enumerate(L.units) for p in (replace[id(params[n])] for n in u.params)}
        self._hooks = []
        hooked = [mod for _, mods in (units if units is not None else _unit_modules(model)) for mod in mods]
        for mod in hooked:
            need = sorted({unit_of[id(p)] for p in mod.parameters() if id(p) in unit_of})
            if need:
                self._hooks.append(mod.register_forward_pre_hook(self._pre_hook(need)))
        self._rest = [i for i, u in enumerate(L.units) if u.name == "rest"]

    # -- on-demand gathers -------------------------------------------------------------
    def _pre_hook(self, units: list[int]):
        def hook(_module, _args):
            self._ensure(units)
        return hook

    def _ensure(self, units) -> None:
        import torch

        todo = [u for u in units if self._have[u] != self.version]
        if not todo:
            return
        t0 = time.perf_counter()
        with torch.no_grad():
            for u in todo:
                self.transport.gather(u, self.full[u])
                self._have[u] = self.version
        self._gather_s += time.perf_counter() - t0

    def ensure_all(self) -> None:
        """Gather every unit's current weights (before reading the module outside a forward)."""
        self._ensure(range(len(self.layout.units)))

    # -- the step ---------------------------------------------------------------------
    def step(self, samples: Sequence["Sample"], pad_id: int = 0) -> StepResult:
        """One minibatch update (all ranks call it with the same samples; see the module doc)."""
        t_start = time.perf_counter()
        plan = self._start(samples, pad_id)
        mbs = plan.ranks[self.rank]

        def compute():
            _forward_backward(self.module, self.loss, mbs, self.device)
            return self.loss.collect()

        out = self.run_step(compute, t_start)
        out.tokens, out.padded = plan.tokens(), plan.tokens(True)
        return out

    def run_step(self, compute, t_start: float | None = None) -> StepResult:
        """One update around ``compute()``, which runs this rank's forward and backward and returns its
        (weighted loss, weighted stats): the gradients reduced, the global norm clipped, AdamW on the
        shards, the new shards published. All ranks call it; any module (see ``units``)."""
        import torch

        st = self.settings
        t_start = time.perf_counter() if t_start is None else t_start
        for p, _, _ in self._params:
            p.grad = None
        self._gather_s = 0.0
        syncs0 = self.transport.syncs
        self._ensure(self._rest)
        t0 = time.perf_counter()
        mine = compute()
        t1 = time.perf_counter()
        buf = self.transport.grad_buffer()
        with torch.no_grad():
            for p, start, n in self._params:
                if p.grad is None:
                    buf[start:start + n].zero_()
                else:
                    buf[start:start + n].copy_(p.grad.reshape(-1))
                    p.grad = None
        grads = self.transport.reduce()  # meeting 1
        t2 = time.perf_counter()
        sumsq = float(sum(float(g.double().pow(2).sum()) for g in grads))
        loss, stats, extras = _exchange(mine, {"sumsq": sumsq}, self.group)  # meeting 2
        t3 = time.perf_counter()
        norm = math.sqrt(sum(e["sumsq"] for e in extras))
        coef = torch.clamp(torch.tensor(st.grad_clip / (norm + 1e-6), dtype=torch.float32,
                                        device=grads[0].device if grads else "cpu"), max=1.0)
        for shard, g in zip(self.transport.owned(), grads):
            shard.grad = g.mul_(coef)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        t4 = time.perf_counter()
        self.transport.publish()  # meeting 3
        self.version += 1
        t5 = time.perf_counter()
        stats["grad_norm"] = norm
        stats["loss"] = loss
        timing = {"step_s": t5 - t_start, "plan_s": t0 - t_start, "compute_s": (t1 - t0) - self._gather_s,
                  "gather_s": self._gather_s, "reduce_s": t2 - t1, "wait_s": self.transport.wait_s,
                  "exchange_s": t3 - t2, "optimizer_s": t4 - t3, "publish_s": t5 - t4,
                  "syncs": float(self.transport.syncs - syncs0 + 1)}
        self.last = StepResult(loss=loss, stats=stats, timing=timing)
        return self.last

    # -- whole-model views ------------------------------------------------------------
    def full_state_dict(self) -> dict[str, Any]:
        """The unsharded model's state dict on every rank (CPU copies; no collective)."""
        self.ensure_all()
        return {k: v.detach().cpu().clone() for k, v in self.module.state_dict().items()}

    def logits(self, ids):
        """The model's logits for right-padded rows ``ids`` on this rank (no collective)."""
        import torch

        self.ensure_all()
        with torch.no_grad():
            return self.module(input_ids=ids, use_cache=False).logits

    def close(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self.transport.close()
