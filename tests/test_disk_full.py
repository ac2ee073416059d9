"""A full disk is one line that names the folder, and nothing is lost: the same call, once there is
space, carries on from what was committed.

Each writer is tested with a faked "no space" (ENOSPC from the file's write, SQLite's own
SQLITE_FULL through ``PRAGMA max_page_count``), then with the fault gone; where the machine lets
us mount a 1.5 MB tmpfs, a real league runs into it through the CLI.
"""

import errno
import io
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena import fsio
from arena.errors import ArenaError, DiskFull
from arena.league.config import load_league_config
from arena.league.manager import League, open_league
from arena.replays import read_replay
from league.test_league import ARENA, BASE, assert_consistent, write_cfg


class _FillingFile(io.FileIO):
    """A real file that takes `room` bytes, then fails as a full disk does (after a partial write)."""

    def __init__(self, path, mode, room):
        super().__init__(path, mode.replace("b", ""))
        self.room = room

    def write(self, data):
        if len(data) > self.room:
            n = super().write(bytes(data)[: self.room])
            self.room = 0
            if n:
                return n  # the short write; the next one fails
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return super().write(data)


def _full_open(room: int = 10):
    def fake_open(path, mode="r", *args, **kwargs):
        if "w" in mode:
            return io.BufferedWriter(_FillingFile(path, mode, room))  # buffered, as open() is
        return open(path, mode, *args, **kwargs)

    return fake_open


def _tmp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if ".tmp" in p.name)


# -- the error itself ---------------------------------------------------------------------------
def test_disk_full_is_one_line_that_names_the_folder_and_pickles():
    e = DiskFull("/runs/L/replays", "writing m00000003.jsonl.gz", "No space left on device")
    msg = str(e)
    assert isinstance(e, ArenaError) and "\n" not in msg
    assert "/runs/L/replays" in msg and "Nothing was lost" in msg and "run the same command again" in msg
    back = pickle.loads(pickle.dumps(e))  # crosses from pool workers to the league
    assert type(back) is DiskFull and str(back) == msg and back.folder == "/runs/L/replays"


def test_is_disk_full_recognises_the_ways_a_full_disk_shows():
    import sqlite3

    assert fsio.is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert fsio.is_disk_full(sqlite3.OperationalError("database or disk is full"))
    try:  # torch.save into a Python file: RuntimeError with the ENOSPC as its context
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
    except RuntimeError as wrapped:
        assert fsio.is_disk_full(wrapped)
    assert not fsio.is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not fsio.is_disk_full(sqlite3.OperationalError("no such table: x"))
    assert not fsio.is_disk_full(ValueError("disk is full"))


# -- atomic writes and replays ------------------------------------------------------------------
def test_atomic_write_on_a_full_disk_leaves_no_file_then_succeeds(tmp_path, monkeypatch):
    target = tmp_path / "out" / "data.bin"
    target.parent.mkdir()
    target.write_bytes(b"old")
    monkeypatch.setattr(fsio, "open", _full_open(room=10), raising=False)
    with pytest.raises(DiskFull) as e:
        fsio.atomic_write_bytes(target, b"x" * 1000)
    assert str(target.parent) in str(e.value) and "data.bin" in str(e.value)
    assert target.read_bytes() == b"old" and _tmp_files(tmp_path) == []  # no partial temp file
    monkeypatch.undo()  # space freed
    fsio.atomic_write_bytes(target, b"x" * 1000)
    assert target.read_bytes() == b"x" * 1000 and _tmp_files(tmp_path) == []


def test_replay_write_on_a_full_disk(tmp_path, monkeypatch):
    from arena.match.runner import MatchJob, run_match_job

    job = MatchJob(match_id="m1", game="openspiel/tic_tac_toe-v0", specs=("random", "first"), seed=3,
                   replay_dir=str(tmp_path / "replays"))
    monkeypatch.setattr(fsio, "open", _full_open(room=100), raising=False)
    with pytest.raises(DiskFull) as e:
        run_match_job(job)
    assert str(tmp_path / "replays") in str(e.value)
    assert list((tmp_path / "replays").iterdir()) == []
    monkeypatch.undo()
    res = run_match_job(job)
    assert read_replay(res.replay_path).result["returns"] == res.returns
    assert [p.name for p in (tmp_path / "replays").iterdir()] == ["m1.jsonl.gz"]


