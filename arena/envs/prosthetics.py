"""The NeurIPS 2018 "AI for Prosthetics" task on OpenSim 4.6, as Gymnasium envs.

``arena/Prosthetics-v0`` (round 1) and ``arena/ProstheticsRound2-v0`` (round 2): a 3-D
musculoskeletal model of a person with a transfemoral prosthesis on the right leg
(``gait14dof22musc_pros_20180507.osim``, the model file osim-rl ships) walks forward. The
definitions follow osim-rl 2.1.5's ``ProstheticsEnv``, the challenge's own environment; this module
is written against ``opensim`` 4.6 and Gymnasium and takes only the model file from osim-rl.

Players
    One (a single-agent task, scored by return).
Actions
    ``Box(0, 1, (19,), float32)``: the excitation of each of the 19 muscles, in the model's
    order (8 on the right hip, 11 on the left leg; `MUSCLES`). Values outside [0, 1] are
    clipped; NaN is an error. Each excitation is held for one step of `STEP_SIZE` = 0.01 s of
    simulated time (``frame_skip=k`` holds it for k steps and sums their rewards).
Simulation
    ``opensim.Manager.integrate`` with integrator accuracy 5e-5 (``integrator_accuracy``); every
    reset starts from the same standing posture with muscles at equilibrium.
Observation
    ``Box(-inf, inf, (160,), float32)`` in round 1, the challenge's projected vector
    (`observation_vector`, layout in docs/prosthetics.md): pelvis height, velocities,
    accelerations and pitch (8); for head, torso, left toes, right toes, left talus, right talus
    positions relative to the pelvis, velocities, accelerations and pitch (6 x 9; the two right
    foot bodies are replaced by the prosthesis, so their 18 entries are zeros); angle, speed and
    acceleration of every coordinate of ankles, back, hips and knees (33); activation, fiber
    length and fiber velocity of each muscle in name order (57); the centre of mass relative to
    the pelvis (2), its velocity (3) and acceleration (3). Round 2 appends the target velocity
    ``(tx, ty, tz)``: 163 entries (the 2.1.5 vector leaves it out and its users read the dict).
    `ProstheticsEnv.state_desc` gives the whole observation dict (joints, bodies, muscles,
    forces, centre of mass, target) in osim-rl's layout.
Rewards
    Round 1: ``9 - (vx - 3)^2`` a step, ``vx`` the pelvis' forward velocity (3 m/s is the goal).
    Round 2: ``10 - (vx - tx)^2 - (vz - tz)^2 - 0.001 * sum(activation^2)``, the target velocity
    ``(tx, tz)`` on the ground plane and the muscles' activations (the state, not the excitations).
Termination
    Terminated when the pelvis falls below 0.6 m; truncated at the step limit (300 steps in
    round 1, 1000 in round 2). A SimTK integration failure ("Unable to advance time") truncates
    the episode with ``info["error"]`` saying so; the env is usable again after `reset`.
Settings
    ``frame_skip`` (1..`MAX_FRAME_SKIP`), ``integrator_accuracy`` (`ACCURACY_RANGE`, 1e-8..1e-1),
    ``time_limit`` and ``max_episode_steps`` (1..`MAX_TIME_LIMIT` steps): ranges checked before anything
    is built, by the registry for a replay header, ``-k`` or a config, and by the env itself.
Seeding
    The simulation is deterministic. Round 2's target schedule comes from ``reset(seed)``: the
    target starts at 1.25 m/s straight ahead and changes at up to ten Poisson(300) times, by a
    speed change uniform in [-0.5, 0.5] m/s and a heading change uniform in [-pi/8, pi/8].
Rendering
    ``render_mode="rgb_array"``: a side view of the body as a stick figure (`skeleton`),
    following the pelvis; ``"ansi"``: one line of time, pelvis position and velocity (the text
    view replays keep).
Needs
    The ``opensim`` extra (``pip install "arena[opensim]"``) and osim-rl's model files (`model_dir`).

Version history: v0 (this).
"""

from __future__ import annotations

import math
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from arena.errors import ArenaError, require, shown

