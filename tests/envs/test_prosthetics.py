"""The AI for Prosthetics task: its definitions against values worked by hand, seeding, the
simulator's failures, and what a user without the opensim extra sees."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from arena.envs import make, make_core
from arena.envs import prosthetics as P
from arena.errors import MissingExtra

pytest.importorskip("opensim")

GOLDEN = Path(__file__).parent.parent / "golden" / "prosthetics_state.json"


@pytest.fixture(scope="module")
def recorded():
    """A state the simulator produced: round 2, seed 7, 10 steps of excitations 0.3."""
    return json.loads(GOLDEN.read_text())["state_desc"]


@pytest.fixture(scope="module")
def env():
    e = make("arena/Prosthetics-v0").unwrapped
    yield e
    e.close()


def test_observation_vector_layout_from_a_recorded_state(recorded):
    d = recorded
    v = P.observation_vector(d, round=1)
    assert len(v) == 160 == 8 + 6 * 9 + 33 + 3 * 19 + 8
    pel = d["body_pos"]["pelvis"]
    # pelvis: y, vx, vy, ax, ay, pitch, pitch rate, pitch acceleration (x is left out)
    assert v[0] == pytest.approx(0.9458784533463714) and v[0] == pel[1]
    assert v[1] == pytest.approx(0.334632057889383) and v[1] == d["body_vel"]["pelvis"][0]
    assert v[5] == d["body_pos_rot"]["pelvis"][2]
    # head: x and y relative to the pelvis; pitch relative to the pelvis' pitch
    assert v[8] == pytest.approx(-0.08510714307454523 - 0.02376969747907617)
    assert v[9] == pytest.approx(1.5680266661615434 - 0.9458784533463714)
    assert v[14] == pytest.approx(0.002345129391274115 - 0.08961162939127411)
    assert v[10] == d["body_vel"]["head"][0]  # velocities stay absolute
    # the prosthesis replaces the right toes and talus: 9 zeros each (bodies 4 and 6 of the list)
    assert v[8 + 3 * 9: 8 + 4 * 9] == [0.0] * 9
    assert v[8 + 5 * 9: 8 + 6 * 9] == [0.0] * 9
    # joints from index 62: ankle_l angle, speed, acceleration first; hip_r's three angles at 62+3+3+3+9
    assert v[62] == pytest.approx(-0.07250426722348743)
    assert v[62 + 3 + 3 + 3 + 9: 62 + 3 + 3 + 3 + 9 + 3] == d["joint_pos"]["hip_r"]
    # muscles in name order from index 95: abd_l first (activation, fiber length, fiber velocity)
    assert v[95:98] == pytest.approx([0.2999954917052547, 0.0728307167301707, -0.03932118001040618])
    assert v[95 + 3 * 18: 95 + 3 * 19] == [d["muscles"]["vasti_r"][k] for k in ("activation", "fiber_length",
                                                                                 "fiber_velocity")]
    # centre of mass: x, y relative to the pelvis, then velocity and acceleration
    assert v[152] == pytest.approx(-0.08370489753459384 - 0.02376969747907617)
    assert v[153] == pytest.approx(0.9933398169941563 - 0.9458784533463714)
    assert v[154:160] == d["misc"]["mass_center_vel"] + d["misc"]["mass_center_acc"]
    v2 = P.observation_vector(d, round=2)
    assert len(v2) == 163 and v2[:160] == v and v2[160:] == [1.25, 0.0, 0.0]


def test_rewards_and_fall_from_a_recorded_state(recorded):
    # round 1: 9 - (vx - 3)^2 = 9 - (0.334632057889383 - 3)^2 = 9 - 7.104186266830985
    assert P.reward_round1(recorded) == pytest.approx(1.8958137331690148, abs=1e-12)
    # round 2: 10 - (vx - 1.25)^2 - (vz - 0)^2 - 0.001 * sum(activation^2)
    #        = 10 - 0.8379386 - 0.0001941 - 0.001 * 1.709948605826073
    assert P.reward_round2(recorded) == pytest.approx(9.160197496954405, abs=1e-12)
    assert not P.fallen(recorded)
    low = json.loads(json.dumps(recorded))
    low["body_pos"]["pelvis"][1] = 0.599
    assert P.fallen(low)


def test_the_env_steps_by_the_definitions(env):
    obs, info = env.reset(seed=0)
    assert obs.shape == (160,) and obs.dtype == np.float32
    assert env.action_space.shape == (19,) and float(env.action_space.low.min()) == 0.0
    assert float(env.action_space.high.max()) == 1.0
    rng = np.random.default_rng(1)
    heights = []
    for _ in range(400):
        obs, r, terminated, truncated, info = env.step(rng.uniform(0, 1, 19).astype(np.float32))
        d = env.state_desc()
        assert r == pytest.approx(P.reward_round1(d), abs=1e-12)
        assert obs == pytest.approx(np.asarray(P.observation_vector(d), dtype=np.float32))
        heights.append(d["body_pos"]["pelvis"][1])
        if terminated or truncated:
            break
    # a random body falls: the episode ends on the first step with the pelvis under 0.6 m
    assert terminated and not truncated
    assert heights[-1] < 0.6 and min(heights[:-1]) >= 0.6
    assert env.istep == len(heights) < 300


def test_step_limit_frame_skip_and_clipping():
    env = make("arena/Prosthetics-v0", time_limit=4, frame_skip=2).unwrapped
    env.reset(seed=0)
    _, r1, te, tr, _ = env.step(np.full(19, 5.0))  # clipped to 1
    assert env.istep == 2 and not (te or tr)
    assert list(env._last_action) == [1.0] * 19
    _, _, te, tr, _ = env.step(np.zeros(19))
    assert env.istep == 4 and tr and not te
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.full(19, np.nan))
    # frame skip sums the rewards of its steps
    a = make("arena/Prosthetics-v0").unwrapped
    a.reset(seed=0)
    two = sum(a.step(np.full(19, 0.2))[1] for _ in range(2))
    b = make("arena/Prosthetics-v0", frame_skip=2).unwrapped
    b.reset(seed=0)
    assert b.step(np.full(19, 0.2))[1] == pytest.approx(two, abs=1e-12)


def test_round2_targets_are_seeded():
    env = make("arena/ProstheticsRound2-v0").unwrapped
    obs, info = env.reset(seed=3)
    assert obs.shape == (163,) and list(obs[160:]) == [1.25, 0.0, 0.0]
    first = env.targets.copy()
    env.reset(seed=3)
    assert np.array_equal(env.targets, first)
    env.reset(seed=4)
    assert not np.array_equal(env.targets, first)
    assert first.shape == (1001, 3) and list(first[0]) == [1.25, 0.0, 0.0]
    speed = np.hypot(first[:, 0], first[:, 2])
    steps = np.flatnonzero(np.abs(np.diff(speed)) > 0)
    assert 1 <= len(steps) <= 10  # Poisson(300) change times over 1000 steps
    assert np.abs(np.diff(speed)).max() <= 0.5 + 1e-12
    heading = np.arctan2(first[:, 2], first[:, 0])
    assert np.abs(np.diff(heading)).max() <= math.pi / 8 + 1e-12
    assert all(first[:, 1] == 0.0)


def test_an_integration_failure_truncates_and_the_env_lives_on(monkeypatch):
    env = make("arena/Prosthetics-v0").unwrapped
    env.reset(seed=0)
    env.step(np.full(19, 0.1))
    # a NaN excitation behind the env's back: SimTK refuses to advance time
    monkeypatch.setattr(env, "set_excitations", lambda a: env._controls[0].setValue(float("nan")))
    _, r, terminated, truncated, info = env.step(np.zeros(19))
    assert truncated and not terminated and r == 0.0
    assert "Unable to advance time past 0.01" in info["error"]
    monkeypatch.undo()
    obs, _ = env.reset(seed=0)
    _, r, te, tr, info = env.step(np.full(19, 0.1))
    assert np.isfinite(obs).all() and np.isfinite(r) and not (te or tr) and "error" not in info


def test_core_plays_it_as_a_one_player_game():
    core = make_core("arena/Prosthetics-v0", time_limit=3)
    core.reset(5)
    assert core.players == ["player_0"] and core.action_kind == "continuous"
    assert core.engine["opensim"] == "4.6"
    assert core.text(0).startswith("t=0.00s pelvis x=")
    a, why = core.validate(0, [0.5] * 19)
    assert why is None and a.dtype == np.float32
    assert core.validate(0, [0.5] * 18)[1] == "action has shape (18,), expected (19,)"
    assert "NaN" in core.validate(0, [float("nan")] * 19)[1]
    for _ in range(3):
        core.apply(0, a)
    assert core.is_terminal()


def test_without_opensim_the_ids_are_listed_and_making_one_names_the_extra(monkeypatch):
    from arena.envs.registry import describe_games, list_game_ids

    assert {"arena/Prosthetics-v0", "arena/ProstheticsRound2-v0"} <= set(list_game_ids())
    monkeypatch.setitem(sys.modules, "opensim", None)  # import opensim now fails
    with pytest.raises(MissingExtra, match=r'pip install "arena\[opensim\]"'):
        make("arena/Prosthetics-v0")
    rows = {r["id"]: r for r in describe_games()}
    assert 'arena[opensim]' in rows["arena/Prosthetics-v0"]["error"]


def test_missing_model_files_name_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("ARENA_OSIM_MODELS", str(tmp_path))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(P.ModelFileMissing, match=r"pip install --no-deps --target .*osim-rl osim-rl==3.0.11"):
        P.model_dir()
