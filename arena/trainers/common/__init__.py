"""Pure, shared training pieces: losses, advantage estimators, schedules, metrics, checkpoints.

Shared by every learner family (language models in `arena.trainers.llm`, neural policies later).
"""
