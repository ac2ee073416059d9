"""Policies built from a game's spaces: an encoder per observation key, fused, and a head per part
of the move in AlphaStar's order, each masked by the game and by the parts chosen before it.

`StructuredPolicyNet` is what `arena.inference.policy_nets.build_policy` makes for a game with
structured moves (`arena.envs.actions.ActionModel`) or several observation inputs:

* **encoders**, one per observation key: the entity set (``entities [N, F]`` with its
  ``entity_mask``) through the transformer of `arena.inference.entity.EntityEncoder` (per-entity
  embeddings for the pointers, and their mean); a map ``[C, H, W]`` through a residual conv net
  (its feature map also feeds the spatial head); any other array (scalars) through an MLP. The
  masks (the keys the parts name, ``entity_mask``, ``action_mask``) are not encoded. The encodings
  are concatenated and go through the torso MLP.
* **heads**, one per part, in the model's order, each reading the *autoregressive embedding*
  ``z``: the torso's features plus an embedding of every choice made before it (AlphaStar's
  ``autoregressive_embedding``), so the selected units know the action type and the target knows
  the selected units. A categorical part is a linear layer; a pointer scores each entity's
  embedding against ``z`` (`arena.inference.entity.PointerHead`); a select part is a pointer run
  for up to ``max_select`` steps with an end-of-selection logit, each step's query adding the
  units already chosen; a spatial part scores each cell of the map's feature map against ``z``
  (a linear layer over the cells when the game shows no map of that size); a box part is a
  Gaussian or Beta head. A part's mask comes from the observation key it names, picked by the
  action type already chosen when the game gives one row per type; a choice the move does not use
  (its type does not use the part) adds nothing to ``z``.
* a **value head** on the torso's features (and the privileged vector, where the game has one).

``forward(inputs, privileged=None, actions=None)`` returns ``(Composite, value)``: the composite
(`arena.inference.distributions.Composite`) runs the heads when it is sampled, or along
``actions`` (teacher forcing) for the learner's log-probabilities, entropies and KL.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from arena.envs.actions import ActionModel, Part
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


class StructuredPolicyNet(nn.Module):
    """See the module docstring. ``spec.inputs`` names the observation's keys and shapes and
    ``spec.action`` the action model (`ActionModel.to_dict`)."""

    def __init__(self, spec: Any, arch: str, sizes: dict):
        super().__init__()
        self.spec, self.arch, self.sizes = spec, arch, dict(sizes)
        self.model = model = ActionModel.from_dict(spec.action)
        d, hidden = int(sizes["d_model"]), list(sizes["hidden"])
        ch = int(sizes["channels"])
        masks = model.mask_keys
        self.encoders = nn.ModuleDict()
        self.kinds: dict[str, str] = {}
        self.maps: dict[tuple[int, int], str] = {}  # a map's (H, W) -> its key (for spatial heads)
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
        needs_entities = [p.name for p in model.parts if p.kind in ("pointer", "select")]
        if needs_entities and model.entities not in self.kinds:
            raise ValueError(f"{spec.game_id}: parts {needs_entities} point into {model.entities!r}, "
                             "which the observation does not have")
        self.torso = mlp([d * len(self.encoders)] + hidden)
        feat = hidden[-1]
        self.heads = nn.ModuleDict()
        for p in model.parts:
            self.heads["to_" + p.name] = self._head(p, feat, d, ch, sizes)
        vin = feat + int(spec.privileged_dim or 0)
        self.value = nn.Sequential(nn.Linear(vin, int(sizes["value_hidden"])), nn.ReLU(),
                                   nn.Linear(int(sizes["value_hidden"]), 1))
        uses = torch.ones(model.parts[0].n if model.uses is not None else 1, len(model.parts))
        if model.uses is not None:
            for k, used in enumerate(model.uses):
                uses[k] = torch.tensor([float(p.name in used) for p in model.parts])
        self.register_buffer("uses", uses, persistent=False)

    def _head(self, p: Part, feat: int, d: int, ch: int, sizes: dict) -> nn.Module:
        m = nn.ModuleDict()
        if p.kind == "categorical":
            m["logits"] = _small(nn.Linear(feat, p.n))
            m["embed"] = nn.Embedding(p.n, feat)
        elif p.kind == "pointer":
            m["pointer"] = PointerHead(feat, d, d=d)
            m["embed"] = nn.Linear(d, feat)
        elif p.kind == "select":
            m["pointer"] = PointerHead(feat, d, d=d)
            m["end"] = _small(nn.Linear(feat, 1))
            m["query"] = nn.Linear(d, feat)
            m["embed"] = nn.Linear(d, feat)
        elif p.kind == "spatial":
            if tuple(p.shape) in self.maps:
                m["query"] = nn.Linear(feat, ch)
                m["bias"] = nn.Conv2d(ch, 1, 1)
            else:
                m["logits"] = _small(nn.Linear(feat, p.size))
            m["embed"] = nn.Embedding(p.size, feat)
        else:
            from arena.inference.continuous import BetaHead, GaussianHead

            if sizes.get("continuous") == "beta":
                m["dist"] = BetaHead(feat, p.size, list(p.low), list(p.high))
            else:
                m["dist"] = GaussianHead(feat, p.size, list(p.low), list(p.high),
                                         init_log_std=float(sizes.get("init_log_std", -0.5)))
            m["embed"] = nn.Linear(p.size, feat)
        return m

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
                actions: dict | None = None):
        if not isinstance(inputs, dict):
            raise TypeError(f"{self.spec.game_id}: a structured policy reads a dict of inputs "
                            f"({', '.join(k for k, _ in self.spec.inputs)}), got {type(inputs).__name__}")
        ctx = self.encode(inputs)
        dist = Composite(lambda a, g, greedy: self._chain(ctx, inputs, a, g, greedy), self.model.names)
        if actions is not None:
            dist.condition(actions)
        feat = ctx["feat"]
        vin = feat
        if self.spec.privileged_dim:
            extra = privileged if privileged is not None else feat.new_zeros(feat.shape[0], self.spec.privileged_dim)
            vin = torch.cat([feat, extra], -1)
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
                if p.kind == "box":
                    d = head["dist"](z)
                else:
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
                    d = MaskedCategorical(logits, mask)
                if a_given is not None:
                    a = a_given if p.kind == "box" else a_given.long()
                else:
                    a = d.mode() if greedy else d.sample(gen)
                if p.kind == "pointer":
                    emb = head["embed"](ctx["entities"][torch.arange(B, device=z.device), a])
                elif p.kind == "box":
                    emb = head["embed"](a.float())
                else:
                    emb = head["embed"](a)
            if i == 0 and model.uses is not None:
                kind = a.long()
                use = z.new_ones(B)
            actions[p.name], dists[p.name], used[p.name] = a, d, use
            z = z + use.unsqueeze(-1) * emb
        return actions, dists, used

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
        emb = head["embed"](total / count.clamp(min=1))
        return SelectDist(steps, select_active(actions), N), actions, emb
