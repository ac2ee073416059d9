"""How many worker processes a command may start: one bound for every place a person sets it.

``arena play --workers``, ``arena league run --workers`` and a league config's ``workers``, ``arena
demo --workers``, a training config's ``il.workers``: each worker is a Python process holding the game
and its agents (tens to hundreds of MB), and past the machine's cores more of them only contend. With
no upper bound, ``workers: 300`` started 235 processes on a 2-core machine and gave no result in 300 s.
`MAX_WORKERS` (64) is far above the 2 the shipped configs use and above the cores of most single
machines; a league on a Ray cluster (``backend: ray``) may ask for up to `MAX_RAY_WORKERS` actors,
spread over the cluster's machines. Checked before any process is started (`check_workers`).
"""

from __future__ import annotations

import os
from typing import Any

from arena.errors import ConfigError, shown

MAX_WORKERS = 64
MAX_RAY_WORKERS = 1_024


def check_workers(value: Any, name: str = "workers", most: int = MAX_WORKERS, least: int = 1) -> int:
    """`value` as a whole number in ``[least, most]``, or a one-line `ConfigError` naming `name`, the value
    (shown bounded) and the range, and saying what to give."""
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        cores = os.cpu_count() or 1
        raise ConfigError(f"{name} must be a whole number in [{least}, {most}] (worker processes; this machine has "
                          f"{cores} core{'s' if cores != 1 else ''}: give at most that many), got {shown(value, 40)}")
    return int(value)
