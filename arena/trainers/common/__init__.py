"""Shared training pieces: losses, advantage estimators, schedules, metrics, checkpoints (pure), and
the one trainer lifecycle every trainer subclasses (`arena.trainers.common.base.Trainer`).

Shared by every learner family (language models in `arena.trainers.llm`, neural policies in
`arena.trainers.policy`, RLlib in `arena.trainers.rllib`).
"""
