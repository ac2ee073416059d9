"""Pipeline parallelism for the language-model learner, on ``torch.distributed.pipelining``.

The policy (a Hugging Face Llama-style causal LM: ``model.model.embed_tokens``,
``.layers``, ``.norm``, ``.rotary_emb`` and ``model.lm_head``, such as the tiny one of
:mod:`arena.inference.models` or SmolLM2) is cut into stages of balanced layer counts
(:func:`balanced_layers`); stage 0 owns the embedding, the last stage the final norm
and the head. Each rank holds one or two stages, as its schedule wants (:data:`SCHEDULES`;
rank ``r`` of ``p``):

* ``gpipe`` (``ScheduleGPipe``) and ``1f1b`` (``Schedule1F1B``): one stage, ``r``;
* ``interleaved_1f1b`` (``ScheduleInterleaved1F1B``) and ``zb1p``
  (``ScheduleInterleavedZeroBubble``): two stages in a loop, ``r`` and ``r + p``;
* ``zbv`` (``ScheduleZBVZeroBubble``) and ``dualpipev`` (``ScheduleDualPipeV``): two
  stages in a V, ``r`` and ``2p - 1 - r`` (rank 0 holds the first and the last stage).

A name this torch lacks is a one-line :class:`PipelineError` (:func:`schedule_class`).

**The loss.** :func:`pipeline_step` runs one forward and backward of the learner's policy
loss (``LLMLearner.step``'s math for one minibatch) through the pipeline. The samples are
packed into ``m`` microbatches (:func:`pack_samples`): one row per sample, prompt and
response token ids right-padded, samples placed longest first into the microbatch with
the fewest tokens so far (at most ``ceil(n / m)`` rows each). torch's stages allocate
their receive buffers once, from the first microbatch's shape, so every microbatch of a
step has one shape ``[rows, L]``: rows padded with empty rows, ``L`` the step's longest
sample rounded up to ``pad_to``; a new shape builds (and caches) a new schedule. With
right padding a real token only ever attends to real tokens of its own row, so each
stage needs just the causal mask and positions ``0 .. L-1``: nothing but the hidden
state travels between stages.

The target tensor of a microbatch, ``[rows, L, 6 + 2K]`` float64 (exact for token ids and
for the float32 log-probs), packs, per position ``i`` (the logit at ``i`` predicts token
``i + 1``): the next token id, the response mask, the behaviour log-prob, the sample's
advantage, the microbatch's loss weight, the token weight ``1 / N`` and, for the top-K
losses, the K rollout top-K ids and their log-probs. The last stage's loss function
(:class:`PipelineLoss`) computes the per-token log-probs with :func:`token_logprobs` --
the same arithmetic as :func:`arena.trainers.llm.logprobs.sequence_logprobs` -- and the
configured loss (``get_loss(settings.loss)``) with ``agg`` and ``max_len``.

**Aggregation over microbatches.** torch adds up the microbatch losses' gradients
(``scale_grads=False`` here), so microbatch ``i``'s loss is scaled by ``w_i`` =
(what ``agg`` divides by in this microbatch) / (what it divides by over the whole
minibatch): valid tokens ``n_i / N`` for ``token_mean``, sequences with a response token
``k_i / K`` for ``seq_mean``, rows ``rows_i / n`` for ``seq_sum_norm``. Every loss here
is a per-token term reduced by :func:`~arena.trainers.common.losses.aggregate`, so
``sum_i w_i loss_i`` is exactly the single-process minibatch loss and the summed
gradients are its gradients. The entropy bonus is a token mean over the minibatch the
same way; the loss's stats (token means) are combined with weights ``n_i / N``.

**Tied embeddings.** The tiny Llama ties ``lm_head.weight`` to ``model.embed_tokens.weight``.
Stages on one rank share the one parameter (V placement puts stages 0 and 2p-1 on rank
0); on different ranks each holds a copy, and after the backward the copies' gradients
are summed across their owners, so both copies get the tied gradient and identical
optimizer updates keep them equal. :func:`clip_grad_norm_` counts the tied weight once.

**The bubble.** Every stage's ``forward_one_chunk`` (F), ``backward_one_chunk`` (B full,
I input-only), ``backward_weight_one_chunk`` (W), the loss at the last stage and the
schedule's waits on send/recv are timed while :func:`pipeline_step` runs. Per rank:
``busy`` = the compute actions' time, ``idle = step - busy``, ``bubble = idle / step``.
Beside it :func:`bubble_report` puts the closed form the issue states, which is
``bubble time / compute time`` (1F1B and GPipe ``(p-1)/m``, interleaved 1F1B
``(p-1)/(v m)``, ZB1P ``(p-1)/(3m)``, ZB-V and DualPipeV about 0 at equal F, B and W),
as the matching fraction of the step ``r / (1 + r)`` (for 1F1B ``(p-1)/(m+p-1)``), and a
simulation of the schedule's own ``pipeline_order`` (:func:`simulate_order`) with unit
costs (F = I = W = 1, B = 2) and with the measured mean cost of each action.

**Checkpoints across parallel settings.** :func:`full_state_dict` assembles the unsplit
model's state dict (same names) from the stages; :func:`save_pretrained` writes it as an
ordinary Hugging Face folder that one process loads (``load_model``,
``LLMLearner.load_weights``); :func:`load_full_state_dict` splits a full state dict into
any other split.

Runs on CPU with gloo (several processes on one machine, :mod:`.launch`) and unchanged
on CUDA with NCCL (``device="cuda:N"``).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import OrderedDict, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from arena.errors import ArenaError

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.llm.learner import LearnerSettings, Sample


class PipelineError(ArenaError, ValueError):
    """A schedule, a split or a batch the pipeline cannot run; the message says what to change."""


# --------------------------------------------------------------------------- schedules


@dataclass(frozen=True)
class ScheduleSpec:
    name: str
    torch_class: str
    stages_per_rank: int
    placement: str  # "single" (stage r), "loop" (r, r + p) or "v" (r, 2p - 1 - r)
    formula: str  # the closed form: bubble time / compute time

    def theory(self, p: int, m: int) -> float:
        """Bubble time over compute time at equal F, B and W times (the issue's figures)."""
        if self.name in ("gpipe", "1f1b"):
            return (p - 1) / m
        if self.name == "interleaved_1f1b":
            return (p - 1) / (self.stages_per_rank * m)
        if self.name == "zb1p":
            return (p - 1) / (3 * m)
        return 0.0  # zbv, dualpipev


SCHEDULES: dict[str, ScheduleSpec] = {
    s.name: s
    for s in (
        ScheduleSpec("gpipe", "ScheduleGPipe", 1, "single", "(p-1)/m"),
        ScheduleSpec("1f1b", "Schedule1F1B", 1, "single", "(p-1)/m"),
        ScheduleSpec("interleaved_1f1b", "ScheduleInterleaved1F1B", 2, "loop", "(p-1)/(v*m)"),
        ScheduleSpec("zb1p", "ScheduleInterleavedZeroBubble", 2, "loop", "(p-1)/(3m)"),
        ScheduleSpec("zbv", "ScheduleZBVZeroBubble", 2, "v", "~0"),
        ScheduleSpec("dualpipev", "ScheduleDualPipeV", 2, "v", "~0 (as ZB-V)"),
    )
}


def schedule_spec(name: str) -> ScheduleSpec:
    try:
        return SCHEDULES[name]
    except KeyError:
        raise PipelineError(f"unknown pipeline schedule {name!r}: use one of {', '.join(SCHEDULES)}") from None


def schedule_class(name: str):
    """The torch schedule class for ``name``; a one-line error if this torch lacks it."""
    import torch
    import torch.distributed.pipelining as pp

    spec = schedule_spec(name)
    cls = getattr(pp, spec.torch_class, None)
    if cls is None:
        raise PipelineError(f"pipeline schedule {name!r} needs torch.distributed.pipelining.{spec.torch_class}, "
                            f"which torch {torch.__version__} lacks: pick another schedule or upgrade torch")
    return cls


def available_schedules() -> list[str]:
    """The schedule names this torch can run."""
    import torch.distributed.pipelining as pp

    return [n for n, s in SCHEDULES.items() if hasattr(pp, s.torch_class)]


def num_stages(schedule: str, world_size: int) -> int:
    return schedule_spec(schedule).stages_per_rank * world_size


def stage_indices(schedule: str, rank: int, world_size: int) -> list[int]:
    """The stages rank ``rank`` holds, in increasing order."""
    spec = schedule_spec(schedule)
    if spec.placement == "single":
        return [rank]
    if spec.placement == "loop":
        return [rank, rank + world_size]
    return sorted({rank, 2 * world_size - 1 - rank})


def stage_owner(schedule: str, stage: int, world_size: int) -> int:
    """The rank that holds ``stage``."""
    spec = schedule_spec(schedule)
    if spec.placement in ("single", "loop"):
        return stage % world_size
    return stage if stage < world_size else 2 * world_size - 1 - stage


def balanced_layers(n_layers: int, n_stages: int) -> list[tuple[int, int]]:
    """``[start, stop)`` decoder layers per stage: counts differ by at most one.

    The extra layers go to the inner stages first (stage 0 also runs the embedding and
    the last stage the norm, the head and the loss), then to stage 0, then to the last.
    """
    if n_stages < 1:
        raise PipelineError(f"need at least one stage, got {n_stages}")
    if n_layers < n_stages:
        raise PipelineError(f"{n_layers} decoder layers cannot fill {n_stages} stages: use a model with at least "
                            f"{n_stages} layers, fewer ranks, or a schedule with one stage per rank (gpipe, 1f1b)")
    base, extra = divmod(n_layers, n_stages)
    inner = list(range(1, n_stages - 1))
    order = inner + [0] + ([n_stages - 1] if n_stages > 1 else [])
    counts = [base] * n_stages
    for s in order[:extra]:
        counts[s] += 1
    out, start = [], 0
    for c in counts:
        out.append((start, start + c))
        start += c
    return out


# --------------------------------------------------------------------------- stages


def _llama_parts(model):
    body = getattr(model, "model", None)
    need = ("embed_tokens", "layers", "norm", "rotary_emb")
    if body is None or not all(hasattr(body, a) for a in need) or not hasattr(model, "lm_head"):
        raise PipelineError(f"{type(model).__name__} is not a Llama-style causal LM (model.model.embed_tokens, "
                            ".layers, .norm, .rotary_emb and model.lm_head): only those can be split into stages")
    return body


def _make_stage_class():
    import torch
    from torch import nn

    class LlamaStage(nn.Module):
        """Decoder layers ``[start, stop)`` of a Llama, plus the embedding (stage 0) or norm and head (last).

        ``forward(x)``: token ids ``[b, L]`` (stage 0) or hidden states ``[b, L, H]`` ->
        hidden states, or logits ``[b, L, V]`` at the last stage. Rows are right-padded:
        causal attention and positions ``0 .. L-1``, as ``LlamaModel.forward`` builds them.
        The parameters are the source model's own (no copy).
        """

        def __init__(self, model, index: int, n_stages: int, layers: tuple[int, int]):
            super().__init__()
            body = _llama_parts(model)
            self.config = model.config
            self.index, self.n_stages = index, n_stages
            self.layer_start, self.layer_stop = layers
            self.is_first, self.is_last = index == 0, index == n_stages - 1
            self.embed_tokens = body.embed_tokens if self.is_first else None
            self.layers = nn.ModuleList(body.layers[layers[0]:layers[1]])
            self.norm = body.norm if self.is_last else None
            self.lm_head = model.lm_head if self.is_last else None
            self.rotary_emb = body.rotary_emb  # buffers only (inv_freq, not persistent)

        def forward(self, x):
            from transformers.masking_utils import create_causal_mask

            h = self.embed_tokens(x) if self.embed_tokens is not None else x
            pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0).expand(h.shape[0], -1)
            pe = self.rotary_emb(h, position_ids=pos)
            mask = create_causal_mask(config=self.config, inputs_embeds=h, attention_mask=None, cache=None,
                                      position_ids=pos)
            for layer in self.layers:
                h = layer(h, attention_mask=mask, position_ids=pos, position_embeddings=pe)
            if self.norm is not None:
                h = self.norm(h)
            if self.lm_head is not None:
                h = self.lm_head(h)
            return h

        def full_name(self, local: str) -> str:
            """A parameter's or buffer's name in the unsplit model."""
            head, _, rest = local.partition(".")
            if head == "layers":
                i, _, tail = rest.partition(".")
                return f"model.layers.{self.layer_start + int(i)}.{tail}"
            if head == "lm_head":
                return local
            return f"model.{local}"

    return LlamaStage


