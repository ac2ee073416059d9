"""RLlib PPO on a structured game (Skirmish 3m): the flat parallel env through RLlib's wrapper, one
real iteration with RLlib's default model, and its checkpoint played in the arena through ``rllib:``
without an invalid move; the benchmark against the SCC learner in its smoke mode."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray.rllib")
pytest.importorskip("torch")

from arena.agents.specs import make_agent  # noqa: E402
from arena.envs.registry import make_core  # noqa: E402
from arena.errors import ConfigError, IncompatibleAgent  # noqa: E402
from arena.match.loop import play_match  # noqa: E402
from arena.trainers.registry import read_train_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "train" / "rllib_ppo_skirmish.yaml"
GAME = "arena/Skirmish-3m-v0"
SMALL = dict(iterations=1, train_batch_size=300, minibatch_size=150, num_epochs=2, hidden=[32, 32],
             num_envs_per_env_runner=2, checkpoint_every=1, eval_every=1, eval_games=4)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One PPO iteration on Skirmish 3m, checkpointed and evaluated: (run folder, final metrics)."""
    d = tmp_path_factory.mktemp("rllib_skirmish") / "run"
    entry, cfg = read_train_config(CONFIG, **SMALL)
    assert entry.name == "rllib_ppo"
    t = entry.builder()(cfg, d)
    try:
        assert t.model_config["structured"] and t.model_config["nvec"] == [5, 2, 2, 2, 2, 2, 2, 6, 64]
        final = t.run()
    finally:
        t.close()
    return d, final


def test_the_flat_env_through_rllibs_parallel_wrapper_never_refuses_a_move():
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    from arena.trainers.rllib.ppo import FlatParallelEnv

    env = ParallelPettingZooEnv(FlatParallelEnv(GAME))
    assert set(env.observation_space) == {"red", "blue"}
    assert env.observation_space["red"].shape == (747,)
    assert env.action_space["blue"].nvec.tolist() == [5, 2, 2, 2, 2, 2, 2, 6, 64]
    space = env.action_space["red"]
    space.seed(0)
    obs, _ = env.reset(seed=0)
    ticks, episodes, total = 0, 0, {"red": 0.0, "blue": 0.0}
    while episodes < 2:
        assert all(env.observation_space[a].contains(o) for a, o in obs.items())
        obs, rewards, terms, _, infos = env.step({a: space.sample() for a in obs})
        ticks += 1
        assert not any("invalid_move" in i for i in infos.values())
        for a, r in rewards.items():
            total[a] += r
        if terms["__all__"]:
            episodes += 1
            assert total["red"] == -total["blue"] and abs(total["red"]) in (0.0, 1.0)  # the outcome only
            total = {"red": 0.0, "blue": 0.0}
            obs, _ = env.reset(seed=episodes)
    assert ticks <= 2 * 60


def test_one_iteration_on_skirmish_writes_metrics_and_a_checkpoint(trained):
    d, _ = trained
    lines = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [0, 1]
    it1 = lines[1]
    # one env step is one tick of one game (both seats' moves): the batch counts ticks
    assert 300 <= it1["train/env_steps"] < 300 + 2 * 60
    assert 1 <= it1["train/episode_len"] <= 60
    assert it1["train/return/red"] == pytest.approx(-it1["train/return/blue"], abs=1e-9)  # zero-sum, the same episodes
    assert it1["train/entropy"] > 0 and it1["train/env_steps_per_s"] > 0
    for r in lines:
        assert 0.0 <= r["eval/win_rate/skirmish_attack_nearest"] <= 1.0 and r["eval/invalid_rate"] == 0.0
    module = d / "checkpoints" / "iter-00001" / "learner_group" / "learner" / "rl_module" / "shared"
    assert (module / "module_state.pkl").is_file()
    assert os.readlink(d / "checkpoint") == "checkpoints/iter-00001"


def test_the_checkpoint_plays_skirmish_in_the_arena_without_invalid_moves(trained):
    from arena.agents.rllib_agent import RLlibFlatAgent
    from arena.match.batch import play_matches, summarize

    d, _ = trained
    spec = f"rllib:{d}/checkpoint"
    agent = make_agent(spec, make_core(GAME))
    assert isinstance(agent, RLlibFlatAgent) and agent.greedy
    r = play_match(GAME, [spec, "skirmish:attack_nearest"], seed=1)
    assert r.outcome == "normal" and r.invalid == [0, 0] and 1 <= r.moves <= 60
    again = play_match(GAME, [spec, "skirmish:attack_nearest"], seed=1)
    steps = lambda m: [(s["player"], s["action"]) for s in m.replay.steps if s.get("type") == "step"]  # noqa: E731
    assert steps(again) == steps(r)  # greedy: the same seed, the same match
    # the second seat, sampling, and the arena's batch evaluation
    r2 = play_match(GAME, ["skirmish:focus_fire", f"{spec},greedy=False"], seed=2)
    assert r2.outcome == "normal" and r2.invalid == [0, 0]
    specs = [spec, "skirmish:focus_fire"]
    me = summarize(play_matches(GAME, specs, 4, seed=5, swap_seats=True), specs)[0]
    assert me.games == 4 and me.invalid == 0


def test_a_skirmish_checkpoint_refuses_other_games(trained):
    d, _ = trained
    with pytest.raises(IncompatibleAgent) as e:
        make_agent(f"rllib:{d}/checkpoint", make_core("openspiel/tic_tac_toe-v0"))
    assert "structured" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(IncompatibleAgent) as e:  # another scenario: other slot counts
        make_agent(f"rllib:{d}/checkpoint", make_core("arena/Skirmish-2s3z-v0"))
    assert "747" in str(e.value) and "\n" not in str(e.value)


