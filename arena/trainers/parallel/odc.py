"""Sharded data parallelism with on-demand communication (ODC), and FSDP2 as the baseline.

Both shard every parameter, its gradient reduction and its optimizer state across the
ranks of a process group, and both run the learner's policy loss (``LLMLearner.step``'s
math for one minibatch) on packed microbatches. They differ in when ranks wait for each
other (after "Revisiting Parameter Server in LLM Post-Training", arXiv 2601.19362, and
its library ``sail-sg/odc``):

* **FSDP2** (:class:`FSDP2Sharded`, ``torch.distributed.fsdp.fully_shard`` on every
  decoder layer and on the root): each layer's parameters are all-gathered before its
  forward (and again before its backward after a reshard) and its gradients
  reduce-scattered after its backward -- collectives, so every rank waits for the
  slowest one at every layer of every microbatch. A rank whose microbatch is short idles
  while another's is long, and these waits add up over the microbatches
  (``sum_i max_r t[r][i]``). ``best=True`` is FSDP2 at its least communication:
  ``reshard_after_forward=False``, gradient sync (``set_requires_gradient_sync``) and
  resharding after backward (``set_reshard_after_backward``) only on the last microbatch,
  so only the first forward and the last backward communicate.
* **ODC** (:class:`ODCSharded`): rank ``r`` owns a contiguous shard of each unit's flat
  parameters (a unit: the embedding, one decoder layer, the final norm and head), kept
  in the :class:`Transport`'s storage. A unit's full weights are gathered *on demand* in
  a forward pre-hook, the first time the rank needs them after an update, by reading the
  owners' shards -- no collective, so no rank waits for another while it computes.
  Gradients accumulate locally over the rank's own microbatches. Once per minibatch the
  ranks meet three times: (1) every rank's local gradient is ready; each rank then sums
  the slices it owns from every rank's gradient; (2) one small exchange of the squared
  gradient norms (the learner clips the *global* norm) and of the loss and its stats;
  each rank runs AdamW on its shard only (sharded optimizer state) and writes the new
  shard; (3) the new shards are visible, and the next minibatch's gathers read them. The
  step costs ``max_r sum_i t[r][i]`` plus those three meetings, not ``sum_i max_r``.

**Transports** (:data:`TRANSPORTS`; the interface is :class:`Transport`):

* ``shm`` (:class:`SharedMemoryTransport`, ranks on one machine): one block of shared
  memory (a file in ``/dev/shm`` created by rank 0, its path broadcast, mapped by every
  rank with ``torch.from_file(shared=True)``, then unlinked so nothing is left behind)
  holds every rank's parameter shards and every rank's gradient buffer. A gather is a
  copy from the owners' shards (one-sided: the owner does nothing); the reduction reads
  the other ranks' gradient buffers. The meetings are ``dist.barrier`` calls.
* ``pg`` (:class:`ProcessGroupTransport`, any ranks, e.g. across machines): the same
  interface over the process group. Gloo and NCCL have no one-sided reads, so the
  transfers happen at the meetings, batched over all units: one ``reduce_scatter_tensor``
  of the gradients at (1) and one ``all_gather_into_tensor`` of the new shards at (3);
  a gather then copies from that local staging buffer. The schedule -- three meetings per
  minibatch, none per layer or microbatch -- is ODC's; only the transfers differ, which is
  what ``benchmarks/bench_odc.py`` separates. (Reading remote shards on demand needs
  RDMA, e.g. NVSHMEM as in ``sail-sg/odc``, or an owner-side server thread.)
* ``auto``: ``shm`` when every rank is on this machine, else ``pg``.

**Load balancing** (:func:`plan_minibatch`): a minibatch's samples go to the ranks by
token count (prompt + response), longest first into the rank with the fewest tokens so
far, then within each rank into ``n_microbatches`` microbatches the same way -- both with
the pipeline's packer, :func:`arena.trainers.parallel.pipeline.pack_samples`. Each
microbatch is right-padded to its own longest sample (rounded up to ``pad_to``) with the
pipeline's target layout, and its loss weight is its share of what the aggregation
divides by *over the whole minibatch on all ranks* (the pipeline's weighting, so the
microbatch losses of all ranks sum to ``LLMLearner``'s minibatch loss and the summed
gradients are its gradients). ``balance="none"`` deals samples round-robin to the ranks
and in order into microbatches, as arrival order would (the benchmark's imbalance case).

**Equal results.** With the same samples, the same minibatches and AdamW with the same
hyper-parameters (``lr``, ``weight_decay``, ``betas``, ``eps``; the learner uses torch's
defaults) and the same global-norm clipping, one step of either leaves the parameters
of one process's ``LLMLearner.step`` (tested to 1e-5). :func:`learner_step` is
``LLMLearner.step``'s loop (epochs of shuffled minibatches, mean stats) over either.

**Checkpoints.** :meth:`ODCSharded.full_state_dict` / :meth:`FSDP2Sharded.full_state_dict`
give the unsharded model's state dict (its own names, a tied weight under each);
``save_pretrained`` writes an ordinary Hugging Face folder from rank 0 that one process
loads (``arena.inference.models.load_model``, ``LLMLearner.load_weights``), and a sharded
run starts from any such folder by loading the model and wrapping it.

fp32 only for now. On GPUs (NCCL), FSDP2 runs as it is and ODC takes the ``pg`` transport (its
meetings' collectives over NCCL); ``shm`` maps host memory, and one-sided reads of another GPU's
memory (NVSHMEM) are not built. Every rank must build the same model and pass the same samples;
ODC takes rank 0's weights.
"""

