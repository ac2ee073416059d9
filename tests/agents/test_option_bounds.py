"""The built-in agents' options have upper bounds (`arena.agents.specs.OPTION_RULES`): ``cfr:iterations=1e9``
in a league config used to block start-up solving the game; now the config is refused in one line when
it is loaded, before anything is solved, searched or made."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arena.agents.specs import MAX_CFR_ITERATIONS, MAX_SIMULATIONS, check_spec, make_agent
from arena.envs.registry import make_core
from arena.errors import AgentSpecError, ConfigError
from arena.league.config import load_league_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("spec, words", [
    ("cfr:iterations=1e9", "bad option value: iterations must be an integer >= 1 and at most 10,000, got 1000000000.0"),
    ("cfr:iterations=1000000000", "iterations must be an integer >= 1 and at most 10,000, got 1000000000"),
    ("mcts:simulations=1000000000", "simulations must be an integer >= 1 and at most 100,000, got 1000000000"),
    ("mcts:rollouts=100000", "rollouts must be an integer >= 1 and at most 100, got 100000"),
    ("mcts:uct_c=1e300", "uct_c must be a number > 0 and at most 1000, got 1e+300"),
    ("human:max_tries=1000000000", "max_tries must be an integer >= 1 and at most 1,000"),
    ("random:seed=" + "9" * 40, "seed must be an integer >= 0 and at most 9,223,372,036,854,775,807"),
    ("policy:runs/x,threads=100000", "threads must be an integer >= 1 and at most 256, got 100000"),
    ("policy_mcts:runs/x,simulations=1000000000", "simulations must be an integer >= 2 and at most 100,000"),
    ("policy_mcts:runs/x,greedy=true", "unknown option 'greedy'"),
])
def test_an_option_past_its_bound_is_one_line(spec, words):
    with pytest.raises(AgentSpecError) as e:
        check_spec(spec)
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_the_bounds_leave_what_the_project_uses():
    for spec in ("cfr:iterations=300", f"cfr:iterations={MAX_CFR_ITERATIONS}", "mcts:simulations=3000,backend=cpp",
                 f"mcts:simulations={MAX_SIMULATIONS}", "policy:runs/c4/best,greedy=true,threads=1",
                 "policy_mcts:runs/c4/best,simulations=200", "random:seed=7"):
        check_spec(spec)


def test_make_agent_refuses_before_solving():
    with pytest.raises(AgentSpecError, match="iterations must be an integer >= 1 and at most 10,000"):
        make_agent("cfr:iterations=1000000000", make_core("openspiel/kuhn_poker-v0"), 0)


def _cfg(tmp_path: Path, agent: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text("name: x\ngames: [{id: openspiel/kuhn_poker-v0}]\n"
                 f"players: [{{name: a, agent: random}}, {{name: b, agent: '{agent}'}}]\nmatches: 2\nworkers: 1\n")
    return p


def test_a_league_config_naming_a_billion_cfr_iterations_is_refused_when_loaded(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_league_config(_cfg(tmp_path, "cfr:iterations=1e9"))
    assert "player 'b': agent spec 'cfr:iterations=1e9': bad option value: iterations must be an integer >= 1 and " \
           "at most 10,000, got 1000000000.0" in str(e.value) and "\n" not in str(e.value)
    r = subprocess.run([sys.executable, "-m", "arena.cli", "league", "run", _cfg(tmp_path, "cfr:iterations=1e9"),
                        "--dir", tmp_path / "L"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, COLUMNS="200"))
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 2 and "Traceback" not in out and len(out.splitlines()) == 1, out
    assert "iterations must be an integer >= 1 and at most 10,000" in out
    assert not (tmp_path / "L").exists()
