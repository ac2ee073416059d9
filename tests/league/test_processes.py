"""Worker processes die with the command that started them, even on kill -9.

`arena league run` starts a forkserver, multiprocessing's resource tracker and pool workers (the
forkserver's children); `arena play --workers N` forks pool workers. Each test starts the command
in its own session, waits until its workers are playing, notes every process descended from it
(before the kill: they are re-parented after), kills the command with SIGKILL and asserts that
none of them is left 5 s later.
"""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from league.test_league import ARENA, write_cfg

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")

SLOW = "plugins.agents:Slow:delay=0.05"


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of `pid`, None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return fields[0], int(fields[1]), int(fields[19])


def _descendants(root: int) -> dict[int, int]:
    """pid -> start time of every process below `root` (start times tell a reused pid apart)."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _stat(int(name))) is not None:
            table[int(name)] = st
    found, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (_, ppid, start) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = start
                frontier.append(pid)
    return found


def _alive(procs: dict[int, int]) -> dict[int, str]:
    out = {}
    for pid, start in procs.items():
        st = _stat(pid)
        if st is not None and st[2] == start and st[0] not in "ZX":  # a zombie has exited
            out[pid] = st[0]
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return "?"


def _wait_until_running(proc: subprocess.Popen, ready, what: str, timeout: float = 120,
                        poll: float = 0.3) -> dict[int, int]:
    """Poll `proc`'s descendants until ``ready(them)``; fails if `proc` ends first or `timeout` passes."""
    procs: dict[int, int] = {}
    deadline = time.time() + timeout
    while time.time() < deadline:
        time.sleep(poll)
        assert proc.poll() is None, f"{what} ended early: {proc.stderr.read()[-3000:]}"
        procs = _descendants(proc.pid)
        if ready(procs):
            return procs
    pytest.fail(f"{what} never had its workers running: {[_cmdline(p) for p in procs]}")


def _kill_9_and_check(proc: subprocess.Popen, ready, what: str) -> None:
    procs: dict[int, int] = {}
    try:
        _wait_until_running(proc, ready, what)
        procs = _descendants(proc.pid)  # all of them, just before the kill
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.time() + 5
        while _alive(procs) and time.time() < deadline:
            time.sleep(0.1)
        left = _alive(procs)
        assert not left, f"still running 5 s after kill -9 of {what}: " + _listing(left)
    finally:
        _stop(proc, procs)


def _listing(left: dict[int, str]) -> str:
    """The processes still alive, each with its state and command line (an assertion's message)."""
    return "; ".join(f"{pid} ({state}) {_cmdline(pid)}" for pid, state in left.items())


def _stop(proc: subprocess.Popen, procs: dict[int, int]) -> None:
    """After a test: `proc` killed if it still runs, and what it started."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    _kill_all(procs)


def _kill_all(procs: dict[int, int]) -> None:
    for pid in _alive(procs):  # only what this test started (pid and start time checked)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _has_results(league: Path) -> bool:
    """Whether the league in folder `league` has recorded a result yet (its database may not exist yet)."""
    if not (league / "league.db").exists():
        return False
    try:
        with sqlite3.connect(league / "league.db", timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] > 0
    except sqlite3.Error:
        return False


def _workers_of_forkserver(procs: dict[int, int]) -> int:
    """How many processes in `procs` are children of another process in `procs` (the forkserver's)."""
    return sum(1 for pid in procs if (st := _stat(pid)) is not None and st[1] in procs)


def test_kill_9_of_a_league_leaves_no_process(tmp_path):
    c = write_cfg(tmp_path / "c.yaml", matches=1000, workers=2, in_flight=4,
                  games=[{"id": "openspiel/tic_tac_toe-v0"}],
                  players=[{"name": "slow", "agent": SLOW}, {"name": "random", "agent": "random"}])
    d = tmp_path / "L"
    proc = subprocess.Popen([ARENA, "league", "run", str(c), "--dir", str(d)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)

    def ready(procs):
        # the forkserver's two workers are up and matches are being played (one is recorded)
        return _workers_of_forkserver(procs) >= 2 and _has_results(d)

    _kill_9_and_check(proc, ready, "arena league run")


def test_kill_9_of_batch_play_leaves_no_process(tmp_path):
    proc = subprocess.Popen([ARENA, "play", "openspiel/tic_tac_toe-v0", "-p", SLOW, "-p", "random",
                             "--workers", "2", "-n", "200", "--replays", str(tmp_path / "r")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def ready(procs):
        r = tmp_path / "r"
        return len(procs) >= 2 and r.is_dir() and any(r.iterdir())

    _kill_9_and_check(proc, ready, "arena play --workers 2")


def test_worker_exits_when_its_owner_is_gone(tmp_path):
    """`die_with(pid)` in a process that is not `pid`'s child (as a forkserver worker is not the
    league's): it exits soon after `pid` does, by its watcher thread."""
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    code = (f"import time; from arena.procs import die_with; die_with({owner.pid}, poll=0.1); "
            "print('ready', flush=True); time.sleep(60)")
    worker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "ready"
        assert worker.poll() is None
        owner.kill()
        owner.wait()
        from arena.procs import ORPHAN_EXIT

        assert worker.wait(timeout=5) == ORPHAN_EXIT
    finally:
        for p in (owner, worker):
            if p.poll() is None:
                p.kill()
                p.wait()
