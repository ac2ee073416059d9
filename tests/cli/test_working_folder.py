"""No command runs code from the folder it is started in: a folder of downloaded replays or a cloned
league may hold modules named like installed ones (`numpy.py`, `pyspiel.py`), and only the modules a
person names (`--plugin`, `module:Class`) are taken from a folder, after the installed packages."""

import os
import subprocess
import sys
from pathlib import Path

ARENA = str(Path(sys.executable).with_name("arena"))
#: Modules every command imports on its way (the CLI, the registry, the replay reader, the engines).
SHADOWS = ("numpy", "pyspiel", "yaml", "rich", "typer", "gymnasium", "json", "sqlite3", "gzip", "open_spiel",
           "pettingzoo", "torch", "arena")


def _hostile_folder(folder: Path, sentinel: Path) -> None:
    for name in SHADOWS:
        (folder / f"{name}.py").write_text(
            f"import os\nopen(os.environ['ARENA_SENTINEL'], 'a').write('{name}\\n')\nraise SystemExit(99)\n")


def _run(args, cwd, sentinel, timeout=240):
    env = dict(os.environ, COLUMNS="200", ARENA_SENTINEL=str(sentinel))
    env.pop("PYTHONPATH", None)
    return subprocess.run([ARENA, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def test_modules_in_the_working_folder_never_run(tmp_path):
    replays = tmp_path / "downloaded"
    replays.mkdir()
    sentinel = tmp_path / "ran.txt"
    made = _run(["play", "openspiel/tic_tac_toe-v0", "-p", "random", "-p", "first", "-n", "3",
                 "--replays", str(replays)], tmp_path, sentinel)
    assert made.returncode == 0, made.stderr
    _hostile_folder(replays, sentinel)
    for args in (["envs", "list"], ["replay", "verify", "."], ["replay", "list", "."],
                 ["play", "openspiel/tic_tac_toe-v0", "-p", "random", "-p", "first", "-n", "4", "--workers", "2"]):
        p = _run(args, replays, sentinel)
        assert p.returncode == 0, (args, p.stdout[-2000:], p.stderr[-2000:])
        assert not sentinel.exists(), (args, sentinel.read_text())
    assert "3 verified" in _run(["replay", "verify", "."], replays, sentinel).stdout


def test_a_named_module_comes_from_the_folder_and_nothing_else_does(tmp_path):
    sentinel = tmp_path / "ran.txt"
    _hostile_folder(tmp_path, sentinel)
    (tmp_path / "my_agents_w.py").write_text(
        "import numpy\n"  # the installed numpy: ./numpy.py would write the sentinel and exit 99
        "class LastMove:\n    def act(self, observation):\n        return observation.legal_actions[-1]\n")
    p = _run(["play", "openspiel/tic_tac_toe-v0", "-p", "my_agents_w:LastMove", "-p", "random", "-n", "6",
              "--workers", "2"], tmp_path, sentinel)
    assert p.returncode == 0 and "my_agents_w:LastMove" in p.stdout, p.stdout + p.stderr
    (tmp_path / "my_games_w.py").write_text(
        'import gymnasium\ngymnasium.register(id="mine/RPSw-v2", entry_point="pettingzoo.classic.rps_v2:parallel_env")\n')
    for arg in ("my_games_w", "./my_games_w.py"):
        p = _run(["envs", "list", "--plugin", arg], tmp_path, sentinel)
        assert p.returncode == 0 and "mine/RPSw-v2" in p.stdout, (arg, p.stdout, p.stderr)
    assert not sentinel.exists(), sentinel.read_text()


def test_an_installed_module_wins_over_a_folder_module_of_the_same_name(tmp_path):
    sentinel = tmp_path / "ran.txt"
    # `-p json:X` names the installed json (which has no X): the folder's json.py is never imported
    (tmp_path / "json.py").write_text("import os\nopen(os.environ['ARENA_SENTINEL'], 'a').write('json')\n"
                                      "class X:\n    def act(self, o):\n        return o.legal_actions[0]\n")
    p = _run(["play", "openspiel/tic_tac_toe-v0", "-p", "json:X", "-p", "random"], tmp_path, sentinel)
    assert p.returncode == 2 and "has no attribute 'X'" in p.stderr and "Traceback" not in p.stderr, p.stderr
    # a plug-in file named like an installed module is refused, not silently swapped for it
    p = _run(["envs", "list", "--plugin", "./json.py"], tmp_path, sentinel)
    assert p.returncode == 2 and "has the name of an installed module (json): rename the file" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not sentinel.exists()


def test_the_cli_leaves_the_import_path_alone():
    from typer.testing import CliRunner

    from arena.cli import app

    before = list(sys.path)
    r = CliRunner().invoke(app, ["envs", "list"], terminal_width=200)
    assert r.exit_code == 0 and sys.path == before
