"""Neural policies built from a game's spaces: shapes, masks, privileged critics, checkpoints."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from arena.envs.registry import make_core  # noqa: E402
from arena.errors import AgentSpecError, IncompatibleAgent  # noqa: E402
from arena.inference.policy_nets import (MaskedCategorical, build_policy, load_policy, policy_input,  # noqa: E402
                                         save_policy, spec_from_core)


def test_specs_and_architectures_follow_the_spaces():
    c4 = spec_from_core(make_core("openspiel/connect_four-v0"))
    assert (c4.obs_shape, c4.n_actions, c4.privileged_dim) == ((3, 6, 7), 7, 0)
    assert build_policy(c4).arch == "conv"
    leduc = spec_from_core(make_core("openspiel/leduc_poker-v0"))
    # imperfect information: the information-state tensor (betting history), and both players' views
    # for the privileged critic
    assert (leduc.obs_shape, leduc.n_actions, leduc.privileged_dim) == ((30,), 3, 60)
    assert build_policy(leduc).arch == "mlp"
    with pytest.raises(ValueError, match="conv policy needs board planes"):
        build_policy(leduc, "conv")
    with pytest.raises(ValueError, match="unknown policy size 'widht'"):
        build_policy(leduc, widht=3)


def test_a_text_game_is_refused_in_one_line():
    with pytest.raises(IncompatibleAgent, match="no observation tensor"):
        spec_from_core(make_core("arena/TicTacToe-v0"))


def test_masked_actions_are_never_sampled_nor_chosen():
    logits = torch.tensor([[5.0, 0.0, -1.0, 2.0]]).repeat(2000, 1)
    mask = torch.tensor([[False, True, True, False]]).repeat(2000, 1)
    d = MaskedCategorical(logits, mask)
    a = d.sample(torch.Generator().manual_seed(0))
    assert set(a.tolist()) == {1, 2}
    assert d.mode()[0].item() == 1
    assert torch.allclose(d.probs[0], torch.tensor([0.0, np.e / (np.e + 1), 1 / (np.e + 1), 0.0]))
    # one legal move: probability 1, entropy 0, no NaN
    one = MaskedCategorical(torch.zeros(1, 3), torch.tensor([[False, False, True]]))
    assert one.probs[0, 2].item() == 1.0 and one.entropy().item() == 0.0
    assert torch.isfinite(one.log_prob(torch.tensor([2]))).all()


def test_forward_on_a_real_position_and_privileged_critic():
    core = make_core("openspiel/leduc_poker-v0")
    core.reset(3)
    spec = spec_from_core(core)
    net = build_policy(spec)
    x, m = policy_input(core.observation(core.current_player()), core.current_player(), spec)
    assert x.shape == (32,) and x[30 + core.current_player()] == 1.0  # the seat to move, one-hot
    priv = torch.from_numpy(core.all_observations())[None]
    assert priv.shape == (1, 60)
    dist, value = net(torch.from_numpy(x)[None], torch.from_numpy(m)[None].bool(), priv)
    assert dist.probs.shape == (1, 3) and value.shape == (1,)
    assert dist.probs[0][~torch.from_numpy(m).bool()].sum().item() == 0.0


def test_checkpoint_round_trip_and_one_line_errors(tmp_path):
    spec = spec_from_core(make_core("openspiel/tic_tac_toe-v0"))
    net = build_policy(spec, "mlp", hidden=[32])
    folder = save_policy(tmp_path / "ckpt", net, {"iteration": 7})
    back, meta = load_policy(folder, spec)
    assert meta.info == {"iteration": 7} and meta.arch == "mlp" and meta.sizes["hidden"] == [32]
    for k, v in net.state_dict().items():
        assert torch.equal(v, back.state_dict()[k])
    with pytest.raises(AgentSpecError, match=r"no policy checkpoint at .*nowhere: expected a folder with policy.pt"):
        load_policy(tmp_path / "nowhere")
    other = spec_from_core(make_core("openspiel/connect_four-v0"))
    with pytest.raises(AgentSpecError) as e:
        load_policy(folder, other)
    msg = str(e.value)
    assert "\n" not in msg and str(folder) in msg
    assert "tic_tac_toe" in msg and "connect_four" in msg and "(3, 6, 7)" in msg
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "policy.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(AgentSpecError, match="is not a readable policy checkpoint"):
        load_policy(tmp_path / "junk")


def test_the_seat_to_move_is_part_of_the_input():
    # OpenSpiel's boards are absolute (X's pieces, O's pieces): both seats see the same tensor
    core = make_core("openspiel/connect_four-v0")
    core.reset(0)
    core.apply(0, 3)
    spec = spec_from_core(core)
    assert spec.players == 2 and spec.input_shape == (5, 6, 7)
    a, _ = policy_input(core.observation(0), 0, spec)
    b, _ = policy_input(core.observation(1), 1, spec)
    assert (a[:3] == b[:3]).all() and not (a == b).all()
    assert a[3].all() and not a[4].any() and b[4].all() and not b[3].any()


def test_entity_observations_get_the_transformer_and_a_pointer_head():
    from arena.inference.policy_nets import PolicySpec

    spec = PolicySpec("test/units-v0", (6, 4), "discrete", n_actions=6, entities=True)
    net = build_policy(spec, d_model=16, heads=2, layers=1, hidden=[16])
    assert net.arch == "entity" and net.model.parts[0].kind == "pointer"
    torch.manual_seed(0)
    ents = torch.randn(3, 6, 4)
    present = torch.tensor([[True] * 6, [True, True, True, False, False, False], [True, False] * 3])
    dist, value = net(ents, present, entity_mask=present)
    assert value.shape == (3,)
    assert (dist.probs[~present] == 0).all() and torch.allclose(dist.probs.sum(-1), torch.ones(3))
    # a set: permuting the entities permutes the pointer's probabilities
    perm = torch.tensor([5, 4, 3, 2, 1, 0])
    d2, v2 = net(ents[:, perm], present[:, perm], entity_mask=present[:, perm])
    assert torch.allclose(d2.probs, dist.probs[:, perm], atol=1e-5) and torch.allclose(v2, value, atol=1e-5)


def test_continuous_actions_get_a_gaussian_or_beta_head():
    from arena.inference.policy_nets import PolicySpec

    spec = PolicySpec("test/box-v0", (5,), "continuous", action_shape=(3,), low=(0.0,) * 3, high=(1.0,) * 3)
    for kind in ("gaussian", "beta"):
        net = build_policy(spec, continuous=kind, hidden=[8])
        dist, value = net(torch.zeros(4, 5))
        a = dist.sample(torch.Generator().manual_seed(0))
        assert a.shape == (4, 3) and dist.log_prob(a).shape == (4,)
        if kind == "beta":
            assert ((a >= 0) & (a <= 1)).all()


# -- one family; checkpoints of format version 1 ----------------------------------------------------
#: The tensor names the one-tensor network of format version 1 wrote at the default sizes (recorded from
#: that code's state dicts), for each architecture: what a version-1 checkpoint holds.
_BLOCK = ["attn.out.bias", "attn.out.weight", "attn.qkv.bias", "attn.qkv.weight", "ff.0.bias", "ff.0.weight",
          "ff.3.bias", "ff.3.weight", "ln1.bias", "ln1.weight", "ln2.bias", "ln2.weight"]
_TORSO_VALUE = [f"{m}.{i}.{w}" for m in ("torso", "value") for i in (0, 2) for w in ("bias", "weight")]
V1_NAMES = {
    "mlp": ["logits.bias", "logits.weight", *_TORSO_VALUE],
    "conv": ["logits.bias", "logits.weight", "stem.0.bias", "stem.0.weight", "stem.2.a.bias", "stem.2.a.weight",
             "stem.2.b.bias", "stem.2.b.weight", *_TORSO_VALUE],
    "entity": ["pointer.key.weight", "pointer.query.bias", "pointer.query.weight",
               *[f"stem.blocks.{b}.{n}" for b in (0, 1) for n in _BLOCK], "stem.embed.bias", "stem.embed.weight",
               "stem.norm.bias", "stem.norm.weight", *_TORSO_VALUE],
    "gaussian": ["head.center", "head.half_width", "head.high", "head.log_std", "head.low", "head.mean.bias",
                 "head.mean.weight", "obs_count", "obs_mean", "obs_var", *_TORSO_VALUE],
}


def _v1_case(name: str):
    """(spec, sizes, inputs) of one kind of network a version-1 checkpoint held."""
    from arena.inference.policy_nets import PolicySpec
    from arena.inference.trees import tree_stack

    rng = np.random.default_rng(0)
    box = PolicySpec("test/box-v0", (5,), "continuous", action_shape=(2,), low=(-1.0, -2.0), high=(1.0, 2.0))
    if name == "mlp":
        spec = spec_from_core(make_core("openspiel/kuhn_poker-v0"))
        return spec, {}, {"obs": rng.normal(size=(4, *spec.input_shape)).astype(np.float32),
                          "mask": np.array([[1, 1], [1, 0], [0, 1], [1, 1]], bool)}
    if name == "conv":
        spec = spec_from_core(make_core("openspiel/connect_four-v0"))
        mask = rng.random((4, spec.n_actions)) > 0.3
        mask[:, 0] = True
        return spec, {}, {"obs": rng.normal(size=(4, *spec.input_shape)).astype(np.float32), "mask": mask}
    if name == "entity":
        present = np.array([[True] * 6, [True] * 3 + [False] * 3, [True, False] * 3])
        return (PolicySpec("test/units-v0", (6, 4), "discrete", n_actions=6, entities=True), {},
                {"obs": rng.normal(size=(3, 6, 4)).astype(np.float32), "mask": present, "entity_mask": present})
    if name in ("gaussian", "beta"):
        sizes = {"obs_norm": True, "init_log_std": -1.0} if name == "gaussian" else {"continuous": "beta"}
        return box, sizes, {"obs": rng.normal(size=(4, 5)).astype(np.float32)}
    core = make_core("arena/Skirmish-3m-v0")
    core.reset(0)
    spec = spec_from_core(core)
    from arena.inference.policy_nets import policy_inputs

    return spec, {}, tree_stack([policy_inputs(core.observation(s), s, spec) for s in (0, 1)])


def _outputs(net, x: dict) -> dict:
    with torch.no_grad():
        dist, value = net(x)
        if net.spec.action is not None:
            a = dist.mode()
            return {"logp": net(x, actions=a)[0].log_prob(a), "value": value}
        if net.spec.action_kind == "discrete":
            return {"probs": dist.probs, "value": value}
        return {"mode": dist.mode(), "logp": dist.log_prob(dist.mode()), "value": value}


@pytest.mark.parametrize("name", ["mlp", "conv", "entity", "gaussian", "beta", "structured"])
def test_a_version_1_checkpoint_loads_into_the_one_family_with_the_same_outputs(name, tmp_path):
    """A checkpoint of format version 1 (one-tensor games had their own network class then: Kuhn's MLP,
    Connect Four's conv net, an entity pointer, a Gaussian with input normalisation, a Beta; and
    Skirmish's structured net) loads with the same outputs, and saves again as version 2. The checkpoint
    is written here under version 1's tensor names, which are the ones that code wrote."""
    from arena.inference.policy_nets import _V1_NAMES, FORMAT, VERSION
    from arena.inference.structured import StructuredPolicyNet

    spec, sizes, inputs = _v1_case(name)
    torch.manual_seed(1)
    net = build_policy(spec, **sizes)
    with torch.no_grad():
        for p in net.parameters():  # off the near-uniform start, so a misplaced tensor shows
            p.add_(0.05 * torch.randn_like(p))
        if sizes.get("obs_norm"):
            net.update_obs_norm(np.random.default_rng(3).normal(size=(50, *spec.input_shape)) * 2 + 1)
    net.eval()
    x = {k: torch.as_tensor(np.asarray(v)) for k, v in inputs.items()}
    want = _outputs(net, x)

    def v1_name(k: str) -> str:
        for old, new in _V1_NAMES if net.arch != "structured" else ():
            if k.startswith(new):
                return old + k[len(new):]
        return k

    state = {v1_name(k): v for k, v in net.state_dict().items()}
    if name in V1_NAMES:
        assert sorted(state) == sorted(V1_NAMES[name])
    (tmp_path / "v1").mkdir()
    torch.save({"format": FORMAT, "version": 1, "spec": spec.to_dict(), "arch": net.arch, "sizes": net.sizes,
                "info": {"fixture": "version 1"}, "state_dict": state}, tmp_path / "v1" / "policy.pt")
    loaded, meta = load_policy(tmp_path / "v1")
    assert isinstance(loaded, StructuredPolicyNet) and meta.info == {"fixture": "version 1"}
    for k, v in _outputs(loaded, x).items():
        np.testing.assert_allclose(v.numpy(), want[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    save_policy(tmp_path / "again", loaded, meta.info)
    assert torch.load(tmp_path / "again" / "policy.pt", weights_only=True)["version"] == VERSION
    again, _ = load_policy(tmp_path / "again")
    for k, v in _outputs(again, x).items():
        np.testing.assert_allclose(v.numpy(), want[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_a_checkpoint_from_a_newer_format_is_refused_in_one_line(tmp_path):
    net = build_policy(spec_from_core(make_core("openspiel/kuhn_poker-v0")), hidden=[8])
    save_policy(tmp_path / "p", net)
    blob = torch.load(tmp_path / "p" / "policy.pt", weights_only=True)
    blob["version"] = 99
    torch.save(blob, tmp_path / "p" / "policy.pt")
    with pytest.raises(AgentSpecError, match="format version 99 is not one this arena reads.*upgrade arena"):
        load_policy(tmp_path / "p")


def test_every_game_a_network_plays_gets_the_one_family():
    """Board games, poker, an entity set, a box and a structured game: one class, every move an action
    model (a one-tensor game's is one part named ``action``)."""
    from arena.inference.policy_nets import PolicySpec
    from arena.inference.structured import StructuredPolicyNet

    specs = [spec_from_core(make_core(g)) for g in ("openspiel/kuhn_poker-v0", "openspiel/connect_four-v0",
                                                    "arena/Skirmish-3m-v0")]
    specs += [PolicySpec("test/units-v0", (6, 4), "discrete", n_actions=6, entities=True),
              PolicySpec("test/box-v0", (5,), "continuous", action_shape=(2,), low=(0.0,) * 2, high=(1.0,) * 2)]
    kinds = []
    for spec in specs:
        net = build_policy(spec, hidden=[8], d_model=8, heads=2, layers=1, channels=4)
        assert type(net) is StructuredPolicyNet
        kinds.append((net.arch, [p.kind for p in net.model.parts]))
    assert kinds[:2] == [("mlp", ["categorical"]), ("conv", ["categorical"])]
    assert kinds[2][0] == "structured" and len(kinds[2][1]) > 1
    assert kinds[3:] == [("entity", ["pointer"]), ("mlp", ["box"])]
