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


def check_learner(settings: LearnerSettings, spec: Any, game: str, sizes: dict | None = None) -> None:
    """Learner settings the game's moves allow (a `ConfigError` naming the fix): the DPPO trust regions
    measure how far a move's probability moved, and a move drawn from a box has a density instead; the
    all-actions policy term needs V-trace and a net with a value per move (`sizes.q_head`)."""
    from arena.errors import ConfigError

    if spec.box_moves and settings.loss not in ("ppo_clip", "dppo_exact_kl"):
        raise ConfigError(f"learner.loss: {settings.loss} bounds the change of a move's probability; {game}'s moves "
                          "draw from a box (a density): use learner.algo: dppo (the exact KL of the move's "
                          "distributions) or learner.loss: ppo_clip")
    if settings.pg == "all_actions":
        if not (sizes or {}).get("q_head"):
            raise ConfigError("learner.pg: all_actions reads a value per move: add q_head: true to sizes")
        if spec.box_moves or spec.action is not None:
            raise ConfigError(f"learner.pg: all_actions needs moves of one categorical choice; {game}'s are not: "
                              "use learner.pg: sampled")


def make_policy_learner(net: Any, settings: LearnerSettings, *, lr: float, device: str = "cpu", anchor: Any = None,
                        parallel: Any = None, key: str = "policy") -> Any:
    """A `PolicyLearner`, or with ``parallel.mode`` odc/fsdp its data-parallel form on several ranks
    (`arena.trainers.parallel.policy.ParallelPolicyLearner`, the same interface)."""
    check_parallel(parallel)
    if settings.algo == "dppo" and parallel is not None and parallel.mode != "none":
        from arena.errors import ConfigError

        raise ConfigError(f"learner.algo: dppo measures each move's divergence from the whole weights before the "
                          f"update, which parallel.mode {parallel.mode} shards: use parallel.mode none")
    if parallel is None or parallel.mode == "none":
        return PolicyLearner(net, settings, lr=lr, anchor=anchor, device=device)
    from arena.trainers.parallel.policy import ParallelPolicyLearner

    return ParallelPolicyLearner(net, settings, lr=lr, anchor=anchor, device=device, ps=parallel, key=key)
