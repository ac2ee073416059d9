"""The arena's SCC learner against RLlib PPO: same game, same budget, same machine; strength
against wall time.

Why: RLlib is the reference point for the arena's own learners. In one process this trains, one
after the other, for the same wall-clock budget (``--seconds``), on ``--game`` (Skirmish 3m or
Connect Four):

(a) the arena's SCC learner with the game's default config (Skirmish: ``scc_skirmish.yaml``,
    imitation of the scripted bots, then league RL; Connect Four: ``scc_connect_four_selfplay.yaml``,
    self-play alone from untrained weights), or with each config ``--scc-config`` names (e.g.
    ``configs/train/scc_skirmish_selfplay.yaml``: self-play alone), one after the other;
(b) RLlib PPO self-play on the same game with RLlib's own default model (``trainer: rllib_ppo``,
    ``rllib_ppo_skirmish.yaml`` or ``rllib_ppo_connect_four.yaml``): the game's PettingZoo env
    through RLlib's wrapper (Skirmish seen flat: the observation as one float32 vector, the compound
    order as a MultiDiscrete, every flat action made the nearest legal order:
    `arena.inference.flat_view`);

then plays each final policy greedily in 200 seat-swapped games (``--eval-games``) against the
game's fixed opponents (Skirmish: ``attack_nearest``, ``focus_fire``; Connect Four: ``random``
and OpenSpiel's C++ MCTS with 100 simulations) through the arena's match loop
(``policy:<checkpoint>,greedy=true``, ``rllib:<checkpoint>``), and prints a table: env steps, env
steps/s, the win rates with 95% Wilson intervals, and the ratio of the env steps/s. With ``--marks
K`` it also keeps each learner's checkpoint at K - 1 evenly spaced points of its budget, plays each
of them the same way (``--curve-games`` a pair) once the clock has stopped, and prints and draws
(``--plot``) strength against wall time, the final policy as the last point.

Method.
* The budget is the wall-clock of the trainer's ``run`` (everything it does to train: SCC's
  imitation stage, rollouts, updates, league bookkeeping and checkpoints; RLlib's sampling,
  learning and checkpoint). The trainer's build (Ray's start, RLlib's algorithm, the league's
  folder) is timed apart (``setup_s``), and so is every evaluation. The trainers' own in-run
  evaluations are cut to 2 games per opponent (their minimum), which the budget includes.
* Both stop before the iteration that would cross the budget (at least one iteration): after each
  iteration, if the time spent plus that iteration's time exceeds the budget, the trainer is asked
  to stop (``stop_requested``) and checkpoints. SCC's KL to the imitation policy anneals over its
  configured ``iterations``, so its iteration count is set from a measurement: the imitation stage
  and iteration 1 run first (``run(iterations=1)``), then ``iterations = 1 + (budget - elapsed) //
  (iteration 1's time)`` and ``run`` goes on (resuming at iteration 2) with the stop rule above.
  When those iterations end with time left (they ran faster than iteration 1), the count is planned
  again the same way from the last iteration's time, until the stop rule ends the run
  (`run_to_budget`). A schedule over ``iterations`` is stretched by each new plan; the two shipped
  configs these runs use have none (constant learning rate, no KL).
* A mark is taken after the first iteration that ends past it: that iteration's checkpoint (SCC
  writes one every iteration; RLlib's is written then, its time taken off the clock), the seconds
  and env steps so far.
* One env step is one tick of one game: a simultaneous tick (both seats' moves) in Skirmish, one
  move in Connect Four, for both learners: the ticks of SCC's RL rollouts (the sum of
  ``train/env_steps``) and RLlib's ``num_env_steps_sampled``. SCC's imitation stage plays teacher
  matches that are not counted as its env steps (their time is in its budget). env steps/s = env
  steps / the budget actually used.
* Win rate = wins / games (a draw is not a win, as everywhere in docs/), with Wilson's 95% score
  interval; the draws are counted beside it.

Usage:
    python benchmarks/bench_against_rllib.py --seconds 600 --seed 0
    python benchmarks/bench_against_rllib.py --seconds 600 --scc-config configs/train/scc_skirmish_selfplay.yaml \\
        --marks 5 --plot docs/skirmish_vs_rllib.png
    python benchmarks/bench_against_rllib.py --game openspiel/connect_four-v0 --seconds 300 --marks 5 \\
        --plot docs/connect_four_vs_rllib.png
    python benchmarks/bench_against_rllib.py --smoke --seconds 5     # tiny settings, a check that it runs
"""

