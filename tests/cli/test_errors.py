"""A user's mistake is one line that names the fix, exit code 2, never a traceback."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cli_in_process import arena_here

ROOT = Path(__file__).resolve().parents[2]


def arena(*args: str, cwd: Path | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], cwd=cwd or ROOT, input=stdin,
                          capture_output=True, text=True, timeout=300, env=_env())


def _env() -> dict:
    import os

    env = dict(os.environ)
    env["COLUMNS"] = "200"
    return env


@pytest.fixture(scope="module")
def league(tmp_path_factory) -> Path:
    """A small league (tic-tac-toe only) with players random and first."""
    d = tmp_path_factory.mktemp("errors")
    cfg = d / "l.yaml"
    cfg.write_text(textwrap.dedent("""\
        name: small
        games: [{id: openspiel/tic_tac_toe-v0}]
        players: [{name: random, agent: random}, {name: first, agent: first}]
        matches: 4
        workers: 1
        """))
    r = arena("league", "run", str(cfg), "--dir", str(d / "run"))
    assert r.returncode == 0, r.stdout + r.stderr
    return d / "run"


def _league_config(tmp: Path, agent: str) -> Path:
    p = tmp / "bad.yaml"
    p.write_text(f"name: bad\ngames: [{{id: openspiel/tic_tac_toe-v0}}]\n"
                 f"players: [{{name: a, agent: random}}, {{name: b, agent: \"{agent}\"}}]\nmatches: 2\n")
    return p


CASES = [
    # (arguments, a phrase the one line must contain)
    (["play", "arena/TicTacToe-v0", "-p", "random"], "has 2 players"),
    (["play", "plugin/Pendulum-v1", "--plugin", "plugins.sample_games", "-p", "random", "-p", "random"],
     "has 1 player"),
    (["play", "openspiel/tic_tac_toe-v0", "-p", "cfr", "-p", "random"], "CFR is for"),
    (["play", "arena/TicTacToe-v0", "-p", "mcts", "-p", "random"], "plays OpenSpiel games"),
    (["play", "openspiel/tic_tac_toe-v0", "-p", "mcts:simulations=abc", "-p", "random"], "bad option value"),
    (["play", "openspiel/tic_tac_toe-v0", "-p", "mcts:simulatons=3", "-p", "random"], "unknown option 'simulatons'"),
    (["play", "openspiel/tic_tac_toe-v0", "-p", "tabular:/nope.json", "-p", "random"], "no tabular weights"),
    (["play", "openspiel/tic_tac_toe-v0", "-p", "crf", "-p", "random"], "unknown agent kind 'crf'"),
    (["play", "openspiel/tic_tac_toe-v0"], "give the agents"),
    (["play", "nosuch/Game-v0", "-p", "random", "-p", "random"], "nosuch/Game-v0"),
    (["play", "openspiel/tic_tac_toe-v0", "-p", "random", "-p", "random", "--plugin", "no_such_plugin_mod"],
     "no_such_plugin_mod"),
    (["play", "openspiel/tic_tac_toe-v0", "--vs", "{league}:nobody"], "no player 'nobody'"),
    (["play", "openspiel/kuhn_poker-v0", "--vs", "{league}:first"], "plays openspiel/tic_tac_toe-v0, not"),
    (["play", "openspiel/tic_tac_toe-v0", "--vs", "{league}:first", "--seat", "5"], "--seat 5"),
    (["play", "openspiel/tic_tac_toe-v0", "--vs", "{tmp}:first"], "no league at"),
    (["ratings", "{league}", "--game", "nosuch"], "--game nosuch"),
    (["ratings", "{tmp}"], "no league at"),
    (["league", "run", "{cfg:crf:iterations=200}", "--dir", "{tmp}/l1"], "unknown agent kind 'crf'"),
    (["league", "run", "{cfg:mcts:simulatons=200}", "--dir", "{tmp}/l2"], "unknown option 'simulatons'"),
    (["league", "run", "{yaml:name: [unclosed}", "--dir", "{tmp}/l3"], "not valid YAML"),
    (["league", "run", "{yaml:name: x\nmatchez: 3}", "--dir", "{tmp}/l4"], "matchez"),
    (["league", "run", "{yaml:name: x\ngames: [{id: nosuch/G-v0}]\nplayers: [{name: a, agent: random}]}",
      "--dir", "{tmp}/l5"], "nosuch/G-v0"),
    (["league", "run", "{tmp}/missing.yaml", "--dir", "{tmp}/l6"], "no config file"),
    (["train", "{yaml:trainer: spiral\ngame: nosuch/G-v0}", "--dir", "{tmp}/t1"], "nosuch/G-v0"),
    (["train", "{yaml:trainer: spirl}", "--dir", "{tmp}/t2"], "unknown trainer 'spirl'"),
    (["train", "{yaml:game: openspiel/tic_tac_toe-v0}", "--dir", "{tmp}/t3"], "trainer: required"),
    (["train", "{yaml:trainer: spiral\nlearner: {lr: fast}}", "--dir", "{tmp}/t4"], "learner.lr: expected a number"),
    (["train", "{yaml:trainer: spiral\nlr: 1.0e-4}", "--dir", "{tmp}/t6"], "lr: this key moved to learner.lr"),
    (["replay", "show", "{tmp}/nope.jsonl"], "nope.jsonl"),
    (["play", "arena/Prosthetics-v0", "-p", "random", "-k", "frame_skip=0"], "arena/Prosthetics-v0: frame_skip must be a whole number in [1, 100], got 0"),
    (["play", "arena/Prosthetics-v0", "-p", "random", "-k", "bogus=1"], "arena/Prosthetics-v0 has no setting 'bogus' (its settings: frame_skip, integrator_accuracy, "),
    (["play", "arena/Prosthetics-v0", "-p", "random", "-k", "frame_skip"], "expected KEY=VALUE"),
    (["play", "arena/Prosthetics-v0", "-p", "random", "--render", "{tmp}/x.avi"], "must end in .gif or .mp4"),
    (["play", "openspiel/tic_tac_toe-v0", "-p", "random", "-p", "random", "--render", "{tmp}/x.gif"],
     "cannot be drawn"),
    (["play", "arena/Prosthetics-v0", "-p", "first"], "continuous actions"),
    (["train", "{yaml:trainer: ppo\ngame: openspiel/tic_tac_toe-v0}", "--dir", "{tmp}/t5"], "single-agent tasks"),
]


def _own_process(i: int, args: list[str]) -> bool:
    """The first case and those that load a plug-in (its games stay registered in the process) run as
    a process of their own; the rest in the test's process (`arena_here`: the same exit code and
    output, no interpreter start each)."""
    return i == 0 or "--plugin" in args


@pytest.mark.parametrize("i,args,phrase", [(i, *c) for i, c in enumerate(CASES)],
                         ids=[" ".join(c[0])[:60] for c in CASES])
def test_user_errors_are_one_line(i, args, phrase, league, tmp_path, monkeypatch, capsys):
    def fill(a: str) -> str:
        if a.startswith("{cfg:"):
            return str(_league_config(tmp_path, a[5:-1]))
        if a.startswith("{yaml:"):
            p = tmp_path / f"c{abs(hash(a)) % 10**6}.yaml"
            p.write_text(a[6:-1] + "\n")
            return str(p)
        return a.replace("{league}", str(league)).replace("{tmp}", str(tmp_path))

    filled = [fill(a) for a in args]
    if _own_process(i, args):
        r = arena(*filled, cwd=ROOT / "tests")
    else:
        monkeypatch.setenv("COLUMNS", "200")
        r = arena_here(monkeypatch, capsys, *filled, cwd=ROOT / "tests")
    out = (r.stdout + r.stderr).strip()
    lines = [line for line in out.splitlines() if line.strip()]
    assert r.returncode == 2, out
    assert "Traceback" not in out, out
    assert len(lines) == 1, out
    assert phrase in out, out
    assert out.startswith("error:"), out


def test_without_opensim_the_task_is_one_line_naming_the_extra(tmp_path):
    """A machine without opensim: playing the task is one line that says what to install."""
    import os

    (tmp_path / "opensim.py").write_text("raise ImportError('No module named opensim')\n")
    env = dict(_env(), PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "arena.cli", "play", "arena/Prosthetics-v0", "-p", "random"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 2 and len(out.splitlines()) == 1 and "Traceback" not in out, out
    assert 'pip install "arena[opensim]"' in out, out
