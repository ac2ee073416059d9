"""``workers`` has an upper bound wherever a person sets it (`arena.workers.check_workers`): 300
workers started 235 processes on a 2-core machine and gave no result in 300 s. ``arena play
--workers``, ``arena league run --workers``, a league config's ``workers`` and a training config's
``il.workers`` (and the trainers' other process counts) are refused in one line before any process
is started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arena.errors import ConfigError
from arena.league.config import load_league_config
from arena.workers import MAX_WORKERS, check_workers

ROOT = Path(__file__).resolve().parents[2]
TTT = "openspiel/tic_tac_toe-v0"


def arena(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, COLUMNS="200"))


def one_line(r: subprocess.CompletedProcess) -> str:
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 2, out
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert out.startswith("error: "), out
    return out


def _league(tmp_path: Path, workers: int, extra: str = "") -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(f"name: w\ngames: [{{id: {TTT}}}]\nplayers: [{{name: a, agent: random}}, {{name: b, agent: first}}]\n"
                 f"matches: 4\nworkers: {workers}\n{extra}")
    return p


def test_check_workers():
    assert check_workers(1) == 1 and check_workers(MAX_WORKERS) == MAX_WORKERS
    for bad in (0, -1, MAX_WORKERS + 1, 300, 2.5, True, "4"):
        with pytest.raises(ConfigError, match=r"^workers must be a whole number in \[1, 64\] \(worker processes; "
                                              r"this machine has \d+ cores?: give at most that many\), got "):
            check_workers(bad)


def test_a_league_config_asking_for_300_workers_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"workers must be a whole number in \[1, 64\].*got 300$"):
        load_league_config(_league(tmp_path, 300))
    assert load_league_config(_league(tmp_path, 2)).workers == 2
    # a Ray cluster may have more machines than one
    assert load_league_config(_league(tmp_path, 300, "backend: ray\n")).workers == 300
    with pytest.raises(ConfigError, match=r"workers must be a whole number in \[1, 1024\]"):
        load_league_config(_league(tmp_path, 100_000, "backend: ray\n"))


def test_league_run_refuses_300_workers_from_the_config_or_the_flag(tmp_path):
    out = one_line(arena("league", "run", _league(tmp_path, 300), "--dir", tmp_path / "L1"))
    assert "workers must be a whole number in [1, 64]" in out and out.endswith("got 300")
    out = one_line(arena("league", "run", _league(tmp_path, 1), "--dir", tmp_path / "L2", "--workers", "300"))
    assert "workers must be a whole number in [1, 64]" in out
    assert not (tmp_path / "L1").exists() and not (tmp_path / "L2").exists()


def test_play_refuses_300_workers_before_starting_any(tmp_path):
    out = one_line(arena("play", TTT, "-p", "random", "-p", "random", "-n", "400", "--workers", "300"))
    assert "workers must be a whole number in [1, 64]" in out and out.endswith("got 300")


def test_training_configs_bound_their_worker_processes(tmp_path):
    from arena.trainers.registry import read_train_config

    base = (ROOT / "configs" / "train" / "scc_connect_four.yaml").read_text()
    assert "  workers: 2\n" in base
    cfg = tmp_path / "t.yaml"
    cfg.write_text(base.replace("  workers: 2\n", "  workers: 300\n"))
    with pytest.raises(ConfigError, match=r"il.workers must be a whole number in \[1, 64\].*got 300"):
        read_train_config(cfg)
    cfg.write_text(base + "actors: 5000\n")
    with pytest.raises(ConfigError, match=r"actors must be a whole number in \[0, 64\].*got 5000"):
        read_train_config(cfg)
    ppo = (ROOT / "configs" / "train" / "prosthetics_ppo.yaml").read_text()
    assert "envs: 2\n" in ppo
    cfg.write_text(ppo.replace("envs: 2\n", "envs: 300\n"))
    with pytest.raises(ConfigError, match=r"envs \(with processes: true, one process each\) must be a whole number "
                                          r"in \[1, 64\]"):
        read_train_config(cfg)
