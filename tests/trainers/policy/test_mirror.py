"""`il.mirror`: imitation also trains on each position's mirror image, where the board has one."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from arena.envs.registry import make_core  # noqa: E402
from arena.errors import ConfigError  # noqa: E402
from arena.inference.policy_nets import policy_input, spec_from_core  # noqa: E402
from arena.trainers.policy.imitation import Demonstrations, with_mirror_images  # noqa: E402

from .test_resume_same_run import config, train  # noqa: E402


def position(core, moves):
    core.reset(seed=0)
    for a in moves:
        core.apply(core.current_player(), a)
    p = core.current_player()
    x, m = policy_input(core.observation(p), p, spec_from_core(core))
    return x, m


@pytest.mark.parametrize("game,moves", [("openspiel/connect_four-v0", [3, 0, 0, 1, 6, 6, 5]),
                                        ("openspiel/tic_tac_toe-v0", [0, 4, 5])])
def test_the_image_of_a_position_is_the_position_of_the_mirrored_moves(game, moves):
    core = make_core(game)
    perm = core.mirror()
    assert sorted(perm) == list(range(core.num_actions)) and list(perm[perm]) == list(range(core.num_actions))
    x, m = position(core, moves)
    xi, mi = position(core, [int(perm[a]) for a in moves])
    assert not np.array_equal(x, xi)  # a position that is not its own image
    probs = np.where(m, np.arange(1, len(m) + 1), 0).astype(np.float32)
    probs /= probs.sum()
    a = int(np.flatnonzero(m)[0])
    d = Demonstrations({"obs": x[None], "mask": m[None]}, np.array([a]), np.array([1.0], np.float32), np.array([7]), probs=probs[None])
    both = with_mirror_images(d, perm)
    assert len(both) == 2 and np.array_equal(both.obs["obs"][0], x) and both.match.tolist() == [7, 7]
    assert np.array_equal(both.obs["obs"][1], xi) and np.array_equal(both.obs["mask"][1], mi)
    assert both.actions[1] == perm[a] and mi[perm[a]]
    for b in range(len(m)):  # each move's probability sits on its image
        assert both.probs[1][perm[b]] == probs[b]


def test_a_run_with_mirror_trains_on_twice_the_positions_and_validates_on_the_played(tmp_path):
    il = {"teachers": ["first", "random"], "matches": 24, "workers": 1, "epochs": 2, "players": ["first"]}
    plain = train(config(il=il, iterations=0), tmp_path / "plain").il_report
    mirrored = train(config(il={**il, "mirror": True}, iterations=0), tmp_path / "mirror").il_report
    assert mirrored["train_moves"] == 2 * plain["train_moves"] and mirrored["val_moves"] == plain["val_moves"]


def test_mirror_on_a_game_without_one_is_one_line(tmp_path):
    from arena.trainers.policy.scc import SCCTrainer

    with pytest.raises(ConfigError) as e:
        SCCTrainer(config(game="openspiel/leduc_poker-v0", il={"teachers": ["random", "random"], "matches": 4,
                                                             "mirror": True}), tmp_path / "run")
    assert str(e.value).startswith("il.mirror: openspiel/leduc_poker-v0 has no board mirror") and "\n" not in str(e.value)
