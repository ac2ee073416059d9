"""`arena play GAME --vs DIR:PLAYER` at the terminal: the person plays as ``human:NAME`` (``--name``,
else the name remembered in a small file, else a new guest name, then remembered), a bad name is one
line on stderr and exit code 2, and the change printed is the match's own commit's."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from arena.cli import main
from arena.config import from_dict
from arena.league.config import LeagueConfig
from arena.league.manager import League, open_league
from arena.league.play import PLAYER_FILE_ENV, player_file, play_against, remembered_name

TTT = "openspiel/tic_tac_toe-v0"
WIN = "2\n4\n6\n"  # against "first" (the lowest free cell), seat 0: a win on the diagonal
GUEST = re.compile(r"^guest-[a-z0-9]{6}$")


@pytest.fixture()
def league(tmp_path) -> Path:
    d = tmp_path / "L"
    cfg = from_dict(LeagueConfig, {"name": "people", "seed": 1, "games": [{"id": TTT}], "matches": 2, "in_flight": 1,
                                   "players": [{"name": "random", "agent": "random"}, {"name": "first", "agent": "first"}]})
    League(cfg, d, backend="inline").run()
    return d


@pytest.fixture()
def name_file(tmp_path, monkeypatch) -> Path:
    f = tmp_path / "cfg" / "player.json"
    monkeypatch.setenv(PLAYER_FILE_ENV, str(f))
    return f


def arena(monkeypatch, capsys, *args: str, stdin: str = WIN) -> tuple[int, str, str]:
    """`arena ARGS` in this process (as the console script runs it): (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["arena", *args])
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    with pytest.raises(SystemExit) as e:
        main()
    out = capsys.readouterr()
    return (e.value.code or 0), out.out, out.err


def humans(league: Path) -> list[str]:
    s = open_league(league)
    try:
        return sorted(p.name for p in s.players() if p.kind == "human")
    finally:
        s.close()


def test_name_is_played_rated_and_remembered(league, name_file, monkeypatch, capsys):
    code, out, err = arena(monkeypatch, capsys, "play", TTT, "--vs", f"{league}:first", "--name", "zoe")
    assert code == 0, err
    assert "You play as zoe, rated as the player human:zoe; you are seat 0 (you move first)." in out
    assert "human:zoe wins" in out
    assert json.loads(name_file.read_text()) == {"name": "zoe"} and remembered_name() == "zoe"
    code, out, err = arena(monkeypatch, capsys, "play", TTT, "--vs", f"{league}:first")  # no --name: remembered
    assert code == 0 and "You play as zoe" in out, err
    assert humans(league) == ["human:zoe"]
    s = open_league(league)
    try:
        rows = s.results()
        assert [r.players for r in rows[-2:]] == [["human:zoe", "first"]] * 2
        # the change printed is the last commit's own: its Elo row minus the one before
        hist = [e for seq, p, e, *_ in s.rating_history(TTT) if p == "human:zoe"]
        assert f"human:zoe {hist[-1]:.0f} ({hist[-1] - hist[-2]:+.1f} by this match)" in out
    finally:
        s.close()


def test_no_name_is_a_guest_remembered_for_next_time(league, name_file, monkeypatch, capsys):
    assert not name_file.exists()
    code, out, err = arena(monkeypatch, capsys, "play", TTT, "--vs", f"{league}:first")
    assert code == 0, err
    guest = remembered_name()
    assert GUEST.match(guest) and f"You play as {guest}" in out and str(name_file) in out
    assert arena(monkeypatch, capsys, "play", TTT, "--vs", f"{league}:first")[0] == 0
    assert humans(league) == [f"human:{guest}"]
    # a damaged file is no name: a new guest, and the file written again
    name_file.write_text("{not json")
    assert arena(monkeypatch, capsys, "play", TTT, "--vs", f"{league}:first")[0] == 0
    other = remembered_name()
    assert GUEST.match(other) and other != guest and len(humans(league)) == 2
    # the library: two plays without a name are two guests
    a = play_against(league, "first", TTT, stdin=io.StringIO(WIN), stdout=io.StringIO())
    b = play_against(league, "first", TTT, stdin=io.StringIO(WIN), stdout=io.StringIO())
    assert GUEST.match(a["name"]) and GUEST.match(b["name"]) and a["player"] != b["player"]
    assert a["elo_change"][a["player"]] > 0


