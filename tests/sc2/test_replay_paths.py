"""A StarCraft II replay's header cannot choose which file `replay verify` reads: its match id and its
attachment names are data, checked before they name a file, and a game file is hashed in bounded
memory whatever its size."""

import gzip
import json
import resource

import pytest

from arena.envs.sc2.replays import MAX_ATTACHMENT_BYTES


def _rewrite(path, **header):
    lines = [json.loads(x) for x in gzip.decompress(path.read_bytes()).decode().splitlines()]
    lines[0].update(header)
    path.write_bytes(gzip.compress("\n".join(json.dumps(x) for x in lines).encode() + b"\n"))


@pytest.fixture
def sc2_replay(sc2path, tmp_path):
    from arena.match.runner import MatchJob, run_match_job

    folder = tmp_path / "replays"
    run_match_job(MatchJob("m-sc2-9", "sc2/Simple64-v0", ("sc2:attack", "sc2bot:race=zerg"), seed=3,
                           replay_dir=str(folder)))
    return folder / "m-sc2-9.jsonl.gz"


@pytest.mark.parametrize("match_id", ["../../../../etc/hostname", "/etc/shadow", "..", "a/../../etc/passwd"])
def test_a_match_id_names_no_other_folder(sc2_replay, match_id):
    from arena.match.verify import verify_replay

    _rewrite(sc2_replay, match_id=match_id)
    rep = verify_replay(sc2_replay)
    assert not rep.ok and any("is not a match id" in d for d in rep.differences), rep.differences
    assert not any("is the file the match saved" in c for c in rep.checks)


def test_an_attachment_is_only_the_games_own_file_beside_the_replay(sc2_replay, tmp_path):
    from arena.match.verify import verify_replay

    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    (sc2_replay.parent / "m-sc2-9.txt").symlink_to(secret)
    _rewrite(sc2_replay, attachments={".txt": "0" * 64, "/../../secret.txt": "0" * 64})
    rep = verify_replay(sc2_replay)
    assert not rep.ok and sum("that the game never makes" in d for d in rep.differences) == 2, rep.differences
    assert not rep.checks or not any("secret" in c or ".txt" in c for c in rep.checks)
    # the game's own suffix, but a link to a file elsewhere: not followed
    game_file = sc2_replay.parent / "m-sc2-9.SC2Replay"
    game_file.unlink()
    game_file.symlink_to(secret)
    _rewrite(sc2_replay, attachments={".SC2Replay": "0" * 64})
    rep = verify_replay(sc2_replay)
    assert not rep.ok and any("a link is not followed" in d for d in rep.differences), rep.differences


def test_a_huge_game_file_is_hashed_in_bounded_memory(sc2_replay, monkeypatch):
    from arena.envs.sc2 import replays
    from arena.match.verify import verify_replay

    game_file = sc2_replay.parent / "m-sc2-9.SC2Replay"
    with open(game_file, "wb") as f:  # sparse: 300 MB on paper, nothing on the disk
        f.truncate(300 << 20)
    assert game_file.stat().st_size > MAX_ATTACHMENT_BYTES
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rep = verify_replay(sc2_replay)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert not rep.ok and any("larger than 256 MiB" in d for d in rep.differences), rep.differences
    assert grown_mb < 64, grown_mb
    # under the cap it streams too: a file of 3 chunks hashes to the sha256 of its bytes
    monkeypatch.setattr(replays, "MAX_ATTACHMENT_BYTES", 400 << 20)
    rep = verify_replay(sc2_replay)
    assert any("not the file the match saved (its sha256 differs)" in d for d in rep.differences)
