"""``arena train --parallel ...``: SPIRAL runs whose learner step runs on 2 ranks equal a one-process run,
and checkpoints move between parallel settings with their optimizer state.

The runs (module fixture, about 2 minutes on 2 cores): a one-process reference of 2 iterations
(2 epochs of minibatches of 16 each: 4 AdamW steps), and chains that change the setting at the
checkpoint of iteration 1:

* ``odc -> none`` and ``odc -> fsdp`` (the first through ``arena train`` itself, the CLI);
* ``none -> pipeline (zbv)``;
* ``torchrun -m arena.trainers.run --parallel odc`` for both iterations.

Every run's weights at iteration 2 equal the reference's within 1e-5 (a lost or reset optimizer
state, or Adam's bias correction a step late, moves the weights by about lr = 1e-4), and so do
its training losses; the rollout/trainer mismatch stays at float rounding (the rollout model
gets the new weights after every step).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from arena.errors import ArenaError, ConfigError  # noqa: E402
from arena.inference.models import load_model  # noqa: E402
from arena.trainers.registry import make_trainer  # noqa: E402

TOL = 1e-5
BASE = dict(trainer="spiral", game="openspiel/tic_tac_toe-v0", model="tiny", template="compact", seed=0,
            iterations=2, games_per_iter=8, concurrency=8, max_new_tokens=6, top_k=4,
            threads=1, snapshot_every=1, opponent_mode="fixed", learner={"epochs": 2, "minibatch": 16, "lr": 1e-4},
            tiny_sizes={"hidden": 32, "layers": 4, "heads": 2, "intermediate": 64},
            eval={"every": 2, "games": 4, "opponents": ["random"], "concurrency": 4})
ENV = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", COLUMNS="200")


def _config(tmp: Path, name: str, **parallel) -> Path:
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump({**BASE, "parallel": {"microbatches": 2, **parallel}}))
    return p


def _train(cfg: Path, run: Path, iterations: int | None = None, **overrides) -> None:
    t = make_trainer(cfg, run, iterations=iterations, **overrides)
    try:
        t.run(iterations)
    finally:
        t.close()


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=ENV)


def _resume_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("parallel")
    one = _config(tmp, "one")
    out = {"tmp": tmp}
    _train(one, tmp / "ref")
    out["ref"] = tmp / "ref"
    # odc for iteration 1, through the command line
    r = _cli("train", str(one), "--dir", str(tmp / "odc1"), "--parallel", "odc", "--world-size", "2",
             "--microbatches", "2", "--iterations", "1", cwd=tmp)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out["cli"] = r.stdout
    _train(one, _resume_copy(tmp / "odc1", tmp / "odc-none"))
    _train(one, _resume_copy(tmp / "odc1", tmp / "odc-fsdp"), parallel={"mode": "fsdp"})
    _train(one, tmp / "none1", iterations=1)
    # resumed as a pipeline whose embedding and head are split by vocabulary over the ranks and whose
    # activations leave the device between forward and backward
    _train(one, _resume_copy(tmp / "none1", tmp / "none-vocab-parallel-offload"),
           parallel={"mode": "pipeline", "schedule": "zb1p", "vocab_parallel": True, "offload": "full"})
    torchrun = Path(sys.executable).with_name("torchrun")
    r = subprocess.run([str(torchrun), "--nproc-per-node", "2", "-m", "arena.trainers.run", str(one), "--dir",
                        str(tmp / "torchrun"), "--parallel", "odc"], cwd=tmp, capture_output=True, text=True,
                       timeout=600, env=ENV)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out["torchrun"] = r.stdout
    return out


def _weights_diff(a: Path, b: Path) -> float:
    ma, _ = load_model(a / "latest")
    mb, _ = load_model(b / "latest")
    sb = mb.state_dict()
    return max(float((v - sb[k]).abs().max()) for k, v in ma.state_dict().items())


def _train_lines(run: Path) -> dict[int, dict]:
    out = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        if "train/loss" in r:
            out[r["step"]] = r  # a resumed iteration keeps its last line
    return out


@pytest.mark.parametrize("run", ["odc-none", "odc-fsdp", "none-vocab-parallel-offload", "torchrun"])
def test_a_parallel_run_equals_one_process(runs, run):
    d = runs["tmp"] / run
    assert (d / "latest").resolve().name == "iter-00002"
    assert _weights_diff(runs["ref"], d) < TOL
    ref, got = _train_lines(runs["ref"]), _train_lines(d)
    assert sorted(got) == [1, 2]
    for it in (1, 2):
        assert got[it]["train/loss"] == pytest.approx(ref[it]["train/loss"], abs=TOL)
        assert got[it]["train/grad_norm"] == pytest.approx(ref[it]["train/grad_norm"], rel=1e-4)
        assert got[it]["train/mismatch"] < 1e-6  # the rollouts played the weights the step started from
    if run == "none-vocab-parallel-offload":  # iteration 2 ran with the offload: what stayed on the device and what left
        assert got[2]["train/activations_device_mb"] > 0 and got[2]["train/activations_host_mb"] > 0


def test_the_optimizer_state_moved_with_the_checkpoint(runs):
    # The weights alone are not enough: resumed with a fresh optimizer, iteration 2 lands elsewhere.
    tmp = runs["tmp"]
    d = _resume_copy(tmp / "odc1", tmp / "odc-fresh-opt")
    state_file = (d / "latest").resolve() / "trainer_state.pt"
    state = torch.load(state_file, weights_only=False)
    assert state["optimizer"]["format"] == "arena-named-optimizer/1"
    names = state["optimizer"]["param_groups"][0]["params"]
    assert names[0] == "model.embed_tokens.weight" and "lm_head.weight" not in names  # tied: once
    assert set(state["optimizer"]["state"]) == set(names)
    samples = _train_lines(tmp / "odc1")[1]["train/samples"]
    updates = 2 * -(-samples // 16)  # two epochs of minibatches of 16
    assert float(state["optimizer"]["state"][names[0]]["step"]) == updates
    state["optimizer"]["state"] = {}
    torch.save(state, state_file)
    _train(_config(tmp, "one"), d)
    assert _weights_diff(runs["ref"], d) > 10 * TOL


def test_the_command_line_says_how_the_step_runs(runs):
    assert "learner step: odc on 2 ranks (2 microbatches a rank); rollouts on rank 0" in runs["cli"]
    assert "learner step: odc on 2 ranks under torchrun" in runs["torchrun"]
    assert "iteration 2/2" in runs["torchrun"]


@pytest.mark.parametrize("args, message", [
    (["--parallel", "odc", "--world-size", "1"], "world_size must be >= 2 with mode odc"),
    (["--parallel", "pipeline", "--stages", "2", "--schedule", "nope"], "schedule 'nope' is not one of"),
    (["--parallel", "odc", "--stages", "2"], "--stages is for --parallel pipeline"),
    (["--parallel", "pipeline", "--stages", "2", "--world-size", "3"], "disagree"),
    (["--parallel", "ring"], "--parallel ring: use one of none, pipeline, odc, fsdp"),
    (["--parallel", "odc", "--world-size", "2", "--vocab-parallel"], "--vocab-parallel is for --parallel pipeline"),
    (["--parallel", "pipeline", "--stages", "2", "--vocab-parallel"], "vocab_parallel runs on interleaved_1f1b or zb1p"),
])
def test_bad_parallel_flags_are_one_line(tmp_path, monkeypatch, capsys, args, message):
    # `arena train` in this process, as the console script runs it (the first case as a process of its own)
    argv = ["train", str(_config(tmp_path, "one")), "--dir", str(tmp_path / "run"), *args]
    if args == ["--parallel", "odc", "--world-size", "1"]:
        r = _cli(*argv, cwd=tmp_path)
    else:
        from cli_in_process import arena_here

        r = arena_here(monkeypatch, capsys, *argv, cwd=tmp_path)
    code, err = r.returncode, r.stderr
    assert code == 2 and message in err and "Traceback" not in err and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


def test_what_parallel_does_not_support_yet_is_one_line(tmp_path):
    cfg = _config(tmp_path, "critic", mode="odc")
    data = yaml.safe_load(cfg.read_text())
    with pytest.raises(ConfigError, match="does not support critic: bpco"):
        make_trainer(cfg, tmp_path / "a", learner={"critic": "bpco"})
    with pytest.raises(ConfigError, match="fp32 only"):
        make_trainer(cfg, tmp_path / "b", learner={"train_precision": "bf16"})
    configs = Path(__file__).parents[3] / "configs" / "train"
    r = _cli("train", str(configs / "mixed_tictactoe.yaml"), "--dir", str(tmp_path / "c"), "--parallel", "odc",
             cwd=tmp_path)
    assert r.returncode == 2 and "trainer mixed has no parallel: section" in r.stderr, r.stderr
    r = _cli("train", str(configs / "scc_leduc.yaml"), "--dir", str(tmp_path / "c"), "--parallel", "pipeline",
             "--stages", "2", cwd=tmp_path)
    assert r.returncode == 2 and "pipeline is for the language-model learner" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "arena.trainers.run", str(cfg), "--dir", str(tmp_path / "d")],
                       capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 2 and "runs under torchrun" in r.stderr, r.stderr
    assert data["parallel"]["mode"] == "odc" and not any((tmp_path / x).exists() for x in "abcd")


def test_a_killed_rank_is_one_error_naming_it(tmp_path):
    t = make_trainer(_config(tmp_path, "kill", mode="fsdp"), tmp_path / "run", iterations=1)
    try:
        worker = t.learner.workers.processes[0]
        worker.kill()
        worker.join(10)
        with pytest.raises(ArenaError, match=r"rank 1 of 2 died \(exit code -9"):
            t.run(1)
    finally:
        t.close()  # returns: nothing waits for the dead rank
    assert not worker.is_alive()