@pytest.mark.parametrize("name, says", [
    ("x" * 25, "at most 24"),
    ("../x", "characters a name may not have"),
    ("bad\x07bell", "characters a name may not have"),
    ("two words", "characters a name may not have"),
    ("first", "league player's name"),
    ("Human", "reserved"),
    ("", "empty"),
])
def test_a_bad_name_is_one_line_and_exit_code_2(league, name_file, monkeypatch, capsys, name, says):
    code, out, err = arena(monkeypatch, capsys, "play", TTT, "--vs", f"{league}:first", "--name", name)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: --name:") and says in lines[0], err
    assert "Traceback" not in err + out and "\x07" not in err
    assert not name_file.exists() and humans(league) == []


def test_a_name_taken_in_other_case_names_the_fix(league, name_file, monkeypatch, capsys):
    assert arena(monkeypatch, capsys, "play", TTT, "--vs", f"{league}:first", "--name", "Yann")[0] == 0
    code, _, err = arena(monkeypatch, capsys, "play", TTT, "--vs", f"{league}:first", "--name", "yann")
    assert code == 2 and "taken as 'Yann'" in err and "play as 'Yann'" in err
    assert remembered_name() == "Yann"
    # --name only means something against a league player
    code, _, err = arena(monkeypatch, capsys, "play", TTT, "-p", "random", "-p", "first", "--name", "yann")
    assert code == 2 and "use it with --vs" in err


def test_the_console_script_refuses_a_bad_name_without_a_traceback(league, tmp_path):
    env = {**__import__("os").environ, PLAYER_FILE_ENV: str(tmp_path / "p.json")}
    r = subprocess.run([sys.executable, "-m", "arena.cli", "play", TTT, "--vs", f"{league}:first", "--name", "../x"],
                       capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert [ln for ln in r.stderr.splitlines() if ln.strip()] == [
        "error: --name: the name '../x' has characters a name may not have: use letters, digits, '.', '_' and '-', "
        "starting with a letter or a digit (e.g. alice or bob_2)"]


def test_where_the_name_is_kept(monkeypatch, tmp_path):
    monkeypatch.delenv(PLAYER_FILE_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert player_file() == tmp_path / "xdg" / "arena" / "player.json"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert player_file() == tmp_path / "home" / ".config" / "arena" / "player.json"
    monkeypatch.setenv(PLAYER_FILE_ENV, str(tmp_path / "mine.json"))
    assert player_file() == tmp_path / "mine.json"


def test_a_name_with_history_here_is_confirmed_not_merged_silently(league, name_file, monkeypatch, capsys):
    """`--name alice` where human:alice has games in the league, typed at a terminal that remembers another
    name (or none): asked first; yes plays as alice, anything else is one line and plays nothing. The name
    this terminal remembers is never asked about."""
    assert arena(monkeypatch, capsys, "play", TTT, "--vs", f"{league}:first", "--name", "alice")[0] == 0
    name_file.unlink()  # another person's terminal
    code, out, err = arena(monkeypatch, capsys, "play", TTT, "--vs", f"{league}:first", "--name", "alice",
                           stdin="n\n" + WIN)
    assert code == 2 and "human:alice has 1 game in this league already" in out
    assert err.startswith("error: --name alice: that name has a history in this league; give another --name")
    assert len(open_league(league).results()) == 2 + 1 and not name_file.exists()
    code, out, err = arena(monkeypatch, capsys, "play", TTT, "--vs", f"{league}:first", "--name", "alice",
                           stdin="y\n" + WIN)
    assert code == 0 and "You play as alice" in out and "human:alice wins" in out, err
    assert humans(league) == ["human:alice"] and remembered_name() == "alice"
    code, out, _ = arena(monkeypatch, capsys, "play", TTT, "--vs", f"{league}:first", "--name", "alice")
    assert code == 0 and "Is that you" not in out  # the name this terminal plays under
