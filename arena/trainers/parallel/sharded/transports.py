"""How the shards move: on-demand gathers, the gradient reduction and the publication of new shards.

``shm`` (one machine: one block of shared memory, one-sided reads) and ``pg`` (any ranks: the
process group's collectives at the meetings); ``auto`` picks one.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from typing import Any

import numpy as np

from arena.trainers.parallel.sharded import ODCError
from arena.trainers.parallel.sharded.layout import Layout

TRANSPORTS = ("auto", "shm", "pg")


class Transport:
    """Where the shards live and how they move; :class:`~arena.trainers.parallel.sharded.odc.ODCSharded` calls,
    in each minibatch:

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
