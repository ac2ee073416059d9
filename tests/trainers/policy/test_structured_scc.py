"""A game with StarCraft's shape (`tests/plugins/squad_games.py`: simultaneous moves, an entity
observation with a map and scalars, a compound move of a type, units by pointer and a target unit or
a cell) through the whole arena: its checkers, its replays, and the SCC learner with two learners in
its league, whose entity policy must beat random by a margin."""

import json

import numpy as np

import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

torch = pytest.importorskip("torch")

from arena.config import from_dict  # noqa: E402
from arena.envs import load_plugin, make, make_core  # noqa: E402
from arena.league.manager import open_league  # noqa: E402
from arena.match import play_match  # noqa: E402
from arena.match.verify import observed_moves, verify_replay  # noqa: E402
from arena.replays import read_replay, write_replay  # noqa: E402

GAME = "test/Squads-v0"


@pytest.fixture(scope="module", autouse=True)
def squads():
    load_plugin("plugins.squad_games")


def test_the_game_passes_pettingzoos_parallel_checkers():
    parallel_api_test(make(GAME), num_cycles=30)
    parallel_seed_test(lambda: make(GAME), num_cycles=30)


@pytest.mark.parametrize("record", ["actions", "text"])
def test_structured_moves_are_stored_compactly_and_verify(tmp_path, record):
    r = play_match(GAME, ["random", "focus"], seed=5, record=record)
    f = write_replay(r.replay, tmp_path / "m.jsonl.gz")
    back = read_replay(f)
    moves = [s["action"] for s in back.steps]
    assert all(isinstance(m, dict) and "type" in m for m in moves)
    attack = next(m for m in moves if m["type"] == 1)
    assert set(attack) == {"type", "units", "target"} and isinstance(attack["units"], list)
    assert verify_replay(back).ok
    seen = observed_moves(back)
    assert len(seen) == len(moves) and set(seen[0][1]) >= {"entities", "entity_mask", "type_mask"}


def test_an_illegal_structured_move_is_refused_and_replayed_the_same(tmp_path):
    from plugins.agents import Scripted

    bad = Scripted([{"type": 1, "units": [0, 0], "target": 3}, {"type": 9}])
    r = play_match(GAME, [bad, "random"], seed=2, record="actions")
    reasons = [s.get("reason") for s in r.replay.steps if s.get("event") == "invalid"]
    assert any("slot chosen twice" in x for x in reasons)
    assert r.outcome == "forfeit" or len(reasons) == 1
    assert verify_replay(read_replay(write_replay(r.replay, tmp_path / "bad.jsonl.gz"))).ok


def test_the_core_is_the_codec():
    core = make_core(GAME)
    core.reset(1)
    move = {"type": 1, "units": [2, 0], "target": 4, "cell": [1, 1]}
    assert core.encode_action(move) == {"type": 1, "units": [2, 0], "target": 4}
    assert core.validate(0, core.encode_action(move)) == ({"type": 1, "units": [2, 0], "target": 4}, None)
    assert core.action_to_text(0, move) == "attack units=[2, 0] target=4"


def test_a_vtrace_step_on_padded_structured_trajectories_stays_finite():
    # columns of different lengths are padded with moves whose log-probability may be -inf: V-trace
    # sees whole columns, so they must be kept out of every term
    from arena.inference.policy_nets import build_policy, spec_from_core
    from arena.trainers.policy.actors import Pairing, Seat, play_pairings, to_batch
    from arena.trainers.policy.learner import LearnerSettings, PolicyLearner

    torch.manual_seed(0)
    net = build_policy(spec_from_core(make_core(GAME)), "auto", hidden=[32], d_model=16, layers=1, heads=2, channels=4)
    pairs = [Pairing([Seat("main", trained=True), Seat(spec="focus")], ["main", "focus"]) for _ in range(6)]
    _, trajs = play_pairings(GAME, pairs, {"main": net}, seed=0)
    batch = to_batch(trajs, gamma=1.0)
    assert not bool(batch.valid.all())  # some columns are padded
    stats = PolicyLearner(net, LearnerSettings(algo="vtrace", epochs=1, minibatch=1000), lr=1e-3).step(
        batch, 0.0, torch.Generator().manual_seed(0))
    assert all(np.isfinite(v) for v in stats.values()) and "pg_loss" in stats and "value_loss" in stats
    assert all(torch.isfinite(p).all() for p in net.parameters())


