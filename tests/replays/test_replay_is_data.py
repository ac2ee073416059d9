"""A replay is data, never code: a header may name a registered game and the settings that game
declares, nothing else. Every reader of a header (replay show, verify, --render, the web replay
page, imitation and text re-simulation) refuses a header naming a constructor-level key
(``core``, ``env_class``, ``entry_point``, ...) with one line, before anything is imported: the
sentinel module these headers name writes a file if it is ever imported, called or made. Replays
over the size cap (a gzip bomb) are refused unread, and list/verify go on with the next file."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.cli import app
from arena.errors import ConfigError, NotASetting, ReplayRefused
from arena.envs.registry import game_settings, make_core
from arena.match import play_match
from arena.match.verify import observed_moves, replay_game_kwargs, text_replay, verify_replay
from arena.replays import format as fmt
from arena.replays import read_replay, replay_path, write_replay

runner = CliRunner()
ARENA = str(Path(sys.executable).with_name("arena"))
SENTINEL_MODULE = "plugins.sentinel"
TTT, TA_TTT, KUHN2 = "openspiel/tic_tac_toe-v0", "arena/TicTacToe-v0", "arena/KuhnPoker-v2"

#: Constructor-level keys a hostile header could name, each with a value naming code.
HOSTILE = [("core", f"{SENTINEL_MODULE}:Boom"), ("env_class", f"{SENTINEL_MODULE}:Boom"),
           ("entry_point", f"{SENTINEL_MODULE}:boom"), ("game", "kuhn_poker"), ("game_id", "openspiel/hex-v0"),
           ("env_id", "KuhnPoker-v0"), ("model_file", "/etc/passwd"), ("module", SENTINEL_MODULE),
           ("no_such_setting", 1)]


@pytest.fixture
def sentinel(tmp_path, monkeypatch):
    path = tmp_path / "sentinel.txt"
    monkeypatch.setenv("ARENA_SENTINEL", str(path))
    sys.modules.pop(SENTINEL_MODULE, None)
    yield path
    assert not path.exists(), f"a replay's header ran code: {path.read_text()}"
    assert SENTINEL_MODULE not in sys.modules, "a replay's header imported a module"


def _replay(folder: Path, game: str, name: str, seed: int = 3) -> Path:
    res = play_match(game, ["random", "random"], seed=seed, match_id=name, record="actions")
    return write_replay(res.replay, replay_path(folder, name))


def _tamper(path: Path, out: Path, **game_kwargs) -> Path:
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    header = json.loads(lines[0])
    header["game_kwargs"] = game_kwargs
    lines[0] = json.dumps(header)
    out.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return out


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("clean")
    return {g: _replay(d, g, g.replace("/", "_")) for g in (TTT, TA_TTT, KUHN2)}


@pytest.mark.parametrize("game", [TTT, TA_TTT, KUHN2])
@pytest.mark.parametrize("key,value", HOSTILE)
def test_every_reader_refuses_a_constructor_key_in_one_line(clean, tmp_path, sentinel, game, key, value):
    bad = _tamper(clean[game], tmp_path / "bad.jsonl.gz", **{key: value})
    line = f"header field game_kwargs.{key} is not a game setting of {game} (its settings: "
    rep = read_replay(bad)
    # the library readers: verify, imitation's observed moves, text re-simulation (tabular, SFT)
    for read in (replay_game_kwargs, verify_replay, observed_moves, text_replay):
        with pytest.raises(ReplayRefused) as e:
            read(rep)
        assert line in str(e.value) and "\n" not in str(e.value)
    # the CLI readers: verify (goes on, counts it refused), show, show --render
    r = runner.invoke(app, ["replay", "verify", str(bad)])
    assert r.exit_code == 1 and "REFUSED" in r.output and line in " ".join(r.output.split()), r.output
    assert "0 verified, 0 mismatched, 0 unreadable, 1 refused, 0 not checked" in r.output
    for extra in ([], ["--render", str(tmp_path / "m.gif")]):
        r = runner.invoke(app, ["replay", "show", str(bad), *extra], input="q\n")
        assert isinstance(r.exception, ReplayRefused) and line in str(r.exception), r.output
    assert not (tmp_path / "m.gif").exists()


def test_the_web_replay_page_refuses_to_resimulate_a_hostile_header(clean, tmp_path, sentinel):
    from arena.ui.web.replays import replay_json

    rep = read_replay(_tamper(clean[TA_TTT], tmp_path / "bad.jsonl.gz", core=f"{SENTINEL_MODULE}:Boom"))
    out = replay_json(rep, rep.match_id)
    assert "header field game_kwargs.core is not a game setting of arena/TicTacToe-v0" in out["note"]
    assert len(out["steps"]) == len(rep.steps)  # the recorded moves are still shown, as data


def test_a_hostile_replay_in_a_league_database_through_the_web_api(tmp_path, sentinel):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from arena.league.config import load_league_config
    from arena.league.manager import League
    from arena.ui.web.app import create_app

    root = Path(__file__).resolve().parents[2]
    cfg = load_league_config(root / "configs/leagues/quickstart.yaml", matches=4)
    League(cfg, tmp_path / "lg", backend="inline").run()
    db = tmp_path / "lg" / fmt.LEAGUE_DB
    with sqlite3.connect(db) as conn:
        mid, data = conn.execute(f"SELECT match_id, data FROM {fmt.BLOB_TABLE} LIMIT 1").fetchone()
        lines = gzip.decompress(data).decode().splitlines()
        header = json.loads(lines[0])
        header["game_kwargs"] = {"core": f"{SENTINEL_MODULE}:Boom", "env_class": f"{SENTINEL_MODULE}:Boom"}
        lines[0] = json.dumps(header)
        conn.execute(f"UPDATE {fmt.BLOB_TABLE} SET data=? WHERE match_id=?",
                     (gzip.compress(("\n".join(lines) + "\n").encode()), mid))
    conn.close()
    with TestClient(create_app(tmp_path / "lg")) as client:
        r = client.get(f"/api/replays/{mid}")
    assert r.status_code == 200
    assert "header field game_kwargs.core is not a game setting" in r.json()["note"]


def test_a_fresh_process_imports_nothing_a_replay_names(clean, tmp_path):
    sentinel = tmp_path / "sentinel.txt"
    bad = _tamper(clean[TA_TTT], tmp_path / "bad.jsonl.gz", core=f"{SENTINEL_MODULE}:Boom",
                  env_class=f"{SENTINEL_MODULE}:Boom")
    env = dict(os.environ, ARENA_SENTINEL=str(sentinel), COLUMNS="200")
    for args in (["replay", "verify", str(bad)], ["replay", "show", str(bad), "--all"]):
        r = subprocess.run([ARENA, *args], capture_output=True, text=True, env=env, timeout=300, check=False)
        assert r.returncode in (1, 2), r.stdout + r.stderr
        out = (r.stdout + r.stderr).strip()
        assert "header field game_kwargs.core is not a game setting of arena/TicTacToe-v0" in out
        assert "Traceback" not in out
    assert not sentinel.exists()


def test_settings_the_game_declares_still_replay(tmp_path):
    """Declared settings are kept: an OpenSpiel parameter given alone (``rows=5``) or in ``params``,
    TextArena's own keywords, and they re-simulate."""
    assert {"rows", "columns", "params", "invalid_move_limit", "render_mode"} <= game_settings(
        "openspiel/connect_four-v0")
    assert "max_rounds" in game_settings(KUHN2) and "env_class" not in game_settings(KUHN2)
    core = make_core("openspiel/connect_four-v0", rows=5)
    assert core.settings == {"game": "connect_four", "params": {"rows": 5}}
    res = play_match("openspiel/connect_four-v0", ["random", "random"], seed=1, game_kwargs={"rows": 5},
                     record="actions", match_id="c4")
    path = write_replay(res.replay, replay_path(tmp_path, "c4"))
    assert verify_replay(read_replay(path)).ok


