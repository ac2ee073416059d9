"""A local Ray (``--backend ray``) listens on the loopback interface only, and none of its processes
outlives the league that started it, even on ``kill -9`` (`arena.procs.start_local_ray`,
`arena.procs.SessionReaper`).

Each Ray test starts Ray once (about 5-10 s here). Before the fix the GCS, the raylet, the workers and the
agents listened on every interface (``::``, ``0.0.0.0``) or on the machine's external address, and the
raylet's two agents (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) outlived a killed league by
about 60 s.
"""

import importlib.util
import ipaddress
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from league.test_league import ARENA, write_cfg
from league.test_processes import (SLOW, _alive, _cmdline, _descendants, _has_results, _kill_all, _listing, _stat,
                                  _stop, _wait_until_running)

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None or importlib.util.find_spec("psutil") is None,
                               reason="needs ray (and psutil, which it brings)")

#: An owner with a reaper and five children, each sleeping: one started while marked, one (not marked)
#: writing to a file in the watched folder, one reading it, one forked (no exec) after opening a file
#: there for writing, and one unrelated. Prints their pids and the reaper's; "stop" on stdin: `stop`.
#: (Ray's agents are the writer: `setproctitle` blanks their environment, marker included.)
OWNER = textwrap.dedent(r"""
    import os, subprocess, sys, time
    from arena.procs import SessionReaper

    folder = sys.argv[1]
    log = os.path.join(folder, "x.log")
    open(log, "w").close()
    sleep = [sys.executable, "-c", "import sys, time; f = open(*sys.argv[1:]) if sys.argv[1:] else None; "
             "print('ready', flush=True); time.sleep(120)"]
    reaper = SessionReaper.start()
    reaper.watch(folder)
    with reaper.marking():
        marked = subprocess.Popen(sleep, stdout=subprocess.PIPE, start_new_session=True)
    writer = subprocess.Popen(sleep + [log, "a"], stdout=subprocess.PIPE, start_new_session=True)
    reader = subprocess.Popen(sleep + [log], stdout=subprocess.PIPE)
    other = subprocess.Popen(sleep, stdout=subprocess.PIPE)
    for p in (marked, writer, reader, other):
        assert p.stdout.readline() == b"ready\n"
    held = open(log, "a")
    fork = os.fork()
    if fork == 0:
        time.sleep(120)
        os._exit(0)
    print(marked.pid, writer.pid, reader.pid, other.pid, fork, reaper._proc.pid, flush=True)
    if sys.stdin.readline().strip() == "stop":
        reaper.stop()
        print("stopped", flush=True)
    time.sleep(120)
""")


def _owner(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    line = proc.stdout.readline()
    assert line.strip(), proc.stderr.read()
    marked, writer, reader, other, fork, reaper = map(int, line.split())
    procs = {pid: _stat(pid)[2] for pid in (marked, writer, reader, other, fork, reaper)}
    return proc, procs, (marked, writer, reader, other, fork, reaper)


def _gone_within(procs, pids, seconds: float) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if not set(_alive({p: procs[p] for p in pids})):
            return True
        time.sleep(0.05)
    return False


def test_reaper_kills_the_session_when_its_owner_is_killed(tmp_path):
    proc, procs, (marked, writer, reader, other, fork, reaper) = _owner(tmp_path)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _gone_within(procs, [marked, writer, fork, reaper], 10), [_cmdline(p) for p in _alive(procs)]
        assert set(_alive(procs)) == {reader, other}  # reading the folder, or unrelated: not the session's
    finally:
        _stop(proc, procs)


def test_reaper_stop_spares_its_owner_and_what_it_forked(tmp_path):
    proc, procs, (marked, writer, reader, other, fork, reaper) = _owner(tmp_path)
    try:
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "stopped"
        assert _gone_within(procs, [marked, reaper], 1)  # stop() waited for the reaper's sweep
        # the owner's own children that are not marked are its business while it lives, even one
        # writing to the folder (a fork of it holds the same files as it does)
        assert set(_alive(procs)) == {writer, reader, other, fork} and proc.poll() is None
    finally:
        _stop(proc, procs)

#: A driver that starts the Ray backend as the league does (`MatchPool("ray", ...)`), has a Ray worker
#: run one piece of work, says so and waits for its stdin to close.
DRIVER = textwrap.dedent("""
    import os, sys
    from arena.match.pool import MatchPool

    class Pid:
        def run(self):
            return os.getpid()

    pool = MatchPool("ray", 1)
    worker = pool.play([Pid()])[0]
    import ray
    print("worker", worker, ray._private.worker._global_node.get_session_dir_path(), flush=True)
    sys.stdin.read()
    pool.close()
""")


def test_reaper_started_after_its_owner_died_still_reads_what_it_was_told(tmp_path):
    """The owner may be gone before its reaper runs its first line (a loaded machine): the folders it
    was told to watch are still in its stdin, and it sweeps at once."""
    import arena.procs

    log = tmp_path / "x.log"
    writer = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'a'); "
                               "print('ready', flush=True); time.sleep(120)", str(log)],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    procs = {writer.pid: _stat(writer.pid)[2]}
    try:
        assert writer.stdout.readline() == "ready\n"
        reaper = subprocess.run([sys.executable, "-I", "-S", arena.procs.__file__, "--reap", str(gone.pid), "t0"],
                                input=f"dir {tmp_path}\n".encode(), timeout=30)
        assert reaper.returncode == 0
        assert writer.wait(timeout=10) == -signal.SIGKILL
    finally:
        _kill_all(procs)