from __future__ import annotations

import math
import os
import random
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from arena.errors import ArenaError

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.llm.learner import Batch, LearnerSettings, Sample

TRANSPORTS = ("auto", "shm", "pg")
BALANCE = ("tokens", "none")


class ODCError(ArenaError, ValueError):
    """A setting, a batch or a machine layout the sharded learner cannot run; the message says what to change."""


# --------------------------------------------------------------------------- samples (tests, benchmarks)


def samples_of_lengths(lengths: Sequence[tuple[int, int]], *, seed: int = 0, vocab: int = 100,
                       topk: int = 0) -> list["Sample"]:
    """Synthetic trajectories with the given ``(prompt, response)`` token counts (random ids and log-probs)."""
    from arena.trainers.llm.learner import Sample

    rng = random.Random(seed)
    out = []
    for p, r in lengths:
        if p < 1:
            raise ODCError(f"a prompt needs at least one token, got a length of {p}")
        resp = [rng.randint(4, vocab - 1) for _ in range(r)]
        tk = [[t] + [rng.randint(4, vocab - 1) for _ in range(topk - 1)] for t in resp] if topk else None
        tl = [[math.log(rng.uniform(0.005, 0.02)) for _ in range(topk)] for _ in resp] if topk else None
        out.append(Sample(prompt_ids=[1] + [rng.randint(4, vocab - 1) for _ in range(p - 1)], response_ids=resp,
                          old_logp=[math.log(rng.uniform(0.005, 0.03)) for _ in resp], topk_ids=tk, topk_logp=tl,
                          adv=rng.choice([-1.0, -0.5, 0.5, 1.0]), ret=0.0))
    return out


# --------------------------------------------------------------------------- planning a minibatch


@dataclass
class Microbatch:
    """Right-padded rows of some samples, with the pipeline's target tensor (global loss weights)."""

    ids: Any  # [rows, length] long
    target: Any  # [rows, length, 6 + 2K] float64 (see arena.trainers.parallel.pipeline)
    samples: list[int]  # indices into the minibatch
    tokens: int  # prompt + response tokens (unpadded)
    response_tokens: int

    @property
    def rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def length(self) -> int:
        return int(self.ids.shape[1])


