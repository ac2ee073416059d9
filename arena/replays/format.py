"""The replay format: versioned JSONL, one match per file (gzip optional).

Line 1, ``{"type": "header", ...}``: format name and version, match id, game id and
settings, engine package versions, seed, agent specs, player names, and ``record``, what
the step lines hold (``"actions"`` or ``"text"``; replays without it are ``"text"``).
Then one ``{"type": "step", ...}`` line per move attempt: step index ``t``, player,
the action (JSON), the event (``ok``, ``invalid``, ``error``, ``timeout``, ``forfeit``),
the reason and the seconds the agent took. Last, ``{"type": "result", ...}``: returns,
winner, draw, outcome, reason, move count.

Two record modes (`RECORD_MODES`):

* ``"text"``: every step line also holds ``obs``, the observation text as that player saw
  it, and ``action_text``, the move as the game writes it; ``reason`` is always there
  (null when the move was fine). What an imitation learner or a tabular learner reads.
* ``"actions"``: only what re-simulation needs (the seed is in the header, the actions and
  events in the steps): ``reason`` only where there is one, ``time`` rounded to 0.1 us, and
  ``"refused": true`` on an engine's refusal of a simultaneous move (which, unlike a move
  attempt, is not played back). `arena.match.verify` re-simulates such a replay to get each
  player's view at every step (``arena replay show`` does). A step line is about 70 bytes;
  a random tic-tac-toe match is 1.2 KB (0.5 KB gzipped) against 1.8 KB (0.65 KB) with text
  for OpenSpiel's and 6.6 KB (1.1 KB) for TextArena's, whose views repeat the history.

In memory a replay the match loop just recorded keeps its steps as compact rows and builds
the step dicts only when `Replay.steps` is first read (or the replay is written), so a
match whose replay nobody reads pays for a tuple per move, not a dict.

Header keys ``entry_point`` (the Gymnasium spec's entry point of the game) and, for games
of plug-ins, ``plugin`` (the module passed to ``--plugin``) or ``plugin_package`` (the
installed package that registered the game) say where the game came from. They are
advice for the person re-simulating the replay: no module a replay names is imported
unless the user passes it as ``--plugin``.

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
import zlib
from pathlib import Path
from typing import Any, Iterator

from arena.errors import ReplayError

FORMAT = "arena-replay"
VERSION = 1
TIMING_FIELDS = frozenset({"time", "created", "duration"})
SUFFIXES = (".jsonl", ".jsonl.gz")
#: Longest action text stored verbatim; longer ones are cut and marked.
MAX_STORED_ACTION = 4096


RECORD_MODES = ("actions", "text")


class Replay:
    """One match: the header, the step lines and the result line (see the module docstring)."""

    __slots__ = ("header", "result", "_steps", "_rows")

    def __init__(self, header: dict[str, Any], steps: list[dict[str, Any]] | None = None,
                 result: dict[str, Any] | None = None):
        self.header = header
        self._steps = [] if steps is None else steps
        self.result = {} if result is None else result
        self._rows = None

    @classmethod
    def from_rows(cls, header: dict[str, Any], rows: list[tuple], result: dict[str, Any]) -> "Replay":
        """A replay whose steps are the match loop's rows ``(t, player, obs, action, action_text,
        event, reason, time)``, turned into step dicts (in the header's record mode) when first read."""
        replay = cls(header, None, result)
        replay._steps = None
        replay._rows = rows
        return replay

    @property
    def steps(self) -> list[dict[str, Any]]:
        steps = self._steps
        if steps is None:
            to_step = _text_step if self.record == "text" else _actions_step
            steps = self._steps = [to_step(r) for r in self._rows]
            self._rows = None
        return steps

    @steps.setter
    def steps(self, steps: list[dict[str, Any]]) -> None:
        self._steps, self._rows = steps, None

    @property
    def record(self) -> str:
        """What the step lines hold: ``"text"`` (observations too) or ``"actions"``."""
        return self.header.get("record", "text")

    @property
    def match_id(self) -> str:
        return self.header["match_id"]

    @property
    def game_id(self) -> str:
        return self.header["game_id"]

    def __len__(self) -> int:
        """The number of step lines (without building them)."""
        return len(self._rows) if self._steps is None else len(self._steps)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Replay):
            return NotImplemented
        return (self.header, self.steps, self.result) == (other.header, other.steps, other.result)

    def __repr__(self) -> str:
        return f"Replay({self.header.get('match_id')!r}, {self.header.get('game_id')!r}, {len(self)} steps)"

    def __getstate__(self):
        return self.header, self._steps, self.result, self._rows

    def __setstate__(self, state) -> None:
        self.header, self._steps, self.result, self._rows = state

    def lines(self) -> Iterator[str]:
        yield _dumps(self.header)
        for s in self.steps:
            yield _dumps(s)
        yield _dumps(self.result)

    def to_text(self) -> str:
        return "\n".join(self.lines()) + "\n"

    def without_timing(self) -> "Replay":
        return Replay(_strip(self.header), [_strip(s) for s in self.steps], _strip(self.result))


