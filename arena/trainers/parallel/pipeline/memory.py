"""Activation memory of a pipeline rank: counted through autograd's saved-tensor hooks, and offloaded.

What a schedule's order controls is how many microbatches' activations a rank holds between
their forward and their (weight) backward. On a GPU the allocator's statistics show it; on the
CPU there is no allocator to ask, so :class:`ActivationMeter` counts it where it is made: every
tensor autograd saves for the backward during a stage's forward (and the loss at the last
stage) passes through a pack hook that records its storage's bytes under the stage and
microbatch that saved it, and is released when autograd drops it (after the full backward, or
after the weight backward for the split ones). A storage saved by several operations counts
once; this rank's parameters (a linear layer saves its weight) are not activations and do not
count.

:class:`ActivationOffload` ("PipeOffload", 2025) builds on the same hooks: after a stage's forward
of a microbatch, what it saved leaves the device for host memory, and it comes back before that
stage's backward of that microbatch: the copy back starts as the pass before that backward in the
rank's order starts, so it runs behind one pass and the device holds one microbatch's more at most. ``mode="full"`` offloads every (stage, microbatch) with a pass between its
forward and its backward; ``"selective"`` only
those whose activations stay on the rank through at least ``lead`` other passes of its order,
the ones whose round trip can hide (short-lived ones, such as the last stage's, stay);
``budget`` (bytes) offloads anything more that would take the device past it. On a GPU the
copies run on a side stream into pinned host memory; on the CPU device and host are one memory,
so the copies are real but the saving is the accounting's: ``current``/``peak`` count the
device bytes, ``host``/``host_peak`` the offloaded ones.

``LMPipeline(meter=...)`` wraps every stage with either; training takes an offload from
``parallel.offload``, the benchmark a meter.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import defaultdict
from typing import Any


class _Saved:
    """One saved tensor held by autograd; its release is counted when autograd drops it."""

    __slots__ = ("tensor", "host", "key", "meter", "ready", "__weakref__")

    def __init__(self, tensor, key, meter: "ActivationMeter"):
        self.tensor, self.host, self.key, self.meter, self.ready = tensor, None, key, meter, None

    def __del__(self):
        self.meter._release(self.key)


class _Entry:
    """A saved storage: how many holders, its bytes, who saved it, and whether it is off the device."""

    __slots__ = ("refs", "nbytes", "group", "holders", "offloaded")

    def __init__(self, nbytes: int, group: tuple[int, int]):
        self.refs, self.nbytes, self.group, self.offloaded = 0, nbytes, group, False
        self.holders: weakref.WeakSet = weakref.WeakSet()


class ActivationMeter:
    """Live and peak device bytes of saved activations on this rank, in total and per stage."""

    def __init__(self) -> None:
        self.live: dict[Any, _Entry] = {}
        self.by_group: dict[tuple[int, int], set] = defaultdict(set)  # (stage, microbatch) -> storage keys
        self.current = 0
        self.peak = 0
        self.current_by_stage: dict[int, int] = defaultdict(int)
        self.peak_by_stage: dict[int, int] = defaultdict(int)
        self._skip: set[int] = set()
        self._microbatch: dict[int, int] = {}  # stage -> the microbatch its last forward ran

    def skip_parameters(self, params) -> None:
        """Storages of these tensors (the rank's parameters) never count."""
        self._skip |= {p.untyped_storage().data_ptr() for p in params}

    def reset(self) -> None:
        """Start a new peak from what is live now (nothing, between steps)."""
        self.peak = self.current
        self.peak_by_stage = defaultdict(int, self.current_by_stage)

    # -- accounting -----------------------------------------------------------------------------
    def _add(self, stage: int, nbytes: int) -> None:
        self.current += nbytes
        self.current_by_stage[stage] += nbytes
        self.peak = max(self.peak, self.current)
        self.peak_by_stage[stage] = max(self.peak_by_stage[stage], self.current_by_stage[stage])

    def _sub(self, stage: int, nbytes: int) -> None:
        self.current -= nbytes
        self.current_by_stage[stage] -= nbytes

    # -- the hooks ------------------------------------------------------------------------------
    def _pack(self, stage: int, mb: int):
        def pack(t):
            if t.device.type == "meta":
                return t
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            if ptr in self._skip or storage.nbytes() == 0:
                return t
            key = (t.device.type, ptr)
            entry = self.live.get(key)
            if entry is None:
                entry = self.live[key] = _Entry(storage.nbytes(), (stage, mb))
                self.by_group[(stage, mb)].add(key)
                self._add(stage, entry.nbytes)
            entry.refs += 1
            # detached: an op's saved output holding its own grad_fn would be a cycle through
            # autograd's C++ graph that nothing collects
            holder = _Saved(t.detach(), key, self)
            entry.holders.add(holder)
            return holder
        return pack

    def _unpack(self, obj):
        if not isinstance(obj, _Saved):
            return obj
        if obj.tensor is None:
            self._bring_back(self.live[obj.key])
        if obj.ready is not None:
            obj.ready()
            obj.ready = None
        return obj.tensor

    def _release(self, key) -> None:
        entry = self.live.get(key)
        if entry is None:  # pragma: no cover - stay quiet at interpreter exit
            return
        entry.refs -= 1
        if entry.refs == 0:
            del self.live[key]
            self.by_group[entry.group].discard(key)
            if not self.by_group[entry.group]:
                del self.by_group[entry.group]
            self._released(entry)

    def _released(self, entry: _Entry) -> None:
        self._sub(entry.group[0], entry.nbytes)

    def _bring_back(self, entry: _Entry) -> None:  # pragma: no cover - only an offload moves entries
        raise AssertionError("a saved tensor is off the device without an offload")

    @contextlib.contextmanager
    def counting(self, stage: int, mb: int = 0):
        """Count what autograd saves inside this block as ``stage``'s activations of microbatch ``mb``."""
        import torch

        with torch.autograd.graph.saved_tensors_hooks(self._pack(stage, mb), self._unpack):
            yield

    # -- wrapping a pipeline ----------------------------------------------------------------------
    def attach(self, stage) -> None:
        """Count what this PipelineStage's forward saves."""
        orig, index = stage.forward_one_chunk, stage.stage_index

        def forward_one_chunk(mb, *args, **kwargs):
            self._microbatch[index] = mb
            self.before_pass("F", index, mb)
            with self.counting(index, mb):
                out = orig(mb, *args, **kwargs)
            self.after_forward(index, mb, last=stage.is_last)
            return out

        stage.forward_one_chunk = forward_one_chunk

    def wrap_loss(self, loss_fn, stage: int):
        """The loss function, counting what it saves as the last stage's (the microbatch its forward just ran)."""
        def counted(*args, **kwargs):
            mb = self._microbatch.get(stage, 0)
            with self.counting(stage, mb):
                out = loss_fn(*args, **kwargs)
            self.after_forward(stage, mb, last=False)
            return out
        return counted

    def plan(self, passes: list[tuple[str, int, int]]) -> None:
        """The rank's order of passes, once its schedule is built (an offload times its copies by it)."""

    def before_pass(self, kind: str, stage: int, mb: int) -> None:
        """Called as a pass (F, I, B or W) of a stage starts."""

    def after_forward(self, stage: int, mb: int, last: bool) -> None:
        """Called once a stage's forward of a microbatch is done (``last``: its loss is still to come)."""


def one_f_one_b_passes(rank: int, p: int, m: int) -> list[tuple[str, int, int]]:
    """The textbook 1F1B order of rank ``rank``: ``min(p - 1 - r, m)`` warm-up forwards, then one forward one
    backward, then the rest of the backwards (what torch's ``Schedule1F1B`` loop runs)."""
    w = min(p - 1 - rank, m)
    out = [("F", rank, i) for i in range(w)]
    for i in range(m - w):
        out += [("F", rank, w + i), ("B", rank, i)]
    return out + [("B", rank, i) for i in range(m - w, m)]


def rank_passes(schedule, rank: int, world_size: int, n_microbatches: int) -> list[tuple[str, int, int]]:
    """This rank's compute passes ``(kind, stage, microbatch)`` in the order its schedule runs them.

    The multi-stage schedules keep it in ``pipeline_order``; GPipe and 1F1B run a fixed loop
    (torch's ``pipeline_order`` for 1F1B is for display and off by one on ranks > 0), whose
    order is written out here: GPipe every forward then every backward, 1F1B
    ``min(p - 1 - r, m)`` warm-up forwards, then one forward one backward.
    """
    name = type(schedule).__name__
    m, p, r = n_microbatches, world_size, rank
    if name == "ScheduleGPipe":
        return [("F", r, i) for i in range(m)] + [("B", r, i) for i in range(m)]
    if name == "Schedule1F1B":
        return one_f_one_b_passes(r, p, m)
    out = []
    for a in schedule.pipeline_order.get(rank, []):
        if a is None:
            continue
        for sub in getattr(a, "sub_actions", None) or (a,):
            kind = getattr(sub.computation_type, "value", str(sub.computation_type))
            if kind in ("F", "B", "I", "W"):
                out.append((kind, sub.stage_index, sub.microbatch_index))
    return out


class ActivationOffload(ActivationMeter):
    """Saved activations off the device between a stage's forward and its backward, back in time for it.

    ``mode``: ``full`` or ``selective`` (see the module doc); ``lead``: the fewest passes of the
    rank's order between a microbatch's forward and its backward for ``selective`` to offload it
    (``full`` offloads everything with at least one pass between: a forward whose backward comes
    next, like the last stage's, would only make the round trip);
    ``budget``: device bytes past which any finished forward's activations leave too. Counts
    ``offloads``, ``reloads`` (copies back) and ``late`` (copies back that the backward waited
    for because no prefetch had started them).
    """

    def __init__(self, mode: str = "full", device: Any = "cpu", budget: int | None = None, lead: int = 2) -> None:
        import torch

        super().__init__()
        if mode not in ("full", "selective"):
            raise ValueError(f"offload mode {mode!r} is not one of full, selective")
        self.mode, self.budget, self.lead = mode, budget, int(lead)
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self._stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.host = self.host_peak = 0
        self.offloads = self.reloads = self.late = 0
        self.eligible: set[tuple[int, int]] | None = None  # None: every (stage, microbatch)
        self._ahead: dict[tuple[str, int, int], tuple[int, int]] | None = None  # pass -> the backward after it

    def plan(self, passes: list[tuple[str, int, int]]) -> None:
        """From the rank's order of passes: which backward follows each pass (what to bring back while it
        runs), and which (stage, microbatch) pairs ``selective`` offloads."""
        self._ahead = {passes[i]: passes[i + 1][1:] for i in range(len(passes) - 1)
                       if passes[i + 1][0] in ("I", "B")}
        at: dict[tuple[int, int], int] = {}
        keep = set()
        for i, (kind, s, mb) in enumerate(passes):
            if kind == "F":
                at[(s, mb)] = i
            elif kind in ("I", "B") and (s, mb) in at and i - at[(s, mb)] - 1 >= (1 if self.mode == "full" else self.lead):
                keep.add((s, mb))  # full: anything with a pass to hide behind; selective: lead passes
        self.eligible = keep

    def reset(self) -> None:
        super().reset()
        self.host_peak = self.host
        self.offloads = self.reloads = self.late = 0

    # -- moving --------------------------------------------------------------------------------------
    def _to_host(self, t):
        import torch

        if not self.cuda:
            h = torch.empty_like(t, device="cpu")
            h.copy_(t)
            return h
        ev = torch.cuda.current_stream(self.device).record_event()
        with torch.cuda.stream(self._stream):
            self._stream.wait_event(ev)
            h = torch.empty_like(t, device="cpu", pin_memory=True)
            h.copy_(t, non_blocking=True)
            t.record_stream(self._stream)  # the allocator keeps t until the copy is done
        return h

    def _to_device(self, holder) -> None:
        import torch

        h = holder.host
        if not self.cuda:
            d = torch.empty_like(h)
            d.copy_(h)
            holder.tensor = d
            return
        with torch.cuda.stream(self._stream):
            d = torch.empty_like(h, device=self.device)
            d.copy_(h, non_blocking=True)
            ev = self._stream.record_event()
        d.record_stream(torch.cuda.current_stream(self.device))
        holder.tensor = d
        holder.ready = lambda: torch.cuda.current_stream(self.device).wait_event(ev)

    def _offload(self, group: tuple[int, int]) -> None:
        for key in list(self.by_group.get(group, ())):
            entry = self.live[key]
            if entry.offloaded:
                continue
            for holder in list(entry.holders):
                holder.host = self._to_host(holder.tensor)
                holder.tensor = None
            entry.offloaded = True
            self._sub(entry.group[0], entry.nbytes)
            self.host += entry.nbytes
            self.host_peak = max(self.host_peak, self.host)
            self.offloads += 1

    def _bring_back(self, entry: _Entry, late: bool = True) -> None:
        for holder in list(entry.holders):
            if holder.tensor is None:
                self._to_device(holder)
                holder.host = None
        entry.offloaded = False
        self.host -= entry.nbytes
        self._add(entry.group[0], entry.nbytes)
        self.reloads += 1
        self.late += int(late)

    def fetch(self, group: tuple[int, int], late: bool = False) -> None:
        """Start bringing back what ``group`` (stage, microbatch) offloaded."""
        for key in list(self.by_group.get(group, ())):
            entry = self.live.get(key)
            if entry is not None and entry.offloaded:
                self._bring_back(entry, late=late)

    def _released(self, entry: _Entry) -> None:
        if entry.offloaded:
            self.host -= entry.nbytes
        else:
            super()._released(entry)

    # -- the pipeline's hooks ---------------------------------------------------------------------------
    def attach(self, stage) -> None:
        super().attach(stage)
        back, weight, index = stage.backward_one_chunk, stage.backward_weight_one_chunk, stage.stage_index

        def backward_one_chunk(mb, *args, **kwargs):
            self.before_pass("B" if kwargs.get("full_backward", True) else "I", index, mb)
            return back(mb, *args, **kwargs)

        def backward_weight_one_chunk(mb, *args, **kwargs):
            self.before_pass("W", index, mb)
            return weight(mb, *args, **kwargs)

        stage.backward_one_chunk = backward_one_chunk
        stage.backward_weight_one_chunk = backward_weight_one_chunk

    def before_pass(self, kind: str, stage: int, mb: int) -> None:
        if kind in ("I", "B"):
            self.fetch((stage, mb), late=True)  # anything no prefetch has started
        if self._ahead is None:  # no order known: the stage's next backward, a round ahead
            if kind in ("I", "B"):
                self.fetch((stage, mb + 1))
        elif (kind, stage, mb) in self._ahead:  # the backward right after this pass comes back during it
            self.fetch(self._ahead[(kind, stage, mb)])

    def after_forward(self, stage: int, mb: int, last: bool) -> None:
        if last:
            return  # the loss saves more: offload once it is done
        wanted = self.eligible is None or (stage, mb) in self.eligible
        if wanted or (self.budget is not None and self.current > self.budget):
            self._offload((stage, mb))