def _loopback(host: str) -> bool:
    ip = ipaddress.ip_address(host.split("%")[0])
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1 on a dual-stack socket
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def _sockets(pids) -> list[tuple[int, str, str, int]]:
    """(pid, command, address, port) of every listening TCP socket and bound UDP socket of `pids`."""
    import psutil

    out = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            conns = proc.net_connections(kind="inet")
        except psutil.Error:  # gone meanwhile
            continue
        for c in conns:
            if c.status == psutil.CONN_LISTEN or (c.type == 2 and c.laddr and not c.raddr):  # 2: SOCK_DGRAM
                out.append((pid, _cmdline(pid)[:60], c.laddr.ip, c.laddr.port))
    return out


@needs_ray
def test_local_ray_listens_on_loopback_only(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    procs: dict[int, int] = {}
    try:
        line = proc.stdout.readline()
        assert line.startswith("worker "), f"the Ray backend did not start: {line!r} {proc.stderr.read()[-3000:]}"
        worker, session = int(line.split()[1]), Path(line.split()[2])
        # Ray makes its folders 0777; one folder on the way to them lets nobody else in
        private = [p for p in [session, *session.parents] if p.stat().st_mode & 0o077 == 0]
        assert private and private[0] != Path(tempfile.gettempdir()), [oct(p.stat().st_mode) for p in session.parents]
        token = Path.home() / ".ray" / "auth_token"  # the cluster's token: the owner's alone
        assert not token.exists() or token.stat().st_mode & 0o077 == 0, oct(token.stat().st_mode)
        procs = _descendants(proc.pid)
        assert worker in procs  # the Ray worker that ran the work is below the driver
        names = " ".join(_cmdline(p) for p in procs)
        for expected in ("gcs_server", "raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent"):
            assert expected in names
        sockets = _sockets([proc.pid, *procs])
        # not vacuous: the GCS, the raylet and the worker listen (gRPC), the driver too
        assert {p for p, *_ in sockets} >= {proc.pid, worker}
        assert len(sockets) >= 6
        exposed = [s for s in sockets if not _loopback(s[2])]
        assert not exposed, "Ray listens beyond the loopback interface: " + "; ".join(
            f"{pid} {cmd.strip()} on {ip}:{port}" for pid, cmd, ip, port in exposed)
        # a clean close leaves nothing running either
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read()[-3000:]
        deadline = time.time() + 10
        while _alive(procs) and time.time() < deadline:
            time.sleep(0.2)
        assert not _alive(procs), [_cmdline(p) for p in _alive(procs)]
    finally:
        _stop(proc, procs)


def _of_session(temp: str) -> dict[int, int]:
    """Processes whose command line or environment names `temp` (the league's TMPDIR: Ray's session
    folder is below it): pid -> start time. Catches what started after a snapshot of the tree."""
    out = {}
    needle = temp.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes() + Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if needle in raw and (st := _stat(pid)) is not None:
            out[pid] = st[2]
    return out


@needs_ray
def test_kill_9_of_a_ray_league_leaves_no_ray_process(tmp_path):
    """`arena league run --backend ray` killed with SIGKILL while matches are played: every process of its
    Ray session (the GCS, the raylet, the agents, the workers, ...) is gone well before the 60 s the
    agents took by themselves."""
    c = write_cfg(tmp_path / "c.yaml", matches=1000, workers=2, in_flight=4,
                  games=[{"id": "openspiel/tic_tac_toe-v0"}],
                  players=[{"name": "slow", "agent": SLOW}, {"name": "random", "agent": "random"}])
    d = tmp_path / "L"
    temp = tempfile.mkdtemp(prefix="ar-")  # short: Ray's socket paths are below it
    env = dict(os.environ, TMPDIR=temp)  # the league's Ray session folder goes there
    proc = subprocess.Popen([ARENA, "league", "run", str(c), "--dir", str(d), "--backend", "ray"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def playing_on_ray(procs: dict[int, int]) -> bool:
        names = " ".join(_cmdline(p) for p in procs)
        return "ray::DashboardAgent" in names and "ray::RuntimeEnvAgent" in names and _has_results(d)

    procs: dict[int, int] = {}
    try:
        procs = _wait_until_running(proc, playing_on_ray, "the league on Ray", timeout=180, poll=0.5)
        procs = {**_descendants(proc.pid), **_of_session(temp)}
        procs.pop(proc.pid, None)
        assert any("raylet" in _cmdline(p) for p in procs)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        killed = time.time()
        left: dict[int, str] = {}
        while time.time() - killed < 20:
            procs.update(_of_session(temp))  # anything of the session that started meanwhile
            left = _alive(procs)
            if not left:
                break
            time.sleep(0.2)
        assert not left, f"still running {time.time() - killed:.0f} s after kill -9 of the league: " + _listing(left)
    finally:
        _stop(proc, procs)
        shutil.rmtree(temp, ignore_errors=True)
