"""Typed configuration: YAML files load into dataclasses; unknown keys and bad values are errors naming the key.

A config file is data, and its reading is bounded: a file larger than `MAX_CONFIG_BYTES` (1 MiB),
not UTF-8, with more than `MAX_YAML_ALIASES` (100) aliases, with an alias inside its own anchor,
whose aliases would expand it to more than `MAX_YAML_NODES` (100,000) values, or nested more than
`MAX_YAML_DEPTH` (64) deep is refused with one line before anything else reads it; error messages
show at most `arena.errors.SHOWN_CHARS` (200) characters of any value (`arena.errors.shown`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union

import yaml

from arena.errors import ConfigError, clipped, shown

#: The largest config file read (bytes). League and training configs are a few kilobytes.
MAX_CONFIG_BYTES = 1 << 20
#: The most YAML aliases (``*name``, ``<<: *name``) a config may use.
MAX_YAML_ALIASES = 100
#: The most values (scalars, lists, mappings) a config may hold once its aliases are expanded.
MAX_YAML_NODES = 100_000
#: The deepest nesting of lists and mappings a config may have (the arena's own go 4 deep).
MAX_YAML_DEPTH = 64

T = TypeVar("T")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(a, value, where)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{where}: {shown(value)} fits none of {_type_name(tp)}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping for {tp.__name__}, got {type(value).__name__} {shown(value)}")
        return from_dict(tp, value, where)
    if origin in (list, typing.List, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__} {shown(value)}")
        item = args[0] if args else Any
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin in (dict, typing.Dict):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__} {shown(value)}")
        kt, vt = args if args else (Any, Any)
        return {_convert(kt, k, f"{where}.{_key(k)}"): _convert(vt, v, f"{where}.{_key(k)}") for k, v in value.items()}
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: {shown(value)} is not one of {', '.join(map(repr, args))}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {type(value).__name__} {shown(value)}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {type(value).__name__} {shown(value)}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {shown(value)}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {type(value).__name__} {shown(value)}")
        return value
    return value


def from_dict(cls: type[T], data: dict, where: str = "") -> T:
    """Build dataclass `cls` from a mapping; unknown keys and wrong types raise ConfigError naming the key."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in data if k not in fields]
    if unknown:
        k = unknown[0]
        moved = getattr(cls, "moved_keys", None) or {}
        if isinstance(k, str) and k in moved:
            prefix = where + "." if where else ""
            raise ConfigError(f"{prefix}{k}: this key moved to {prefix}{moved[k]} (write it under "
                              f"{prefix}{moved[k].rsplit('.', 1)[0]}:)")
        import difflib

        close = difflib.get_close_matches(str(k)[:100], list(fields), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(fields)})"
        raise ConfigError(f"{where + '.' if where else ''}{_key(k)}: unknown key{hint}")
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _convert(hints[name], value, f"{where + '.' if where else ''}{name}")
    missing = [n for n, f in fields.items() if n not in kwargs and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{where + '.' if where else ''}{missing[0]}: required key is missing")
    try:
        obj = cls(**kwargs)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{where or cls.__name__}: {e}") from e
    return obj


def _key(k: Any) -> str:
    """A mapping key as it appears in a message's path (`games[0].kwargs.rows`): short, whatever its size."""
    return clipped(k if isinstance(k, str) else shown(k), 60)


def yaml_error(path: str | Path, e: Exception) -> str:
    """A YAML syntax error in one line: where and what."""
    mark = getattr(e, "problem_mark", None)
    where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = " ".join(str(getattr(e, "problem", None) or e).split())
    return f"{path}:{where}: not valid YAML: {what}"


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader counting aliases as it composes (it refuses the one over the limit)."""

    aliases = 0
    depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise ConfigError(f"more than {MAX_YAML_ALIASES} YAML aliases (*name): write the values out")
        # PyYAML composes nested values by recursion: refuse the depth before Python's stack runs out.
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise ConfigError(f"line {mark.line + 1}: lists and mappings nested more than {MAX_YAML_DEPTH} deep: "
                                  "a config is a few levels deep")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _expanded_size(root: yaml.Node) -> int:
    """How many values the node graph holds with every alias expanded, counted over its distinct nodes
    (memoised: linear in the document, not in the expansion). ConfigError for an alias inside its own
    anchor (a structure that contains itself) and past `MAX_YAML_NODES`."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    # Iterative depth-first walk: a deeply nested document must not exhaust Python's stack either.
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            children = _children(node)
            total = 1 + sum(sizes[id(c)] for c in children)
            open_.discard(key)
            sizes[key] = total
            if total > MAX_YAML_NODES:
                raise ConfigError(f"expands to more than {MAX_YAML_NODES:,} values through its aliases (*name): "
                                  "write the values out")
            continue
        if key in sizes:
            continue
        if key in open_:
            raise ConfigError("an alias (*name) refers to the structure it is inside: a config cannot contain itself")
        open_.add(key)
        stack.append((node, True))
        for c in _children(node):
            if id(c) in open_:
                raise ConfigError("an alias (*name) refers to the structure it is inside: a config cannot contain itself")
            if id(c) not in sizes:
                stack.append((c, False))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for kv in node.value for x in kv]
    return []


def load_yaml_text(text: str) -> Any:
    """`yaml.safe_load` with bounds: at most `MAX_YAML_ALIASES` aliases, no self-containing structure, at
    most `MAX_YAML_NODES` values once expanded. Raises yaml.YAMLError or ConfigError (without a file name)."""
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        try:
            return loader.construct_document(node)
        except ValueError as e:  # Python's int() limit: a number of more than 4,300 digits
            raise ConfigError(f"a value cannot be read: {clipped(str(e), 120)}") from None
    finally:
        loader.dispose()


def writable_folder(path: str | Path, what: str) -> Path:
    """Make sure folder `path` exists (created if missing) and can be written; else a one-line ConfigError
    that says `what` it is (``--dir``, ``--replays``) and why not: an existing file, a place that
    cannot be created or written."""
    import errno
    import os

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} {path} is a file, not a folder: give a folder (it is created if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            raise  # a full disk is DiskFull's to report (`arena.fsio.disk_full_as_error`)
        raise ConfigError(f"{what} {path}: cannot create this folder ({e.strerror or e}): give a folder you "
                          "can write to") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {path}: this folder is not writable: give a folder you can write to")
    return path


def read_config_text(path: str | Path) -> str:
    """A config file's text: at most `MAX_CONFIG_BYTES` read, UTF-8; else a one-line ConfigError naming the file."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"no config file at {path}")
    if path.is_dir():
        raise ConfigError(f"{path} is a folder: give the config file (a .yaml file)")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)  # never more, whatever the file (a pipe, /dev/zero) says its size is
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config ({e.strerror or e})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES >> 20} MiB, the most a config may be: "
                          "is it the right file?")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}): "
                          "save the file as UTF-8") from None


def read_yaml_mapping(path: str | Path) -> dict:
    """A YAML file whose top level is a mapping; a missing, oversized or non-UTF-8 file, bad YAML, too
    many aliases or another top level is a one-line `ConfigError` naming the file."""
    path = Path(path)
    text = read_config_text(path)
    try:
        data = load_yaml_text(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(yaml_error(path, e)) from None
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, got {type(data).__name__}")
    return data


def load_yaml(cls: type[T], path: str | Path, overrides: dict | None = None) -> T:
    path = Path(path)
    data = read_yaml_mapping(path)
    for k, v in (overrides or {}).items():
        if v is not None:
            data[k] = v
    try:
        return from_dict(cls, data)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def to_dict(obj: Any) -> Any:
    return dataclasses.asdict(obj)