@dataclass
class Plan:
    """Every rank's microbatches of one minibatch (each rank computes the same plan)."""

    ranks: list[list[Microbatch]]
    balance: str
    topk: int
    n_samples: int

    def tokens(self, padded: bool = False) -> list[list[int]]:
        """``[rank][microbatch]`` tokens (``padded``: rows x length, what the forward computes)."""
        return [[mb.rows * mb.length if padded else mb.tokens for mb in r] for r in self.ranks]

    def lockstep_ratio(self, padded: bool = False) -> float:
        """:func:`lockstep_ratio` of this plan's token table."""
        return lockstep_ratio(self.tokens(padded))

    def fsdp2_best_ratio(self, padded: bool = False) -> float:
        """:func:`fsdp2_best_ratio` of this plan's token table."""
        return fsdp2_best_ratio(self.tokens(padded))


def lockstep_ratio(table: Sequence[Sequence[float]]) -> float:
    """``sum_i max_r t[r][i] / max_r sum_i t[r][i]``: ranks that wait for each other at every microbatch
    over ranks that meet once per minibatch, when a microbatch costs ``t`` (the ideal ODC / FSDP speed-up)."""
    m = max((len(r) for r in table), default=0)
    lock = sum(max((r[i] if i < len(r) else 0) for r in table) for i in range(m))
    once = max((sum(r) for r in table), default=0)
    return lock / once if once else 1.0


def fsdp2_best_ratio(table: Sequence[Sequence[float]], forward_share: float = 1 / 3) -> float:
    """FSDP2-best's step over ODC's when a microbatch costs ``t`` (forward ``forward_share * t``, backward the rest).

    FSDP2 at its best settings waits for the slowest rank only where it communicates: at
    every layer of the first forward (the all-gathers) and of the last backward (the
    reduce-scatters); between them each rank runs alone. So its step is about
    ``max_r F[r][0] + max_r (B[r][0] + sum_{0<i<m-1} t[r][i] + F[r][m-1]) + max_r B[r][m-1]``
    against ODC's ``max_r sum_i t[r][i]``. (For one microbatch both are ``max_r t``.)
    """
    f = forward_share
    rows = [list(r) for r in table if r]
    once = max((sum(r) for r in rows), default=0)
    if not once:
        return 1.0
    m = max(len(r) for r in rows)
    rows = [r + [0] * (m - len(r)) for r in rows]
    if m == 1:
        return max(r[0] for r in rows) / once
    first = max(f * r[0] for r in rows)
    middle = max((1 - f) * r[0] + sum(r[1:m - 1]) + f * r[m - 1] for r in rows)
    last = max((1 - f) * r[m - 1] for r in rows)
    return (first + middle + last) / once


def _global_weights(groups: list[list[int]], samples, agg: str) -> list[float]:
    """Each microbatch's share of the minibatch's aggregation denominator (the pipeline's weighting)."""
    from arena.trainers.parallel.pipeline import _agg_weights

    if agg == "seq_sum_norm":  # rows of the microbatch's own tensor over the minibatch's samples
        return [_agg_weights([g], samples, len(g), agg)[0] for g in groups]
    return _agg_weights(groups, samples, 0, agg)


def _groups_by_tokens(samples, parts: int) -> list[list[int]]:
    """The pipeline packer's assignment (longest first into the part with the fewest tokens)."""
    from arena.trainers.parallel.pipeline import pack_samples

    return pack_samples(samples, parts, pad_to=1).groups


def _pack_one(chunk, K: int, pad_id: int, agg: str, pad_to: int):
    """ids and target of one microbatch (the pipeline packer with one microbatch)."""
    import torch

    from arena.trainers.parallel.pipeline import _TOPK, pack_samples

    has_topk = K > 0 and any(s.topk_ids for s in chunk)
    pk = pack_samples(chunk, 1, pad_id=pad_id, agg=agg, topk=has_topk, pad_to=pad_to)
    target = pk.target
    if K and not has_topk:  # only empty responses here: top-K columns the shape needs, never read
        extra = torch.zeros(target.shape[:-1] + (2 * K,), dtype=target.dtype)
        extra[..., K:] = -1e4
        target = torch.cat([target, extra], dim=-1)
    assert target.shape[-1] == _TOPK + 2 * K
    return pk.ids, target