_STAGE_CLASS = None


def split_llama(model, n_stages: int, indices: Sequence[int] | None = None) -> dict[int, Any]:
    """``{stage index: LlamaStage}`` for ``indices`` (default: all), sharing ``model``'s parameters."""
    global _STAGE_CLASS
    if _STAGE_CLASS is None:
        _STAGE_CLASS = _make_stage_class()
    _llama_parts(model)
    ranges = balanced_layers(model.config.num_hidden_layers, n_stages)
    wanted = range(n_stages) if indices is None else indices
    return {i: _STAGE_CLASS(model, i, n_stages, ranges[i]) for i in wanted}


# --------------------------------------------------------------------------- log-probs and the loss


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


# target columns
_NEXT, _MASK, _OLD, _ADV, _WLOSS, _WTOK, _TOPK = range(7)


@dataclass
class Packed:
    """A minibatch packed for the pipeline: ``m`` microbatches of one shape ``[rows, length]``."""

    ids: Any  # [m * rows, length] long
    target: Any  # [m * rows, length, 6 + 2K] float64
    n_microbatches: int
    rows: int
    length: int
    topk: int
    groups: list[list[int]]  # sample indices of each microbatch
    tokens: list[int]  # prompt + response tokens of each microbatch
    response_tokens: list[int]


