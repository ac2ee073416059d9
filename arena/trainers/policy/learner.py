"""The Learner of the neural-policy trainer: a policy network, its optimizer, the frozen imitation
policy it is kept near, and ``step(batch)``.

A `RolloutBatch` is time-major: column b is one trained seat of one match, row t its t-th own
move (an opponent's moves are the environment). Rewards are the seat's final return on its last
move (the board and card games here reward at the end), so ``discounts`` is gamma on every move
but the last, where it is 0; no bootstrap value is needed.

`step` is one of two losses (config ``algo``), each with UPGO, an entropy bonus and the KL to the
imitation policy (SCC) added:

* ``ppo``: GAE advantages on the behaviour values, PPO's clipped surrogate for ``epochs`` passes
  over minibatches of moves, value regression on the GAE returns;
* ``vtrace``: IMPALA's off-policy targets from the current network's values and the importance
  weights between the current policy and the behaviour policy that played (the actors may be a
  version behind), policy gradient on the V-trace advantages, value regression on ``v_s``.

UPGO (AlphaStar) is a policy-gradient term on ``G_upgo - V`` (truncated importance weights),
which learns from the moves whose continuation went better than expected. On the V-trace path the
return's bootstrap and the baseline are both the learner's current values, as AlphaStar's
pseudocode has them; PPO's follows the behaviour values, as its GAE does. The KL to the imitation
policy is AlphaStar's ``KL(pi_IL || pi)`` unless ``kl_direction`` says otherwise. The anchor (the
magnet) is any frozen network of the policy's shape, or `UniformMagnet`: the uniform policy over the
legal moves, which needs no network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from arena.inference.distributions import normalized_entropy, uniform_like
from arena.inference.trees import tree_columns, tree_rows, tree_to
from arena.trainers.common import rl


@dataclass
class RolloutBatch:
    #: What the network read: a dict of ``[T, B, ...]`` tensors, for every game
    #: (`arena.inference.policy_nets.policy_inputs`: a one-tensor game's ``obs`` and ``mask``, a
    #: structured game's own keys).
    inputs: dict
    #: ``[T, B]`` (discrete) or ``[T, B, *action_shape]``, or a dict of those (structured moves).
    actions: Any
    behaviour_logp: Any  # [T, B]
    behaviour_value: Any  # [T, B]
    rewards: Any  # [T, B]
    discounts: Any  # [T, B]
    valid: Any  # [T, B] bool
    privileged: Any = None  # [T, B, P]
    #: Weights version that played each column (for the actors' lag).
    version: Any = None  # [B]

    @property
    def moves(self) -> int:
        return int(self.valid.sum())

    @property
    def columns(self) -> int:
        return int(self.valid.shape[1])


@dataclass
class Played:
    """One column of a batch as it was played: a trained seat's moves in a match (the league's actors,
    `arena.trainers.policy.actors`) or an env slot's segment of episodes (single-agent PPO,
    `arena.trainers.policy.segments`), with the rewards and discounts its learner gives each move."""

    #: What the network read, a dict of ``[L, ...]`` arrays (`policy_inputs`); the actions ``[L, ...]``
    #: (a dict of them for a structured move).
    inputs: dict
    actions: Any
    logp: Any  # [L]
    value: Any  # [L]
    rewards: Any  # [L]
    #: gamma where the next move continues the episode, 0 where the move ended it.
    discounts: Any  # [L]
    privileged: Any = None  # [L, P]
    #: Weights version that played it (None: not tracked).
    version: int | None = None


def batch_of(columns: list, steps: int | None = None) -> "RolloutBatch":
    """The time-major `RolloutBatch` of `columns` (`Played`, or None: a lost column, its moves invalid),
    ``steps`` rows (default: the longest column). Padding: every action legal (a one-tensor game's
    mask True), nothing else present."""
    import numpy as np
    import torch

    from arena.inference.trees import tree_map, tree_pad, tree_torch

    first = next(c for c in columns if c is not None)
    T = steps if steps is not None else max(len(c.logp) for c in columns if c is not None)
    B = len(columns)
    empty = lambda tree: tree_map(lambda x: x[:0], tree)  # noqa: E731 - a lost column
    inputs = tree_pad([empty(first.inputs) if c is None else c.inputs for c in columns], T, fill={"mask": True})
    actions = tree_pad([empty(first.actions) if c is None else c.actions for c in columns], T)
    priv = None if first.privileged is None else np.zeros((T, B, first.privileged.shape[1]), dtype=np.float32)
    logp, val, rew, disc = (np.zeros((T, B), dtype=np.float32) for _ in range(4))
    valid = np.zeros((T, B), dtype=bool)
    for b, c in enumerate(columns):
        if c is None:
            continue
        n = len(c.logp)
        logp[:n, b], val[:n, b], rew[:n, b], disc[:n, b] = c.logp, c.value, c.rewards, c.discounts
        valid[:n, b] = True
        if priv is not None:
            priv[:n, b] = c.privileged
    versions = [None if c is None else c.version for c in columns]
    tt = torch.from_numpy
    return RolloutBatch(tree_torch(inputs), tree_torch(actions), tt(logp), tt(val), tt(rew), tt(disc), tt(valid),
                        None if priv is None else tt(priv),
                        None if None in versions else torch.tensor(versions, dtype=torch.long))


@dataclass
class LearnerSettings:
    """The neural-policy learner's settings: a training config's ``learner:`` section
    (`arena.trainers.common.base.TrainerConfig`)."""

    #: ppo: GAE and the clipped surrogate (or the loss named below); dppo: the same loop with DPPO's trust
    #: region on the exact divergence of each move's distributions (``loss: dppo_exact_kl``, set for it:
    #: a box's Gaussian or Beta, a categorical); vtrace: IMPALA's off-policy correction.
    algo: Literal["ppo", "dppo", "vtrace"] = "ppo"
    #: algo ppo: the surrogate, by name from the losses every learner shares
    #: (`arena.trainers.common.losses.LOSSES`: ``ppo_clip``, the DPPO trust regions ``dppo_binary_tv`` and
    #: ``dppo_binary_kl``, ``drpo``), on each move's log-probability (a structured move's: the sum of its
    #: parts'), and its keyword settings (``ppo_clip``'s range defaults to `clip`).
    loss: str = "ppo_clip"
    loss_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Passes over each batch, in minibatches of this many moves.
    epochs: int = 4
    minibatch: int = 128
    gamma: float = 1.0
    lam: float = 0.95
    #: PPO's clip range.
    clip: float = 0.2
    #: V-trace's truncation levels (IMPALA's rho-bar and c-bar).
    rho_bar: float = 1.0
    c_bar: float = 1.0
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    #: UPGO's policy-gradient term (AlphaStar), added to the main term with this weight.
    upgo_coef: float = 0.5
    #: Self-imitation (Oh et al. 2018): ``-log pi(a) max(R - V, 0)`` with the move's own discounted return,
    #: no importance weight, added with this weight (0: off). It learns a rare move that paid off (one an
    #: explorer chose, `explore`) at full strength, where the importance-weighted terms scale it by pi/mu.
    sil_coef: float = 0.0
    #: "policy_to_anchor" KL(pi || pi_IL) (mode-seeking: the policy may sharpen inside the imitation
    #: policy's support) or "anchor_to_policy" KL(pi_IL || pi) (mass-covering).
    kl_direction: Literal["policy_to_anchor", "anchor_to_policy"] = "anchor_to_policy"
    #: The entropy bonus per part divided by the log of that part's number of choices, as AlphaStar
    #: does, so parts of different sizes weigh alike: "legal" (the choices its mask leaves), "head"
    #: (the head's size, the published pseudocode's ``log(logits.shape[-1])``), or None (raw entropy).
    entropy_norm: Literal["legal", "head"] | None = None
    max_grad_norm: float = 1.0
    #: V-trace's policy term: "sampled" (the move played, weighted by its V-trace advantage) or
    #: "all_actions" (every legal move at once, each weighted by its advantage under the net's value of
    #: every move, ``sum_a pi(a) (Q(s, a) - sum_b pi(b) Q(s, b))``: no sampled move's noise; the Q head,
    #: ``sizes: {q_head: true}``, learns ``r + gamma v_s'`` of the move played, V-trace's target).
    pg: Literal["sampled", "all_actions"] = "sampled"
    #: ppo/dppo: log each update's exact KL between the policy before and after it (``kl_update``: the
    #: KL-proximal measure of DPPO's papers; one more forward pass over the batch). The ppo trainer's on.
    update_kl: bool = False
    #: PPO only: stop the epochs once a minibatch's approximate KL to the behaviour policy passes
    #: 1.5 x this (Spinning Up's and Stable-Baselines3's early stop); None: all epochs.
    target_kl: float | None = None

    #: The keys a training config had at its top level before they moved into its ``learner:`` section.
    FLAT_KEYS: ClassVar[tuple[str, ...]] = ("algo", "epochs", "minibatch", "gamma", "lam", "clip", "rho_bar", "c_bar",
                                            "value_coef", "entropy_coef", "upgo_coef", "kl_direction",
                                            "max_grad_norm", "target_kl")

    def __post_init__(self):
        if self.epochs < 1 or self.minibatch < 1:
            raise ValueError("epochs >= 1 and minibatch >= 1 are required")
        from arena.trainers.common.losses import DIVERGENCE_LOSSES, LOSSES, TOPK_LOSSES

        if self.algo == "dppo" and self.loss == "ppo_clip":
            self.loss = "dppo_exact_kl"
        if self.algo == "dppo" and self.loss not in DIVERGENCE_LOSSES:
            raise ValueError(f"learner.algo: dppo bounds the exact divergence of each move's distributions; "
                             f"its loss is {', '.join(sorted(DIVERGENCE_LOSSES))}, not {self.loss}")
        if self.loss in DIVERGENCE_LOSSES and self.algo != "dppo":
            raise ValueError(f"learner.loss {self.loss} reads the divergence the dppo loop measures: set "
                             "learner.algo: dppo")
        move_losses = sorted(set(LOSSES) - TOPK_LOSSES)
        if self.loss not in move_losses:
            why = " (it reads a language model's top-K log-probs)" if self.loss in TOPK_LOSSES else ""
            raise ValueError(f"learner.loss {self.loss!r} is not one of {', '.join(move_losses)}{why}")
        if self.loss != "ppo_clip" and self.algo == "vtrace":
            raise ValueError(f"learner.loss is PPO's surrogate: set learner.algo: ppo to use {self.loss} "
                             f"(algo {self.algo} has its own policy gradient)")
        if self.pg == "all_actions" and self.algo != "vtrace":
            raise ValueError("learner.pg: all_actions is V-trace's policy term: set learner.algo: vtrace")
        import inspect

        known = set(inspect.signature(LOSSES[self.loss]).parameters) - {"logp", "old_logp", "adv", "mask", "max_len"}
        unknown = sorted(set(self.loss_kwargs) - known)
        if unknown:
            raise ValueError(f"learner.loss_kwargs: {unknown[0]!r} is not a setting of {self.loss} "
                             f"(its settings: {', '.join(sorted(known))})")
        if not 0.0 < self.gamma <= 1.0 or not 0.0 <= self.lam <= 1.0:
            raise ValueError("gamma must be in (0, 1] and lam in [0, 1]")
        if self.sil_coef < 0:
            raise ValueError(f"sil_coef must be >= 0, got {self.sil_coef}")


class UniformMagnet:
    """The uniform policy over each move's legal actions as the KL anchor: logits of zeros, masked as
    the policy's (discrete moves only). It has no weights."""

    def to(self, device: str) -> "UniformMagnet":
        return self

    def eval(self) -> "UniformMagnet":
        return self

    def parameters(self) -> list:
        return []