MODEL_FILE = "gait14dof22musc_pros_20180507.osim"
OSIM_RL = "osim-rl==3.0.11"
STEP_SIZE = 0.01
INTEGRATOR_ACCURACY = 5e-5
#: Steps of each round before the episode is truncated.
TIME_LIMITS = {1: 300, 2: 1000}
#: The settings' ranges (`ProstheticsEnv.game_setting_ranges`), checked before anything is built: the
#: step limit at most ten times round 2's (100 s of simulated walking; the target schedule is one row a
#: step), at most 100 integrations held per action (1 s), and an integrator accuracy from 1e-8 (tighter
#: makes SimTK take ever smaller steps: 1e-300 runs for minutes a step) to 1e-1 (looser fails to advance).
MAX_TIME_LIMIT = 10_000
MAX_FRAME_SKIP = 100
ACCURACY_RANGE = (1e-8, 1e-1)
#: Pelvis height below which the body has fallen.
FALL_HEIGHT = 0.6
#: The bodies of the projected observation (osim-rl's order); the prosthetic model has no right toes or talus.
OBS_BODIES = ("pelvis", "head", "torso", "toes_l", "toes_r", "talus_l", "talus_r")
MISSING_BODIES = ("toes_r", "talus_r")
OBS_JOINTS = ("ankle_l", "ankle_r", "back", "hip_l", "hip_r", "knee_l", "knee_r")
N_MUSCLES = 19
OBS_SIZE = {1: 160, 2: 163}


class ModelFileMissing(ArenaError, FileNotFoundError):
    pass


def model_dir() -> Path:
    """The folder holding osim-rl's model files.

    In order: ``$ARENA_OSIM_MODELS``; ``<sys.prefix>/osim-rl/osim/models`` (where ``make`` puts
    osim-rl with ``pip install --no-deps --target``, so that its top-level ``envs`` and ``cmaes``
    packages stay off ``sys.path``); an installed ``osim`` package (found without importing it).
    """
    candidates = []
    if os.environ.get("ARENA_OSIM_MODELS"):
        candidates.append(Path(os.environ["ARENA_OSIM_MODELS"]))
    candidates.append(Path(sys.prefix) / "osim-rl" / "osim" / "models")
    import importlib.util

    try:
        found = importlib.util.find_spec("osim")
    except (ImportError, ValueError):
        found = None
    if found is not None and found.submodule_search_locations:
        candidates += [Path(p) / "models" for p in found.submodule_search_locations]
    for c in candidates:
        if (c / MODEL_FILE).exists():
            return c
    raise ModelFileMissing(
        f"the prosthetic model {MODEL_FILE} was not found (looked in {', '.join(str(c) for c in candidates)}). "
        f"It ships with osim-rl: pip install --no-deps --target {Path(sys.prefix) / 'osim-rl'} {OSIM_RL} "
        "(or set ARENA_OSIM_MODELS to a folder that holds it)")


# -- the challenge's definitions, as pure functions of the observation dict ------------------------
def observation_vector(d: dict, round: int = 1) -> list[float]:
    """osim-rl 2.1.5's projected observation of the prosthetic model (160 numbers; round 2: + target, 163)."""
    res: list[float] = []
    pelvis: list[float] = []
    for name in OBS_BODIES:
        if name in MISSING_BODIES:
            res += [0.0] * 9
            continue
        cur = (list(d["body_pos"][name][0:2]) + list(d["body_vel"][name][0:2]) + list(d["body_acc"][name][0:2])
               + list(d["body_pos_rot"][name][2:]) + list(d["body_vel_rot"][name][2:])
               + list(d["body_acc_rot"][name][2:]))
        if name == "pelvis":
            pelvis = cur
            res += cur[1:]  # the pelvis' x is left out: the task is the same wherever it starts
        else:
            cur[0] -= pelvis[0]
            cur[1] -= pelvis[1]
            cur[6] -= pelvis[6]  # pitch relative to the pelvis
            res += cur
    for name in OBS_JOINTS:
        res += list(d["joint_pos"][name]) + list(d["joint_vel"][name]) + list(d["joint_acc"][name])
    for name in sorted(d["muscles"]):
        m = d["muscles"][name]
        res += [m["activation"], m["fiber_length"], m["fiber_velocity"]]
    com = d["misc"]
    res += [com["mass_center_pos"][0] - pelvis[0], com["mass_center_pos"][1] - pelvis[1]]
    res += list(com["mass_center_vel"]) + list(com["mass_center_acc"])
    if round == 2:
        res += list(d["target_vel"])
    return res


