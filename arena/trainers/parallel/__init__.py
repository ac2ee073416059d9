"""Model parallelism for the language-model learner.

* :mod:`arena.trainers.parallel.launch` -- start N local processes with a process group
  (gloo on CPU, NCCL on CUDA), or join the one ``torchrun`` set up, run one function on
  every rank and collect what each returns.
* :mod:`arena.trainers.parallel.pipeline` -- pipeline parallelism with
  ``torch.distributed.pipelining``: the tiny (or any Llama-style) causal LM split into
  stages, the schedules by name (``gpipe``, ``1f1b``, ``interleaved_1f1b``, ``zb1p``,
  ``zbv``, ``dualpipev``), the learner's policy loss computed at the last stage on packed
  microbatches, the bubble measured from the schedule's own actions, and full-model
  state dicts assembled from (or split into) the stages so checkpoints move between
  parallel settings.

Nothing here imports torch at import time of this package.
"""
