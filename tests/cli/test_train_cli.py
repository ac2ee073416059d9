"""`arena train` from the terminal: a config error writes nothing; Ctrl-C checkpoints the finished
iterations and says how to continue (a parallel run too: its serving rank outlives the Ctrl-C); the same
command resumes and says from where."""

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
    cfg.update(iterations=6, games_per_iter=8, concurrency=8, il=None, threads=1, snapshot_every=10)
    cfg["learner"]["minibatch"] = 64
    cfg["eval"] = {"every": 10, "games": 8, "opponents": ["random"], "concurrency": 8}
    cfg.update(changes)
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def _train(cfg: Path, run: Path, *args: str, **kw) -> subprocess.Popen:
    env = dict(os.environ, COLUMNS="200", OMP_WAIT_POLICY="PASSIVE")
    return subprocess.Popen([sys.executable, "-m", "arena.cli", "train", str(cfg), "--dir", str(run), *args],
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
    assert f"stopped at iteration {stopped_at}: run the same command again to resume ({run}/latest)" in out, out
    assert "Traceback" not in out, out
    assert (run / "latest").resolve().name == f"iter-{stopped_at:05d}"

    p = _train(cfg, run)
    out, _ = p.communicate(timeout=600)
    assert p.returncode == 0, out
    assert f"resuming from iteration {stopped_at} of 6" in out, out
    # every iteration trained exactly once: none redone, none skipped
    assert _steps(run) == list(range(1, 7)), _steps(run)


def test_ctrl_c_at_the_terminal_stops_a_parallel_run_cleanly(tmp_path):
    # A terminal's Ctrl-C reaches every process of the foreground group: the serving rank too. It
    # must not die mid-step; rank 0 finishes the iteration, checkpoints it and stops it.
    cfg, run = _cfg(tmp_path, iterations=40, tiny_sizes={"hidden": 32, "layers": 2, "heads": 2,
                                                          "intermediate": 64}), tmp_path / "run"
    p = _train(cfg, run, "--parallel", "odc", "--world-size", "2", start_new_session=True)
    deadline = time.time() + 600
    while len(_steps(run)) < 2 and time.time() < deadline and p.poll() is None:
        time.sleep(0.2)
    assert p.poll() is None, p.communicate()[0]
    os.killpg(p.pid, signal.SIGINT)  # as a terminal does
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 130 and "Traceback" not in out and "failed" not in out, out
    stopped_at = _steps(run)[-1]
    assert f"stopped at iteration {stopped_at}: run the same command again to resume" in out, out
    # nothing of the run outlives it (an orphan's zombie under an init that does not reap is no process)
    deadline = time.time() + 30
    while True:
        ps = subprocess.run(["ps", "-o", "stat=,args=", "-g", str(p.pid)], capture_output=True, text=True).stdout
        alive = [line for line in ps.splitlines() if line.strip() and not line.strip().startswith("Z")]
        if not alive or time.time() > deadline:
            break
        time.sleep(0.5)
    assert not alive, alive
    # and it resumes on one process
    p = _train(cfg, run, "--iterations", str(stopped_at + 1))
    out, _ = p.communicate(timeout=600)
    assert p.returncode == 0 and f"resuming from iteration {stopped_at} of {stopped_at + 1}" in out, out
    assert _steps(run) == list(range(1, stopped_at + 2))


def test_the_imitation_warm_start_shows_progress(tmp_path):
    cfg = _cfg(tmp_path, iterations=1, il={"agents": ["random", "random"], "matches": 200, "epochs": 2, "lr": 2e-3,
                                          "batch_size": 64})
    p = _train(cfg, tmp_path / "run")
    out, _ = p.communicate(timeout=600)
    assert p.returncode == 0, out
    assert "imitation" in out and "epoch 2/2" in out, out