# -- the league ---------------------------------------------------------------------------------
def test_league_store_commit_on_a_full_disk_counts_every_result_once(tmp_path):
    cfg = load_league_config(write_cfg(tmp_path / "c.yaml", matches=60))
    d = tmp_path / "L"
    league = League(cfg, d, backend="inline")
    league.run(matches=10)
    conn = league.store.conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    # SQLite's own SQLITE_FULL: the database may not grow past its size now
    conn.execute(f"PRAGMA max_page_count={pages}")
    with pytest.raises(DiskFull) as e:  # raised as itself, not wrapped
        league.run(matches=60)
    assert str(d) in str(e.value) and "league.db" in str(e.value)
    store = open_league(d)
    done = store.result_count()
    assert 10 <= done < 60
    # the failed transaction left nothing half-written: what is committed is consistent
    for game in store.rated_games():
        elo, _ = store.recompute(game)
        assert elo.ratings() == store.elo(game)
    conn.execute("PRAGMA max_page_count=1073741823")  # space freed (and a fresh process would not have the cap)
    summary = League(cfg, d, backend="inline").run(matches=60)
    assert summary["results"] == 60
    assert_consistent(d, 60)


class FullDisk:
    """An agent for league workers that fills their disk: while `marker` exists, every atomic write in
    the worker process fails with ENOSPC (a pool worker cannot be monkeypatched from the test)."""

    def __init__(self, marker: str):
        def open_maybe_full(path, mode="r", *args, **kwargs):
            if "w" in mode and os.path.exists(marker):
                return io.BufferedWriter(_FillingFile(path, mode, 0))
            return open(path, mode, *args, **kwargs)

        fsio.open = open_maybe_full

    def act(self, obs):
        return obs.legal_actions[0]


def test_league_replay_write_on_a_full_disk_in_a_pool_worker(tmp_path):
    marker = tmp_path / "full"
    # replays as files: a worker writes them (kept in the database, they are part of the league's
    # transaction: SQLite's own full disk, the test above)
    c = write_cfg(tmp_path / "c.yaml", matches=20, games=[{"id": "openspiel/tic_tac_toe-v0"}], replays="files",
                  players=[{"name": "random", "agent": "random"},
                           {"name": "full", "agent": f"test_disk_full:FullDisk:marker='{marker}'"}])
    d = tmp_path / "L"
    cfg = load_league_config(c)
    try:
        League(cfg, d, backend="local").run(matches=6)
        marker.write_text("")
        deadline = time.time() + 120  # re-queueing every failed write would go on for ever
        with pytest.raises(DiskFull) as e:  # the worker's DiskFull, not a re-queued failure
            League(cfg, d, backend="local").run(matches=20, stop=lambda: time.time() > deadline)
        assert str(d / "replays") in str(e.value)
        store = open_league(d)
        assert store.result_count() == 6 and not store.matches(status="failed")
        # The league does not wait for the matches its other workers are still playing (a Ctrl-C must
        # stop at once); such a worker's failing write removes its temporary file a moment later.
        settle = time.time() + 15
        while _tmp_files(d) and time.time() < settle:
            time.sleep(0.1)
        assert _tmp_files(d) == []
    finally:
        # The agent also patched this process when the league checked its spec: a failure above must
        # not leave every later write of this test process on a "full disk".
        marker.unlink(missing_ok=True)
        fsio.__dict__.pop("open", None)
    League(cfg, d, backend="local").run(matches=20)
    assert_consistent(d, 20)
    assert max(m.attempts for m in open_league(d).matches()) <= 2


# -- checkpoints --------------------------------------------------------------------------------
def test_checkpoint_save_on_a_full_disk(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from arena.trainers.common import checkpoints

    ckpt = tmp_path / "checkpoints" / "iter-00001"
    ckpt.mkdir(parents=True)
    path = ckpt / "trainer_state.pt"
    checkpoints.save_torch_atomic({"w": torch.zeros(3)}, path)
    import arena.fsio

    monkeypatch.setattr(arena.fsio, "open", _full_open(room=200), raising=False)  # the atomic writer's open
    with pytest.raises(DiskFull) as e:
        checkpoints.save_torch_atomic({"w": torch.ones(10_000)}, path)
    assert str(ckpt) in str(e.value) and "trainer_state.pt" in str(e.value)
    assert torch.equal(torch.load(path)["w"], torch.zeros(3))  # the old state is intact
    assert _tmp_files(tmp_path) == []
    monkeypatch.undo()
    checkpoints.save_torch_atomic({"w": torch.ones(10_000)}, path)
    assert torch.equal(torch.load(path)["w"], torch.ones(10_000)) and _tmp_files(tmp_path) == []


def test_checkpoint_link_on_a_full_disk(tmp_path, monkeypatch):
    from arena.trainers.common import checkpoints

    (tmp_path / "checkpoints" / "iter-00001").mkdir(parents=True)
    (tmp_path / "checkpoints" / "iter-00002").mkdir(parents=True)
    checkpoints.link(tmp_path, "latest", checkpoints.checkpoint_path(1))

    def no_room(self, target, target_is_directory=False):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "symlink_to", no_room)
    with pytest.raises(DiskFull) as e:
        checkpoints.link(tmp_path, "latest", checkpoints.checkpoint_path(2))
    assert str(tmp_path) in str(e.value) and "latest" in str(e.value)
    assert os.readlink(tmp_path / "latest") == str(checkpoints.checkpoint_path(1))
    assert not (tmp_path / ".latest.tmp").is_symlink()
    monkeypatch.undo()
    checkpoints.link(tmp_path, "latest", checkpoints.checkpoint_path(2))
    assert os.readlink(tmp_path / "latest") == str(checkpoints.checkpoint_path(2))


