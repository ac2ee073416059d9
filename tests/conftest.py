import os
import sys
import tempfile
from pathlib import Path

import pytest

# Several torch processes on 2 cores: no busy-waiting OpenMP threads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["COLUMNS"] = "200"  # rich tables in CLI output: no wrapped ids
# `arena play --vs` remembers the person's name: in a file of the test run's own, never the user's
os.environ["ARENA_PLAYER_FILE"] = os.path.join(tempfile.mkdtemp(prefix="arena-player-"), "player.json")

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))  # so `plugins.sample_games` imports as a plug-in module
# ... in worker processes and subprocesses too (league workers import test agents by spec)
os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS)] + [p for p in [os.environ.get("PYTHONPATH")] if p])


@pytest.fixture(scope="session")
def sample_plugin():
    from arena.envs import load_plugin

    return load_plugin("plugins.sample_games")
