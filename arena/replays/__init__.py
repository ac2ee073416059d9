"""Replays: the single versioned record of a match (JSONL, gzip optional)."""

from arena.replays.format import (
    FORMAT,
    TIMING_FIELDS,
    VERSION,
    Replay,
    encode_action,
    list_replays,
    new_match_id,
    read_replay,
    replay_path,
    write_replay,
)

__all__ = [
    "FORMAT",
    "TIMING_FIELDS",
    "VERSION",
    "Replay",
    "encode_action",
    "list_replays",
    "new_match_id",
    "read_replay",
    "replay_path",
    "write_replay",
]
