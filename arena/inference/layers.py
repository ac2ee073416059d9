"""The small building blocks the policy networks share: a residual conv block and an MLP."""

from __future__ import annotations

import torch
from torch import nn


class ResBlock(nn.Module):
    """Two 3x3 convolutions with a skip connection, ReLU after each."""

    def __init__(self, c: int):
        super().__init__()
        self.a = nn.Conv2d(c, c, 3, padding=1)
        self.b = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return torch.relu(x + self.b(torch.relu(self.a(x))))


def mlp(sizes: list[int]) -> nn.Module:
    """Linear + ReLU for each consecutive pair of `sizes`."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers += [nn.Linear(sizes[i], sizes[i + 1]), nn.ReLU()]
    return nn.Sequential(*layers)
