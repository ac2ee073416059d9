"""`eval.tactics`: each evaluation of the SCC learner reports the tactics probe of its greedy policy beside
the win rates; a game the probe cannot read is a one-line config error."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pyspiel")

from arena.config import from_dict  # noqa: E402
from arena.errors import ConfigError  # noqa: E402
from arena.trainers.policy.config import SCCConfig  # noqa: E402
from arena.trainers.policy.scc import SCCTrainer, validate  # noqa: E402


def _cfg(game: str, **extra) -> SCCConfig:
    return from_dict(SCCConfig, {"game": game, "seed": 0, "threads": 1, "il": None, "arch": "mlp",
                                 "sizes": {"hidden": [16]}, "learners": [{"name": "main", "role": "main"}],
                                 "iterations": 1, "games_per_iter": 8, **extra})


def test_each_evaluation_reports_the_tactics_probe(tmp_path):
    from arena.agents.neural import PolicyAgent
    from arena.agents.probe import agent_chooser, tactics_probe

    cfg = _cfg("openspiel/tic_tac_toe-v0", eval={"every": 1, "games": 4, "opponents": ["random"], "tactics": 40})
    t = SCCTrainer(cfg, tmp_path / "run")
    try:
        t.run(1)
        row = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
               if "eval/tactics/win_taken" in x][-1]  # the last evaluation's: the weights the run ended with
        again = tactics_probe(cfg.game, agent_chooser(PolicyAgent(t.learners["main"].net, greedy=True)), 40, seed=0)
    finally:
        t.close()
    assert row["eval/tactics/win_taken"] == again.win_taken and row["eval/tactics/block_made"] == again.block_made
    assert 0.3 < row["eval/tactics/win_random"] < 0.6 and 0.1 < row["eval/tactics/block_random"] < 0.4


def test_tactics_on_a_game_the_probe_cannot_read_is_one_line():
    cfg = _cfg("openspiel/leduc_poker-v0", eval={"every": 1, "games": 4, "opponents": ["random"], "tactics": 10})
    with pytest.raises(ConfigError, match="eval.tactics: the tactics probe is for two-player perfect-information"):
        validate(cfg)
