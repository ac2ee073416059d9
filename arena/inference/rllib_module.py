"""An RLlib RLModule that honours a game's action mask, and the seat view it reads.

Shared by the RLlib PPO trainer (`arena.trainers.rllib.ppo`, which trains it) and the ``rllib:``
agent (`arena.agents.rllib_agent`, which plays it): a checkpoint names this module's class, so
both sides must import it from here.

**The seat view.** A game core gives each seat a structured observation: ``{"observation":
float32 tensor, "action_mask": int8 vector}``. One policy plays both seats (self-play), so
`seat_features` turns it into what that seat sees from its own side: the tensor flattened, with
the two players' piece planes swapped for the second seat in the games whose tensors are
absolute (OpenSpiel's tic-tac-toe and connect four, `SEAT_PLANES`), then a one-hot of the seat
(who moves first matters in every game). The mask becomes float32.

**The mask.** `MaskedMLPModule` is two MLPs over the seat view (policy logits; value), and every
forward pass (inference, exploration, training) replaces the logits of illegal moves with the
most negative float32: their probability is exactly 0, so they are never sampled nor picked by
an argmax, and PPO's ratios and entropy see only legal moves. A finite floor (not -inf) keeps a
terminal observation, whose mask is all zeros, free of NaNs in the loss.

Imports ray and torch at module level: import it lazily (the ``rllib:`` agent does).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule

#: The most negative float32: the logit of an illegal move.
FLOAT_MIN = float(torch.finfo(torch.float32).min)

#: Games whose observation tensor is absolute, not seat-relative: the planes of (the first seat's
#: pieces, the second seat's pieces). The second seat sees them swapped, so "my pieces" are always
#: the same plane.
SEAT_PLANES: dict[str, tuple[int, int]] = {
    "openspiel/tic_tac_toe-v0": (2, 1),
    "openspiel/connect_four-v0": (0, 1),
}


def seat_features(observation: Any, seat: int, num_players: int,
                  seat_planes: Sequence[int] | None = None) -> np.ndarray:
    """The float32 vector a seat's policy reads: its (seat-relative) tensor flattened, then a
    one-hot of the seat."""
    x = np.asarray(observation, dtype=np.float32)
    if seat_planes is not None and seat == 1:
        a, b = seat_planes
        order = list(range(x.shape[0]))
        order[a], order[b] = b, a
        x = x[order]
    out = np.zeros(x.size + num_players, dtype=np.float32)
    out[:x.size] = x.ravel()
    out[x.size + seat] = 1.0
    return out


def feature_size(obs_shape: Sequence[int], num_players: int) -> int:
    return int(np.prod(obs_shape)) + int(num_players)


def _mlp(n_in: int, hidden: Sequence[int], activation: str) -> tuple[torch.nn.Module, int]:
    act = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[activation]
    layers: list[torch.nn.Module] = []
    for h in hidden:
        layers += [torch.nn.Linear(n_in, int(h)), act()]
        n_in = int(h)
    return torch.nn.Sequential(*layers), n_in


def mask_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`logits` with every position where `mask` is 0 set to `FLOAT_MIN`."""
    return torch.where(mask > 0, logits, torch.full_like(logits, FLOAT_MIN))


class MaskedMLPModule(TorchRLModule, ValueFunctionAPI):
    """PPO's RLModule for a Discrete game over ``{"observation": seat view, "action_mask": mask}``.

    ``model_config``: ``hidden`` (layer sizes of each MLP, default ``[128, 128]``), ``activation``
    (``tanh`` or ``relu``), and what the ``rllib:`` agent needs to rebuild the seat view from a
    game's raw observation: ``game``, ``obs_shape``, ``num_players``, ``seat_planes``.
    """

    def setup(self) -> None:
        cfg = self.model_config or {}
        n_in = int(self.observation_space["observation"].shape[0])
        n_actions = int(self.action_space.n)
        hidden = list(cfg.get("hidden", [128, 128]))
        activation = str(cfg.get("activation", "tanh"))
        self.pi_trunk, d = _mlp(n_in, hidden, activation)
        self.pi_head = torch.nn.Linear(d, n_actions)
        self.vf_trunk, d = _mlp(n_in, hidden, activation)
        self.vf_head = torch.nn.Linear(d, 1)
        # Small initial logits: the first policy is close to uniform over the legal moves.
        torch.nn.init.normal_(self.pi_head.weight, std=0.01)
        torch.nn.init.zeros_(self.pi_head.bias)

    def raw_logits(self, features: torch.Tensor) -> torch.Tensor:
        """The policy's logits before masking."""
        return self.pi_head(self.pi_trunk(features))

    def _masked(self, batch: dict) -> dict:
        obs = batch[Columns.OBS]
        return {Columns.ACTION_DIST_INPUTS: mask_logits(self.raw_logits(obs["observation"]), obs["action_mask"])}

    def _forward(self, batch: dict, **kwargs) -> dict:
        return self._masked(batch)

    def _forward_train(self, batch: dict, **kwargs) -> dict:
        out = self._masked(batch)
        out[Columns.EMBEDDINGS] = self.vf_trunk(batch[Columns.OBS]["observation"])
        return out

    def compute_values(self, batch: dict, embeddings: Any = None) -> torch.Tensor:
        if embeddings is None:
            embeddings = self.vf_trunk(batch[Columns.OBS]["observation"])
        return self.vf_head(embeddings).squeeze(-1)