# -- SCC with two learners ------------------------------------------------------------------------------
def config(**kw):
    from arena.trainers.policy.config import SCCConfig

    base = {"game": GAME, "seed": 1, "threads": 1,
            "il": {"teachers": ["focus", "random"], "matches": 60, "workers": 1, "epochs": 40, "batch_size": 32, "patience": 40, "players": ["focus"]},
            "sizes": {"hidden": [64], "d_model": 32, "layers": 1, "heads": 4, "channels": 8},
            "learners": [{"name": "main", "role": "main"}, {"name": "main_exploiter", "role": "main_exploiter"}],
            "opponents": ["random"], "iterations": 4, "games_per_iter": 32, "lr": 1e-3, "kl_coef": 0.05,
            "eval": {"every": 4, "games": 40, "opponents": ["random", "focus"]}}
    base.update(kw)
    return from_dict(SCCConfig, base)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from arena.trainers.policy.scc import SCCTrainer

    folder = tmp_path_factory.mktemp("squads") / "run"
    t = SCCTrainer(config(), folder)
    try:
        t.run()
    finally:
        t.close()
    return t, folder


def _evals(folder):
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    return [x for x in lines if "eval/win_rate/random" in x]


def test_imitation_clones_the_scripted_player_part_by_part(trained):
    t, folder = trained
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    il = [x for x in lines if "il/val_acc" in x]
    # "focus" attacks the weakest enemy in range with every unit: whole moves (type, units, target) cloned
    assert il and il[-1]["il/val_acc"] >= 0.5 and t.il_report["train_moves"] > 100


def test_the_entity_policy_learns_to_beat_random(trained):
    _, folder = trained
    evals = _evals(folder)
    # after four iterations the main wins 40 greedy seat-swapped games against random at a rate whose
    # 95% interval lies above 0.75 (>= 36 of 40)
    assert evals[-1]["eval/win_rate/random"] >= 0.9, evals[-1]
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in lines if "train/entropy" in x]
    assert len(steps) == 4 and all(x["train/entropy"] > 0 and x["train_main_exploiter/entropy"] > 0 for x in steps)
    # the KL to the imitation policy, per part and summed, is measured and stays finite and small
    assert all(0 <= x["train/kl_anchor"] < 5 for x in steps) and any(x["train/kl_anchor"] > 0 for x in steps)


