"""Benchmark: the OpenSim prosthetics task through the arena against raw OpenSim, 2 simulator processes
against 1, and the arena's PPO against RLlib PPO on the same env.

Why: on ``arena/Prosthetics-v0`` the simulator is the cost (about 17 ms a step of C++ on 2 cores), so
the arena's layers (the Gymnasium env's observation dict and vector, the core, the match loop, the
replay) must cost next to nothing beside it, a second simulator process must nearly double the
steps, and the arena's PPO must sample at least as fast as the reference library on the same env.

Method, three parts in one process run (``--only`` runs some of them):

1. **env**: the arena's full path, ``play_match(core, ["random"], seed=s)`` (the Gymnasium env, its
   core, the match loop, the replay recorded in memory with its text view; the core is made
   right before, which is what ``play_match("arena/Prosthetics-v0", ...)`` does inside, timed
   apart), against a bare OpenSim loop written here: the same model file with the same
   PrescribedController of one ``opensim.Constant`` per muscle, ``initializeState``,
   ``equilibrateMuscles``, a ``Manager`` with the same accuracy, then per step the 19 constants set
   and ``integrate``, nothing else. The raw loop plays the very actions of the arena's episode
   (read from its replay), so both integrate the same trajectory: the same number of steps, and
   the script checks that the final states agree (generalised coordinates and speeds) and that a
   separate, untimed raw pass with a fall check of its own falls at the arena's step. Episodes
   alternate arena, raw, arena, raw over ``--episodes`` seeds. Timed: reset and steps (model
   loading reported apart, and a second ratio with it). Then one instrumented arena episode says
   where the arena's extra time goes (exclusive times per step). Goal: arena / raw >= 0.95x.
2. **procs**: PPO's env slots on the match pool (`arena.trainers.policy.segments.Rollouts`), 1 slot
   in 1 worker process against 2 slots in 2, each playing ``--steps`` moves of the PPO config's
   untrained policy (sampled; its forward pass runs in the worker; an episode that ends is
   reset), total env steps/s over ``--rounds`` alternating rounds; the slot in the caller's process
   as a reference for the pool's cost; start-up timed apart. Goal: 2 / 1 >= 1.8x on 2 cores.
3. **ppo**: `PPOTrainer` with ``configs/train/prosthetics_ppo.yaml`` (2 env processes, 1024 samples
   an iteration, 10 epochs of minibatches of 64) for ``--seconds`` of training (the sum of its
   iterations' times, evaluations and checkpoints included; stopped before the iteration that
   would cross the budget, one at least): samples/s (env steps over rollout + learn time, the
   trainer's ``train/samples_per_s``), iterations, the last iteration's mean training-episode
   return and the last evaluation's return. Then RLlib PPO (new API stack) on the same env
   (`ProstheticsEnv(round=1)` registered with ``ray.tune.registry.register_env``), 2 env runners of
   one env each, the arena config's train batch (1024), minibatch (64), epochs (10), lr (5e-4), gamma
   (0.99), lambda (0.95) and clip (0.2),
   RLlib's default MLP (256, 256, tanh, as the arena's) with its ``MeanStdFilter`` (the arena's
   policy normalises observations too), for the same budget inside ``algo.train()``: env steps/s
   (``env_runners/num_env_steps_sampled_lifetime`` over the train time) and
   ``env_runners/episode_return_mean``. Ray's start and the algorithm's build are timed apart; Ray's
   temp folder is inside a temporary folder removed afterwards. Reported: arena / RLlib samples/s.

Usage:
    .venv/bin/python benchmarks/bench_prosthetics.py [--seconds 180] [--episodes 6] [--steps 400]
        [--only env|procs|ppo ...] [--skip-rllib] [--json out.json]

Prints a markdown table per part and, last, one JSON line of every figure. Without the opensim extra
it says so in one line and exits with code 2.
"""

from __future__ import annotations

import os as _os
import sys as _sys

# Before torch loads: no spinning OpenMP threads (the learner and the simulators share 2 cores).
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions as _versions  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

GAME = "arena/Prosthetics-v0"
CONFIG = Path(__file__).resolve().parents[1] / "configs" / "train" / "prosthetics_ppo.yaml"
PARTS = ("env", "procs", "ppo")
_perf = time.perf_counter