def test_configs_and_the_command_line_name_settings_only(sentinel):
    """The same rule for every other input: a `-k` or a config's game kwargs (`make`)."""
    with pytest.raises(NotASetting, match=r"arena/TicTacToe-v0 has no setting 'env_class' \(its settings: "
                                          r"invalid_move_limit, render_mode\)"):
        make_core(TA_TTT, env_class=f"{SENTINEL_MODULE}:Boom")
    with pytest.raises(NotASetting, match="is a object, not plain data"):
        make_core("openspiel/connect_four-v0", rows=object())
    r = runner.invoke(app, ["play", TA_TTT, "-p", "random", "-p", "random", "-k", f"core={SENTINEL_MODULE}:Boom"])
    assert isinstance(r.exception, ConfigError) and "has no setting 'core'" in str(r.exception)


def _bomb(path: Path, size: int) -> Path:
    """A gzip file that expands to `size` bytes of blanks after a valid-looking start."""
    path.write_bytes(gzip.compress(b'{"type":"header"' + b" " * size, compresslevel=9))
    return path


def test_a_gzip_bomb_is_refused_unread_and_list_and_verify_go_on(clean, tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    good = folder / clean[TTT].name
    good.write_bytes(clean[TTT].read_bytes())
    bomb = _bomb(folder / "bomb.jsonl.gz", fmt.MAX_REPLAY_BYTES + 1)
    assert bomb.stat().st_size < 200_000  # tiny on disk, 64 MiB unpacked
    with pytest.raises(ReplayRefused, match=r"bomb.jsonl.gz: larger than 64 MiB of replay text, the most a "
                                            r"replay may hold; refused unread"):
        read_replay(bomb)
    r = runner.invoke(app, ["replay", "verify", str(folder)])
    assert r.exit_code == 1
    assert "2 replays: 1 verified, 0 mismatched, 0 unreadable, 1 refused, 0 not checked" in r.output
    r = runner.invoke(app, ["replay", "list", str(folder)])
    assert good.name.split(".")[0] in r.output and "larger than 64 MiB" in " ".join(r.output.split())


def test_the_cap_holds_for_plain_files_many_gzip_members_and_database_blobs(tmp_path, monkeypatch):
    monkeypatch.setattr(fmt, "MAX_REPLAY_BYTES", 1000)
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(b" " * 1001)
    members = tmp_path / "members.jsonl.gz"
    members.write_bytes(gzip.compress(b" " * 600) + gzip.compress(b" " * 600))
    for p in (plain, members):
        with pytest.raises(ReplayRefused, match="larger than 1000 bytes of replay text"):
            read_replay(p)
    db = tmp_path / "league.db"
    with sqlite3.connect(db) as conn:
        conn.execute(fmt.BLOB_SCHEMA)
        conn.execute(f"INSERT INTO {fmt.BLOB_TABLE} VALUES (?, ?)", ("m1", b"x" * 2000))
    conn.close()
    with pytest.raises(ReplayRefused, match="refused unread"):
        read_replay(f"{db}#m1")
    deep = tmp_path / "deep.jsonl"
    monkeypatch.setattr(fmt, "MAX_REPLAY_BYTES", 64 << 20)
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(fmt.ReplayError, match="nested too deeply"):
        read_replay(deep)


class _Payload:
    """Unpickling this imports the sentinel: what a hostile `policy.pt` would carry."""

    def __reduce__(self):
        import importlib

        return (importlib.import_module, (SENTINEL_MODULE,))


def test_a_policy_checkpoint_is_read_as_weights_not_as_a_pickle(tmp_path, sentinel):
    torch = pytest.importorskip("torch")
    from arena.agents.specs import make_agent
    from arena.errors import AgentSpecError

    (tmp_path / "evil").mkdir()
    torch.save({"format": "arena-policy", "payload": _Payload()}, tmp_path / "evil" / "policy.pt")
    with pytest.raises(AgentSpecError, match="is not a readable policy checkpoint"):
        make_agent(f"policy:{tmp_path / 'evil'}", make_core(TTT), 0)
