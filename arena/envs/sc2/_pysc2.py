"""The one place the arena imports pysc2.

pysc2 comes from the ``sc2`` extra as ``pysc2-evolved`` (it imports as ``pysc2_evolved``):
DeepMind's ``pysc2==4.0.0`` imports with neither protobuf >= 4 nor Python 3.11. Everything
is imported on first use, so that the arena imports without the extra; a missing extra
raises `MissingExtra` with the one-line fix (``pip install "arena[sc2]"``).

Two things to know about the import itself: ``pysc2_evolved.settings`` reads a ``.env`` file
from the working directory (``python-dotenv``) and logs its ``TIMEOUT_SECONDS`` (default 60:
the websocket connect retries and the socket timeout, in seconds) as a warning.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from types import ModuleType

from arena.errors import require

#: What the error names as needing the extra.
WHAT = "StarCraft II (pysc2)"
EXTRA = "sc2"


def pysc2(module: str = "") -> ModuleType:
    """`pysc2_evolved` or one of its modules (``pysc2("env.sc2_env")``), imported on first use.

    Raises `MissingExtra` naming ``pip install "arena[sc2]"`` when pysc2-evolved is absent.
    """
    got = _LOADED.get(module)
    if got is not None:
        return got
    with _quiet_import():
        package = require("pysc2_evolved", WHAT, EXTRA)
        # Inside an installed pysc2_evolved, a module that fails to import is not a missing extra:
        # let that error through as it is rather than tell the user to install what they have.
        got = importlib.import_module(f"pysc2_evolved.{module}") if module else package
    _LOADED[module] = got
    return got


#: Modules already imported (the adapter asks for them at every step).
_LOADED: dict[str, ModuleType] = {}


@contextlib.contextmanager
def _quiet_import():
    """Import pysc2 without its noise: pygame's banner on stdout, and the ``TIMEOUT_SECONDS`` warning
    its settings log through the root logger (which would also set up root logging for the whole
    process: `logging.warning` calls `basicConfig` when the root logger has no handler)."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    root = logging.getLogger()
    quiet = logging.NullHandler()
    added = not root.handlers
    if added:
        root.addHandler(quiet)
    try:
        yield
    finally:
        if added:
            root.removeHandler(quiet)


def sc2_env() -> ModuleType:
    """`pysc2_evolved.env.sc2_env`: `SC2Env`, `Agent`, `Bot`, `Race`, `Difficulty`."""
    return pysc2("env.sc2_env")


def actions() -> ModuleType:
    """`pysc2_evolved.lib.actions`: `FUNCTIONS`, `RAW_FUNCTIONS`, `FunctionCall`."""
    return pysc2("lib.actions")


def features() -> ModuleType:
    """`pysc2_evolved.lib.features`: `AgentInterfaceFormat`, `Dimensions`, feature layers."""
    return pysc2("lib.features")


def sc_pb() -> ModuleType:
    """`s2clientprotocol.sc2api_pb2`, the protocol's messages (installed with pysc2-evolved)."""
    pysc2()  # the protocol package comes with the extra: name the extra if it is missing
    return require("s2clientprotocol.sc2api_pb2", WHAT, EXTRA)
