"""A person plays one of the league's players (at the terminal here, in the browser through
`arena.ui.web.play`); the match is stored and rated as the league's own are.

People are players of their own: a person's name (`check_name`: 1-24 letters, digits, ``.``, ``_``,
``-``; no league player's name; unique without regard to case) is rated as the league player
``human:NAME`` (kind "human", never scheduled by the league itself). No name: a guest name,
``guest-`` and six random letters and digits (`guest_name`), new each time. The terminal keeps the
name it played under in a small file (`remembered_name`), the web page in a cookie. A name is not a
password: whoever gives it plays as that player.

A finished match's rating change is its own commit's (`rating_change`): the Elo its commit wrote
minus the player's row before it in the same scope, never "rating now minus rating at the start"
(a forfeit of the same person committed meanwhile would be counted in)."""

from __future__ import annotations

import json
import os
import re
import secrets
import string
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from arena.errors import ArenaError, shown
from arena.league.manager import League
from arena.league.protocols import Pairing
from arena.league.storage import LeagueStore, MatchRow
from arena.match.runner import MatchJob

#: A person's league player is this and their name.
HUMAN_PREFIX = "human:"
#: The longest name a person may take.
MAX_NAME = 24
#: Names no person may take (the shared player of older versions, what the pages call a person).
RESERVED = frozenset({"human", "guest", "you", "anonymous"})
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_GUEST_CHARS = string.ascii_lowercase + string.digits
#: Overrides where the terminal remembers its person's name (the tests' own file).
PLAYER_FILE_ENV = "ARENA_PLAYER_FILE"
#: The most bytes of the remembered-name file that are read.
_MAX_FILE = 4096


class BadName(ArenaError, ValueError):
    """A name a person may not play under; the message says why and what to do."""


def check_name(name: Any) -> str:
    """`name` (surrounding spaces dropped) when a person may play under it, else BadName. The store's
    checks (a league player's name, the same name in other case) are `player_for`'s."""
    if not isinstance(name, str):
        raise BadName("a name is text: 1-24 letters, digits, '.', '_' or '-'")
    name = name.strip()
    if not name:
        raise BadName("the name is empty: give one of 1-24 letters, digits, '.', '_' or '-' (e.g. alice)")
    if len(name) > MAX_NAME:
        raise BadName(f"the name {shown(name, 40)} is {len(name)} characters long: use at most {MAX_NAME}")
    if not _NAME.fullmatch(name):
        raise BadName(f"the name {shown(name, 40)} has characters a name may not have: use letters, digits, '.', "
                      "'_' and '-', starting with a letter or a digit (e.g. alice or bob_2)")
    if name.lower() in RESERVED:
        raise BadName(f"the name {name!r} is reserved: pick a name of your own (e.g. alice), or leave it empty for "
                      "a guest name")
    return name


def player_name(name: str) -> str:
    """The league player a person called `name` (already checked) plays as: ``human:NAME``."""
    return HUMAN_PREFIX + name


def person_of(player: str) -> str | None:
    """The person's name of league player `player` (``human:NAME``), else None."""
    return player[len(HUMAN_PREFIX):] if player.startswith(HUMAN_PREFIX) else None


def guest_name(store: LeagueStore | None = None) -> str:
    """A new guest name (``guest-`` and six random letters and digits), not yet a player of `store`."""
    while True:
        name = "guest-" + "".join(secrets.choice(_GUEST_CHARS) for _ in range(6))
        if store is None or not _taken(store, name):
            return name


def _taken(store: LeagueStore, name: str) -> bool:
    lower = name.lower()
    return store.conn.execute("SELECT 1 FROM players WHERE lower(name) IN (?, ?) LIMIT 1",
                              (lower, (HUMAN_PREFIX + name).lower())).fetchone() is not None


def player_for(store: LeagueStore, name: str | None, games: list[str]) -> str:
    """Register the person called `name` (None or empty: a new guest name) in `store` if they are new,
    and return their league player's name. BadName when `name` is not one a person may take: a league
    player's name (in any case), or a person's name in other case ("Alice" when there is an "alice")."""
    if name is None or (isinstance(name, str) and not name.strip()):
        name = guest_name(store)
    name = check_name(name)
    player = player_name(name)
    with store.tx() as c:  # the checks and the insert in one write transaction: two starts never both pass
        clash = c.execute("SELECT name, kind FROM players WHERE lower(name) IN (?, ?) AND name != ? "
                          "ORDER BY kind = 'human'", (name.lower(), player.lower(), player)).fetchone()
        if clash is not None:
            other, kind = clash
            if kind != "human" or person_of(other) is None:
                raise BadName(f"{name!r} is a league player's name ({other}): pick another name to play under")
            raise BadName(f"the name {name!r} is taken as {person_of(other)!r} (two people's names differ by more "
                          f"than upper and lower case): play as {person_of(other)!r}, or pick another name")
        known = c.execute("SELECT kind FROM players WHERE name=?", (player,)).fetchone()
        if known is not None and known[0] != "human":
            raise BadName(f"{player!r} is a league player's name: pick another name to play under")
        if known is None:
            store.add_player(player, "human", "human", games)
            store.update_player(player, active=0)  # never scheduled by the league itself
    return player


def games_of(directory: str | Path, name: str) -> int:
    """How many finished games the person `name` (the player ``human:NAME``) has in the league at
    `directory`: 0 for a name never played there."""
    from arena.league.manager import open_league
    from arena.league.storage import OVERALL

    store = open_league(directory)
    try:
        return sum(store.records(OVERALL).get(player_name(name), (0, 0, 0)))
    finally:
        store.close()


