"""Smoke tests of the StarCraft II benchmarks on the fake game (in the style of tests/test_benchmarks.py):
bench_sc2.py --quick prints its tables and JSON keys; sc2_real_check.py --fake prints a row per level
and the game's version from the replays. Skipped without the sc2 extra."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pysc2_evolved", reason='pysc2-evolved (the sc2 extra) is not installed: pip install "arena[sc2]"')

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_SC2_") and k != "SC2PATH"}
    env.update(OMP_WAIT_POLICY="PASSIVE", COLUMNS="200")
    proc = subprocess.run([sys.executable, *args], cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    return proc


def test_bench_sc2_quick_prints_tables_and_json():
    out = _run([str(BENCH / "bench_sc2.py"), "--quick"], timeout=180).stdout
    assert "| comparison | SC2Core / arena | bare SC2Env | ratio |" in out and "| league | matches/s |" in out
    assert "(inline, 1 process)" in out and "(local, 2 processes)" in out
    line = json.loads(out.strip().splitlines()[-1])
    assert line["bench"] == "sc2" and line["game"] == "fake" and line["league_matches"] == 4
    for key in ("core_steps_per_s", "bare_steps_per_s", "ratio", "play_match_steps_per_s", "launch_s_core",
                "launch_s_bare", "league_inline_matches_per_s", "league_local_matches_per_s"):
        assert line[key] > 0, key


def test_sc2_real_check_against_the_fake_prints_each_level(tmp_path):
    out = _run([str(BENCH / "sc2_real_check.py"), "--fake", "--difficulties", "very_easy,hard", "--max-steps", "100",
                "--out", str(tmp_path)], timeout=120).stdout
    assert "| very_easy | win" in out and "| hard | win" in out and "base build 75689" in out
    line = json.loads(out.strip().splitlines()[-1])
    assert line["check"] == "sc2_real" and [r["difficulty"] for r in line["levels"]] == ["very_easy", "hard"]
    assert line["engine"]["sc2_base_build"] == 75689
    for r in line["levels"]:
        assert r["ok"] and r["steps"] > 0 and r["sc2replay_bytes"] > 0 and Path(r["sc2replay"]).is_file()