def reward_round1(d: dict) -> float:
    """``9 - (vx - 3)^2``: the pelvis' forward velocity against 3 m/s."""
    return 9.0 - (d["body_vel"]["pelvis"][0] - 3.0) ** 2


def reward_round2(d: dict) -> float:
    """``10 - (vx - tx)^2 - (vz - tz)^2 - 0.001 * sum(activation^2)``."""
    vel, target = d["body_vel"]["pelvis"], d["target_vel"]
    effort = 0.001 * sum(m["activation"] ** 2 for m in d["muscles"].values())
    return 10.0 - (vel[0] - target[0]) ** 2 - (vel[2] - target[2]) ** 2 - effort


def fallen(d: dict) -> bool:
    return d["body_pos"]["pelvis"][1] < FALL_HEIGHT


def target_schedule(rng: np.random.Generator, steps: int, poisson_lambda: float = 300.0) -> np.ndarray:
    """Round 2's target velocities ``[steps + 1, 3]`` (x, y, z), one per step, from `rng`."""
    n = steps + 1
    speed = np.empty(n)
    heading = np.empty(n)
    speed[0], heading[0] = 1.25, 0.0
    changes = set(np.cumsum(rng.poisson(poisson_lambda, 10)).tolist())
    for i in range(1, n):
        speed[i], heading[i] = speed[i - 1], heading[i - 1]
        if i in changes:
            speed[i] += rng.choice([-1.0, 1.0]) * rng.uniform(-0.5, 0.5)
            heading[i] += rng.choice([-1.0, 1.0]) * rng.uniform(-math.pi / 8, math.pi / 8)
    return np.stack([speed * np.cos(heading), np.zeros(n), speed * np.sin(heading)], axis=1)


def _engine_versions() -> dict[str, str]:
    out = {}
    for dist in ("opensim", "osim-rl"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    out.setdefault("osim-rl", OSIM_RL.split("==")[1] + " (model files)")
    return out


def load_model(osim: Any, path: Path) -> tuple[Any, list]:
    """(the OpenSim model at `path` with a PrescribedController of one `opensim.Constant` per muscle,
    those constants): set a constant's value to excite its muscle."""
    # Errors only: else every load writes opensim.log into the working folder and warns that the
    # model's two joints named "back" were renamed.
    osim.Logger.setLevelString("Error")
    if not Path(path).exists():
        raise ModelFileMissing(f"no OpenSim model at {path}")
    model = osim.Model(str(path))
    model.initSystem()
    brain = osim.PrescribedController()
    muscles = model.getMuscles()
    for j in range(muscles.getSize()):
        brain.addActuator(muscles.get(j))
        brain.prescribeControlForActuator(muscles.get(j).getName(), osim.Constant(0.0))
    model.addController(brain)
    model.initSystem()
    functions = osim.PrescribedController.safeDownCast(model.getControllerSet().get(0)).get_ControlFunctions()
    return model, [osim.Constant.safeDownCast(functions.get(j)) for j in range(functions.getSize())]


def _whole(v: Any, lo: int, hi: int) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and lo <= v <= hi


def _number(v: Any, lo: float, hi: float) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v) \
        and lo <= v <= hi


def check_prosthetics_settings(**settings: Any) -> None:
    """A one-line `ValueError` naming the first setting outside its range (`ProstheticsEnv.game_setting_ranges`),
    its value (shown bounded) and the range; nothing is built before it."""
    for name, value in settings.items():
        what, ok = ProstheticsEnv.game_setting_ranges[name]
        if not ok(value):
            raise ValueError(f"{name} must be {what}, got {shown(value, 60)}")


class IntegrationFailed(RuntimeError):
    pass


