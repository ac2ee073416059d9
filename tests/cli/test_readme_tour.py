"""Every command of the README's tour, run as written (on small settings), so the README cannot drift.

The tour is the fenced bash block under "## A tour". Commands that take minutes at full size run
with smaller numbers (fewer matches, a short training config); commands that ask a person for
moves get them on stdin. Each command must exit 0.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

#: Moves for a person at the terminal: every cell in turn (taken ones are re-asked), then the end of input.
HUMAN_MOVES = "".join(f"{c}\n" for c in (4, 0, 1, 2, 3, 5, 6, 7, 8)) * 2


def tour_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## A tour", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]


def _small(args: list[str], tmp: Path) -> list[str]:
    """The same command on small settings."""
    out = list(args)
    for flag, small in (("-n", 20),):
        if flag in out:
            i = out.index(flag) + 1
            out[i] = str(min(int(out[i]), small))
    if any("Prosthetics" in a for a in out) and "-n" in out:  # a simulated episode takes seconds: one is enough
        out[out.index("-n") + 1] = "1"
    if out[:2] == ["league", "run"] and "--matches" not in out:
        out += ["--matches", "2" if "prosthetics" in out[2] else "60"]
    if out[:1] == ["train"]:
        cfg = yaml.safe_load((ROOT / out[1]).read_text())
        if cfg["trainer"] == "ppo":
            cfg.update(iterations=1, steps_per_env=32)
            cfg["eval"] = {"every": 1, "seeds": [0]}
        elif cfg["trainer"] == "scc":
            cfg.update(iterations=2, games_per_iter=8, threads=1)
            cfg["eval"] = {"every": 1, "games": 8, "opponents": ["random"]}
            if cfg.get("il"):
                teachers = [("mcts:simulations=10" if t.startswith("mcts") else t) for t in cfg["il"]["teachers"]]
                cfg["il"].update(matches=10, epochs=1, workers=1, teachers=teachers)
                if cfg["il"].get("label"):
                    cfg["il"]["label"] = "mcts:simulations=20,backend=cpp"
                if cfg["il"].get("dagger"):
                    cfg["il"]["dagger"] = {"rounds": 1, "matches": 4, "epochs": 1}
        else:
            cfg.update(iterations=2, games_per_iter=16, concurrency=16, threads=1)
            cfg.setdefault("learner", {})["minibatch"] = 64
            cfg["eval"] = {"every": 1, "games": 16, "opponents": ["random"], "concurrency": 16,
                           "confirm_top": 2, "confirm_games": 16}
            if cfg.get("il"):
                cfg["il"].update(matches=100, epochs=1)
        small_cfg = tmp / f"tour_train_{cfg['trainer']}.yaml"
        small_cfg.write_text(yaml.safe_dump(cfg))
        out[1] = str(small_cfg)
    return out


def test_the_tour_has_the_commands_a_newcomer_needs():
    cmds = tour_commands()
    assert 8 <= len(cmds) <= 24, cmds
    assert all(c.startswith("arena ") for c in cmds), cmds
    firsts = {tuple(shlex.split(c)[1:3]) for c in cmds}
    for need in (("envs", "list"), ("league", "run"), ("replay", "verify")):
        assert need in firsts, need
    assert any(c.startswith("arena train ") for c in cmds)
    assert any(" human" in c for c in cmds)


def chain_of(line: str) -> str:
    """The run folder a command reads or writes (``runs/<name>``: the commands on one folder run in order,
    as a chain), else the command itself (a chain of one)."""
    m = re.search(r"runs/([A-Za-z0-9_]+)", line)
    return m.group(1) if m else line


def chains() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in tour_commands():
        out.setdefault(chain_of(line), []).append(line)
    return out


#: The chains of the long-running games (Connect Four, the prosthetics task), run from
#: `test_readme_tour_games.py` so that a second test worker takes them; every other chain runs here. A
#: group runs its folders' commands in the README's order in one folder: the prosthetics league plays
#: the checkpoint the prosthetics training wrote (``runs/pros/best``, named in its config).
GAMES_CHAINS = (("c4",), ("pros", "pl"))


def run_chain(names: tuple[str, ...] | str, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    names = (names,) if isinstance(names, str) else tuple(names)
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    env = dict(os.environ, COLUMNS="200", OMP_WAIT_POLICY="PASSIVE")
    for line in [c for c in tour_commands() if chain_of(c) in names]:
        args = _small(shlex.split(line)[1:], tmp_path)
        stdin = HUMAN_MOVES if ("human" in args or "--vs" in args) else ("q\n" if args[:2] == ["replay", "show"] else "")
        r = subprocess.run([sys.executable, "-m", "arena.cli", *args], cwd=tmp_path, input=stdin, capture_output=True,
                           text=True, timeout=1200, env=env)
        assert r.returncode == 0, f"{line}\n-> {' '.join(args)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        assert "Traceback" not in r.stdout + r.stderr, line


def test_the_games_chains_are_in_the_tour():
    assert {c for group in GAMES_CHAINS for c in group} <= set(chains()), sorted(chains())


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", [c for c in chains() if not any(c in group for group in GAMES_CHAINS)])
def test_every_tour_command_runs(name, tmp_path):
    run_chain(name, tmp_path)
