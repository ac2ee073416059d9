"""The language-model learner on several processes: ``arena train CONFIG --parallel pipeline|odc|fsdp``.

Rollouts stay where they are. Rank 0 runs the whole trainer -- the SPIRAL coordinator, its
actors (the batched generation engine) and its league -- with a :class:`ParallelLearner` in
the place of :class:`~arena.trainers.llm.learner.LLMLearner`; ranks 1 .. N-1 run
:func:`serve`, a loop that waits for rank 0's next command. Every command is one broadcast
from rank 0 on a group of its own (whose timeout is long: rank 0 spends minutes on rollouts
between two steps), followed by the collectives of the engine:

* ``init``: a learner's serving part on every rank, of the class the learner names
  (:class:`LMServed`, or ``arena.trainers.parallel.policy.PolicyServed``), so this loop
  knows no kind of learner;
* ``step``: the batch goes to every rank; each runs ``LLMLearner.step``'s loop
  (:func:`~arena.trainers.llm.learner.minibatch_loop`: the same shuffled minibatches) on its
  engine, then the updated weights are assembled on rank 0 and copied into the rollout
  model, so the next rollouts play the new policy (weights move once per step, as an RL
  stack moves them from its trainer to its inference engine);
* ``load`` (``model_changed``): rank 0's rollout model is copied into the engine (after a
  resume, imitation, or a league ``reset_to``);
* ``optimizer`` / ``load_optimizer``: the optimizer state, assembled on rank 0 keyed by
  parameter name (:func:`arena.trainers.common.checkpoints.named_optimizer_state`), or split
  from that form into this engine's shards, so a checkpoint moves between parallel settings
  (2 ranks -> 1 process -> pipeline stages) with its optimizer;
* ``lr``, ``stop``.

The engines (:class:`Engine`; one per rank, all built from rank 0's model):

* ``pipeline``: :class:`~arena.trainers.parallel.pipeline.runtime.LMPipeline` with the configured
  schedule; each minibatch is one :func:`~arena.trainers.parallel.pipeline.step.pipeline_step`,
  the global gradient clip and AdamW on this rank's stages;
* ``odc``: :class:`~arena.trainers.parallel.sharded.odc.ODCSharded` (shared memory on one machine,
  the process group across machines);
* ``fsdp``: :class:`~arena.trainers.parallel.sharded.fsdp2.FSDP2Sharded` at its best settings, the
  baseline.

Not yet: the BPCO critic and fp16/bf16 training (each a one-line error naming it). On GPUs (NCCL) the
pipeline and FSDP2 run as they are; ODC takes its process-group transport (``shm`` is host memory).
"""

from __future__ import annotations

import contextlib
import copy
from typing import TYPE_CHECKING, Any

from arena.errors import ConfigError
from arena.trainers.parallel.launch import ParallelError, RankInfo

if TYPE_CHECKING:  # pragma: no cover
    from arena.trainers.parallel.config import ParallelConfig
    from arena.trainers.llm.learner import Batch, LearnerSettings

MODES = ("pipeline", "odc", "fsdp")


def parallel_overrides(mode: str | None = None, world_size: int | None = None, stages: int | None = None,
                       schedule: str | None = None, microbatches: int | None = None,
                       transport: str | None = None, vocab_parallel: bool | None = None) -> dict[str, Any] | None:
    """The ``parallel:`` section the command-line flags ask for (None: no flag given).

    ``--stages N`` is the pipeline's ranks (``world_size``); each holds one model stage, or two for
    the schedules with two stages a rank. A flag that does not fit the mode is a one-line error.
    """
    given = {k: v for k, v in dict(mode=mode, world_size=world_size, schedule=schedule, microbatches=microbatches,
                                   transport=transport, vocab_parallel=vocab_parallel or None).items()
             if v is not None}
    if stages is not None:
        if mode not in (None, "pipeline"):
            raise ConfigError(f"--stages is for --parallel pipeline, not {mode}: use --world-size")
        if world_size is not None and world_size != stages:
            raise ConfigError(f"--stages {stages} and --world-size {world_size} disagree: a pipeline's ranks are "
                              "its stages; give one of them")
        given["world_size"] = stages
    if schedule is not None and mode not in (None, "pipeline"):
        raise ConfigError(f"--schedule is for --parallel pipeline, not {mode}")
    if vocab_parallel and mode not in (None, "pipeline"):
        raise ConfigError(f"--vocab-parallel is for --parallel pipeline, not {mode}")
    if transport is not None and mode not in (None, "odc"):
        raise ConfigError(f"--transport is for --parallel odc, not {mode}")
    if mode is not None and mode != "none" and mode not in MODES:
        raise ConfigError(f"--parallel {mode}: use one of none, {', '.join(MODES)}")
    return given or None


