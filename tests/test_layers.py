"""Dependencies point one way (cli > demo > ui > trainers > league > match > replays > agents >
inference > envs): the import-linter contract in pyproject.toml, run on the package."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"]


def _lint(cwd: Path, *args: str, pythonpath: str | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath or str(cwd), "HOME": str(cwd)}
    return subprocess.run([*LINT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_arena_imports_point_one_way_down():
    r = _lint(ROOT, "--no-cache")
    assert r.returncode == 0 and "1 kept, 0 broken" in r.stdout, r.stdout + r.stderr


def test_the_contract_catches_an_import_back_up(tmp_path):
    # The same kind of contract on a two-layer package whose lower layer imports the upper one.
    pkg = tmp_path / "pkg"
    (pkg / "low").mkdir(parents=True)
    (pkg / "high").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "high" / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("import pkg.high\n")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = pkg\n\n[importlinter:contract:one]\nname = one way\ntype = layers\n"
        "layers =\n    pkg.high\n    pkg.low\n")
    r = _lint(tmp_path, "--no-cache", "--config", str(tmp_path / ".importlinter"))
    assert r.returncode != 0 and "BROKEN" in r.stdout and "pkg.low -> pkg.high" in r.stdout, r.stdout + r.stderr
