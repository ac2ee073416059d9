"""Typed configuration: YAML files load into dataclasses; unknown keys and bad values are errors naming the key."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union

import yaml

from arena.errors import ConfigError

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
        raise ConfigError(errors[0] if len(errors) == 1 else f"{where}: {value!r} fits none of {_type_name(tp)}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping for {tp.__name__}, got {type(value).__name__} {value!r}")
        return from_dict(tp, value, where)
    if origin in (list, typing.List, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__} {value!r}")
        item = args[0] if args else Any
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin in (dict, typing.Dict):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__} {value!r}")
        kt, vt = args if args else (Any, Any)
        return {_convert(kt, k, f"{where}.{k}"): _convert(vt, v, f"{where}.{k}") for k, v in value.items()}
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(repr, args))}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {type(value).__name__} {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {type(value).__name__} {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {type(value).__name__} {value!r}")
        return value
    return value


def from_dict(cls: type[T], data: dict, where: str = "") -> T:
    """Build dataclass `cls` from a mapping; unknown keys and wrong types raise ConfigError naming the key."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in data if k not in fields]
    if unknown:
        k = unknown[0]
        import difflib

        close = difflib.get_close_matches(str(k), list(fields), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(fields)})"
        raise ConfigError(f"{where + '.' if where else ''}{k}: unknown key{hint}")
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


def yaml_error(path: str | Path, e: Exception) -> str:
    """A YAML syntax error in one line: where and what."""
    mark = getattr(e, "problem_mark", None)
    where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = " ".join(str(getattr(e, "problem", None) or e).split())
    return f"{path}:{where}: not valid YAML: {what}"


def read_yaml_mapping(path: str | Path) -> dict:
    """A YAML file whose top level is a mapping; a missing file, bad YAML or another top level is a
    one-line `ConfigError` naming the file."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"no config file at {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(yaml_error(path, e)) from None
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
