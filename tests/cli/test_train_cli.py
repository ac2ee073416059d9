"""`arena train` from the terminal: a config error writes nothing; Ctrl-C checkpoints the finished
iterations and says how to continue; the same command resumes and says from where."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


def _cfg(tmp_path: Path, **changes) -> Path:
    cfg = yaml.safe_load((ROOT / "configs" / "train" / "spiral_tictactoe_tiny.yaml").read_text())
    cfg.update(iterations=6, games_per_iter=8, concurrency=8, minibatch=64, il=None, threads=1, snapshot_every=10)
    cfg["eval"] = {"every": 10, "games": 8, "opponents": ["random"], "concurrency": 8}
    cfg.update(changes)
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def _train(cfg: Path, run: Path, **kw) -> subprocess.Popen:
    env = dict(os.environ, COLUMNS="200", OMP_WAIT_POLICY="PASSIVE")
    return subprocess.Popen([sys.executable, "-m", "arena.cli", "train", str(cfg), "--dir", str(run)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, **kw)


def _steps(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    return [r["step"] for r in map(json.loads, path.read_text().splitlines()) if "train/return" in r]


def test_a_config_error_writes_nothing(tmp_path):
    run = tmp_path / "run"
    p = _train(_cfg(tmp_path, game="openspiel/tic_tac_tow-v0"), run)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 2 and "game:" in out and "tic_tac_tow" in out and "Traceback" not in out, out
    assert not run.exists()
    p = _train(_cfg(tmp_path, opponents=["mcts:simulatons=3"]), run)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 2 and "opponents: agent spec 'mcts:simulatons=3': unknown option" in out, out
    assert not run.exists()


def test_ctrl_c_saves_the_finished_iterations_and_the_same_command_resumes(tmp_path):
    cfg, run = _cfg(tmp_path), tmp_path / "run"
    p = _train(cfg, run)
    deadline = time.time() + 600
    while len(_steps(run)) < 2 and time.time() < deadline and p.poll() is None:
        time.sleep(0.2)
    assert p.poll() is None, p.communicate()[0]
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 130, out
    done = _steps(run)
    stopped_at = done[-1]
    assert 2 <= stopped_at < 6, out
    assert f"stopped after iteration {stopped_at} of 6: iteration {stopped_at} is saved in {run}/latest" in out, out
    assert "run the same command to continue" in out and "Traceback" not in out, out
    assert (run / "latest").resolve().name == f"iter-{stopped_at:05d}"

    p = _train(cfg, run)
    out, _ = p.communicate(timeout=600)
    assert p.returncode == 0, out
    assert f"resuming from iteration {stopped_at} of 6" in out, out
    # every iteration trained exactly once: none redone, none skipped
    assert _steps(run) == list(range(1, 7)), _steps(run)


def test_the_imitation_warm_start_shows_progress(tmp_path):
    cfg = _cfg(tmp_path, iterations=1, il={"agents": ["random", "random"], "matches": 200, "epochs": 2, "lr": 2e-3,
                                          "batch_size": 64})
    p = _train(cfg, tmp_path / "run")
    out, _ = p.communicate(timeout=600)
    assert p.returncode == 0, out
    assert "imitation" in out and "epoch 2/2" in out, out
