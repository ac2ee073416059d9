"""Advantage estimators for self-play policy-gradient training.

Pure functions of tensors plus one small, explicitly passed-around EMA table
(:class:`RAEBaseline`).

* :class:`RAEBaseline`        SPIRAL role-conditioned advantage estimation.
* :func:`grpo_advantages`     group-normalised (r - mean) / (std + eps).
* :func:`dr_grpo_advantages`  Dr. GRPO: r - mean (no std division).
* :func:`gae`                 generalised advantage estimation over turns.
* :func:`length_adaptive_lambda`  VAPO/BPCO lambda = 1 - 1/(alpha L).
* :func:`bounded_value`       tanh-bounded value head (BPCO critic bound).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from arena.trainers.common.rl import gae_tb

__all__ = [
    "RAEBaseline",
    "bounded_value",
    "dr_grpo_advantages",
    "gae",
    "grpo_advantages",
    "length_adaptive_lambda",
]

KEY_SEP = "|"


def _key_str(key: tuple[Hashable, Hashable] | str) -> str:
    """Canonical ``"game|role"`` string for a ``(game_id, role)`` key."""
    if isinstance(key, str):
        if KEY_SEP not in key:
            raise ValueError(f"string key must look like 'game{KEY_SEP}role', got {key!r}")
        return key
    try:
        game, role = key
    except (TypeError, ValueError):
        raise ValueError(f"key must be a (game_id, role) pair or 'game|role' string, got {key!r}") from None
    role_s = str(role)
    if KEY_SEP in role_s:
        raise ValueError(f"role {role_s!r} must not contain {KEY_SEP!r}")
    return f"{game}{KEY_SEP}{role_s}"


class RAEBaseline:
    """Role-conditioned advantage estimation (SPIRAL): one EMA baseline per
    ``(game_id, role)``.

    ``advantage(key, R)`` first reads the baseline ``b`` (0 for an unseen key)
    and returns ``A = R - b``, THEN updates ``b <- decay * b + (1 - decay) * R``.
    Keying by game as well as role keeps e.g. player 0 of TicTacToe and
    player 0 of Kuhn poker apart.

    Keys are stored canonically as ``"game|role"`` strings (``str(role)``), so
    ``(g, 0)`` and ``(g, "0")`` are the same key and :meth:`state_dict` is
    JSON-serialisable for exact resume.
    """

    def __init__(self, decay: float = 0.95) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.decay = float(decay)
        self._baselines: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    def baseline(self, key: tuple[Hashable, Hashable] | str) -> float:
        """Current baseline for ``key`` (0.0 if never seen); does not update."""
        return self._baselines.get(_key_str(key), 0.0)

    def advantage(self, key: tuple[Hashable, Hashable] | str, reward: float) -> float:
        """``A = R - b`` with the baseline read first, then the EMA update."""
        k = _key_str(key)
        r = float(reward)
        b = self._baselines.get(k, 0.0)
        adv = r - b
        self._baselines[k] = self.decay * b + (1.0 - self.decay) * r
        self._counts[k] = self._counts.get(k, 0) + 1
        return adv

    def advantages(
        self, keys: Sequence[tuple[Hashable, Hashable] | str], rewards: Iterable[float]
    ) -> list[float]:
        """Apply :meth:`advantage` to each ``(key, reward)`` in order."""
        rewards = [float(r) for r in rewards]
        if len(keys) != len(rewards):
            raise ValueError(f"got {len(keys)} keys but {len(rewards)} rewards")
        return [self.advantage(k, r) for k, r in zip(keys, rewards)]

    def __len__(self) -> int:
        return len(self._baselines)

    def __contains__(self, key: object) -> bool:
        try:
            return _key_str(key) in self._baselines  # type: ignore[arg-type]
        except ValueError:
            return False

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state: decay, baselines and update counts by ``"game|role"``."""
        return {
            "decay": self.decay,
            "baselines": dict(self._baselines),
            "counts": dict(self._counts),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore exactly what :meth:`state_dict` produced (replaces current state)."""
        decay = float(state["decay"])
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        baselines = {_key_str(str(k)): float(v) for k, v in state["baselines"].items()}
        counts = {_key_str(str(k)): int(v) for k, v in state.get("counts", {}).items()}
        self.decay = decay
        self._baselines = baselines
        self._counts = counts

    def __repr__(self) -> str:
        return f"RAEBaseline(decay={self.decay}, keys={len(self._baselines)})"


def grpo_advantages(rewards: Tensor, eps: float = 1e-6, unbiased: bool = True) -> Tensor:
    """GRPO group-normalised advantages ``(r - mean) / (std + eps)`` over the
    last dimension (a group ``[G]`` or a batch of groups ``[N, G]``).

    ``std`` is the unbiased (Bessel-corrected) standard deviation by default,
    as in the GRPO reference implementations; a group of size 1 gets 0.
    """
    r = rewards if torch.is_tensor(rewards) else torch.as_tensor(rewards)
    if not r.is_floating_point():
        r = r.to(torch.get_default_dtype())
    if r.dim() == 0:
        raise ValueError("rewards must be at least 1-D (a group)")
    centred = r - r.mean(-1, keepdim=True)
    if r.shape[-1] < 2:
        return torch.zeros_like(r)
    std = r.std(-1, keepdim=True, unbiased=unbiased)
    return centred / (std + eps)


def dr_grpo_advantages(rewards: Tensor) -> Tensor:
    """Dr. GRPO advantages ``r - mean`` over the last dimension (no std division)."""
    r = rewards if torch.is_tensor(rewards) else torch.as_tensor(rewards)
    if not r.is_floating_point():
        r = r.to(torch.get_default_dtype())
    if r.dim() == 0:
        raise ValueError("rewards must be at least 1-D (a group)")
    return r - r.mean(-1, keepdim=True)


def gae(
    rewards: Tensor | Sequence[float],
    values: Tensor | Sequence[float],
    gamma: float = 1.0,
    lam: float = 0.95,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over one 1-D turn sequence.

    With ``V_T = 0`` after the last turn (terminal)::

        delta_t = r_t + gamma * V_{t+1} - V_t
        A_t     = delta_t + gamma * lam * A_{t+1}
        G_t     = A_t + V_t            (value target / "returns")

    Returns ``(advantages, returns)``, both detached, same shape as rewards.
    ``lam = 1`` gives Monte-Carlo returns ``G_t``; ``lam = 0`` gives one-step TD.

    This is :func:`arena.trainers.common.rl.gae_tb` on one trajectory with
    ``bootstrap_value = 0`` and a constant discount, so the language-model
    learner and the neural-policy learner share one implementation.
    """
    r = torch.as_tensor(rewards)
    v = torch.as_tensor(values)
    dtype = torch.promote_types(r.dtype, v.dtype)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    r = r.detach().to(dtype)
    v = v.detach().to(dtype=dtype, device=r.device)
    if r.dim() != 1 or v.shape != r.shape:
        raise ValueError(
            f"gae expects 1-D rewards and values of equal length, got {tuple(r.shape)} and {tuple(v.shape)}"
        )
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    return gae_tb(r, v, 0.0, float(gamma), lam)


def length_adaptive_lambda(length: float | Tensor, alpha: float = 0.4) -> float | Tensor:
    """VAPO/BPCO length-adaptive GAE lambda ``1 - 1 / (alpha * L)``, clamped to [0, 1].

    Longer sequences get lambda closer to 1 (less bias over long horizons).
    ``L <= 0`` (or ``alpha * L <= 0``) gives 0.  Accepts a float or a tensor of
    lengths (elementwise).
    """
    if not alpha > 0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    if torch.is_tensor(length):
        x = alpha * length.to(torch.get_default_dtype() if not length.is_floating_point() else length.dtype)
        lam = torch.where(x > 0, 1.0 - 1.0 / torch.where(x > 0, x, torch.ones_like(x)), torch.zeros_like(x))
        return lam.clamp(0.0, 1.0)
    x = alpha * float(length)
    if x <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - 1.0 / x))


def bounded_value(raw: Tensor, low: float = -1.0, high: float = 1.0) -> Tensor:
    """Map a raw value-head output into ``[low, high]``:
    ``low + (high - low) * (tanh(raw) + 1) / 2`` (BPCO critic bound).

    Smooth with a finite gradient everywhere (it vanishes for |raw| large).
    """
    if not high > low:
        raise ValueError(f"need high > low, got low={low}, high={high}")
    return low + (high - low) * 0.5 * (torch.tanh(raw) + 1.0)
