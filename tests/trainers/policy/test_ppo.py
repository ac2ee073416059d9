"""The single-agent PPO trainer (``trainer: ppo``): rollouts and their bootstrap, reproducibility,
exact resume, and learning checks that can fail (a continuous task and CartPole in about a minute)."""

from pathlib import Path

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")

from arena.envs import load_plugin  # noqa: E402
from arena.errors import ConfigError  # noqa: E402
from arena.trainers.registry import make_trainer  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def control_plugin():
    load_plugin("plugins.control_games")


def _trainer(tmp_path: Path, name: str = "run", **cfg):
    data = {"trainer": "ppo", "game": "plugin/Target-v0", "seed": 0, "envs": 2, "processes": False,
            "steps_per_env": 64, "iterations": 2, "sizes": {"hidden": [32, 32], "obs_norm": True},
            "learner": {"epochs": 2, "minibatch": 32}, "reward_scale": 1.0, "eval": {"every": 1, "seeds": [0, 1]}}
    data.update(cfg)
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data))
    return make_trainer(p, tmp_path / name)


def _weights(t) -> dict:
    return {k: v.clone() for k, v in t.net.state_dict().items()}


def test_two_player_games_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="single-agent tasks.*trainer: scc"):
        _trainer(tmp_path, game="openspiel/tic_tac_toe-v0")


def test_rollout_bootstraps_cut_episodes_and_not_ended_ones(tmp_path, monkeypatch):
    t = _trainer(tmp_path, steps_per_env=20, learner={"epochs": 2, "minibatch": 32, "gamma": 0.9})  # Target-v0 episodes are 8 steps
    monkeypatch.setattr(t, "_values", lambda obs: np.full(len(obs), 100.0))  # V(s') of the cut episodes
    try:
        batch, stats = t.collect(1)
        assert batch.obs.shape == (20, 2, 2) and batch.actions.shape == (20, 2, 2)
        # steps 7 and 15 end an episode by the time limit, step 19 is cut by the segment: discount 0 and
        # gamma * V(next) = 0.9 * 100 folded into the reward; every other step has discount gamma
        d = batch.discounts.numpy()
        cut = [7, 15, 19]
        assert (d[cut] == 0).all() and np.allclose(np.delete(d, cut, axis=0), 0.9)
        # the env's reward is minus the squared distance of the (clipped) action to the target it showed
        r = -((np.clip(batch.actions.numpy(), -1, 1) - batch.obs.numpy()) ** 2).sum(-1)
        bonus = np.zeros((20, 2))
        bonus[cut] = 90.0
        assert batch.rewards.numpy() == pytest.approx(r + bonus, abs=1e-4)
        assert stats["train/episodes"] == 4 and stats["train/episode_len"] == 8
        assert t.envs._local[0].unwrapped.t == 4  # a third episode started at step 16, 4 steps played
    finally:
        t.close()


def test_same_seed_same_run_and_resume_is_exact(tmp_path):
    a = _trainer(tmp_path, "a")
    a.run()
    a.close()
    b = _trainer(tmp_path, "b")
    b.run(iterations=1)  # stopped after iteration 1 ...
    b.close()
    b = _trainer(tmp_path, "b")  # ... and resumed from its checkpoint
    assert b.iteration == 1
    b.run()
    b.close()
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert float(wa["obs_count"]) == 3 * 2 * 64  # iterations 0 (the warm-up), 1 and 2, each seen once
    from arena.trainers.common.metrics import read_metrics

    ra, rb = read_metrics(tmp_path / "a" / "metrics.jsonl"), read_metrics(tmp_path / "b" / "metrics.jsonl")
    assert [r.get("eval/return") for r in ra] == [r.get("eval/return") for r in rb]
    assert (tmp_path / "a" / "best" / "policy.pt").exists() and (tmp_path / "a" / "curves.png").exists()


def test_the_checkpoint_plays_as_a_policy_agent(tmp_path):
    t = _trainer(tmp_path, iterations=1)
    t.run()
    t.close()
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.match.loop import play_match

    core = make_core("plugin/Target-v0")
    agent = make_agent(f"policy:{tmp_path / 'run' / 'best'},greedy=true", core, 0)
    res = play_match(core, [agent], seed=0)
    assert res.moves == 8 and res.returns[0] < 0


def test_a_continuous_task_is_learned_within_seconds(tmp_path):
    # the first greedy policy acts at the box's centre: -|target|^2, about -2/3 a step (-5.3 an
    # episode); the Gaussian policy learns to follow the target (seeds 0, 1, 2: -0.08, -0.11, -0.12 after 40
    # iterations)
    t = _trainer(tmp_path, iterations=40, steps_per_env=128, lr=1e-3,
                 learner={"epochs": 4, "minibatch": 32, "gamma": 0.5},
                 eval={"every": 40, "seeds": list(range(8))})
    first = t.evaluate()["eval/return"]
    out = t.run()
    t.close()
    assert first < -4.0
    assert out["eval/return"] > -0.5


def test_cartpole_is_learned_in_about_a_minute(tmp_path):
    # discrete actions through the same trainer: 200+ of 500 after 25 iterations (seeds 0, 1, 2: 500 each)
    t = _trainer(tmp_path, game="CartPole-v1", envs=4, processes=True, iterations=25, steps_per_env=128,
                 learner={"epochs": 4, "minibatch": 64}, lr=1e-3, sizes={"hidden": [64, 64]},
                 eval={"every": 25, "seeds": [0, 1, 2, 3]})
    try:
        out = t.run()
    finally:
        t.close()
    assert out["eval/return"] >= 200
