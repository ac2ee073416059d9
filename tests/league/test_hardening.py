"""League inputs are bounded and a league folder is never poisoned: YAML bombs, huge or non-UTF-8
configs, bad settings, changed settings on an existing league, one writer per folder, kills that are
not a match's failed attempts."""

import math
import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest
import yaml

from arena.config import MAX_CONFIG_BYTES, MAX_YAML_ALIASES, MAX_YAML_NODES, load_yaml_text
from arena.errors import AgentSpecError, ConfigError, LeagueBusy
from arena.league.config import load_league_config
from arena.league.lock import LOCK_FILE, writer_lock
from arena.league.manager import League, open_league
from arena.league.storage import LeagueStore

GOOD = {
    "name": "h",
    "seed": 3,
    "games": [{"id": "openspiel/tic_tac_toe-v0"}],
    "players": [{"name": "random", "agent": "random"}, {"name": "first", "agent": "first"}],
    "matches": 6,
    "workers": 1,
    "in_flight": 2,
}


def write(path: Path, **changes) -> Path:
    data = dict(GOOD, **changes)
    path.write_text(yaml.safe_dump(data))
    return path


def bomb(levels: int = 9, width: int = 9) -> str:
    """The billion laughs in `games[].kwargs`: `levels` anchors, each a list of `width` aliases of the last."""
    lines = ["name: bomb", "games:", "  - id: openspiel/tic_tac_toe-v0", "    kwargs:",
             "      l0: &l0 [" + ",".join(["lol"] * width) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"      l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * width) + "]")
    lines.append("players: [{name: a, agent: random}, {name: b, agent: first}]")
    return "\n".join(lines) + "\n"


def refused_with_peak(path: Path):
    """(the ConfigError loading `path` raised, the most memory Python held meanwhile)."""
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as e:
            load_league_config(path)
        return e, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- 1. bounded reading ----------------------------------------------------------------------
def test_a_yaml_bomb_is_refused_before_it_expands(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb())
    assert len(path.read_bytes()) < 700  # 9**10 values once expanded
    e, peak = refused_with_peak(path)
    assert str(e.value) == (f"{path}: expands to more than {MAX_YAML_NODES:,} values through its aliases (*name): "
                            "write the values out")
    assert peak < 20 * 2**20  # the document's nodes, never its expansion


def test_more_aliases_than_the_limit_are_refused(tmp_path):
    path = tmp_path / "many.yaml"
    path.write_text("name: x\nv: &v 1\nxs: [" + ", ".join(["*v"] * (MAX_YAML_ALIASES + 1)) + "]\n")
    with pytest.raises(ConfigError) as e:
        load_league_config(path)
    assert str(e.value) == f"{path}: more than {MAX_YAML_ALIASES} YAML aliases (*name): write the values out"
    # at the limit, aliases are fine (and then the unknown key is what is wrong)
    assert load_yaml_text("v: &v 1\nxs: [" + ", ".join(["*v"] * MAX_YAML_ALIASES) + "]\n")["xs"] == [1] * 100


def test_a_structure_that_contains_itself_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("name: x\ngames: [{id: openspiel/tic_tac_toe-v0, kwargs: &k {a: [*k]}}]\n")
    with pytest.raises(ConfigError) as e:
        load_league_config(path)
    assert str(e.value) == (f"{path}: an alias (*name) refers to the structure it is inside: a config cannot "
                            "contain itself")


