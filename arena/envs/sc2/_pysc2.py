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

import importlib
from types import ModuleType

from arena.errors import require

#: What the error names as needing the extra.
WHAT = "StarCraft II (pysc2)"
EXTRA = "sc2"


def pysc2(module: str = "") -> ModuleType:
    """`pysc2_evolved` or one of its modules (``pysc2("env.sc2_env")``), imported on first use.

    Raises `MissingExtra` naming ``pip install "arena[sc2]"`` when pysc2-evolved is absent.
    """
    package = require("pysc2_evolved", WHAT, EXTRA)
    if not module:
        return package
    # Inside an installed pysc2_evolved, a module that fails to import is not a missing extra:
    # let that error through as it is rather than tell the user to install what they have.
    return importlib.import_module(f"pysc2_evolved.{module}")


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
