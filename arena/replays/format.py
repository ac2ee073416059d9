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

A league keeps its replays either as such files (``DIR/replays/``) or, by default, as the same
gzipped bytes in a table of its database (`arena.replays.archive`: ``replays(match_id, data)``), written
in the transaction that records the match. A replay in a database is named ``DB#MATCH_ID``
(``runs/quick/league.db#m00000001``): `read_replay` takes that name like a path, and
`list_replays` / `find_replay` given a league folder (or its ``replays`` folder, or the
database) see both forms.
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

from arena.errors import ReplayError, ReplayRefused, unreadable_league_db
from arena.replays import archive
from arena.replays.archive import BLOB_SCHEMA, BLOB_TABLE  # noqa: F401 (the table, named where the format is)

FORMAT = "arena-replay"
VERSION = 1
TIMING_FIELDS = frozenset({"time", "created", "duration"})
SUFFIXES = (".jsonl", ".jsonl.gz")
#: Longest action text stored verbatim; longer ones are cut and marked.
MAX_STORED_ACTION = 4096
#: The largest replay read, in bytes of JSON text (after decompression): a bigger one is refused
#: before it is expanded any further (a 0.6 MB gzip can expand to gigabytes). The largest replays
#: the arena writes, text replays of 1,000-step prosthetics episodes and LLM games, are a few MB.
MAX_REPLAY_BYTES = 64 << 20


RECORD_MODES = ("actions", "text")

#: A league folder's database (its replays table), and the folder of its replay files.
LEAGUE_DB, LEAGUE_REPLAYS = "league.db", "replays"
_SQLITE_MAGIC = b"SQLite format 3\x00"


class Replay:
    """One match: the header, the step lines and the result line (see the module docstring)."""

    __slots__ = ("header", "result", "_steps", "_rows", "source")

    def __init__(self, header: dict[str, Any], steps: list[dict[str, Any]] | None = None,
                 result: dict[str, Any] | None = None):
        self.header = header
        self._steps = [] if steps is None else steps
        self.result = {} if result is None else result
        self._rows = None
        #: The file it was read from (`read_replay`), else None: where the game's own files lie beside it.
        self.source: str | None = None

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
    """A JSON form of whatever an agent returned (garbage included), bounded in size: the game's
    codec (`arena.envs.actions.json_form`; a structured move as the dict of its parts)."""
    tp = type(action)
    if tp is int or action is None or (tp is str and len(action) <= MAX_STORED_ACTION):
        return action
    from arena.envs.actions import json_form

    return json_form(action)


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
    return atomic_write_bytes(path, replay_bytes(replay, path.name.endswith(".gz")), durable=durable)


def replay_bytes(replay: Replay, compress: bool = True) -> bytes:
    """The bytes of a replay file (gzipped: a ``.jsonl.gz`` file's, the form a league database keeps)."""
    data = replay.to_text().encode("utf-8")
    return gzip.compress(data, compresslevel=6, mtime=0) if compress else data


def blob_ref(db: str | os.PathLike, match_id: str) -> str:
    """The name of the replay of `match_id` kept in database `db`: ``DB#MATCH_ID``."""
    return f"{db}#{match_id}"


def _is_db(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def _split_ref(path: Path) -> tuple[Path, str] | None:
    """(database, match id) when `path` names a replay in a database (``DB#ID``), else None."""
    db, sep, mid = str(path).rpartition("#")
    if not sep or not mid or "/" in mid:
        return None
    return (Path(db), mid) if _is_db(Path(db)) else None


def _read_blob(db: Path, match_id: str) -> bytes:
    try:
        data = archive.read(db, match_id, MAX_REPLAY_BYTES)
    except archive.TooLarge:
        raise _too_big(blob_ref(db, match_id)) from None
    if data is None:
        raise ReplayError(f"no replay {match_id!r} in {db}: `arena replay list {db.parent}` shows the ids")
    return data


def league_db(directory: str | os.PathLike) -> Path | None:
    """The league database that keeps replays for `directory`: the database itself, a league folder's
    ``league.db``, or (for a league's ``replays`` folder) its parent's; None if there is none."""
    d = Path(directory)
    for cand in (d, d / LEAGUE_DB, d.parent / LEAGUE_DB if d.name == LEAGUE_REPLAYS else None):
        if cand is not None and cand.is_file():
            if _is_db(cand):
                return cand
            if cand.name == LEAGUE_DB:  # a league's database that is not one: never "no replays"
                raise ReplayError(str(unreadable_league_db(cand, "file is not a database")))
    return None


def is_replay_source(path: str | os.PathLike) -> bool:
    """Whether `path` holds many replays (a folder, or a league's database or its replays folder)."""
    return Path(path).is_dir() or league_db(path) is not None


def read_replay(path: str | os.PathLike) -> Replay:
    """A replay file (``.jsonl``, ``.jsonl.gz``; the suffix may be left out) or a replay in a league
    database (``DB#MATCH_ID``)."""
    path = Path(path)
    if path.is_dir():
        raise ReplayError(f"{path} is a folder; give a replay file (arena replay list {path})")
    if not path.exists():
        ref = _split_ref(path)
        if ref is not None:
            return parse_replay(_read_blob(*ref), str(path))
        cands = [path.with_name(path.name + s) for s in SUFFIXES]
        found = [c for c in cands if c.exists()]
        if not found:
            raise ReplayError(f"no replay at {path}")
        path = found[0]
    elif _is_db(path):
        raise ReplayError(f"{path} is a league database; give a replay in it, {path}#ID "
                          f"(arena replay list {path.parent} shows the ids)")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_REPLAY_BYTES + 1)
    except OSError as e:
        raise ReplayError(f"{path}: cannot be read ({e.strerror or e})") from e
    if len(raw) > MAX_REPLAY_BYTES:
        raise _too_big(str(path))
    return parse_replay(raw, str(path))


def _too_big(path: str) -> ReplayRefused:
    cap = MAX_REPLAY_BYTES
    size = f"{cap >> 20} MiB" if cap % (1 << 20) == 0 else f"{cap} bytes"
    return ReplayRefused(f"{path}: larger than {size} of replay text, the most a replay may hold; refused unread")


def _gunzip(raw: bytes, path: str) -> bytes:
    """The gzip members of `raw` decompressed, at most `MAX_REPLAY_BYTES` of them (else `ReplayRefused`,
    without expanding the rest)."""
    out, total = [], 0
    while raw:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = d.decompress(raw, MAX_REPLAY_BYTES + 1 - total)
            if d.unconsumed_tail:
                raise _too_big(path)
            chunk += d.flush()
        except zlib.error as e:
            raise ReplayError(f"{path}: corrupt gzip data ({e})") from e
        if not d.eof:
            raise ReplayError(f"{path}: corrupt gzip data (the compressed data ends early)")
        total += len(chunk)
        if total > MAX_REPLAY_BYTES:
            raise _too_big(path)
        out.append(chunk)
        raw = d.unused_data.lstrip(b"\0")  # the next member, if any (zero padding is allowed)
    return b"".join(out)


def parse_replay(raw: bytes, path: str = "replay") -> Replay:
    """A replay from the bytes of a replay file (gzipped or not); `path` names it in errors."""
    if raw[:2] == b"\x1f\x8b":
        raw = _gunzip(raw, path)
    elif len(raw) > MAX_REPLAY_BYTES:
        raise _too_big(path)
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
        except RecursionError:
            raise ReplayError(f"{path}:{n}: JSON nested too deeply for a replay line") from None
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
    replay = Replay(header, steps, result)
    replay.source = path if path != "replay" else None
    return replay


_REQUIRED_HEADER = ("match_id", "game_id", "players", "agents")
_REQUIRED_RESULT = ("returns", "moves", "outcome")


def list_replays(directory: str | os.PathLike) -> list[Path]:
    """The replays under `directory`, sorted: its replay files (searched recursively) and, for a league
    (its folder, its ``replays`` folder or its database), the replays its database keeps, as
    ``DB#MATCH_ID``. A league folder's files are those under its ``replays`` folder."""
    d = Path(directory)
    db = league_db(d)
    if not d.is_dir() and db is None:
        raise ReplayError(f"no replay folder at {d}")
    files = d / LEAGUE_REPLAYS if db is not None and db.parent == d else d
    found = sorted(p for p in files.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES)
                   and not p.name.startswith(".")) if files.is_dir() else []
    return found + [Path(blob_ref(db, mid)) for mid in archive.ids(db)] if db is not None else found


