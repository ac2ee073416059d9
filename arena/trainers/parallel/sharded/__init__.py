"""Sharded data parallelism with on-demand communication (ODC), and FSDP2 as the baseline.

Both shard every parameter, its gradient reduction and its optimizer state across the
ranks of a process group, and both run the learner's policy loss (``LLMLearner.step``'s
math for one minibatch) on packed microbatches. They differ in when ranks wait for each
other (after "Revisiting Parameter Server in LLM Post-Training", arXiv 2601.19362, and
its library ``sail-sg/odc``):

* **FSDP2** (:class:`.fsdp2.FSDP2Sharded`, ``torch.distributed.fsdp.fully_shard`` on every
  decoder layer and on the root): each layer's parameters are all-gathered before its
  forward (and again before its backward after a reshard) and its gradients
  reduce-scattered after its backward -- collectives, so every rank waits for the
  slowest one at every layer of every microbatch. A rank whose microbatch is short idles
  while another's is long, and these waits add up over the microbatches
  (``sum_i max_r t[r][i]``). ``best=True`` is FSDP2 at its least communication:
  ``reshard_after_forward=False``, gradient sync (``set_requires_gradient_sync``) and
  resharding after backward (``set_reshard_after_backward``) only on the last microbatch,
  so only the first forward and the last backward communicate.
* **ODC** (:class:`.odc.ODCSharded`): rank ``r`` owns a contiguous shard of each unit's flat
  parameters (a unit: the embedding, one decoder layer, the final norm and head), kept
  in the :class:`~.transports.Transport`'s storage. A unit's full weights are gathered *on demand* in
  a forward pre-hook, the first time the rank needs them after an update, by reading the
  owners' shards -- no collective, so no rank waits for another while it computes.
  Gradients accumulate locally over the rank's own microbatches. Once per minibatch the
  ranks meet three times: (1) every rank's local gradient is ready; each rank then sums
  the slices it owns from every rank's gradient; (2) one small exchange of the squared
  gradient norms (the learner clips the *global* norm) and of the loss and its stats;
  each rank runs AdamW on its shard only (sharded optimizer state) and writes the new
  shard; (3) the new shards are visible, and the next minibatch's gathers read them. The
  step costs ``max_r sum_i t[r][i]`` plus those three meetings, not ``sum_i max_r``.

**Transports** (:data:`.transports.TRANSPORTS`; the interface is :class:`.transports.Transport`):

* ``shm`` (:class:`.transports.SharedMemoryTransport`, ranks on one machine): one block of shared
  memory (a file in ``/dev/shm`` created by rank 0, its path broadcast, mapped by every
  rank with ``torch.from_file(shared=True)``, then unlinked so nothing is left behind)
  holds every rank's parameter shards and every rank's gradient buffer. A gather is a
  copy from the owners' shards (one-sided: the owner does nothing); the reduction reads
  the other ranks' gradient buffers. The meetings are ``dist.barrier`` calls.
* ``pg`` (:class:`.transports.ProcessGroupTransport`, any ranks, e.g. across machines): the same
  interface over the process group. Gloo and NCCL have no one-sided reads, so the
  transfers happen at the meetings, batched over all units: one ``reduce_scatter_tensor``
  of the gradients at (1) and one ``all_gather_into_tensor`` of the new shards at (3);
  a gather then copies from that local staging buffer. The schedule -- three meetings per
  minibatch, none per layer or microbatch -- is ODC's; only the transfers differ, which is
  what ``benchmarks/bench_odc.py`` separates. (Reading remote shards on demand needs
  RDMA, e.g. NVSHMEM as in ``sail-sg/odc``, or an owner-side server thread.)
* ``auto``: ``shm`` when every rank is on this machine, else ``pg``.

**Load balancing** (:func:`.plan.plan_minibatch`): a minibatch's samples go to the ranks by
token count (prompt + response), longest first into the rank with the fewest tokens so
far, then within each rank into ``n_microbatches`` microbatches the same way -- both with
the pipeline's packer, :func:`arena.trainers.parallel.pipeline.packing.pack_samples`. Each
microbatch is right-padded to its own longest sample (rounded up to ``pad_to``) with the
pipeline's target layout, and its loss weight is its share of what the aggregation
divides by *over the whole minibatch on all ranks* (the pipeline's weighting, so the
microbatch losses of all ranks sum to ``LLMLearner``'s minibatch loss and the summed
gradients are its gradients). ``balance="none"`` deals samples round-robin to the ranks
and in order into microbatches, as arrival order would (the benchmark's imbalance case).

**Equal results.** With the same samples, the same minibatches and AdamW with the same
hyper-parameters (``lr``, ``weight_decay``, ``betas``, ``eps``; the learner uses torch's
defaults) and the same global-norm clipping, one step of either leaves the parameters
of one process's ``LLMLearner.step`` (tested to 1e-5). :func:`.engine.learner_step` is
``LLMLearner.step``'s loop (epochs of shuffled minibatches, mean stats) over either.

**Checkpoints.** :meth:`.odc.ODCSharded.full_state_dict` / :meth:`.fsdp2.FSDP2Sharded.full_state_dict`
give the unsharded model's state dict (its own names, a tied weight under each);
``save_pretrained`` writes an ordinary Hugging Face folder from rank 0 that one process
loads (``arena.inference.models.load_model``, ``LLMLearner.load_weights``), and a sharded
run starts from any such folder by loading the model and wrapping it.

fp32 only for now. On GPUs (NCCL), FSDP2 runs as it is and ODC takes the ``pg`` transport (its
meetings' collectives over NCCL); ``shm`` maps host memory, and one-sided reads of another GPU's
memory (NVSHMEM) are not built. Every rank must build the same model and pass the same samples;
ODC takes rank 0's weights.

The modules, one idea each: :mod:`.plan` (a minibatch over the ranks and into microbatches),
:mod:`.layout` (the units and who owns which shard), :mod:`.transports` (how the shards move),
:mod:`.engine` (what both engines share, and the learner's loop over either), :mod:`.odc` and
:mod:`.fsdp2` (the two engines). :class:`ODCError` is here. The ideal speed-ups
(``lockstep_ratio``, ``fsdp2_best_ratio``) and synthetic samples are the benchmarks'
(``benchmarks/_sharded_sim.py``).
"""

from __future__ import annotations

from arena.errors import ArenaError


class ODCError(ArenaError, ValueError):
    """A setting, a batch or a machine layout the sharded learner cannot run; the message says what to change."""