def plan_minibatch(samples: Sequence["Sample"], world_size: int, n_microbatches: int, *, agg: str = "token_mean",
                   topk: bool = False, pad_id: int = 0, pad_to: int = 8, balance: str = "tokens") -> Plan:
    """Split one minibatch over ``world_size`` ranks and each rank's share into microbatches (see the module doc)."""
    from arena.trainers.parallel.pipeline import _WLOSS, _WTOK, check_samples

    samples = list(samples)
    n, W, m = len(samples), int(world_size), int(n_microbatches)
    if n == 0:
        raise ODCError("no samples in the minibatch")
    if m < 1:
        raise ODCError(f"n_microbatches must be >= 1, got {n_microbatches}")
    if balance not in BALANCE:
        raise ODCError(f"unknown balance {balance!r}: use one of {', '.join(BALANCE)}")
    K = check_samples(samples, topk, ODCError)
    if balance == "tokens":
        rank_of = _groups_by_tokens(samples, W)
    else:
        rank_of = [list(range(r, n, W)) for r in range(W)]
    per_rank: list[list[list[int]]] = []
    for idx in rank_of:
        if not idx:
            per_rank.append([])
            continue
        if balance == "tokens":
            local = _groups_by_tokens([samples[j] for j in idx], m)
            groups = [[idx[k] for k in g] for g in local]
        else:
            c = math.ceil(len(idx) / m)
            groups = [idx[i:i + c] for i in range(0, len(idx), c)]
        per_rank.append([g for g in groups if g])
    flat = [g for r in per_rank for g in r]
    weights = iter(_global_weights(flat, samples, agg))
    n_resp = sum(len(s.response_ids) for s in samples)
    ranks = []
    for groups in per_rank:
        mbs = []
        for g in groups:
            chunk = [samples[j] for j in g]
            ids, target = _pack_one(chunk, K, pad_id, agg, pad_to)
            target[..., _WLOSS] = next(weights)
            target[..., _WTOK] = 1.0 / max(n_resp, 1)
            mbs.append(Microbatch(ids=ids, target=target, samples=list(g),
                                  tokens=sum(len(s.prompt_ids) + len(s.response_ids) for s in chunk),
                                  response_tokens=sum(len(s.response_ids) for s in chunk)))
        ranks.append(mbs)
    return Plan(ranks=ranks, balance=balance, topk=K, n_samples=n)


def _empty_microbatch(K: int, pad_id: int, pad_to: int) -> Microbatch:
    """A one-row all-padding microbatch with weight 0 (FSDP2's collectives need every rank to run as many)."""
    import torch

    from arena.trainers.parallel.pipeline import _TOPK

    L = max(2, pad_to)
    target = torch.zeros((1, L, _TOPK + 2 * K), dtype=torch.float64)
    return Microbatch(ids=torch.full((1, L), pad_id, dtype=torch.long), target=target, samples=[], tokens=0,
                      response_tokens=0)


# --------------------------------------------------------------------------- parameter layout


@dataclass(frozen=True)
class Unit:
    """The parameters gathered together (one decoder layer, say), flat, padded to a multiple of the ranks."""

    name: str
    params: tuple[str, ...]  # names (a tied parameter once, under its first name)
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]  # of each parameter in the unit's flat
    numel: int  # real elements (the flat has world_size * shard, the tail is padding)
    shard: int  # elements each rank owns
    base: int  # where the unit starts in the layout's flat buffer

    def span(self, world_size: int) -> slice:
        return slice(self.base, self.base + world_size * self.shard)

    def owned(self, rank: int) -> slice:
        return slice(self.base + rank * self.shard, self.base + (rank + 1) * self.shard)


@dataclass(frozen=True)
class Layout:
    """Every unit's place in one flat buffer, ``[unit][rank][shard]``: rank r owns ``unit.owned(r)`` of each."""

    units: tuple[Unit, ...]
    world_size: int
    total: int  # elements of the flat buffer

    @property
    def shard_total(self) -> int:
        """Elements one rank owns (over all units)."""
        return sum(u.shard for u in self.units)


