"""Model parallelism for the language-model learner.

* :mod:`arena.trainers.parallel.launch` -- start N local processes with a process group
  (gloo on CPU, NCCL on CUDA), or join the one ``torchrun`` set up, run one function on
  every rank and collect what each returns.
* :mod:`arena.trainers.parallel.pipeline` -- pipeline parallelism with
  ``torch.distributed.pipelining``: the tiny (or any Llama-style) causal LM split into
  stages, the schedules by name (``gpipe``, ``1f1b``, ``interleaved_1f1b``, ``zb1p``,
  ``zbv``, ``dualpipev``), the learner's policy loss computed at the last stage on packed
  microbatches, and full-model state dicts assembled from (or split into) the stages so
  checkpoints move between parallel settings. (The bubble is measured and simulated beside
  the benchmarks, ``benchmarks/_pipeline_sim.py``.)
* :mod:`arena.trainers.parallel.sharded` -- sharded data parallelism: ODC (each rank owns a shard of
  every parameter; a layer's weights are gathered on demand from the owners through shared memory,
  gradients reduced and the sharded AdamW applied once per minibatch: three meetings a minibatch,
  not two collectives a layer) and the FSDP2 (``fully_shard``) baseline, both with the minibatch
  split across ranks and into microbatches by token count.
* :mod:`arena.trainers.parallel.learner` and :mod:`arena.trainers.parallel.policy` -- the
  language-model and the neural-policy learner on those engines (``--parallel``).

Nothing here imports torch at import time of this package.
"""