# --------------------------------------------------------------------------- engines


def _canonical_names(model) -> dict[str, str]:
    """Every name of every parameter -> the name ``model.named_parameters()`` gives it (a tied weight's first)."""
    first: dict[int, str] = {}
    for n, p in model.named_parameters():
        first[id(p)] = n
    return {n: first[id(p)] for n, p in model.named_parameters(remove_duplicate=False)}


class Engine:
    """One rank's part of the learner: ``step``, and the weights and optimizer state to and from rank 0."""

    def __init__(self, model, settings: "LearnerSettings", ps: ParallelConfig, info: RankInfo, group=None):
        self.settings, self.ps, self.info, self.group = settings, ps, info, group
        self.canon = _canonical_names(model)

    def step(self, batch: "Batch", pad_id: int) -> dict[str, float]:
        raise NotImplementedError

    def set_lr(self, lr: float) -> None:
        for g in self.opt.param_groups:
            g["lr"] = lr

    def pull(self) -> dict[str, Any] | None:
        """The whole model's state dict on rank 0 (CPU tensors; None elsewhere). All ranks call it."""
        raise NotImplementedError

    def push(self, state: dict[str, Any] | None) -> None:
        """Load rank 0's whole-model state dict into this engine (None on the other ranks)."""
        raise NotImplementedError

    def optimizer_pull(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def optimizer_push(self, named: dict[str, Any] | None) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    # helpers for engines whose optimizer holds whole parameters (pipeline stages)
    def _broadcast(self, obj: Any) -> Any:
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]


def _named_local(opt, names_of: dict[int, str]) -> dict[str, Any]:
    """This optimizer's state keyed by parameter name (CPU copies), and its param group hyper-parameters."""
    state = {}
    for p, s in opt.state.items():
        state[names_of[id(p)]] = {k: (v.detach().cpu().clone() if hasattr(v, "detach") else v) for k, v in s.items()}
    hyper = {k: v for k, v in opt.param_groups[0].items() if k != "params"}
    return {"state": state, "hyper": hyper}