# -- 1. the arena against raw OpenSim ------------------------------------------------------------
class RawSim:
    """The bare OpenSim loop: the env's model and controller, nothing of the arena."""

    def __init__(self, path: Path):
        import opensim as osim

        from arena.envs.prosthetics import INTEGRATOR_ACCURACY, load_model

        self.osim, self.accuracy = osim, INTEGRATOR_ACCURACY
        # the env's own loader: the same model and controller (set-up, not timed per step)
        model, self.controls = load_model(osim, path)
        self.model = model
        self.pelvis = model.getBodySet().get("pelvis")
        self.manager = None
        self.failed = False

    def _start(self):
        # Zero excitations before the equilibrium, as the env's reset does: it depends on them.
        for c in self.controls:
            c.setValue(0.0)
        state = self.model.initializeState()
        self.model.equilibrateMuscles(state)
        state.setTime(0)
        self.manager = self.osim.Manager(self.model)
        self.manager.setIntegratorAccuracy(self.accuracy)
        self.manager.initialize(state)
        return state

    def episode(self, actions: list[list[float]]):
        """Reset, then per step set the 19 constants and integrate: the timed loop. The final state."""
        from arena.envs.prosthetics import STEP_SIZE

        state = self._start()
        controls, integrate = self.controls, self.manager.integrate
        self.failed = False
        try:  # around the loop, not in it: a SimTK failure ends the episode, as it truncates the env's
            for i, a in enumerate(actions, 1):
                for c, v in zip(controls, a):
                    c.setValue(v)
                state = integrate(STEP_SIZE * i)
        except RuntimeError:
            self.failed = True
        return state

    def fall_step(self, actions: list[list[float]]) -> int | None:
        """Untimed check: the same episode with a fall check after each step; the step it falls at."""
        from arena.envs.prosthetics import FALL_HEIGHT, STEP_SIZE

        self._start()
        for i, a in enumerate(actions, 1):
            for c, v in zip(self.controls, a):
                c.setValue(v)
            try:
                state = self.manager.integrate(STEP_SIZE * i)
            except RuntimeError:
                return None
            self.model.realizePosition(state)
            if self.pelvis.getTransformInGround(state).p()[1] < FALL_HEIGHT:
                return i
        return None


def _vec(v) -> list[float]:
    return [v.get(i) for i in range(v.size())]


def _max_diff(a: list[float], b: list[float]) -> float:
    if len(a) != len(b):
        return float("inf")
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0)


def _env_actions(replay) -> list[list[float]]:
    """The excitations the env applied, from the replay: the core's clip to the float32 box, then the
    env's float64 clip to [0, 1] (done here, outside the raw loop's timing)."""
    import numpy as np

    out = []
    for st in replay.steps:
        if st["event"] != "ok":
            raise RuntimeError(f"step {st['t']}: the random agent's move was {st['event']} ({st.get('reason')})")
        a = np.clip(np.asarray(st["action"], dtype=np.float32), 0.0, 1.0)
        out.append(np.clip(a.astype(np.float64), 0.0, 1.0).tolist())
    return out


class _Timers:
    """Exclusive wall time per wrapped call (a nested wrapped call's time is its own, not its caller's)."""

    def __init__(self):
        self.t: dict[str, float] = defaultdict(float)
        self._stack: list[float] = []

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            t0 = _perf()
            self._stack.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                dt = _perf() - t0
                inner = self._stack.pop()
                self.t[name] += dt - inner
                if self._stack:
                    self._stack[-1] += dt
        return timed


