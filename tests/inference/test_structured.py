"""Structured moves end to end below the learner: the action model's codec, the distribution protocol
worked by hand (composite log-probability, entropy and KL, the multi-select pointer), the policy's
masks conditioned on the parts chosen before, and checkpoints."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from arena.envs.actions import ActionModel, Part, is_fault, json_form  # noqa: E402
from arena.inference.distributions import Composite, SelectDist, select_active, uniform_like  # noqa: E402
from arena.inference.policy_nets import MaskedCategorical  # noqa: E402

MODEL = ActionModel(
    (Part("type", "categorical", n=3, mask="type_mask", labels=("noop", "attack", "move")),
     Part("units", "select", n=4, max_select=2, mask="unit_mask"),
     Part("target", "pointer", n=4, mask="target_mask"),
     Part("cell", "spatial", shape=(2, 3), mask="cell_mask")),
    uses=(("type",), ("type", "units", "target"), ("type", "units", "cell")))

OBS = {"type_mask": np.array([1, 1, 0]),
       "unit_mask": np.array([[0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]]),
       "target_mask": np.array([[0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 0, 0]]),
       "cell_mask": np.zeros((3, 6))}


# -- the action model ---------------------------------------------------------------------------------
def test_a_checked_move_keeps_the_parts_its_type_uses_and_round_trips_through_json():
    move, why = MODEL.check({"type": 1, "units": [1, 0], "target": 3, "cell": [0, 0]}, OBS)
    assert why is None and move == {"type": 1, "units": [1, 0], "target": 3}
    assert MODEL.encode(move) == {"type": 1, "units": [1, 0], "target": 3}
    assert MODEL.check(MODEL.encode(move), OBS) == (move, None)
    assert MODEL.to_text(move) == "attack units=[1, 0] target=3"
    arrays = MODEL.to_arrays(move)
    assert arrays["units"].tolist() == [1, 0] and int(arrays["target"]) == 3 and int(arrays["cell"]) == 0
    assert MODEL.from_arrays(arrays) == move
    assert MODEL.from_arrays(MODEL.to_arrays({"type": 0})) == {"type": 0}


@pytest.mark.parametrize("move,reason", [
    ({"type": 2, "units": [0], "cell": [0, 0]}, "type: move is not legal here"),
    ({"type": 1, "units": [2], "target": 3}, "units: slot 2 may not be chosen here"),
    ({"type": 1, "units": [0, 0], "target": 3}, "slot chosen twice"),
    ({"type": 1, "units": [0, 1, 2], "target": 3}, "choose 1 to 2 slots"),
    ({"type": 1, "units": [], "target": 3}, "choose 1 to 2 slots"),
    ({"type": 1, "units": [0], "target": 0}, "target: 0 is not legal here"),
    ({"type": 1, "units": [0]}, "the move has no 'target' (move type attack uses it)"),
    ({"type": 1, "units": [0], "target": True}, "target: expected an integer"),
    ({"type": 1, "units": [0], "target": 3, "fire": 1}, "'fire' is not a part"),
    ([1, 0], "expected a move as a dict of its parts"),
])
def test_a_bad_move_is_refused_with_its_reason(move, reason):
    out, why = MODEL.check(move, OBS)
    assert out is None and reason in why


def test_a_random_move_is_always_legal():
    rng = np.random.default_rng(0)
    kinds = set()
    for _ in range(300):
        move = MODEL.sample(OBS, rng)
        assert MODEL.check(move, OBS) == (move, None)
        kinds.add(move["type"])
        if move["type"] == 1:
            assert set(move["units"]) <= {0, 1} and move["target"] in (2, 3)
    assert kinds == {0, 1}


def test_the_simple_kinds_are_one_part_models_and_faults_are_told_apart():
    assert ActionModel.discrete(7).parts[0].kind == "categorical" and not ActionModel.discrete(7).structured
    assert ActionModel.continuous((2,), 0.0, 1.0).parts[0].kind == "box" and MODEL.structured
    assert json_form({"type": 1, "units": np.array([0, 1])}) == {"type": 1, "units": [0, 1]}
    assert is_fault(json_form(object())) and is_fault({"truncated": "x", "length": 5})
    assert not is_fault({"type": 1}) and not is_fault(3)
    with pytest.raises(ValueError, match="not \\['length', 'repr', 'truncated'\\]"):
        Part("repr", "categorical", n=2)
    with pytest.raises(ValueError, match="uses"):
        ActionModel((Part("a", "categorical", n=2), Part("b", "categorical", n=2)), uses=(("a",),))
    assert ActionModel.from_dict(MODEL.to_dict()) == MODEL


# -- the distribution protocol, by hand --------------------------------------------------------------------
def _cat(probs, mask=None):
    return MaskedCategorical(torch.log(torch.tensor(probs, dtype=torch.float64)),
                             None if mask is None else torch.tensor(mask))


def _two_part(type_probs, target_probs):
    """type (2 values: 0 uses only the type; 1 also a target), target (2 slots), as a composite."""

    def chain(actions, gen, greedy):
        t = actions["type"] if actions is not None else _cat([type_probs]).sample(gen)
        x = actions["target"] if actions is not None else _cat([target_probs]).sample(gen)
        used = {"type": torch.ones(1, dtype=torch.float64), "target": (t == 1).to(torch.float64)}
        return {"type": t, "target": x}, {"type": _cat([type_probs]), "target": _cat([target_probs])}, used

    return Composite(chain, ["type", "target"])


def _h(p):
    return -sum(x * math.log(x) for x in p if x > 0)


def _kl(p, q):
    return sum(a * math.log(a / b) for a, b in zip(p, q) if a > 0)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_a_masked_uniform_has_entropy_log_k_whatever_the_illegal_logits(k):
    logits = torch.full((2, 6), 3.0, dtype=torch.float64)
    logits[:, k:] = 50.0
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[:, :k] = True
    assert MaskedCategorical(logits, mask).entropy().tolist() == pytest.approx([math.log(k)] * 2)


def test_a_forced_move_has_no_entropy_and_no_entropy_gradient():
    # row 0: one legal move, H = 0; row 1: [0.25, 0.75, illegal], H = 0.5623351
    logits = torch.log(torch.tensor([[1.0, 1.0, 1.0], [0.25, 0.75, 1.0]], dtype=torch.float64)).requires_grad_(True)
    mask = torch.tensor([[True, False, False], [True, True, False]])
    h = MaskedCategorical(logits, mask).entropy()
    assert h.tolist() == pytest.approx([0.0, 0.5623351], abs=1e-7)
    (grad,) = torch.autograd.grad(h.sum(), logits)
    assert torch.isfinite(grad).all() and grad[0].tolist() == [0.0, 0.0, 0.0] and grad[1, 2].item() == 0.0


def test_the_kl_between_masked_categoricals_by_hand():
    # pi = [0.5, 0.5], q = [0.25, 0.75], a third action illegal (its logits 9 and -9 play no part):
    #   KL(q || pi) = 0.1308120 with gradient pi - q = [0.25, -0.25, 0] in pi's logits; KL(pi || q) = 0.1438410
    logits = torch.tensor([[0.0, 0.0, 9.0]], dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, False]])
    pi = MaskedCategorical(logits, mask)
    q = MaskedCategorical(torch.tensor([[math.log(0.25), math.log(0.75), -9.0]], dtype=torch.float64), mask)
    kl = q.kl(pi)
    assert kl.item() == pytest.approx(0.1308120, abs=1e-7)
    assert torch.autograd.grad(kl.sum(), logits)[0][0].tolist() == pytest.approx([0.25, -0.25, 0.0])
    pi = MaskedCategorical(logits, mask)
    assert pi.kl(q).item() == pytest.approx(0.1438410, abs=1e-7)
    grad = torch.autograd.grad(pi.kl(q).sum(), logits)[0]
    assert torch.isfinite(grad).all() and grad[0, 2].item() == 0.0
    shifted = MaskedCategorical(logits.detach() + 7.0, mask)  # the same softmax
    assert pi.kl(shifted).item() == pytest.approx(0.0, abs=1e-12)


def test_composite_log_prob_entropy_and_kl_are_the_used_parts_summed():
    pi, anchor = _two_part([0.5, 0.5], [0.75, 0.25]), _two_part([0.25, 0.75], [0.5, 0.5])
    attack = {"type": torch.tensor([1]), "target": torch.tensor([0])}
    assert pi.log_prob(attack).item() == pytest.approx(math.log(0.5) + math.log(0.75))
    assert pi.entropy().item() == pytest.approx(math.log(2) + _h([0.75, 0.25]))
    assert pi.kl(anchor).item() == pytest.approx(_kl([0.5, 0.5], [0.25, 0.75]) + _kl([0.75, 0.25], [0.5, 0.5]))
    # a move whose type does not use the target: the target adds nothing, whatever it holds
    noop = {"type": torch.tensor([0]), "target": torch.tensor([1])}
    assert pi.log_prob(noop).item() == pytest.approx(math.log(0.5))
    assert pi.entropy().item() == pytest.approx(math.log(2))
    assert pi.kl(anchor).item() == pytest.approx(_kl([0.5, 0.5], [0.25, 0.75]))


def test_an_unused_part_with_an_impossible_choice_adds_nothing():
    # a padded or unread part may hold a choice its mask forbids (log-probability -inf): left out, not
    # multiplied by 0 (which would be NaN, and would spread through V-trace's recursion)
    def chain(actions, gen, greedy):
        target = MaskedCategorical(torch.tensor([[0.0, 0.0]], dtype=torch.float64), torch.tensor([[True, False]]))
        used = {"type": torch.ones(1, dtype=torch.float64), "target": (actions["type"] == 1).to(torch.float64)}
        return actions, {"type": _cat([[0.5, 0.5]]), "target": target}, used

    d = Composite(chain, ["type", "target"])
    lp = d.log_prob({"type": torch.tensor([0]), "target": torch.tensor([1])})
    assert torch.isfinite(lp).all() and lp.item() == pytest.approx(math.log(0.5))


def test_a_composite_needs_a_chain_before_its_entropy():
    with pytest.raises(RuntimeError, match="needs a chain"):
        _two_part([0.5, 0.5], [0.5, 0.5]).entropy()


def test_multi_select_pointer_by_hand():
    # 2 slots, up to 2 steps; step 0: slots 0.25 / 0.75, no end; step 1 (after slot 1): slot 0 or end, 0.5 each
    logits = torch.log(torch.tensor([[[0.25, 0.75, 1.0], [0.5, 1.0, 0.5]]], dtype=torch.float64))
    mask = torch.tensor([[[True, True, False], [True, False, True]]])
    both, one = torch.tensor([[1, 0]]), torch.tensor([[1, -1]])
    assert select_active(both).tolist() == [[True, True]] and select_active(one).tolist() == [[True, True]]
    assert select_active(torch.tensor([[1, -1, -1]])).tolist() == [[True, True, False]]
    d = SelectDist(MaskedCategorical(logits, mask), select_active(both), 2)
    assert d.log_prob(both).item() == pytest.approx(math.log(0.75) + math.log(0.5))
    assert d.log_prob(one).item() == pytest.approx(math.log(0.75) + math.log(0.5))  # the end choice
    assert d.entropy().item() == pytest.approx(_h([0.25, 0.75]) + _h([0.5, 0.5]))
    first_only = SelectDist(MaskedCategorical(logits, mask), torch.tensor([[True, False]]), 2)
    assert first_only.entropy().item() == pytest.approx(_h([0.25, 0.75]))


def test_normalised_entropy_by_hand():
    # AlphaStar's normalisation: each part's entropy over the log of its number of choices
    c = _cat([[0.25, 0.75, 0.0]], [[True, True, False]])
    assert c.normalized_entropy("legal").item() == pytest.approx(_h([0.25, 0.75]) / math.log(2))
    assert c.normalized_entropy("head").item() == pytest.approx(_h([0.25, 0.75]) / math.log(3))
    assert _cat([[1.0, 0.0]], [[True, False]]).normalized_entropy("legal").item() == 0.0  # one choice: 0
    logits = torch.log(torch.tensor([[[0.25, 0.75, 1.0], [0.5, 1.0, 0.5]]], dtype=torch.float64))
    mask = torch.tensor([[[True, True, False], [True, False, True]]])
    d = SelectDist(MaskedCategorical(logits, mask), torch.tensor([[True, True]]), 2)
    assert d.normalized_entropy("legal").item() == pytest.approx(_h([0.25, 0.75]) / math.log(2) + 1.0)
    pi = _two_part([0.5, 0.5], [0.75, 0.25])
    pi.log_prob({"type": torch.tensor([1]), "target": torch.tensor([0])})
    assert pi.normalized_entropy("legal").item() == pytest.approx(1.0 + _h([0.75, 0.25]) / math.log(2))
    pi.log_prob({"type": torch.tensor([0]), "target": torch.tensor([0])})
    assert pi.normalized_entropy("head").item() == pytest.approx(1.0)  # the unused target adds nothing


def test_the_uniform_counterpart_is_uniform_over_each_parts_legal_choices_along_the_chain():
    # KL(pi || uniform) of a composite: each used part's log(legal choices) - entropy, summed
    pi = _two_part([0.2, 0.8], [0.75, 0.25])
    pi.log_prob({"type": torch.tensor([1]), "target": torch.tensor([0])})
    u = uniform_like(pi)
    assert pi.kl(u).item() == pytest.approx((math.log(2) - _h([0.2, 0.8])) + (math.log(2) - _h([0.75, 0.25])))
    assert u.kl(pi).item() == pytest.approx(_kl([0.5, 0.5], [0.2, 0.8]) + _kl([0.5, 0.5], [0.75, 0.25]))
    pi.log_prob({"type": torch.tensor([0]), "target": torch.tensor([0])})  # a move that uses no target
    assert pi.kl(uniform_like(pi)).item() == pytest.approx(math.log(2) - _h([0.2, 0.8]))
    c = _cat([[0.2, 0.8, 0.0]], [[True, True, False]])  # the masked choice stays impossible
    assert uniform_like(c).probs.tolist() == [[0.5, 0.5, 0.0]]
    logits = torch.log(torch.tensor([[[0.25, 0.75, 1.0], [0.5, 1.0, 0.5]]], dtype=torch.float64))
    mask = torch.tensor([[[True, True, False], [True, False, True]]])
    d = SelectDist(MaskedCategorical(logits, mask), torch.tensor([[True, False]]), 2)  # one step taken
    assert d.kl(uniform_like(d)).item() == pytest.approx(math.log(2) - _h([0.25, 0.75]))
    from arena.inference.continuous import GaussianHead

    box = GaussianHead(4, 2, np.zeros(2, np.float32), np.ones(2, np.float32))(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="finite set of choices"):
        uniform_like(box)


# -- the structured policy ----------------------------------------------------------------------------
def _net():
    from arena.inference.policy_nets import PolicySpec, build_policy

    inputs = (("entities", (4, 3)), ("entity_mask", (4,)), ("spatial", (2, 2, 3)), ("scalars", (1,)),
              ("type_mask", (3,)), ("unit_mask", (3, 4)), ("target_mask", (3, 4)), ("cell_mask", (3, 6)))
    spec = PolicySpec("test/model", (4, 3), "structured", entities=True, inputs=inputs, action=MODEL.to_dict())
    torch.manual_seed(0)
    return build_policy(spec, "auto", hidden=[32], d_model=16, heads=2, layers=1, channels=4)


def _batch(B, type_mask, cell_ok=True):
    g = torch.Generator().manual_seed(1)
    return {"entities": torch.rand(B, 4, 3, generator=g), "entity_mask": torch.tensor([[1, 1, 1, 0]] * B).bool(),
            "spatial": torch.rand(B, 2, 2, 3, generator=g), "scalars": torch.rand(B, 1, generator=g),
            "type_mask": torch.tensor([type_mask] * B).bool(),
            "unit_mask": torch.tensor([[[0, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 1]]] * B).bool(),
            "target_mask": torch.tensor([[[0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 0, 0]]] * B).bool(),
            "cell_mask": torch.tensor([[[0] * 6, [0] * 6, [0, 1, 0, 0, 0, int(cell_ok)]]] * B).bool()}


def test_each_part_is_masked_by_the_game_and_by_the_type_chosen_before_it():
    net = _net()
    x = _batch(512, [0, 1, 1])
    dist, value = net(x)
    a = dist.sample(torch.Generator().manual_seed(2))
    assert value.shape == (512,)
    kinds = a["type"].tolist()
    assert set(kinds) == {1, 2}  # noop is masked out
    for b, k in enumerate(kinds):
        units = [u for u in a["units"][b].tolist() if u >= 0]
        assert 1 <= len(units) <= 2 and len(set(units)) == len(units)
        # the entity at slot 3 is absent: never chosen, though move's unit mask allows it
        assert set(units) <= ({0, 1} if k == 1 else {0, 2})
        if k == 1:
            assert a["target"][b].item() == 2  # slot 3 is absent, so the one legal target is 2
        else:
            assert a["cell"][b].item() in (1, 5)
    # the probability of what was sampled, again by teacher forcing, is the same
    again, _ = net(x, actions=a)
    assert torch.allclose(dist.log_prob(a), again.log_prob(a), atol=1e-5)
    # parts the chosen type does not use change nothing
    swapped = dict(a, cell=torch.where(a["type"] == 1, (a["cell"] + 1) % 6, a["cell"]),
                   target=torch.where(a["type"] == 2, 3 - a["target"], a["target"]))
    assert torch.allclose(again.log_prob(a), net(x, actions=swapped)[0].log_prob(swapped), atol=1e-5)


def test_a_greedy_move_is_legal_and_the_kl_to_itself_is_zero():
    net = _net()
    x = _batch(16, [1, 1, 1], cell_ok=False)
    dist, _ = net(x)
    a = dist.mode()
    for b in range(16):
        move = MODEL.from_arrays({k: v[b].numpy() for k, v in a.items()})
        obs = {k: v[b].numpy() for k, v in x.items()}
        assert MODEL.check(move, obs)[1] is None
    other, _ = net(x)
    kl = dist.kl(other)
    assert torch.allclose(kl, torch.zeros_like(kl), atol=1e-5) and (dist.entropy() >= 0).all()


def test_a_structured_checkpoint_round_trips(tmp_path):
    from arena.inference.policy_nets import load_policy, save_policy

    net = _net()
    save_policy(tmp_path, net)
    back, meta = load_policy(tmp_path, net.spec)
    assert meta.arch == "structured" and meta.spec == net.spec
    x = _batch(4, [1, 1, 1])
    a = net(x)[0].mode()
    assert torch.allclose(net(x)[0].log_prob(a), back(x)[0].log_prob(a))


def test_a_one_tensor_checkpoint_spec_from_before_still_loads():
    from arena.inference.policy_nets import PolicySpec

    old = {"game_id": "openspiel/tic_tac_toe-v0", "obs_shape": [3, 3, 3], "action_kind": "discrete",
           "n_actions": 9, "action_shape": [], "low": [], "high": [], "entities": False, "privileged_dim": 0,
           "players": 2}
    spec = PolicySpec.from_dict(old)
    assert spec.inputs == () and spec.action is None and spec.input_shape == (5, 3, 3)


def test_a_checkpoint_written_before_structured_moves_loads_and_plays(tmp_path):
    # the blob as the previous version wrote it: its spec has no inputs and no action model
    from arena.agents.neural import PolicyAgent
    from arena.envs import make_core
    from arena.inference.policy_nets import FILE, FORMAT, build_policy, load_policy, spec_from_core
    from arena.match import play_match

    core = make_core("openspiel/tic_tac_toe-v0")
    net = build_policy(spec_from_core(core), hidden=[8], channels=4)
    spec = {k: v for k, v in net.spec.to_dict().items() if k not in ("inputs", "action")}
    blob = {"format": FORMAT, "version": 1, "spec": spec, "arch": net.arch, "sizes": net.sizes, "info": {},
            "state_dict": net.state_dict()}
    torch.save(blob, tmp_path / FILE)
    back, meta = load_policy(tmp_path, spec_from_core(core))
    assert meta.spec.inputs == () and meta.spec.action is None and back.arch == "conv"
    r = play_match("openspiel/tic_tac_toe-v0", [PolicyAgent(back, greedy=True), "random"], seed=1)
    assert r.outcome == "normal"
