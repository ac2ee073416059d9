"""`policy:<checkpoint>`: a trained neural policy as an agent.

Spec: ``policy:<folder>`` (a checkpoint folder with ``policy.pt``, such as a run's ``best`` or
``latest``), options ``greedy=true`` (the most probable legal move; default: sample),
``temperature=1.0``, ``threads=N`` (set this process's torch threads; 1 suits worker processes).

It reads the game's structured view (`Observation.raw`: the observation tensor and the action
mask), so it plays any game whose spaces match the ones it was trained on, anywhere an agent
plays: ``arena play``, leagues, human play, evaluation. An illegal move is never chosen: the
mask sets illegal actions to probability 0. ``act_batch`` answers many observations with one
forward pass (`arena.match.pool` gives it the moves of many concurrent matches at once).

Loaded networks are cached per process by path and modification time, so a league that builds
the agent for every match loads the weights once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from arena.agents.base import BaseAgent
from arena.envs.observation import Observation
from arena.errors import AgentSpecError

_CACHE: dict[tuple[str, int], tuple[Any, Any]] = {}


def load_cached(path: str | Path, expect: Any = None) -> tuple[Any, Any]:
    """(net, meta) of a checkpoint, loaded once per (file, modification time) in this process."""
    from arena.inference.policy_nets import load_policy, policy_file

    f = policy_file(path)
    try:
        key = (str(f.resolve()), f.stat().st_mtime_ns)
    except OSError:
        return load_policy(path, expect)  # raises the one-line error
    hit = _CACHE.get(key)
    if hit is None:
        hit = _CACHE[key] = load_policy(path)
        if len(_CACHE) > 64:  # a long league with many snapshots: keep the newest
            _CACHE.pop(next(iter(_CACHE)))
    if expect is not None:
        spec = hit[1].spec
        if spec.game_id != expect.game_id or not spec.same_interface(expect):
            raise AgentSpecError(f"policy {path} was trained for {spec.describe()}; this game is {expect.describe()}")
    return hit


class PolicyAgent(BaseAgent):
    def __init__(self, net: Any, meta: Any = None, *, greedy: bool = False, temperature: float = 1.0,
                 seed: int | None = None, path: str | None = None, explore: float = 0.0):
        import torch

        if not 0.0 <= explore < 1.0:
            raise ValueError(f"explore must be in [0, 1), got {explore}")
        #: Training rollouts: the chance that a move's first part (its only one, or a structured move's
        #: order type) is drawn uniformly from its legal choices instead of from the policy; the rest of
        #: the move follows the policy given it, and the log-probability returned is the mixture's (the
        #: behaviour policy's), which V-trace's importance weights correct for. Explored moves draw from
        #: the agent's one generator (not a seat's own, `seat_match`): a training batch plays the same for
        #: the same pairings and seed, but a match is no longer the same beside other matches as alone.
        self.explore = float(explore)

        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature} (use greedy=true for the best move)")
        if temperature != 1.0 and net.spec.action_kind == "structured":
            raise ValueError(f"temperature is for discrete moves; {net.spec.game_id} has structured ones "
                             "(use greedy=true or the default sampling)")
        self.net, self.meta, self.path = net, meta, path
        self.greedy, self.temperature = bool(greedy), float(temperature)
        self._torch = torch
        self._gen = torch.Generator()
        self._seats: dict[tuple[int, int], Any] = {}
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        self._gen.manual_seed(int(seed) if seed is not None else int.from_bytes(os.urandom(4), "little"))
        self._seats.clear()

    def seat_match(self, core: Any, seat: int, seed: int | None) -> None:
        """A match starts with this (batched) agent in `seat` (called by the match engine): its sampled
        moves there draw from a generator of their own seeded with `seed`, as a per-match agent reset
        with it would, so a match plays the same in lock step beside any others as alone (moves of one
        action, the discrete kind; structured and continuous moves draw from the agent's one generator)."""
        if len(self._seats) > 4096:  # seats of matches long over (a core's id is reused by later ones)
            self._seats.clear()
        gen = self._torch.Generator()
        gen.manual_seed(int(seed) if seed is not None else int.from_bytes(os.urandom(4), "little"))
        self._seats[(id(core), seat)] = gen

    # -- moves --------------------------------------------------------------------------------
    def act(self, observation: Observation) -> Any:
        return self.act_batch([observation])[0]

    def act_batch(self, observations: Sequence[Observation]) -> list[Any]:
        """One forward pass for every observation; the moves in the same order."""
        return self.decide(observations)[0]

    def decide(self, observations: Sequence[Observation]) -> tuple[list[Any], dict]:
        """The moves, and what a learner keeps of them: the inputs the network read (a dict of
        ``[B, ...]`` tensors, `arena.inference.policy_nets.policy_inputs`), the actions as the
        network's arrays (a dict of them for a structured move), their log-probabilities and the value
        estimates (``[B]`` tensors)."""
        torch = self._torch
        from arena.inference.policy_nets import policy_inputs
        from arena.inference.trees import tree_stack, tree_torch

        spec = self.net.spec
        x = tree_torch(tree_stack([policy_inputs(o.raw, o.player, spec) for o in observations]))
        with torch.no_grad():
            dist, value = self.net(x)
            if self.greedy:
                a = dist.mode()
            else:
                if self.temperature != 1.0 and hasattr(dist, "logits"):
                    from arena.inference.policy_nets import MaskedCategorical

                    dist = MaskedCategorical(dist.logits / self.temperature, x.get("mask"))
                gens = [self._seats.get((id(o.core), o.player)) for o in observations] if self._seats else None
                if self.explore > 0 and spec.action_kind in ("discrete", "structured"):
                    a, logp = self._explored(dist)
                    return self._moves(a, len(observations)), {"inputs": x, "action": a, "logp": logp,
                                                               "value": value}
                if gens and all(g is not None for g in gens) and spec.action_kind == "discrete":
                    probs = dist.probs  # each row from its match's generator, exactly as a one-row batch draws
                    a = torch.cat([torch.multinomial(probs[i:i + 1], 1, generator=g).squeeze(-1)
                                   for i, g in enumerate(gens)])
                else:
                    a = dist.sample(self._gen)
            logp = dist.log_prob(a)
        return self._moves(a, len(observations)), {"inputs": x, "action": a, "logp": logp, "value": value}

    @staticmethod
    def rows(x: dict) -> list[tuple]:
        """What `decide` kept, one ``(inputs, action, logp, value)`` of numpy arrays and floats a move:
        the row a learner's recorder appends (the league's actors and single-agent PPO's alike)."""
        from arena.inference.trees import tree_map, tree_row

        numpy = lambda t: t.numpy()  # noqa: E731
        inputs, act = tree_map(numpy, x["inputs"]), tree_map(numpy, x["action"])
        logp, val = x["logp"].tolist(), x["value"].tolist()
        return [(tree_row(inputs, k), tree_row(act, k), logp[k], val[k]) for k in range(len(logp))]

    def _moves(self, a: Any, n: int) -> list[Any]:
        """The network's action arrays as the game's moves, one per observation."""
        from arena.inference.trees import tree_map, tree_row

        kind = self.net.spec.action_kind
        if kind == "discrete":
            return [int(v) for v in a.tolist()]
        if kind == "structured":
            arrays = tree_map(lambda t: t.numpy(), a)
            return [self.net.model.from_arrays(tree_row(arrays, i)) for i in range(n)]
        return [row for row in a.numpy().astype(np.float32)]

    def _explored(self, dist: Any) -> tuple[Any, Any]:
        """A draw from the behaviour policy mu = (1 - e) pi + e uniform(legal) on the move's first part
        (`explore`), the rest from pi given it; returns the actions and log mu of each move."""
        torch, e = self._torch, self.explore
        structured = not hasattr(dist, "logits")
        if structured:
            dist.sample(self._gen)  # builds the first part's distribution
            first = dist.names[0]
            head = dist.parts[first]
        else:
            head = dist
        probs = head.probs
        legal = head.mask.bool() if head.mask is not None else torch.ones_like(probs, dtype=torch.bool)
        uniform = legal.float() / legal.float().sum(-1, keepdim=True).clamp(min=1)
        mixed = (1 - e) * probs + e * uniform
        pick = torch.multinomial(mixed, 1, generator=self._gen).squeeze(-1)
        if not structured:
            return pick, mixed.gather(-1, pick.unsqueeze(-1)).squeeze(-1).log()
        a = dist.sample_given({first: pick}, self._gen)
        logp = dist.log_prob(a)
        lp_first = dist.parts[first].log_probs.gather(-1, pick.unsqueeze(-1)).squeeze(-1)
        mu_first = mixed.gather(-1, pick.unsqueeze(-1)).squeeze(-1)
        return a, logp - lp_first + mu_first.log()


def _factory(core, seed, positional, **opts):
    import torch

    from arena.inference.policy_nets import spec_from_core

    if not positional:
        raise AgentSpecError("policy agents need a checkpoint: policy:<folder>, e.g. policy:runs/c4/best")
    threads = opts.pop("threads", None)  # this process's torch threads; left as they are unless given
    if threads is not None and torch.get_num_threads() != int(threads):
        torch.set_num_threads(int(threads))
    if isinstance(opts.get("greedy"), str):  # greedy=true / greedy=false (an option's text)
        opts["greedy"] = opts["greedy"].lower() == "true"
    expect = spec_from_core(core) if core is not None else None
    net, meta = load_cached(positional, expect)
    return PolicyAgent(net, meta, seed=opts.pop("seed", seed), path=positional, **opts)
