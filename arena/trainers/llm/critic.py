"""A BPCO-style critic: a value head bounded to the reward range, Monte-Carlo value
targets, length-adaptive GAE over a player's turns, and a privileged input.

The critic reads the turn's prompt plus information hidden from the policy
(the opponent's card in Kuhn Poker, the other side's values in negotiation),
which the game adapter provides as ``privileged``; the policy never sees it.
Values are bounded with a scaled tanh to [low, high] (the training rewards'
range), targets are the Monte-Carlo return of the trajectory, and policy
advantages are the (unnormalised) GAE advantages with
lambda = 1 - 1/(alpha * L), L the number of the player's turns.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from arena.trainers.common.advantages import bounded_value, gae, length_adaptive_lambda


class ValueHead(nn.Module):
    def __init__(self, hidden: int, low: float = -1.5, high: float = 1.0):
        super().__init__()
        self.proj = nn.Linear(hidden, 1)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)
        self.low, self.high = low, high

    @staticmethod
    def text(prompt: str, privileged: str | None) -> str:
        return prompt if not privileged else f"{prompt}\n[critic only] {privileged}"

    def values(self, model: Any, tokenizer: Any, texts: Sequence[str]) -> torch.Tensor:
        """V(s) for each text: the head on the backbone's last hidden state at the final token."""
        old = tokenizer.padding_side
        tokenizer.padding_side = "left"
        try:
            enc = tokenizer(list(texts), return_tensors="pt", padding=True)
        finally:
            tokenizer.padding_side = old
        device = self.proj.weight.device
        attn = enc["attention_mask"].to(device)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)  # left padding must not shift positions: V is batch-independent
        out = model(input_ids=enc["input_ids"].to(device), attention_mask=attn, position_ids=pos,
                    output_hidden_states=True)
        h = out.hidden_states[-1][:, -1, :].float()
        return bounded_value(self.proj(h).squeeze(-1), self.low, self.high)

    def batched_values(self, model: Any, tokenizer: Any, texts: Sequence[str], chunk: int = 256) -> list[float]:
        """V of many texts in a few batched forward passes (no grad)."""
        out: list[float] = []
        with torch.no_grad():
            for i in range(0, len(texts), chunk):
                out += self.values(model, tokenizer, texts[i:i + chunk]).tolist()
        return out

    @staticmethod
    def turn_advantages(values: Sequence[float], ret: float, alpha: float) -> list[float]:
        """GAE advantages of one player's turns from their values V(s_k) and the trajectory's return."""
        v = torch.tensor(list(values), dtype=torch.float32)
        rewards = torch.zeros(len(v))
        rewards[-1] = ret
        lam = float(length_adaptive_lambda(len(v), alpha))
        adv, _ = gae(rewards, v, gamma=1.0, lam=lam)
        return adv.tolist()

    def value_loss(self, model: Any, tokenizer: Any, texts: Sequence[str], returns: Sequence[float]) -> torch.Tensor:
        """Mean squared error of V(text) against the Monte-Carlo return."""
        v = self.values(model, tokenizer, texts)
        target = torch.tensor(list(returns), dtype=v.dtype, device=v.device)
        return torch.mean((v - target) ** 2)
