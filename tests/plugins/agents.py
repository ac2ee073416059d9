"""Agents used by league tests (imported by spec in worker processes)."""

import os
import time

from arena.agents.base import BaseAgent
from arena.agents.specs import make_agent


class CrashOnce:
    """Kills its own worker process the first time it is asked to move (marker file)."""

    def __init__(self, marker: str):
        self.marker = marker

    def act(self, obs):
        if not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write(str(os.getpid()))
            os._exit(3)
        return obs.legal_actions[0]


class Slow:
    """A legal but slow agent: keeps matches in flight long enough to kill the league mid-run."""

    def __init__(self, delay: float = 0.05):
        self.delay = delay

    def act(self, obs):
        time.sleep(self.delay)
        return obs.legal_actions[-1]


class Scripted(BaseAgent):
    """Returns the given actions in order, then falls back to random legal moves."""

    def __init__(self, actions, seed=0):
        self.actions = list(actions)
        self.fallback = make_agent("random", None, seed)
        self.feedback = []

    def act(self, obs):
        self.feedback.append(obs.feedback)
        if self.actions:
            a = self.actions.pop(0)
            if isinstance(a, Exception):
                raise a
            return a() if callable(a) else a
        return self.fallback.act(obs)


class Custom:
    """A plug-in agent with an option, built by spec (`plugins.agents:Custom:depth=3`)."""

    def __init__(self, depth=1):
        self.depth = depth

    def act(self, obs):
        return obs.legal_actions[-1]


class ForfeitAfter:
    """Alternates actions 0 and 1 (CartPole stays up a while), then answers an illegal move from move
    `moves` on: it forfeits there (`plugins.agents:ForfeitAfter:moves=20`)."""

    def __init__(self, moves=20):
        self.moves = int(moves)
        self.t = 0

    def act(self, obs):
        self.t += 1
        return 99 if self.t > self.moves else self.t % 2

    def reset(self, seed=None):
        self.t = 0
