"""`PolicyLearner.step` on hand-made batches: each loss moves the policy the right way, masks hold,
the KL term pulls towards the anchor, and continuous heads learn too."""

import pytest

torch = pytest.importorskip("torch")

from arena.inference.policy_nets import PolicySpec, build_policy  # noqa: E402
from arena.trainers.policy.learner import LearnerSettings, PolicyLearner, RolloutBatch  # noqa: E402

SPEC = PolicySpec("test/bandit-v0", (4,), "discrete", n_actions=3)


def bandit_batch(net, B=64, seed=0):
    """One-move episodes: action 0 wins (+1), action 1 loses (-1), action 2 is illegal."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(1, B, 4, generator=g)
    mask = torch.tensor([True, True, False]).repeat(1, B, 1)
    with torch.no_grad():
        dist, value = net(obs[0], mask[0])
        a = dist.sample(g)
        logp = dist.log_prob(a)
    rewards = torch.where(a == 0, 1.0, -1.0)[None]
    return RolloutBatch({"obs": obs, "mask": mask}, a[None], logp[None], value[None], rewards, torch.zeros(1, B),
                        torch.ones(1, B, dtype=torch.bool))


def p_win(net):
    obs = torch.randn(256, 4, generator=torch.Generator().manual_seed(9))
    mask = torch.tensor([True, True, False]).repeat(256, 1)
    with torch.no_grad():
        return net(obs, mask)[0].probs.mean(0)


@pytest.mark.parametrize("algo", ["ppo", "vtrace"])
def test_each_loss_learns_the_winning_move_and_never_the_illegal_one(algo):
    torch.manual_seed(0)
    net = build_policy(SPEC, hidden=[16])
    lrn = PolicyLearner(net, LearnerSettings(algo=algo, epochs=2, minibatch=32, upgo_coef=0.5), lr=3e-3)
    before = p_win(net)
    for i in range(30):
        stats = lrn.step(bandit_batch(net, seed=i), generator=torch.Generator().manual_seed(i))
    after = p_win(net)
    assert before[0] < 0.6 and after[0] > 0.9, (before, after)
    assert after[2] == 0.0
    assert lrn.version == 30
    for k in ("pg_loss", "value_loss", "entropy", "upgo_loss", "grad_norm"):
        assert k in stats and stats[k] == stats[k], k  # present and not NaN


def test_the_kl_term_pulls_towards_the_anchor():
    torch.manual_seed(1)
    anchor = build_policy(SPEC, hidden=[16])
    with torch.no_grad():  # an anchor that prefers the losing move
        anchor.heads.to_action.logits.bias.copy_(torch.tensor([-2.0, 2.0, 0.0]))
    free = build_policy(SPEC, hidden=[16])
    held = build_policy(SPEC, hidden=[16])
    held.load_state_dict(free.state_dict())
    s = LearnerSettings(epochs=2, minibatch=32, upgo_coef=0.0)
    a, b = PolicyLearner(free, s, lr=3e-3), PolicyLearner(held, s, lr=3e-3, anchor=anchor)
    for i in range(20):
        a.step(bandit_batch(free, seed=i), kl_coef=0.0, generator=torch.Generator().manual_seed(i))
        stats = b.step(bandit_batch(held, seed=i), kl_coef=2.0, generator=torch.Generator().manual_seed(i))
    assert p_win(held)[0] < p_win(free)[0] - 0.1
    assert stats["kl_anchor"] > 0


def test_a_gaussian_head_learns_a_target_action():
    spec = PolicySpec("test/box-v0", (2,), "continuous", action_shape=(2,), low=(0.0, 0.0), high=(1.0, 1.0))
    torch.manual_seed(2)
    net = build_policy(spec, hidden=[16])
    lrn = PolicyLearner(net, LearnerSettings(epochs=2, minibatch=64, upgo_coef=0.0, entropy_coef=0.0), lr=1e-2)
    target = torch.tensor([0.2, 0.8])
    for i in range(60):
        g = torch.Generator().manual_seed(i)
        obs = torch.zeros(1, 128, 2)
        with torch.no_grad():
            dist, value = net(obs[0])
            a = dist.sample(g)
            logp = dist.log_prob(a)
        r = -((a - target) ** 2).sum(-1)
        lrn.step(RolloutBatch({"obs": obs}, a[None], logp[None], value[None], r[None], torch.zeros(1, 128),
                              torch.ones(1, 128, dtype=torch.bool)), generator=g)
    with torch.no_grad():
        mode = net(torch.zeros(1, 2))[0].mode()[0]
    assert torch.allclose(mode, target, atol=0.1), mode


def chain_batch(net, B=32, T=3, seed=0, values=None):
    """Three-move episodes (discount 1, then 0 at the end), +-1 on the last move by its action."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(T, B, 4, generator=g)
    mask = torch.tensor([True, True, False]).repeat(T, B, 1)
    with torch.no_grad():
        dist, value = net(obs.reshape(T * B, 4), mask.reshape(T * B, 3))
        a = dist.sample(g)
        logp = dist.log_prob(a)
    a, logp, value = a.reshape(T, B), logp.reshape(T, B), value.reshape(T, B)
    rewards = torch.zeros(T, B)
    rewards[-1] = torch.where(a[-1] == 0, 1.0, -1.0)
    disc = torch.ones(T, B)
    disc[-1] = 0.0
    return RolloutBatch({"obs": obs, "mask": mask}, a, logp, value if values is None else values, rewards, disc,
                        torch.ones(T, B, dtype=torch.bool))