class ProstheticsEnv(gymnasium.Env):
    """The AI for Prosthetics task (round 1 or 2); see the module docstring for its definition."""

    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 100}
    #: What a user, a config or a replay may set (`arena.envs.registry.game_settings`): the round is the
    #: id's (``arena/ProstheticsRound2-v0``) and the model file a local path, so neither is a setting.
    game_settings = ("frame_skip", "integrator_accuracy", "time_limit", "max_episode_steps")
    #: Their ranges (`arena.envs.registry.setting_rules`): checked by the registry before the env is made,
    #: and again here (`check_prosthetics_settings`) for an env made directly.
    game_setting_ranges = {
        "frame_skip": (f"a whole number in [1, {MAX_FRAME_SKIP}]", lambda v: _whole(v, 1, MAX_FRAME_SKIP)),
        "time_limit": (f"a whole number in [1, {MAX_TIME_LIMIT:,}] or null (the round's: 300 or 1,000)",
                       lambda v: v is None or _whole(v, 1, MAX_TIME_LIMIT)),
        "max_episode_steps": (f"a whole number in [1, {MAX_TIME_LIMIT:,}] or null",
                              lambda v: v is None or _whole(v, 1, MAX_TIME_LIMIT)),
        "integrator_accuracy": (f"a number in [{ACCURACY_RANGE[0]:g}, {ACCURACY_RANGE[1]:g}] (default "
                                f"{INTEGRATOR_ACCURACY:g})", lambda v: _number(v, *ACCURACY_RANGE)),
    }

    def __init__(self, round: int = 1, render_mode: str | None = None, frame_skip: int = 1,
                 integrator_accuracy: float = INTEGRATOR_ACCURACY, time_limit: int | None = None,
                 model_file: str | None = None):
        if round not in TIME_LIMITS:
            raise ValueError(f"round must be 1 or 2, got {shown(round, 40)}")
        check_prosthetics_settings(frame_skip=frame_skip, integrator_accuracy=integrator_accuracy,
                                   time_limit=time_limit)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.opensim = require("opensim", "the OpenSim prosthetics task", "opensim")
        self.round, self.render_mode, self.frame_skip = int(round), render_mode, int(frame_skip)
        self.integrator_accuracy = float(integrator_accuracy)
        self.time_limit = int(time_limit or TIME_LIMITS[self.round])
        self.engine = _engine_versions()
        path = Path(model_file) if model_file else model_dir() / MODEL_FILE
        self._load(path)
        n = OBS_SIZE[self.round]
        self.observation_space = spaces.Box(-np.inf, np.inf, (n,), np.float32)
        self.action_space = spaces.Box(0.0, 1.0, (self.n_muscles,), np.float32)
        self.istep = 0
        self.targets = np.tile([1.25, 0.0, 0.0], (self.time_limit + 1, 1))
        self.state = None
        self._desc: dict | None = None  # this step's lean dict (`_lean_desc`)
        self._full: dict | None = None  # this step's whole dict (`state_desc`)
        self._last_action = np.zeros(self.n_muscles)

    # -- the model ---------------------------------------------------------------------------
    def _load(self, path: Path) -> None:
        model, self._controls = load_model(self.opensim, path)
        self.model = model
        muscles = model.getMuscles()
        self.muscles = [muscles.get(j) for j in range(muscles.getSize())]
        self.muscle_names = [m.getName() for m in self.muscles]
        self.n_muscles = len(self.muscles)
        if self.n_muscles != N_MUSCLES:
            raise ValueError(f"{path.name} has {self.n_muscles} muscles; the prosthetics task has {N_MUSCLES}")
        bodies, joints = model.getBodySet(), model.getJointSet()
        self.bodies = {bodies.get(i).getName(): bodies.get(i) for i in range(bodies.getSize())}
        self.joints = {joints.get(i).getName(): joints.get(i) for i in range(joints.getSize())}
        self._coords = {n: [j.get_coordinates(i) for i in range(j.numCoordinates())] for n, j in self.joints.items()}
        self._vector_bodies = {n: self.bodies[n] for n in OBS_BODIES if n in self.bodies}
        self._vector_coords = {n: self._coords[n] for n in OBS_JOINTS}
        forces = model.getForceSet()
        self._forces = [forces.get(i) for i in range(forces.getSize())]
        self._joint_frames = [(n, j.getParentFrame().findBaseFrame().getName(), j.getChildFrame().findBaseFrame().getName(),
                               j.getChildFrame()) for n, j in self.joints.items()]

    def _new_manager(self) -> None:
        self.manager = self.opensim.Manager(self.model)
        self.manager.setIntegratorAccuracy(self.integrator_accuracy)
        self.manager.initialize(self.state)

    def set_excitations(self, excitations) -> None:
        """Set the muscles' excitations for the next steps (clipped to [0, 1]; NaN is an error)."""
        a = np.asarray(excitations, dtype=np.float64).ravel()
        if a.shape != (self.n_muscles,):
            raise ValueError(f"expected {self.n_muscles} muscle excitations, got shape {a.shape}")
        if np.isnan(a).any():
            raise ValueError("NaN in the muscle excitations; values in [0, 1] are required")
        a = np.clip(a, 0.0, 1.0)
        for c, v in zip(self._controls, a.tolist()):
            c.setValue(v)
        self._last_action = a

    def _integrate(self) -> None:
        self.istep += 1
        try:
            self.state = self.manager.integrate(STEP_SIZE * self.istep)
        except RuntimeError as e:
            raise IntegrationFailed(_simtk_reason(str(e))) from None
        self._desc = self._full = None

    # -- Gymnasium ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.targets = target_schedule(self.np_random, self.time_limit) if self.round == 2 else \
            np.tile([3.0, 0.0, 0.0], (self.time_limit + 1, 1))
        # Zero excitations before the muscles are equilibrated: the equilibrium depends on them, and
        # the last episode's would otherwise leak into this one's first state.
        self.set_excitations(np.zeros(self.n_muscles))
        self.state = self.model.initializeState()
        self.model.equilibrateMuscles(self.state)
        self.state.setTime(0)
        self.istep = 0
        self._desc = self._full = None
        self._new_manager()
        return self._obs(), {"target_vel": self.targets[0].tolist()}

    def step(self, action):
        self.set_excitations(action)
        reward, terminated, truncated, info = 0.0, False, False, {}
        for _ in range(self.frame_skip):
            try:
                self._integrate()
            except IntegrationFailed as e:
                # The simulator gave up; the episode ends here, the env lives on (reset starts afresh).
                info["error"] = str(e)
                truncated = True
                break
            d = self._lean_desc()
            reward += reward_round1(d) if self.round == 1 else reward_round2(d)
            if fallen(d):
                terminated = True
                break
            if self.istep >= self.time_limit:
                truncated = True
                break
        info["target_vel"] = self.targets[min(self.istep, self.time_limit)].tolist()
        return self._obs(), float(reward), terminated, truncated, info

    def _obs(self) -> np.ndarray:
        return np.asarray(observation_vector(self._lean_desc(), self.round), dtype=np.float32)

    # -- the observation dict -------------------------------------------------------------------
    def state_desc(self, forces: bool = False) -> dict:
        """The observation dict of osim-rl (``joint_pos``, ``body_vel``, ``muscles``, ``misc``, ...) now:
        every joint, body and muscle; ``forces=True`` adds every force's record values."""
        if self._full is None or (forces and "forces" not in self._full):
            self._full = self._compute_desc(self.bodies, self._coords, full=True, forces=forces)
        return self._full

    def _lean_desc(self) -> dict:
        """The part of the dict the vector, the rewards and the fall read (what a step computes: about
        half of the whole dict's simulator calls); the whole dict where it is computed already."""
        if self._full is not None:
            return self._full
        if self._desc is None:
            self._desc = self._compute_desc(self._vector_bodies, self._vector_coords, full=False, forces=False)
        return self._desc

    def _compute_desc(self, bodies: dict, coords: dict, full: bool, forces: bool) -> dict:
        s, m = self.state, self.model
        m.realizeAcceleration(s)
        d: dict[str, Any] = {k: {} for k in ("joint_pos", "joint_vel", "joint_acc", "body_pos", "body_vel",
                                              "body_acc", "body_pos_rot", "body_vel_rot", "body_acc_rot", "muscles")}
        for name, cs in coords.items():
            d["joint_pos"][name] = [c.getValue(s) for c in cs]
            d["joint_vel"][name] = [c.getSpeedValue(s) for c in cs]
            d["joint_acc"][name] = [c.getAccelerationValue(s) for c in cs]
        for name, body in bodies.items():
            tr = body.getTransformInGround(s)
            vel, acc = body.getVelocityInGround(s), body.getAccelerationInGround(s)
            p, rot = tr.p(), tr.R().convertRotationToBodyFixedXYZ()
            lin_v, ang_v, lin_a, ang_a = vel.get(1), vel.get(0), acc.get(1), acc.get(0)
            d["body_pos"][name] = [p[0], p[1], p[2]]
            d["body_vel"][name] = [lin_v.get(0), lin_v.get(1), lin_v.get(2)]
            d["body_acc"][name] = [lin_a.get(0), lin_a.get(1), lin_a.get(2)]
            d["body_pos_rot"][name] = [rot.get(0), rot.get(1), rot.get(2)]
            d["body_vel_rot"][name] = [ang_v.get(0), ang_v.get(1), ang_v.get(2)]
            d["body_acc_rot"][name] = [ang_a.get(0), ang_a.get(1), ang_a.get(2)]
        for name, mus in zip(self.muscle_names, self.muscles):
            entry = {"activation": mus.getActivation(s), "fiber_length": mus.getFiberLength(s),
                     "fiber_velocity": mus.getFiberVelocity(s)}
            if full:
                entry["fiber_force"] = mus.getFiberForce(s)
            d["muscles"][name] = entry
        cp, cv, ca = m.calcMassCenterPosition(s), m.calcMassCenterVelocity(s), m.calcMassCenterAcceleration(s)
        d["misc"] = {"mass_center_pos": [cp[0], cp[1], cp[2]], "mass_center_vel": [cv[0], cv[1], cv[2]],
                     "mass_center_acc": [ca[0], ca[1], ca[2]]}
        if forces:
            d["forces"] = {}
            for f in self._forces:
                values = f.getRecordValues(s)
                d["forces"][f.getName()] = [values.get(i) for i in range(values.size())]
        d["target_vel"] = self.targets[min(self.istep, self.time_limit)].tolist()
        return d

    def activations(self) -> list[float]:
        return [m.getActivation(self.state) for m in self.muscles]

    # -- drawing -------------------------------------------------------------------------------
    def skeleton(self) -> dict:
        """The body now, for drawing: ``joints`` {name: (x, y, z)} (each joint's centre in ground),
        ``segments`` [(from, to)] of joint names and body ends, ``ends`` {body: (x, y, z)} (the mass
        centre of bodies with no child joint: head, toes, the prosthetic foot), ``time`` in seconds."""
        s = self.state
        self.model.realizePosition(s)
        joints, child_of, parent_of = {}, {}, {}
        for name, parent, child, frame in self._joint_frames:
            p = frame.getPositionInGround(s)
            joints[name] = (p[0], p[1], p[2])
            child_of[name], parent_of[name] = child, parent
        segments, ends = [], {}
        for name in joints:
            body = child_of[name]
            below = [k for k in joints if parent_of[k] == body]
            if name == "ground_pelvis":
                continue  # the pelvis is drawn between its hips and its back
            for k in below:
                segments.append((name, k))
            if not below:
                g = self.bodies[body].findStationLocationInGround(s, self.bodies[body].getMassCenter())
                ends[body] = (g[0], g[1], g[2])
                segments.append((name, body))
        pelvis_joints = [k for k in joints if parent_of[k] == "pelvis"]
        for a in pelvis_joints:
            for b in pelvis_joints:
                if a < b:
                    segments.append((a, b))
        d = self._lean_desc()
        return {"joints": joints, "ends": ends, "segments": segments, "time": self.istep * STEP_SIZE,
                "pelvis": d["body_pos"]["pelvis"], "pelvis_vel": d["body_vel"]["pelvis"],
                "target_vel": d["target_vel"]}

    def render(self):
        if self.render_mode == "ansi":
            d = self._lean_desc()
            p, v = d["body_pos"]["pelvis"], d["body_vel"]["pelvis"]
            line = (f"t={self.istep * STEP_SIZE:.2f}s pelvis x={p[0]:.3f} y={p[1]:.3f} z={p[2]:.3f} "
                    f"vx={v[0]:.3f} vz={v[2]:.3f}")
            if self.round == 2:
                t = d["target_vel"]
                line += f" target vx={t[0]:.3f} vz={t[2]:.3f}"
            return line
        if self.render_mode == "rgb_array":
            from arena.envs.stickfigure import draw_frame

            return draw_frame(self.skeleton())
        return None

    def close(self) -> None:
        self.manager = None
        self.model = None


def _simtk_reason(message: str) -> str:
    """The useful sentence of a SimTK exception ("Unable to advance time past 0.12")."""
    import re

    msg = " ".join(message.split())
    m = re.search(r"Unable to advance time past [0-9.eE+-]*[0-9]", msg)
    return "SimTK integration failed: " + (m.group(0) if m else msg[-300:])
