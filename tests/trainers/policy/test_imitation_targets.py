"""Imitation of a teacher whose strategy can be read (CFR's table) fits the teacher's action
probabilities at every position it met, not one sampled move a position; on Kuhn poker that lands
much nearer the teacher's equilibrium than cloning the same matches' moves."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pyspiel")

from arena.config import from_dict  # noqa: E402
from arena.match.batch import play_matches  # noqa: E402
from arena.trainers.policy.config import SCCConfig  # noqa: E402
from arena.trainers.policy.imitation import demonstrations  # noqa: E402
from arena.trainers.policy.scc import SCCTrainer  # noqa: E402

GAME = "openspiel/kuhn_poker-v0"
CFR = "cfr:iterations=40"


def _replays(specs, n=20):
    res = play_matches(GAME, specs, n, seed=5, workers=1, record=True)
    return [(r.replay, list(specs)) for r in res]


def _spec():
    from arena.envs.registry import make_core
    from arena.inference.policy_nets import spec_from_core

    return spec_from_core(make_core(GAME))


def test_cfr_teachers_give_their_probabilities_and_other_teachers_their_moves():
    import pyspiel

    from arena.agents.search import cfr_average_policy

    spec = _spec()
    played = _replays([CFR, CFR])
    demos = demonstrations(played, None, spec)
    mask = demos.obs["mask"]
    assert demos.probs is not None and demos.probs.shape == mask.shape
    assert np.allclose(demos.probs.sum(1), 1.0) and not (demos.probs[~mask] > 0).any()
    # every row is one of the solved table's (Kuhn has 12 information states), and a mixed one among them
    game = pyspiel.load_game("kuhn_poker")
    table = cfr_average_policy(game, 40)
    keys = {s.information_state_string(s.current_player()) for s in _decision_states(game)}
    expected = np.array([[table.policy_for_key(k)[a] for a in (0, 1)] for k in keys])
    gap = np.abs(demos.probs[:, None, :] - expected[None]).max(-1).min(-1)  # to the nearest table row
    assert len(keys) == 12 and gap.max() < 1e-6 and ((demos.probs > 0.01) & (demos.probs < 0.99)).any()
    assert demonstrations(played, None, spec, targets="moves").probs is None
    assert demonstrations(_replays([CFR, "random"]), None, spec).probs is None  # random: moves only


def _decision_states(game):
    out, todo = [], [game.new_initial_state()]
    while todo:
        s = todo.pop()
        if s.is_terminal():
            continue
        if not s.is_chance_node():
            out.append(s)
        todo += [s.child(a) for a in s.legal_actions()]
    return out


def _il_nash_conv(tmp_path, targets: str) -> float:
    cfg = from_dict(SCCConfig, {
        "game": GAME, "seed": 0, "threads": 1, "sizes": {"hidden": [32]},
        "il": {"teachers": [CFR, CFR], "matches": 300, "workers": 1, "epochs": 60, "patience": 8, "lr": 3e-3, "batch_size": 32,
               "targets": targets},
        "learners": [{"name": "main", "role": "main"}], "iterations": 1, "games_per_iter": 8,
        "eval": {"every": 1, "games": 10, "opponents": ["random"], "nash_conv": True}})
    t = SCCTrainer(cfg, tmp_path / targets)
    try:
        t.run(1)
    finally:
        t.close()
    rows = [json.loads(x) for x in (tmp_path / targets / "metrics.jsonl").read_text().splitlines()]
    return next(r["eval/nash_conv"] for r in rows if r["step"] == 0 and "eval/nash_conv" in r)


def test_fitting_the_probabilities_lands_nearer_the_equilibrium_than_cloning_the_moves(tmp_path):
    soft, hard = _il_nash_conv(tmp_path, "auto"), _il_nash_conv(tmp_path, "moves")
    print(f"Kuhn NashConv after imitation of CFR+ (300 matches): probabilities {soft:.4f}, moves {hard:.4f}")
    assert soft < 0.05 and soft < 0.5 * hard, (soft, hard)


def test_a_labeller_answers_at_every_position_and_workers_do_not_change_the_targets():
    """`il.label`: random players give the positions, a C++ MCTS labels each with its root visit shares
    (both seats); a win in one gets all the mass; two processes give the same demonstrations as one (the
    labeller is seeded by replay)."""
    from arena.envs.registry import make_core
    from arena.inference.policy_nets import spec_from_core

    ttt = "openspiel/tic_tac_toe-v0"
    spec = spec_from_core(make_core(ttt))
    res = play_matches(ttt, ["random", "random"], 8, seed=3, workers=1, record="actions")
    played = [(r.replay, ["random", "random"]) for r in res]
    label = "mcts:simulations=300,backend=cpp"
    one = demonstrations(played, None, spec, label=label)
    assert one.probs is not None and len(one) == sum(len(r.replay.steps) for r in res)
    mask = one.obs["mask"]
    assert np.allclose(one.probs.sum(1), 1.0) and not (one.probs[~mask] > 0).any()
    several = mask.sum(1) > 1
    assert ((one.probs.max(1) == 1.0) & several).any() and (one.probs.max(1) < 0.9).any()  # proven wins; open play
    two = demonstrations(played, None, spec, label=label, workers=2)
    assert np.array_equal(two.probs, one.probs) and np.array_equal(two.obs["obs"], one.obs["obs"])
    assert np.array_equal(two.match, one.match) and np.array_equal(two.actions, one.actions)
    assert demonstrations(played, None, spec).probs is None  # random players alone: their moves
    from arena.errors import ArenaError

    with pytest.raises(ArenaError, match="il.label: random cannot tell its action probabilities"):
        demonstrations(played, None, spec, label="random")
