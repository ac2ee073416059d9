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


def test_a_trust_region_on_a_moves_probability_is_refused_for_box_moves(tmp_path):
    with pytest.raises(ConfigError) as e:
        _trainer(tmp_path, learner={"loss": "dppo_binary_tv"})
    assert ("plugin/Target-v0's moves draw from a box (a density): use learner.algo: dppo (the exact KL of the "
            "move's distributions) or learner.loss: ppo_clip") in str(e.value)
    assert "\n" not in str(e.value) and not (tmp_path / "run").exists()


def test_rollout_bootstraps_cut_episodes_and_not_ended_ones(tmp_path, monkeypatch):
    t = _trainer(tmp_path, steps_per_env=20, learner={"epochs": 2, "minibatch": 32, "gamma": 0.9})  # Target-v0 episodes are 8 steps
    from arena.trainers.policy import segments

    monkeypatch.setattr(segments._Recorder, "value_of", lambda self, core: 100.0)  # V(s') of the cut episodes
    try:
        batch, stats = t.collect(1)
        assert batch.inputs["obs"].shape == (20, 2, 2) and batch.actions.shape == (20, 2, 2)
        # steps 7 and 15 end an episode by the time limit, step 19 is cut by the segment: discount 0 and
        # gamma * V(next) = 0.9 * 100 folded into the reward; every other step has discount gamma
        d = batch.discounts.numpy()
        cut = [7, 15, 19]
        assert (d[cut] == 0).all() and np.allclose(np.delete(d, cut, axis=0), 0.9)
        # the env's reward is minus the squared distance of the (clipped) action to the target it showed
        r = -((np.clip(batch.actions.numpy(), -1, 1) - batch.inputs["obs"].numpy()) ** 2).sum(-1)
        bonus = np.zeros((20, 2))
        bonus[cut] = 90.0
        assert batch.rewards.numpy() == pytest.approx(r + bonus, abs=1e-4)
        assert stats["train/episodes"] == 4 and stats["train/episode_len"] == 8
        assert stats["train/lost_segments"] == 0 and stats["train/sim_errors"] == 0
        assert segments._CACHE["core"].env.unwrapped.t == 4  # slot 1's third episode started at step 16: 4 steps
    finally:
        t.close()


def _same_batch(a, b) -> bool:
    pairs = [(a.inputs["obs"], b.inputs["obs"]), (a.actions, b.actions)] + [
        (getattr(a, k), getattr(b, k)) for k in ("behaviour_logp", "behaviour_value", "rewards", "discounts", "valid")]
    return all(torch.equal(x, y) for x, y in pairs)


def test_worker_processes_play_the_in_process_batch(tmp_path):
    # the env slots on the match pool: in workers (the weights travel) or in this process (the
    # learner's network): the same samples, returns and evaluation, whatever order segments come back in
    out = []
    for processes in (True, False):
        t = _trainer(tmp_path, f"p{processes}", game="CartPole-v1", processes=processes, steps_per_env=48)
        try:
            batch, stats = t.collect(3)
            out.append((batch, stats, t.evaluate(seeds=[4, 5, 6], greedy=False)))
        finally:
            t.close()
    (a, sa, ea), (b, sb, eb) = out
    assert _same_batch(a, b) and sa == sb and ea == eb
    assert a.discounts.shape == (48, 2) and sa["train/episodes"] >= 2 and (a.discounts == 0).sum() >= 2


def test_a_worker_that_dies_mid_segment_loses_nothing(tmp_path):
    # the worker playing a segment is killed at a step: the segments it held are played again from
    # their seeds, and the batch is the batch of a run where nothing died
    marker = tmp_path / "crash-marker"
    marker.touch()
    t = _trainer(tmp_path, "crash", processes=True, game_kwargs={"crash_marker": str(marker)})
    ref = _trainer(tmp_path, "ref", processes=False, game_kwargs={"crash_marker": str(tmp_path / "none")})
    try:
        batch, stats = t.collect(1)
        assert not marker.exists() and t.rollouts.replayed >= 1  # a worker died, its segment was sent again
        expect, _ = ref.collect(1)
        assert _same_batch(batch, expect) and stats["train/lost_segments"] == 0 and bool(batch.valid.all())
    finally:
        t.close()
        ref.close()


def test_a_segment_lost_again_and_again_is_left_out(tmp_path, monkeypatch):
    # a segment whose worker dies at every attempt is masked out of the batch (and counted); the
    # learner steps on the rest
    from arena.match.pool import MatchPool, WorkerLost
    from arena.trainers.policy import segments

    class DyingForSlot1(MatchPool):
        def send(self, key, work):
            if getattr(work, "slot", None) == 1 and work.episodes is None:
                self._impl._done.append((key, WorkerLost("killed")))
            else:
                super().send(key, work)

    monkeypatch.setattr(segments.Rollouts, "_ensure_pool",
                        lambda self: self._pool or setattr(self, "_pool", DyingForSlot1("inline")) or self._pool)
    t = _trainer(tmp_path, steps_per_env=16)
    try:
        batch, stats = t.collect(1)
        assert stats["train/lost_segments"] == 1 and t.rollouts.replayed == segments.MAX_ATTEMPTS - 1
        assert bool(batch.valid[:, 0].all()) and not bool(batch.valid[:, 1].any()) and batch.moves == 16
        before = _weights(t)
        out = t.learner.step(batch, 0.0, torch.Generator().manual_seed(0))
        assert all(np.isfinite(v) for v in out.values())
        assert any(not torch.equal(before[k], v) for k, v in t.net.state_dict().items())
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


def test_dppo_on_the_exact_gaussian_kl_learns_the_continuous_task(tmp_path):
    """``learner.algo: dppo``: PPO's loop with DPPO's trust region on each move's exact Gaussian KL from the
    weights that played it. It learns the task from about -5.3 an episode (seeds 0, 1, 2: -0.26 / -0.19 /
    -0.28 after 40 iterations, eps 0.02; PPO -0.10 / -0.11 / -0.12), masking 8-10% of the moves, and
    logs each update's KL between successive policies (0.024-0.027 on average; PPO's 0.015-0.019)."""
    t = _trainer(tmp_path, iterations=40, steps_per_env=128, lr=1e-3,
                 learner={"algo": "dppo", "epochs": 4, "minibatch": 32, "gamma": 0.5,
                          "loss_kwargs": {"eps": 0.02}},
                 eval={"every": 40, "seeds": list(range(8))})
    out = t.run()
    t.close()
    assert out["eval/return"] > -0.5
    import json

    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    masked = [r["train/mask_frac"] for r in rows if "train/mask_frac" in r]
    kls = [r["train/kl_update"] for r in rows if "train/kl_update" in r]
    assert len(masked) == 40 and max(masked) > 0.0 and all(0.0 <= m <= 1.0 for m in masked)
    assert len(kls) == 40 and all(k >= 0.0 for k in kls) and max(kls) > 0.0


@pytest.mark.parametrize("learner,message", [
    ({"algo": "dppo", "loss": "dppo_binary_kl"}, "learner.algo: dppo bounds the exact divergence"),
    ({"loss": "dppo_exact_kl"}, "learner.loss dppo_exact_kl reads the divergence the dppo loop measures: set "
                                "learner.algo: dppo"),
])
def test_dppo_settings_that_cannot_run_are_one_line(tmp_path, learner, message):
    with pytest.raises(ConfigError) as e:
        _trainer(tmp_path, learner=learner)
    assert message in str(e.value) and "\n" not in str(e.value)
