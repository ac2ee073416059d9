"""Pipeline parallelism for the language-model learner, on ``torch.distributed.pipelining``.

The policy (a Hugging Face Llama-style causal LM: ``model.model.embed_tokens``,
``.layers``, ``.norm``, ``.rotary_emb`` and ``model.lm_head``, such as the tiny one of
:mod:`arena.inference.models` or SmolLM2) is cut into stages of balanced layer counts
(:func:`.stages.balanced_layers`); stage 0 owns the embedding, the last stage the final norm
and the head. Each rank holds one or two stages, as its schedule wants (:data:`.schedules.SCHEDULES`;
rank ``r`` of ``p``):

* ``gpipe`` (``ScheduleGPipe``) and ``1f1b`` (``Schedule1F1B``): one stage, ``r``;
* ``interleaved_1f1b`` (``ScheduleInterleaved1F1B``) and ``zb1p``
  (``ScheduleInterleavedZeroBubble``): two stages in a loop, ``r`` and ``r + p``;
* ``zbv`` (``ScheduleZBVZeroBubble``) and ``dualpipev`` (``ScheduleDualPipeV``): two
  stages in a V, ``r`` and ``2p - 1 - r`` (rank 0 holds the first and the last stage);
* ``vhalf`` and ``vmin`` (:mod:`.vshape`): the same V, in the building-block orders of
  "Pipeline Parallelism with Controllable Memory", run on torch's ``_PipelineScheduleRuntime``;
  ``vmin8`` and ``vmin12``: V-Min's block repeated every 8 or 12 ticks instead of 6, less
  activation memory for a longer step.

A name this torch lacks is a one-line :class:`PipelineError` (:func:`.schedules.schedule_class`).

**The loss.** :func:`.step.pipeline_step` runs one forward and backward of the learner's policy
loss (``LLMLearner.step``'s math for one minibatch) through the pipeline. The samples are
packed into ``m`` microbatches (:func:`.packing.pack_samples`): one row per sample, prompt and
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
(:class:`.loss.PipelineLoss`) computes the per-token log-probs with :func:`.loss.token_logprobs` --
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
optimizer updates keep them equal. :func:`.step.clip_grad_norm_` counts the tied weight once.

**The bubble** is measured beside the benchmarks (``benchmarks/_pipeline_sim.py``, not part
of training): given an ``ActionTimeline`` (``LMPipeline(timeline=...)``), every stage's
``forward_one_chunk`` (F), ``backward_one_chunk`` (B full, I input-only),
``backward_weight_one_chunk`` (W), the loss at the last stage and the schedule's waits on
send/recv are timed while :func:`.step.pipeline_step` runs, and set next to each schedule's
closed form and a simulation of its own ``pipeline_order``. In training there is no timeline.

**Checkpoints across parallel settings.** :func:`.whole_model.full_state_dict` assembles the unsplit
model's state dict (same names) from the stages; :func:`.whole_model.save_pretrained` writes it as an
ordinary Hugging Face folder that one process loads (``load_model``,
``LLMLearner.load_weights``); :func:`.whole_model.load_full_state_dict` splits a full state dict into
any other split.

Runs on CPU with gloo (several processes on one machine, :mod:`arena.trainers.parallel.launch`)
and unchanged on CUDA with NCCL (``device="cuda:N"``).

The modules, one idea each: :mod:`.schedules` (names, torch classes, stage placement),
:mod:`.stages` (the model cut into stages), :mod:`.packing` (samples into microbatches and the
target tensor), :mod:`.loss` (the last stage's loss), :mod:`.runtime` (:class:`~.runtime.LMPipeline`,
this rank's stages and schedules), :mod:`.step` (one forward and backward, the gradient clip) and
:mod:`.whole_model` (state dicts, folders and logits of the unsplit model), :mod:`.vshape` (the V-Half and
V-Min orders) and :mod:`.memory` (the saved-activation meter). :class:`PipelineError`
is here.
"""

from __future__ import annotations

from arena.errors import ArenaError


class PipelineError(ArenaError, ValueError):
    """A schedule, a split or a batch the pipeline cannot run; the message says what to change."""
