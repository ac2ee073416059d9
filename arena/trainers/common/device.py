"""Device and precision: one place that autocast, the loss scaler and the engines follow."""

from __future__ import annotations

import contextlib
from typing import Literal

Device = Literal["auto", "cpu", "cuda"]
Precision = Literal["fp32", "bf16", "fp16"]


def resolve_device(device: str) -> str:
    """"auto" is cuda when torch sees a GPU, else cpu; "cuda" without one is a clear error."""
    import torch

    from arena.errors import ConfigError

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device: cuda, but torch sees no CUDA device: use device: cpu (or auto)")
    if device not in ("cpu", "cuda"):
        raise ConfigError(f"device must be auto, cpu or cuda, got {device!r}")
    return device


def autocast(device: str, precision: str):
    """A context that runs its body in `precision` on `device` (fp32: no autocast)."""
    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


def grad_scaler(device: str, precision: str):
    """A loss scaler for fp16 training (a no-op scaler for fp32 and bf16)."""
    import torch

    return torch.amp.GradScaler(device, enabled=precision == "fp16")