def _text_step(row: tuple) -> dict[str, Any]:
    t, p, obs, action, action_text, event, reason, dt = row
    if event == "refused":  # an engine's refusal of a simultaneous move: written as before, no obs, no time
        event = "invalid"
    return {"type": "step", "t": t, "player": p, "obs": obs, "action": action, "action_text": action_text,
            "event": event, "reason": reason, "time": dt}


def _actions_step(row: tuple) -> dict[str, Any]:
    t, p, _obs, action, _text, event, reason, dt = row
    step = {"type": "step", "t": t, "player": p, "action": action, "event": event}
    if event == "refused":
        step["event"] = "invalid"
        step["refused"] = True
    if reason is not None:
        step["reason"] = reason
    step["time"] = round(dt, 7)
    return step


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


def write_replay(replay: Replay, path: str | os.PathLike, durable: bool = True) -> Path:
    """Write atomically: temp file, fsync, rename, fsync the folder. ``durable=False`` skips the two
    fsyncs (still atomic): for a caller that syncs a whole batch of files at once before it relies
    on them (the league's group commit, `arena.fsio.sync_folder`)."""
    from arena.fsio import atomic_write_bytes

    path = Path(path)
    data = replay.to_text().encode("utf-8")
    if path.name.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6, mtime=0)
    return atomic_write_bytes(path, data, durable=durable)


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
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ReplayError(f"{path}: cannot be read ({e.strerror or e})") from e
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise ReplayError(f"{path}: corrupt gzip data ({e})") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ReplayError(f"{path}: not UTF-8 text, not an arena replay ({e.reason} at byte {e.start})") from e
    header, steps, result = None, [], None
    for n, line in enumerate(io.StringIO(text), 1):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ReplayError(f"{path}:{n}: not JSON ({e})") from e
        if not isinstance(obj, dict):
            raise ReplayError(f"{path}:{n}: a JSON {type(obj).__name__}, not a replay line (an object with a type)")
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
    missing = [k for k in _REQUIRED_HEADER if k not in header] + [f"result {k}" for k in _REQUIRED_RESULT if k not in result]
    if missing:
        raise ReplayError(f"{path}: the replay lacks {', '.join(missing)}; not written by this arena")
    return Replay(header, steps, result)


_REQUIRED_HEADER = ("match_id", "game_id", "players", "agents")
_REQUIRED_RESULT = ("returns", "moves", "outcome")


def list_replays(directory: str | os.PathLike) -> list[Path]:
    d = Path(directory)
    if not d.is_dir():
        raise ReplayError(f"no replay folder at {d}")
    return sorted(p for p in d.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES) and not p.name.startswith("."))


def replay_id(path: str | os.PathLike, directory: str | os.PathLike) -> str:
    """The id `arena replay list` shows: the path under `directory`, without ``.jsonl``/``.jsonl.gz``.

    For replays the arena writes this is the match id (plus the sub-folder, if any).
    """
    rel = Path(path).relative_to(directory).as_posix()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if rel.endswith(suffix):
            return rel[: -len(suffix)]
    return rel


def find_replay(directory: str | os.PathLike, ident: str) -> Path:
    """A replay in `directory` by its id (as `arena replay list` shows it), its file name, or a unique id prefix."""
    d = Path(directory)
    exact = d / ident
    if exact.is_file():
        return exact
    for suffix in SUFFIXES:
        if (d / (ident + suffix)).is_file():
            return d / (ident + suffix)
    paths = list_replays(d)
    ids = {replay_id(p, d): p for p in paths}
    if ident in ids:
        return ids[ident]
    hits = sorted(i for i in ids if i.startswith(ident)) if ident else []
    if len(hits) == 1:
        return ids[hits[0]]
    if hits:
        shown = ", ".join(hits[:3]) + (", ..." if len(hits) > 3 else "")
        raise ReplayError(f"{ident!r} is the start of {len(hits)} replay ids in {d} ({shown}): give more of the id")
    raise ReplayError(f"no replay {ident!r} in {d}: `arena replay list {d}` shows the ids")


def load_hint(header: dict[str, Any]) -> str:
    """How to make a replay's game available again: the ``--plugin`` to pass, or the package to install.

    Only says what to do: nothing a replay names is ever imported on its own (a replay from
    elsewhere must not run code).
    """
    if header.get("plugin"):
        return f"pass --plugin {header['plugin']}"
    if header.get("plugin_package"):
        return f"install the package {header['plugin_package']!r}, which registers it"
    if header.get("entry_point"):
        return f"pass --plugin MODULE, the module that registers it (its entry point was {header['entry_point']})"
    return "pass --plugin MODULE, the module that registers it"