def _breakdown(seed: int) -> dict:
    """One arena episode with the env's parts timed: microseconds a step of each, and the rest."""
    from arena.envs import prosthetics as P
    from arena.envs.registry import make_core
    from arena.match.loop import play_match

    core = make_core(GAME)
    env = core.env.unwrapped
    tm = _Timers()
    names = {"integrate": "_integrate", "state_desc": "state_desc", "set_excitations": "set_excitations",
             "text view (render ansi)": "render", "reset": "reset", "env.step (reward, fall, info, _obs)": "step"}
    for label, attr in names.items():
        setattr(env, attr, tm.wrap(label, getattr(env, attr)))
    core.env.step = tm.wrap("gymnasium wrappers", core.env.step)
    core.validate = tm.wrap("core.validate (box check)", core.validate)
    vector = P.observation_vector
    P.observation_vector = tm.wrap("observation_vector", vector)
    try:
        t0 = _perf()
        res = play_match(core, ["random"], seed=seed)
        total = _perf() - t0
    finally:
        P.observation_vector = vector
        core.close()
    steps = max(1, res.moves)
    parts = {k: v / steps * 1e6 for k, v in tm.t.items()}
    parts["agent (random sample)"] = res.move_time_total[0] / steps * 1e6
    parts["match loop, replay, rest"] = total / steps * 1e6 - sum(parts.values())
    return {"steps": res.moves, "us_per_step": total / steps * 1e6, "parts_us": parts}


def bench_env(episodes: int, seed: int) -> dict:
    from arena.envs import prosthetics as P
    from arena.envs.registry import make_core
    from arena.match.loop import play_match

    path = P.model_dir() / P.MODEL_FILE
    # Warm both sides (imports, the first model load of the process).
    core = make_core(GAME)
    play_match(core, ["random"], seed=10**6, max_moves=3)
    core.close()
    RawSim(path).episode([[0.0] * P.N_MUSCLES] * 3)

    eps = []
    for k in range(episodes):
        s = seed + k
        t0 = _perf()
        core = make_core(GAME)
        t_make = _perf() - t0
        t0 = _perf()
        res = play_match(core, ["random"], seed=s)
        t_arena = _perf() - t0
        env = core.env.unwrapped
        q_a, u_a = _vec(env.state.getQ()), _vec(env.state.getU())
        fall_a = res.moves if P.fallen(env.state_desc()) else None
        core.close()
        actions = _env_actions(res.replay)

        t0 = _perf()
        sim = RawSim(path)
        t_load = _perf() - t0
        t0 = _perf()
        state = sim.episode(actions)
        t_raw = _perf() - t0
        q_r, u_r = _vec(state.getQ()), _vec(state.getU())
        raw_failed = sim.failed
        fall_r = sim.fall_step(actions)  # untimed, after the timed pass
        del sim
        eps.append({"seed": s, "steps": res.moves, "arena_s": t_arena, "raw_s": t_raw, "make_s": t_make,
                    "load_s": t_load, "fall_arena": fall_a, "fall_raw": fall_r, "raw_sim_failed": raw_failed,
                    "max_dq": _max_diff(q_a, q_r), "max_du": _max_diff(u_a, u_r), "ratio": t_raw / t_arena})
    steps = sum(e["steps"] for e in eps)
    arena_s, raw_s = sum(e["arena_s"] for e in eps), sum(e["raw_s"] for e in eps)
    make_s, load_s = sum(e["make_s"] for e in eps), sum(e["load_s"] for e in eps)
    out = {
        "episodes": episodes, "steps": steps,
        "arena_steps_per_s": steps / arena_s, "raw_steps_per_s": steps / raw_s, "ratio": raw_s / arena_s,
        "ratio_min": min(e["ratio"] for e in eps), "ratio_max": max(e["ratio"] for e in eps),
        "arena_with_make_steps_per_s": steps / (arena_s + make_s),
        "raw_with_load_steps_per_s": steps / (raw_s + load_s),
        "ratio_with_construction": (raw_s + load_s) / (arena_s + make_s),
        "make_core_s": make_s / episodes, "raw_load_s": load_s / episodes,
        "same_fall_step": sum(e["fall_arena"] == e["fall_raw"] for e in eps),
        "max_dq": max(e["max_dq"] for e in eps), "max_du": max(e["max_du"] for e in eps),
        "per_episode": eps,
    }
    out["breakdown"] = _breakdown(seed)
    out["raw_us_per_step"] = raw_s / steps * 1e6
    return out