class PolicyLearner:
    def __init__(self, net: Any, settings: LearnerSettings, *, lr: float = 3e-4, anchor: Any = None,
                 device: str = "cpu"):
        import torch

        self.torch = torch
        self.net = net.to(device)
        self.anchor = anchor.to(device).eval() if anchor is not None else None
        if self.anchor is not None:
            for p in self.anchor.parameters():
                p.requires_grad_(False)
        self.s = settings
        from arena.trainers.common.losses import get_loss

        self._loss_fn = get_loss(settings.loss)
        self.device = device
        self.opt = self._adam(lr)
        #: Updates applied (the weights' version).
        self.version = 0
        #: Called with (passes done, epochs) after each pass over a batch (a trainer's progress display).
        self.on_epoch: Any = None

    def set_lr(self, lr: float) -> None:
        for g in self.opt.param_groups:
            g["lr"] = lr

    def _adam(self, lr: float):
        # fused: one kernel for every parameter (about 20% of a small network's step on CPU)
        return self.torch.optim.Adam(self.net.parameters(), lr=lr, eps=1e-5, fused=True)

    def reset_optimizer(self) -> None:
        self.opt = self._adam(self.opt.param_groups[0]["lr"])

    # -- one update ---------------------------------------------------------------------------
    def step(self, batch: RolloutBatch, kl_coef: float = 0.0, generator: Any = None) -> dict[str, float]:
        """One update on `batch`; returns the mean of each loss term and diagnostics."""
        torch = self.torch
        s = self.s
        dev = self.device
        b = _to(batch, dev)
        B = b.valid.shape[1]
        bootstrap = torch.zeros(B, device=dev)
        stats: dict[str, list[float]] = {}
        self.net.train()
        if s.algo in ("ppo", "dppo"):
            # the weights the batch was played with (the actors play the learner's, PPO's case): what the
            # dppo trust region measures each move's divergence from, and the update's KL after it
            self._before = self._snapshot() if self.snapshots and (s.update_kl or s.algo == "dppo") else None
            with torch.no_grad():
                adv, ret = rl.gae_tb(b.rewards, b.behaviour_value, bootstrap, b.discounts, s.lam)
                # PPO's UPGO follows the behaviour values, as its GAE does (one batch, fixed targets)
                upgo_target = rl.upgo_returns(b.rewards, b.behaviour_value, bootstrap, b.discounts)
            flat = b.valid.reshape(-1).nonzero().squeeze(-1)
            a_flat = adv.reshape(-1)[flat]
            a_norm = (a_flat - a_flat.mean()) / (a_flat.std() + 1e-8) if a_flat.numel() > 1 else a_flat
            upgo_adv = (upgo_target - b.behaviour_value).reshape(-1)[flat]
            sil_adv = (rl.self_imitation_advantages(b.rewards, b.behaviour_value, b.discounts).reshape(-1)[flat]
                       if s.sil_coef > 0 else None)
            n = flat.numel()
            passes, stopped = 0, False
            for _ in range(s.epochs):
                perm = torch.randperm(n, generator=generator)
                for i in range(0, n, s.minibatch):
                    j = perm[i:i + s.minibatch]
                    idx = flat[j]
                    self._minibatch(b, idx, stats, kl_coef, adv=a_norm[j], ret=ret.reshape(-1)[idx],
                                    upgo=upgo_adv[j], raw_adv=a_flat[j], sil=None if sil_adv is None else sil_adv[j])
                    if s.target_kl is not None and stats["approx_kl"][-1] > 1.5 * s.target_kl:
                        stopped = True
                        break
                passes += 1
                if self.on_epoch is not None:
                    self.on_epoch(passes, s.epochs)
                if stopped:
                    break
            stats["epochs"] = [float(passes)]
            if self._before is not None:
                if s.update_kl:
                    stats["kl_update"] = [self._update_kl(b, flat)]
                self._before = None
        else:  # vtrace: whole columns, so the recursion sees each trajectory in order
            for e in range(s.epochs):
                perm = torch.randperm(B, generator=generator)
                cols = max(1, s.minibatch * B // max(1, b.moves))  # about `minibatch` moves a pass
                for i in range(0, B, cols):
                    self._vtrace_minibatch(b, perm[i:i + cols], stats, kl_coef)
                if self.on_epoch is not None:
                    self.on_epoch(e + 1, s.epochs)
        self.version += 1
        self.net.eval()
        out = {k: float(sum(v) / len(v)) for k, v in stats.items()}
        out["moves"] = float(b.moves)
        if batch.version is not None:
            out["lag"] = float((self.version - 1 - batch.version.float()).mean())
        return out

    #: Whether this learner can keep its weights' copy for an update (`_snapshot`); a sharded one cannot.
    snapshots: bool = True
    _before: dict | None = None

    def _snapshot(self) -> dict:
        """The net's parameters and buffers as they are (detached copies), for `_before_dist`."""
        return {k: v.detach().clone() for k, v in self.net.state_dict(keep_vars=True).items()}

    def _before_dist(self, b: RolloutBatch, idx: Any, act: Any):
        """The distribution of the weights of `_snapshot` (before this update) on the moves `idx`."""
        from torch.func import functional_call

        inputs, priv, _ = self._rows(b, idx)
        with self.torch.no_grad():
            dist, _ = functional_call(self.net, self._before, (inputs, None, priv), {"actions": act})
        return dist

    def _update_kl(self, b: RolloutBatch, flat: Any) -> float:
        """The mean over the batch's moves of KL(before || after) this update: how far one update moved
        the policy (the KL-proximal measure of DPPO's papers), exact for every distribution here."""
        total, n = 0.0, 0
        with self.torch.no_grad():
            for i in range(0, flat.numel(), 4096):
                idx = flat[i:i + 4096]
                dist, _, act = self._forward(b, idx)[:3]
                total += float(self._before_dist(b, idx, act).kl(dist).sum())
                n += idx.numel()
        return total / max(n, 1)

    @staticmethod
    def _rows(b: RolloutBatch, idx: Any) -> tuple:
        """(inputs, privileged, actions) of the flattened moves `idx` (indices into T*B)."""
        priv = b.privileged.reshape(-1, b.privileged.shape[-1])[idx] if b.privileged is not None else None
        return tree_rows(b.inputs, idx), priv, tree_rows(b.actions, idx)

    def _forward(self, b: RolloutBatch, idx: Any):
        """The current network on the flattened moves `idx` (indices into T*B): its distribution
        (conditioned on the moves played, for a structured move), values, the actions, and the
        anchor's distribution along the same moves (and, for the all-actions term, every move's
        value: then a 5-tuple)."""
        inputs, priv, act = self._rows(b, idx)
        q = None
        if self.s.pg == "all_actions":
            dist, value, q = self.net(inputs, None, priv, actions=act, with_q=True)
        else:
            dist, value = self.net(inputs, None, priv, actions=act)
        anchor = self.anchor if isinstance(self.anchor, UniformMagnet) else None
        if self.anchor is not None and anchor is None:
            with self.torch.no_grad():
                anchor, _ = self.anchor(inputs, None, priv, actions=act)
        return (dist, value, act, anchor) if q is None else (dist, value, act, anchor, q)

    def _terms(self, dist, anchor, valid=None):
        """(entropy, KL to the anchor) as means over the counted moves, through the distribution's own
        methods, whatever the move's kind (one categorical, a structured move's parts along the chain
        played, a box): the entropy normalised per part as ``entropy_norm`` says, the KL in
        ``kl_direction``. A uniform magnet is the distribution's own uniform counterpart (the uniform
        policy over each part's legal choices)."""
        torch = self.torch
        h = normalized_entropy(dist, self.s.entropy_norm)
        w = torch.ones(h.shape, device=h.device) if valid is None else valid.reshape(h.shape).to(h.dtype)
        n = w.sum().clamp(min=1)
        ent = (h * w).sum() / n
        if anchor is None:  # measured (and logged) while its coefficient anneals to 0 as well
            return ent, ent.new_zeros(())
        if isinstance(anchor, UniformMagnet):
            anchor = uniform_like(dist)
        kl = anchor.kl(dist) if self.s.kl_direction == "anchor_to_policy" else dist.kl(anchor)
        return ent, (kl * w).sum() / n

    def _diagnostics(self, dist, logp, old_logp, adv, valid=None) -> dict[str, float]:
        """What explains a stall, measured on the minibatch (no gradient): each action part's entropy
        normalised by its legal choices (``entropy/<part>``, 0 = one choice certain, 1 = uniform: a part
        the policy never explores reads 0), the KL from the behaviour policy that played to the current
        one (``kl_behaviour``, the k3 estimator), and the advantages' mean and spread."""
        torch = self.torch
        out: dict[str, float] = {}
        with torch.no_grad():
            ok = torch.ones_like(logp, dtype=torch.bool) if valid is None else valid.reshape(logp.shape).bool()
            if ok.any():
                log_ratio = (logp.detach() - old_logp)[ok]
                out["kl_behaviour"] = float((log_ratio.exp() - 1 - log_ratio).mean())
                a = adv.detach().reshape(logp.shape)[ok]
                out["adv_mean"], out["adv_std"] = float(a.mean()), float(a.std()) if a.numel() > 1 else 0.0
            for name in getattr(dist, "names", ()) if getattr(dist, "parts", None) else ():
                used = (dist.used[name] > 0) & ok.reshape(-1)
                if used.any():
                    part = dist.parts[name]
                    h = normalized_entropy(part, "legal")
                    if hasattr(part, "active"):  # a selection: summed over its steps; per step
                        h = h / part.active.sum(-1).clamp(min=1)
                    if h.dim() > 1:  # a continuous part: per component; its mean
                        h = h.reshape(h.shape[0], -1).mean(-1)
                    out[f"entropy/{name}"] = float(h[used].mean())
        return out

    def _part(self, n: int) -> tuple[slice, bool]:
        """This process's share of a minibatch of ``n`` rows, and whether it is empty (all of it here;
        a data-parallel learner, `arena.trainers.parallel.policy`, takes a slice per rank)."""
        return slice(None), False

    def _apply(self, loss, stats: dict, weight: float = 1.0, **terms: float) -> None:
        """Backward, clip, step; ``weight`` is this share's part of the minibatch (1 here)."""
        torch = self.torch
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.s.max_grad_norm)
        self.opt.step()
        terms["grad_norm"] = float(gn)
        terms["loss"] = float(loss.detach())
        for k, v in terms.items():
            if math.isfinite(v):
                stats.setdefault(k, []).append(v)

    def _surrogate(self, logp, old, adv, divergence=None):
        """PPO's policy term: the named loss of `arena.trainers.common.losses` over the minibatch's moves
        (`divergence`: each move's exact KL from its behaviour distribution, for dppo)."""
        kwargs = dict(self.s.loss_kwargs)
        if divergence is not None:
            kwargs["divergence"] = divergence
        if self.s.loss == "ppo_clip":
            kwargs.setdefault("clip_low", self.s.clip)
            kwargs.setdefault("clip_high", self.s.clip)
        loss, stats = self._loss_fn(logp, old, adv, self.torch.ones_like(logp, dtype=self.torch.bool), **kwargs)
        if "approx_kl" not in stats:  # PPO's early stop (target_kl) reads it whatever the loss
            with self.torch.no_grad():
                lr = logp.detach() - old
                stats["approx_kl"] = float((self.torch.expm1(lr) - lr).mean())
        return loss, stats

    def _minibatch(self, b, idx, stats, kl_coef, *, adv, ret, upgo, raw_adv, sil) -> None:
        s = self.s
        n = len(idx)
        part, empty = self._part(n)
        idx, adv, ret, upgo, raw_adv = idx[part], adv[part], ret[part], upgo[part], raw_adv[part]
        weight = 0.0 if empty else len(idx) / n  # the losses are means over the moves
        dist, value, act, anchor = self._forward(b, idx)
        logp = dist.log_prob(act)
        old = b.behaviour_logp.reshape(-1)[idx]
        divergence = None
        if s.algo == "dppo":
            with self.torch.no_grad():
                divergence = self._before_dist(b, idx, act).kl(dist)
        pg, pst = self._surrogate(logp, old, adv, divergence)
        rho = self.torch.exp(logp.detach() - old).clamp(max=s.rho_bar)
        upgo_loss, _ = rl.policy_gradient_loss(logp, rho * upgo)
        vloss, vst = rl.value_loss(value, ret)
        ent, kl = self._terms(dist, anchor)
        loss = pg + s.upgo_coef * upgo_loss + s.value_coef * vloss - s.entropy_coef * ent + kl_coef * kl
        extra = {}
        if sil is not None:  # self-imitation, where it is on
            sil = sil[part]
            sil_loss, _ = rl.policy_gradient_loss(logp, sil)
            loss = loss + s.sil_coef * sil_loss
            extra = {"sil_loss": float(sil_loss.detach()), "sil_share": float((sil > 0).float().mean())}
        self._apply(loss, stats, weight, pg_loss=float(pg.detach()), upgo_loss=float(upgo_loss.detach()), **extra,
                    value_loss=float(vloss.detach()), entropy=float(ent.detach()), kl_anchor=float(kl.detach()),
                    **{f"loss/{k}" if k in ("kl", "tv") else k: v for k, v in pst.items()},
                    explained_variance=vst["explained_variance"], **self._diagnostics(dist, logp, old, raw_adv))

    def _vtrace_minibatch(self, b, cols, stats, kl_coef) -> None:
        torch = self.torch
        s = self.s
        T = b.valid.shape[0]
        total = b.valid[:, cols].sum().clamp(min=1)
        part, empty = self._part(len(cols))
        cols = cols[part]
        weight = 0.0 if empty else float(b.valid[:, cols].sum() / total)  # the losses are means over valid moves
        sub = RolloutBatch(tree_columns(b.inputs, cols), tree_columns(b.actions, cols),
                           *(x[:, cols] if x is not None else x for x in (b.behaviour_logp, b.behaviour_value,
                                                                          b.rewards, b.discounts, b.valid,
                                                                          b.privileged)))
        Bc = len(cols)
        idx = torch.arange(T * Bc, device=b.valid.device)
        dist, value, act, anchor, *q = self._forward(sub, idx)
        logp = dist.log_prob(act).reshape(T, Bc)
        # padded steps read padded moves, whose log-probability may be -inf: keep them out of every term
        logp = torch.where(sub.valid, logp, torch.zeros((), dtype=logp.dtype, device=logp.device))
        values = value.reshape(T, Bc)
        valid = sub.valid.float()
        # padded steps: the discount is 0 and the reward 0, so they never reach a real step's target
        vt = rl.vtrace(sub.behaviour_logp, logp.detach(), sub.rewards, values.detach() * valid,
                       torch.zeros(Bc, device=valid.device), sub.discounts, rho_bar=s.rho_bar, c_bar=s.c_bar,
                       lam=s.lam)
        pg, _ = rl.policy_gradient_loss(logp, vt.pg_advantages, sub.valid)
        qloss = None
        if q:  # the all-actions term: every legal move weighted by its advantage under Q (`pg`)
            qv = q[0]
            pg, _ = rl.all_actions_policy_loss(dist.probs, qv.detach(), sub.valid.reshape(-1))
            target = rl.action_value_targets(sub.rewards, sub.discounts, vt.vs).reshape(-1)
            played = qv.gather(-1, act.reshape(-1, 1).long()).squeeze(-1)
            qloss, _ = rl.value_loss(played, target, sub.valid.reshape(-1))
        # UPGO as AlphaStar's pseudocode has it: the learner's current values are both the return's
        # bootstrap and the baseline, weighted by the clipped importance ratios
        with torch.no_grad():
            upgo_target = rl.upgo_returns(sub.rewards, values.detach() * valid, torch.zeros(Bc, device=valid.device),
                                          sub.discounts)
        upgo_loss, _ = rl.policy_gradient_loss(logp, (upgo_target - values.detach()) * vt.rhos, sub.valid)
        vloss, vst = rl.value_loss(values, vt.vs, sub.valid)
        ent, kl = self._terms(dist, anchor, sub.valid.reshape(-1))
        loss = pg + s.upgo_coef * upgo_loss + s.value_coef * vloss - s.entropy_coef * ent + kl_coef * kl
        n = valid.sum().clamp(min=1)
        extra = {}
        if qloss is not None:
            loss = loss + s.value_coef * qloss
            extra["q_loss"] = float(qloss.detach())
        if s.sil_coef > 0:  # self-imitation, where it is on
            sil = rl.self_imitation_advantages(sub.rewards, values.detach() * valid, sub.discounts)
            sil_loss, _ = rl.policy_gradient_loss(logp, sil, sub.valid)
            loss = loss + s.sil_coef * sil_loss
            extra = {"sil_loss": float(sil_loss.detach()), "sil_share": float(((sil > 0) & sub.valid).sum() / n)}
        self._apply(loss, stats, weight, pg_loss=float(pg.detach()), upgo_loss=float(upgo_loss.detach()), **extra,
                    value_loss=float(vloss.detach()), entropy=float(ent.detach()), kl_anchor=float(kl.detach()),
                    rho_mean=float((vt.rhos * valid).sum() / n), explained_variance=vst["explained_variance"],
                    **self._diagnostics(dist, logp.reshape(-1), sub.behaviour_logp.reshape(-1),
                                        vt.pg_advantages.reshape(-1), sub.valid.reshape(-1)))

    # -- state ----------------------------------------------------------------------------------
    def optimizer_names(self) -> list[str]:
        return [n for n, _ in self.net.named_parameters()]

    def state_dict(self) -> dict:
        """Network, optimizer (keyed by parameter name: any parallel setting loads it) and version."""
        from arena.trainers.common.checkpoints import named_optimizer_state

        return {"net": self.net.state_dict(), "opt": named_optimizer_state(self.opt.state_dict(), self.optimizer_names()),
                "version": self.version}

    def load_state_dict(self, state: dict) -> None:
        from arena.trainers.common.checkpoints import NAMED_OPTIMIZER, native_optimizer_state

        self.net.load_state_dict(state["net"])
        opt = state["opt"]
        if opt.get("format") == NAMED_OPTIMIZER:
            opt = native_optimizer_state(opt, self.optimizer_names(), self.opt.param_groups)
        self.opt.load_state_dict(opt)  # a checkpoint written before names: torch's own index form
        self.version = int(state.get("version", 0))

    def close(self) -> None:
        """Nothing to release (a parallel learner lets go of its ranks)."""


def _to(b: RolloutBatch, device: str) -> RolloutBatch:
    if device == "cpu":
        return b
    return RolloutBatch(tree_to(b.inputs, device), tree_to(b.actions, device),
                        *(x.to(device) if x is not None and hasattr(x, "to") else x for x in
                          (b.behaviour_logp, b.behaviour_value, b.rewards, b.discounts, b.valid, b.privileged,
                           b.version)))
