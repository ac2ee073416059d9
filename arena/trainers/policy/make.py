"""Which neural-policy learner a config asks for: `PolicyLearner` on one process, or its data-parallel form."""

from __future__ import annotations

from typing import Any

from arena.trainers.policy.learner import LearnerSettings, PolicyLearner


def check_parallel(parallel: Any) -> None:
    """A ``parallel:`` section the neural-policy learner can run (a `ConfigError` naming the fix)."""
    from arena.errors import ConfigError

    if parallel is not None and parallel.mode not in ("none", "odc", "fsdp"):
        raise ConfigError(f"parallel.mode: {parallel.mode} is for the language-model learner (trainer: spiral); "
                          "the neural-policy learner takes odc or fsdp")


def check_learner(settings: LearnerSettings, spec: Any, game: str) -> None:
    """Learner settings the game's moves allow (a `ConfigError` naming the fix): the DPPO trust regions
    measure how far a move's probability moved, and a move drawn from a box has a density instead."""
    from arena.errors import ConfigError

    if spec.box_moves and settings.loss != "ppo_clip":
        raise ConfigError(f"learner.loss: {settings.loss} bounds the change of a move's probability; {game}'s moves "
                          "draw from a box (a density): use learner.loss: ppo_clip")


def make_policy_learner(net: Any, settings: LearnerSettings, *, lr: float, device: str = "cpu", anchor: Any = None,
                        parallel: Any = None, key: str = "policy") -> Any:
    """A `PolicyLearner`, or with ``parallel.mode`` odc/fsdp its data-parallel form on several ranks
    (`arena.trainers.parallel.policy.ParallelPolicyLearner`, the same interface)."""
    check_parallel(parallel)
    if parallel is None or parallel.mode == "none":
        return PolicyLearner(net, settings, lr=lr, anchor=anchor, device=device)
    from arena.trainers.parallel.policy import ParallelPolicyLearner

    return ParallelPolicyLearner(net, settings, lr=lr, anchor=anchor, device=device, ps=parallel, key=key)