def print_env(r: dict) -> None:
    rows = [["env steps/s, reset + steps (arena: play_match with a replay; raw: set 19 constants, integrate)",
             f"{r['arena_steps_per_s']:,.1f}", f"{r['raw_steps_per_s']:,.1f}", f"{r['ratio']:.3f}x", ">= 0.95x"],
            [f"   per episode (min - max over {r['episodes']})", "", "", f"{r['ratio_min']:.3f}-{r['ratio_max']:.3f}x",
             "-"],
            ["   with the model's construction (make_core / raw load, each episode)",
             f"{r['arena_with_make_steps_per_s']:,.1f}", f"{r['raw_with_load_steps_per_s']:,.1f}",
             f"{r['ratio_with_construction']:.3f}x", "-"],
            ["   construction, seconds an episode (make_core / raw load)", f"{r['make_core_s']:.3f}",
             f"{r['raw_load_s']:.3f}", "-", "-"]]
    print(markdown_table(["comparison", "arena", "raw opensim", "ratio", "goal"], rows, {1, 2, 3}))
    falls = [(e["fall_arena"], e["fall_raw"]) for e in r["per_episode"]]
    print(f"\n- {r['episodes']} episodes, {r['steps']} steps, arena/raw alternating; the raw loop played each "
          f"episode's actions from its replay. Same fall step in {r['same_fall_step']}/{r['episodes']} "
          f"(arena, raw: {', '.join(f'{a}/{b}' for a, b in falls)}); final states: max |dq| {r['max_dq']:.3g}, "
          f"max |du| {r['max_du']:.3g}")
    b = r["breakdown"]
    print(f"\nWhere an arena step goes (one instrumented episode, {b['steps']} steps; raw loop: "
          f"{r['raw_us_per_step']:,.0f} us a step):\n")
    rows = [[k, f"{v:,.1f}", f"{100 * v / b['us_per_step']:.1f}%"]
            for k, v in sorted(b["parts_us"].items(), key=lambda kv: -kv[1])]
    rows.append(["total", f"{b['us_per_step']:,.1f}", "100%"])
    print(markdown_table(["arena part", "us/step", "share"], rows, {1, 2}))


# -- 2. two simulator processes against one ------------------------------------------------------
def bench_procs(steps: int, rounds: int, seed: int) -> dict:
    import torch

    from arena.envs.registry import make_core
    from arena.inference.policy_nets import build_policy, spec_from_core
    from arena.trainers.policy.segments import Rollouts

    torch.manual_seed(seed)
    core = make_core(GAME)
    net = build_policy(spec_from_core(core), "auto", hidden=[256, 256], obs_norm=True)
    core.close()
    # slots, worker processes (0: the learner's process)
    variants = {"n1": (1, 1), "n2": (2, 2), "inproc": (1, 0)}
    pools, startup = {}, {}
    try:
        for key, (slots, procs) in variants.items():
            pools[key] = Rollouts(GAME, {}, slots, procs)
            t0 = _perf()
            pools[key].segments(net, seed=seed, iteration=0, steps=1)  # workers started, model loaded
            startup[key] = _perf() - t0
        times = {k: [] for k in variants}
        episodes = {k: 0 for k in variants}
        for r in range(rounds):
            for key in variants:
                t0 = _perf()
                segs = pools[key].segments(net, seed=seed, iteration=1 + r, steps=steps)
                times[key].append(_perf() - t0)
                episodes[key] += sum(len(s.episodes) for s in segs)
    finally:
        for p in pools.values():
            p.close()
    rate = {k: variants[k][0] * steps * rounds / sum(v) for k, v in times.items()}
    per_round = [(2 * steps / a) / (steps / b) for a, b in zip(times["n2"], times["n1"])]
    return {"steps_per_env": steps, "rounds": rounds, "steps_per_s": rate, "startup_s": startup,
            "episodes_ended": episodes, "ratio": rate["n2"] / rate["n1"], "ratio_min": min(per_round),
            "ratio_max": max(per_round), "pool_ratio": rate["n1"] / rate["inproc"]}


