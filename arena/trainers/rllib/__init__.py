"""Trainers built on RLlib (its current API stack: RLModule, Learner, EnvRunner).

* :mod:`arena.trainers.rllib.ppo`  ``trainer: rllib_ppo``: PPO self-play on a game's PettingZoo env,
  one shared policy for every seat, the action mask honoured; checkpoints play as ``rllib:<folder>``.

Importing this package imports nothing of Ray.
"""
