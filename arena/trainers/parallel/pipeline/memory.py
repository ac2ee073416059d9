"""Activation memory of a pipeline rank, counted through autograd's saved-tensor hooks.

What a schedule's order controls is how many microbatches' activations a rank holds between
their forward and their (weight) backward. On a GPU the allocator's statistics show it; on the
CPU there is no allocator to ask, so :class:`ActivationMeter` counts it where it is made: every
tensor autograd saves for the backward during a stage's forward (and the loss at the last
stage) passes through a pack hook that records its storage's bytes, and is released when
autograd drops it (after the full backward, or after the weight backward for the split ones).
A storage saved by several operations counts once; this rank's parameters (a linear layer
saves its weight) are not activations and do not count.

``LMPipeline(meter=ActivationMeter())`` wraps every stage; :meth:`ActivationMeter.reset` before a
step, then ``peak`` (bytes) and ``peak_by_stage`` after it. Measurement only: the counts add a
Python call per saved tensor, so training runs without a meter.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from typing import Any


class _Saved:
    """One saved tensor held by autograd; its release is counted when autograd drops it."""

    __slots__ = ("tensor", "key", "meter", "stage")

    def __init__(self, tensor, key, meter: "ActivationMeter", stage: int):
        self.tensor, self.key, self.meter, self.stage = tensor, key, meter, stage

    def __del__(self):
        self.meter._release(self.key, self.stage)


class ActivationMeter:
    """Live and peak bytes of saved activations on this rank, in total and per stage."""

    def __init__(self) -> None:
        self.live: dict[Any, list] = {}  # storage key -> [references, bytes]
        self.current = 0
        self.peak = 0
        self.current_by_stage: dict[int, int] = defaultdict(int)
        self.peak_by_stage: dict[int, int] = defaultdict(int)
        self._skip: set[int] = set()

    def skip_parameters(self, params) -> None:
        """Storages of these tensors (the rank's parameters) never count."""
        self._skip |= {p.untyped_storage().data_ptr() for p in params}

    def reset(self) -> None:
        """Start a new peak from what is live now (nothing, between steps)."""
        self.peak = self.current
        self.peak_by_stage = defaultdict(int, self.current_by_stage)

    # -- the hooks ------------------------------------------------------------------------------
    def _pack(self, stage: int):
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
                self.live[key] = [1, storage.nbytes()]
                self.current += storage.nbytes()
                self.current_by_stage[stage] += storage.nbytes()
                self.peak = max(self.peak, self.current)
                self.peak_by_stage[stage] = max(self.peak_by_stage[stage], self.current_by_stage[stage])
            else:
                entry[0] += 1
            return _Saved(t.detach(), key, self, stage)  # detached: an op's saved output holding its own
            # grad_fn would be a cycle through autograd's C++ graph that nothing collects
        return pack

    @staticmethod
    def _unpack(obj):
        return obj.tensor if isinstance(obj, _Saved) else obj

    def _release(self, key, stage: int) -> None:
        entry = self.live.get(key)
        if entry is None:  # pragma: no cover - released twice cannot happen; stay quiet at interpreter exit
            return
        entry[0] -= 1
        if entry[0] == 0:
            del self.live[key]
            self.current -= entry[1]
            self.current_by_stage[stage] -= entry[1]

    @contextlib.contextmanager
    def counting(self, stage: int):
        """Count what autograd saves inside this block as ``stage``'s activations."""
        import torch

        with torch.autograd.graph.saved_tensors_hooks(self._pack(stage), self._unpack):
            yield

    # -- wrapping a pipeline ----------------------------------------------------------------------
    def wrap_stage(self, stage) -> None:
        """Count what this PipelineStage's forward saves."""
        orig, index = stage.forward_one_chunk, stage.stage_index

        def forward_one_chunk(*args, **kwargs):
            with self.counting(index):
                return orig(*args, **kwargs)

        stage.forward_one_chunk = forward_one_chunk

    def wrap_loss(self, loss_fn, stage: int):
        """The loss function, counting what it saves as the last stage's."""
        def counted(*args, **kwargs):
            with self.counting(stage):
                return loss_fn(*args, **kwargs)
        return counted
