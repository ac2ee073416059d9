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


def make_policy_learner(net: Any, settings: LearnerSettings, *, lr: float, device: str = "cpu", anchor: Any = None,
                        parallel: Any = None, key: str = "policy") -> Any:
    """A `PolicyLearner`, or with ``parallel.mode`` odc/fsdp its data-parallel form on several ranks
    (`arena.trainers.parallel.policy.ParallelPolicyLearner`, the same interface)."""
    check_parallel(parallel)
    if parallel is None or parallel.mode == "none":
        return PolicyLearner(net, settings, lr=lr, anchor=anchor, device=device)
    from arena.trainers.parallel.policy import ParallelPolicyLearner

    return ParallelPolicyLearner(net, settings, lr=lr, anchor=anchor, device=device, ps=parallel, key=key)
