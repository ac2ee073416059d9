"""``torchrun --nproc-per-node N -m arena.trainers.run CONFIG --dir RUN --parallel odc|fsdp|pipeline``.

Each process torchrun starts joins its process group (``env://``). Rank 0 trains: it builds the
trainer the config names (spiral, scc or ppo), with the learner's step on every rank
(`arena.trainers.parallel.learner.ParallelLearner`, `arena.trainers.parallel.policy.ParallelPolicyLearner`),
and runs it to the end, printing a line per
iteration; ranks 1 .. N-1 serve rank 0's steps (`arena.trainers.parallel.learner.serve`). The
world size is torchrun's. The run folder is rank 0's alone (ranks on other machines need no shared
file system: the weights and the optimizer state travel through the process group). SIGINT or
SIGTERM (what torchrun sends its ranks when it stops) on rank 0 finishes the current iteration,
checkpoints it and stops every rank; the same command resumes, with any parallel setting or none
(``arena train``).

``arena train CONFIG --parallel ...`` does the same on one machine without torchrun: it starts the
other ranks itself.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m arena.trainers.run",
                                 description="Train under torchrun: rank 0 trains, the other ranks serve its steps.")
    ap.add_argument("config", help="training YAML (trainer: spiral, scc or ppo)")
    ap.add_argument("--dir", required=True, help="run folder on rank 0 (resumed if it exists)")
    ap.add_argument("--parallel", default=None, help="pipeline (spiral), odc or fsdp (default: the config's "
                    "parallel.mode)")
    ap.add_argument("--schedule", default=None, help="pipeline schedule")
    ap.add_argument("--microbatches", type=int, default=None)
    ap.add_argument("--vocab-parallel", action="store_true", help="pipeline: vocabulary layers over every rank")
    ap.add_argument("--transport", default=None, help="odc transport: shm, pg or auto")
    ap.add_argument("--iterations", type=int, default=None, help="train to this iteration")
    ap.add_argument("--model", default=None)
    ap.add_argument("--loss", default=None)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from arena.errors import ArenaError
    from arena.trainers.parallel.launch import in_torchrun

    a = _args(argv)
    if not in_torchrun():
        print("error: arena.trainers.run runs under torchrun (RANK and WORLD_SIZE are not set): "
              f"torchrun --nproc-per-node 2 -m arena.trainers.run {a.config} --dir {a.dir} ..., or "
              f"arena train {a.config} --dir {a.dir} --parallel odc --world-size 2", file=sys.stderr)
        return 2
    try:
        return _main(a)
    except ArenaError as e:
        print(f"error (rank {os.environ.get('RANK')}): {e}", file=sys.stderr)
        return 2


def _main(a: argparse.Namespace) -> int:
    from arena.trainers.parallel.launch import join_torchrun
    from arena.trainers.parallel.learner import parallel_overrides, serve
    from arena.trainers.registry import read_train_config

    world = int(os.environ["WORLD_SIZE"])
    par = parallel_overrides(a.parallel, None, None, a.schedule, a.microbatches, a.transport,
                             vocab_parallel=a.vocab_parallel) or {}
    par["world_size"] = world
    entry, cfg = read_train_config(a.config, model=a.model, learner={"loss": a.loss} if a.loss is not None else None,
                                   iterations=a.iterations, parallel=par)
    pcfg = getattr(cfg, "parallel", None)
    if pcfg is None or pcfg.mode == "none":
        from arena.errors import ConfigError

        raise ConfigError(f"{a.config}: give --parallel pipeline|odc|fsdp (or parallel.mode in the config): under "
                          "torchrun every rank takes part in the learner's step")
    backend = "nccl" if str(getattr(cfg, "device", "cpu")).startswith("cuda") else "gloo"
    info, owned = join_torchrun(backend, pcfg.timeout_s, pcfg.threads)
    try:
        if info.rank != 0:
            serve(info)
            return 0
        return _train(entry, cfg, a, world)
    finally:
        if owned:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


def _train(entry, cfg, a: argparse.Namespace, world: int) -> int:
    pcfg = cfg.parallel
    trainer = entry.make(cfg, a.dir)
    print(f"learner step: {pcfg.mode} on {world} ranks under torchrun; rollouts on rank 0", flush=True)
    resuming = trainer.resume_line()
    if resuming is not None:
        print(resuming, flush=True)

    def stop(signum, frame):
        if trainer.request_stop():
            print("stopping after this iteration", flush=True)
            return
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)

    def show(it, total, m):
        keys = [k for k in ("train/return", "train/loss", "train/invalid_rate", "time/update_s") if k in m]
        keys += sorted(k for k in m if k.startswith("eval/win_rate"))
        print(f"iteration {it}/{total}: " + ", ".join(f"{k} {m[k]:.3f}" for k in keys), flush=True)

    interrupted = False
    try:
        final = trainer.run(progress=show)
    except KeyboardInterrupt:
        interrupted, final = True, {}
    finally:
        trainer.close()
    if interrupted or trainer.stop_requested:
        print(trainer.stop_line(), flush=True)
        return 130
    for k in sorted(final):
        if k.startswith("eval/"):
            print(f"{k}: {final[k]:.3f}")
    print(f"Run folder: {a.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
