"""`PolicyNet`: the policy over one observation tensor (a board's planes, poker's information-state
vector, an entity set with one discrete action per entity), beside `arena.inference.structured`'s
`StructuredPolicyNet` for games with structured moves. `arena.inference.policy_nets.build_policy`
picks the one a game's spec needs; both return ``(distribution, value)`` with the same five calls
(`arena.inference.distributions`), so the learners treat them alike.

Its encoder: an MLP over the flattened tensor, a residual conv net over ``[C, H, W]`` planes, or
the entity transformer (`arena.inference.entity.EntityEncoder`) with a pointer head when the game's
discrete actions are its entities (``n_actions == N``); its heads: a masked categorical, or a
Gaussian or Beta over a box (`arena.inference.continuous`); a value head on the same features and
the privileged vector where the game has one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from arena.inference.continuous import BetaHead, GaussianHead
from arena.inference.distributions import MaskedCategorical
from arena.inference.entity import EntityEncoder, PointerHead
from arena.inference.layers import ResBlock, mlp


class PolicyNet(nn.Module):
    """Encoder -> (policy head, value head). ``forward(obs, mask, privileged=None)`` returns
    ``(dist, value)``: a `MaskedCategorical` (or a continuous distribution) and ``value [B]``."""

    def __init__(self, spec: Any, arch: str, sizes: dict):
        super().__init__()
        self.spec, self.arch, self.sizes = spec, arch, dict(sizes)
        hidden = list(sizes["hidden"])
        if arch == "conv":
            c, h, w = spec.input_shape
            ch = int(sizes["channels"])
            self.stem = nn.Sequential(nn.Conv2d(c, ch, 3, padding=1), nn.ReLU(),
                                      *[ResBlock(ch) for _ in range(int(sizes["blocks"]))], nn.Flatten())
            self.torso = mlp([ch * h * w] + hidden)
        elif arch == "entity":
            self.stem = EntityEncoder(spec.obs_shape[-1], d_model=int(sizes["d_model"]), heads=int(sizes["heads"]),
                                      layers=int(sizes["layers"]))
            self.torso = mlp([self.stem.out_dim] + hidden)
        else:
            self.stem = nn.Flatten()
            self.torso = mlp([int(math.prod(spec.input_shape))] + hidden)
        feat = hidden[-1]
        self.pointer = None
        if spec.action_kind == "discrete":
            if arch == "entity" and spec.n_actions == spec.obs_shape[0]:
                self.pointer = PointerHead(feat, self.stem.out_dim, d=int(sizes["d_model"]))
            else:
                self.logits = nn.Linear(feat, spec.n_actions)
                nn.init.zeros_(self.logits.bias)
                with torch.no_grad():
                    self.logits.weight.mul_(0.1)  # a near-uniform first policy
        else:
            dim = int(math.prod(spec.action_shape))
            low, high = np.asarray(spec.low, dtype=np.float32), np.asarray(spec.high, dtype=np.float32)
            if sizes.get("continuous") == "beta":
                self.head = BetaHead(feat, dim, low, high)
            else:  # the first policy's spread, in half box widths (log): -0.5 is about 0.3 on [0, 1]
                self.head = GaussianHead(feat, dim, low, high, init_log_std=float(sizes.get("init_log_std", -0.5)))
        if sizes.get("obs_norm"):
            # Running mean and variance of the inputs (a continuous-control task's observations
            # mix metres, radians and muscle forces): buffers, so they travel with the weights.
            # The trainer updates them (`update_obs_norm`); forward only reads them.
            dim = int(math.prod(spec.input_shape))
            self.register_buffer("obs_mean", torch.zeros(dim, dtype=torch.float64))
            self.register_buffer("obs_var", torch.ones(dim, dtype=torch.float64))
            self.register_buffer("obs_count", torch.zeros((), dtype=torch.float64))
        vin = feat + (spec.privileged_dim if spec.privileged_dim else 0)
        self.value = nn.Sequential(nn.Linear(vin, int(sizes["value_hidden"])), nn.ReLU(),
                                   nn.Linear(int(sizes["value_hidden"]), 1))

    def normalise(self, obs):
        if not self.sizes.get("obs_norm"):
            return obs
        flat = obs.reshape(obs.shape[0], -1)
        std = (self.obs_var + 1e-8).sqrt().to(obs.dtype)
        return ((flat - self.obs_mean.to(obs.dtype)) / std).clamp(-10.0, 10.0).reshape(obs.shape)

    @torch.no_grad()
    def update_obs_norm(self, x) -> None:
        """Merge a batch of inputs ``[N, *input_shape]`` into the running mean and variance (Chan et
        al.'s parallel update: exact whatever the batch sizes)."""
        x = torch.as_tensor(np.asarray(x), dtype=torch.float64).reshape(len(x), -1)
        n = float(x.shape[0])
        if n == 0:
            return
        mean, var = x.mean(0), x.var(0, unbiased=False)
        total = self.obs_count + n
        delta = mean - self.obs_mean
        m2 = self.obs_var * self.obs_count + var * n + delta.pow(2) * self.obs_count * n / total
        self.obs_mean.add_(delta * n / total)
        self.obs_var.copy_(m2 / total)
        self.obs_count.fill_(total)

    def features(self, obs, entity_mask=None):
        obs = self.normalise(obs)
        if self.arch == "entity":
            per_entity, pooled = self.stem(obs, entity_mask)
            return self.torso(pooled), per_entity
        return self.torso(self.stem(obs)), None

    def forward(self, obs, mask=None, privileged=None, entity_mask=None, actions=None):
        """`obs`: the input tensor, or the dict of `policy_inputs` (``obs``, ``mask``,
        ``entity_mask``). `actions` is for the structured nets' interface (a one-part move's
        distribution does not depend on it)."""
        if isinstance(obs, dict):
            obs, mask, entity_mask = obs["obs"], obs.get("mask", mask), obs.get("entity_mask", entity_mask)
        if self.arch == "entity" and entity_mask is None:  # every entity present
            entity_mask = torch.ones(obs.shape[:2], dtype=torch.bool, device=obs.device)
        feat, per_entity = self.features(obs, entity_mask)
        if self.spec.action_kind == "discrete":
            if self.pointer is not None:
                legal = mask.bool() if mask is not None else entity_mask
                logits = self.pointer(feat, per_entity, legal)
            else:
                logits = self.logits(feat)
            dist = MaskedCategorical(logits, mask)
        else:
            dist = self.head(feat)
        vin = feat
        if self.spec.privileged_dim:  # the critic's extra input; zeros where the caller has none
            extra = privileged if privileged is not None else feat.new_zeros(feat.shape[0], self.spec.privileged_dim)
            vin = torch.cat([feat, extra], -1)
        return dist, self.value(vin).squeeze(-1)
