"""A module a hostile replay names: importing it, calling `boom` or making `Boom` writes the file that
``ARENA_SENTINEL`` names, so a test sees whether anything a replay named was imported or called."""

import os


def _touch(what: str) -> None:
    path = os.environ.get("ARENA_SENTINEL")
    if path:
        with open(path, "a") as f:
            f.write(what + "\n")


_touch("imported")


def boom(*args, **kwargs):
    _touch("called")


class Boom:
    def __init__(self, *args, **kwargs):
        _touch("made")