def rating_change(store: LeagueStore, match_id: str, game: str) -> dict[str, dict[str, float | None]]:
    """Each player's Elo in scope `game` around match `match_id`'s own commit: ``{"before", "after",
    "change"}``: after is what that commit wrote, before the player's previous row in the scope (None:
    the commit was its first, from the initial rating), change their difference. Empty when the match
    is not committed or was not rated."""
    from arena.league.ratings import EloTable

    row = store.result_for(match_id)
    if row is None:
        return {}
    initial = EloTable().initial
    out: dict[str, dict[str, float | None]] = {}
    for p in dict.fromkeys(row.players):
        after = store.conn.execute("SELECT elo FROM rating_history WHERE commit_seq=? AND game=? AND player=?",
                                   (row.commit_seq, game, p)).fetchone()
        if after is None or after[0] is None:
            continue
        before = store.conn.execute("SELECT elo FROM rating_history WHERE player=? AND game=? AND commit_seq<? "
                                    "ORDER BY commit_seq DESC LIMIT 1", (p, game, row.commit_seq)).fetchone()
        b = before[0] if before is not None else None
        out[p] = {"before": b, "after": after[0], "change": after[0] - (b if b is not None else initial)}
    return out


# -- the name the terminal remembers -----------------------------------------------------------------
def player_file() -> Path:
    """Where the terminal remembers its person's name: ``$ARENA_PLAYER_FILE``, else
    ``$XDG_CONFIG_HOME/arena/player.json`` (``~/.config`` without it)."""
    if os.environ.get(PLAYER_FILE_ENV):
        return Path(os.environ[PLAYER_FILE_ENV]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "arena" / "player.json"


def remembered_name(path: Path | None = None) -> str | None:
    """The name remembered in `path` (default `player_file`), or None: no file, or one that cannot be
    read or holds no valid name."""
    path = path or player_file()
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(_MAX_FILE + 1)[:_MAX_FILE])
        return check_name(data.get("name")) if isinstance(data, dict) else None
    except (OSError, ValueError, BadName):
        return None


def remember_name(name: str, path: Path | None = None) -> Path:
    """Keep `name` in `path` (default `player_file`), replaced whole (never half-written); OSError when
    it cannot be written."""
    path = path or player_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"name": check_name(name)}) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def schedule_human_match(league: League, player: str, game: str | None = None, seat: int = 0,
                         seed: int | None = None, name: str | None = None,
                         note: str | None = None) -> tuple[MatchRow, MatchJob, list[str]]:
    """Check a person's request to play league player `player`, add the person (`name`; None: a new
    guest name) as the human player ``human:NAME`` if they are new (`player_for`), and schedule the
    match: (match row, its job, the seats; the person's player is ``seats[seat]``). The terminal
    (`play_against`) and the web page both start their matches here, so a person's match is played,
    recorded and rated as the league's own are. `note`: the match's note, written in the
    transaction that schedules it (a web server's claim on its match)."""
    from arena.envs.registry import make_core
    from arena.match.loop import InvalidMovePolicy

    store, cfg = league.store, league.cfg
    directory = league.dir
    row = store.player(player)
    if row is None or row.kind == "human":
        names = ", ".join(p.name for p in store.players() if p.kind != "human")
        raise ArenaError(f"no player {shown(player, 60)} in the league at {directory}; its players: {names}")
    game = game or row.games[0]
    if game not in row.games:
        raise ArenaError(f"{player} plays {', '.join(row.games)}, not {game}: pick one of those games")
    n_seats = len(make_core(game, **league.game_kwargs(game)).players)
    if not 0 <= seat < n_seats:
        raise ArenaError(f"--seat {seat}: {game} has seats 0-{n_seats - 1}")
    human = player_for(store, name, cfg.game_ids)
    seats = [player] * n_seats
    seats[seat] = human
    pairing = Pairing(game, seats, ["human" if n == human else row.spec for n in seats], "human vs league player")
    match = league.begin(pairing, status="running", source="external",
                         seed=seed if seed is not None else int(time.time()) % (2**31), note=note)
    job = league.job(match, policy=InvalidMovePolicy(), move_time_limit=None, record="text")
    return match, job, seats


def play_against(directory: str | Path, player: str, game: str | None = None, seat: int = 0,
                 seed: int | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 name: str | None = None, agent: Any = None,
                 on_start: Callable[[str], None] | None = None) -> dict:
    """A person at the terminal, called `name` (None: a new guest name), plays league player
    `player`; the match is stored and rated. `agent`: the person's agent (default: a `HumanAgent` on
    `stdin` / `stdout`). `on_start(their league player)`: called once the match is scheduled, before
    the first move. The answer's ``elo_change``: each player's change by this match's own commit."""
    from arena.agents.human import HumanAgent
    from arena.match.runner import run_match_job

    league = League.open(directory)
    store = league.store
    try:
        match, job, seats = schedule_human_match(league, player, game, seat, seed, name)
        human_player = seats[seat]
        if on_start is not None:
            on_start(human_player)
        game = match.game
        human = agent if agent is not None else HumanAgent(stdin=stdin, stdout=stdout)
        res = run_match_job(job, agents=[human if n == human_player else None for n in seats])
        league.commit(match.match_id, res)
        change = rating_change(store, match.match_id, game)
        return {"match_id": match.match_id, "players": seats, "player": human_player, "name": person_of(human_player),
                "returns": res.returns, "winner": res.winner, "draw": res.draw, "outcome": res.outcome,
                "replay": res.replay_path, "elo": {n: store.elo(game).get(n) for n in seats},
                "elo_change": {n: v["change"] for n, v in change.items()}}
    finally:
        store.close()
