"""Every declared game setting has a range, checked before anything is built (`arena.envs.registry.
setting_rules`): a 1 KB replay header, ``-k KEY=VALUE`` or a league config's game kwargs cannot make a
game allocate gigabytes (``red: 300000000m`` took 4.7 GB, Prosthetics ``time_limit: 3e8`` 7.2 GB) or
run for minutes (``integrator_accuracy: 1e-300``). Each refusal is one line naming the setting, its
value (shown bounded) and its range; memory is measured in a fresh interpreter (peak RSS growth)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from arena.envs.registry import SettingOutOfRange, check_settings, game_settings, make, setting_rules
from arena.errors import ArenaError, NotASetting, ReplayRefused

ROOT = Path(__file__).resolve().parents[2]
SK, PROS, C4 = "arena/Skirmish-3m-v0", "arena/Prosthetics-v0", "openspiel/connect_four-v0"

#: (game, settings, the one line expected): the attacks of the review, and one per kind of range.
ATTACKS = [
    (SK, {"red": "300000000m"}, "arena/Skirmish-3m-v0: red must be 1 to 16 units as counts and letters, each letter "
                                "once (m marine, r marauder, s stalker, z zealot), e.g. 2s3z, got '300000000m'"),
    (SK, {"blue": "9" * 5000 + "z"}, None),
    (SK, {"width": 10 ** 9}, "arena/Skirmish-3m-v0: width must be a whole number in [24, 128], got 1000000000"),
    (SK, {"height": 10 ** 9}, None),
    (SK, {"max_steps": 10 ** 12}, "arena/Skirmish-3m-v0: max_steps must be a whole number in [1, 1000], got "
                                   "1000000000000"),
    (PROS, {"time_limit": 3e8}, "arena/Prosthetics-v0: time_limit must be a whole number in [1, 10,000] or null "
                                "(the round's: 300 or 1,000), got 300000000.0"),
    (PROS, {"time_limit": 300_000_000}, None),
    (PROS, {"max_episode_steps": 300_000_000}, None),
    (PROS, {"frame_skip": 10 ** 9}, "arena/Prosthetics-v0: frame_skip must be a whole number in [1, 100], got "
                                    "1000000000"),
    (PROS, {"integrator_accuracy": 1e-300}, "arena/Prosthetics-v0: integrator_accuracy must be a number in "
                                            "[1e-08, 0.1] (default 5e-05), got 1e-300"),
    (PROS, {"integrator_accuracy": float("nan")}, None),
    (C4, {"rows": 10 ** 6}, "openspiel/connect_four-v0: rows must be a whole number in [1, 100], got 1000000"),
    (C4, {"params": {"columns": 10 ** 6}}, "openspiel/connect_four-v0: params.columns must be a whole number in "
                                           "[1, 100], got 1000000"),
    ("openspiel/hex-v0", {"board_size": 10 ** 5}, None),
    ("openspiel/liars_dice-v0", {"numdice": 10 ** 6}, None),
    ("openspiel/kuhn_poker-v0", {"players": 10 ** 6}, "openspiel/kuhn_poker-v0: players must be a whole number in "
                                                      "[2, 10], got 1000000"),
    ("openspiel/blotto-v0", {"coins": 100, "fields": 100}, None),
    ("arena/SimpleNegotiation-v1", {"max_turns": 10 ** 9}, "arena/SimpleNegotiation-v1: max_turns must be a whole "
                                                           "number in [0, 10,000], got 1000000000"),
    ("arena/KuhnPoker-v1", {"max_rounds": 10 ** 9}, None),
    ("openspiel/tic_tac_toe-v0", {"invalid_move_limit": -1}, "openspiel/tic_tac_toe-v0: invalid_move_limit must be "
                                                             "a whole number in [0, 1,000] or null, got -1"),
    (SK, {"invalid_move_limit": 10 ** 9}, None),
    ("arena/TicTacToe-v0", {"invalid_move_limit": -1}, None),
]


@pytest.mark.parametrize("game, kwargs, line", ATTACKS, ids=[f"{g}-{next(iter(k))}" for g, k, _ in ATTACKS])
def test_an_out_of_range_setting_is_one_line_before_anything_is_built(game, kwargs, line):
    for attempt in (lambda: check_settings(game, kwargs), lambda: make(game, **kwargs)):
        with pytest.raises(SettingOutOfRange) as e:
            attempt()
        msg = str(e.value)
        assert "\n" not in msg and len(msg) < 400, msg
        key = next(iter(kwargs))
        assert msg.startswith(f"{game}: {key}") and " must be " in msg and ", got " in msg, msg
        if line is not None:
            assert msg == line
    assert isinstance(e.value, NotASetting) and isinstance(e.value, ArenaError)  # replays and configs catch it


def test_values_in_range_still_make_the_game():
    make(SK, red="16m", blue="2s3z", width=128, height=12, max_steps=1000, invalid_move_limit=0).close()
    make(C4, rows=8, columns=9, invalid_move_limit=None).close()
    make(C4, params={"rows": 5}).close()
    make("openspiel/kuhn_poker-v0", players=3).close()
    make("arena/SimpleNegotiation-v1", max_turns=20).close()
    check_settings(PROS, {"time_limit": 10_000, "frame_skip": 100, "integrator_accuracy": 1e-8,
                          "max_episode_steps": None})
    check_settings(PROS, {"time_limit": None, "integrator_accuracy": 0.1})


def test_every_declared_setting_of_the_arena_games_has_a_range():
    from arena.envs.registry import CURATED_TEXT_GAMES, OPENSPIEL_GAMES, PROSTHETICS_GAMES, SKIRMISH_GAMES

    ids = [*CURATED_TEXT_GAMES, *PROSTHETICS_GAMES, *SKIRMISH_GAMES, *(f"openspiel/{g}-v0" for g in OPENSPIEL_GAMES)]
    for gid in ids:
        rules = setting_rules(gid)
        missing = sorted(set(game_settings(gid)) - set(rules))
        assert not missing, f"{gid}: no range for {missing}"


def test_every_openspiel_default_is_within_its_range():
    """The ranges are worked out from the parameters' names: no OpenSpiel game's own defaults fall
    outside them (else a game would refuse its defaults given explicitly)."""
    import pyspiel

    from arena.envs.registry import _openspiel_ranges, _out_of_range

    for t in pyspiel.registered_games():
        try:
            spec = t.parameter_specification
        except Exception:
            continue
        rules = _openspiel_ranges({"game": t.short_name})
        for k, v in spec.items():
            if k in rules:
                assert _out_of_range(rules[k], v, k) is None, (t.short_name, k, v)


def test_a_parameter_naming_a_local_file_is_not_a_setting():
    with pytest.raises(NotASetting, match="has no setting 'filename'"):
        check_settings("openspiel/efg_game-v0", {"filename": "/etc/passwd"})


def test_skirmish_counts_units_without_making_them():
    from arena.envs.skirmish import SkirmishConfig, count_units, parse_units

    assert count_units("2s3z") == 5 and count_units("300000000m") == 300000000 and count_units("1m1m") is None
    assert count_units("9" * 100 + "m") is None  # too long to be a side
    with pytest.raises(ValueError, match=r"red: a side has 1 to 16 units, '300000000m' has 300000000"):
        parse_units("red", "300000000m")
    with pytest.raises(ValueError, match="blue: a side has 1 to 16 units"):
        SkirmishConfig(blue="400000000z")
    assert parse_units("red", "2s3z") == [2, 2, 3, 3, 3]


def test_prosthetics_checks_its_ranges_itself_before_opensim():
    """Made directly (not through the registry) the env refuses first, before OpenSim is imported."""
    from arena.envs.prosthetics import ProstheticsEnv

    with pytest.raises(ValueError, match=r"^time_limit must be a whole number in \[1, 10,000\]"):
        ProstheticsEnv(time_limit=300_000_000)
    with pytest.raises(ValueError, match=r"^integrator_accuracy must be a number in \[1e-08, 0.1\]"):
        ProstheticsEnv(integrator_accuracy=1e-300)
    with pytest.raises(ValueError, match=r"^frame_skip must be a whole number in \[1, 100\], got 0"):
        ProstheticsEnv(frame_skip=0)


# -- memory: a fresh interpreter, its peak RSS growth while refusing ----------------------------------
def _peak_growth_mb(body: str) -> tuple[int, list[str]]:
    prog = textwrap.dedent("""
        import json, resource
        nan = float("nan")
        from arena.envs.registry import check_settings, make, ensure_registered
        from arena.errors import ArenaError
        import pyspiel, arena.envs.skirmish, arena.envs.prosthetics
        ensure_registered()
        check_settings("openspiel/connect_four-v0", {"rows": 6})  # warm the caches: what is measured is the refusal
        lines = []
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    """) + textwrap.dedent(body) + textwrap.dedent("""
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({"growth_mb": (after - before) // 1024, "lines": lines}))
    """)
    r = subprocess.run([sys.executable, "-c", prog], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return out["growth_mb"], out["lines"]


def test_the_attacks_are_refused_in_bounded_memory():
    attacks = [(g, k) for g, k, _ in ATTACKS]
    growth, lines = _peak_growth_mb(f"""
        for game, kwargs in {attacks!r}:
            try:
                make(game, **kwargs)
                lines.append("MADE " + game)
            except ArenaError as e:
                lines.append(str(e))
    """)
    assert len(lines) == len(attacks) and not any(x.startswith("MADE") for x in lines), lines
    assert growth < 200, f"refusing the attacks grew the peak RSS by {growth} MB"


# -- the same check for a replay header, -k and a league config ---------------------------------------
def _arena(*args, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, COLUMNS="200"))


def _one_line(r: subprocess.CompletedProcess) -> str:
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 2, out
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    return out


def test_minus_k_is_refused_in_one_line():
    out = _one_line(_arena("play", SK, "-p", "random", "-p", "random", "-k", "red=300000000m"))
    assert "red must be 1 to 16 units" in out and "got '300000000m'" in out
    out = _one_line(_arena("play", PROS, "-p", "random", "-k", "time_limit=3e8"))
    assert "time_limit must be a whole number in [1, 10,000]" in out


def test_a_league_config_is_refused_before_its_folder_is_made(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"name: x\ngames: [{{id: {SK}, kwargs: {{red: 300000000m}}}}]\n"
                   "players: [{name: a, agent: random}, {name: b, agent: 'skirmish:idle'}]\nmatches: 2\nworkers: 1\n")
    out = _one_line(_arena("league", "run", cfg, "--dir", tmp_path / "L"))
    assert "red must be 1 to 16 units" in out
    assert not (tmp_path / "L").exists()


def test_a_replay_header_is_refused_in_one_line(tmp_path):
    from arena.match import play_match
    from arena.match.verify import replay_game_kwargs, verify_replay
    from arena.replays import read_replay, replay_path, write_replay

    res = play_match(SK, ["random", "random"], seed=1, match_id="m1", record="actions")
    good = write_replay(res.replay, replay_path(tmp_path, "m1"))
    lines = gzip.decompress(good.read_bytes()).decode().splitlines()
    header = json.loads(lines[0])
    header["game_kwargs"] = {"red": "300000000m"}
    lines[0] = json.dumps(header)
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with pytest.raises(ReplayRefused) as e:
        replay_game_kwargs(read_replay(bad))
    assert str(e.value) == ("replay m1: header field game_kwargs.red is out of range for arena/Skirmish-3m-v0 (red "
                            "must be 1 to 16 units as counts and letters, each letter once (m marine, r marauder, s "
                            "stalker, z zealot), e.g. 2s3z, got '300000000m')")
    with pytest.raises(ReplayRefused, match="game_kwargs.red is out of range"):
        verify_replay(bad)
    out = _one_line(_arena("replay", "show", bad))
    assert "game_kwargs.red is out of range for arena/Skirmish-3m-v0" in out
