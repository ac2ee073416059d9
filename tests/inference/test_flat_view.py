"""The flat view of a structured game (`arena.inference.flat_view`): its spaces for Skirmish 3m and
its legalisation of flat actions, on positions worked by hand."""

import numpy as np
import pytest

from arena.envs.registry import make_core
from arena.envs.skirmish import ATTACK, MOVE, NO_OP, STOP
from arena.inference.flat_view import FlatView

GAME = "arena/Skirmish-3m-v0"


def flat(type_, units=(), target=0, cell=0):
    """A flat action of Skirmish 3m: type, six unit bits (slots 0-5), target, location cell."""
    bits = [0] * 6
    for u in units:
        bits[u] = 1
    return np.array([type_, *bits, target, cell])


def position(enemy_far: bool = False, dead: tuple[int, ...] = (), enemy_dead: tuple[int, ...] = ()):
    """Skirmish 3m, red's view. Red's units at x = 10, y = 12, 16, 20; blue's unit 0 (slot 3) at
    x = 15 (5 away: in sight, sight is 9), its units 1 and 2 (slots 4, 5) at x = 31 (out of sight);
    `enemy_far`: all of blue's at x = 31. `dead`, `enemy_dead`: red's and blue's units killed."""
    core = make_core(GAME)
    core.reset(3)
    b = core.batch
    b.pos[0, :, :, 1] = [12.0, 16.0, 20.0]
    b.pos[0, 0, :, 0] = 10.0
    b.pos[0, 1, :, 0] = [31.0 if enemy_far else 15.0, 31.0, 31.0]
    for side, units in ((0, dead), (1, enemy_dead)):
        for u in units:
            b.alive[0, side, u] = False
            b.health[0, side, u] = 0.0
    core._obs = None
    return core, core.observation(0)


def legal(core, move, obs):
    checked, why = core.model.check(move, obs)
    assert why is None, (move, why)
    return checked


def test_spaces_of_skirmish_3m():
    core = make_core(GAME)
    view = FlatView.of_core(core)
    # type 5, six unit bits, target over 6 slots, the 8 x 8 location grid
    assert view.nvec.tolist() == [5, 2, 2, 2, 2, 2, 2, 6, 64]
    assert view.slices == {"type": slice(0, 1), "units": slice(1, 7), "target": slice(7, 8),
                           "location": slice(8, 9)}
    # every Box of the observation, masks included: 6x16 + 6 + 4x8x8 + 4 + 5 + 5x6 + 5x6 + 5x64
    assert view.obs_size == 96 + 6 + 256 + 4 + 5 + 30 + 30 + 320 == 747
    assert view.observation_space.shape == (747,) and view.observation_space.dtype == np.float32
    obs = core.observation(1)
    x = view.flatten(obs)
    assert x.dtype == np.float32 and view.observation_space.contains(x)
    i = view.keys.index("entities")
    start = sum(view.sizes[:i])
    assert np.array_equal(x[start:start + 96], obs["entities"].ravel())  # no swap: already seat-relative


def test_legal_orders_pass_through_unchanged():
    core, obs = position()
    view = FlatView.of_core(core)
    rng = np.random.default_rng(0)
    for _ in range(200):
        move = core.model.sample(obs, rng)
        back = view.to_move(view.to_flat(move), obs)
        want = dict(move)
        if "units" in want:
            want["units"] = sorted(want["units"])  # the flat form keeps slot order
        assert back == want
        legal(core, back, obs)


def test_an_illegal_type_becomes_no_op():
    core, obs = position(enemy_far=True)
    assert obs["type_mask"][ATTACK] == 0  # no enemy in sight: attack is illegal
    view = FlatView.of_core(core)
    assert view.to_move(flat(ATTACK, units=[0, 1], target=3), obs) == {"type": NO_OP}
    # out of range values too
    assert view.to_move(np.array([7, 1, 0, 0, 0, 0, 0, 0, 0]), obs) == {"type": NO_OP}


def test_dead_and_enemy_slots_are_dropped_from_the_selection():
    core, obs = position(dead=(1,))
    view = FlatView.of_core(core)
    # move units 0, 1 (dead) and 4 (an enemy slot) to cell 9 = [1, 1]: unit 0 alone moves; the target is dropped
    move = view.to_move(flat(MOVE, units=[0, 1, 4], target=5, cell=9), obs)
    assert move == {"type": MOVE, "units": [0], "location": [1, 1]}
    legal(core, move, obs)
    # only the dead unit selected: nothing left to order, so no-op
    assert view.to_move(flat(STOP, units=[1]), obs) == {"type": NO_OP}
    # nobody selected at all: no-op
    assert view.to_move(flat(MOVE, units=[], cell=3), obs) == {"type": NO_OP}
    # stop uses no target and no location: both dropped
    assert view.to_move(flat(STOP, units=[0, 2], target=4, cell=63), obs) == {"type": STOP, "units": [0, 2]}


def test_an_attack_on_an_unseen_or_dead_target_is_no_op():
    core, obs = position()
    assert obs["target_mask"][ATTACK].tolist() == [0, 0, 0, 1, 0, 0]  # slot 3 in sight, 4 and 5 not
    view = FlatView.of_core(core)
    move = view.to_move(flat(ATTACK, units=[0, 2], target=3, cell=17), obs)
    assert move == {"type": ATTACK, "units": [0, 2], "target": 3}  # the location is dropped
    legal(core, move, obs)
    assert view.to_move(flat(ATTACK, units=[0], target=4), obs) == {"type": NO_OP}  # unseen
    assert view.to_move(flat(ATTACK, units=[0], target=1), obs) == {"type": NO_OP}  # an own slot
    # the one enemy in sight dies: attack itself is illegal now, so no-op whatever the target
    core, obs = position(enemy_dead=(0,))
    assert obs["type_mask"][ATTACK] == 0
    assert view.to_move(flat(ATTACK, units=[0], target=3), obs) == {"type": NO_OP}


def test_every_flat_action_is_a_legal_order():
    view = FlatView.of_core(make_core(GAME))
    space = view.action_space
    space.seed(0)
    for kwargs in ({}, {"enemy_far": True}, {"dead": (0, 2)}, {"dead": (0, 1, 2)}, {"enemy_dead": (0,)}):
        core, obs = position(**kwargs)
        for _ in range(300):
            legal(core, view.to_move(space.sample(), obs), obs)


def test_a_continuous_part_has_no_flat_view():
    from gymnasium import spaces

    from arena.envs.actions import ActionModel

    with pytest.raises(ValueError, match="continuous"):
        FlatView(spaces.Dict({"x": spaces.Box(0, 1, (2,))}), ActionModel.continuous((2,), -1, 1))