def _unit_modules(model) -> list[tuple[str, list[Any]]]:
    from arena.trainers.parallel.pipeline import _llama_parts

    body = _llama_parts(model)
    out = [("model.embed_tokens", [body.embed_tokens])]
    out += [(f"model.layers.{i}", [layer]) for i, layer in enumerate(body.layers)]
    out.append(("model.norm+lm_head", [body.norm, model.lm_head]))
    return out


def module_units(model) -> list[tuple[str, list[Any]]]:
    """The units of any module that is not a causal LM: each direct child that holds parameters.

    (A policy network: its torso, heads, normaliser; parameters of the module itself go into ``rest``.)
    """
    return [(name, [child]) for name, child in model.named_children() if any(True for _ in child.parameters())]


def make_layout(model, world_size: int, units: list[tuple[str, list[Any]]] | None = None) -> Layout:
    """The units of ``model`` (default: a Llama-style causal LM's embedding, each decoder layer, and the
    final norm with the head; or the ``(name, modules)`` given), flat and sharded.

    A parameter in none of them (there are none in a Hugging Face Llama) goes into a last unit ``rest``.
    """
    names = {id(p): n for n, p in model.named_parameters()}  # first name of each parameter
    seen: set[int] = set()
    groups = []
    for uname, modules in (units if units is not None else _unit_modules(model)):
        ps = []
        for mod in modules:
            for p in mod.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    ps.append(p)
        groups.append((uname, ps))
    rest = [p for n, p in model.named_parameters() if id(p) not in seen]
    if rest:
        groups.append(("rest", rest))
    units, base = [], 0
    for uname, ps in groups:
        if not ps:
            continue
        offs, off = [], 0
        for p in ps:
            offs.append(off)
            off += p.numel()
        shard = max(1, math.ceil(off / world_size))
        units.append(Unit(uname, tuple(names[id(p)] for p in ps), tuple(tuple(p.shape) for p in ps), tuple(offs),
                          off, shard, base))
        base += world_size * shard
    return Layout(tuple(units), world_size, base)


# --------------------------------------------------------------------------- transports


