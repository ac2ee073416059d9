"""Training a person can follow and stop: every trainer (ppo, scc, spiral) stops on Ctrl-C with one
line and exit status 130, keeps what it played, says where it resumes; inside an iteration it reports
what it is doing (rollout, update epochs, evaluation, imitation) with the totals a progress bar needs."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")

from arena.league.manager import open_league  # noqa: E402
from arena.trainers.common.stopping import resume_line, stop_line  # noqa: E402


def _ppo_yaml(tmp_path: Path, **changes) -> Path:
    data = {"trainer": "ppo", "game": "plugin/Target-v0", "seed": 0, "envs": 2, "processes": True,
            "steps_per_env": 1500, "iterations": 3, "sizes": {"hidden": [16], "obs_norm": True},
            "learner": {"epochs": 1, "minibatch": 1000}, "reward_scale": 1.0, "eval": {"every": 5, "seeds": [0]}}
    data.update(changes)
    p = tmp_path / "ppo.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def _arena_train(cfg: Path, run: Path, *args: str, **kw) -> subprocess.Popen:
    env = dict(os.environ, COLUMNS="200", OMP_WAIT_POLICY="PASSIVE")
    return subprocess.Popen([sys.executable, "-m", "arena.cli", "train", str(cfg), "--dir", str(run),
                             "--plugin", "plugins.control_games", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, **kw)


def _logged_steps(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["step"] for line in path.read_text().splitlines() if line.endswith("}")]


def test_ctrl_c_at_the_terminal_stops_ppo_over_env_processes_with_one_line(tmp_path):
    """The reported traceback: a terminal's Ctrl-C reaches the env worker processes too, whose
    KeyboardInterrupt failed the rollout (``RuntimeError: ... env 1: KeyboardInterrupt``)."""
    cfg, run = _ppo_yaml(tmp_path), tmp_path / "run"
    p = _arena_train(cfg, run, start_new_session=True)
    deadline = time.time() + 300
    while not _logged_steps(run) and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    assert p.poll() is None, p.communicate()[0]
    os.killpg(p.pid, signal.SIGINT)  # as a terminal does: the trainer and its env processes
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 130 and "Traceback" not in out and "KeyboardInterrupt" not in out, out
    saved = int((run / "latest").resolve().name.removeprefix("iter-"))
    assert saved in (0, 1), out  # the iteration it was in is finished and saved (or none had begun)
    assert f"stopped at iteration {saved}: run the same command again to resume ({run}/latest)" in out, out

    p = _arena_train(cfg, run, "--iterations", str(saved + 1))
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out
    assert f"resuming from iteration {saved} of {saved + 1} ({run}/latest)" in out.splitlines()[0], out
    assert _logged_steps(run) == list(range(saved + 2))  # none redone, none skipped


def test_the_stop_and_resume_lines(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert resume_line(run, 5) is None
    assert stop_line(run) == "stopped before iteration 0 was saved: run the same command again to resume"
    (run / "checkpoints" / "iter-00003").mkdir(parents=True)
    (run / "latest").symlink_to(Path("checkpoints") / "iter-00003")
    assert stop_line(run) == f"stopped at iteration 3: run the same command again to resume ({run}/latest)"
    assert resume_line(run, 5) == f"resuming from iteration 3 of 5 ({run}/latest)"


# -- progress inside an iteration -------------------------------------------------------------------
class Phases(list):
    """A fake progress sink: records every (text, done, total)."""

    def __call__(self, text: str, done: int, total: int) -> None:
        self.append((text, done, total))

    def of(self, text: str) -> list[tuple[int, int]]:
        return [(d, t) for x, d, t in self if x == text]


def test_ppo_reports_rollout_update_epochs_and_evaluation(tmp_path):
    from arena.envs import load_plugin
    from arena.trainers.registry import make_trainer

    load_plugin("plugins.control_games")
    cfg = _ppo_yaml(tmp_path, processes=False, steps_per_env=40, iterations=1,
                    learner={"epochs": 3, "minibatch": 20, "target_kl": None}, eval={"every": 1, "seeds": [0, 1, 2]})
    t = make_trainer(cfg, tmp_path / "run")
    phases = Phases()
    try:
        t.run(phase=phases)
    finally:
        t.close()
    # iteration 0 and 1 each play 2 env slots x 40 steps; a report as each slot's segment comes back
    roll = phases.of("rollout: samples")
    assert roll == [(0, 80), (40, 80), (80, 80)] * 2
    # iteration 1's update: 3 passes of PPO
    assert phases.of("update: epochs") == [(0, 3), (1, 3), (2, 3), (3, 3)]
    # an evaluation at iteration 0 and at 1: 3 episodes each
    # (the 3 seeds split over the 2 slots: a report as each slot's episodes come back)
    ev = phases.of("evaluation: episodes")
    starts = [i for i, r in enumerate(ev) if r == (0, 3)]
    assert len(starts) == 2 and ev[starts[1] - 1] == (3, 3) and ev[-1] == (3, 3)
    assert all(d == sorted(d) for d in ([x for x, _ in ev[:starts[1]]], [x for x, _ in ev[starts[1]:]]))
    # in order: rollout, evaluation (iteration 0), then rollout, update, evaluation (iteration 1)
    stages = [x.split(":")[0] for x, _, _ in phases]
    assert [s for i, s in enumerate(stages) if i == 0 or s != stages[i - 1]] == [
        "rollout", "evaluation", "rollout", "update", "evaluation"]


def test_scc_reports_imitation_rollout_update_epochs_and_evaluation(tmp_path):
    from trainers.policy.test_resume_same_run import config

    from arena.trainers.policy.scc import SCCTrainer

    cfg = config(iterations=1, learner={"epochs": 2}, learners=[{"name": "main", "role": "main"},
                                                   {"name": "main_exploiter", "role": "main_exploiter"}],
                 eval={"every": 1, "games": 4, "opponents": ["random", "first"]})
    t = SCCTrainer(cfg, tmp_path / "run")
    phases = Phases()
    try:
        t.run(phase=phases)
    finally:
        t.close()
    teacher = phases.of("imitation: teacher matches")
    assert teacher[0] == (0, 24) and teacher[-1] == (24, 24)
    assert [(d, n) for x, d, n in phases if x.startswith("imitation: epoch ")] == [(1, 3), (2, 3), (3, 3)]
    # two learners x 8 matches, two learners x 2 passes, two opponents x 4 greedy games (at 0 and 1)
    assert phases.of("rollout: matches") == [(0, 16), (16, 16)]
    assert phases.of("update: epochs") == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert phases.of("evaluation: games") == [(0, 8), (4, 8), (8, 8)] * 2
    stages = [x.split(":")[0] for x, _, _ in phases]
    assert [s for i, s in enumerate(stages) if i == 0 or s != stages[i - 1]] == [
        "imitation", "evaluation", "rollout", "update", "evaluation"]


def test_scc_stopped_during_its_teacher_matches_keeps_them_and_plays_only_the_rest(tmp_path, monkeypatch):
    """Ctrl-C after 10 of the 24 teacher matches: the 10 are in the league; the next start plays the
    other 14 (with the seeds and seats they have among all 24) and ends as a run that never stopped."""
    from trainers.policy.test_resume_same_run import assert_same_run, config, train

    from arena.match import pool

    cfg = config(iterations=1)
    whole = train(cfg, tmp_path / "whole")
    real = pool.run_match_job
    seeds: list[int] = []

    def counted(job, *a, **kw):
        if job.game.endswith("tic_tac_toe-v0") and len(seeds) == stop_after:
            raise KeyboardInterrupt
        seeds.append(job.seed)
        return real(job, *a, **kw)

    monkeypatch.setattr(pool, "run_match_job", counted)
    stop_after = 10
    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "cut")
    assert seeds == [22 + i for i in range(10)]  # seed 5 + 17 + i

    store = open_league(tmp_path / "cut")
    try:
        kept = [m for m in store.matches() if m.note == "imitation"]
        assert [m.seed for m in kept] == seeds and all(store.result_for(m.match_id) for m in kept)
    finally:
        store.close()
    assert not (tmp_path / "cut" / "latest").exists()

    seeds.clear()
    stop_after = -1
    again = train(cfg, tmp_path / "cut")
    assert seeds == [22 + i for i in range(10, 24)]  # only the rest
    assert open_league(again.league_dir).result_count() == open_league(whole.league_dir).result_count()
    assert_same_run(whole, tmp_path / "whole", again, tmp_path / "cut")


def _spiral_cfg(tmp_path, **changes):
    from arena.trainers.registry import load_train_config

    root = Path(__file__).parents[2]
    data = yaml.safe_load((root / "configs" / "train" / "spiral_tictactoe_tiny.yaml").read_text())
    data.update(iterations=1, games_per_iter=8, concurrency=8, threads=1)
    data["learner"].update(minibatch=64, epochs=2)
    data["eval"] = {"every": 1, "games": 4, "opponents": ["random", "first"], "concurrency": 8}
    data["il"] = {"agents": ["random", "random"], "matches": 12, "epochs": 1, "lr": 2e-3, "batch_size": 32}
    data.update(changes)
    p = tmp_path / "spiral.yaml"
    p.write_text(yaml.safe_dump(data))
    return load_train_config(p)


def _spiral(cfg, folder, phase=None):
    from arena.trainers.llm.spiral import SpiralTrainer

    t = SpiralTrainer(cfg, folder)
    try:
        t.run(phase=phase)
    finally:
        t.close()
    return t


def test_spiral_reports_imitation_rollout_update_epochs_and_evaluation(tmp_path):
    phases = Phases()
    _spiral(_spiral_cfg(tmp_path), tmp_path / "run", phases)
    matches = phases.of("imitation: playing matches")
    assert matches[0] == (0, 12) and matches[-1] == (12, 12)
    examples = phases.of("imitation: examples")
    assert examples[0][0] == 0 and examples[-1][0] == examples[-1][1] > 0  # every example of the one epoch
    assert phases.of("rollout: matches") == [(0, 8), (8, 8)]
    assert phases.of("update: epochs") == [(0, 2), (1, 2), (2, 2)]
    assert phases.of("evaluation: games") == [(0, 8), (4, 8), (8, 8)] * 2  # iterations 0 and 1
    stages = [x.split(":")[0] for x, _, _ in phases]
    assert [s for i, s in enumerate(stages) if i == 0 or s != stages[i - 1]] == [
        "imitation", "evaluation", "rollout", "update", "evaluation"]


def test_spiral_stopped_during_its_imitation_matches_keeps_them_and_plays_only_the_rest(tmp_path, monkeypatch):
    from arena.match import pool
    from arena.trainers.common.metrics import read_metrics

    cfg = _spiral_cfg(tmp_path, iterations=0)
    whole = _spiral(cfg, tmp_path / "whole")
    real = pool.run_match_job
    seeds: list[int] = []
    stop_after = [5]

    def counted(job, *a, **kw):
        if len(seeds) == stop_after[0]:
            raise KeyboardInterrupt
        seeds.append(job.seed)
        return real(job, *a, **kw)

    monkeypatch.setattr(pool, "run_match_job", counted)
    with pytest.raises(KeyboardInterrupt):
        _spiral(cfg, tmp_path / "cut")
    assert seeds == [17 + i for i in range(5)]  # seed 0 + 17 + i
    assert len(list((tmp_path / "cut" / "imitation-matches").iterdir())) == 5
    seeds.clear()
    stop_after[0] = -1
    again = _spiral(cfg, tmp_path / "cut")
    assert seeds == [17 + i for i in range(5, 12)]  # only the rest
    # the same imitation: the same losses and weights as a run that never stopped
    il = [r["il/loss"] for r in read_metrics(tmp_path / "whole" / "metrics.jsonl") if "il/loss" in r]
    assert il and il == [r["il/loss"] for r in read_metrics(tmp_path / "cut" / "metrics.jsonl") if "il/loss" in r]
    for a, b in zip(whole.model.parameters(), again.model.parameters()):
        assert torch.equal(a, b)