def test_vtrace_upgo_reads_the_learners_values_not_the_actors():
    # AlphaStar's pseudocode: UPGO's bootstrap and baseline are both the learner's current values, so
    # on the V-trace path the values the actors recorded change nothing (they did change UPGO's return)
    torch.manual_seed(2)
    nets = [build_policy(SPEC, hidden=[16]) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    s = LearnerSettings(algo="vtrace", epochs=1, minibatch=96, upgo_coef=1.0)
    base = chain_batch(nets[0])
    odd = chain_batch(nets[0], values=torch.randn(base.valid.shape, generator=torch.Generator().manual_seed(5)) * 3)
    assert torch.equal(base.actions, odd.actions) and not torch.equal(base.behaviour_value, odd.behaviour_value)
    for net, batch in zip(nets, (base, odd)):
        PolicyLearner(net, s, lr=1e-2).step(batch, generator=torch.Generator().manual_seed(0))
    a, b = nets[0].state_dict(), nets[1].state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def _probs(net, batch):
    with torch.no_grad():
        return net(batch.inputs["obs"].reshape(-1, 4), batch.inputs["mask"].reshape(-1, 3))[0].probs


def test_the_default_kl_is_the_imitation_policys_kl():
    # KL(pi_IL || pi) by default (AlphaStar's direction): the teacher's probabilities weight the log-ratio
    assert LearnerSettings().kl_direction == "anchor_to_policy"
    torch.manual_seed(3)
    net, anchor = build_policy(SPEC, hidden=[16]), build_policy(SPEC, hidden=[16])
    with torch.no_grad():
        anchor.heads.to_action.logits.bias.copy_(torch.tensor([-1.0, 1.5, 0.0]))
    batch = chain_batch(net, T=1, B=16)
    p, q = _probs(net, batch)[:, :2], _probs(anchor, batch)[:, :2]
    by_hand = float((q * (q.log() - p.log())).sum(-1).mean())
    other = float((p * (p.log() - q.log())).sum(-1).mean())
    stats = PolicyLearner(net, LearnerSettings(epochs=1, minibatch=16), lr=0.0, anchor=anchor).step(
        batch, kl_coef=1.0, generator=torch.Generator().manual_seed(0))
    assert stats["kl_anchor"] == pytest.approx(by_hand, rel=1e-5) and abs(by_hand - other) > 1e-3


def test_entropy_normalised_by_the_number_of_choices():
    # a uniform policy over the 2 legal moves of 3: raw entropy log 2, "legal" 1, "head" log 2 / log 3
    net = build_policy(SPEC, hidden=[16])
    with torch.no_grad():
        for prm in net.parameters():
            prm.zero_()
    import math

    batch = chain_batch(net, T=1, B=8)
    for norm, expect in ((None, math.log(2)), ("legal", 1.0), ("head", math.log(2) / math.log(3))):
        stats = PolicyLearner(net, LearnerSettings(epochs=1, minibatch=8, entropy_norm=norm), lr=0.0).step(
            batch, generator=torch.Generator().manual_seed(0))
        assert stats["entropy"] == pytest.approx(expect, rel=1e-5), norm


@pytest.mark.parametrize("loss", ["dppo_binary_tv", "dppo_binary_kl", "drpo"])
def test_the_shared_trust_region_losses_learn_the_winning_move(loss):
    """``learner.loss`` names the PPO surrogate from the losses the language-model learner uses: each
    DPPO trust region learns the bandit too, and logs its own statistics (the share of masked moves)."""
    torch.manual_seed(0)
    net = build_policy(SPEC, hidden=[16])
    lrn = PolicyLearner(net, LearnerSettings(epochs=2, minibatch=32, upgo_coef=0.0, loss=loss), lr=3e-3)
    for i in range(30):
        stats = lrn.step(bandit_batch(net, seed=i), generator=torch.Generator().manual_seed(i))
    assert p_win(net)[0] > 0.9 and p_win(net)[2] == 0.0
    assert stats["approx_kl"] >= 0
    if loss != "drpo":
        assert 0.0 <= stats["mask_frac"] <= 1.0


def test_ppo_clip_by_name_is_the_clip_setting():
    """The default surrogate is ``ppo_clip`` at ``clip``; naming it with its own range is the same update."""
    nets = []
    for settings in (LearnerSettings(epochs=2, minibatch=32, clip=0.1),
                     LearnerSettings(epochs=2, minibatch=32, loss="ppo_clip",
                                     loss_kwargs={"clip_low": 0.1, "clip_high": 0.1})):
        torch.manual_seed(3)
        net = build_policy(SPEC, hidden=[16])
        lrn = PolicyLearner(net, settings, lr=3e-3)
        for i in range(3):
            lrn.step(bandit_batch(net, seed=i), generator=torch.Generator().manual_seed(i))
        nets.append(net)
    assert all(torch.equal(a, b) for a, b in zip(nets[0].state_dict().values(), nets[1].state_dict().values()))


@pytest.mark.parametrize("change,message", [
    ({"loss": "grpo"}, "learner.loss 'grpo' is not one of dppo_binary_kl, dppo_binary_tv, dppo_exact_kl, drpo, ppo_clip"),
    ({"loss": "dppo_topk_tv"}, "top-K log-probs"),
    ({"loss": "dppo_binary_tv", "algo": "vtrace"}, "set learner.algo: ppo to use dppo_binary_tv"),
    ({"loss": "dppo_binary_tv", "loss_kwargs": {"clip": 0.3}}, "'clip' is not a setting of dppo_binary_tv"),
    ({"pg": "all_actions"}, "learner.pg: all_actions is V-trace's policy term: set learner.algo: vtrace"),
])
def test_a_bad_loss_is_one_line(change, message):
    from arena.config import from_dict
    from arena.errors import ConfigError
    from arena.trainers.policy.config import SCCConfig

    with pytest.raises(ConfigError) as e:
        from_dict(SCCConfig, {"learner": change})
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_registered_loss_is_named_by_a_config_and_learns(monkeypatch):
    """`register_loss` adds a loss every learner's config can name: here plain REINFORCE on the move."""
    from arena.trainers.common import losses

    monkeypatch.setattr(losses, "LOSSES", dict(losses.LOSSES))

    def reinforce(logp, old_logp, adv, mask, agg="token_mean", max_len=None, scale=1.0):
        m = mask.float()
        return -(scale * adv * logp * m).sum() / m.sum().clamp(min=1), {"scale": scale}

    losses.register_loss("reinforce", reinforce)
    with pytest.raises(ValueError, match="registered already"):
        losses.register_loss("reinforce", reinforce)
    torch.manual_seed(0)
    net = build_policy(SPEC, hidden=[16])
    s = LearnerSettings(epochs=2, minibatch=32, upgo_coef=0.0, loss="reinforce", loss_kwargs={"scale": 0.5})
    lrn = PolicyLearner(net, s, lr=3e-3)
    for i in range(30):
        stats = lrn.step(bandit_batch(net, seed=i), generator=torch.Generator().manual_seed(i))
    assert p_win(net)[0] > 0.9 and stats["scale"] == 0.5 and stats["approx_kl"] >= 0


@pytest.mark.parametrize("sizes,game,message", [
    ({}, "openspiel/kuhn_poker-v0", "learner.pg: all_actions reads a value per move: add q_head: true to sizes"),
    ({"q_head": True}, "arena/Skirmish-3m-v0", "q_head needs moves of one categorical part"),
])
def test_the_all_actions_term_where_it_cannot_run_is_one_line(tmp_path, sizes, game, message):
    from arena.config import from_dict
    from arena.errors import ConfigError
    from arena.trainers.policy.config import SCCConfig
    from arena.trainers.policy.scc import SCCTrainer

    cfg = from_dict(SCCConfig, {"game": game, "il": None, "sizes": {"hidden": [8], **sizes},
                                "learner": {"algo": "vtrace", "pg": "all_actions"}})
    with pytest.raises(ConfigError) as e:
        SCCTrainer(cfg, tmp_path / "run")
    assert message in str(e.value) and "\n" not in str(e.value)
