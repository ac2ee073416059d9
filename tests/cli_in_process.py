"""`arena ARGS` in the test's own process, as the console script runs it: no interpreter start, the
same exit code and output as a process of its own (for the many one-line-error checks)."""

import subprocess
import sys
from pathlib import Path

import pytest


def arena_here(monkeypatch, capsys, *args, cwd: Path) -> subprocess.CompletedProcess:
    """(exit code, stdout, stderr) of ``arena ARGS`` run in `cwd`, as a CompletedProcess."""
    from arena.cli import main

    capsys.readouterr()
    with monkeypatch.context() as m:
        m.setattr(sys, "argv", ["arena", *map(str, args)])
        m.chdir(cwd)
        with pytest.raises(SystemExit) as e:
            main()
    out = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), e.value.code, out.out, out.err)
