"""Replays: the single versioned record of a match (JSONL, gzip optional)."""

from arena.replays.format import (
    FORMAT,
    TIMING_FIELDS,
    VERSION,
    Replay,
    encode_action,
    find_replay,
    list_replays,
    load_hint,
    new_match_id,
    read_replay,
    replay_id,
    replay_path,
    write_replay,
)

__all__ = [
    "FORMAT",
    "TIMING_FIELDS",
    "VERSION",
    "Replay",
    "encode_action",
    "find_replay",
    "list_replays",
    "load_hint",
    "new_match_id",
    "read_replay",
    "replay_id",
    "replay_path",
    "write_replay",
]
