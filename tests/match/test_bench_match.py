"""Smoke run of benchmarks/bench_match.py (tiny settings, nothing timed): every row, ratio and size is printed."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_match_prints_every_row_ratio_and_replay_size():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_match.py"), "--seconds", "0.05",
                           "--rounds", "1", "--warmup", "0.01", "--bytes-games", "3"], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, COLUMNS="200"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    md = proc.stdout.split("Markdown (for the README):", 1)[1]
    for label in ("arena openspiel/tic_tac_toe-v0, record=actions", "arena openspiel/tic_tac_toe-v0, record=text",
                  "arena openspiel/tic_tac_toe-v0, record=False", "bare pyspiel loop |",
                  "bare pyspiel loop, 2 generators re-seeded a game", "arena loop alone",
                  "arena arena/TicTacToe-v0, record=actions", "arena arena/TicTacToe-v0, record=text",
                  "bare TextArena TicTacToe-v0-train loop"):
        assert f"| {label}" in md, label
    ratios = {line.split("|")[1].strip(): line.split("|")[3].strip() for line in md.splitlines()
              if line.startswith("| 1.") or line.startswith("| 3.")}
    assert ratios["1. arena (record=actions) / bare pyspiel"] == ">= 0.5x"
    assert ratios["1. arena (record=text) / bare pyspiel"] == ">= 0.3x"
    assert ratios["3. arena/TicTacToe-v0 (record=actions) / bare TextArena"] == ">= 0.95x"
    sizes = {line.split("|")[1].strip(): [int(c.strip().replace(",", "")) for c in line.split("|")[2:6]]
             for line in md.splitlines() if line.startswith(("| openspiel/", "| arena/TicTacToe"))}
    for game in ("openspiel/tic_tac_toe-v0", "arena/TicTacToe-v0"):
        actions, text = sizes[f"{game}, record=actions"], sizes[f"{game}, record=text"]
        assert all(0 < a < b for a, b in zip(actions, text)), (game, actions, text)
