"""The neural-policy learner on several processes: ``parallel: {mode: odc | fsdp}`` in an ``scc`` or ``ppo`` config.

:class:`~arena.trainers.policy.learner.PolicyLearner`'s step is data parallel here: every rank
runs the same loop over the same shuffled minibatches (the generator's state travels with the
batch) and takes its share of each minibatch -- a contiguous slice of the moves (PPO) or of
the trajectories (V-trace) -- with its loss weighted by that share (moves, or valid moves), so
the weighted gradients sum to the one-process minibatch gradient. The sum happens in the
engine, with the parameters and the optimizer state sharded:

* ``odc``: :class:`~arena.trainers.parallel.sharded.odc.ODCSharded` with one unit per child module
  of the network (torso, heads, normaliser): the units gathered on demand, the gradients
  reduced and Adam applied to the shards once per minibatch;
* ``fsdp``: FSDP2's ``fully_shard`` on each child module and the root, the baseline.

Clipping is by the global norm, and the loss terms every rank reports are summed with the same
weights, so every rank sees the same ``approx_kl`` and PPO's ``target_kl`` early stop ends the
epochs on all of them at once. A rank whose share of a minibatch is empty runs one move with
weight 0 (FSDP2's collectives need every rank's forward and backward).

Rank 0 keeps the network the trainer and its actors use (``learner.net``) and the anchor;
the policy networks are small, so each step sends their whole state (weights and the
observation normaliser's statistics) with the batch, and the new weights come back after
the step. Whatever the trainer does to ``learner.net`` between steps (an exploiter reset to
the imitation weights, a branch from the main agent, a resumed checkpoint) is what the next
step starts from. The optimizer state is saved by parameter name, as the language-model
learner's (:mod:`arena.trainers.parallel.learner`), so a checkpoint moves between settings.
"""

from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Any

from arena.trainers.parallel.learner import Ranks, ShardedEngine, _torch_threads
from arena.trainers.policy.learner import PolicyLearner, UniformMagnet

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.parallel.config import ParallelConfig
    from arena.trainers.parallel.launch import RankInfo
    from arena.trainers.policy.learner import LearnerSettings, RolloutBatch

MODES = ("odc", "fsdp")


class DataParallelPolicyLearner(PolicyLearner):
    """One rank's PolicyLearner: its share of each minibatch, the engine's reduction and sharded Adam."""

    snapshots = False  # its weights are shards: no whole copy for dppo's divergence or the update's KL

    def __init__(self, net, settings: "LearnerSettings", *, lr: float, anchor=None, ps: "ParallelConfig",
                 info: "RankInfo"):
        from arena.trainers.llm.learner import LearnerSettings as StepSettings
        from arena.trainers.parallel.sharded.layout import module_units

        super().__init__(net, settings, lr=lr, anchor=anchor, device=info.device)
        self.info, self.ps = info, ps
        self.template = copy.deepcopy(net)  # for an anchor that arrives later
        # the engine's AdamW with no weight decay and the learner's eps is the learner's Adam
        step = StepSettings(lr=lr, weight_decay=0.0, grad_clip=settings.max_grad_norm)
        self.engine = ShardedEngine(self.net, step, ps, info, units=module_units(self.net), eps=1e-5)
        self.net = self.engine.eng.module
        self.opt = self.engine.opt

    # -- the hooks of PolicyLearner's loop ----------------------------------------------------
    def _part(self, n: int) -> tuple[slice, bool]:
        W, r = self.info.world_size, self.info.rank
        a, b = n * r // W, n * (r + 1) // W
        if a == b:
            return slice(0, 1), True  # one move with weight 0: the collectives need every rank
        return slice(a, b), False

    def _forward(self, b, idx):
        ensure = getattr(self.engine.eng, "ensure_all", None)
        if ensure is not None:
            ensure()  # ODC: parameters of the network itself (not in a child) are gathered here
        return super()._forward(b, idx)

    def _apply(self, loss, stats: dict, weight: float = 1.0, **terms: float) -> None:
        def compute():
            (loss * weight).backward()
            mine = {k: v * weight for k, v in terms.items() if math.isfinite(v)}
            return float(loss.detach()) * weight, mine

        out = self.engine.eng.run_step(compute)
        for k, v in out.stats.items():
            stats.setdefault(k, []).append(float(v))

    # -- one step, as every rank runs it --------------------------------------------------------
    def serve_step(self, net_state, anchor_state, batch: "RolloutBatch", kl_coef: float, gen_state, lr: float,
                   reset: bool, version: int, generator=None) -> dict[str, float]:
        import torch

        self.engine.push(net_state, broadcast=False)
        if anchor_state == "uniform":
            self.anchor = UniformMagnet()
        elif anchor_state is not None:
            if self.anchor is None:
                self.anchor = copy.deepcopy(self.template).eval()
                for p in self.anchor.parameters():
                    p.requires_grad_(False)
            self.anchor.load_state_dict(anchor_state)
        else:
            self.anchor = None
        if reset:
            self.opt.state.clear()
        self.set_lr(lr)
        self.version = version
        if generator is None and gen_state is not None:
            generator = torch.Generator()
            generator.set_state(gen_state)
        return self.step(batch, kl_coef, generator)