def _agg_weights(groups: list[list[int]], samples, rows: int, agg: str) -> list[float]:
    from arena.trainers.common.losses import AGG_MODES

    if agg not in AGG_MODES:
        raise PipelineError(f"unknown aggregation mode {agg!r}: use one of {', '.join(AGG_MODES)}")
    if agg == "token_mean":
        part = [sum(len(samples[j].response_ids) for j in g) for g in groups]
    elif agg == "seq_mean":
        part = [sum(1 for j in g if samples[j].response_ids) for g in groups]
    else:  # seq_sum_norm divides by every row of the tensor it sees, padding rows included
        part = [rows if g else 0 for g in groups]
        return [p / len(samples) for p in part]
    total = max(sum(part), 1)
    return [p / total for p in part]


def check_samples(samples: Sequence["Sample"], topk: bool, error: type | None = None) -> int:
    """Every sample has a prompt (its first response token is predicted from it) and, for a top-K loss,
    rollout top-K ids; returns K (0 without top-K). ``error``: the exception class to raise."""
    error = error or PipelineError
    for i, s in enumerate(samples):
        if not s.prompt_ids:
            raise error(f"sample {i} has an empty prompt: the first response token must be predicted from something")
    if not topk:
        return 0
    s0 = next((s for s in samples if s.topk_ids), None)
    if s0 is None or any(s.topk_ids is None for s in samples):
        raise error("a top-K loss needs every sample's rollout top-K ids and log-probs: set top_k > 0")
    return len(s0.topk_ids[0])