class Transport:
    """Where the shards live and how they move; :class:`ODCSharded` calls, in each minibatch:

    ``gather(u, out)`` (any number of times, no other rank involved), ``grad_buffer()``
    (written with the rank's local gradient), ``reduce()`` (meeting 1: every rank's
    gradient is ready; returns this rank's summed gradient shards), then, after its
    optimizer wrote ``owned()``, ``publish()`` (meeting 3: every shard is new).
    ``syncs`` counts the meetings.
    """

    name = "base"

    def __init__(self) -> None:
        self.syncs = 0
        self.wait_s = 0.0  # time in the last reduce() spent waiting for the other ranks

    def open(self, layout: Layout, rank: int, group, init) -> None:
        raise NotImplementedError

    def owned(self) -> list[Any]:
        """This rank's shard of each unit, ``[shard]`` float32, updated in place by its optimizer."""
        raise NotImplementedError

    def grad_buffer(self) -> Any:
        """A flat ``[layout.total]`` buffer for this rank's local gradient (the parameters' layout)."""
        raise NotImplementedError

    def gather(self, u: int, out) -> None:
        """``out`` (``[world_size * unit.shard]``) = unit ``u``'s full flat parameters, read from their owners."""
        raise NotImplementedError

    def reduce(self) -> list[Any]:
        raise NotImplementedError

    def publish(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def _meet(self, group) -> float:
        import torch.distributed as dist

        t0 = time.perf_counter()
        dist.barrier(group=group)
        self.syncs += 1
        return time.perf_counter() - t0


def _same_host(group) -> bool:
    import torch.distributed as dist

    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    here = (socket.gethostname(), boot)
    everyone: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(everyone, here, group=group)
    return all(e == here for e in everyone)


class SharedMemoryTransport(Transport):
    """Shards and gradient buffers in one block of shared memory on this machine (see the module doc)."""

    name = "shm"

    def __init__(self, folder: str | None = None):
        super().__init__()
        self.folder = folder

    def open(self, layout: Layout, rank: int, group, init) -> None:
        import torch
        import torch.distributed as dist

        self.layout, self.rank, self.group = layout, rank, group
        W, T = layout.world_size, layout.total
        if not _same_host(group):
            raise ODCError("the shm transport needs every rank on one machine, but the ranks run on several: "
                           "use transport='pg' (or 'auto')")
        folder = self.folder or ("/dev/shm" if os.path.isdir("/dev/shm") else None)
        if folder is None:
            import tempfile

            folder = tempfile.gettempdir()
        nbytes = (1 + W) * T * 4
        path = [None]
        if rank == 0:
            path[0] = os.path.join(folder, f"arena-odc-{uuid.uuid4().hex}.bin")
            fd = os.open(path[0], os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.ftruncate(fd, nbytes)
            finally:
                os.close(fd)
        dist.broadcast_object_list(path, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
        ok, err = True, ""
        try:
            self.mem = torch.from_file(path[0], shared=True, size=(1 + W) * T, dtype=torch.float32)
        except (RuntimeError, OSError) as e:  # another /dev/shm (a separate container): not one machine after all
            ok, err = False, f"{type(e).__name__}: {e}"
        flags: list[Any] = [None] * W
        dist.all_gather_object(flags, (ok, err), group=group)
        if rank == 0:
            os.unlink(path[0])  # every rank has mapped it (or failed): nothing stays in /dev/shm
        bad = [(r, e) for r, (o, e) in enumerate(flags) if not o]
        if bad:
            raise ODCError(f"rank {bad[0][0]} cannot map the shared block {path[0]} ({bad[0][1]}): use transport='pg'")
        self.params = self.mem[:T]
        self.grads = [self.mem[(1 + k) * T:(2 + k) * T] for k in range(W)]
        if rank == 0:
            self.params.copy_(init)
        self._meet(group)
        self._owned = [self.params[u.owned(rank)] for u in layout.units]

    def owned(self) -> list[Any]:
        return self._owned

    def grad_buffer(self):
        return self.grads[self.rank]

    def gather(self, u: int, out) -> None:
        s = self.layout.units[u].span(self.layout.world_size)
        out.copy_(self.params[s])

    def reduce(self) -> list[Any]:
        self.wait_s = self._meet(self.group)
        out = []
        for unit in self.layout.units:
            s = unit.owned(self.rank)
            acc = self.grads[0][s].clone()
            for g in self.grads[1:]:
                acc += g[s]
            out.append(acc)
        return out

    def publish(self) -> None:
        self._meet(self.group)

    def close(self) -> None:
        self.params = self.grads = self._owned = self.mem = None


class ProcessGroupTransport(Transport):
    """Shards in local memory, moved with the process group's collectives at the meetings (see the module doc)."""

    name = "pg"

    def open(self, layout: Layout, rank: int, group, init) -> None:
        import torch
        import torch.distributed as dist

        self.layout, self.rank, self.group = layout, rank, group
        W, S = layout.world_size, layout.shard_total
        full = init.clone()
        dist.broadcast(full, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
        self.syncs += 1
        self.offsets = np.cumsum([0] + [u.shard for u in layout.units]).tolist()  # units in [rank][unit] rows
        dev = init.device  # the process group's device: the CPU for gloo, the rank's GPU for NCCL
        self.mine = torch.empty(S, dtype=torch.float32, device=dev)
        self._owned = [self.mine[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]
        for unit, o in zip(layout.units, self._owned):
            o.copy_(full[unit.owned(rank)])
        self.stage = torch.empty((W, S), dtype=torch.float32, device=dev)  # every rank's shards, as all_gather leaves them
        for unit, a in zip(layout.units, self.offsets):
            self.stage[:, a:a + unit.shard] = full[unit.span(W)].view(W, unit.shard)
        self.grad = torch.zeros(layout.total, dtype=torch.float32, device=dev)
        self.send = torch.empty((W, S), dtype=torch.float32, device=dev)
        self.recv = torch.empty(S, dtype=torch.float32, device=dev)

    def owned(self) -> list[Any]:
        return self._owned

    def grad_buffer(self):
        return self.grad

    def gather(self, u: int, out) -> None:
        unit, W = self.layout.units[u], self.layout.world_size
        a = self.offsets[u]
        out.view(W, unit.shard).copy_(self.stage[:, a:a + unit.shard])

    def reduce(self) -> list[Any]:
        import torch.distributed as dist

        W = self.layout.world_size
        for unit, a in zip(self.layout.units, self.offsets):
            self.send[:, a:a + unit.shard] = self.grad[unit.span(W)].view(W, unit.shard)
        t0 = time.perf_counter()
        try:
            # torch 2.13 renamed reduce_scatter_tensor (now deprecated) to reduce_scatter_single
            rs = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
            rs(self.recv, self.send.view(-1), group=self.group)
        except (RuntimeError, NotImplementedError):  # a backend without it: twice the traffic
            dist.all_reduce(self.send, group=self.group)
            self.recv.copy_(self.send[self.rank])
        self.wait_s = time.perf_counter() - t0
        self.syncs += 1
        return [self.recv[a:b].clone() for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    def publish(self) -> None:
        import torch.distributed as dist

        try:
            ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
            ag(self.stage.view(-1), self.mine, group=self.group)
        except (RuntimeError, NotImplementedError):
            parts = list(self.stage.unbind(0))
            dist.all_gather(parts, self.mine, group=self.group)
            for k, p in enumerate(parts):
                self.stage[k].copy_(p)
        self.syncs += 1


def make_transport(name: str, group=None, device: str = "cpu") -> Transport:
    """A transport by name (``auto``: ``shm`` when every rank of ``group`` is on this machine and the
    shards live in host memory, else ``pg``: on GPUs the process group's NCCL collectives)."""
    if name not in TRANSPORTS:
        raise ODCError(f"unknown ODC transport {name!r}: use one of {', '.join(TRANSPORTS)}")
    on_host = str(device) == "cpu"
    if name == "shm" and not on_host:
        raise ODCError(f"the shm transport keeps the shards in host shared memory, but the device is {device}: use "
                       "transport pg (or auto) on GPUs")
    if name == "auto":
        name = "shm" if on_host and _same_host(group) else "pg"
    return SharedMemoryTransport() if name == "shm" else ProcessGroupTransport()


# --------------------------------------------------------------------------- one step, shared parts


@dataclass
class StepResult:
    """What one sharded minibatch update returns on every rank."""

    loss: float  # the minibatch loss over all ranks
    stats: dict[str, float]  # the loss's stats, entropy, mismatch and grad_norm, as LLMLearner reports them
    timing: dict[str, float]  # this rank's seconds (step_s, compute_s, ...) and meeting count
    tokens: list[list[int]] = field(default_factory=list)  # [rank][microbatch] tokens of the plan
    padded: list[list[int]] = field(default_factory=list)  # [rank][microbatch] rows x length


def _check(settings, model, device: str, causal_lm: bool = True) -> None:
    from arena.trainers.parallel.pipeline import _llama_parts

    if settings.precision != "fp32":
        raise ODCError(f"sharded training runs fp32 only for now, got train precision {settings.precision!r}: "
                       "set train_precision: fp32")
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
        from arena.trainers.parallel.pipeline import PipelineLoss

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


# --------------------------------------------------------------------------- ODC


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


# --------------------------------------------------------------------------- FSDP2


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

        from arena.trainers.parallel.pipeline import _llama_parts

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


# --------------------------------------------------------------------------- the learner's loop


def learner_step(engine: ODCSharded | FSDP2Sharded, batch: "Batch", pad_id: int = 0) -> dict[str, float]:
    """``LLMLearner.step`` on a sharded engine: its loop (:func:`arena.trainers.llm.learner.minibatch_loop`:
    the same shuffled minibatches, mean stats, the first minibatch's ``mismatch``) over
    :meth:`ODCSharded.step` / :meth:`FSDP2Sharded.step`. No critic. Every rank calls it with the
    same batch and gets the same stats."""
    from arena.trainers.llm.learner import minibatch_loop

    return minibatch_loop(engine.settings, batch, lambda mb: engine.step(mb, pad_id).stats)
