"""Soak (slow): 100,000 matches, the league killed by SIGKILL at 20 random moments and resumed each time."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from soak_league import soak  # noqa: E402


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_league_killed_20_times_loses_nothing_and_counts_nothing_twice(tmp_path):
    out = soak(tmp_path, matches=100_000, kills=20, seed=0, log=print)
    print(out)
    assert out["results"] == out["league_results"] == 100_000
    assert out["duplicates"] == 0 and out["missing_replays"] == 0 and out["replays_disagreeing"] == 0
    assert out["ratings_equal"] and out["ratings"] > 0
    assert out["integrity"] == "ok"
    # every kill hit a run that was playing, and every run before the last committed matches of its own
    assert out["killed_while_running"] == 20
    counts = out["counts_after_each_run"]
    assert all(b > a for a, b in zip([0, *counts], counts)), counts
