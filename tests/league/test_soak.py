"""Soak: a league killed by SIGKILL at random moments and resumed each time loses nothing and
counts nothing twice. `make test` runs 20,000 matches with 5 kills (each kill lands 0-2 s after the
run's first new commit, among matches being played and committed: what exactly-once needs; a run
plays at most about 3,000 matches before its kill, so every one of the 5 is still running when it
comes); the figure docs/benchmarks.md quotes, 100,000 matches with 20 kills, is a recipe
(`make recipes`)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from soak_league import soak  # noqa: E402


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("matches,kills", [pytest.param(20_000, 5, marks=pytest.mark.slow),
                                           pytest.param(100_000, 20, marks=pytest.mark.recipe)])
def test_a_league_killed_again_and_again_loses_nothing_and_counts_nothing_twice(tmp_path, matches, kills):
    out = soak(tmp_path, matches=matches, kills=kills, seed=0, log=print)
    print(out)
    assert out["results"] == out["league_results"] == matches
    assert out["duplicates"] == 0 and out["missing_replays"] == 0 and out["replays_disagreeing"] == 0
    assert out["ratings_equal"] and out["ratings"] > 0
    assert out["integrity"] == "ok"
    # every kill hit a run that was playing, and every run before the last committed matches of its own
    assert out["killed_while_running"] == kills
    counts = out["counts_after_each_run"]
    assert len(counts) == kills + 1 and all(b > a for a, b in zip([0, *counts], counts)), counts
