"""This rank's part of a pipelined causal LM: its stages, their tied weights, and a schedule per microbatch shape."""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from arena.trainers.parallel.pipeline import PipelineError
from arena.trainers.parallel.pipeline.loss import PipelineLoss
from arena.trainers.parallel.pipeline.schedules import (
    num_stages,
    schedule_class,
    schedule_spec,
    stage_indices,
    stage_owner,
)
from arena.trainers.parallel.pipeline.stages import balanced_layers, split_llama
from arena.trainers.parallel.pipeline.vocab import boundary_width, split_vocab_parallel, vp_stage_indices

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.llm.learner import LearnerSettings


class LMPipeline:
    """This rank's stages of a causal LM, the schedule (one per microbatch shape) and the loss.

    ``model`` is the full model (every rank builds it from the same seed or folder); the
    stages keep references to this rank's parts of it only, so the rest is freed when the
    caller drops ``model``. ``group`` defaults to the world group. ``timeline``: what times every
    stage action, the loss and the waits of :func:`~arena.trainers.parallel.pipeline.step.pipeline_step`
    (the benchmarks' ``ActionTimeline``, ``benchmarks/_pipeline_sim.py``, which measures the bubble);
    None in training. ``meter``: an :class:`~arena.trainers.parallel.pipeline.memory.ActivationMeter` that counts
    the activations each stage saves (the memory benchmark's), or an ``ActivationOffload`` that also moves
    them off the device between forward and backward (``parallel.offload``); None otherwise.
    """

    def __init__(self, model, schedule: str, *, n_microbatches: int, settings: "LearnerSettings | None" = None,
                 group=None, device: str = "cpu", pad_to: int = 8, max_schedules: int = 4, timeline: Any = None,
                 meter: Any = None, vocab_parallel: bool = False):
        import torch
        import torch.distributed as dist

        from arena.trainers.common.losses import TOPK_LOSSES
        from arena.trainers.llm.learner import LearnerSettings

        self.spec = schedule_spec(schedule)
        self.settings = settings or LearnerSettings()
        self.topk = self.settings.loss in TOPK_LOSSES
        self.vocab_parallel = bool(vocab_parallel)
        if self.vocab_parallel:
            self._check_vocab_parallel()
        if not dist.is_initialized():
            raise PipelineError("no process group: run inside arena.trainers.parallel.launch.launch (or torchrun)")
        self.schedule_cls = schedule_class(schedule)
        if self.settings.precision != "fp32":
            raise PipelineError(f"pipeline parallelism runs fp32 only for now, got train precision "
                                f"{self.settings.precision!r}: set learner.train_precision: fp32")
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.n_microbatches = int(n_microbatches)
        self._check_microbatches()
        self.n_stages = 3 * self.world_size if self.vocab_parallel else num_stages(schedule, self.world_size)
        self.device = torch.device(device)
        self.pad_to = pad_to
        self.config = model.config
        self.model_cls = type(model)
        self.dtype = next(model.parameters()).dtype
        if self.vocab_parallel:
            self.stage_ids = vp_stage_indices(self.rank, self.world_size)
            split = split_vocab_parallel(model, self.world_size, self.stage_ids, self.settings.temperature)
        else:
            self.stage_ids = stage_indices(schedule, self.rank, self.world_size)
            split = split_llama(model, self.n_stages, self.stage_ids)
        self.stages = {i: s.to(self.device) for i, s in split.items()}
        self.loss = PipelineLoss(self.settings, from_stats=self.vocab_parallel)
        self.timeline = timeline
        self.loss.timeline = timeline
        self.meter = meter
        if meter is not None:
            meter.skip_parameters(p for st in self.stages.values() for p in st.parameters())
        self.max_schedules = max_schedules
        self._schedules: OrderedDict[tuple[int, int, int], Any] = OrderedDict()
        self._tied = [] if self.vocab_parallel else self._setup_tied(model)  # vocabulary shards: tied on their rank

    # -- layout ---------------------------------------------------------------------
    def _check_microbatches(self) -> None:
        m, p, name = self.n_microbatches, self.world_size, self.spec.name
        if m < 1:
            raise PipelineError(f"n_microbatches must be >= 1, got {m}")
        if name in ("interleaved_1f1b", "zb1p"):
            rounds = max(1, m // p)
            if m % rounds:
                raise PipelineError(f"{name} on {p} ranks needs n_microbatches a multiple of {rounds} "
                                    f"(max(1, m // p)), got {m}: use {rounds * (m // rounds)} or {rounds * (m // rounds + 1)}")
        if name == "dualpipev" and m < 2 * p:
            raise PipelineError(f"dualpipev on {p} ranks needs at least {2 * p} microbatches (one per stage), got {m}")

    def _check_vocab_parallel(self) -> None:
        if self.spec.placement != "loop":
            raise PipelineError(f"vocabulary parallelism runs on the schedules that loop stages over the ranks "
                                f"(interleaved_1f1b, zb1p), not {self.spec.name}")
        if self.topk:
            raise PipelineError(f"loss {self.settings.loss} needs the log-probs of the rollout's top-K tokens at the "
                                "last stage, which vocabulary parallelism does not gather: use another loss or "
                                "turn vocab_parallel off")

    def owner(self, stage: int) -> int:
        return stage_owner(self.spec.name, stage, self.world_size)

    def global_rank(self, group_rank: int) -> int:
        import torch.distributed as dist

        return group_rank if self.group is None else dist.get_global_rank(self.group, group_rank)

    @property
    def last_rank(self) -> int:
        return self.owner(self.n_stages - 1)

    def named_parameters(self) -> Iterator[tuple[str, Any]]:
        """``(full name, parameter)`` of this rank's stages; a tied weight appears under each name it has here."""
        seen = set()
        for st in self.stages.values():
            for local, p in st.named_parameters(remove_duplicate=False):
                name = st.full_name(local)
                if name not in seen:
                    seen.add(name)
                    yield name, p

    def vocab_shards(self) -> dict[str, tuple[int, int]]:
        """Full name -> the vocabulary rows ``[lo, hi)`` this rank holds of it (vocabulary parallelism; else empty)."""
        out = {}
        for st in self.stages.values():
            for local, _ in st.named_parameters(remove_duplicate=False):
                rows = getattr(st, "shard", lambda _k: None)(local)
                if rows is not None:
                    out[st.full_name(local)] = rows
        return out

    def parameters(self) -> list[Any]:
        """This rank's parameters, each once (for the optimizer)."""
        out, ids = [], set()
        for _, p in self.named_parameters():
            if id(p) not in ids:
                ids.add(id(p))
                out.append(p)
        return out

    def train(self) -> None:
        for s in self.stages.values():
            s.train()

    def eval(self) -> None:
        for s in self.stages.values():
            s.eval()

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    # -- tied weights -------------------------------------------------------------------
    def _setup_tied(self, model):
        """Groups of full names that are one parameter in ``model``, with the ranks that hold them."""
        import torch.distributed as dist

        by_id: dict[int, list[str]] = defaultdict(list)
        for name, p in model.named_parameters(remove_duplicate=False):
            by_id[id(p)].append(name)
        tied = []
        stage_of = {}
        for s, (a, b) in enumerate(balanced_layers(self.config.num_hidden_layers, self.n_stages)):
            stage_of.update({f"model.layers.{i}.": s for i in range(a, b)})
        for names in by_id.values():
            if len(names) < 2:
                continue
            owners = sorted({self.owner(self._stage_of(n, stage_of)) for n in names})
            sub = None
            if len(owners) > 1:
                ranks = [self.global_rank(r) for r in owners]
                sub = dist.new_group(ranks=ranks) if len(owners) < self.world_size else self.group
            tied.append({"names": sorted(names), "owners": owners, "group": sub})
        return tied

    def _stage_of(self, name: str, layer_stage: dict[str, int]) -> int:
        if name.startswith("model.embed_tokens."):
            return 0
        if name.startswith(("model.norm.", "lm_head.")):
            return self.n_stages - 1
        for prefix, s in layer_stage.items():
            if name.startswith(prefix):
                return s
        raise PipelineError(f"cannot place tied parameter {name!r} in a stage")

    def _sync_tied_grads(self) -> None:
        import torch
        import torch.distributed as dist

        params = dict(self.named_parameters())
        for t in self._tied:
            if self.rank not in t["owners"]:
                continue
            local = list({id(params[n]): params[n] for n in t["names"] if n in params}.values())
            if len(t["owners"]) == 1 and len(local) == 1:
                continue  # one parameter object on one rank: autograd already summed its uses
            total = torch.zeros_like(local[0])
            for p in local:
                if p.grad is not None:
                    total += p.grad
            if len(t["owners"]) > 1:
                dist.all_reduce(total, group=t["group"])
            for p in local:
                p.grad = total.clone()

    def _tied_aliases(self) -> set[str]:
        """Every tied name but the first: what grad-norm and parameter counts skip."""
        return {n for t in self._tied for n in t["names"][1:]}

    # -- schedules ------------------------------------------------------------------
    def schedule_for(self, rows: int, length: int):
        """The schedule for microbatches of shape ``[rows, length]`` (built once, then cached)."""
        import torch
        from torch.distributed.pipelining import PipelineStage

        key = (rows, length, self.loss.topk)
        if key in self._schedules:
            self._schedules.move_to_end(key)
            return self._schedules[key]
        while len(self._schedules) >= self.max_schedules:  # every rank evicts the same one: same batches
            self._schedules.popitem(last=False)
        H, V = self.config.hidden_size, self.config.vocab_size

        def meta(shape, dtype, grad):
            return torch.empty(shape, dtype=dtype, device="meta").requires_grad_(grad)

        stages = []
        for i in self.stage_ids:
            first, last = i == 0, i == self.n_stages - 1
            if self.vocab_parallel:
                p = self.world_size
                inp = meta((rows, length), torch.long, False) if first else \
                    meta((rows, length, boundary_width(i - 1, p, H)), self.dtype, True)
                out = meta((rows, length, boundary_width(i, p, H)), self.dtype, True)
            else:
                inp = meta((rows, length), torch.long, False) if first else meta((rows, length, H), self.dtype, True)
                out = meta((rows, length, V if last else H), self.dtype, True)
            st = PipelineStage(self.stages[i], i, self.n_stages, self.device, input_args=inp, output_args=out,
                               group=self.group)
            if self.timeline is not None:
                self.timeline.wrap(st)
            if self.meter is not None:
                self.meter.attach(st)
            stages.append(st)
        arg = stages[0] if self.spec.stages_per_rank == 1 else stages
        loss = self.loss if self.meter is None else self.meter.wrap_loss(self.loss, self.n_stages - 1)
        sched = self.schedule_cls(arg, n_microbatches=self.n_microbatches, loss_fn=loss, scale_grads=False)
        if self.meter is not None:
            from arena.trainers.parallel.pipeline.memory import rank_passes

            self.meter.plan(rank_passes(sched, self.rank, self.world_size, self.n_microbatches))
        self._schedules[key] = sched
        return sched
