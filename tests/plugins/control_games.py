"""A plug-in continuous-control task small enough to learn in seconds: steer to a target.

``plugin/Target-v0``: the observation is a target point in [-1, 1]^2 (new each step), the action a
point in the box [-1, 1]^2, the reward minus the squared distance between them; 8 steps an
episode. The best policy (action = observation) earns 0; a random one about -1.3 a step.

``crash_marker``: a file; the process stepping the env dies (``os._exit``) at the step where it finds
it, after removing it (a worker killed once, for the tests of lost workers).
"""

import os

import gymnasium
import numpy as np
from gymnasium import spaces


class TargetEnv(gymnasium.Env):
    metadata = {"render_modes": []}

    def __init__(self, steps: int = 8, crash_marker: str | None = None):
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.steps = steps
        self.crash_marker = crash_marker

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.target = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self.target.copy(), {}

    def step(self, action):
        if self.crash_marker and os.path.exists(self.crash_marker):
            os.remove(self.crash_marker)
            os._exit(1)
        a = np.clip(np.asarray(action, dtype=np.float32), -1, 1)
        reward = -float(np.sum((a - self.target) ** 2))
        self.t += 1
        self.target = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self.target.copy(), reward, False, self.t >= self.steps, {}


gymnasium.register(id="plugin/Target-v0", entry_point="plugins.control_games:TargetEnv")
