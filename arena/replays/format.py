"""The replay format: versioned JSONL, one match per file (gzip optional).

Line 1, ``{"type": "header", ...}``: format name and version, match id, game id and
settings, engine package versions, seed, agent specs, player names.
Then one ``{"type": "step", ...}`` line per move attempt: step index ``t``, player,
the observation text as that player saw it, the action (JSON), its text, the
event (``ok``, ``invalid``, ``error``, ``timeout``, ``forfeit``), the reason, and the
seconds the agent took. Last, ``{"type": "result", ...}``: returns, winner, draw,
outcome, reason, move count.

Fields that are timing, not outcome (``time``, ``created``, ``duration``) are
listed in `TIMING_FIELDS`; everything else is identical for the same seed and
agents.

Files are written atomically: a temporary file in the same folder, fsync,
rename, fsync of the folder. A killed process leaves at most a ``.tmp-*`` file,
never a partial replay under a replay name.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from arena.errors import ReplayError

FORMAT = "arena-replay"
VERSION = 1
TIMING_FIELDS = frozenset({"time", "created", "duration"})
SUFFIXES = (".jsonl", ".jsonl.gz")
#: Longest action text stored verbatim; longer ones are cut and marked.
MAX_STORED_ACTION = 4096


@dataclass
class Replay:
    header: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def match_id(self) -> str:
        return self.header["match_id"]

    @property
    def game_id(self) -> str:
        return self.header["game_id"]

    def lines(self) -> Iterator[str]:
        yield _dumps(self.header)
        for s in self.steps:
            yield _dumps(s)
        yield _dumps(self.result)

    def to_text(self) -> str:
        return "\n".join(self.lines()) + "\n"

    def without_timing(self) -> "Replay":
        return Replay(_strip(self.header), [_strip(s) for s in self.steps], _strip(self.result))


def _strip(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in TIMING_FIELDS}


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=_jsonable)


def _jsonable(x: Any) -> Any:
    import numpy as np

    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return repr(x)


def encode_action(action: Any) -> Any:
    """A JSON form of whatever an agent returned (garbage included), bounded in size."""
    tp = type(action)
    if tp is int or action is None:
        return action
    if tp is str and len(action) <= MAX_STORED_ACTION:
        return action
    import math

    import numpy as np

    if isinstance(action, bool):
        return action
    if isinstance(action, (int, np.integer)):
        return int(action)
    if isinstance(action, (float, np.floating)):
        f = float(action)
        return f if math.isfinite(f) else {"repr": repr(f)}
    if isinstance(action, str):
        if len(action) > MAX_STORED_ACTION:
            return {"truncated": action[:200], "length": len(action)}
        return action
    if isinstance(action, (list, tuple, np.ndarray)):
        arr = np.asarray(action)
        if arr.dtype.kind in "fiu" and arr.size <= 4096:
            if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
                return {"repr": repr(arr.tolist())[:MAX_STORED_ACTION]}
            return arr.tolist()
    return {"repr": repr(action)[:MAX_STORED_ACTION]}


def new_match_id(game_id: str, seed: int | None) -> str:
    slug = game_id.replace("/", "_")
    return f"{slug}-s{seed if seed is not None else 'x'}-{uuid.uuid4().hex[:8]}"


def replay_path(directory: str | os.PathLike, match_id: str, compress: bool = True) -> Path:
    return Path(directory) / (match_id + (".jsonl.gz" if compress else ".jsonl"))


def write_replay(replay: Replay, path: str | os.PathLike) -> Path:
    """Write atomically: temp file, fsync, rename, fsync the folder."""
    from arena.fsio import atomic_write_bytes

    path = Path(path)
    data = replay.to_text().encode("utf-8")
    if path.name.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6, mtime=0)
    return atomic_write_bytes(path, data)


def read_replay(path: str | os.PathLike) -> Replay:
    path = Path(path)
    if path.is_dir():
        raise ReplayError(f"{path} is a folder; give a replay file (arena replay list {path})")
    if not path.exists():
        cands = [path.with_name(path.name + s) for s in SUFFIXES]
        found = [c for c in cands if c.exists()]
        if not found:
            raise ReplayError(f"no replay at {path}")
        path = found[0]
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise ReplayError(f"{path}: corrupt gzip data ({e})") from e
    header, steps, result = None, [], None
    for n, line in enumerate(io.StringIO(raw.decode("utf-8")), 1):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ReplayError(f"{path}:{n}: not JSON ({e})") from e
        kind = obj.get("type")
        if kind == "header":
            header = obj
        elif kind == "step":
            steps.append(obj)
        elif kind == "result":
            result = obj
        else:
            raise ReplayError(f"{path}:{n}: unknown line type {kind!r}")
    if header is None:
        raise ReplayError(f"{path}: no header line; not an arena replay")
    if header.get("format") != FORMAT:
        raise ReplayError(f"{path}: format {header.get('format')!r} is not {FORMAT!r}")
    if header.get("version") != VERSION:
        raise ReplayError(
            f"{path}: replay format version {header.get('version')}, this arena reads version {VERSION}; "
            "re-record it with this arena or read it with the version that wrote it"
        )
    if result is None:
        raise ReplayError(f"{path}: no result line; the replay is incomplete")
    return Replay(header, steps, result)


def list_replays(directory: str | os.PathLike) -> list[Path]:
    d = Path(directory)
    if not d.is_dir():
        raise ReplayError(f"no replay folder at {d}")
    return sorted(p for p in d.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES) and not p.name.startswith("."))
