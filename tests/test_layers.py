"""Dependencies point one way (cli > demo > ui > trainers > league > match > replays > agents >
inference > envs): the import-linter contract in pyproject.toml, run on the package. And SQL is
issued only in the league and the replay archive: a scan of the source."""

import ast
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


# -- SQL lives in the league (and the replay archive's one table) ----------------------------------------
#: Where SQL may be issued: the league's store and queries, and the replay archive (the table of
#: replays a league database keeps, which `arena.replays` reads without a league).
SQL_HOMES = ("arena/league/", "arena/replays/archive.py")
_SQL_CALLS = frozenset({"execute", "executemany", "executescript"})
#: What of sqlite3 a module may name outside the SQL homes: its errors (to say what went wrong).
_SQLITE_ERRORS = frozenset({"Error", "DatabaseError", "OperationalError", "IntegrityError", "InterfaceError",
                            "DataError", "InternalError", "ProgrammingError", "NotSupportedError", "Warning"})


def sql_sites(source: str, name: str = "<source>") -> list[str]:
    """``name:line: what`` for each place `source` issues SQL: a call of ``.execute`` / ``.executemany`` /
    ``.executescript``, or anything of ``sqlite3`` other than its error classes (``sqlite3.connect``,
    ``from sqlite3 import connect``, a ``Connection``)."""
    tree = ast.parse(source, name)
    aliases = {"sqlite3"}  # names the module is bound to (import sqlite3 as db)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name == "sqlite3" and a.asname}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SQL_CALLS:
            found.append((node.lineno, f".{node.func.attr}("))
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
              and node.attr not in _SQLITE_ERRORS):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlite3":
            found += [(node.lineno, f"from sqlite3 import {a.name}") for a in node.names if a.name not in _SQLITE_ERRORS]
    return [f"{name}:{line}: {what}" for line, what in sorted(found)]


def test_no_sql_outside_the_league():
    offending = []
    for path in sorted((ROOT / "arena").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(SQL_HOMES):
            offending += sql_sites(path.read_text(encoding="utf-8"), rel)
    assert not offending, ("SQL outside arena/league/ and the replay archive: give the league a query (its store or "
                           "arena/league/queries.py) and call it\n" + "\n".join(offending))


def test_the_sql_check_finds_sql(tmp_path):
    bad = tmp_path / "view.py"
    bad.write_text("import sqlite3 as db\nfrom sqlite3 import connect, Error\n\n\ndef rows(store):\n"
                   "    return store.conn.execute('SELECT * FROM results').fetchall()\n\n\n"
                   "def wipe(c):\n    c.executescript('DELETE FROM results')\n    db.connect(':memory:')\n")
    assert sql_sites(bad.read_text(), "view.py") == [
        "view.py:2: from sqlite3 import connect", "view.py:6: .execute(", "view.py:10: .executescript(",
        "view.py:11: db.connect"]
    ok = "import sqlite3\n\ntry:\n    pass\nexcept sqlite3.DatabaseError as e:\n    raise SystemExit(str(e))\n"
    assert sql_sites(ok) == []