class PolicyServed:
    """A serving rank's part of one neural-policy learner (see :func:`arena.trainers.parallel.learner.serve`)."""

    def __init__(self, info, recipe, settings, lr, ps):
        import torch

        torch.set_num_threads(ps.threads)
        with torch.random.fork_rng(devices=[]):
            net = _build(recipe)  # its weights come with every step
        self.learner = DataParallelPolicyLearner(net, settings, lr=lr, ps=ps, info=info)

    def serve(self, op: str, args: tuple) -> None:
        from arena.trainers.parallel.launch import ParallelError

        if op == "pstep":
            self.learner.serve_step(*args)
            self.learner.engine.pull()
        elif op == "poptimizer":
            self.learner.engine.optimizer_pull()
        elif op == "pload_optimizer":
            self.learner.engine.optimizer_push(None)
        else:  # pragma: no cover - rank 0 sends only the above
            raise ParallelError(f"unknown command {op!r} from rank 0")

    def close(self) -> None:
        self.learner.engine.close()


def _recipe(net) -> Any:
    """What a serving rank needs to build the same network (its class is made at run time, so the
    network itself does not pickle): the policy spec, the architecture and the sizes, or the module."""
    if all(hasattr(net, k) for k in ("spec", "arch", "sizes")):
        return ("policy_net", net.spec, net.arch, dict(net.sizes))
    return ("module", net)


def _build(recipe) -> Any:
    if recipe[0] == "policy_net":
        from arena.inference.policy_nets import build_policy

        _, spec, arch, sizes = recipe
        return build_policy(spec, arch, **sizes)
    return recipe[1]


class ParallelPolicyLearner:
    """Rank 0's neural-policy learner over N ranks, with :class:`PolicyLearner`'s interface.

    ``net`` (the trainer's and the actors' network) and ``anchor`` stay here and are what the
    trainer reads and changes; each :meth:`step` sends them with the batch and loads the new
    weights into ``net`` after it.
    """

    def __init__(self, net, settings: "LearnerSettings", *, lr: float = 3e-4, anchor=None, device: str = "cpu",
                 ps: "ParallelConfig", key: str = "policy"):
        from arena.errors import ConfigError

        if ps.mode not in MODES:
            raise ConfigError(f"parallel.mode: {ps.mode} is for the language-model learner; the neural-policy "
                              f"learner takes one of {', '.join(MODES)}")
        if device != "cpu":
            raise ConfigError(f"parallel: the neural-policy learner runs its parallel step on the CPU for now, got "
                              f"device {device!r}")
        self.net, self.anchor, self.s, self.device = net, anchor, settings, device
        self.ps, self.key = ps, key
        self.version = 0
        self._lr, self._reset = lr, False
        self.closed = False
        self.ranks = Ranks.acquire(ps, "gloo")
        try:
            self.ranks.send(("init", key, PolicyServed, (_recipe(net), settings, lr, ps)))
            self.inner = DataParallelPolicyLearner(copy.deepcopy(net), settings, lr=lr, ps=ps, info=self.ranks.info)
        except BaseException:
            self.ranks._abandon()
            raise

    # -- PolicyLearner's interface ----------------------------------------------------------------
    def set_lr(self, lr: float) -> None:
        self._lr = lr

    def reset_optimizer(self) -> None:
        self._reset = True  # the next step starts every rank's shards from a fresh Adam

    def step(self, batch: "RolloutBatch", kl_coef: float = 0.0, generator: Any = None) -> dict[str, float]:
        net_state = {k: v.detach().cpu() for k, v in self.net.state_dict().items()}
        anchor_state = ("uniform" if isinstance(self.anchor, UniformMagnet)  # no weights: named, not sent
                        else self.anchor.state_dict() if self.anchor is not None else None)
        gen_state = generator.get_state() if generator is not None else None
        args = (net_state, anchor_state, batch, kl_coef, gen_state, self._lr, self._reset, self.version)
        self.ranks.send(("pstep", self.key, *args))
        with _torch_threads(self.ps.threads):
            out = self.ranks.guard(self.inner.serve_step, *args, generator)
            state = self.ranks.guard(self.inner.engine.pull)
        self.net.load_state_dict(state)
        self._reset = False
        self.version = self.inner.version
        return out

    def optimizer_names(self) -> list[str]:
        return [n for n, _ in self.net.named_parameters()]

    def state_dict(self) -> dict:
        """As ``PolicyLearner.state_dict``, the optimizer keyed by name (assembled from the ranks)."""
        self.ranks.send(("poptimizer", self.key))
        opt = self.ranks.guard(self.inner.engine.optimizer_pull)
        if self._reset:
            opt = {**opt, "state": {}}
        return {"net": self.net.state_dict(), "opt": opt, "version": self.version}

    def load_state_dict(self, state: dict) -> None:
        from arena.trainers.common.checkpoints import NAMED_OPTIMIZER, named_optimizer_state

        self.net.load_state_dict(state["net"])
        opt = state["opt"]
        if opt.get("format") != NAMED_OPTIMIZER:
            opt = named_optimizer_state(opt, self.optimizer_names())
        self.ranks.send(("pload_optimizer", self.key))
        self.ranks.guard(self.inner.engine.optimizer_push, opt)
        self._reset = False
        self.version = int(state.get("version", 0))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.inner.engine.close()
        self.ranks.release()