from __future__ import annotations

import os as _os
import sys as _sys

_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions  # noqa: E402
from skirmish_ladder import wilson  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "configs" / "train"


class Game:
    """What the benchmark needs of a game: its SCC and RLlib configs and the fixed opponents."""

    def __init__(self, name: str, scc: str, rllib: str, opponents: tuple[str, ...]):
        self.name, self.scc, self.rllib, self.opponents = name, TRAIN / scc, TRAIN / rllib, opponents


GAMES = {g.name: g for g in (
    Game("arena/Skirmish-3m-v0", "scc_skirmish.yaml", "rllib_ppo_skirmish.yaml",
         ("skirmish:attack_nearest", "skirmish:focus_fire")),
    Game("openspiel/connect_four-v0", "scc_connect_four_selfplay.yaml", "rllib_ppo_connect_four.yaml",
         ("random", "mcts:simulations=100,backend=cpp")),
)}
NEVER = 10**6

#: --smoke: each trainer shrunk to seconds (a check that the script runs, not a measurement).
SCC_SMOKE = dict(il={"matches": 6, "epochs": 1, "workers": 1, "patience": 1}, games_per_iter=4,
                 learner={"epochs": 1})
RLLIB_SMOKE = dict(train_batch_size=200, minibatch_size=100, num_epochs=1, hidden=[32, 32],
                   num_envs_per_env_runner=2)


class Budget:
    """``progress`` for `Trainer.run`: asks `trainer` to stop before the iteration that would cross
    `seconds` of wall-clock counted from `t0`, and takes a mark (`points`) after the first iteration
    that ends past each of `marks` (seconds): that iteration's checkpoint (written here if the
    trainer did not, its time taken off the clock), the seconds and the env steps so far (`steps()`,
    else the sum of the iterations' ``train/env_steps``)."""

    def __init__(self, trainer, seconds: float, t0: float, marks: list[float] = (), steps=None):
        self.trainer, self.seconds, self.t0 = trainer, seconds, t0
        self.marks, self.steps = sorted(marks), steps or (lambda: self.env_steps)
        #: The last iteration's seconds (its metrics' ``time/iteration_s``).
        self.last_s = 0.0
        #: The env steps of the iterations seen, from their metrics.
        self.env_steps = 0
        #: One dict a mark taken: iteration, train_s, env_steps, checkpoint.
        self.points: list[dict] = []

    def __call__(self, it: int, last: int, metrics: dict) -> None:
        self.last_s = float(metrics.get("time/iteration_s", 0.0))
        self.env_steps += int(metrics.get("train/env_steps", 0))
        elapsed = time.perf_counter() - self.t0
        if self.marks and elapsed >= self.marks[0]:
            while self.marks and elapsed >= self.marks[0]:
                self.marks.pop(0)
            t = time.perf_counter()
            path = self.trainer.checkpoint_dir(it)
            if not path.is_dir():
                path = self.trainer.checkpoint(it)
            self.t0 += time.perf_counter() - t  # the mark's checkpoint is not training
            self.points.append({"iteration": it, "train_s": elapsed, "env_steps": int(self.steps()),
                                "checkpoint": str(path)})
        if time.perf_counter() - self.t0 + self.last_s > self.seconds:
            self.trainer.stop_requested = True


def evaluate(game: Game, spec: str, games: int, seed: int) -> dict:
    """Greedy `spec` against each of the game's opponents in `games` seat-swapped matches."""
    from arena.match.batch import play_matches, summarize

    out = {}
    for opp in game.opponents:
        results = play_matches(game.name, [spec, opp], games, seed=seed * 1_000_003 + 17, swap_seats=True)
        me = summarize(results, [spec, opp])[0]
        out[opp] = {"games": me.games, "wins": me.wins, "draws": me.draws, "win_rate": me.wins / me.games,
                    "wilson": wilson(me.wins, me.games), "invalid": me.invalid}
    return out


