import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.match.batch import play_matches
from arena.errors import ReplayError
from arena.match import play_match
from arena.replays import VERSION, list_replays, read_replay, replay_path, write_replay
from arena.match.verify import verify_replay

GOLDEN = Path(__file__).parent.parent / "golden"
GOLDEN_CASES = {
    # file stem: (game, agents, seed)
    "tic_tac_toe_random_s7": ("openspiel/tic_tac_toe-v0", ["random", "random"], 7),
    "kuhn_cfr_vs_random_s3": ("openspiel/kuhn_poker-v0", ["cfr:iterations=200", "random"], 3),
    "textarena_tictactoe_s1": ("arena/TicTacToe-v0", ["random", "first"], 1),
    "negotiation_s2": ("arena/SimpleNegotiation-v1", ["random", "random"], 2),
}


@pytest.mark.parametrize("compress", [True, False])
def test_roundtrip(tmp_path, compress):
    res = play_match("arena/KuhnPoker-v1", ["random", "random"], seed=4, match_id="r1")
    path = write_replay(res.replay, replay_path(tmp_path, "r1", compress))
    assert path.name == ("r1.jsonl.gz" if compress else "r1.jsonl")
    back = read_replay(path)
    assert back.to_text() == res.replay.to_text()
    assert back.header["version"] == VERSION and back.header["engine"]["textarena"]
    lines = (gzip.decompress(path.read_bytes()) if compress else path.read_bytes()).decode().splitlines()
    assert json.loads(lines[0])["type"] == "header" and json.loads(lines[-1])["type"] == "result"
    assert len(lines) == len(res.replay.steps) + 2


def test_step_lines_hold_what_the_player_saw(tmp_path):
    res = play_match("arena/KuhnPoker-v1", ["random", "random"], seed=4, match_id="r")
    s0 = res.replay.steps[0]
    assert "Your card is" in s0["obs"] and s0["action"] in ("[check]", "[bet]")
    assert set(s0) >= {"t", "player", "obs", "action", "action_text", "event", "reason", "time"}


def test_verify_batch_and_detect_tampering(tmp_path):
    play_matches("openspiel/connect_four-v0", ["random", "random"], 6, seed=2, replay_dir=tmp_path)
    paths = list_replays(tmp_path)
    assert len(paths) == 6
    assert all(verify_replay(p).ok for p in paths)
    r = read_replay(paths[0])
    first = r.steps[0]["action"]
    r.steps[0]["action"] = (first + 1) % 7
    report = verify_replay(r)
    assert not report.ok and any("step 0" in d or "result" in d for d in report.differences)


def test_verify_forfeit_and_garbage_replays():
    from plugins.agents import Scripted

    res = play_match("openspiel/tic_tac_toe-v0", [Scripted([None, "x" * 100_000]), "random"], seed=0, match_id="g")
    assert verify_replay(res.replay).ok


def test_other_format_version_is_refused(tmp_path):
    res = play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=1, match_id="v")
    res.replay.header["version"] = VERSION + 1
    p = write_replay(res.replay, replay_path(tmp_path, "v", compress=False))
    with pytest.raises(ReplayError, match=f"format version {VERSION + 1}"):
        read_replay(p)


def test_changed_game_version_is_refused():
    res = play_match("arena/KuhnPoker-v1", ["random", "random"], seed=1, match_id="v")
    res.replay.header["game_id"] = "arena/KuhnPoker-v0"
    with pytest.raises(ReplayError, match="does not have"):
        verify_replay(res.replay)


def test_incomplete_or_foreign_files_are_clear_errors(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"type": "header", "format": "arena-replay", "version": 1, "match_id": "x"}\n')
    with pytest.raises(ReplayError, match="incomplete"):
        read_replay(p)
    p.write_text("not json\n")
    with pytest.raises(ReplayError, match="not JSON"):
        read_replay(p)
    with pytest.raises(ReplayError, match="no replay"):
        read_replay(tmp_path / "missing")


@pytest.mark.parametrize("stem", sorted(GOLDEN_CASES))
def test_golden_replays(stem):
    """Canonical replays: the format still reads, re-simulates, and a fresh match equals them."""
    game, agents, seed = GOLDEN_CASES[stem]
    golden = read_replay(GOLDEN / f"{stem}.jsonl")
    assert verify_replay(golden).ok
    fresh = play_match(game, agents, seed=seed, match_id=golden.match_id).replay.without_timing()
    assert [json.dumps(s) for s in fresh.steps] == [json.dumps(s) for s in golden.without_timing().steps]
    assert fresh.result == golden.without_timing().result


WRITER = """
import sys
from arena.match import play_match
from arena.replays import replay_path, write_replay
out = sys.argv[1]
res = play_match("arena/SimpleNegotiation-v1", ["random", "random"], seed=0, match_id="big")
# Make the file large so that a kill lands mid-write most of the time.
res.replay.steps = res.replay.steps * 4000
print("ready", flush=True)
i = 0
while True:
    res.replay.header["match_id"] = f"m{i:05d}"
    write_replay(res.replay, replay_path(out, f"m{i:05d}", compress=False))
    i += 1
"""


def test_kill_mid_write_leaves_no_partial_replay(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(tmp_path.glob("m*.jsonl"))) < 2:  # however loaded the machine
        time.sleep(0.05)
    time.sleep(0.13)  # then kill at some point inside a later write
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    visible = list_replays(tmp_path)
    assert visible, "the writer should have finished some replays"
    for p in visible:
        r = read_replay(p)  # every visible replay is complete
        assert r.result["type"] == "result"
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert all(".tmp-" in p.name for p in leftovers)