def print_procs(r: dict) -> None:
    s = r["steps_per_s"]
    rows = [["PPO's env slots on the match pool: 2 workers / 1 worker (env steps/s, all slots)",
             f"{s['n2']:,.1f}", f"{s['n1']:,.1f}", f"{r['ratio']:.2f}x", ">= 1.8x"],
            [f"   per round (min - max over {r['rounds']})", "", "", f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}x",
             "-"],
            ["   1 worker / the slot in this process (the pool's cost)", f"{s['n1']:,.1f}", f"{s['inproc']:,.1f}",
             f"{r['pool_ratio']:.3f}x", "-"]]
    print(markdown_table(["comparison", "arena", "other", "ratio", "goal"], rows, {1, 2, 3}))
    st = r["startup_s"]
    print(f"\n- {r['steps_per_env']} moves per slot a round, the PPO config's untrained policy sampling (its "
          f"forward pass in the worker), ended episodes reset; start-up (worker start, imports, model load, one "
          f"move) timed apart: 1 worker {st['n1']:.2f} s, 2 workers {st['n2']:.2f} s, in this process "
          f"{st['inproc']:.2f} s")


# -- 3. the arena's PPO against RLlib PPO ---------------------------------------------------------
def arena_ppo_run(seconds: float, root: Path) -> dict:
    from arena.trainers.common.metrics import read_metrics
    from arena.trainers.policy.ppo import PPOTrainer
    from arena.trainers.registry import read_train_config

    _, cfg = read_train_config(CONFIG, iterations=10**6)
    t0 = _perf()
    trainer = PPOTrainer(cfg, root / "arena-ppo")
    setup_s = _perf() - t0
    spent = {"train_s": 0.0, "last_s": 0.0, "roll_learn_s": 0.0, "steps": 0, "iterations": 0}
    last_eval: dict = {}

    def budget(it: int, total: int, m: dict) -> None:
        spent["train_s"] += m["time/iteration_s"]
        spent["last_s"] = m["time/iteration_s"]
        roll_learn = m["time/rollout_s"] + m["time/learn_s"]
        spent["roll_learn_s"] += roll_learn
        spent["learn_s"] = spent.get("learn_s", 0.0) + m["time/learn_s"]
        # This iteration's samples (the trainer's env_steps also counts what ran before the loop).
        spent["steps"] += round(m["train/samples_per_s"] * roll_learn)
        spent["iterations"] += 1
        if "eval/return" in m:
            last_eval.update(iteration=it, value=m["eval/return"])
        if spent["train_s"] + spent["last_s"] > seconds:
            trainer.stop_requested = True

    t0 = _perf()
    try:
        line = trainer.run(progress=budget)
        run_s = _perf() - t0
        steps_total = trainer.env_steps
    finally:
        trainer.close()
    if not last_eval:  # only the untrained policy's evaluation (iteration 0) ran
        first = next((m for m in read_metrics(root / "arena-ppo" / "metrics.jsonl") if "eval/return" in m), {})
        last_eval.update(iteration=0, value=first.get("eval/return", float("nan")))
    steps = spent["steps"]
    return {"iterations": spent["iterations"], "env_steps": steps, "env_steps_total": steps_total,
            "train_s": spent["train_s"], "rollout_learn_s": spent["roll_learn_s"], "learn_s": spent.get("learn_s", 0.0),
            "samples_per_s": steps / max(spent["roll_learn_s"], 1e-9),
            "env_steps_per_s_loop": steps / max(spent["train_s"], 1e-9), "train_return": line.get("train/return"),
            "eval_return": last_eval["value"], "eval_iteration": last_eval["iteration"], "setup_s": setup_s,
            "outside_budget_s": run_s - spent["train_s"], "threads": cfg.threads,
            "batch": cfg.envs * cfg.steps_per_env, "envs": cfg.envs, "eval_seeds": len(cfg.eval.seeds),
            "eval_greedy": cfg.eval.greedy}