def marks_of(seconds: float, marks: int) -> list[float]:
    """`marks` - 1 evenly spaced points inside the budget (the final policy is the last point)."""
    return [seconds * k / marks for k in range(1, marks)] if marks > 1 else []


def curve(points: list[dict], final: dict, spec_of, game: Game, games: int, seed: int) -> list[dict]:
    """Each mark's checkpoint played like the final policy (`games` a pair), then the final point."""
    out = [{**p, "eval": evaluate(game, spec_of(p["checkpoint"]), games, seed)} for p in points
           if p["iteration"] < final["iterations"]]
    return out + [{"iteration": final["iterations"], "train_s": final["train_s"], "env_steps": final["env_steps"],
                   "checkpoint": "final", "eval": final["eval"]}]


def run_to_budget(trainer, budget: Budget) -> None:
    """Run an SCC trainer until `budget` stops it: iteration 1 first, then as many more as the time
    left holds at the last iteration's pace, planned again whenever the planned ones end early (an
    iteration faster than the one that planned it), so the learner trains to its budget."""
    trainer.run(iterations=1, progress=budget)
    while not trainer.stop_requested:
        left = budget.seconds - (time.perf_counter() - budget.t0)
        if left <= budget.last_s:
            break
        trainer.cfg.iterations = trainer.iteration + max(1, int(left // max(budget.last_s, 1e-9)))
        trainer.run(iterations=trainer.cfg.iterations, progress=budget)


def scc_run(game: Game, seconds: float, seed: int = 0, eval_games: int = 200, smoke: bool = False,
            config: Path | None = None, marks: int = 0, curve_games: int = 100) -> dict:
    """Train the SCC learner of `config` for `seconds` (see the module docstring); its figures."""
    from arena.trainers.common.metrics import read_metrics
    from arena.trainers.registry import read_train_config

    import yaml

    config = Path(config or game.scc)
    overrides = dict(SCC_SMOKE) if smoke else {}
    if yaml.safe_load(config.read_text()).get("il") is None:
        overrides.pop("il", None)  # a config with no imitation stage keeps none
    folder = Path(tempfile.mkdtemp(prefix="bench-scc-"))
    try:
        entry, cfg = read_train_config(config, seed=seed, iterations=max(2, int(seconds // 10)),
                                       eval={"every": NEVER, "games": 2}, **overrides)
        if cfg.game != game.name:
            raise SystemExit(f"{config} trains {cfg.game}, not {game.name}: pass --game {cfg.game}")
        t0 = time.perf_counter()
        trainer = entry.builder()(cfg, folder / "run")
        setup_s = time.perf_counter() - t0
        try:
            t1 = time.perf_counter()
            budget = Budget(trainer, seconds, t1, marks_of(seconds, marks))
            run_to_budget(trainer, budget)
            train_s = time.perf_counter() - budget.t0
            iterations = trainer.iteration
            spec = f"policy:{(folder / 'run' / 'latest').resolve()},greedy=true"
        finally:
            trainer.close()
        rows = read_metrics(folder / "run" / "metrics.jsonl")
        env_steps = int(sum(r.get("train/env_steps", 0) for r in rows if r["step"] >= 1))
        rollout_s = sum(r.get("time/rollout_s", 0.0) for r in rows if r["step"] >= 1)
        t2 = time.perf_counter()
        out = {"learner": f"arena SCC ({config.stem})", "iterations": iterations, "env_steps": env_steps,
               "train_s": train_s, "env_steps_per_s": env_steps / max(train_s, 1e-9),
               "rollout_env_steps_per_s": env_steps / max(rollout_s, 1e-9), "setup_s": setup_s,
               "eval": evaluate(game, spec, eval_games, seed)}
        out["curve"] = curve(budget.points, out, lambda c: f"policy:{c},greedy=true", game, curve_games, seed)
        out["eval_s"] = time.perf_counter() - t2
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def rllib_run(game: Game, seconds: float, seed: int = 0, eval_games: int = 200, smoke: bool = False,
              marks: int = 0, curve_games: int = 100) -> dict:
    """Train RLlib PPO self-play for `seconds` (see the module docstring); its figures."""
    from arena.trainers.common.metrics import read_metrics
    from arena.trainers.registry import read_train_config

    overrides = dict(RLLIB_SMOKE) if smoke else {}
    folder = Path(tempfile.mkdtemp(prefix="bench-rl-"))
    try:
        entry, cfg = read_train_config(game.rllib, seed=seed, iterations=NEVER, checkpoint_every=NEVER,
                                       eval_every=NEVER, eval_games=2, **overrides)
        t0 = time.perf_counter()
        trainer = entry.builder()(cfg, folder / "run")
        setup_s = time.perf_counter() - t0
        try:
            t1 = time.perf_counter()
            budget = Budget(trainer, seconds, t1, marks_of(seconds, marks), lambda: trainer.env_steps)
            trainer.run(progress=budget)
            train_s = time.perf_counter() - budget.t0
            iterations, env_steps = trainer.iteration, trainer.env_steps
        finally:
            trainer.close()
        rows = read_metrics(folder / "run" / "metrics.jsonl")
        sample_s = sum(r.get("time/sample_s", 0.0) for r in rows if r["step"] >= 1)
        t2 = time.perf_counter()
        out = {"learner": "RLlib PPO", "iterations": iterations, "env_steps": int(env_steps), "train_s": train_s,
               "env_steps_per_s": env_steps / max(train_s, 1e-9),
               "rollout_env_steps_per_s": env_steps / max(sample_s, 1e-9), "setup_s": setup_s,
               "eval": evaluate(game, f"rllib:{folder / 'run' / 'checkpoint'}", eval_games, seed)}
        out["curve"] = curve(budget.points, out, lambda c: f"rllib:{c}", game, curve_games, seed)
        out["eval_s"] = time.perf_counter() - t2
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _name(opp: str) -> str:
    """An opponent as the tables name it: a bot without its ``skirmish:`` prefix, any other spec whole."""
    return opp.removeprefix("skirmish:")


def table(game: Game, runs: list[dict]) -> str:
    header = ["learner", "iterations", "env steps", "train s", "env steps/s"]
    for opp in game.opponents:
        header += [f"win rate vs {_name(opp)}", "95% Wilson", "draws"]
    rows = []
    for r in runs:
        row = [r["learner"], str(r["iterations"]), f"{r['env_steps']:,}", f"{r['train_s']:.0f}",
               f"{r['env_steps_per_s']:.0f}"]
        for opp in game.opponents:
            e = r["eval"][opp]
            row += [f"{e['win_rate']:.3f}", f"[{e['wilson'][0]:.2f}, {e['wilson'][1]:.2f}]", str(e["draws"])]
        rows.append(row)
    return markdown_table(header, rows, {1, 2, 3, 4, 5, 7, 8, 10})


def curve_table(game: Game, runs: list[dict]) -> str:
    """Strength against wall time: one row a learner's point."""
    header = ["learner", "train s", "iteration", "env steps"] + [f"vs {_name(o)} (games)" for o in game.opponents]
    rows = []
    for r in runs:
        for p in r["curve"]:
            cells = [f"{e['win_rate']:.3f} [{e['wilson'][0]:.2f}, {e['wilson'][1]:.2f}] ({e['games']})"
                     for e in (p["eval"][o] for o in game.opponents)]
            rows.append([r["learner"], f"{p['train_s']:.0f}", str(p["iteration"]), f"{p['env_steps']:,}", *cells])
    return markdown_table(header, rows, {1, 2, 3, 4, 5})


def plot(game: Game, runs: list[dict], path: Path, seconds: float) -> None:
    """One panel an opponent: each learner's greedy win rate against its training seconds, the
    Wilson interval as a band."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * len(game.opponents), 3.8))
    for i, opp in enumerate(game.opponents):
        ax = fig.add_subplot(1, len(game.opponents), i + 1)
        for r, color in zip(runs, ("tab:red", "tab:purple", "tab:green", "tab:blue")):
            color = "tab:blue" if r["learner"] == "RLlib PPO" else color
            pts = r["curve"]
            x = [p["train_s"] for p in pts]
            ax.plot(x, [p["eval"][opp]["win_rate"] for p in pts], color=color, marker="o", ms=3, lw=1.4,
                    label=r["learner"])
            ax.fill_between(x, [p["eval"][opp]["wilson"][0] for p in pts], [p["eval"][opp]["wilson"][1] for p in pts],
                            color=color, alpha=0.15, lw=0)
        ax.set_xlim(0, seconds)
        ax.set_ylim(0, 1)
        ax.set_xlabel("training seconds (one process, 2 cores)")
        ax.set_title(f"vs {_name(opp)}", fontsize=9)
        ax.set_ylabel("greedy win rate")
        ax.grid(True, alpha=0.3)
        if i == 0:
            ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(f"{game.name}: strength against wall time (95% Wilson bands)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--game", choices=sorted(GAMES), default="arena/Skirmish-3m-v0")
    ap.add_argument("--seconds", type=float, default=600.0, help="training budget of each learner (wall-clock)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-games", type=int, default=200, help="seat-swapped games of the final policy per opponent")
    ap.add_argument("--marks", type=int, default=0,
                    help="strength against wall time: K points a learner, the final policy the last (0: none)")
    ap.add_argument("--curve-games", type=int, default=100, help="seat-swapped games per opponent at each mark")
    ap.add_argument("--plot", type=Path, help="draw the curves to this PNG (with --marks)")
    ap.add_argument("--smoke", action="store_true", help="tiny trainer settings: checks that the script runs")
    ap.add_argument("--only", choices=("scc", "rllib"), help="train one learner only")
    ap.add_argument("--scc-config", action="append", type=Path, default=[],
                    help="an SCC training config (repeatable; default: the game's, "
                         "e.g. configs/train/scc_skirmish.yaml)")
    args = ap.parse_args(argv)
    if args.marks < 0 or args.marks > 50 or args.curve_games < 1 or args.eval_games < 1:
        ap.error("--marks is 0 to 50, --curve-games and --eval-games at least 1")
    game = GAMES[args.game]
    runs = []
    if args.only in (None, "scc"):
        for config in args.scc_config or [None]:
            runs.append(scc_run(game, args.seconds, args.seed, args.eval_games, args.smoke, config, args.marks,
                                args.curve_games))
    if args.only in (None, "rllib"):
        runs.append(rllib_run(game, args.seconds, args.seed, args.eval_games, args.smoke, args.marks, args.curve_games))
    print(f"{game.name}, {args.seconds:.0f} s of training each, seed {args.seed}, {args.eval_games} greedy "
          f"seat-swapped games per opponent{' (smoke settings)' if args.smoke else ''}; {versions(('torch', 'ray'))}, "
          f"{_os.cpu_count()} CPUs")
    print(table(game, runs))
    print("\n(train s: the budget each used, stopping before the iteration that would cross it; SCC's includes its "
          "imitation stage, whose teacher matches are not counted as env steps. One env step: one tick of one game. "
          "Win rate: wins / games, draws beside it.)")
    rllib = [r for r in runs if r["learner"] == "RLlib PPO"]
    for r in runs if rllib else []:
        if r is rllib[0]:
            continue
        ratio = r["env_steps_per_s"] / max(rllib[0]["env_steps_per_s"], 1e-9)
        print(f"\nenv steps/s, {r['learner']} / RLlib PPO: {ratio:.2f}x (rollouts alone: "
              f"{r['rollout_env_steps_per_s']:.0f} vs {rllib[0]['rollout_env_steps_per_s']:.0f} env steps/s, "
              f"{r['rollout_env_steps_per_s'] / max(rllib[0]['rollout_env_steps_per_s'], 1e-9):.2f}x)")
    if args.marks:
        print(f"\nStrength against wall time ({args.curve_games} greedy seat-swapped games a pair at each mark, "
              f"{args.eval_games} for the final policy; 95% Wilson intervals):\n")
        print(curve_table(game, runs))
        if args.plot:
            plot(game, runs, args.plot, args.seconds)
            print(f"\ncurves: {args.plot}")
    out = {"game": game.name, "seconds": args.seconds, "seed": args.seed, "smoke": args.smoke, "runs": runs}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