def test_a_bad_eval_opponent_is_a_config_error_that_writes_nothing(tmp_path):
    from arena.trainers.rllib.ppo import RLlibPPOTrainer

    with pytest.raises(ConfigError) as e:
        _, cfg = read_train_config(CONFIG, **{**SMALL, "eval_opponent": "skirmish:nobody"})
        RLlibPPOTrainer(cfg, tmp_path / "run")
    assert "eval_opponent" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "run").exists()


def test_the_benchmark_runs_in_its_smoke_mode(tmp_path):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", COLUMNS="200")
    png = tmp_path / "curve.png"
    configs = ["--scc-config", "configs/train/scc_skirmish_selfplay.yaml"]  # no imitation stage: the quicker one
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_against_rllib.py"), "--smoke",
                           "--seconds", "3", "--eval-games", "2", "--marks", "2", "--curve-games", "2",
                           "--plot", str(png), *configs], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    learners = [r["learner"] for r in out["runs"]]
    assert learners == ["arena SCC (scc_skirmish_selfplay)", "RLlib PPO"]
    for r in out["runs"]:
        assert r["iterations"] >= 1 and r["env_steps"] > 0 and r["env_steps_per_s"] > 0
        for opp in ("skirmish:attack_nearest", "skirmish:focus_fire"):
            e = r["eval"][opp]
            assert e["games"] == 2 and e["invalid"] == 0 and 0.0 <= e["wilson"][0] <= e["win_rate"] <= e["wilson"][1]
    assert "| arena SCC (scc_skirmish_selfplay) |" in proc.stdout and "| RLlib PPO |" in proc.stdout
    assert "env steps/s, arena SCC (scc_skirmish_selfplay) / RLlib PPO" in proc.stdout
    for r in out["runs"]:  # the curve ends at the final policy, its figures the table's
        last = r["curve"][-1]
        assert last["checkpoint"] == "final" and last["eval"] == r["eval"] and last["iteration"] == r["iterations"]
        assert [p["train_s"] for p in r["curve"]] == sorted(p["train_s"] for p in r["curve"])
    assert "Strength against wall time" in proc.stdout and png.stat().st_size > 10_000


@pytest.fixture
def fake_clock(monkeypatch):
    """The benchmark module with its clock replaced by ``clock["t"]``, which a test moves by hand."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_against_rllib as B
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    clock = {"t": 0.0}
    monkeypatch.setattr(B.time, "perf_counter", lambda: clock["t"])
    return B, clock


def test_the_benchmark_marks_its_budget_at_the_first_iteration_past_each_mark(fake_clock, tmp_path):
    """A mark keeps the checkpoint of the first iteration that ends past it (written if the trainer had
    not: its time is taken off the clock), the seconds and steps then; the stop comes before the
    iteration that would cross the budget."""
    B, clock = fake_clock

    class Fake:
        stop_requested = False

        def checkpoint_dir(self, it):
            return tmp_path / f"iter-{it}"

        def checkpoint(self, it):  # writing takes 2 s, which the budget does not count
            clock["t"] += 2.0
            (tmp_path / f"iter-{it}").mkdir()
            return tmp_path / f"iter-{it}"

    trainer = Fake()
    (tmp_path / "iter-2").mkdir()  # iteration 2's checkpoint is there already: nothing written
    budget = B.Budget(trainer, 30.0, 0.0, B.marks_of(30.0, 3), steps=lambda: 100 * it)
    assert B.marks_of(30.0, 3) == [10.0, 20.0] and B.marks_of(30.0, 1) == [] and B.marks_of(30.0, 0) == []
    for it in range(1, 10):
        clock["t"] += 6.0  # each iteration takes 6 s
        budget(it, 9, {"time/iteration_s": 6.0})
        if trainer.stop_requested:
            break
    # iteration 2 ends at 12 s (past 10: its own checkpoint); iteration 4 at 24 s (past 20: written, 2 s off)
    assert [(p["iteration"], p["train_s"], p["env_steps"]) for p in budget.points] == [(2, 12.0, 200), (4, 24.0, 400)]
    assert budget.points[1]["checkpoint"] == str(tmp_path / "iter-4")
    # iteration 5 ends at 30 s of training (the budget exactly); a 6th would cross it: the stop
    assert it == 5 and trainer.stop_requested and clock["t"] - budget.t0 == 30.0


def test_the_scc_side_trains_to_its_budget_when_its_first_iteration_was_slow(fake_clock):
    """Iteration 1 takes 10 s, the rest 4 s, of a 30 s budget: the count planned from iteration 1 (3)
    ends at 18 s, so it is planned again from the last iteration's pace, and the run ends at 30 s after
    6 iterations (the stop rule: a 7th would cross the budget)."""
    B, clock = fake_clock

    class Fake:
        stop_requested = False
        iteration = 0
        cfg = type("Cfg", (), {"iterations": 99})()
        plans: list[int] = []

        def run(self, iterations, progress):
            self.plans.append(iterations)
            while self.iteration < iterations and not self.stop_requested:
                self.iteration += 1
                pace = 10.0 if self.iteration == 1 else 4.0
                clock["t"] += pace
                progress(self.iteration, iterations, {"time/iteration_s": pace})

        def checkpoint_dir(self, it):  # pragma: no cover - no marks here
            raise AssertionError

    trainer = Fake()
    B.run_to_budget(trainer, B.Budget(trainer, 30.0, 0.0))
    assert trainer.plans == [1, 3, 6] and trainer.iteration == 6 and clock["t"] == 30.0 and trainer.stop_requested