def rllib_ppo_run(seconds: float, root: Path, num_cpus: int, threads: int, seed: int) -> dict:
    import warnings

    from arena.trainers.registry import read_train_config

    cfg = read_train_config(CONFIG)[1]

    import torch
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.connectors.env_to_module.mean_std_filter import MeanStdFilter
    from ray.tune.registry import register_env

    from arena.trainers.rllib.ppo import RunFolderPPO, _quiet_rllib, start_ray, stop_ray

    torch.set_num_threads(threads)
    _quiet_rllib()
    folder = root / "rllib"
    folder.mkdir(parents=True, exist_ok=True)
    t0 = _perf()
    ray_state = start_ray(folder, num_cpus=num_cpus)
    ray_s = _perf() - t0
    algo = None
    try:
        register_env("arena_prosthetics", _make_prosthetics)
        config = (
            PPOConfig(algo_class=RunFolderPPO)
            .environment("arena_prosthetics", env_config={"run_folder": str(folder.resolve())})
            .framework("torch")
            .env_runners(num_env_runners=2, num_envs_per_env_runner=1, num_cpus_per_env_runner=1,
                         env_to_module_connector=lambda env, spaces=None, device=None: MeanStdFilter())
            .learners(num_learners=0)
            # the arena config's batch, minibatch, epochs, lr, gamma, lambda and clip: the same PPO
            .training(train_batch_size_per_learner=cfg.envs * cfg.steps_per_env, minibatch_size=cfg.learner.minibatch,
                      num_epochs=cfg.learner.epochs, lr=cfg.lr, gamma=cfg.learner.gamma, lambda_=cfg.learner.lam,
                      clip_param=cfg.learner.clip)
            .debugging(seed=seed, log_level="ERROR")
        )
        t0 = _perf()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Overriding environment")
            algo = config.build_algo()
        build_s = _perf() - t0
        train_s, last_s, it, r = 0.0, 0.0, 0, {}
        while it == 0 or train_s + last_s <= seconds:
            t0 = _perf()
            r = algo.train()
            last_s = _perf() - t0
            train_s += last_s
            it += 1
        er = r.get("env_runners", {})
        steps = int(er.get("num_env_steps_sampled_lifetime", 0))
        ret = er.get("episode_return_mean", float("nan"))
        timers = r.get("timers", {})
        return {"iterations": it, "env_steps": steps, "train_s": train_s, "env_steps_per_s": steps / max(train_s, 1e-9),
                "episode_return_mean": float(ret) if ret is not None else float("nan"),
                "episodes": int(er.get("num_episodes_lifetime", 0) or 0), "ray_init_s": ray_s, "build_s": build_s,
                "num_cpus": num_cpus, "threads": threads,
                "sample_s_iter": float(timers.get("env_runner_sampling_timer", float("nan"))),
                "learn_s_iter": float(timers.get("learner_update_timer", float("nan")))}
    finally:
        if algo is not None:
            algo.stop()
        stop_ray(*ray_state)


def _make_prosthetics(env_config: dict):
    from arena.envs.prosthetics import ProstheticsEnv

    return ProstheticsEnv(round=1)


