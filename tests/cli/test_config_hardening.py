"""Bad inputs to the league commands are one line that names the file or flag and the fix (exit 2, no
traceback): YAML bombs, huge and non-UTF-8 configs, bad settings, damaged league databases, folders
that are files; and one writer per league folder, whoever runs it, with kills that are not failed
attempts."""

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cli_in_process import arena_here

from arena.league.config import load_league_config
from arena.league.lock import LOCK_FILE
from arena.league.manager import League, open_league

ROOT = Path(__file__).resolve().parents[2]
TTT = "openspiel/tic_tac_toe-v0"


def arena(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300):
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=cwd or ROOT, capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, COLUMNS="200", **(env or {})))


def one_line(r: subprocess.CompletedProcess) -> str:
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 2, out
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert out.startswith("error: "), out
    return out[len("error: "):]


def league_yaml(path: Path, extra: str = "", players: str = "[{name: random, agent: random}, {name: first, "
                                                             "agent: first}]") -> Path:
    path.write_text(f"name: h\ngames: [{{id: {TTT}}}]\nplayers: {players}\nmatches: 4\nworkers: 1\n{extra}")
    return path


def bomb() -> str:
    lines = ["name: bomb", "games:", f"  - id: {TTT}", "    kwargs:", "      l0: &l0 [" + ",".join(["lol"] * 9) + "]"]
    lines += [f"      l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join(lines + ["players: [{name: a, agent: random}, {name: b, agent: first}]"]) + "\n"


# -- configs and flags ---------------------------------------------------------------------------
def test_a_yaml_bomb_is_one_line(tmp_path):
    cfg = tmp_path / "bomb.yaml"
    cfg.write_text(bomb())
    assert one_line(arena("league", "run", cfg, "--dir", tmp_path / "l")) == (
        f"{cfg}: expands to more than 100,000 values through its aliases (*name): write the values out")
    assert not (tmp_path / "l").exists()
    train = tmp_path / "train.yaml"
    train.write_text("trainer: spiral\n" + bomb().split("\n", 1)[1])
    assert one_line(arena("train", train, "--dir", tmp_path / "t")) == (
        f"{train}: expands to more than 100,000 values through its aliases (*name): write the values out")


@pytest.mark.parametrize("style", ["flow", "block"])
def test_a_config_nested_500_deep_is_one_line(tmp_path, style):
    cfg = tmp_path / "deep.yaml"
    if style == "flow":
        cfg.write_text("name: d\nplayers: " + "[" * 500 + "]" * 500 + "\n")
    else:
        cfg.write_text("name: d\n" + "".join("  " * i + f"k{i}:\n" for i in range(500)) + "  " * 500 + "v: 1\n")
    line = 2 if style == "flow" else 65
    for args in (["league", "run", cfg, "--dir", tmp_path / "l"], ["train", cfg, "--dir", tmp_path / "t"]):
        assert one_line(arena(*args)) == (f"{cfg}: line {line}: lists and mappings nested more than 64 deep: "
                                          "a config is a few levels deep")
    assert not (tmp_path / "l").exists() and not (tmp_path / "t").exists()


def test_a_5000_digit_value_is_one_short_line():
    digits = "9" * 5000
    for args in (["play", TTT, "-p", "random", "-p", "random", "-k", f"rows={digits}"],
                 ["play", TTT, "-p", f"mcts:simulations={digits}", "-p", "random"],
                 ["play", TTT, "-p", "random", "-p", "random", "-k", f"rows={digits[:4000]}"]):
        message = one_line(arena(*args))
        assert len(message) < 600 and "9" * 41 not in message, message


def test_a_huge_or_non_utf8_config_is_one_line(tmp_path):
    big = league_yaml(tmp_path / "big.yaml", "# " + "x" * (10 << 20) + "\n")
    assert one_line(arena("league", "run", big, "--dir", tmp_path / "l")) == (
        f"{big}: larger than 1 MiB, the most a config may be: is it the right file?")
    latin = tmp_path / "latin1.yaml"
    latin.write_bytes(league_yaml(tmp_path / "x.yaml", "# caf\xe9\n").read_text().encode("latin-1"))
    offset = latin.read_bytes().index(b"\xe9")
    assert one_line(arena("league", "run", latin, "--dir", tmp_path / "l")) == (
        f"{latin}: not UTF-8 text (byte 0xe9 at offset {offset}): save the file as UTF-8")
    assert one_line(arena("train", latin, "--dir", tmp_path / "t")) == (
        f"{latin}: not UTF-8 text (byte 0xe9 at offset {offset}): save the file as UTF-8")
    assert not (tmp_path / "l").exists()


@pytest.mark.parametrize("extra,players,message", [
    ("elo_k: .nan\n", None, "LeagueConfig: elo_k: the Elo K-factor must be a finite number > 0 (32 is usual), got nan"),
    ("payoff_decay: 2\n", None, "LeagueConfig: payoff_decay: must be in (0, 1] (1 keeps every game at full weight; "
                                "0.99 remembers about the last 100 games of a pair), got 2.0"),
    ("seed: -3\n", None, "LeagueConfig: seed: must be >= 0, got -3"),
    ("move_time_limit: -1\n", None, "LeagueConfig: move_time_limit: seconds per move must be a finite number > 0 "
                                    "(or null for no limit), got -1.0"),
    ("", "[{name: a, agent: random}, {name: m, agent: 'mcts:simulations=-5'}]",
     "LeagueConfig: player 'm': agent spec 'mcts:simulations=-5': bad option value: simulations must be an "
     "integer >= 1, got -5"),
])
def test_a_bad_setting_is_one_line_and_creates_no_league(tmp_path, extra, players, message):
    cfg = league_yaml(tmp_path / "bad.yaml", extra, **({"players": players} if players else {}))
    assert one_line(arena("league", "run", cfg, "--dir", tmp_path / "l")) == f"{cfg}: {message}"
    assert not (tmp_path / "l").exists()


def test_bad_flags_are_one_line(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    cfg = league_yaml(tmp_path / "ok.yaml")
    assert one_line(arena("league", "run", cfg, "--dir", f)) == (
        f"--dir {f} is a file, not a folder: give a folder (it is created if missing)")
    assert one_line(arena("league", "run", cfg, "--dir", f / "sub")) == (
        f"--dir {f / 'sub'}: cannot create this folder (Not a directory): give a folder you can write to")
    assert one_line(arena("league", "run", cfg, "--dir", tmp_path / "l", "--matches", "-1")) == (
        "--matches -1: the total of results to reach must be >= 0")
    play = ["play", TTT, "-p", "random", "-p", "random"]
    assert one_line(arena(*play, "--replays", f)) == (
        f"--replays {f} is a file, not a folder: give a folder (it is created if missing)")
    for bad, shown in (("0", "0"), ("-2", "-2"), ("nan", "nan")):
        assert one_line(arena(*play, "--time-limit", bad)) == (
            f"--time-limit {shown}: seconds per move must be a number > 0 (leave it out for no limit)")
    assert one_line(arena("play", TTT, "-p", "mcts:simulations=-5", "-p", "random")) == (
        "agent spec 'mcts:simulations=-5': bad option value: simulations must be an integer >= 1, got -5")


# -- damaged league databases --------------------------------------------------------------------
@pytest.fixture(scope="module")
def league_db(tmp_path_factory) -> bytes:
    d = tmp_path_factory.mktemp("db") / "league"
    cfg = league_yaml(d.parent / "c.yaml", "matches: 30\n")
    league = League(load_league_config(cfg), d, backend="inline")
    league.run()
    league.store.close()  # the last connection: its WAL is checkpointed into league.db
    data = (d / "league.db").read_bytes()
    assert not (d / "league.db-wal").exists() or (d / "league.db-wal").stat().st_size == 0
    return data


def damaged(data: bytes, how: str) -> bytes:
    if how == "garbage":
        return b"this is not a database\n" * 100
    if how == "zeroed pages":
        return data[:8192] + b"\0" * (len(data) - 8192)
    if how == "random bytes":
        return random.Random(0).randbytes(len(data))
    if how == "flipped bytes":  # the pages stay, values inside them change (text that is no longer UTF-8)
        flipped, rng = bytearray(data), random.Random(1)
        for _ in range(400):
            flipped[rng.randrange(4096, len(data))] ^= 0xFF
        return bytes(flipped)
    return data[:int(len(data) * float(how)) // 4096 * 4096]  # truncated, at a page boundary


@pytest.mark.parametrize("how", ["garbage", "random bytes", "0.5", "0.9", "zeroed pages", "flipped bytes"])
def test_a_damaged_league_db_is_one_line_for_every_command(tmp_path, monkeypatch, capsys, league_db, how):
    d = tmp_path / "league"
    d.mkdir()
    db = d / "league.db"
    cfg = league_yaml(tmp_path / "c.yaml")
    readers = (["league", "status", d], ["ratings", d], ["replay", "list", d], ["replay", "verify", d])
    writers = (["league", "report", d], ["league", "run", cfg, "--dir", d], ["serve", d, "--port", "0"])
    for args in readers + (writers if how != "flipped bytes" else ()):
        db.write_bytes(damaged(league_db, how))
        # the readers and the report in this process; the league run and the server as the processes they are
        here = args[0] != "serve" and args[:2] != ["league", "run"]
        message = one_line(arena_here(monkeypatch, capsys, *args, cwd=ROOT) if here else arena(*args, timeout=120))
        assert message.startswith(f"{db}: SQLite cannot read this league database ("), (args, message)
        assert message.endswith("): it is damaged or not a league database; restore it from a backup (with its "
                                "league.db-wal file, if any), or start a new league in another --dir"), message


# -- one writer, kills that are not failed attempts ---------------------------------------------------
HOLD_AGENT = textwrap.dedent("""\
    import os
    import time

    from arena.agents.basic import FirstLegalAgent


    class Hold(FirstLegalAgent):
        \"\"\"Plays the first legal move once the file $ARENA_TEST_GO exists: a league that is surely running.\"\"\"

        def act(self, observation):
            for _ in range(12000):
                if os.path.exists(os.environ["ARENA_TEST_GO"]):
                    break
                time.sleep(0.01)
            return super().act(observation)
""")


@pytest.fixture
def held_league(tmp_path):
    """A league config whose every match waits for the file `go`, run from `tmp_path` (its agent module)."""
    (tmp_path / "hold_agent.py").write_text(HOLD_AGENT)
    cfg = league_yaml(tmp_path / "c.yaml", "matches: 6\nin_flight: 2\nmove_time_limit: null\n",
                      players="[{name: hold, agent: 'hold_agent:Hold'}, {name: first, agent: first}]")
    return cfg, tmp_path / "league", tmp_path / "go"


def start(cfg: Path, d: Path, go: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "arena.cli", "league", "run", str(cfg), "--dir", str(d)],
                            cwd=cfg.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, COLUMNS="200", ARENA_TEST_GO=str(go)))


def wait_running(p: subprocess.Popen, d: Path) -> None:
    """Until `p` holds the lock and has a match in flight (bounded: a stuck run fails, never hangs)."""
    for _ in range(6000):
        assert p.poll() is None, p.stderr.read()
        lock = d / LOCK_FILE
        if lock.exists() and lock.read_text() == f"{p.pid}\n" and (d / "league.db").exists():
            with sqlite3.connect(f"file:{d / 'league.db'}?mode=ro", uri=True) as c:
                try:
                    if c.execute("SELECT COUNT(*) FROM matches WHERE status='running'").fetchone()[0]:
                        return
                except sqlite3.OperationalError:
                    pass  # the schema is being made
        time.sleep(0.05)
    raise AssertionError("the league never started a match")


def test_a_second_writer_is_refused_naming_the_pid_and_readers_keep_working(held_league):
    cfg, d, go = held_league
    first = start(cfg, d, go)
    try:
        wait_running(first, d)
        env = {"ARENA_TEST_GO": str(go)}
        assert one_line(arena("league", "run", cfg, "--dir", d, cwd=cfg.parent, env=env)) == (
            f"the league at {d} is being run by process {first.pid} (it holds {d / LOCK_FILE}): wait for it to "
            f"finish or stop it, then run again; `arena league status {d}` and `arena serve {d}` read it meanwhile")
        for reader in (["league", "status", d], ["ratings", d]):  # readers take no lock
            r = arena(*reader, cwd=cfg.parent, env=env)
            assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
        go.touch()
        assert first.wait(timeout=300) == 0, first.stderr.read()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    store = open_league(d)
    assert store.result_count() == 6 and store.status_counts() == {"done": 6}


def test_kill_9_releases_the_lock_and_never_spends_an_attempt(held_league):
    cfg, d, go = held_league
    for _ in range(4):  # four kills -9 with matches in flight (max_attempts is 3)
        p = start(cfg, d, go)
        try:
            wait_running(p, d)
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait()
        store = open_league(d)
        assert store.matches(status="failed") == [] and store.result_count() == 0
        store.close()
    go.touch()
    r = arena("league", "run", cfg, "--dir", d, cwd=cfg.parent, env={"ARENA_TEST_GO": str(go)})
    assert r.returncode == 0, r.stdout + r.stderr
    store = open_league(d)
    assert store.result_count() == 6 and store.status_counts() == {"done": 6}
    assert [m.attempts for m in store.matches()] == [1] * 6  # each played once: no kill counted


def test_a_config_naming_code_through_a_game_is_one_line_and_creates_no_league(tmp_path):
    """A league config is data: a game's kwargs are its declared settings, never a constructor key."""
    sentinel = tmp_path / "sentinel.txt"
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("name: bad\ngames:\n  - {id: arena/TicTacToe-v0, kwargs: {env_class: 'plugins.sentinel:Boom'}}\n"
                   "players:\n  - {name: a, agent: random}\n  - {name: b, agent: first}\nmatches: 2\n")
    out = one_line(arena("league", "run", cfg, "--dir", tmp_path / "lg", env={"ARENA_SENTINEL": str(sentinel)}))
    assert out == "arena/TicTacToe-v0 has no setting 'env_class' (its settings: invalid_move_limit, render_mode)"
    assert not (tmp_path / "lg").exists() and not sentinel.exists()
