"""The magnet of the SCC learner's KL (``magnet:``): the uniform policy's KL is the KL to uniform over
the legal moves, for both losses and both directions; a copy magnet is each learner's weights of
every N-th iteration, saved with the checkpoint so a resumed run equals one that never stopped; bad
values are one-line errors."""

import pytest

torch = pytest.importorskip("torch")

from arena.config import from_dict  # noqa: E402
from arena.errors import ConfigError  # noqa: E402
from arena.inference.policy_nets import PolicySpec, build_policy  # noqa: E402
from arena.trainers.policy.config import MagnetConfig, SCCConfig  # noqa: E402
from arena.trainers.policy.learner import LearnerSettings, PolicyLearner, RolloutBatch, UniformMagnet  # noqa: E402
from arena.trainers.policy.scc import SCCTrainer  # noqa: E402
from .test_scc import train  # noqa: E402

SPEC = PolicySpec("test/bandit-v0", (4,), "discrete", n_actions=3)
GAME = "openspiel/tic_tac_toe-v0"


def masked_batch(net, T=2, B=8):
    """Moves with 2 or 3 legal actions (alternating columns); one-move returns of +-1."""
    g = torch.Generator().manual_seed(0)
    obs = torch.randn(T, B, 4, generator=g)
    mask = torch.ones(T, B, 3, dtype=torch.bool)
    mask[:, ::2, 2] = False
    with torch.no_grad():
        dist, value = net(obs.reshape(T * B, 4), mask.reshape(T * B, 3))
        a = dist.sample(g)
        logp = dist.log_prob(a)
    rewards = torch.zeros(T, B)
    rewards[-1] = torch.where(a.reshape(T, B)[-1] == 0, 1.0, -1.0)
    disc = torch.ones(T, B)
    disc[-1] = 0.0
    return RolloutBatch({"obs": obs, "mask": mask}, a.reshape(T, B), logp.reshape(T, B), value.reshape(T, B), rewards, disc,
                        torch.ones(T, B, dtype=torch.bool))


@pytest.mark.parametrize("algo", ["ppo", "vtrace"])
@pytest.mark.parametrize("direction", ["anchor_to_policy", "policy_to_anchor"])
def test_the_uniform_magnets_kl_is_the_kl_to_uniform_over_the_legal_moves(algo, direction):
    torch.manual_seed(4)
    net = build_policy(SPEC, hidden=[16])
    with torch.no_grad():
        net.heads.to_action.logits.bias.copy_(torch.tensor([1.0, -0.5, 0.3]))
    batch = masked_batch(net)
    with torch.no_grad():
        p = net(batch.inputs["obs"].reshape(-1, 4), batch.inputs["mask"].reshape(-1, 3))[0].probs
    mask = batch.inputs["mask"].reshape(-1, 3)
    n = mask.sum(-1).float()
    logp = torch.where(p > 0, p.log(), torch.zeros(()))
    if direction == "policy_to_anchor":  # sum pi log pi + log n
        by_hand = (p * logp).sum(-1) + n.log()
    else:  # -log n - mean over the legal moves of log pi
        by_hand = -n.log() - (logp * mask).sum(-1) / n
    s = LearnerSettings(algo=algo, epochs=1, minibatch=64, kl_direction=direction)
    stats = PolicyLearner(net, s, lr=0.0, anchor=UniformMagnet()).step(
        batch, kl_coef=1.0, generator=torch.Generator().manual_seed(0))
    assert stats["kl_anchor"] == pytest.approx(float(by_hand.mean()), rel=1e-5)
    assert float(by_hand.mean()) > 0.05


def test_the_uniform_magnet_pulls_towards_uniform():
    torch.manual_seed(5)
    net = build_policy(SPEC, hidden=[16])
    with torch.no_grad():
        net.heads.to_action.logits.bias.copy_(torch.tensor([3.0, -3.0, 0.0]))
    s = LearnerSettings(epochs=4, minibatch=64, upgo_coef=0.0, value_coef=0.0, entropy_coef=0.0)
    lrn = PolicyLearner(net, s, lr=1e-2, anchor=UniformMagnet())
    first = lrn.step(masked_batch(net), kl_coef=50.0, generator=torch.Generator().manual_seed(0))["kl_anchor"]
    for i in range(10):
        last = lrn.step(masked_batch(net), kl_coef=50.0, generator=torch.Generator().manual_seed(i))["kl_anchor"]
    assert last < 0.3 * first


def config(**kw) -> SCCConfig:
    base = {"game": GAME, "seed": 2, "threads": 1, "sizes": {"hidden": [32], "channels": 8}, "il": None,
            "learners": [{"name": "main", "role": "main"}], "iterations": 5, "games_per_iter": 8,
            "snapshot_every": 0, "kl_coef": 0.5, "magnet": {"kind": "copy", "every": 2},
            "eval": {"every": 5, "games": 4}}
    base.update(kw)
    return from_dict(SCCConfig, base)


def _state(folder, it):
    return torch.load(folder / "checkpoints" / f"iter-{it:05d}" / "trainer_state.pt", weights_only=False)


def _same(a: dict, b: dict) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def test_the_copy_magnet_is_the_learners_weights_of_every_nth_iteration(tmp_path):
    t = train(config(), tmp_path / "run")
    states = [_state(tmp_path / "run", it) for it in range(6)]
    for it, st in enumerate(states):
        magnet, net = st["magnets"]["main"], st["learners"]["main"]["net"]
        assert _same(magnet, net) == (it % 2 == 0), it
        assert _same(magnet, states[it - it % 2]["learners"]["main"]["net"]), it
    assert t.learners["main"].anchor is t.magnets["main"]
    assert _same(t.magnets["main"].state_dict(), states[4]["learners"]["main"]["net"])
    import json

    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r.get("train/magnet_refresh")] == [2, 4]