def test_header_says_where_the_game_came_from(sample_plugin):
    builtin = play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=1, match_id="b").replay.header
    assert builtin["entry_point"] == "arena.envs.registry:openspiel_env"
    assert "plugin" not in builtin and "plugin_package" not in builtin
    plug = play_match("plugin/TicTacToePZ-v3", ["random", "random"], seed=1, match_id="p").replay.header
    assert plug["entry_point"] == "pettingzoo.classic.tictactoe_v3:env"
    assert plug["plugin"] == "plugins.sample_games"


def test_replay_of_a_game_not_loaded_names_the_plugin_and_imports_nothing(sample_plugin):
    res = play_match("plugin/TicTacToePZ-v3", ["random", "random"], seed=2, match_id="p")
    res.replay.header.update(game_id="elsewhere/TicTacToe-v3", plugin="elsewhere_games_xyz")
    with pytest.raises(ReplayError, match="pass --plugin elsewhere_games_xyz$") as e:
        verify_replay(res.replay)
    assert "\n" not in str(e.value)
    assert "elsewhere_games_xyz" not in sys.modules
    from arena.match.verify import final_view

    view = final_view(res.replay)
    assert view.texts == [None, None] and "--plugin elsewhere_games_xyz" in view.note
    # nor through Gymnasium's "module:Id" form of an id
    res.replay.header.update(game_id="elsewhere_games_xyz:TicTacToe-v3")
    with pytest.raises(ReplayError, match="pass --plugin elsewhere_games_xyz$"):
        verify_replay(res.replay)
    assert "elsewhere_games_xyz" not in sys.modules


def test_unreadable_files_are_replay_errors(tmp_path):
    good = write_replay(play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=1, match_id="g").replay,
                        replay_path(tmp_path, "g"))
    cases = {
        "binary.jsonl": b"\xff\xfe\x00garbage",
        "cut.jsonl.gz": good.read_bytes()[:60],
        "flipped.jsonl.gz": good.read_bytes()[:20] + bytes(b ^ 0xFF for b in good.read_bytes()[20:40])
        + good.read_bytes()[40:],
        "array.jsonl": b"[1, 2]\n",
        "bare.jsonl": b'{"type":"header","format":"arena-replay","version":1}\n{"type":"result"}\n',
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ReplayError) as e:
            read_replay(tmp_path / name)
        assert name in str(e.value) and "\n" not in str(e.value)


def test_find_replay_by_id_file_name_or_unique_prefix(tmp_path):
    from arena.replays import find_replay, replay_id

    for mid in ("game-s1-aaaa", "game-s1-abbb", "game-s2-cccc"):
        res = play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=1, match_id=mid)
        write_replay(res.replay, replay_path(tmp_path / "sub" if mid.endswith("cccc") else tmp_path, mid))
    p = find_replay(tmp_path, "game-s1-aaaa")
    assert p.name == "game-s1-aaaa.jsonl.gz" and replay_id(p, tmp_path) == "game-s1-aaaa"
    assert find_replay(tmp_path, "game-s1-aaaa.jsonl.gz") == p
    assert find_replay(tmp_path, "game-s1-aa") == p
    assert replay_id(find_replay(tmp_path, "sub/game-s2"), tmp_path) == "sub/game-s2-cccc"
    with pytest.raises(ReplayError, match="start of 2 replay ids.*give more"):
        find_replay(tmp_path, "game-s1-a")
    with pytest.raises(ReplayError, match="arena replay list"):
        find_replay(tmp_path, "nothing")


@pytest.mark.parametrize("game", ["openspiel/tic_tac_toe-v0", "arena/TicTacToe-v0", "openspiel/connect_four-v0",
                                  "arena/KuhnPoker-v1", "arena/SimpleNegotiation-v2", "openspiel/kuhn_poker-v0"])
def test_final_view_is_the_position_after_the_last_move(game):
    """Step lines hold what a player saw before its move; the final view is after the last one."""
    from arena.match.verify import final_view

    replay = play_match(game, ["random", "random"], seed=5, match_id="f").replay
    view = final_view(replay)
    assert not view.note and any(t for t in view.texts)
    last_seen = {s["player"]: s["obs"] for s in replay.steps}
    for p, t in enumerate(view.texts):
        assert t is None or t != last_seen.get(p), (game, p)
    if game == "openspiel/tic_tac_toe-v0":
        count = lambda t: sum(ch in "xo" for ch in t)
        assert count(view.texts[0]) == count(replay.steps[-1]["obs"]) + 1
    if game == "arena/TicTacToe-v0":
        fresh = next(t for t in view.texts if t)
        last_move = replay.steps[-1]["action"].strip("[]")
        assert f"in cell {last_move}." in fresh


def test_header_names_the_package_of_an_entry_point_plugin(tmp_path, monkeypatch):
    from arena.envs.registry import game_origin, load_entry_point_plugins
    from arena.replays import load_hint

    (tmp_path / "ep_replay_games.py").write_text(
        'import gymnasium\ngymnasium.register(id="epr/TicTacToePZ-v3", entry_point="pettingzoo.classic.tictactoe_v3:env")\n')
    dist = tmp_path / "ep_replay_games-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-replay-games\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[arena.envs.replaytest]\nep_replay_games = ep_replay_games\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_entry_point_plugins("arena.envs.replaytest") == ["epr/TicTacToePZ-v3"]
    sys.modules.pop("ep_replay_games", None)
    assert game_origin("epr/TicTacToePZ-v3") == {"entry_point": "pettingzoo.classic.tictactoe_v3:env",
                                                  "plugin_package": "ep-replay-games"}
    header = play_match("epr/TicTacToePZ-v3", ["random", "random"], seed=0, match_id="e").replay.header
    assert header["plugin_package"] == "ep-replay-games"
    assert load_hint(header) == "install the package 'ep-replay-games', which registers it"
