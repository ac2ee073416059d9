"""The parameter layout of a sharded model: units (a decoder layer, say) flat in one buffer, each rank owning a shard."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from arena.trainers.parallel.pipeline.stages import _llama_parts


@dataclass(frozen=True)
class Unit:
    """The parameters gathered together (one decoder layer, say), flat, padded to a multiple of the ranks."""

    name: str
    params: tuple[str, ...]  # names (a tied parameter once, under its first name)
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]  # of each parameter in the unit's flat
    numel: int  # real elements (the flat has world_size * shard, the tail is padding)
    shard: int  # elements each rank owns
    base: int  # where the unit starts in the layout's flat buffer

    def span(self, world_size: int) -> slice:
        return slice(self.base, self.base + world_size * self.shard)

    def owned(self, rank: int) -> slice:
        return slice(self.base + rank * self.shard, self.base + (rank + 1) * self.shard)


@dataclass(frozen=True)
class Layout:
    """Every unit's place in one flat buffer, ``[unit][rank][shard]``: rank r owns ``unit.owned(r)`` of each."""

    units: tuple[Unit, ...]
    world_size: int
    total: int  # elements of the flat buffer

    @property
    def shard_total(self) -> int:
        """Elements one rank owns (over all units)."""
        return sum(u.shard for u in self.units)


def _unit_modules(model) -> list[tuple[str, list[Any]]]:
    body = _llama_parts(model)
    out = [("model.embed_tokens", [body.embed_tokens])]
    out += [(f"model.layers.{i}", [layer]) for i, layer in enumerate(body.layers)]
    out.append(("model.norm+lm_head", [body.norm, model.lm_head]))
    return out


def module_units(model) -> list[tuple[str, list[Any]]]:
    """The units of any module that is not a causal LM: each direct child that holds parameters, a
    container with no forward of its own (a ``ModuleDict`` of encoders or heads) replaced by its children,
    so every unit is a module that runs (FSDP2 shards a unit around its forward).

    (A policy network: its encoders, torso, each head, the value head; parameters of the module itself go
    into ``rest``.)
    """
    from torch import nn

    units: list[tuple[str, list[Any]]] = []

    def add(name: str, mod: Any) -> None:
        if type(mod).forward is nn.Module.forward:  # a container: its children run, not it
            for child_name, child in mod.named_children():
                add(f"{name}.{child_name}", child)
        elif any(True for _ in mod.parameters()):
            units.append((name, [mod]))

    for name, child in model.named_children():
        add(name, child)
    return units


def make_layout(model, world_size: int, units: list[tuple[str, list[Any]]] | None = None) -> Layout:
    """The units of ``model`` (default: a Llama-style causal LM's embedding, each decoder layer, and the
    final norm with the head; or the ``(name, modules)`` given), flat and sharded.

    A parameter in none of them (there are none in a Hugging Face Llama) goes into a last unit ``rest``.
    """
    names = {id(p): n for n, p in model.named_parameters()}  # first name of each parameter
    seen: set[int] = set()
    groups = []
    for uname, modules in (units if units is not None else _unit_modules(model)):
        ps = []
        for mod in modules:
            for p in mod.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    ps.append(p)
        groups.append((uname, ps))
    rest = [p for n, p in model.named_parameters() if id(p) not in seen]
    if rest:
        groups.append(("rest", rest))
    units, base = [], 0
    for uname, ps in groups:
        if not ps:
            continue
        offs, off = [], 0
        for p in ps:
            offs.append(off)
            off += p.numel()
        shard = max(1, math.ceil(off / world_size))
        units.append(Unit(uname, tuple(names[id(p)] for p in ps), tuple(tuple(p.shape) for p in ps), tuple(offs),
                          off, shard, base))
        base += world_size * shard
    return Layout(tuple(units), world_size, base)