def pack_samples(samples: Sequence["Sample"], n_microbatches: int, *, pad_id: int = 0, agg: str = "token_mean",
                 topk: bool = False, pad_to: int = 8) -> Packed:
    """Pack ``samples`` into ``n_microbatches`` microbatches balanced by token count (see the module doc)."""
    import torch

    n, m = len(samples), int(n_microbatches)
    if n == 0:
        raise PipelineError("no samples to pack")
    if m < 1:
        raise PipelineError(f"need at least one microbatch, got {n_microbatches}")
    K = check_samples(samples, topk, PipelineError)
    cap = math.ceil(n / m)
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    groups: list[list[int]] = [[] for _ in range(m)]
    load = [0] * m
    for j in sorted(range(n), key=lambda j: (-lengths[j], j)):
        k = min((k for k in range(m) if len(groups[k]) < cap), key=lambda k: (load[k], k))
        groups[k].append(j)
        load[k] += lengths[j]
    rows = max(len(g) for g in groups)
    L = max(lengths)
    L = max(2, -(-L // pad_to) * pad_to)
    C = _TOPK + 2 * K  # 6 + 2K
    ids = torch.full((m * rows, L), pad_id, dtype=torch.long)
    target = torch.zeros((m * rows, L, C), dtype=torch.float64)
    if K:
        target[..., _TOPK + K:] = -1e4  # rollout top-K log-probs off the response, as LLMLearner fills them
    weights = _agg_weights(groups, samples, rows, agg)
    n_resp = sum(len(s.response_ids) for s in samples)
    for k, g in enumerate(groups):
        base = k * rows
        target[base:base + rows, :, _WLOSS] = weights[k]
        target[base:base + rows, :, _WTOK] = 1.0 / max(n_resp, 1)
        for r, j in enumerate(g):
            s = samples[j]
            P, R = len(s.prompt_ids), len(s.response_ids)
            row = base + r
            ids[row, :P + R] = torch.as_tensor(list(s.prompt_ids) + list(s.response_ids), dtype=torch.long)
            target[row, :, _ADV] = float(s.adv)
            if not R:
                continue
            span = slice(P - 1, P - 1 + R)  # logits at P-1 ... P+R-2 predict the response tokens
            target[row, span, _NEXT] = torch.as_tensor(s.response_ids, dtype=torch.float64)
            target[row, span, _MASK] = 1.0
            old = list(s.old_logp[:R])
            if old:
                target[row, P - 1:P - 1 + len(old), _OLD] = torch.as_tensor(old, dtype=torch.float32).double()
            if K:
                target[row, span, _TOPK:_TOPK + K] = torch.as_tensor(s.topk_ids, dtype=torch.float64)
                tl = list(s.topk_logp[:R])
                if tl:
                    target[row, P - 1:P - 1 + len(tl), _TOPK + K:] = (
                        torch.as_tensor(tl, dtype=torch.float32).double())
    return Packed(ids=ids, target=target, n_microbatches=m, rows=rows, length=L, topk=K, groups=groups,
                  tokens=[sum(lengths[j] for j in g) for g in groups],
                  response_tokens=[sum(len(samples[j].response_ids) for j in g) for g in groups])


class PipelineLoss:
    """The last stage's ``loss_fn(logits, target)``: LLMLearner's policy loss on one microbatch, weighted.

    Records, per call, the loss and the loss's stats; :meth:`collect` combines them over
    the step's microbatches (a sum for the loss, token-weighted means for the stats).
    """

    def __init__(self, settings: "LearnerSettings", topk: int = 0):
        from arena.trainers.common.losses import get_loss

        self.settings = settings
        self.loss_fn = get_loss(settings.loss)
        self.topk = topk
        self.timeline: ActionTimeline | None = None
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


# --------------------------------------------------------------------------- timing


class ActionTimeline:
    """Start and end times of each compute action and each communication wait of one rank.

    ``sync`` (CUDA: ``torch.cuda.synchronize``) runs before each clock reading, so an
    action's time is its kernels' time, not their launch time.
    """

    def __init__(self, sync=None):
        self.events: list[tuple[str, int, int, float, float]] = []  # (kind, stage, microbatch, t0, t1)
        self.active = False
        self.sync = sync

    def now(self) -> float:
        if self.active and self.sync is not None:
            self.sync()
        return time.perf_counter()

    def add(self, kind: str, stage: int, mb: int, t0: float, t1: float) -> None:
        if self.active:
            self.events.append((kind, stage, mb, t0, t1))

    def wrap(self, stage) -> None:
        """Time this PipelineStage's forward, backward and weight-backward calls."""
        timeline, index = self, stage.stage_index

        def timed(orig, kind_of):
            def call(mb, *args, **kwargs):
                t0 = timeline.now()
                try:
                    return orig(mb, *args, **kwargs)
                finally:
                    timeline.add(kind_of(kwargs), index, mb, t0, timeline.now())
            return call

        stage.forward_one_chunk = timed(stage.forward_one_chunk, lambda kw: "F")
        stage.backward_one_chunk = timed(stage.backward_one_chunk,
                                         lambda kw: "B" if kw.get("full_backward", True) else "I")
        stage.backward_weight_one_chunk = timed(stage.backward_weight_one_chunk, lambda kw: "W")

    @contextlib.contextmanager
    def waits(self):
        """Time the schedule's waits on its send/recv work (torch's ``_wait_batch_p2p``) while active."""
        import torch.distributed.pipelining.schedules as S

        orig = getattr(S, "_wait_batch_p2p", None)
        if orig is None:  # a torch without it: waits are just part of the idle time
            yield
            return

        def timed(work):
            t0 = self.now()
            try:
                return orig(work)
            finally:
                self.add("wait", -1, -1, t0, self.now())

        S._wait_batch_p2p = timed
        try:
            yield
        finally:
            S._wait_batch_p2p = orig


COMPUTE_KINDS = ("F", "B", "I", "W", "loss")


@dataclass(frozen=True)
class SimAction:
    """A compute action for :func:`simulate_order` (the fields of torch's ``_Action`` it reads)."""

    stage_index: int
    computation_type: str
    microbatch_index: int
    sub_actions: tuple | None = None


def one_f_one_b_order(p: int, m: int) -> dict[int, list[SimAction]]:
    """The textbook 1F1B order: rank r runs min(p-1-r, m) warm-up forwards, then one F one B, then the rest of B."""
    order = {}
    for r in range(p):
        w = min(p - 1 - r, m)
        acts = [SimAction(r, "F", i) for i in range(w)]
        for i in range(m - w):
            acts += [SimAction(r, "F", w + i), SimAction(r, "B", i)]
        acts += [SimAction(r, "B", i) for i in range(m - w, m)]
        order[r] = acts
    return order


def simulate_order(order: dict[int, list[Any]], costs: dict, n_stages: int) -> dict[str, Any] | None:
    """Run a schedule's ``pipeline_order`` on an ideal machine: comms are free, each action takes its cost.

    ``costs`` maps a kind (``"F"``, ``"B"``, ``"I"``, ``"W"``) or a ``(kind, stage)`` pair
    (which wins) to a duration.

    An action starts when its rank is free and what it needs is done: F of stage s after
    F of stage s-1 (same microbatch), B or I of stage s after F of stage s and B or I of
    stage s+1, W after I of the same stage. Returns the makespan and, per rank, the busy
    time and ``bubble = (makespan - busy) / makespan``; None if the order cannot finish.
    """
    acts: dict[int, list[tuple[str, int, int]]] = {}
    for rank, actions in order.items():
        flat = []
        for a in actions:
            if a is None:
                continue
            subs = getattr(a, "sub_actions", None) or (a,)
            for s in subs:
                kind = getattr(s.computation_type, "value", str(s.computation_type))
                if kind in ("F", "B", "I", "W"):
                    flat.append((kind, s.stage_index, s.microbatch_index))
        acts[rank] = flat
    done: dict[tuple[str, int, int], float] = {}
    free = {r: 0.0 for r in acts}
    busy = {r: 0.0 for r in acts}
    ptr = {r: 0 for r in acts}

    def ready(kind, s, mb):
        deps = []
        if kind == "F":
            if s > 0:
                deps.append([("F", s - 1, mb)])
        elif kind in ("B", "I"):
            deps.append([("F", s, mb)])
            if s < n_stages - 1:
                deps.append([("B", s + 1, mb), ("I", s + 1, mb)])
        else:
            deps.append([("I", s, mb)])
        t = 0.0
        for alts in deps:
            hit = [done[d] for d in alts if d in done]
            if not hit:
                return None
            t = max(t, min(hit))
        return t

    remaining = sum(len(v) for v in acts.values())
    while remaining:
        progressed = False
        for r in acts:
            while ptr[r] < len(acts[r]):
                kind, s, mb = acts[r][ptr[r]]
                t = ready(kind, s, mb)
                if t is None:
                    break
                start = max(t, free[r])
                cost = costs.get((kind, s), costs.get(kind, 0.0))
                free[r] = start + cost
                busy[r] += cost
                done[(kind, s, mb)] = free[r]
                ptr[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            return None
    span = max(free.values()) if free else 0.0
    return {"makespan": span, "busy": busy,
            "bubble": {r: (span - b) / span if span else 0.0 for r, b in busy.items()}}


# --------------------------------------------------------------------------- the pipeline


class LMPipeline:
    """This rank's stages of a causal LM, the schedule (one per microbatch shape) and the loss.

    ``model`` is the full model (every rank builds it from the same seed or folder); the
    stages keep references to this rank's parts of it only, so the rest is freed when the
    caller drops ``model``. ``group`` defaults to the world group.
    """

    def __init__(self, model, schedule: str, *, n_microbatches: int, settings: "LearnerSettings | None" = None,
                 group=None, device: str = "cpu", pad_to: int = 8, max_schedules: int = 4):
        import torch
        import torch.distributed as dist

        from arena.trainers.common.losses import TOPK_LOSSES
        from arena.trainers.llm.learner import LearnerSettings

        if not dist.is_initialized():
            raise PipelineError("no process group: run inside arena.trainers.parallel.launch.launch (or torchrun)")
        self.spec = schedule_spec(schedule)
        self.schedule_cls = schedule_class(schedule)
        self.settings = settings or LearnerSettings()
        if self.settings.precision != "fp32":
            raise PipelineError(f"pipeline parallelism runs fp32 only for now, got train precision "
                                f"{self.settings.precision!r}: set train_precision: fp32")
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.n_microbatches = int(n_microbatches)
        self._check_microbatches()
        self.n_stages = num_stages(schedule, self.world_size)
        self.device = torch.device(device)
        self.pad_to = pad_to
        self.config = model.config
        self.model_cls = type(model)
        self.dtype = next(model.parameters()).dtype
        self.stage_ids = stage_indices(schedule, self.rank, self.world_size)
        self.stages = {i: s.to(self.device) for i, s in split_llama(model, self.n_stages, self.stage_ids).items()}
        self.topk = self.settings.loss in TOPK_LOSSES
        self.loss = PipelineLoss(self.settings)
        # CUDA runs asynchronously: the timeline waits for the device around each action
        sync = (lambda: torch.cuda.synchronize(self.device)) if self.device.type == "cuda" else None
        self.timeline = ActionTimeline(sync=sync)
        self.loss.timeline = self.timeline
        self.max_schedules = max_schedules
        self._schedules: OrderedDict[tuple[int, int, int], Any] = OrderedDict()
        self._tied = self._setup_tied(model)

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
            inp = meta((rows, length), torch.long, False) if first else meta((rows, length, H), self.dtype, True)
            out = meta((rows, length, V if last else H), self.dtype, True)
            st = PipelineStage(self.stages[i], i, self.n_stages, self.device, input_args=inp, output_args=out,
                               group=self.group)
            self.timeline.wrap(st)
            stages.append(st)
        arg = stages[0] if self.spec.stages_per_rank == 1 else stages
        sched = self.schedule_cls(arg, n_microbatches=self.n_microbatches, loss_fn=self.loss, scale_grads=False)
        self._schedules[key] = sched
        return sched

    def order(self, rows: int, length: int) -> dict[int, list[Any]] | None:
        """Every rank's compute actions in the order the schedule runs them (its ``pipeline_order``).

        ``Schedule1F1B`` runs a hard-coded loop and its ``pipeline_order`` (for display only)
        is off by one microbatch on ranks > 0 in torch 2.13 (rank 1 lists F1 ... F4 for
        m = 4); an order naming a microbatch >= m is replaced by the textbook 1F1B order,
        which is what its loop runs.
        """
        order = getattr(self.schedule_for(rows, length), "pipeline_order", None)
        m = self.n_microbatches
        bad = order is None or any(a is not None and a.microbatch_index is not None and a.microbatch_index >= m
                                   for acts in order.values() for a in acts)
        if bad and self.spec.name == "1f1b":
            return one_f_one_b_order(self.world_size, m)
        return None if bad else order


# --------------------------------------------------------------------------- one step


@dataclass
class StepOutput:
    """What :func:`pipeline_step` returns on every rank."""

    loss: float  # the minibatch loss (computed at the last stage, broadcast)
    stats: dict[str, float]  # the loss's stats, entropy and mismatch, as LLMLearner reports them
    grads: dict[str, Any] | None  # this rank's gradients by full name (CPU copies), when asked
    bubble: dict[str, Any]  # this rank's timing (see bubble_stats)
    packed: dict[str, Any] = field(default_factory=dict)  # microbatch shape, token counts per microbatch


def pipeline_step(pipe: LMPipeline, samples: Sequence["Sample"], *, pad_id: int = 0,
                  return_grads: bool = False) -> StepOutput:
    """One forward and backward of the policy loss on ``samples`` through the pipeline (all ranks call it).

    Zeroes the gradients, packs the samples, runs ``schedule.step``, sums the tied
    weights' gradients across their owners. The optimizer step (and clipping with
    :func:`clip_grad_norm_`) is the caller's. Every rank must pass the same samples.
    """
    import torch
    import torch.distributed as dist

    st = pipe.settings
    packed = pack_samples(samples, pipe.n_microbatches, pad_id=pad_id, agg=st.agg, topk=pipe.topk,
                          pad_to=pipe.pad_to)
    pipe.loss.topk = packed.topk
    sched = pipe.schedule_for(packed.rows, packed.length)
    pipe.train()
    pipe.zero_grad()
    pipe.loss.reset()
    has_first, has_last = 0 in pipe.stages, pipe.n_stages - 1 in pipe.stages
    args = (packed.ids.to(pipe.device),) if has_first else ()
    kwargs = {"target": packed.target.to(pipe.device)} if has_last else {}
    tl = pipe.timeline
    tl.events.clear()
    tl.active = True
    try:
        with tl.waits():
            t0, c0 = tl.now(), time.process_time()
            sched.step(*args, losses=[] if has_last else None, return_outputs=False, **kwargs)
            t1, c1 = tl.now(), time.process_time()
    finally:
        tl.active = False
    pipe._sync_tied_grads()
    payload = [pipe.loss.collect() if has_last else None]
    dist.broadcast_object_list(payload, src=pipe.global_rank(pipe.last_rank), group=pipe.group)
    loss, stats = payload[0]
    grads = None
    if return_grads:
        grads = {n: (p.grad.detach().cpu().clone() if p.grad is not None else torch.zeros_like(p, device="cpu"))
                 for n, p in pipe.named_parameters()}
    parts: list[Any] = [None] * pipe.world_size
    dist.all_gather_object(parts, stage_costs(pipe), group=pipe.group)
    costs = {k: v for part in parts for k, v in part.items()}
    bubble = bubble_stats(pipe, t1 - t0, packed, costs)
    bubble["cpu_s"] = c1 - c0  # this process's CPU time: well below step_s when other jobs share the cores
    info = {"rows": packed.rows, "length": packed.length, "tokens": packed.tokens,
            "response_tokens": packed.response_tokens, "groups": packed.groups}
    return StepOutput(loss=loss, stats=stats, grads=grads, bubble=bubble, packed=info)


def stage_costs(pipe: LMPipeline) -> dict[tuple[str, int], float]:
    """Mean time of each (kind, stage) action in the last step on this rank; the loss counts with the last F."""
    tot: dict[tuple[str, int], float] = defaultdict(float)
    cnt: dict[tuple[str, int], int] = defaultdict(int)
    loss = 0.0
    for kind, s, _mb, a, b in pipe.timeline.events:
        if kind == "loss":
            loss += b - a
        elif kind in COMPUTE_KINDS:
            tot[(kind, s)] += b - a
            cnt[(kind, s)] += 1
    last = ("F", pipe.n_stages - 1)
    if last in tot:
        tot[last] += loss
    out = {k: tot[k] / cnt[k] for k in tot}
    for s in pipe.stage_ids:  # a kind this schedule does not run costs what its parts cost
        f, b = out.get(("F", s), 0.0), out.get(("B", s))
        i, w = out.get(("I", s)), out.get(("W", s))
        if b is None and i is not None and w is not None:
            out[("B", s)] = i + w
        if b is not None:
            out.setdefault(("I", s), b / 2)
            out.setdefault(("W", s), b / 2)
        out.setdefault(("F", s), f)
    return out


def bubble_stats(pipe: LMPipeline, step_s: float, packed: Packed | None = None,
                 costs: dict[tuple[str, int], float] | None = None) -> dict[str, Any]:
    """This rank's busy and idle time in the last step, next to the theory (see the module doc).

    ``costs``: every stage's measured action costs (:func:`stage_costs` of all ranks,
    merged) for the simulation with measured costs; this rank's own when omitted.
    """
    times: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for kind, _s, _mb, a, b in pipe.timeline.events:
        times[kind] += b - a
        counts[kind] += 1
    busy = sum(times[k] for k in COMPUTE_KINDS)
    idle = max(step_s - busy, 0.0)
    p, m = pipe.world_size, pipe.n_microbatches
    theory = pipe.spec.theory(p, m)
    out: dict[str, Any] = {
        "schedule": pipe.spec.name, "rank": pipe.rank, "ranks": p, "microbatches": m,
        "stages": list(pipe.stage_ids), "step_s": step_s, "busy_s": busy, "idle_s": idle,
        "wait_s": times.get("wait", 0.0), "bubble": idle / step_s if step_s > 0 else 0.0,
        "idle_per_busy": idle / busy if busy > 0 else 0.0,
        "theory": theory, "theory_fraction": theory / (1 + theory), "theory_formula": pipe.spec.formula,
        "time_s": dict(times), "count": dict(counts),
    }
    if packed is not None:
        order = pipe.order(packed.rows, packed.length)
        if order:
            unit = simulate_order(order, {"F": 1.0, "I": 1.0, "W": 1.0, "B": 2.0}, pipe.n_stages)
            out["sim_unit_bubble"] = unit["bubble"].get(pipe.rank) if unit else None
            measured = simulate_order(order, costs if costs is not None else stage_costs(pipe), pipe.n_stages)
            out["sim_measured_bubble"] = measured["bubble"].get(pipe.rank) if measured else None
    return out


def bubble_report(bubbles: Sequence[dict[str, Any]]) -> str:
    """One line per rank: measured bubble next to the closed form and the simulated schedule."""
    lines = []
    for b in sorted(bubbles, key=lambda b: b["rank"]):
        sim = b.get("sim_unit_bubble")
        simm = b.get("sim_measured_bubble")
        lines.append(
            f"{b['schedule']:>16} rank {b['rank']} stages {b['stages']}: step {b['step_s'] * 1e3:7.1f} ms, "
            f"busy {b['busy_s'] * 1e3:7.1f} ms, idle {b['idle_s'] * 1e3:6.1f} ms (waits {b['wait_s'] * 1e3:6.1f}); "
            f"bubble {b['bubble']:.3f} of the step (idle/busy {b['idle_per_busy']:.3f}) | theory "
            f"{b['theory_formula']} = {b['theory']:.3f} -> {b['theory_fraction']:.3f} of the step"
            + (f" | schedule simulated: unit costs {sim:.3f}" if sim is not None else "")
            + (f", measured costs {simm:.3f}" if simm is not None else ""))
    return "\n".join(lines)


def clip_grad_norm_(pipe: LMPipeline, max_norm: float) -> float:
    """``torch.nn.utils.clip_grad_norm_`` over the whole pipelined model (a tied weight counted once).

    A collective: every rank calls it. Returns the total norm before clipping.
    """
    import torch
    import torch.distributed as dist

    skip = pipe._tied_aliases()
    sq = torch.zeros((), dtype=torch.float64, device=pipe.device)
    counted = set()
    for name, p in pipe.named_parameters():
        if name in skip or id(p) in counted or p.grad is None:
            continue
        counted.add(id(p))
        sq += p.grad.detach().double().pow(2).sum()
    dist.all_reduce(sq, group=pipe.group)
    total = float(sq.sqrt())
    coef = min(1.0, max_norm / (total + 1e-6))
    if coef < 1.0:
        for p in pipe.parameters():
            if p.grad is not None:
                p.grad.mul_(coef)
    return total


# --------------------------------------------------------------------------- whole-model views


def gather_named(pipe: LMPipeline, what: str = "grad", dst: int = 0) -> dict[str, Any] | None:
    """Every rank's parameters (``what="param"``) or gradients (``"grad"``) by full name, on rank ``dst``.

    A collective; CPU copies; ``None`` on the other ranks. A missing gradient is zeros.
    """
    import torch
    import torch.distributed as dist

    if what not in ("grad", "param"):
        raise PipelineError(f"gather_named what must be 'grad' or 'param', got {what!r}")
    local = {}
    for name, p in pipe.named_parameters():
        t = p if what == "param" else (p.grad if p.grad is not None else torch.zeros_like(p))
        local[name] = t.detach().cpu().clone()
    parts = [None] * pipe.world_size if pipe.rank == dst else None
    dist.gather_object(local, parts, dst=pipe.global_rank(dst), group=pipe.group)
    if pipe.rank != dst:
        return None
    out: dict[str, Any] = {}
    for part in parts:
        out.update(part)
    return out


def full_state_dict(pipe: LMPipeline, dst: int = 0) -> dict[str, Any] | None:
    """The unsplit model's state dict (its names; a tied weight under each name) on rank ``dst``.

    A collective; CPU tensors; ``None`` on the other ranks.
    """
    import torch.distributed as dist

    local = {}
    for st in pipe.stages.values():
        for k, v in st.state_dict().items():
            local[st.full_name(k)] = v.detach().cpu().clone()
    parts = [None] * pipe.world_size if pipe.rank == dst else None
    dist.gather_object(local, parts, dst=pipe.global_rank(dst), group=pipe.group)
    if pipe.rank != dst:
        return None
    out: dict[str, Any] = {}
    for part in parts:
        out.update(part)
    return out


def load_full_state_dict(pipe: LMPipeline, state_dict: dict[str, Any]) -> None:
    """Load an unsplit model's state dict (e.g. ``model.state_dict()`` of a 1-process run) into this rank's stages.

    A tied weight missing under one of its names (Hugging Face folders store it once) is
    taken from another of its names.
    """
    aliases = {n: t["names"] for t in pipe._tied for n in t["names"]}
    for st in pipe.stages.values():
        want = {}
        for k in st.state_dict():
            full = st.full_name(k)
            src = full if full in state_dict else next((a for a in aliases.get(full, ()) if a in state_dict), None)
            if src is None:
                raise PipelineError(f"the state dict has no {full!r} (stage {st.index} needs it): is it from the "
                                    f"same model architecture ({pipe.model_cls.__name__})?")
            want[k] = state_dict[src]
        st.load_state_dict(want, strict=True)


def save_pretrained(pipe: LMPipeline, folder, tokenizer=None, dst: int = 0) -> None:
    """Write the whole pipelined model as an ordinary Hugging Face folder from rank ``dst`` (a collective).

    One process loads it back with ``arena.inference.models.load_model(folder)`` or
    ``LLMLearner.load_weights(folder)``; another pipeline with :func:`load_pretrained`.
    """
    import torch
    import torch.distributed as dist

    sd = full_state_dict(pipe, dst)
    if pipe.rank == dst:
        with torch.random.fork_rng(devices=[]):
            model = pipe.model_cls(pipe.config)
        model.load_state_dict(sd, strict=True)
        model.save_pretrained(folder)
        if tokenizer is not None:
            tokenizer.save_pretrained(folder)
    dist.barrier(group=pipe.group)


def load_pretrained(pipe: LMPipeline, folder) -> None:
    """Load a Hugging Face folder (saved by one process or by :func:`save_pretrained`) into the stages."""
    from arena.inference.models import load_model

    model, _ = load_model(folder)
    load_full_state_dict(pipe, model.state_dict())


def pipeline_logits(pipe: LMPipeline, ids):
    """Forward only, stage by stage with plain send/recv: logits ``[b, L, V]`` on the last stage's rank, else None.

    ``ids`` are right-padded rows (every rank passes the same ids, for their shape).
    """
    import torch
    import torch.distributed as dist

    b, L = ids.shape
    x = None
    with torch.no_grad():
        for s in range(pipe.n_stages):
            if pipe.owner(s) != pipe.rank:
                continue
            if s == 0:
                inp = ids.to(pipe.device)
            elif pipe.owner(s - 1) == pipe.rank:
                inp = x
            else:
                inp = torch.empty((b, L, pipe.config.hidden_size), dtype=pipe.dtype, device=pipe.device)
                dist.recv(inp, src=pipe.global_rank(pipe.owner(s - 1)), group=pipe.group)
            x = pipe.stages[s](inp)
            if s + 1 < pipe.n_stages and pipe.owner(s + 1) != pipe.rank:
                dist.send(x.contiguous(), dst=pipe.global_rank(pipe.owner(s + 1)), group=pipe.group)
    return x if pipe.last_rank == pipe.rank else None