def test_both_learners_play_in_the_league_and_its_replays_verify(trained):
    from arena.replays import list_replays

    t, folder = trained
    players = {p.name for p in open_league(t.league_dir).players()}
    assert {"main", "main_exploiter", "random", "main@il"} <= players
    paths = list_replays(folder)
    assert len(paths) >= 4 * 2 * 32  # every match of both learners, four iterations
    for p in paths[:: max(1, len(paths) // 12)]:
        assert verify_replay(read_replay(p)).ok, p


def test_a_trained_structured_policy_plays_as_an_agent(trained):
    _, folder = trained
    r = play_match(GAME, [f"policy:{folder}/latest", "random"], seed=11)
    assert r.outcome == "normal" and all(isinstance(s["action"], dict) for s in r.replay.steps)


def test_arch_entity_trains_on_an_entity_game_with_a_pointer_move(tmp_path):
    # the entity mask travels with the moves from the actors to the learner (it used to be dropped,
    # and the first update raised a TypeError)
    from arena.trainers.policy.scc import SCCTrainer

    cfg = config(game="test/Pick-v0", arch="entity", il=None, kl_coef=0.0, iterations=3,
                 learners=[{"name": "main", "role": "main"}], eval={"every": 3, "games": 40, "opponents": ["random"]})
    t = SCCTrainer(cfg, tmp_path / "run")
    try:
        t.run()
    finally:
        t.close()
    net = t.learners["main"].net
    assert net.arch == "entity" and net.model.parts[0].kind == "pointer"
    evals = _evals(tmp_path / "run")
    assert evals[-1]["eval/win_rate/random"] >= 0.75, evals


def _self_play_batch(matches: int, seed: int):
    """A small untrained entity policy (torch seed 0), `matches` of its self-play and their batch:
    (net, results, batch)."""
    from arena.inference.policy_nets import build_policy, spec_from_core
    from arena.trainers.policy.actors import Pairing, Seat, play_pairings, to_batch

    torch.manual_seed(0)
    net = build_policy(spec_from_core(make_core(GAME)), hidden=[32], d_model=16, heads=2, layers=1, channels=4)
    pairings = [Pairing([Seat("main", trained=True), Seat("main", trained=True)], ["main", "main"])
                for _ in range(matches)]
    results, trajs = play_pairings(GAME, pairings, {"main": net}, seed=seed)
    return net, results, to_batch(trajs, gamma=1.0)


@pytest.mark.parametrize("algo", ["ppo", "vtrace"])
def test_one_learner_step_on_structured_moves(algo):
    # rollouts of nested dicts with [T, B] leading dimensions; the anchor starts equal to the policy,
    # so the per-part KL summed over the parts is 0 at the first minibatch
    import copy

    from arena.trainers.policy.learner import LearnerSettings, PolicyLearner

    net, _, batch = _self_play_batch(6, seed=4)
    T, B = batch.valid.shape
    assert B == 12 and batch.inputs["entities"].shape == (T, B, 6, 6) and batch.inputs["unit_mask"].dtype == torch.bool
    assert batch.actions["units"].shape == (T, B, 3) and batch.actions["type"].shape == (T, B)
    lrn = PolicyLearner(net, LearnerSettings(algo=algo, epochs=1, minibatch=64), lr=1e-3, anchor=copy.deepcopy(net))
    stats = lrn.step(batch, kl_coef=0.1, generator=torch.Generator().manual_seed(0))
    assert all(np.isfinite(v) for v in stats.values()), stats
    assert stats["entropy"] > 0 and stats["kl_anchor"] < 0.05 and lrn.version == 1


def test_a_step_reports_what_explains_a_stall():
    # per-part entropies in [0, 1] (an untrained net explores every part), the KL to the behaviour policy
    # (0 before the first update: the batch was played by these very weights), the advantages' spread,
    # and the order types played, which add up to 1
    from arena.envs.actions import ActionModel
    from arena.inference.distributions import MaskedCategorical
    from arena.inference.policy_nets import build_policy, spec_from_core
    from arena.trainers.policy.actors import Pairing, Seat, order_shares, play_pairings, to_batch
    from arena.trainers.policy.learner import LearnerSettings, PolicyLearner

    torch.manual_seed(0)
    spec = spec_from_core(make_core(GAME))
    net = build_policy(spec, hidden=[32], d_model=16, heads=2, layers=1, channels=4)
    pairings = [Pairing([Seat("main", trained=True), Seat("main", trained=True)], ["main", "main"]) for _ in range(4)]
    _, trajs = play_pairings(GAME, pairings, {"main": net}, seed=5)
    lrn = PolicyLearner(net, LearnerSettings(algo="vtrace", epochs=1, minibatch=10_000), lr=1e-3)
    stats = lrn.step(to_batch(trajs, gamma=1.0), generator=torch.Generator().manual_seed(0))
    parts = [p.name for p in ActionModel.from_dict(spec.action).parts]
    assert {f"entropy/{p}" for p in parts} <= set(stats), stats
    assert all(0.3 < stats[f"entropy/{p}"] <= 1.0 for p in parts), stats
    assert abs(stats["kl_behaviour"]) < 1e-5 and stats["adv_std"] > 0, stats
    shares = order_shares(trajs, spec.action)
    labels = ActionModel.from_dict(spec.action).parts[0].labels
    assert set(shares) == {f"orders/{x}" for x in labels} and abs(sum(shares.values()) - 1) < 1e-9
    played = np.concatenate([t.actions["type"] for t in trajs])
    assert shares[f"orders/{labels[0]}"] == pytest.approx(float((played == 0).mean()))
    # a part with one certain choice reads 0: the measure a stalled exploration shows
    certain = MaskedCategorical(torch.tensor([[9.0, -9.0, -9.0]]) * 10)
    assert float(certain.normalized_entropy("legal")) < 1e-3


def test_exploration_draws_the_first_part_from_the_mixture_and_says_so():
    # a policy made near-certain of one order type: explore=0.3 plays the others about 0.3 x (k-1)/k of the
    # time, and the log-probability recorded is the behaviour mixture's, part by part
    from arena.agents.neural import PolicyAgent
    from arena.envs.actions import ActionModel
    from arena.inference.policy_nets import build_policy, spec_from_core
    from arena.inference.trees import tree_stack, tree_torch
    from arena.inference.policy_nets import policy_inputs

    torch.manual_seed(0)
    core = make_core(GAME)
    spec = spec_from_core(core)
    net = build_policy(spec, hidden=[32], d_model=16, heads=2, layers=1, channels=4)
    head = net.heads["to_" + ActionModel.from_dict(spec.action).parts[0].name]["logits"]
    with torch.no_grad():
        last = [m for m in head.modules() if isinstance(m, torch.nn.Linear)][-1]
        last.weight.zero_()
        last.bias.copy_(torch.tensor([-20.0] + [20.0] + [-20.0] * (last.bias.numel() - 2)))  # always the 2nd
    core.reset(3)
    obs = [type("O", (), {"raw": core.observation(0), "player": 0, "core": core})()] * 400
    for e, lo, hi in ((0.0, 0.0, 0.0), (0.3, 0.12, 0.28)):
        agent = PolicyAgent(net, seed=1, explore=e)
        _, x = agent.decide(obs)
        other = float((x["action"]["type"] != 1).float().mean())
        assert lo <= other <= hi, (e, other)
        x_in = tree_torch(tree_stack([policy_inputs(o.raw, 0, spec) for o in obs[:50]]))
        with torch.no_grad():
            dist, _ = net(x_in, actions={k: v[:50] for k, v in x["action"].items()})
            pi = dist.log_prob({k: v[:50] for k, v in x["action"].items()})
            first = dist.parts["type"]
            legal = first.mask.float()
            mu = (1 - e) * first.probs + e * legal / legal.sum(-1, keepdim=True)
            a0 = x["action"]["type"][:50].unsqueeze(-1)
            want = pi - first.log_probs.gather(-1, a0).squeeze(-1) + mu.gather(-1, a0).squeeze(-1).log()
        assert torch.allclose(x["logp"][:50], want, atol=1e-4), (x["logp"][:5], want[:5])


@pytest.mark.parametrize("algo", ["ppo", "vtrace"])
def test_self_imitation_is_a_term_only_where_it_is_on(algo):
    from arena.trainers.policy.learner import LearnerSettings, PolicyLearner

    net, _, batch = _self_play_batch(4, seed=6)
    off = PolicyLearner(net, LearnerSettings(algo=algo, epochs=1, minibatch=64), lr=1e-3).step(batch)
    on = PolicyLearner(net, LearnerSettings(algo=algo, epochs=1, minibatch=64, sil_coef=1.0), lr=1e-3).step(batch)
    assert "sil_loss" not in off and "sil_share" not in off
    # the winners' moves beat a fresh value (about 0) in about half the games: a share strictly inside (0, 1)
    assert 0.0 < on["sil_share"] < 1.0 and on["sil_loss"] != 0.0, on