def test_a_resumed_copy_magnet_run_equals_one_that_never_stopped(tmp_path):
    whole = train(config(), tmp_path / "whole")
    train(config(), tmp_path / "cut", 3)  # stopped after iteration 3: the magnet of iteration 2 must come back
    again = train(config(), tmp_path / "cut")
    assert again.iteration == 5
    assert _same(whole.learners["main"].net.state_dict(), again.learners["main"].net.state_dict())
    assert _same(whole.magnets["main"].state_dict(), again.magnets["main"].state_dict())


def test_the_uniform_magnet_runs_without_imitation(tmp_path):
    import json

    t = train(config(magnet={"kind": "uniform"}, iterations=1), tmp_path / "u")
    assert isinstance(t.learners["main"].anchor, UniformMagnet) and not t.magnets
    rows = [json.loads(x) for x in (tmp_path / "u" / "metrics.jsonl").read_text().splitlines()]
    assert [r["train/kl_anchor"] for r in rows if "train/kl_anchor" in r][0] > 0


@pytest.mark.parametrize("change,message", [
    ({"magnet": {"kind": "copy"}}, "magnet.every: a copy magnet is refreshed every N >= 1 iterations"),
    ({"magnet": {"kind": "imitation", "every": 5}}, "magnet.every is for magnet.kind copy"),
    ({"magnet": {"kind": "anchor"}}, "magnet.kind"),
    ({"magnet": {"kind": "copy", "every": 2, "coef": 1.0}}, "coef"),
    ({"kl_end": -0.1}, "kl_coef and kl_end (the magnet's coefficient) must be >= 0"),
])
def test_magnet_config_errors_are_one_line(change, message):
    with pytest.raises(ConfigError) as e:
        config(**change)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_uniform_magnet_pulls_a_structured_move_and_a_box_is_refused(tmp_path):
    """Every part with a finite set of choices has its uniform counterpart (a structured game trains
    with it); a move drawn from a box has none."""
    import json

    from arena.envs import load_plugin

    load_plugin("plugins.squad_games")
    t = train(config(game="test/Squads-v0", magnet={"kind": "uniform"}, iterations=1), tmp_path / "squads")
    assert isinstance(t.learners["main"].anchor, UniformMagnet)
    rows = [json.loads(x) for x in (tmp_path / "squads" / "metrics.jsonl").read_text().splitlines()]
    kl = [r["train/kl_anchor"] for r in rows if "train/kl_anchor" in r]
    assert kl and all(0 < k < 50 for k in kl)
    box = build_policy(PolicySpec("test/box-v0", (4,), "continuous", action_shape=(2,), low=(0.0, 0.0),
                                  high=(1.0, 1.0)), hidden=[16])
    obs = torch.randn(3, 2, 4)
    with torch.no_grad():
        dist, value = box(obs.reshape(6, 4))
        a = dist.sample()
    batch = RolloutBatch({"obs": obs}, a.reshape(3, 2, 2), dist.log_prob(a).reshape(3, 2), value.reshape(3, 2),
                         torch.zeros(3, 2), torch.ones(3, 2), torch.ones(3, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="magnet.kind uniform needs moves with a finite set of choices"):
        PolicyLearner(box, LearnerSettings(epochs=1), anchor=UniformMagnet()).step(batch, kl_coef=1.0)


def test_kl_coef_without_a_magnet_section_keeps_the_imitation_anchor():
    cfg = from_dict(SCCConfig, {"kl_coef": 0.5, "kl_end": 0.05})
    assert cfg.magnet == MagnetConfig("imitation", 0)
    assert cfg.kl_at(1) == pytest.approx(0.5) and cfg.kl_at(cfg.iterations) == pytest.approx(0.05)


def test_a_restarting_copy_magnet_runs_the_schedules_again_in_each_stage():
    """R-NaD's stages: the learning rate and the KL weight go from their start to their end within each
    magnet stage (iterations 1-4, 5-8, 9-12), the stage's first iteration following the refresh."""
    cfg = from_dict(SCCConfig, {"iterations": 12, "lr": 1e-3, "lr_end": 1e-4, "lr_schedule": "linear",
                                "kl_coef": 0.2, "kl_end": 0.1, "kl_schedule": "cosine",
                                "magnet": {"kind": "copy", "every": 4, "restart": True}})
    lrs = [cfg.lr_at(it) for it in range(1, 13)]
    assert lrs[:4] == lrs[4:8] == lrs[8:] and lrs[0] == pytest.approx(1e-3) and lrs[3] == pytest.approx(1e-4)
    assert lrs[1] == pytest.approx(1e-3 - 0.9e-3 / 3)
    kls = [cfg.kl_at(it) for it in range(1, 13)]
    assert kls[:4] == kls[8:] and kls[0] == pytest.approx(0.2) and kls[3] == pytest.approx(0.1)
    plain = from_dict(SCCConfig, {"iterations": 12, "lr": 1e-3, "lr_end": 1e-4, "lr_schedule": "linear",
                                  "magnet": {"kind": "copy", "every": 4}})
    assert plain.lr_at(12) == pytest.approx(1e-4) and plain.lr_at(4) > plain.lr_at(5)
    with pytest.raises(ConfigError, match="magnet.restart is for magnet.kind copy"):
        from_dict(SCCConfig, {"magnet": {"kind": "uniform", "restart": True}})