# -- a real full disk ---------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 1.5 MB tmpfs at tmp_path/disk (root and a kernel that allows the mount; else skip)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root on Linux")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1500k", "tmpfs", str(disk)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_league_on_a_real_full_disk_is_one_line_then_resumes(tmp_path, small_disk):
    c = write_cfg(tmp_path / "c.yaml", matches=100_000, workers=2, games=[{"id": "openspiel/tic_tac_toe-v0"}],
                  players=BASE["players"][:2] + [{"name": "random2", "agent": "random"}])
    d = small_disk / "L"
    p = subprocess.run([ARENA, "league", "run", str(c), "--dir", str(d)], capture_output=True, text=True,
                       timeout=300)
    err = p.stderr.strip()
    assert p.returncode == 2, p.stdout[-2000:] + err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: the disk holding {d}") and "run the same command again" in err, err
    done = open_league(d).result_count()
    assert 0 < done < 100_000
    assert _tmp_files(d) == []
    # space is freed: the same command (with a budget it can reach) resumes and loses nothing
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
    target = done + 20
    p = subprocess.run([ARENA, "league", "run", str(c), "--dir", str(d), "--matches", str(target)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert_consistent(d, target)


def test_checkpoint_on_a_real_full_disk(small_disk):
    torch = pytest.importorskip("torch")
    from arena.trainers.common.checkpoints import save_torch_atomic

    with pytest.raises(DiskFull) as e:
        save_torch_atomic({"w": torch.zeros(1_000_000)}, small_disk / "state.pt")  # 4 MB into 1.5 MB
    assert str(small_disk) in str(e.value)
    assert os.listdir(small_disk) == []
    save_torch_atomic({"w": torch.zeros(1000)}, small_disk / "state.pt")
    assert torch.load(small_disk / "state.pt")["w"].shape == (1000,)


def test_training_checkpoint_on_a_full_disk_is_one_error_and_latest_stays(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    import errno

    import yaml

    from arena.errors import DiskFull
    from arena.trainers.llm.learner import LLMLearner
    from arena.trainers.llm.spiral import SpiralTrainer
    from arena.trainers.registry import load_train_config

    root = Path(__file__).resolve().parents[1]
    cfg = yaml.safe_load((root / "configs" / "train" / "spiral_tictactoe_tiny.yaml").read_text())
    cfg.update(iterations=1, games_per_iter=4, concurrency=4, il=None, threads=1)
    cfg["eval"] = {"every": 1, "games": 4, "opponents": ["random"], "concurrency": 4}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    t = SpiralTrainer(load_train_config(tmp_path / "c.yaml"), tmp_path / "run")
    try:
        t.checkpoint(0)

        def full(self, folder):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(LLMLearner, "save_weights", full)
        with pytest.raises(DiskFull) as info:
            t.checkpoint(1)
        assert str(tmp_path / "run") in str(info.value) and "iter-00001" in str(info.value)
        assert "\n" not in str(info.value)
        assert (tmp_path / "run" / "latest").resolve().name == "iter-00000"
    finally:
        t.close()


def test_sweep_orphans_removes_only_dead_writers_temporary_files(tmp_path):
    from arena.fsio import sweep_orphans

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    names = {f".a.jsonl.gz.tmp-{dead.pid}-abc123": False,  # its writer is gone: removed
             f".b.jsonl.gz.tmp-{os.getpid()}-abc123": True,  # this live process's: kept
             f".c.tmp-{dead.pid}-abc123.mp4": False,  # `atomic_path`'s form
             ".d.tmp-notapid-abc": True, "e.jsonl.gz": True, f"f.tmp-{dead.pid}-x": True}  # not ours
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    assert sweep_orphans(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n for n, kept in names.items() if kept)
    assert sweep_orphans(tmp_path / "missing") == 0