def _named_from_parts(parts: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    from arena.trainers.common.checkpoints import NAMED_OPTIMIZER
    from arena.trainers.parallel.pipeline.vocab import merge_row_pieces

    names_held = {n for part in parts for n in part["state"]}
    state = {n: merge_row_pieces(part["state"][n] for part in parts if n in part["state"]) for n in names_held}
    return {"format": NAMED_OPTIMIZER, "state": state, "param_groups": [{**parts[0]["hyper"], "params": names}]}


def _load_local(opt, named: dict[str, Any], params: list[tuple[Any, str]]) -> None:
    """Load the named state of the parameters ``params`` ((parameter, canonical name), in the optimizer's order)."""
    groups = _one_group(named)
    state = {i: named["state"][n] for i, (_, n) in enumerate(params) if n in named["state"]}
    opt.load_state_dict({"state": state, "param_groups": _groups(groups, opt, len(params))})


def _one_group(named: dict[str, Any]) -> list[dict[str, Any]]:
    """The saved param groups, which must be one: a parallel learner has no critic group."""
    groups = named["param_groups"]
    if len(groups) != 1:
        raise ParallelError(f"the saved optimizer has {len(groups)} parameter groups (a critic's?); a parallel "
                            "learner has one: resume it on one process (without --parallel)")
    return groups


def _groups(saved: list[dict[str, Any]], opt, n: int) -> list[dict[str, Any]]:
    """One param group of ``n`` parameters: the live optimizer's options with the saved hyper-parameters."""
    from arena.trainers.common.checkpoints import optimizer_groups

    return optimizer_groups([{**saved[0], "params": list(range(n))}], opt.param_groups)


class PipelineEngine(Engine):
    def __init__(self, model, settings, ps, info, group=None):
        import torch

        from arena.trainers.parallel.pipeline.runtime import LMPipeline

        super().__init__(model, settings, ps, info, group)
        self.names = [n for n, _ in model.named_parameters()]
        meter = None
        if ps.offload != "none":
            from arena.trainers.parallel.pipeline.memory import ActivationOffload

            meter = ActivationOffload(ps.offload, info.device)
        self.pipe = LMPipeline(model, ps.schedule, n_microbatches=ps.microbatches, settings=settings, group=group,
                               device=info.device, meter=meter, vocab_parallel=ps.vocab_parallel)
        self.params = [(p, self.canon[n]) for p, n in self._param_names()]
        self.opt = torch.optim.AdamW([p for p, _ in self.params], lr=settings.lr, weight_decay=settings.weight_decay)

    def _param_names(self):
        seen = set()
        for n, p in self.pipe.named_parameters():
            if id(p) not in seen:
                seen.add(id(p))
                yield p, n

    def step(self, batch, pad_id):
        from arena.trainers.llm.learner import minibatch_loop
        from arena.trainers.parallel.pipeline.step import clip_grad_norm_, pipeline_step

        def update(mb):
            meter = self.pipe.meter
            if meter is not None:
                meter.reset()
            out = pipeline_step(self.pipe, mb, pad_id=pad_id)
            stats = dict(out.stats)
            if meter is not None:  # this rank's (rank 0's) saved activations: what stayed, what left
                stats["activations_device_mb"] = meter.peak / 2**20
                stats["activations_host_mb"] = meter.host_peak / 2**20
            stats["grad_norm"] = clip_grad_norm_(self.pipe, self.settings.grad_clip)
            self.opt.step()
            self.pipe.zero_grad()
            stats["loss"] = out.loss
            return stats

        try:
            return minibatch_loop(self.settings, batch, update)
        finally:
            self.pipe.eval()

    def pull(self):
        from arena.trainers.parallel.pipeline.whole_model import full_state_dict

        return full_state_dict(self.pipe, dst=0)

    def push(self, state):
        from arena.trainers.parallel.pipeline.whole_model import load_full_state_dict

        load_full_state_dict(self.pipe, self._broadcast(state))

    def _shard_rows(self) -> dict[str, tuple[int, int]]:
        """Canonical name -> the vocabulary rows this rank holds (vocabulary parallelism; else empty)."""
        return {self.canon[n]: rows for n, rows in self.pipe.vocab_shards().items()}

    def optimizer_pull(self):
        import torch.distributed as dist

        from arena.trainers.parallel.pipeline.vocab import row_piece

        local = _named_local(self.opt, {id(p): n for p, n in self.params})
        for n, (lo, hi) in self._shard_rows().items():  # a shard's moments are rows of the whole parameter's
            if n in local["state"]:
                local["state"][n] = {k: row_piece(lo, v) if _rows_of(v, hi - lo) else v
                                     for k, v in local["state"][n].items()}
        parts = [None] * self.info.world_size if self.info.rank == 0 else None
        dist.gather_object(local, parts, dst=0, group=self.group)
        return _named_from_parts(parts, self.names) if self.info.rank == 0 else None

    def optimizer_push(self, named):
        named = self._broadcast(named)
        shards = self._shard_rows()
        if shards:
            vocab = self.pipe.config.vocab_size
            named = {**named, "state": dict(named["state"])}
            for n, (lo, hi) in shards.items():
                if n in named["state"]:
                    named["state"][n] = {k: v[lo:hi] if _rows_of(v, vocab) else v
                                         for k, v in named["state"][n].items()}
        _load_local(self.opt, named, self.params)


def _rows_of(v, rows: int) -> bool:
    """Whether an optimizer state entry is a tensor of ``rows`` rows (a moment), not a step count."""
    return hasattr(v, "dim") and v.dim() >= 1 and v.shape[0] == rows


class ShardedEngine(Engine):
    """ODC or FSDP2 (``ps.mode``): every rank holds a shard of every parameter and of its optimizer state."""

    def __init__(self, model, settings, ps, info, group=None, *, units=None, eps: float = 1e-8):
        from arena.trainers.parallel.sharded.fsdp2 import FSDP2Sharded
        from arena.trainers.parallel.sharded.odc import ODCSharded

        super().__init__(model, settings, ps, info, group)
        model = model.to(info.device)
        self.names = [n for n, _ in model.named_parameters()]
        params = set(self.canon)
        self.buffers = [n for n in model.state_dict() if n not in params]  # persistent buffers (a normaliser's)
        if ps.mode == "odc":
            self.eng = ODCSharded(model, settings=settings, n_microbatches=ps.microbatches, transport=ps.transport,
                                  group=group, device=info.device, units=units, eps=eps)
        else:
            self.eng = FSDP2Sharded(model, settings=settings, n_microbatches=ps.microbatches, group=group,
                                    best=True, device=info.device, units=units, eps=eps)
        self.opt = self.eng.opt

    def step(self, batch, pad_id):
        from arena.trainers.parallel.sharded.engine import learner_step

        return learner_step(self.eng, batch, pad_id)

    def pull(self):
        state = self.eng.full_state_dict()  # FSDP2: a collective; ODC: local reads
        return state if self.info.rank == 0 else None

    def push(self, state, broadcast: bool = True):
        """Load rank 0's state dict (``broadcast=False``: every rank already has it) into the shards;
        buffers (a normaliser's statistics) into each rank's module."""
        import torch

        if broadcast:
            state = self._broadcast(state)
        if self.ps.mode == "fsdp":
            from torch.distributed.tensor import distribute_tensor

            with torch.no_grad():
                for k, v in self.eng.module.state_dict().items():
                    if hasattr(v, "device_mesh"):
                        v.to_local().copy_(distribute_tensor(state[k].to(v.dtype), v.device_mesh, v.placements,
                                                             src_data_rank=None).to_local())
                    else:
                        v.copy_(state[k])
            return
        e = self.eng
        L = e.layout
        with torch.no_grad():
            for unit, mine in zip(L.units, e.transport.owned()):
                flat = torch.zeros(L.world_size * unit.shard, dtype=torch.float32)
                for name, off in zip(unit.params, unit.offsets):
                    t = state[name].reshape(-1)
                    flat[off:off + t.numel()] = t
                mine.copy_(flat[unit.owned(self.info.rank).start - unit.base:
                                unit.owned(self.info.rank).stop - unit.base])
            if self.buffers:
                e.module.load_state_dict({k: state[k] for k in self.buffers}, strict=False)
        e.transport.publish()
        e.version += 1  # every unit is gathered again before its next use

    # -- optimizer state: ODC keeps one flat shard per unit; FSDP2 one DTensor shard per parameter
    def optimizer_pull(self):
        import torch
        import torch.distributed as dist

        if self.ps.mode == "fsdp":
            # By hand, not torch.distributed.checkpoint's get_optimizer_state_dict: that one "initialises"
            # an optimizer without state by stepping it, which starts Adam's bias correction a step late.
            state = {}
            for name, p in self.eng.module.named_parameters():
                s = self.opt.state.get(p)
                if s:
                    state[name] = {k: (v.full_tensor().detach().cpu().clone() if hasattr(v, "full_tensor")
                                       else v.detach().cpu().clone()) for k, v in s.items()}
            hyper = {k: v for k, v in self.opt.param_groups[0].items() if k != "params"}
            return _named_from_parts([{"state": state, "hyper": hyper}], self.names) if self.info.rank == 0 else None
        shards = [self.opt.state.get(p, {}) for p in self.eng.transport.owned()]
        local = [{k: (v.detach().cpu().clone() if hasattr(v, "detach") else v) for k, v in s.items()} for s in shards]
        parts = [None] * self.info.world_size if self.info.rank == 0 else None
        dist.gather_object(local, parts, dst=0, group=self.group)
        if self.info.rank != 0:
            return None
        state: dict[str, Any] = {}
        for ui, unit in enumerate(self.eng.layout.units):
            if not parts[0][ui]:
                continue  # no step yet
            flat = {k: torch.cat([parts[r][ui][k] for r in range(self.info.world_size)])
                    for k in ("exp_avg", "exp_avg_sq")}
            for name, shape, off in zip(unit.params, unit.shapes, unit.offsets):
                n = int(torch.Size(shape).numel())
                state[name] = {"step": parts[0][ui]["step"].clone(),
                               **{k: v[off:off + n].view(shape).clone() for k, v in flat.items()}}
        hyper = {k: v for k, v in self.opt.param_groups[0].items() if k != "params"}
        return _named_from_parts([{"state": state, "hyper": hyper}], self.names)

    def optimizer_push(self, named):
        import torch

        if self.ps.mode == "fsdp":
            from torch.distributed.tensor import distribute_tensor

            named = self._broadcast(named)
            groups = _one_group(named)
            from arena.trainers.common.checkpoints import HYPER

            self.opt.param_groups[0].update({k: groups[0][k] for k in HYPER if k in groups[0]})
            self.opt.state.clear()
            for name, p in self.eng.module.named_parameters():
                s = named["state"].get(name)
                if s is None:
                    continue
                self.opt.state[p] = {
                    k: (distribute_tensor(v.to(p.dtype), p.device_mesh, p.placements, src_data_rank=None)
                        if k != "step" else torch.as_tensor(v, dtype=torch.float32).clone())
                    for k, v in s.items()}
            return
        named = self._broadcast(named)
        e, r = self.eng, self.info.rank
        per_unit: dict[int, Any] = {}
        for ui, unit in enumerate(e.layout.units):
            have = [n for n in unit.params if n in named["state"]]
            if not have:
                continue
            if len(have) != len(unit.params):
                raise ParallelError(f"the saved optimizer state has only {len(have)} of {unit.name}'s "
                                    f"{len(unit.params)} parameters")
            sl = slice(r * unit.shard, (r + 1) * unit.shard)
            out = {}
            for k in ("exp_avg", "exp_avg_sq"):
                flat = torch.zeros(e.layout.world_size * unit.shard, dtype=torch.float32)
                for name, off in zip(unit.params, unit.offsets):
                    t = named["state"][name][k].reshape(-1)
                    flat[off:off + t.numel()] = t
                out[k] = flat[sl].clone()
            out["step"] = torch.as_tensor(named["state"][unit.params[0]]["step"], dtype=torch.float32).clone()
            per_unit[ui] = out
        groups = _one_group(named)
        self.opt.load_state_dict({"state": per_unit, "param_groups": _groups(groups, self.opt, len(e.layout.units))})

    def close(self):
        self.eng.close()


def build_engine(model, settings: "LearnerSettings", ps: ParallelConfig, info: RankInfo, group=None) -> Engine:
    if ps.mode == "pipeline":
        return PipelineEngine(model, settings, ps, info, group)
    if ps.mode in ("odc", "fsdp"):
        return ShardedEngine(model, settings, ps, info, group)
    raise ConfigError(f"parallel.mode: unknown mode {ps.mode!r}; use one of none, {', '.join(MODES)}")


# --------------------------------------------------------------------------- the command loop


def _command_group(timeout_s: float):
    """A group of every rank for the commands: rank 0 may be busy with rollouts for a long time."""
    from datetime import timedelta

    import torch.distributed as dist

    return dist.new_group(timeout=timedelta(seconds=max(timeout_s, 7 * 86_400.0)))


@contextlib.contextmanager
def _torch_threads(n: int):
    """``n`` torch threads for a step (rank 0 generates with the trainer's ``threads`` between steps)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(max(1, n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def serve(info: RankInfo) -> None:
    """Ranks 1 .. N-1: build the engines rank 0 describes, then run their commands until ``stop``.

    Rank 0 alone decides when the run ends. A Ctrl-C at a terminal reaches every process of the
    foreground group, and torchrun passes SIGTERM to all its ranks; a serving rank ignores both, so
    rank 0 can finish its iteration, checkpoint it and send ``stop``. If rank 0 dies instead, the
    next broadcast fails here and this rank ends too.
    """
    import signal
    import threading

    import torch.distributed as dist

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
    cmds = _command_group(1800.0)

    def recv():
        box = [None]
        dist.broadcast_object_list(box, src=0, group=cmds)
        return box[0]

    engines: dict[str, Any] = {}
    try:
        while True:
            cmd = recv()
            op = cmd[0]
            if op == "stop":
                return
            if op == "init":  # ("init", key, served class, args): an engine for one learner
                _, key, served, args = cmd
                engines[key] = served(info, *args)
            else:  # (op, key, *args)
                engines[cmd[1]].serve(op, cmd[2:])
    finally:
        for e in engines.values():
            e.close()


class LMServed:
    """A serving rank's part of the language-model learner: the engine and its commands."""

    def __init__(self, info: RankInfo, model_cls, config, settings, ps):
        import torch

        torch.set_num_threads(ps.threads)
        with torch.random.fork_rng(devices=[]):
            model = model_cls(config)  # the weights come with the first "load"
        self.engine = build_engine(model, settings, ps, info)

    def serve(self, op: str, args: tuple) -> None:
        e = self.engine
        if op == "step":
            e.step(*args)
            e.pull()
        elif op == "load":
            e.push(None)
        elif op == "lr":
            e.set_lr(*args)
        elif op == "optimizer":
            e.optimizer_pull()
        elif op == "load_optimizer":
            e.optimizer_push(None)
        else:  # pragma: no cover - rank 0 sends only the above
            raise ParallelError(f"unknown command {op!r} from rank 0")

    def close(self) -> None:
        self.engine.close()


class Ranks:
    """Rank 0's handle on the group: the other ranks (started here, or torchrun's), the command group.

    Several learners of one trainer share it (an SCC run's main agent and exploiters):
    :meth:`acquire` starts it on first use, :meth:`release` stops the ranks when the last learner
    lets go.
    """

    current: "Ranks | None" = None

    def __init__(self, ps: ParallelConfig, backend: str):
        from arena.trainers.parallel.launch import in_torchrun, join_torchrun, start_workers

        self.ps, self.users, self.closed = ps, 0, False
        if in_torchrun():
            self.info, _ = join_torchrun(backend, ps.timeout_s, ps.threads)
            if self.info.rank != 0:
                raise ParallelError("a parallel learner runs on rank 0; the other ranks run serve()")
            self.workers = None
        else:
            self.workers = start_workers(_served, ps.world_size, backend=backend, timeout_s=ps.timeout_s,
                                         threads=ps.threads)
            self.info = self.workers.info
        try:
            self.cmds = _command_group(ps.timeout_s)
        except BaseException:
            self._abandon()
            raise

    @classmethod
    def acquire(cls, ps: ParallelConfig, backend: str) -> "Ranks":
        r = cls.current
        if r is None or r.closed:
            r = cls.current = cls(ps, backend)
        elif (r.ps.world_size, r.ps.threads) != (ps.world_size, ps.threads):
            raise ParallelError("the learners of one run must share one parallel setting (world_size, threads)")
        r.users += 1
        return r

    def release(self) -> None:
        """One learner is done; the last one stops the other ranks and leaves the group."""
        import torch.distributed as dist

        self.users -= 1
        if self.users > 0 or self.closed:
            return
        self.closed = True
        try:
            self.send(("stop",))
        except ParallelError:
            pass
        if self.workers is not None:
            self.workers.join()
            if dist.is_initialized():
                dist.destroy_process_group()
        if Ranks.current is self:
            Ranks.current = None

    def send(self, cmd) -> None:
        import torch.distributed as dist

        if self.workers is not None:
            why = self.workers.failure()
            if why:
                raise ParallelError(why)
        try:
            dist.broadcast_object_list([cmd], src=0, group=self.cmds)
        except RuntimeError as e:
            raise self.lost(e) from None

    def lost(self, e: BaseException) -> ParallelError:
        why = self.workers.failure() if self.workers is not None else None
        return ParallelError(why or f"a rank was lost during a collective: {e}")

    def guard(self, fn, *args):
        """``fn(*args)`` (this rank's part of a collective); a lost rank is one :class:`ParallelError`."""
        try:
            return fn(*args)
        except RuntimeError as e:
            if isinstance(e, ParallelError):
                raise
            raise self.lost(e) from None

    def _abandon(self) -> None:
        import torch.distributed as dist

        if self.workers is not None:
            self.workers.join(0)
            if dist.is_initialized():
                dist.destroy_process_group()
        self.closed = True


class ParallelLearner:
    """Rank 0's learner: the interface of :class:`~arena.trainers.llm.learner.LLMLearner` over N ranks.

    ``model`` is the rollout model (the actors generate with it; it is the learner's
    ``model``); the engine trains a copy of it split or sharded over the ranks and copies the
    weights back after every step. Start it with :meth:`start` (local ranks, or the group
    torchrun formed).
    """

    key = "lm"

    def __init__(self, model, tokenizer, settings: "LearnerSettings", ps: ParallelConfig, ranks: Ranks):
        import torch

        from arena.trainers.common.device import grad_scaler
        from arena.trainers.common.losses import TOPK_LOSSES

        self.settings, self.ps, self.ranks = settings, ps, ranks
        self.info, self.workers = ranks.info, ranks.workers
        self.device = torch.device(self.info.device)
        self.model = model.to(self.device)
        self.tok = tokenizer
        self.critic = None
        self.needs_topk = settings.loss in TOPK_LOSSES
        self.scaler = grad_scaler(self.info.device, "fp32")  # a no-op: fp32 only
        self.closed = False
        self.ranks.send(("init", self.key, LMServed, (type(model), model.config, settings, ps)))
        with torch.random.fork_rng(devices=[]):
            mine = copy.deepcopy(self.model)
        self.engine = build_engine(mine, settings, ps, self.info)
        del mine
        self.model_changed()
        #: seconds of the last step: the engine, and the weight copy to the rollout model
        self.timing: dict[str, float] = {}

    @classmethod
    def start(cls, model, tokenizer, settings: "LearnerSettings", ps: ParallelConfig, critic=None):
        """Rank 0 of a new local group (ranks 1 .. N-1 started here), or of torchrun's group."""
        if critic is not None:
            raise ConfigError("critic: bpco is not supported with --parallel yet: use critic: none, or train on "
                              "one process")
        ranks = Ranks.acquire(ps, "nccl" if str(settings.device).startswith("cuda") else "gloo")
        try:
            return cls(model, tokenizer, settings, ps, ranks)
        except BaseException:
            ranks._abandon()
            raise

    def _send(self, op: str, *args) -> None:
        self.ranks.send((op, self.key, *args))

    # -- LLMLearner's interface ---------------------------------------------------------
    def autocast(self):
        return contextlib.nullcontext()  # fp32 only

    def set_lr(self, lr: float) -> None:
        self._send("lr", lr)
        self.engine.set_lr(lr)

    def values(self, texts: list[str]) -> list[float]:
        return []

    def step(self, batch: "Batch") -> dict[str, float]:
        import time

        if not batch.samples:
            return {}
        if self.needs_topk and batch.samples[0].topk_ids is None:
            raise ValueError(f"loss {self.settings.loss} needs top-K rollout log-probs: set top_k > 0")
        pad = self.tok.pad_token_id or 0
        t0 = time.perf_counter()
        self._send("step", batch, pad)
        with _torch_threads(self.ps.threads):
            stats = self.ranks.guard(self.engine.step, batch, pad)
            t1 = time.perf_counter()
            state = self.ranks.guard(self.engine.pull)
        self.model.load_state_dict(state)
        self.model.eval()
        self.timing = {"step_s": t1 - t0, "weights_s": time.perf_counter() - t1}
        return stats

    def model_changed(self) -> None:
        """Copy the rollout model's weights into the engine on every rank."""
        self._send("load")
        state = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        self.ranks.guard(self.engine.push, state)

    def save_weights(self, folder) -> None:
        self.model.save_pretrained(folder)
        self.tok.save_pretrained(folder)

    def load_weights(self, folder) -> None:
        saved = type(self.model).from_pretrained(folder)
        self.model.load_state_dict(saved.state_dict())
        self.model_changed()

    def optimizer_names(self) -> list[str]:
        return [n for n, _ in self.model.named_parameters()]

    def state_dict(self) -> dict[str, Any]:
        """As ``LLMLearner.state_dict``: the optimizer keyed by name (assembled from the ranks), no scaler."""
        self._send("optimizer")
        named = self.ranks.guard(self.engine.optimizer_pull)
        return {"optimizer": named, "scaler": {}, "critic": None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        from arena.trainers.common.checkpoints import NAMED_OPTIMIZER, named_optimizer_state

        opt = state["optimizer"]
        if opt.get("format") != NAMED_OPTIMIZER:  # a checkpoint of one process from before names
            opt = named_optimizer_state(opt, self.optimizer_names())
        if state.get("critic") is not None:
            raise ConfigError("this checkpoint has a critic (critic: bpco), which --parallel does not support yet: "
                              "resume it on one process")
        self._send("load_optimizer")
        self.ranks.guard(self.engine.optimizer_push, opt)

    def close(self) -> None:
        """Let go of the ranks (the last learner stops them and leaves the process group; idempotent)."""
        if self.closed:
            return
        self.closed = True
        self.engine.close()
        self.ranks.release()


def _served(info: RankInfo) -> None:
    serve(info)