def bench_ppo(seconds: float, skip_rllib: bool, num_cpus: int, seed: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="bench-pros-"))
    try:
        out = {"budget_s": seconds, "arena": arena_ppo_run(seconds, root)}
        if skip_rllib:
            return out
        try:
            import ray  # noqa: F401
        except ImportError:
            out["rllib_skipped"] = 'ray is not installed: pip install "arena[ray]"'
            return out
        out["rllib"] = rllib_ppo_run(seconds, root, num_cpus, out["arena"]["threads"], seed)
        out["ratio"] = out["arena"]["samples_per_s"] / out["rllib"]["env_steps_per_s"]
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def print_ppo(r: dict) -> None:
    a, b = r["arena"], r.get("rllib")
    ret = a["train_return"]
    rows = [[f"PPO, {r['budget_s']:.0f} s of training: samples/s (arena: rollout + learn; RLlib: inside train())",
             f"{a['samples_per_s']:,.1f}", f"{b['env_steps_per_s']:,.1f}" if b else "-",
             f"{r['ratio']:.2f}x" if b else "-", "reported"],
            ["   arena: env steps/s over its whole loop (evaluations and checkpoints included)",
             f"{a['env_steps_per_s_loop']:,.1f}", f"{b['env_steps_per_s']:,.1f}" if b else "-",
             f"{a['env_steps_per_s_loop'] / b['env_steps_per_s']:.2f}x" if b else "-", "-"],
            ["iterations / env steps in the budget", f"{a['iterations']} / {a['env_steps']:,}",
             f"{b['iterations']} / {b['env_steps']:,}" if b else "-", "-", "-"],
            ["mean training-episode return at the end (arena: last iteration; RLlib: episode_return_mean)",
             f"{ret:.1f}" if ret is not None else "-", f"{b['episode_return_mean']:.1f}" if b else "-", "-", "-"]]
    how = "greedy" if a["eval_greedy"] else "sampled"
    label = f"eval/return of the last evaluation (iteration {a['eval_iteration']}, {how}, {a['eval_seeds']} seeds)"
    rows.append([label, f"{a['eval_return']:.1f}", "-", "-", "-"])
    print(markdown_table(["comparison", "arena PPO", "RLlib PPO", "ratio", "goal"], rows, {1, 2, 3}))
    note = (f"\n- arena: {a['envs']} env processes, {a['batch']} samples an iteration, {a['threads']} torch "
            f"thread(s), setup {a['setup_s']:.1f} s, learning {a['learn_s']:.1f} s of the {a['rollout_learn_s']:.1f} s "
            f"of rollout + learn, outside the budget in run() {a['outside_budget_s']:.1f} s (the env processes' "
            f"start, what iteration 0 plays: the untrained policy's evaluation), {a['env_steps_total']:,} env steps "
            "in all")
    if b:
        note += (f"; RLlib: ray.init (num_cpus={b['num_cpus']}) {b['ray_init_s']:.1f} s, build {b['build_s']:.1f} s, "
                 f"an iteration's sampling {b['sample_s_iter']:.1f} s and learning {b['learn_s_iter']:.1f} s "
                 "(RLlib's timers), "
                 f"{b['episodes']} episodes, {b['threads']} torch thread(s) in the driver")
    elif "rllib_skipped" in r:
        note += f"; RLlib skipped: {r['rllib_skipped']}"
    print(note)


# -- the run ----------------------------------------------------------------------------------
def _check_opensim() -> str | None:
    import importlib.util

    if importlib.util.find_spec("opensim") is None:
        return 'opensim is not installed: pip install "arena[opensim]" (make venv installs it)'
    from arena.envs.prosthetics import ModelFileMissing, model_dir

    try:
        model_dir()
    except ModelFileMissing as e:
        return str(e)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--seconds", type=float, default=180.0, help="training budget of each PPO (default 180)")
    ap.add_argument("--episodes", type=int, default=6, help="episodes of the arena / raw comparison (default 6)")
    ap.add_argument("--steps", type=int, default=400, help="moves per slot a round, 1 vs 2 workers (default 400)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds, 1 vs 2 workers (default 2)")
    ap.add_argument("--only", action="append", choices=PARTS, help="run this part only (repeatable)")
    ap.add_argument("--skip-rllib", action="store_true", help="the arena's PPO alone")
    ap.add_argument("--rllib-cpus", type=int, default=2, help="Ray's num_cpus for RLlib (2 env runners; default 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args(argv)
    if min(args.episodes, args.steps, args.rounds) < 1 or args.seconds <= 0:
        ap.error("--episodes, --steps and --rounds must be >= 1 and --seconds > 0")
    missing = _check_opensim()
    if missing:
        print(f"bench_prosthetics: {missing}", file=_sys.stderr)
        return 2
    parts = args.only or list(PARTS)
    load = _os.getloadavg()[0] if hasattr(_os, "getloadavg") else float("nan")
    print(f"bench_prosthetics: {_versions(('opensim', 'torch', 'ray', 'gymnasium'))}; {_os.cpu_count()} CPUs; "
          f"1-min load average {load:.2f} at start\n")
    out: dict = {"versions": _versions(("opensim", "torch", "ray", "gymnasium")), "cpus": _os.cpu_count(),
                 "load_at_start": load}
    if "env" in parts:
        out["env"] = bench_env(args.episodes, args.seed)
        print_env(out["env"])
        print()
    if "procs" in parts:
        out["procs"] = bench_procs(args.steps, args.rounds, args.seed)
        print_procs(out["procs"])
        print()
    if "ppo" in parts:
        out["ppo"] = bench_ppo(args.seconds, args.skip_rllib, args.rllib_cpus, args.seed)
        print_ppo(out["ppo"])
        print()
    line = json.dumps(out)
    print(line)
    if args.json is not None:
        args.json.write_text(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
