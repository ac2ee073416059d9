"""SCC's first stage: behaviour cloning from league replays of chosen players.

Replays keep actions, not tensors: `arena.match.verify.observed_moves` re-simulates each one
through its game to recover the observation tensor and action mask every chosen player saw
before each of its moves. The matches (not the moves) are split into training and validation
sets, so no position of a validation game is trained on; training minimises the cross-entropy
of the teacher's move under the masked policy (and, with a small weight, the value head's error
on the final outcome, a warm critic for RL); it stops when the validation loss has not improved
for ``patience`` epochs and keeps the best epoch's weights. That policy is the KL anchor of the RL
stage.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from arena.replays.format import Replay


@dataclass
class Demonstrations:
    obs: np.ndarray  # [N, *obs_shape]
    mask: np.ndarray | None  # [N, A] bool
    actions: np.ndarray  # [N]
    outcome: np.ndarray  # [N]: the final return of the player who moved
    match: np.ndarray  # [N]: which replay each move came from
    privileged: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.actions)

    def take(self, idx: np.ndarray) -> "Demonstrations":
        return Demonstrations(self.obs[idx], None if self.mask is None else self.mask[idx], self.actions[idx],
                              self.outcome[idx], self.match[idx],
                              None if self.privileged is None else self.privileged[idx])


def demonstrations(replays: Sequence[tuple[Replay, Sequence[str]]], players: set[str] | None, spec: Any,
                   reward_scale: float = 1.0) -> Demonstrations:
    """The moves of the named league players in `replays` (each with its seats' league names), with
    the views re-simulated (as the network reads them: `arena.inference.policy_nets.policy_input` for
    `spec`). A replay's agent specs match too (replays from outside a league)."""
    from arena.inference.policy_nets import policy_input
    from arena.match.verify import observed_moves

    obs, masks, acts, outs, which = [], [], [], [], []
    for i, (rep, names) in enumerate(replays):
        specs = rep.header.get("agents") or []
        seats = {s for s in range(len(names)) if players is None or names[s] in players
                 or (s < len(specs) and specs[s] in players)}
        if not seats:
            continue
        for seat, raw, action in observed_moves(rep, seats):
            x, m = policy_input(raw, seat, spec)
            obs.append(x)
            masks.append(m)
            acts.append(action)
            outs.append(float(rep.result["returns"][seat]) * reward_scale)
            which.append(i)
    if not acts:
        raise ValueError(f"no moves of {sorted(players) if players else 'any player'} in {len(replays)} replays")
    mask = np.stack(masks).astype(bool) if masks[0] is not None else None
    return Demonstrations(np.stack(obs).astype(np.float32), mask, np.asarray(acts), np.asarray(outs, np.float32),
                          np.asarray(which))


def split(demos: Demonstrations, val_fraction: float, seed: int) -> tuple[Demonstrations, Demonstrations]:
    """Training and validation moves, split by match."""
    rng = np.random.default_rng(seed)
    ids = np.unique(demos.match)
    rng.shuffle(ids)
    n_val = max(1, int(round(len(ids) * val_fraction)))
    if len(ids) < 2:
        raise ValueError("imitation needs at least two matches (one to train on, one to validate)")
    val = np.isin(demos.match, ids[:n_val])
    return demos.take(np.nonzero(~val)[0]), demos.take(np.nonzero(val)[0])


def behaviour_cloning(net: Any, train: Demonstrations, val: Demonstrations, *, epochs: int, batch_size: int, lr: float,
                      weight_decay: float, patience: int, value_coef: float, seed: int,
                      log: Callable[[int, dict], None] | None = None) -> dict[str, Any]:
    """Train `net` in place; returns the best epoch's figures (its weights are loaded back)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    tt = torch.from_numpy

    def tensors(d: Demonstrations):
        return (tt(d.obs), None if d.mask is None else tt(d.mask), tt(d.actions).long(), tt(d.outcome))

    X, M, A, Z = tensors(train)
    Xv, Mv, Av, Zv = tensors(val)

    def evaluate() -> tuple[float, float]:
        net.eval()
        with torch.no_grad():
            losses, correct = [], 0
            for i in range(0, len(Av), 4096):
                dist, value = net(Xv[i:i + 4096], None if Mv is None else Mv[i:i + 4096])
                losses.append(float(-dist.log_prob(Av[i:i + 4096]).sum()))
                correct += int((dist.mode() == Av[i:i + 4096]).sum())
        return sum(losses) / len(Av), correct / len(Av)

    best = {"epoch": -1, "val_loss": float("inf")}
    best_state = copy.deepcopy(net.state_dict())
    stale = 0
    for epoch in range(epochs):
        net.train()
        perm = torch.randperm(len(A), generator=g)
        tot, correct = 0.0, 0
        for i in range(0, len(A), batch_size):
            j = perm[i:i + batch_size]
            dist, value = net(X[j], None if M is None else M[j])
            nll = -dist.log_prob(A[j])
            loss = nll.mean() + value_coef * 0.5 * ((value - Z[j]) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            tot += float(nll.detach().sum())
            correct += int((dist.mode().detach() == A[j]).sum())
        vloss, vacc = evaluate()
        line = {"il/epoch": epoch + 1, "il/train_loss": tot / len(A), "il/train_acc": correct / len(A),
                "il/val_loss": vloss, "il/val_acc": vacc}
        if log is not None:
            log(epoch + 1, line)
        if vloss < best["val_loss"] - 1e-4:
            best = {"epoch": epoch + 1, "val_loss": vloss, "val_acc": vacc, "train_loss": tot / len(A),
                    "train_acc": correct / len(A)}
            best_state = copy.deepcopy(net.state_dict())
            stale = 0
        else:
            stale += 1
            if stale >= patience:
                break
    net.load_state_dict(best_state)
    net.eval()
    best["epochs_run"] = epoch + 1
    best["train_moves"], best["val_moves"] = len(A), len(Av)
    return best
