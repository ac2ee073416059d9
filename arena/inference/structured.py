"""The one neural-policy family: an encoder per observation input, fused, and a head per part of
the move in AlphaStar's order, each masked by the game and by the parts chosen before it.

`StructuredPolicyNet` is what `arena.inference.policy_nets.build_policy` makes for every game a
network plays: board games, poker, Gymnasium tasks (prosthetics), Skirmish and StarCraft II. Every
move is an action model (`arena.envs.actions.ActionModel`, `action_model`): a structured game's
own (an action type, units by pointer, a target or a cell), and for a game of one observation
tensor a model of one part named ``action`` (a categorical, a pointer into its entity set, or a
box).

* **encoders**. A one-tensor game (input ``obs``, the architecture ``mlp``, ``conv`` or
  ``entity``) has one, read whole by the torso: the flattened tensor, a residual conv net over
  board planes ``[C, H, W]`` flattened, or the entity transformer
  (`arena.inference.entity.EntityEncoder`, its pooled embedding); with ``obs_norm`` its input is
  first normalised by running statistics (`update_obs_norm`). A structured game has one per
  observation key, each projected to ``d_model``: the entity set (``entities [N, F]`` with its
  ``entity_mask``) through the transformer (per-entity embeddings for the pointers, and their
  mean); a map ``[C, H, W]`` through a residual conv net (its feature map also feeds the spatial
  head); any other array (scalars) through a linear layer. The masks (the keys the parts name,
  ``entity_mask``, ``action_mask``) are not encoded. The encodings are concatenated and go through
  the torso MLP.
* **heads**, one per part, in the model's order, each reading the *autoregressive embedding*
  ``z``: the torso's features plus an embedding of every choice made before it (AlphaStar's
  ``autoregressive_embedding``), so the selected units know the action type and the target knows
  the selected units (a one-part move's choice feeds nothing: it has no embedding). A categorical
  part is a linear layer; a pointer scores each entity's embedding against ``z``
  (`arena.inference.entity.PointerHead`); a select part is a pointer run for up to ``max_select``
  steps with an end-of-selection logit, each step's query adding the units already chosen; a
  spatial part scores each cell of the map's feature map against ``z`` (a linear layer over the
  cells when the game shows no map of that size); a box part is a Gaussian or Beta head
  (`arena.inference.continuous`). A part's mask comes from the observation key it names, picked
  by the action type already chosen when the game gives one row per type; a choice the move does
  not use (its type does not use the part) adds nothing to ``z``.
* a **value head** on the torso's features (and the privileged vector, where the game has one,
  which only the critic reads).

``forward(inputs, privileged=None, actions=None)`` returns ``(distribution, value)``. A structured
move's distribution is a `arena.inference.distributions.Composite`, which runs the heads when it
is sampled, or along ``actions`` (teacher forcing) for the learner's log-probabilities, entropies
and KL; a one-part move's is that part's own distribution (a `MaskedCategorical`, a Gaussian or a
Beta), whose actions are plain arrays. Every one answers the same calls (`sample`, `mode`,
`log_prob`, `entropy`, `kl`, `uniform`), so the learners treat them alike.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from arena.envs.actions import ActionModel, Part
from arena.inference.continuous import BetaHead, GaussianHead
from arena.inference.distributions import Composite, MaskedCategorical, SelectDist, select_active, select_choices
from arena.inference.entity import EntityEncoder, PointerHead
from arena.inference.layers import ResBlock, mlp


class _MapEncoder(nn.Module):
    """``[B, C, H, W] -> (feature map [B, ch, H, W], vector [B, d])``."""

    def __init__(self, shape: tuple[int, ...], channels: int, blocks: int, d: int):
        super().__init__()
        c, h, w = shape
        self.conv = nn.Sequential(nn.Conv2d(c, channels, 3, padding=1), nn.ReLU(),
                                  *[ResBlock(channels) for _ in range(blocks)])
        self.proj = nn.Sequential(nn.Flatten(), nn.Linear(channels * h * w, d), nn.ReLU())

    def forward(self, x):
        fmap = self.conv(x)
        return fmap, self.proj(fmap)


def _small(layer: nn.Linear) -> nn.Linear:
    nn.init.zeros_(layer.bias)
    with torch.no_grad():
        layer.weight.mul_(0.1)  # a near-uniform first policy
    return layer


def action_model(spec: Any, arch: str) -> ActionModel:
    """Every game's move as an action model: a structured game's own (``spec.action``); for a game
    of one observation tensor, one part named ``action``: a categorical masked by the input
    ``mask``, a pointer into the entity set ``obs`` when an entity policy's actions are its
    entities (``n_actions == N``), or a box."""
    if spec.action is not None:
        return ActionModel.from_dict(spec.action)
    if spec.action_kind == "continuous":
        return ActionModel.continuous(tuple(spec.action_shape), spec.low, spec.high)
    if arch == "entity" and spec.n_actions == spec.obs_shape[0]:
        return ActionModel((Part("action", "pointer", n=int(spec.n_actions), mask="mask"),), entities="obs")
    return ActionModel.discrete(spec.n_actions, mask="mask")


class StructuredPolicyNet(nn.Module):
    """See the module docstring. ``spec.inputs`` names the observation's keys and shapes and
    ``spec.action`` the action model (`ActionModel.to_dict`)."""

    def __init__(self, spec: Any, arch: str, sizes: dict):
        super().__init__()
        self.spec, self.arch, self.sizes = spec, arch, dict(sizes)
        self.model = model = action_model(spec, arch)
        d, hidden = int(sizes["d_model"]), list(sizes["hidden"])
        ch = int(sizes["channels"])
        self.encoders = nn.ModuleDict()
        self.kinds: dict[str, str] = {}
        self.maps: dict[tuple[int, int], str] = {}  # a map's (H, W) -> its key (for spatial heads)
        if spec.action is None:
            width = self._tensor_encoder(spec, arch, sizes)
        else:
            width = self._key_encoders(spec, model, sizes)
        needs_entities = [p.name for p in model.parts if p.kind in ("pointer", "select")]
        if needs_entities and model.entities not in self.kinds:
            raise ValueError(f"{spec.game_id}: parts {needs_entities} point into {model.entities!r}, "
                             "which the observation does not have")
        self.torso = mlp([width] + hidden)
        feat = hidden[-1]
        self.heads = nn.ModuleDict()
        # A one-part move's choice feeds no later part: no embedding. A structured move's parts each have
        # one, the last one's unused: kept, so its checkpoints and seeded runs are those it always had.
        for p in model.parts:
            self.heads["to_" + p.name] = self._head(p, feat, d, ch, sizes, embed=len(model.parts) > 1)
        if spec.action is None and sizes.get("obs_norm"):
            # Running mean and variance of the inputs (a continuous-control task's observations
            # mix metres, radians and muscle forces): buffers, so they travel with the weights.
            # The trainer updates them (`update_obs_norm`); forward only reads them.
            dim = int(math.prod(spec.input_shape))
            self.register_buffer("obs_mean", torch.zeros(dim, dtype=torch.float64))
            self.register_buffer("obs_var", torch.ones(dim, dtype=torch.float64))
            self.register_buffer("obs_count", torch.zeros((), dtype=torch.float64))
        vin = feat + int(spec.privileged_dim or 0)
        self.value = nn.Sequential(nn.Linear(vin, int(sizes["value_hidden"])), nn.ReLU(),
                                   nn.Linear(int(sizes["value_hidden"]), 1))
        if sizes.get("q_head"):
            # a value per move (one categorical part: Q(state, a) for every a), beside the state's value:
            # the all-actions policy gradient reads it (`LearnerSettings.pg`)
            first = model.parts[0]
            if len(model.parts) != 1 or first.kind != "categorical":
                raise ValueError(f"{spec.game_id}: q_head needs moves of one categorical part; this game's are "
                                 f"{', '.join(p.kind for p in model.parts)}")
            self.q = nn.Sequential(nn.Linear(vin, int(sizes["value_hidden"])), nn.ReLU(),
                                   nn.Linear(int(sizes["value_hidden"]), int(first.n)))
        uses = torch.ones(model.parts[0].n if model.uses is not None else 1, len(model.parts))
        if model.uses is not None:
            for k, used in enumerate(model.uses):
                uses[k] = torch.tensor([float(p.name in used) for p in model.parts])
        self.register_buffer("uses", uses, persistent=False)

    def _tensor_encoder(self, spec: Any, arch: str, sizes: dict) -> int:
        """The one encoder of a one-tensor game (input ``obs``), read whole by the torso; its width."""
        if arch == "conv":
            c, h, w = spec.input_shape
            ch = int(sizes["channels"])
            self.encoders["of_obs"] = nn.Sequential(nn.Conv2d(c, ch, 3, padding=1), nn.ReLU(),
                                                    *[ResBlock(ch) for _ in range(int(sizes["blocks"]))], nn.Flatten())
            self.kinds["obs"] = "flat"
            return ch * h * w
        if arch == "entity":
            enc = EntityEncoder(spec.obs_shape[-1], d_model=int(sizes["d_model"]), heads=int(sizes["heads"]),
                                layers=int(sizes["layers"]))
            self.encoders["of_obs"], self.kinds["obs"] = enc, "entities"
            return enc.out_dim
        self.encoders["of_obs"], self.kinds["obs"] = nn.Flatten(), "flat"
        return int(math.prod(spec.input_shape))

    def _key_encoders(self, spec: Any, model: ActionModel, sizes: dict) -> int:
        """An encoder per observation key of a structured game, each projected to ``d_model``; the
        torso's width."""
        d, ch = int(sizes["d_model"]), int(sizes["channels"])
        masks = model.mask_keys
        for key, shape in spec.inputs:
            if key in masks:
                continue
            if key == model.entities:
                self.encoders["of_" + key] = EntityEncoder(shape[-1], d_model=d, heads=int(sizes["heads"]),
                                                   layers=int(sizes["layers"]))
                self.kinds[key] = "entities"
            elif len(shape) == 3:
                self.encoders["of_" + key] = _MapEncoder(tuple(shape), ch, int(sizes["blocks"]), d)
                self.kinds[key] = "map"
                self.maps.setdefault((int(shape[1]), int(shape[2])), key)
            else:
                self.encoders["of_" + key] = nn.Sequential(nn.Flatten(), nn.Linear(int(math.prod(shape)), d), nn.ReLU())
                self.kinds[key] = "vector"
        if not self.encoders:
            raise ValueError(f"{spec.game_id} shows no observation a policy can read (only masks)")
        return d * len(self.encoders)

    def _head(self, p: Part, feat: int, d: int, ch: int, sizes: dict, embed: bool) -> nn.Module:
        m = nn.ModuleDict()
        if p.kind == "categorical":
            m["logits"] = _small(nn.Linear(feat, p.n))
        elif p.kind in ("pointer", "select"):
            m["pointer"] = PointerHead(feat, d, d=d)
            if p.kind == "select":
                m["end"] = _small(nn.Linear(feat, 1))
                m["query"] = nn.Linear(d, feat)
        elif p.kind == "spatial":
            if tuple(p.shape) in self.maps:
                m["query"] = nn.Linear(feat, ch)
                m["bias"] = nn.Conv2d(ch, 1, 1)
            else:
                m["logits"] = _small(nn.Linear(feat, p.size))
        elif sizes.get("continuous") == "beta":
            m["dist"] = BetaHead(feat, p.size, list(p.low), list(p.high))
        else:
            m["dist"] = GaussianHead(feat, p.size, list(p.low), list(p.high),
                                     init_log_std=float(sizes.get("init_log_std", -0.5)))
        if embed:  # built after the head's own layers (the order the initial weights are drawn in)
            m["embed"] = (nn.Embedding(p.size, feat) if p.kind in ("categorical", "spatial")
                          else nn.Linear(p.size if p.kind == "box" else d, feat))
        return m

    # -- input normalisation (one-tensor games with ``obs_norm``) ---------------------------------------
    def normalise(self, obs: Tensor) -> Tensor:
        if not hasattr(self, "obs_mean"):
            return obs
        flat = obs.reshape(obs.shape[0], -1)
        std = (self.obs_var + 1e-8).sqrt().to(obs.dtype)
        return ((flat - self.obs_mean.to(obs.dtype)) / std).clamp(-10.0, 10.0).reshape(obs.shape)

    @torch.no_grad()
    def update_obs_norm(self, x: Any) -> None:
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

    # -- encoders ------------------------------------------------------------------------------------
    def encode(self, inputs: dict) -> dict:
        """The torso's features and what the heads point into: ``feat [B, F]``, ``entities
        [B, N, d]`` and their mask, and each map's feature map."""
        parts, ctx = [], {"maps": {}}
        for name, enc in self.encoders.items():
            key = name[len("of_"):]
            x = inputs[key].float()
            kind = self.kinds[key]
            if kind == "entities":
                present = inputs["entity_mask"].bool() if "entity_mask" in inputs else \
                    torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
                per_entity, pooled = enc(x, present)
                ctx["entities"], ctx["present"] = per_entity, present
                parts.append(pooled)
            elif kind == "map":
                fmap, vec = enc(x)
                ctx["maps"][key] = fmap
                parts.append(vec)
            else:
                parts.append(enc(x))
        ctx["feat"] = self.torso(torch.cat(parts, -1))
        return ctx

    def forward(self, inputs: dict, mask: Any = None, privileged: Any = None, entity_mask: Any = None,
                actions: dict | None = None, with_q: bool = False):
        """``(distribution, value [B])`` (``with_q``: and the value of every move [B, n], a net with a
        ``q_head``). `inputs`: the dict of `policy_inputs`; a one-tensor game's
        may also be passed as ``(obs, mask, entity_mask=...)``. A structured move's distribution is a
        `Composite` (conditioned on `actions` where given: teacher forcing); a one-tensor game's is
        its one part's own (`MaskedCategorical`, `Gaussian`, `Beta`), its actions plain arrays."""
        tensor = self.spec.action is None
        if not isinstance(inputs, dict):
            if not tensor:
                raise TypeError(f"{self.spec.game_id}: a structured policy reads a dict of inputs "
                                f"({', '.join(k for k, _ in self.spec.inputs)}), got {type(inputs).__name__}")
            inputs = {"obs": inputs, "mask": mask, "entity_mask": entity_mask}
        if tensor:
            inputs = {k: v for k, v in inputs.items() if v is not None}
            inputs["obs"] = self.normalise(inputs["obs"])
        ctx = self.encode(inputs)
        if tensor:
            p = self.model.parts[0]
            dist = self._part(p, self.heads["to_" + p.name], ctx["feat"], ctx, self._mask(p, inputs, None))
        else:
            dist = Composite(lambda a, g, greedy: self._chain(ctx, inputs, a, g, greedy), self.model.names)
            if actions is not None:
                dist.condition(actions)
        feat = ctx["feat"]
        vin = feat
        if self.spec.privileged_dim:  # the critic's extra input; zeros where the caller has none
            extra = privileged if privileged is not None else feat.new_zeros(feat.shape[0], self.spec.privileged_dim)
            vin = torch.cat([feat, extra], -1)
        if with_q:
            return dist, self.value(vin).squeeze(-1), self.q(vin)
        return dist, self.value(vin).squeeze(-1)

    # -- heads -----------------------------------------------------------------------------------------
    def _mask(self, p: Part, inputs: dict, kind: Tensor | None) -> Tensor | None:
        m = inputs.get(p.mask) if p.mask else None
        if m is not None:
            m = m.bool()
            if m.dim() == 3:
                rows = kind if kind is not None else torch.zeros(m.shape[0], dtype=torch.long, device=m.device)
                m = m[torch.arange(m.shape[0], device=m.device), rows]
        return m

    def _chain(self, ctx: dict, inputs: dict, given: dict | None, gen: Any, greedy: bool):
        model = self.model
        z = ctx["feat"]
        B = z.shape[0]
        kind = None
        actions, dists, used = {}, {}, {}
        for i, p in enumerate(model.parts):
            head = self.heads["to_" + p.name]
            mask = self._mask(p, inputs, kind)
            use = self.uses[kind, i] if kind is not None else z.new_ones(B)
            a_given = given.get(p.name) if given is not None else None  # a part not given is drawn
            if p.kind == "select":
                d, a, emb = self._select(p, head, z, ctx, mask, a_given, gen, greedy)
            else:
                d = self._part(p, head, z, ctx, mask)
                if a_given is not None:
                    a = a_given if p.kind == "box" else a_given.long()
                else:
                    a = d.mode() if greedy else d.sample(gen)
                emb = self._embed(p, head, a, ctx) if "embed" in head else None
            if i == 0 and model.uses is not None:
                kind = a.long()
                use = z.new_ones(B)
            actions[p.name], dists[p.name], used[p.name] = a, d, use
            if emb is not None:
                z = z + use.unsqueeze(-1) * emb
        return actions, dists, used

    @staticmethod
    def _embed(p: Part, head: nn.Module, a: Tensor, ctx: dict) -> Tensor:
        """What a chosen (non-select) part adds to the autoregressive embedding."""
        if p.kind == "pointer":
            return head["embed"](ctx["entities"][torch.arange(a.shape[0], device=a.device), a])
        return head["embed"](a.float() if p.kind == "box" else a)

    def _part(self, p: Part, head: nn.Module, z: Tensor, ctx: dict, mask: Tensor | None) -> Any:
        """The distribution of one (non-select) part given the autoregressive embedding `z`."""
        if p.kind == "box":
            return head["dist"](z)
        if p.kind == "pointer":
            legal = ctx["present"] if mask is None else mask & ctx["present"]
            logits = head["pointer"](z, ctx["entities"], legal)
        elif p.kind == "spatial" and "query" in head:
            fmap = ctx["maps"][self.maps[tuple(p.shape)]]
            q = head["query"](z)
            logits = (torch.einsum("bchw,bc->bhw", fmap, q) / math.sqrt(q.shape[-1])
                      + head["bias"](fmap).squeeze(1)).flatten(1)
        else:
            logits = head["logits"](z)
        return MaskedCategorical(logits, mask)

    def _select(self, p: Part, head: nn.Module, z: Tensor, ctx: dict, mask: Tensor | None, given: Tensor | None,
                gen: Any, greedy: bool):
        """Up to ``max_select`` pointer steps with an end-of-selection choice (index N)."""
        keys, present = ctx["entities"], ctx["present"]
        B, N = present.shape
        S = p.max_select
        legal = present if mask is None else mask & present
        chosen = torch.zeros(B, N, dtype=torch.bool, device=z.device)
        count = z.new_zeros(B, 1)
        total = keys.new_zeros(B, keys.shape[-1])
        done = torch.zeros(B, dtype=torch.bool, device=z.device)
        out = torch.full((B, S), -1, dtype=torch.long, device=z.device)
        choices = select_choices(given.long(), N) if given is not None else None
        all_logits, all_masks = [], []
        rows = torch.arange(B, device=z.device)
        for s in range(S):
            query = z + head["query"](total / count.clamp(min=1))
            can = legal & ~chosen
            end_ok = (torch.full((B, 1), s > 0, device=z.device)) | ~can.any(-1, keepdim=True)
            logits = torch.cat([head["pointer"](query, keys, can), head["end"](query)], -1)
            step_mask = torch.cat([can, end_ok], -1)
            all_logits.append(logits)
            all_masks.append(step_mask)
            if choices is not None:
                c = choices[:, s]
            else:
                dist = MaskedCategorical(logits, step_mask)
                c = dist.mode() if greedy else dist.sample(gen)
            take = ~done & (c < N)
            idx = c.clamp(max=N - 1)
            out[:, s] = torch.where(take, c, out[:, s])
            chosen = chosen | (nn.functional.one_hot(idx, N).bool() & take.unsqueeze(-1))
            total = total + keys[rows, idx] * take.unsqueeze(-1).to(keys.dtype)
            count = count + take.unsqueeze(-1).to(count.dtype)
            done = done | (c >= N)
        steps = MaskedCategorical(torch.stack(all_logits, 1), torch.stack(all_masks, 1))
        actions = given.long() if given is not None else out
        emb = head["embed"](total / count.clamp(min=1)) if "embed" in head else None
        return SelectDist(steps, select_active(actions), N), actions, emb
