"""The prosthetics stick figure: the whole standing body, head included, is in frame."""

import numpy as np
import pytest

from arena.envs import stickfigure
from arena.envs.stickfigure import HEIGHT, WIDTH, draw_frame

BACKGROUND = (250, 250, 247)

# The 2018 prosthetics model standing at t = 0 (`ProstheticsEnv.skeleton()` after reset): its neck,
# the head body's end, is at 1.569 m.
STANDING = {
    "joints": {
        "ground_pelvis": (0.0, 0.94, 0.0), "hip_r": (-0.071, 0.874, 0.084), "knee_r": (-0.075, 0.478, 0.084),
        "ankle_r": (-0.075, 0.048, 0.084), "hip_l": (-0.071, 0.874, -0.084), "knee_l": (-0.075, 0.478, -0.084),
        "ankle_l": (-0.075, 0.048, -0.084), "subtalar_l": (-0.124, 0.006, -0.091), "mtp_l": (0.055, 0.004, -0.092),
        "back": (-0.101, 1.021, 0.0), "back_0": (-0.053, 1.569, 0.0),
    },
    "ends": {"pros_foot_r": (-0.024, 0.036, 0.084), "toes_l": (0.089, 0.01, -0.075), "head": (-0.053, 1.569, 0.0)},
    "segments": [("hip_r", "knee_r"), ("knee_r", "ankle_r"), ("ankle_r", "pros_foot_r"), ("hip_l", "knee_l"),
                 ("knee_l", "ankle_l"), ("ankle_l", "subtalar_l"), ("subtalar_l", "mtp_l"), ("mtp_l", "toes_l"),
                 ("back", "back_0"), ("back_0", "head"), ("hip_l", "hip_r"), ("back", "hip_r"), ("back", "hip_l")],
    "time": 0.0, "pelvis": (0.0, 0.94, 0.0), "pelvis_vel": (0.0, 0.0, 0.0),
}


def _dark_rows(frame):
    """Rows with the figure's dark (trunk and head) pixels in the middle of the frame."""
    band = frame[:, WIDTH // 2 - 80:WIDTH // 2 + 80].astype(int)
    return np.flatnonzero((band.sum(axis=2) < 200).any(axis=1))


def _assert_head_in_frame(skeleton, frame):
    # nothing of the figure touches the top edge: the head is whole
    band = frame[:4, WIDTH // 2 - 80:WIDTH // 2 + 80]
    assert (band == np.array(BACKGROUND, dtype=np.uint8)).all()
    # and it is drawn: dark pixels well above the neck (1.57 m up, the top of the trunk line)
    rows = _dark_rows(frame)
    assert rows.size and rows.min() > 4
    u, v, r = stickfigure.head_circle(skeleton)
    assert r > 8
    assert 0 <= u - r and u + r < WIDTH and 0 <= v - r and v + r < HEIGHT, (u, v, r)
    assert abs(rows.min() - (v - r)) <= 3  # the topmost dark pixel is the head's top


def test_the_standing_figure_has_its_whole_head_in_frame():
    frame = draw_frame(STANDING)
    assert frame.shape == (HEIGHT, WIDTH, 3)
    band = frame[:4, WIDTH // 2 - 80:WIDTH // 2 + 80]
    assert (band == np.array(BACKGROUND, dtype=np.uint8)).all()  # no part of the head cut off at the top
    _assert_head_in_frame(STANDING, frame)
    u, v, r = stickfigure.head_circle(STANDING)
    assert v < 100  # above the neck, not on it
    # the head sits on the neck: its lowest point is the neck's pixel
    neck_v = 320 - 1.569 * (320 / 2.1)
    assert abs((v + r) - neck_v) < 1.0


def test_the_head_follows_the_trunk_when_it_leans():
    leaning = dict(STANDING, joints=dict(STANDING["joints"], back_0=(0.3, 1.45, 0.0)),
                   ends=dict(STANDING["ends"], head=(0.3, 1.45, 0.0)))
    u, v, r = stickfigure.head_circle(leaning)
    neck_u = WIDTH / 2 + 0.3 * (320 / 2.1)
    assert u > neck_u + r / 3  # forward of the neck, along the trunk
    _assert_head_in_frame(leaning, draw_frame(leaning))


def test_the_2018_model_has_no_arms_and_arms_are_drawn_where_a_model_has_them():
    assert not stickfigure.has_arms(STANDING)
    armed = dict(STANDING, joints=dict(STANDING["joints"], elbow_l=(0.1, 1.1, -0.2), shoulder_l=(-0.05, 1.4, -0.2)),
                 segments=STANDING["segments"] + [("shoulder_l", "elbow_l")])
    assert stickfigure.has_arms(armed)
    plain, with_arm = draw_frame(STANDING), draw_frame(armed)
    # the upper arm's pixels: blue (the left side) between the shoulder and the elbow
    u = int(WIDTH / 2 + 0.025 * (320 / 2.1))
    v = int(320 - 1.25 * (320 / 2.1))
    patch = with_arm[v - 3:v + 4, u - 3:u + 4].reshape(-1, 3)
    assert any(tuple(p) == (40, 90, 200) for p in patch)
    assert not (plain[v - 3:v + 4, u - 3:u + 4] == with_arm[v - 3:v + 4, u - 3:u + 4]).all()


def test_the_rendered_prosthetics_frame_shows_the_whole_figure_at_t0():
    pytest.importorskip("opensim")
    from arena.envs.prosthetics import ProstheticsEnv

    env = ProstheticsEnv(render_mode="rgb_array")
    try:
        env.reset(seed=0)
        skeleton = env.skeleton()
        assert not stickfigure.has_arms(skeleton)
        assert set(env.bodies) == {"pelvis", "femur_r", "pros_tibia_r", "pros_foot_r", "femur_l", "tibia_l",
                                   "talus_l", "calcn_l", "toes_l", "torso", "head"}
        _assert_head_in_frame(skeleton, env.render())
    finally:
        env.close()
