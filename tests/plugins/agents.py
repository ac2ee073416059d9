"""Agents used by league tests (imported by spec in worker processes)."""

import os
import time


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