def replay_id(path: str | os.PathLike, directory: str | os.PathLike) -> str:
    """The id `arena replay list` shows: the path under `directory`, without ``.jsonl``/``.jsonl.gz``.

    For replays the arena writes this is the match id (plus the sub-folder, if any).
    """
    ref = _split_ref(Path(path))
    if ref is not None:
        return ref[1]
    d = Path(directory)
    db = league_db(d)
    if db is not None and db.parent == d:  # a league folder: its files' ids are under its replays folder
        d = d / LEAGUE_REPLAYS
    rel = Path(path).relative_to(d).as_posix()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if rel.endswith(suffix):
            return rel[: -len(suffix)]
    return rel


def find_replay(directory: str | os.PathLike, ident: str) -> Path:
    """A replay in `directory` by its id (as `arena replay list` shows it), its file name, or a unique id prefix."""
    d = Path(directory)
    db = league_db(d)
    if db is not None:  # a league: blobs in its database and files in its replays folder
        files = d / LEAGUE_REPLAYS if db.parent == d else d
        if ident and ".." not in ident.split("/") and not Path(ident).is_absolute():  # an id, not a path
            if "/" not in ident and archive.ids(db, ident)[:1] == [ident]:
                return Path(blob_ref(db, ident))
            for suffix in ("",) + SUFFIXES:
                if (files / (ident + suffix)).is_file():
                    return files / (ident + suffix)
        hits = sorted(set(archive.ids(db, ident) if "/" not in ident else []) | set(_file_ids(files, ident)))
        if len(hits) == 1:
            return find_replay(d, hits[0])
        if hits:
            shown = ", ".join(hits[:3]) + (", ..." if len(hits) > 3 else "")
            raise ReplayError(f"{ident!r} is the start of several replay ids in {d} ({shown}): give more of the id")
        raise ReplayError(f"no replay {ident!r} in {d}: `arena replay list {d}` shows the ids")
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


def _file_ids(files: Path, prefix: str) -> list[str]:
    if not files.is_dir() or not prefix:
        return []
    return [i for i in (replay_id(p, files) for p in list_replays(files)) if i.startswith(prefix)]


def load_hint(header: dict[str, Any]) -> str:
    """How to make a replay's game available again: the ``--plugin`` to pass, or the package to install.

    Only says what to do: nothing a replay names is ever imported on its own (a replay from
    elsewhere must not run code).
    """
    def clip(x: Any) -> str:
        s = str(x)
        return s if len(s) <= 100 else s[:97] + "..."

    if header.get("plugin"):
        return f"pass --plugin {clip(header['plugin'])}"
    if header.get("plugin_package"):
        return f"install the package {clip(header['plugin_package'])!r}, which registers it"
    if header.get("entry_point"):
        return f"pass --plugin MODULE, the module that registers it (its entry point was {clip(header['entry_point'])})"
    return "pass --plugin MODULE, the module that registers it"
