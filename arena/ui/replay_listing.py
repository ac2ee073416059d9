"""Replays on disk at the terminal: a folder's (or a league's) listing, and the replays a command names
by a file, a folder, or a folder and ids (as the listing shows them).

Ids are printed whole, never cut to the terminal's width: the commands that take one need it exact."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from arena.errors import ReplayError

#: A listing row's columns after the id.
COLUMNS = ("game", "agents", "returns", "moves", "outcome")


@dataclass
class ReplayListing:
    """The replays of `folder`: a row each (id, game, agents, returns, moves, outcome), a line for each
    file that could not be read (file and why), and for each game met, how to load it when it is not
    registered (None when it is)."""

    folder: Path
    rows: list[list[str]] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    hints: dict[str, Optional[str]] = field(default_factory=dict)


def read_listing(folder: Path) -> ReplayListing:
    """Read every replay in `folder` (searched recursively) or a league (its database and its files).
    A file that cannot be read is listed as such, never stops the listing."""
    from arena.envs.registry import is_registered
    from arena.replays import list_replays, load_hint, read_replay, replay_id

    listing = ReplayListing(folder)
    for p in list_replays(folder):
        try:
            r = read_replay(p)
            row = [replay_id(p, folder), r.game_id, " vs ".join(map(str, r.header["agents"])),
                   " ".join(f"{float(x):+g}" for x in r.result["returns"]), str(r.result["moves"]),
                   str(r.result["outcome"])]
        except (ReplayError, TypeError, ValueError) as e:
            listing.unreadable.append(str(e) if isinstance(e, ReplayError) else f"{p}: not a valid replay ({e})")
            continue
        listing.rows.append(row)
        if r.game_id not in listing.hints:
            listing.hints[r.game_id] = None if is_registered(r.game_id) else load_hint(r.header)
    return listing


def print_listing(listing: ReplayListing, console: Console) -> None:
    """A table when the terminal is wide enough to keep every id whole beside the details, else one id a
    line with its details under it; then the unreadable files, the games to load, and the count."""
    rows = listing.rows
    if not rows and not listing.unreadable:
        console.print(f"no replays in {listing.folder} (matches write them with `arena play ... --replays FOLDER`; a "
                      "league keeps its own under its folder)", soft_wrap=True)
        return
    width = max((len(r[0]) for r in rows), default=2)
    if console.width >= width + 50:
        t = Table(title=str(listing.folder), title_justify="left")
        t.add_column("id", no_wrap=True, min_width=width)
        for c in COLUMNS:
            t.add_column(c)
        for row in rows:
            t.add_row(*(Text(x) for x in row))
        console.print(t)
    else:  # too narrow for a table that keeps ids whole: one id a line, details under it
        console.print(Text(str(listing.folder), style="bold"), soft_wrap=True)
        for row in rows:
            console.print(Text(row[0]), soft_wrap=True)
            console.print(Text("    " + "  ".join(row[1:]), style="dim"), soft_wrap=True)
    for e in listing.unreadable:
        console.print(Text.assemble(("UNREADABLE ", "red"), e), soft_wrap=True)
    for gid, hint in listing.hints.items():
        if hint is not None:
            n = sum(1 for row in rows if row[1] == gid)
            console.print(Text(f"game {gid} ({n} replays) is not registered: {hint}", style="yellow"), soft_wrap=True)
    bad = listing.unreadable
    console.print(f"{len(rows)} replays" + (f", {len(bad)} unreadable" if bad else ""))


def replay_to_show(path: Path, ident: Optional[str]) -> Path:
    """The one replay `arena replay show` names: a replay file alone, or a folder and an id."""
    from arena.replays import find_replay, is_replay_source

    if is_replay_source(path):
        if ident is None:
            raise ReplayError(f"{path} is a folder: give a replay id too, arena replay show {path} ID "
                              f"(arena replay list {path} shows them)")
        return find_replay(path, ident)
    if ident is not None:
        raise ReplayError(f"{path} is not a folder: give a replay file alone, or a folder and an id")
    return path


def replays_to_verify(path: Path, ids: Sequence[str]) -> list[Path]:
    """The replays `arena replay verify` names: a file, every replay of a folder, or a folder's `ids`."""
    from arena.replays import find_replay, is_replay_source, list_replays

    if is_replay_source(path):
        return [find_replay(path, i) for i in ids] if ids else list_replays(path)
    if ids:
        raise ReplayError(f"{path} is not a folder: ids go with a folder of replays")
    if not path.exists() and "#" not in path.name and \
            not any(path.with_name(path.name + s).exists() for s in (".jsonl", ".jsonl.gz")):
        raise ReplayError(f"no replay or folder at {path}")
    return [path]
