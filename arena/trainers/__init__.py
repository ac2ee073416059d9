"""Learners for the arena (policy-gradient losses, advantage estimators, trainers).

Kept deliberately empty: importing ``arena.trainers`` must not import torch.
Import the submodules directly, e.g. ``from arena.trainers.common import losses``.
"""
