"""A plug-in that registers plain Farama envs, knowing nothing of the arena."""

import gymnasium

gymnasium.register(id="plugin/TicTacToePZ-v3", entry_point="pettingzoo.classic.tictactoe_v3:env")
gymnasium.register(id="plugin/RockPaperScissors-v2", entry_point="pettingzoo.classic.rps_v2:parallel_env",
                   kwargs={"num_actions": 3, "max_cycles": 5})
gymnasium.register(id="plugin/Pendulum-v1", entry_point="gymnasium.envs.classic_control.pendulum:PendulumEnv",
                   max_episode_steps=50)