def test_a_10_mb_config_is_refused_reading_at_most_the_cap(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_bytes(yaml.safe_dump(GOOD).encode() + b"# " + b"x" * (10 << 20) + b"\n")
    e, peak = refused_with_peak(path)
    assert str(e.value) == f"{path}: larger than 1 MiB, the most a config may be: is it the right file?"
    assert MAX_CONFIG_BYTES == 1 << 20 and peak < 3 * MAX_CONFIG_BYTES


def test_a_config_that_is_not_utf8_is_one_line_naming_the_byte(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError) as e:
        load_league_config(path)
    assert str(e.value) == f"{path}: not UTF-8 text (byte 0xe9 at offset 9): save the file as UTF-8"


def test_train_configs_are_read_with_the_same_bounds(tmp_path):
    from arena.trainers.registry import read_train_config

    path = tmp_path / "train.yaml"
    path.write_text("trainer: spiral\n" + bomb().split("\n", 1)[1])
    with pytest.raises(ConfigError, match="expands to more than 100,000 values"):
        read_train_config(path)


def test_error_messages_show_a_few_hundred_characters_of_a_value(tmp_path):
    # a megabyte string where a number goes, and 90,000 values (within the alias bounds) where a number goes
    big = "x" * (1 << 19)
    path = write(tmp_path / "long.yaml", elo_k=big)
    with pytest.raises(ConfigError) as e:
        load_league_config(path)
    assert str(e.value) == f"{path}: elo_k: expected a number, got str {big[:200]!r}... (524,288 characters)"
    from arena.config import from_dict
    from arena.league.config import LeagueConfig

    data = load_yaml_text(bomb(levels=3, width=15))  # 15**4 = 50,625 values: within the bounds
    data["games"][0]["weight"] = data["games"][0].pop("kwargs")  # ... where a number goes
    with pytest.raises(ConfigError) as e:
        from_dict(LeagueConfig, data)
    assert str(e.value).startswith("games[0].weight: expected a number, got dict {'l0': ['lol', 'lol'")
    assert len(str(e.value)) < 300


# -- 2. settings validated before a league exists ------------------------------------------------
BAD_SETTINGS = [
    ({"elo_k": float("nan")}, "elo_k: the Elo K-factor must be a finite number > 0 (32 is usual), got nan"),
    ({"elo_k": 0}, "elo_k: the Elo K-factor must be a finite number > 0 (32 is usual), got 0.0"),
    ({"elo_k": float("inf")}, "elo_k: the Elo K-factor must be a finite number > 0 (32 is usual), got inf"),
    ({"payoff_decay": 0}, "payoff_decay: must be in (0, 1] (1 keeps every game at full weight; 0.99 remembers "
                          "about the last 100 games of a pair), got 0.0"),
    ({"payoff_decay": 1.5}, "payoff_decay: must be in (0, 1] (1 keeps every game at full weight; 0.99 remembers "
                            "about the last 100 games of a pair), got 1.5"),
    ({"seed": -1}, "seed: must be >= 0, got -1"),
    ({"move_time_limit": 0}, "move_time_limit: seconds per move must be a finite number > 0 (or null for no "
                             "limit), got 0.0"),
    ({"players": [{"name": "a", "agent": "random"}, {"name": "m", "agent": "mcts:simulations=-5"}]},
     "player 'm': agent spec 'mcts:simulations=-5': bad option value: simulations must be an integer >= 1, got -5"),
    ({"players": [{"name": "a", "agent": "random"}, {"name": "t", "agent": "tactics:epsilon=1.5"}]},
     "player 't': agent spec 'tactics:epsilon=1.5': bad option value: epsilon must be a number in [0, 1], got 1.5"),
    ({"players": [{"name": "a", "agent": "random"}, {"name": "c", "agent": "cfr:iterations=0"}]},
     "player 'c': agent spec 'cfr:iterations=0': bad option value: iterations must be an integer >= 1, got 0"),
    ({"players": [{"name": "n" * 101, "agent": "random"}]},
     "players: name 'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn'... (101 characters) is longer than 100 characters"),
    ({"games": [{"id": "openspiel/tic_tac_toe-v0", "weight": float("nan")}]},
     "games[0]: game 'openspiel/tic_tac_toe-v0': weight must be a finite number > 0, got nan"),
]


@pytest.mark.parametrize("change,message", BAD_SETTINGS, ids=[m.split(":")[0] + str(i) for i, (_, m) in
                                                             enumerate(BAD_SETTINGS)])
def test_bad_settings_are_refused_before_a_league_is_created(tmp_path, change, message):
    path = write(tmp_path / "bad.yaml", **change)
    with pytest.raises(ConfigError) as e:
        load_league_config(path)
    where = "" if message.startswith("games[0]") else "LeagueConfig: "  # where the value sits
    assert str(e.value) == f"{path}: {where}{message}"


def test_agent_options_are_checked_where_specs_are_parsed():
    from arena.agents.specs import check_spec, make_agent

    with pytest.raises(AgentSpecError) as e:
        check_spec("mcts:simulations=-5")
    assert str(e.value) == ("agent spec 'mcts:simulations=-5': bad option value: simulations must be an integer >= 1, "
                            "got -5")
    with pytest.raises(AgentSpecError) as e:
        make_agent("mcts:rollouts=0")
    assert str(e.value) == "agent spec 'mcts:rollouts=0': bad option value: rollouts must be an integer >= 1, got 0"
    with pytest.raises(AgentSpecError) as e:
        check_spec("mcts:uct_c=-1.0")
    assert str(e.value) == "agent spec 'mcts:uct_c=-1.0': bad option value: uct_c must be a number > 0, got -1.0"
    with pytest.raises(AgentSpecError) as e:
        check_spec("first:depth=2")
    assert str(e.value) == "agent spec 'first:depth=2': unknown option 'depth' (first takes seed)"
    for good in ("random", "random:seed=3", "mcts:simulations=10,rollouts=2,uct_c=1.5", "tactics:epsilon=0.1",
                 "cfr:iterations=50", "tabular:/some/table.json", "plugins.sample_agents:Agent"):
        check_spec(good)


def test_the_store_itself_refuses_to_create_a_league_with_bad_ratings_settings(tmp_path):
    with pytest.raises(ConfigError) as e:
        LeagueStore(tmp_path / "l", elo_k=float("nan"))
    assert str(e.value) == "elo_k: the Elo K-factor must be a finite number > 0 (32 is usual), got nan"
    assert not (tmp_path / "l" / "league.db").exists()


# -- 2. changed settings on an existing league ---------------------------------------------------
def run_league(cfg_path: Path, d: Path, **kw) -> dict:
    return League(load_league_config(cfg_path), d, backend="inline").run(**kw)


@pytest.mark.parametrize("setting,old,new", [("elo_k", 32, 16), ("payoff_decay", 0.99, 0.9), ("seed", 3, 4)])
def test_a_changed_rating_setting_is_refused_once_used(tmp_path, setting, old, new):
    d = tmp_path / "league"
    run_league(write(tmp_path / "a.yaml", **{setting: old}), d)
    with pytest.raises(ConfigError) as e:
        League(load_league_config(write(tmp_path / "b.yaml", **{setting: new})), d, backend="inline")
    what = "matches were seeded from seed" if setting == "seed" else f"ratings were computed with {setting}"
    assert str(e.value) == (f"{d}: {setting} is {new:g} in the config, but this league's {what} {old:g}: restore "
                            f"{setting}: {old:g}, or start a new league in another --dir")
    store = open_league(d)
    assert store.result_count() == 6 and store.elo_k == 32.0 and store.payoff_decay == 0.99


def test_a_changed_rating_setting_is_applied_while_nothing_is_rated(tmp_path):
    d = tmp_path / "league"
    League(load_league_config(write(tmp_path / "a.yaml")), d, backend="inline")
    league = League(load_league_config(write(tmp_path / "b.yaml", elo_k=16, payoff_decay=0.5)), d, backend="inline")
    assert (league.store.elo_k, league.store.payoff_decay) == (16.0, 0.5)
    league.run()
    store = open_league(d)
    assert (store.elo_k, store.payoff_decay) == (16.0, 0.5)
    elo, _ = store.recompute()
    assert elo.to_dict()["k"] == 16.0 and store.elo() == pytest.approx(elo.to_dict()["ratings"])


def test_other_changed_settings_are_applied(tmp_path):
    d = tmp_path / "league"
    run_league(write(tmp_path / "a.yaml"), d)
    summary = run_league(write(tmp_path / "b.yaml", matches=10, pairing="uniform", move_time_limit=5.0), d)
    assert summary["results"] == 10 and summary["new"] == 4
    assert open_league(d).get_meta("config")["pairing"] == "uniform"


def test_a_league_poisoned_by_an_old_version_is_one_line_or_repaired(tmp_path):
    # A league stored with elo_k NaN (as an older arena allowed): with nothing rated the config's value
    # replaces it; with NaN ratings it is one line, never a traceback.
    d = tmp_path / "fresh"
    LeagueStore(d).close()
    store = LeagueStore(d)
    with store.tx():
        store.set_meta("elo_k", float("nan"))
    store.close()
    run_league(write(tmp_path / "a.yaml"), d)
    assert all(math.isfinite(v) for v in open_league(d).elo().values())
    d = tmp_path / "rated"
    run_league(write(tmp_path / "a.yaml"), d)
    store = LeagueStore(d)
    with store.tx():
        store.set_meta("elo_k", float("nan"))
    store.close()
    with pytest.raises(ConfigError) as e:
        League(load_league_config(write(tmp_path / "a.yaml")), d, backend="inline")
    assert str(e.value) == (f"{d}: this league was created with elo_k nan and payoff_decay 0.99, and its ratings are "
                            "not numbers; they cannot be repaired: start a new league in another --dir")


# -- 3. the league folder ---------------------------------------------------------------------
def test_a_league_folder_that_is_a_file_or_cannot_be_made_is_one_line(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    cfg = load_league_config(write(tmp_path / "a.yaml"))
    with pytest.raises(ConfigError) as e:
        League(cfg, f, backend="inline")
    assert str(e.value) == f"the league folder {f} is a file, not a folder: give a folder (it is created if missing)"
    with pytest.raises(ConfigError) as e:
        League(cfg, f / "sub", backend="inline")
    assert str(e.value) == (f"the league folder {f / 'sub'}: cannot create this folder (Not a directory): give a "
                            "folder you can write to")


# -- 4. one writer ------------------------------------------------------------------------------
HOLDER = textwrap.dedent("""\
    import sys
    from arena.league.lock import writer_lock
    lock = writer_lock(sys.argv[1])
    print("held", flush=True)
    sys.stdin.read()
""")


def test_a_league_is_refused_while_another_process_holds_its_lock(tmp_path):
    """Every writer goes through League (the CLI, the trainers): a second one is refused naming the PID."""
    d = tmp_path / "league"
    d.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(d)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        assert (d / LOCK_FILE).read_text() == f"{holder.pid}\n"
        with pytest.raises(LeagueBusy) as e:
            League(load_league_config(write(tmp_path / "a.yaml")), d, backend="inline")
        assert str(e.value) == (f"the league at {d} is being run by process {holder.pid} (it holds {d / LOCK_FILE}): "
                                f"wait for it to finish or stop it, then run again; `arena league status {d}` and "
                                f"`arena serve {d}` read it meanwhile")
        assert not (d / "league.db").exists()  # refused before the database was touched
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    # the holder is gone: the kernel released its lock, the stale file is no obstacle
    league = League(load_league_config(write(tmp_path / "a.yaml")), d, backend="inline")
    assert (d / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    assert league.run()["results"] == 6


def test_one_process_shares_its_lock_between_its_leagues(tmp_path):
    d = tmp_path / "league"
    cfg = load_league_config(write(tmp_path / "a.yaml"))
    first = League(cfg, d, backend="inline")
    second = League(cfg, d, backend="inline")  # e.g. a test, or a trainer re-opening its league
    assert first.lock is second.lock is writer_lock(d)
    passive = League.open(d)
    assert passive.lock is None


# -- 5. a kill is not a failed attempt ---------------------------------------------------------------
def test_matches_left_running_by_stopped_processes_never_spend_attempts(tmp_path):
    d = tmp_path / "league"
    cfg = load_league_config(write(tmp_path / "a.yaml", max_attempts=3))
    league = League(cfg, d, backend="inline")
    queued = [league.begin(league.next_pairing()).match_id for _ in range(3)]
    del league
    for _ in range(6):  # six "kill -9"s with the three matches in flight: more than max_attempts
        store = LeagueStore(d)
        for mid in queued:
            store.mark_running(mid)  # dispatched, as `run` does, then the process is killed
        store.close()
        counts = League(cfg, d, backend="inline").recover()
        assert counts == {"committed_from_replay": 0, "requeued": 3}
        rows = {m.match_id: m for m in open_league(d).matches()}
        assert [(rows[m].status, rows[m].attempts) for m in queued] == [("queued", 0)] * 3
    summary = League(cfg, d, backend="inline").run()
    store = open_league(d)
    assert summary["results"] == 6 and store.status_counts() == {"done": 6}
    assert [m.attempts for m in store.matches()] == [1] * 6


def test_a_league_whose_every_match_fails_stops_and_says_why(tmp_path, monkeypatch):
    """Every match failing in the workers (here: each piece of work raises) used to schedule new
    matches forever; the run now stops with one line naming the last failure, and what failed is
    recorded (each match re-queued until its attempts are spent)."""
    from arena.errors import ArenaError
    from arena.match import pool

    def broken(self):
        raise RuntimeError("game engine crashed at reset")

    monkeypatch.setattr(pool.JobsWork, "run", broken)
    d = tmp_path / "league"
    league = League(load_league_config(write(tmp_path / "a.yaml", max_attempts=2)), d, backend="inline")
    with pytest.raises(ArenaError) as e:
        league.run()
    msg = str(e.value)
    assert "failed in a row and none finished" in msg and "game engine crashed at reset" in msg and "\n" not in msg
    store = open_league(d)
    assert store.result_count() == 0 and store.status_counts().get("failed", 0) >= 1
    monkeypatch.undo()  # the cause fixed: the same league plays its budget
    assert League(load_league_config(write(tmp_path / "a.yaml", max_attempts=2)), d,
                  backend="inline").run()["results"] == 6


def test_a_worker_failure_still_counts_toward_max_attempts(tmp_path):
    d = tmp_path / "league"
    league = League(load_league_config(write(tmp_path / "a.yaml", max_attempts=2)), d, backend="inline")
    mid = league.begin(league.next_pairing(), status="running").match_id
    assert league.store.requeue(mid, "WorkerLost: died", 2) == "queued"
    league.store.mark_running(mid)
    assert league.store.requeue(mid, "WorkerLost: died", 2) == "failed"


def test_a_worker_forked_by_a_killed_writer_does_not_keep_the_lock(tmp_path):
    """A writer's match workers may be forked (`arena.match.batch` uses fork): when the writer is
    killed with SIGKILL and such a worker lives on, the next writer still gets the lock (a record
    lock belongs to the process that took it; an flock would live on in every forked copy)."""
    import signal
    import time

    ready = tmp_path / "child.pid"
    code = textwrap.dedent(f"""
        import os, time
        from arena.league.lock import writer_lock
        held = writer_lock({str(tmp_path)!r})
        pid = os.fork()
        if pid == 0:  # the forked worker: outlives its parent
            time.sleep(60)
            os._exit(0)
        open({str(ready)!r}, "w").write(str(pid))
        time.sleep(60)
    """)
    writer = subprocess.Popen([sys.executable, "-c", code])
    child = None
    try:
        for _ in range(600):
            if ready.exists() and ready.read_text():
                break
            time.sleep(0.05)
        child = int(ready.read_text())
        with pytest.raises(LeagueBusy, match=f"being run by process {writer.pid}"):
            writer_lock(tmp_path)
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        os.kill(child, 0)  # the forked worker is still alive ...
        assert writer_lock(tmp_path) is not None  # ... and the lock is free
    finally:
        if writer.poll() is None:
            writer.kill()
        if child:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_league_that_fails_as_it_is_made_leaves_nothing_behind(tmp_path, monkeypatch):
    """A new league whose start fails (here its learners fail to load, as a missing checkpoint
    would) removes its database, lock and folder; a folder that held other files keeps them; an
    existing league is never removed."""
    cfg = load_league_config(write(tmp_path / "l.yaml"))

    def broken(self):
        raise ConfigError("no checkpoint at runs/nope/best")

    monkeypatch.setattr(League, "_load_learners", broken)
    with pytest.raises(ConfigError, match="no checkpoint"):
        League(cfg, tmp_path / "new", backend="inline")
    assert not (tmp_path / "new").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("kept")
    with pytest.raises(ConfigError):
        League(cfg, tmp_path / "mine", backend="inline")
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    monkeypatch.undo()
    League(cfg, tmp_path / "old", backend="inline").store.close()
    monkeypatch.setattr(League, "_load_learners", broken)
    with pytest.raises(ConfigError):
        League(cfg, tmp_path / "old", backend="inline")
    assert (tmp_path / "old" / "league.db").exists()


def test_two_configs_sharing_a_league_never_retire_each_others_players(tmp_path):
    """A mixed league: two trainers' configs each list their own opponents. Each config's sync adds
    its players as its own (`config_owner`) and retires only its own, so starting one after the
    other (and again, as a resume does) keeps both sides' opponents active."""
    a = load_league_config(write(tmp_path / "a.yaml", players=[{"name": "random", "agent": "random"},
                                                               {"name": "mcts", "agent": "mcts:simulations=5"}]))
    b = load_league_config(write(tmp_path / "b.yaml", players=[{"name": "first", "agent": "first"},
                                                               {"name": "random", "agent": "random"}]))
    d = tmp_path / "mixed"
    for _ in range(2):
        for cfg, owner in ((a, "scc/config"), (b, "spiral/config")):
            League(cfg, d, backend="inline", config_owner=owner).store.close()
    store = open_league(d)
    rows = {p.name: p for p in store.players()}
    assert {n: rows[n].active for n in ("random", "mcts", "first")} == {"random": 1, "mcts": 1, "first": 1}
    assert (rows["mcts"].owner, rows["first"].owner) == ("scc/config", "spiral/config")
    # a config still retires its own player once it drops it
    a2 = load_league_config(write(tmp_path / "a2.yaml", players=[{"name": "random", "agent": "random"}]))
    League(a2, d, backend="inline", config_owner="scc/config").store.close()
    assert {p.name: p.active for p in open_league(d).players()}["mcts"] == 0
    store.close()
