"""Code the person names, and only that: how ``--plugin``, an agent spec's ``module:Class`` and a
config's ``module:Class`` learner import their module.

No ``arena`` command puts the working folder (or any folder) on the import path: a folder of
downloaded replays or a cloned league may hold a ``numpy.py`` or a ``pyspiel.py``, and nothing in it
may run because a command was started there. A module the person names is looked for among the
installed packages first; only when none of that name is installed is it taken from the working
folder (or, for ``--plugin path/to/file.py``, from the file's folder), and only under that one name:
the folder is never searched for anything else. A plug-in that is a package brings its submodules
along (they are found through the package's ``__path__``); sibling files of a single-file plug-in
are not importable from it (make it a package, or install it).

Worker processes find the same modules: the names and their folders travel in the environment
(`ENV`), and importing ``arena`` in a worker installs the same finder.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from types import ModuleType

#: The environment variable that carries ``{top-level module name: folder}`` to worker processes.
ENV = "ARENA_USER_MODULES"

_allowed: dict[str, str] = {}


class _NamedModuleFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: finds a top-level module only if it was named, only in its folder."""

    def find_spec(self, fullname, path=None, target=None):
        if path is not None or fullname not in _allowed:  # submodules come through their package's __path__
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [_allowed[fullname]])


_FINDER = _NamedModuleFinder()


def _install() -> None:
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)


def _allow(top: str, folder: str) -> None:
    _allowed[top] = folder
    os.environ[ENV] = json.dumps(_allowed, sort_keys=True)
    _install()


def install_from_environment() -> None:
    """In a worker: allow the modules the parent allowed (called when ``arena`` is imported)."""
    text = os.environ.get(ENV)
    if not text:
        return
    try:
        named = json.loads(text)
    except ValueError:
        return
    if isinstance(named, dict):
        _allowed.update({k: v for k, v in named.items() if isinstance(k, str) and isinstance(v, str)})
        _install()


def _installed(top: str) -> bool:
    """Whether a module `top` is found without the named-module finder (installed, or built in)."""
    if top in sys.modules:
        return True
    for finder in sys.meta_path:
        if finder is _FINDER or not hasattr(finder, "find_spec"):
            continue
        try:
            if finder.find_spec(top, None) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def import_user_module(name: str, folder: str | os.PathLike | None = None) -> ModuleType:
    """Import the module `name` the person named: the installed one if there is one, else the one in
    `folder` (default: the working folder). With `folder` given explicitly (a plug-in file's folder),
    an installed module of the same name is an error rather than a silent swap."""
    from arena.errors import ArenaError, clipped

    top = name.partition(".")[0]
    if not top.isidentifier():
        raise ModuleNotFoundError(f"no module named {clipped(name)!r}", name=name)
    if top not in _allowed:
        if _installed(top):
            if folder is not None and os.path.isfile(os.path.join(folder, top + ".py")):
                raise ArenaError(f"the plug-in file {os.path.join(folder, top + '.py')} has the name of an installed "
                                 f"module ({top}): rename the file")
        else:
            _allow(top, os.path.abspath(folder if folder is not None else os.getcwd()))
    return importlib.import_module(name)


def user_module_exists(name: str) -> bool:
    """Whether `import_user_module(name)` would find a module, without importing anything."""
    top = name.partition(".")[0]
    if not top.isidentifier():
        return False
    if top in _allowed or _installed(top):
        return True
    return importlib.machinery.PathFinder.find_spec(top, [os.getcwd()]) is not None
