"""`arena sc2 stand-in DIR`: a person lays out the stand-in game the suite uses, points SC2PATH at it and
plays StarCraft II ids without the game; a folder that holds something already is refused in one line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from arena.cli import app

runner = CliRunner()


def test_the_stand_in_command_lays_out_a_game_the_arena_plays(pysc2, tmp_path, monkeypatch):
    from arena.envs.sc2 import stand_in
    from arena.errors import ArenaError

    root = tmp_path / "StarCraftII"
    r = runner.invoke(app, ["sc2", "stand-in", str(root)], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert f"export SC2PATH={root}" in r.output and "arena play sc2/Simple64-v0" in r.output
    assert (root / "Versions" / "Base75689" / "SC2_x64").is_file()
    monkeypatch.setenv("SC2PATH", str(root))
    play = next(line.strip() for line in r.output.splitlines() if line.strip().startswith("arena play "))
    args = play.split()[1:]
    args[args.index("--replays") + 1] = str(tmp_path / "replays")
    args[args.index("-n") + 1] = "2"
    r = runner.invoke(app, args, terminal_width=200)
    assert r.exit_code == 0 and "2 matches" in r.output and "sc2:attack" in r.output, r.output
    assert len(list((tmp_path / "replays").glob("*.SC2Replay"))) == 2
    assert not [x["pid"] for x in stand_in.launches(root) if stand_in.alive(x["pid"])]
    r = runner.invoke(app, ["sc2", "stand-in", str(root)])
    assert isinstance(r.exception, ArenaError) and "holds a StarCraft II install already" in str(r.exception)
    (tmp_path / "file").write_text("x")
    r = runner.invoke(app, ["sc2", "stand-in", str(tmp_path / "file")])
    assert isinstance(r.exception, ArenaError) and "give a new or empty folder" in str(r.exception)


def test_without_the_extra_the_command_names_it(tmp_path, monkeypatch):
    import sys

    from arena.errors import ArenaError

    import arena.envs.sc2

    monkeypatch.setitem(sys.modules, "arena.envs.sc2.stand_in", None)  # as where s2clientprotocol is missing
    monkeypatch.delattr(arena.envs.sc2, "stand_in", raising=False)
    r = runner.invoke(app, ["sc2", "stand-in", str(tmp_path / "x")])
    assert isinstance(r.exception, ArenaError) and 'pip install "arena[sc2]"' in str(r.exception)
