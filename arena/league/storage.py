"""League state in one SQLite database (WAL) per league directory.

Tables: players, matches (the queue: every match has an id before it starts),
results (one row per match, committed once), ratings (current Elo and
OpenSkill per game and overall), rating_history, payoff (decayed counts per
game and overall), events (snapshots, resets, branches) and meta (config,
counters).

Results of one-player games (single-agent tasks) are not rated: their tables
(`return_table`, `common_return_table`) are computed from the results joined
with the matches' seeds, so they are exact after any resume and count each
match once, as the results table does.

A result is committed in one transaction together with its replay path, the
rating updates and the payoff updates; ``INSERT ... ON CONFLICT DO NOTHING`` on
the match id makes the commit idempotent, so a result reported twice (a
re-queued match finishing twice, a resumed run re-reading a replay) counts
once. Ratings are read from and written to the database inside that
transaction, so two processes committing results (a running league and a human
playing one of its players) never overwrite each other's updates.

The store keeps the numbers, it does not compute them: the league's rater
(`arena.league.ratings.LeagueRatings`, built from the ``elo_k`` and
``payoff_decay`` in the meta table) is handed what is stored and hands back the
rows to write. Every SQL statement stays in this module.
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from arena.errors import ConfigError, LeagueDatabaseError, database_errors
from arena.fsio import disk_full_as_error
from arena.league.payoff import Payoff
from arena.league.ratings import EloTable, LeagueRatings, OpenSkillTable, RatingRows, scores_from_returns
from arena.match.loop import MatchResult
from arena.replays import archive
from arena.replays.format import LEAGUE_DB, LEAGUE_REPLAYS, Replay, ReplayError, blob_ref, parse_replay, read_replay

def record_kinds(returns: Sequence[float]) -> list[str]:
    """"w", "d" or "l" per seat. Two players: the same 1 / 0.5 / 0 scores the ratings use. More: a
    player wins with the unique highest return, draws when tied for it, else loses."""
    if len(returns) == 2:
        return ["w" if s == 1.0 else "d" if s == 0.5 else "l" for s in scores_from_returns(returns)]
    best = max(float(x) for x in returns)
    n_best = sum(1 for x in returns if float(x) == best)
    return ["l" if float(x) != best else ("w" if n_best == 1 else "d") for x in returns]


#: 2: players have an owner (see `PlayerRow.owner`); a schema-1 database gains the column on open.
#: The ``pair`` columns of matches and results (seat balance and duplicate matches, `MatchRow.pair`) came
#: later without a new number: they are additive (an arena from before them reads and writes such a
#: database, never naming them), and a database without them gains them on open (`_add_pair_columns`).
SCHEMA_VERSION = 2
OVERALL = "*"


def no_league_message(directory: str | Path) -> str:
    """What to say of a folder with no league database: a training run of a single-agent task (no
    league of its own) gets the commands that show and rate it, anything else how to start a league."""
    d = Path(directory)
    if (d / "metrics.jsonl").exists() or (d / "latest").exists():
        return (f"{d} is a training run with no league of its own (a single-agent task): its curve is in "
                f"{d / 'metrics.jsonl'} (`tensorboard --logdir {d}`); to rank its policy, put "
                f"`policy:{d / 'best'}` in a league config's players and `arena league run CONFIG --dir DIR`")
    if not d.exists():
        return f"no league at {d} (no such folder); start one with `arena league run CONFIG --dir {d}`"
    return f"no league at {d} (no {LEAGUE_DB}); start one with `arena league run CONFIG --dir {d}`"


def finite(v: Any) -> bool:
    """A real number (not a bool) that is neither NaN nor infinite."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_rating_settings(elo_k: Any, payoff_decay: Any) -> None:
    """ConfigError unless `elo_k` is a finite number > 0 and `payoff_decay` one in (0, 1]: the league
    config checks them with this before a folder exists, and the store before it makes a database."""
    from arena.errors import shown

    if not finite(elo_k) or elo_k <= 0:
        raise ConfigError(f"elo_k: the Elo K-factor must be a finite number > 0 (32 is usual), got {shown(elo_k)}")
    if not finite(payoff_decay) or not 0.0 < payoff_decay <= 1.0:
        raise ConfigError(f"payoff_decay: must be in (0, 1] (1 keeps every game at full weight; 0.99 remembers "
                          f"about the last 100 games of a pair), got {shown(payoff_decay)}")


#: A damaged league.db met inside the block is one line naming it and what to do
#: (`arena.errors.database_errors`): ``with league_db_errors(path): ...``.
league_db_errors = database_errors


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS players (
    name TEXT PRIMARY KEY, kind TEXT NOT NULL, role TEXT, spec TEXT NOT NULL, games TEXT NOT NULL,
    parent TEXT, version INTEGER NOT NULL DEFAULT 0, steps INTEGER NOT NULL DEFAULT 0,
    active INTEGER NOT NULL DEFAULT 1, created REAL NOT NULL, state TEXT,
    owner TEXT  -- NULL: the league's config; else the trainer that added the player (its to keep)
);
-- A comment inside a table has no comma in it: SQLite's ALTER TABLE ... DROP COLUMN would cut the table at one.
CREATE TABLE IF NOT EXISTS matches (
    match_id TEXT PRIMARY KEY, seq INTEGER UNIQUE NOT NULL, game TEXT NOT NULL, players TEXT NOT NULL,
    specs TEXT NOT NULL, seed INTEGER NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    note TEXT, created REAL NOT NULL, started REAL, finished REAL,
    source TEXT NOT NULL DEFAULT 'league',  -- league (scheduled by the league) or external (a human or a trainer)
    pair TEXT  -- seat balance: the match id of the first match of its pair (NULL: unpaired)
);
CREATE INDEX IF NOT EXISTS matches_status ON matches(status);
CREATE TABLE IF NOT EXISTS results (
    commit_seq INTEGER PRIMARY KEY AUTOINCREMENT, match_id TEXT UNIQUE NOT NULL REFERENCES matches(match_id),
    game TEXT NOT NULL, players TEXT NOT NULL, returns TEXT NOT NULL, winner INTEGER, draw INTEGER NOT NULL,
    outcome TEXT NOT NULL, reason TEXT, moves INTEGER NOT NULL, invalid TEXT, duration REAL, replay TEXT,
    committed REAL NOT NULL,
    pair TEXT  -- matches.pair copied with the result
);
-- The match list's filters (the web pages): a game's, and a player's (first two seats), newest first.
CREATE INDEX IF NOT EXISTS results_game ON results(game, commit_seq);
CREATE INDEX IF NOT EXISTS results_seat0 ON results(json_extract(players, '$[0]'), commit_seq);
CREATE INDEX IF NOT EXISTS results_seat1 ON results(json_extract(players, '$[1]'), commit_seq);
CREATE TABLE IF NOT EXISTS ratings (
    system TEXT NOT NULL, game TEXT NOT NULL, player TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (system, game, player)
);
CREATE TABLE IF NOT EXISTS rating_history (
    commit_seq INTEGER NOT NULL, game TEXT NOT NULL, player TEXT NOT NULL, elo REAL, mu REAL, sigma REAL
);
CREATE INDEX IF NOT EXISTS rating_history_player ON rating_history(player, game);
CREATE TABLE IF NOT EXISTS payoff (
    game TEXT NOT NULL, home TEXT NOT NULL, away TEXT NOT NULL, w REAL NOT NULL, d REAL NOT NULL,
    l REAL NOT NULL, n REAL NOT NULL, PRIMARY KEY (game, home, away)
);
-- Exact wins / draws / losses per rating scope and player, kept with each commit (the payoff's counts decay).
CREATE TABLE IF NOT EXISTS records (
    game TEXT NOT NULL, player TEXT NOT NULL, w INTEGER NOT NULL, d INTEGER NOT NULL, l INTEGER NOT NULL,
    PRIMARY KEY (game, player)
);
-- The rated two-player results, counted: one row per game, seats, returns and forfeiting seat (-1: none) of the
-- unpaired matches between two players, with their invalid moves summed; the results of more than two seats
-- counted per game. What the fitted tables read (`tally_rows`); complete up to the meta's tally_seq.
CREATE TABLE IF NOT EXISTS tally (
    game TEXT NOT NULL, seat0 TEXT NOT NULL, seat1 TEXT NOT NULL, ret0 REAL NOT NULL, ret1 REAL NOT NULL,
    forfeit INTEGER NOT NULL, n INTEGER NOT NULL, inv0 INTEGER NOT NULL, inv1 INTEGER NOT NULL,
    PRIMARY KEY (game, seat0, seat1, ret0, ret1, forfeit)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tally_many (game TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, kind TEXT NOT NULL,
    player TEXT, data TEXT);
"""


#: The tally's rows counted from the results with commit_seq in (?, ?] (`LeagueStore.tally_rows`).
#: A two-seat result's key in the tally: game, seats, returns, the forfeiting seat (-1: none).
_TWO_SEAT_KEY = ("game, json_extract(players, '$[0]'), json_extract(players, '$[1]'), json_extract(returns, '$[0]'), "
                 "json_extract(returns, '$[1]'), "
                 "CASE WHEN outcome='forfeit' AND winner IN (0, 1) THEN 1 - winner ELSE -1 END")
#: A rated two-seat result: two seats, two players (a match against oneself rates no one).
_TWO_PLAYERS = "json_array_length(players)=2 AND json_extract(players, '$[0]') != json_extract(players, '$[1]')"
#: The tally's rows counted from the results with commit_seq in (?, ?] (`LeagueStore.tally_rows`).
_TALLY_SELECT = (
    f"SELECT {_TWO_SEAT_KEY}, COUNT(*), SUM(IFNULL(json_extract(invalid, '$[0]'), 0)), "
    f"SUM(IFNULL(json_extract(invalid, '$[1]'), 0)) FROM results WHERE commit_seq > ? AND commit_seq <= ? "
    f"AND {_TWO_PLAYERS} AND pair IS NULL GROUP BY 1, 2, 3, 4, 5, 6")
#: The matches of duplicate pairs, a row each in the tally's columns and the pair (`LeagueStore.paired_rows`).
_PAIRED_SELECT = (
    f"SELECT {_TWO_SEAT_KEY}, 1, IFNULL(json_extract(invalid, '$[0]'), 0), IFNULL(json_extract(invalid, '$[1]'), 0), "
    f"pair FROM results WHERE pair IS NOT NULL AND {_TWO_PLAYERS}")
_TALLY_MANY_SELECT = ("SELECT game, COUNT(*) FROM results WHERE commit_seq > ? AND commit_seq <= ? "
                      "AND json_array_length(players)>2 GROUP BY game")


@dataclass
class PlayerRow:
    name: str
    kind: str  # "fixed", "learner", "historical", "human" or "evaluation" (a trainer's greedy evaluation games)
    role: str | None
    spec: str
    games: list[str]
    parent: str | None
    version: int
    steps: int
    active: bool
    created: float
    state: dict | None
    #: Who added the player: None for the league's config (whose sync adds and retires it), else a
    #: trainer's name (its teachers, learners and snapshots: the config sync never retires them).
    owner: str | None = None


@dataclass
class MatchRow:
    match_id: str
    seq: int
    game: str
    players: list[str]
    specs: list[str]
    seed: int
    status: str
    attempts: int
    note: str | None
    #: Seat balance (`arena.league.manager`): the match id of the first match of this match's pair (the
    #: same players with the seats swapped; a duplicate pair also shares the seed), on both matches of the
    #: pair; None for an unpaired match.
    pair: str | None = None


@dataclass
class MatchInfo:
    """How and when a match was played: what the match's page shows beside its result."""

    seed: int
    specs: list[str]
    source: str  # "league" (scheduled by the league) or "external" (a person's or a trainer's)
    created: float
    started: float | None
    finished: float | None


@dataclass
class ResultRow:
    commit_seq: int
    match_id: str
    game: str
    players: list[str]
    returns: list[float]
    winner: int | None
    draw: bool
    outcome: str
    reason: str | None
    moves: int
    invalid: list[int]
    duration: float | None
    replay: str | None
    committed: float
    #: The match's pair (`MatchRow.pair`): the first match's id on both results of a pair, else None.
    pair: str | None = None


class LeagueStore:
    def __init__(self, directory: str | Path, *, elo_k: float = 32.0, payoff_decay: float = 0.99,
                 create: bool = True):
        # A damaged league.db (truncated, overwritten) is one line naming it, not SQLite's traceback.
        with league_db_errors(Path(directory) / LEAGUE_DB):
            self._init(directory, elo_k=elo_k, payoff_decay=payoff_decay, create=create)

    def _init(self, directory: str | Path, *, elo_k: float, payoff_decay: float, create: bool) -> None:
        # The rater (made once the league's settings are read from its meta, below) keeps live rating
        # tables per game, loaded from the ratings table on first use and updated in place with each
        # commit (written through in the same transaction). They are dropped when another connection
        # committed since (SQLite's data_version moves) and when a transaction rolls back.
        self._rater: LeagueRatings | None = None
        self._data_version: int | None = None
        #: Moves with every change this connection makes to the players table (with `data_version`, a
        #: cache key for views of the players: the league's pairing view).
        self.players_version = 0
        self.dir = Path(directory)
        self.db_path = self.dir / LEAGUE_DB
        if not create and not self.db_path.exists():
            from arena.errors import ArenaError

            raise ArenaError(no_league_message(self.dir))
        self.replay_dir = self.dir / LEAGUE_REPLAYS
        self.players_dir = self.dir / "players"
        if create:
            from arena.config import writable_folder

            with self._disk_full_as_error():
                writable_folder(self.dir, "the league folder")
            if not self.db_path.exists():
                # Never a league created with settings that would poison it for good (NaN Elo, payoff
                # counts that grow without bound): the config refuses them first, the store too.
                check_rating_settings(elo_k, payoff_decay)
        elif not self.db_path.is_file():
            raise LeagueDatabaseError(f"{self.db_path} is not a file: give the league's folder, which holds its "
                                      "database there")
        with self._disk_full_as_error():
            self.conn = sqlite3.connect(self.db_path, timeout=60.0, isolation_level=None, check_same_thread=False)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA busy_timeout=60000")
            self.conn.executescript(_SCHEMA)
            # replays kept in the database (LeagueConfig.replays: database), one row a committed match
            archive.create_table(self.conn)
        with self.tx():
            if self.get_meta("schema") is None:
                self.set_meta("schema", SCHEMA_VERSION)
                self.set_meta("next_seq", 0)
                self.set_meta("elo_k", elo_k)
                self.set_meta("payoff_decay", payoff_decay)
            elif self.get_meta("schema") == 1:
                self._migrate_players_owner()
        if self.get_meta("schema") != SCHEMA_VERSION:
            from arena.errors import ArenaError

            raise ArenaError(f"{self.db_path}: league schema {self.get_meta('schema')}, this arena reads {SCHEMA_VERSION}")
        self._add_pair_columns()
        self._backfill_records()
        self._rater = LeagueRatings(elo_k=float(self.get_meta("elo_k")),
                                    payoff_decay=float(self.get_meta("payoff_decay")))

    def close(self) -> None:
        self.conn.close()

    @property
    def rater(self) -> LeagueRatings:
        """The league's rating arithmetic, with its settings (``elo_k`` and ``payoff_decay`` of the meta)."""
        assert self._rater is not None  # made as the store opens
        return self._rater

    @property
    def elo_k(self) -> float:
        """The league's Elo K-factor, as the rater uses it."""
        return self.rater.elo_k

    @elo_k.setter
    def elo_k(self, value: float) -> None:
        # A changed setting is a new rater: the live tables were built with the old one. The meta is
        # the caller's to write (in the transaction that checks nothing was rated with the old value).
        self._rater = LeagueRatings(elo_k=value, payoff_decay=self.payoff_decay)

    @property
    def payoff_decay(self) -> float:
        """The league's payoff decay, as the rater uses it."""
        return self.rater.payoff_decay

    @payoff_decay.setter
    def payoff_decay(self, value: float) -> None:
        self._rater = LeagueRatings(elo_k=self.elo_k, payoff_decay=value)

    def _migrate_players_owner(self) -> None:
        """Schema 1 to 2: the players table gains its owner column (NULL: the config's, as every player
        of such a league was taken to be; a trainer claims its own when it resumes)."""
        columns = [r[1] for r in self.conn.execute("PRAGMA table_info(players)")]
        if "owner" not in columns:
            self.conn.execute("ALTER TABLE players ADD COLUMN owner TEXT")
        self.set_meta("schema", 2)

    def _add_pair_columns(self) -> None:
        """A league written before seat balance gains the ``pair`` columns of matches and results (NULL:
        its matches are unpaired) and their indexes; a no-op once they are there."""
        def lacking(c) -> list[str]:
            return [t for t in ("matches", "results")
                    if "pair" not in {r[1] for r in c.execute(f"PRAGMA table_info({t})")}]

        if lacking(self.conn):
            with self.tx() as c:
                for table in lacking(c):  # again inside the write lock: another process may have added them
                    c.execute(f"ALTER TABLE {table} ADD COLUMN pair TEXT")
        self.conn.execute("CREATE INDEX IF NOT EXISTS matches_pair ON matches(pair) WHERE pair IS NOT NULL")
        self.conn.execute("CREATE INDEX IF NOT EXISTS results_pair ON results(pair) WHERE pair IS NOT NULL")

    def _disk_full_as_error(self):
        return disk_full_as_error(self.dir, f"writing the league database {self.db_path.name}")

    @contextlib.contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: takes the write lock up front, no upgrade deadlocks).

        A full disk raises DiskFull: the transaction is rolled back whole, so a result is either
        committed with its ratings and payoff or not at all (and committed on the next run).
        """
        c = self.conn
        if c.in_transaction:  # nested: join the outer transaction
            yield c
            return
        with self._disk_full_as_error():
            c.execute("BEGIN IMMEDIATE")
            version = c.execute("PRAGMA data_version").fetchone()[0]
            if version != self._data_version:  # another process committed: the cached ratings may be stale
                self._forget_ratings()
                self._data_version = version
            try:
                yield c
                c.execute("COMMIT")
            except BaseException:
                self._forget_ratings()  # the in-memory tables may hold updates the rollback undid
                # SQLite may already have rolled back by itself (after SQLITE_FULL, for one).
                if c.in_transaction:
                    try:
                        c.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass  # the error being raised says what went wrong
                raise

    def _forget_ratings(self) -> None:
        if self._rater is not None:  # None while the store opens (no rating read yet)
            self._rater.forget()

    def _backfill_records(self) -> None:
        """A league written before the records table had one: count its results once."""
        if self.get_meta("records_complete"):
            return
        with self.tx() as c:
            if self.get_meta("records_complete"):
                return
            counts: dict[tuple[str, str], list[int]] = {}
            for game, players, returns in c.execute("SELECT game, players, returns FROM results ORDER BY commit_seq"):
                players, returns = json.loads(players), json.loads(returns)
                if len(players) < 2 or len(set(players)) != len(players):
                    continue
                for p, k in zip(players, record_kinds(returns)):
                    for g in (game, OVERALL):
                        counts.setdefault((g, p), [0, 0, 0])["wdl".index(k)] += 1
            c.execute("DELETE FROM records")
            c.executemany("INSERT INTO records VALUES(?,?,?,?,?)", [(g, p, *v) for (g, p), v in counts.items()])
            self.set_meta("records_complete", True)

    # -- the tally: rated results counted, what the fitted tables read -------------------------------
    def _tally_commit(self, c, commit_seq: int, game: str, players: list[str], returns: Sequence[float],
                      winner: int | None, outcome: str, invalid: Sequence[int], pair: str | None) -> None:
        """Count one committed result in the tally, in its transaction, when the tally is complete up to
        the result before it (else the next reader catches it up, `catch_up_tally`: a result written by
        an arena that kept no tally is never skipped)."""
        prev = c.execute("SELECT MAX(commit_seq) FROM results WHERE commit_seq < ?", (commit_seq,)).fetchone()[0]
        if self.get_meta("tally_seq", 0) != (prev or 0):
            return
        if len(players) > 2:
            c.execute("INSERT INTO tally_many VALUES(?, 1) ON CONFLICT DO UPDATE SET n=n+1", (game,))
        elif len(players) == 2 and players[0] != players[1] and pair is None:
            forfeit = 1 - winner if outcome == "forfeit" and winner in (0, 1) else -1
            inv = [int(x or 0) for x in (list(invalid) + [0, 0])[:2]]
            c.execute("INSERT INTO tally VALUES(?,?,?,?,?,?,1,?,?) ON CONFLICT DO UPDATE SET n=n+1, "
                      "inv0=inv0+excluded.inv0, inv1=inv1+excluded.inv1",
                      (game, players[0], players[1], float(returns[0]), float(returns[1]), forfeit, *inv))
        self.set_meta("tally_seq", commit_seq)

    def catch_up_tally(self) -> bool:
        """Count the results the tally lacks (a league written before it, or by an arena that kept none),
        in one statement over them. False where the database cannot be written (the reader then counts
        the results itself, `tally_rows`)."""
        top = self.conn.execute("SELECT IFNULL(MAX(commit_seq), 0) FROM results").fetchone()[0]
        if self.get_meta("tally_seq", 0) == top:
            return True
        try:
            with self.tx() as c:
                seq = self.get_meta("tally_seq", 0)
                top = c.execute("SELECT IFNULL(MAX(commit_seq), 0) FROM results").fetchone()[0]
                if seq != top:
                    c.execute(f"INSERT INTO tally {_TALLY_SELECT} ON CONFLICT DO UPDATE SET n=n+excluded.n, "
                              "inv0=inv0+excluded.inv0, inv1=inv1+excluded.inv1", (seq, top))
                    c.execute(f"INSERT INTO tally_many {_TALLY_MANY_SELECT} ON CONFLICT DO UPDATE SET "
                              "n=n+excluded.n", (seq, top))
                    self.set_meta("tally_seq", top)
        except sqlite3.OperationalError as e:
            if "readonly" in str(e):
                return False
            raise
        return True

    def tally_rows(self, game: str = OVERALL) -> tuple[list[tuple], int]:
        """The counted unpaired two-player results of `game` (OVERALL: every game) as rows (game, seat0,
        seat1, ret0, ret1, forfeiting seat or -1, matches, invalid moves of seat 0, of seat 1), and the
        results of more than two seats; counted from the results themselves where the tally cannot be
        brought up to date."""
        where, args = ("", ()) if game == OVERALL else (" WHERE game=?", (game,))
        if self.catch_up_tally():
            rows = self.conn.execute("SELECT * FROM tally" + where, args).fetchall()
            many = self.conn.execute("SELECT IFNULL(SUM(n), 0) FROM tally_many" + where, args).fetchone()[0]
            return rows, int(many)
        top = self.conn.execute("SELECT IFNULL(MAX(commit_seq), 0) FROM results").fetchone()[0]
        rows = [r for r in self.conn.execute(_TALLY_SELECT, (0, top)) if game == OVERALL or r[0] == game]
        many = sum(n for g, n in self.conn.execute(_TALLY_MANY_SELECT, (0, top)) if game in (OVERALL, g))
        return rows, int(many)

    def paired_rows(self, game: str = OVERALL) -> list[tuple]:
        """The rated matches of duplicate pairs of `game` (OVERALL: every game), one row each in commit
        order: the tally's columns (the matches 1) and the pair's id; the tally leaves them out, as the
        fitted table resamples a pair whole."""
        q, args = (_PAIRED_SELECT, ()) if game == OVERALL else (_PAIRED_SELECT + " AND game=?", (game,))
        return self.conn.execute(q + " ORDER BY commit_seq", args).fetchall()

    def data_version(self) -> int:
        """SQLite's counter of commits by other connections (a cache key: it moves when another process
        wrote to this league)."""
        return self.conn.execute("PRAGMA data_version").fetchone()[0]

    def state_version(self) -> tuple[int, int, int, int]:
        """(last commit, players, the sum of the players' versions and active flags, 1 once the league's
        config is written else 0): moves when a result is committed, a player is added or changed, or the
        config is first written. A cache key for views of the league that any process may have changed."""
        row = self.conn.execute(
            "SELECT (SELECT IFNULL(MAX(commit_seq), 0) FROM results), (SELECT COUNT(*) FROM players), "
            "(SELECT IFNULL(SUM(version + active), 0) FROM players), "
            "(SELECT COUNT(*) FROM meta WHERE key='config')").fetchone()
        return int(row[0]), int(row[1]), int(row[2]), int(row[3])

    # -- meta --------------------------------------------------------------------------
    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def set_meta(self, key: str, value: Any) -> None:
        self.conn.execute("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                          (key, json.dumps(value)))

    # -- players -----------------------------------------------------------------------
    def add_player(self, name: str, kind: str, spec: str, games: Sequence[str], role: str | None = None,
                   parent: str | None = None, state: dict | None = None, owner: str | None = None) -> None:
        """`owner`: the trainer adding the player (None: the league's config); see `PlayerRow.owner`."""
        self.players_version += 1
        with self.tx() as c:
            c.execute("INSERT INTO players(name, kind, role, spec, games, parent, created, state, owner) "
                      "VALUES(?,?,?,?,?,?,?,?,?)",
                      (name, kind, role, spec, json.dumps(list(games)), parent, time.time(),
                       json.dumps(state) if state is not None else None, owner))

    def update_player(self, name: str, **fields: Any) -> None:
        if not fields:
            return
        enc = {k: (json.dumps(v) if k in ("games", "state") else v) for k, v in fields.items()}
        sets = ", ".join(f"{k}=?" for k in enc)
        self.players_version += 1
        with self.tx() as c:
            c.execute(f"UPDATE players SET {sets} WHERE name=?", (*enc.values(), name))

    def player(self, name: str) -> PlayerRow | None:
        row = self.conn.execute("SELECT * FROM players WHERE name=?", (name,)).fetchone()
        return _player(row) if row else None

    def players(self, active_only: bool = False) -> list[PlayerRow]:
        q = "SELECT * FROM players" + (" WHERE active=1" if active_only else "") + " ORDER BY created, name"
        return [_player(r) for r in self.conn.execute(q)]

    def player_count(self, humans: bool = True) -> int:
        """Players in the league, retired ones too; `humans=False`: without people's (kind "human")."""
        q = "SELECT COUNT(*) FROM players" + ("" if humans else " WHERE kind != 'human'")
        return self.conn.execute(q).fetchone()[0]

    # -- matches -----------------------------------------------------------------------
    def enqueue(self, game: str, players: Sequence[str], specs: Sequence[str], seed: int | Callable[[int], int] | None = None,
                status: str = "queued", note: str | None = None, source: str = "league",
                pair: str | bool | None = None) -> MatchRow:
        """Give a match its id (and seed: a number, or a function of the sequence number) in one transaction.
        `pair`: the pair's id (`MatchRow.pair`), or True for the first match of a pair (its own id)."""
        with self.tx() as c:
            seq = int(self.get_meta("next_seq"))
            self.set_meta("next_seq", seq + 1)
            match_id = f"m{seq:08d}"
            seed = seq if seed is None else seed(seq) if callable(seed) else seed
            pair = match_id if pair is True else (pair or None)
            c.execute("INSERT INTO matches(match_id, seq, game, players, specs, seed, status, note, created, source, "
                      "pair) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                      (match_id, seq, game, json.dumps(list(players)), json.dumps(list(specs)), int(seed), status,
                       note, time.time(), source, pair))
            attempts = 0
            if status == "running":  # dispatched at once: one attempt, no second transaction
                attempts = 1
                c.execute("UPDATE matches SET attempts=1, started=created WHERE match_id=?", (match_id,))
        return MatchRow(match_id, seq, game, list(players), list(specs), int(seed), status, attempts, note, pair)

    def paired_match(self, pair: str, other_than: str | None = None) -> MatchRow | None:
        """The match of pair `pair` other than `other_than` (the pair's first: `pair` itself, by default);
        None while there is none."""
        other = pair if other_than is None else other_than
        row = self.conn.execute("SELECT * FROM matches WHERE pair=? AND match_id!=? ORDER BY seq LIMIT 1",
                                (pair, other)).fetchone()
        return _match(row) if row else None

    def mark_running(self, match_id: str) -> None:
        with self.tx() as c:
            c.execute("UPDATE matches SET status='running', attempts=attempts+1, started=? WHERE match_id=?",
                      (time.time(), match_id))

    def requeue(self, match_id: str, note: str, max_attempts: int) -> str:
        """Put a match whose worker failed back in the queue, or mark it failed after `max_attempts`."""
        with self.tx() as c:
            row = c.execute("SELECT attempts, status FROM matches WHERE match_id=?", (match_id,)).fetchone()
            if row is None or row[1] == "done":
                return row[1] if row else "missing"
            status = "failed" if row[0] >= max_attempts else "queued"
            c.execute("UPDATE matches SET status=?, note=? WHERE match_id=?", (status, note, match_id))
        return status

    def release(self, match_id: str, note: str) -> str:
        """Put a match left running by a process that stopped (Ctrl-C, kill -9, a power loss) back in the
        queue with the attempt it was on given back: the process died, not the match, so no number of
        such stops ever marks it failed. Only worker failures (`requeue`) count toward max_attempts."""
        with self.tx() as c:
            row = c.execute("SELECT status FROM matches WHERE match_id=?", (match_id,)).fetchone()
            if row is None or row[0] != "running":
                return row[0] if row else "missing"
            c.execute("UPDATE matches SET status='queued', attempts=MAX(attempts - 1, 0), note=? WHERE match_id=?",
                      (note, match_id))
        return "queued"

    def abandon(self, match_id: str, note: str) -> bool:
        """Close a match left running by a process that is gone and that no one else finishes or puts back
        in the queue (an external match: a person's game on a web server that stopped) as failed, with
        `note`: no result, never rated. False when it is no longer running or its result is committed."""
        with self.tx() as c:
            return c.execute("UPDATE matches SET status='failed', finished=?, note=? WHERE match_id=? AND "
                             "status='running' AND NOT EXISTS (SELECT 1 FROM results WHERE match_id=?)",
                             (time.time(), note, match_id, match_id)).rowcount > 0

    def matches(self, status: str | Sequence[str] | None = None, limit: int | None = None,
                source: str | None = None, note_prefix: str | None = None) -> list[MatchRow]:
        """The matches in scheduling order; with `status`, `source` or `note_prefix` (a note that starts
        with it, without regard to ASCII case), only those."""
        q, args, where = "SELECT * FROM matches", [], []
        if status is not None:
            sts = [status] if isinstance(status, str) else list(status)
            where.append(f"status IN ({','.join('?' * len(sts))})")
            args += sts
        if source is not None:
            where.append("source=?")
            args.append(source)
        if note_prefix is not None:
            where.append("note LIKE ? ESCAPE '\\'")
            args.append(note_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        if where:
            q += " WHERE " + " AND ".join(where)
        q += " ORDER BY seq"
        if limit:
            q += f" LIMIT {int(limit)}"
        return [_match(r) for r in self.conn.execute(q, args)]

    def status_counts(self) -> dict[str, int]:
        return dict(self.conn.execute("SELECT status, COUNT(*) FROM matches GROUP BY status").fetchall())

    def match_count(self, status: str | None = None) -> int:
        """Matches scheduled; with `status`, only those in it (one count off the status index)."""
        if status is None:
            return self.conn.execute("SELECT COUNT(*) FROM matches").fetchone()[0]
        return self.conn.execute("SELECT COUNT(*) FROM matches WHERE status=?", (status,)).fetchone()[0]

    def match_info(self, match_id: str) -> MatchInfo | None:
        """How and when match `match_id` was played (None: no such match)."""
        row = self.conn.execute("SELECT seed, specs, source, created, started, finished FROM matches "
                                "WHERE match_id=?", (match_id,)).fetchone()
        if row is None:
            return None
        return MatchInfo(row[0], json.loads(row[1]), row[2], row[3], row[4], row[5])

    # -- results -----------------------------------------------------------------------
    def commit_result(self, match_id: str, result: MatchResult) -> bool:
        """Record a finished match once, with its ratings and payoff. False if it was already recorded."""
        return self.commit_results([(match_id, result)])[0]

    def commit_results(self, items: Sequence[tuple[str, MatchResult]]) -> list[bool]:
        """Group commit: record a batch of finished matches in ONE transaction (results, ratings, payoff
        in order), each at most once; False for one already recorded. All or nothing: a crash before the
        commit leaves none of them recorded, and the league commits them again from their replays."""
        with self.tx() as c:
            return [self._commit(c, match_id, result) for match_id, result in items]

    def _commit(self, c, match_id: str, result: MatchResult) -> bool:
        returns, winner, draw, outcome = result.returns, result.winner, result.draw, result.outcome
        moves, reason, invalid, duration, replay = (result.moves, result.reason, result.invalid, result.duration,
                                                    result.replay_path)
        blob = result.replay_blob
        if blob is not None:
            replay = blob_ref(self.db_path, match_id)
        m = c.execute("SELECT game, players, pair FROM matches WHERE match_id=?", (match_id,)).fetchone()
        if m is None:
            raise KeyError(f"unknown match id {match_id!r}")
        game, players, pair = m[0], json.loads(m[1]), m[2]
        if len(returns) != len(players):
            raise ValueError(f"match {match_id}: {len(players)} players but {len(returns)} returns")
        cur = c.execute(
            "INSERT INTO results(match_id, game, players, returns, winner, draw, outcome, reason, moves, invalid, "
            "duration, replay, committed, pair) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(match_id) DO NOTHING",
            (match_id, game, json.dumps(players), json.dumps([float(r) for r in returns]), winner, int(draw),
             outcome, reason, int(moves), json.dumps(list(invalid)), duration, replay, time.time(), pair))
        if cur.rowcount == 0:
            return False
        commit_seq = cur.lastrowid
        if blob is not None:  # the replay in the same transaction as its result: both or neither
            archive.put(c, match_id, blob)
            result.replay_path = replay
        c.execute("UPDATE matches SET status='done', finished=? WHERE match_id=?", (time.time(), match_id))
        self._tally_commit(c, commit_seq, game, players, returns, winner, outcome, invalid, pair)
        rater = self.rater
        if rater.rated(players):  # self-play is not rated
            scopes = (game, OVERALL)
            for g in scopes:
                if not rater.loaded(g):
                    rater.load(g, self._stored_ratings(c, g))
            self._write_ratings(c, rater.rate(commit_seq, players, returns, scopes,
                                              {g: self._stored_payoff(c, g, players) for g in scopes}))
            kinds = record_kinds(returns)
            c.executemany("INSERT INTO records VALUES(?,?,?,?,?) ON CONFLICT DO UPDATE SET "
                          "w=w+excluded.w, d=d+excluded.d, l=l+excluded.l",
                          [(g, p, int(k == "w"), int(k == "d"), int(k == "l"))
                           for g in scopes for p, k in zip(players, kinds)])
        names = sorted(set(players))
        c.execute(f"UPDATE players SET steps=steps+1 WHERE name IN ({','.join('?' * len(names))})", names)
        return True

    @staticmethod
    def _stored_ratings(c, game: str) -> list[tuple[str, str, Any]]:
        """(system, player, value) of every stored rating of `game` (a rating scope): what the rater's
        live tables of `game` start from."""
        return [(system, p, json.loads(value)) for system, p, value in
                c.execute("SELECT system, player, value FROM ratings WHERE game=?", (game,))]

    @staticmethod
    def _stored_payoff(c, game: str, players: list[str]) -> dict[tuple[str, str], tuple[float, ...]]:
        """The stored payoff counts of `game` among `players` only: a cache of the whole table would
        cost a read of every pair (about a million rows in a league of 1,000 players) on each restart."""
        marks = ",".join("?" * len(players))
        return {(h, a): (w, d, l, n) for h, a, w, d, l, n in c.execute(
            f"SELECT home, away, w, d, l, n FROM payoff WHERE game=? AND home IN ({marks}) AND away IN ({marks})",
            (game, *players, *players))}

    @staticmethod
    def _write_ratings(c, rows: RatingRows) -> None:
        """The rater's rows for one result, one batch per table (values as JSON, as they are read back)."""
        c.executemany("INSERT INTO ratings VALUES(?,?,?,?) ON CONFLICT DO UPDATE SET value=excluded.value",
                      [(system, g, p, json.dumps(value)) for system, g, p, value in rows.ratings])
        c.executemany("INSERT INTO rating_history VALUES(?,?,?,?,?,?)", rows.history)
        c.executemany("INSERT INTO payoff VALUES(?,?,?,?,?,?,?) ON CONFLICT DO UPDATE SET "
                      "w=excluded.w, d=excluded.d, l=excluded.l, n=excluded.n", rows.payoff)

    def results(self, game: str | None = None, since: int = 0) -> list[ResultRow]:
        q, args = "SELECT * FROM results WHERE commit_seq > ?", [since]
        if game is not None:
            q += " AND game=?"
            args.append(game)
        return [_result(r) for r in self.conn.execute(q + " ORDER BY commit_seq", args)]

    def result_count(self, source: str | None = None) -> int:
        """Results committed; with `source`, only of matches the league ('league') or others ('external') started."""
        if source is None:
            return self.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        return self.conn.execute("SELECT COUNT(*) FROM results JOIN matches USING(match_id) WHERE matches.source=?",
                                 (source,)).fetchone()[0]

    def result_for(self, match_id: str) -> ResultRow | None:
        row = self.conn.execute("SELECT * FROM results WHERE match_id=?", (match_id,)).fetchone()
        return _result(row) if row else None

    def last_commit(self) -> int:
        """The commit number of the last result (0: none yet)."""
        return self.conn.execute("SELECT IFNULL(MAX(commit_seq), 0) FROM results").fetchone()[0]

    def first_commit_at(self, ts: float) -> int:
        """The commit number of the first result committed at or after time `ts` (past the last: the last
        + 1): a binary search over the commit numbers, results being committed in time order."""
        c = self.conn
        lo, hi = c.execute("SELECT IFNULL(MIN(commit_seq), 1), IFNULL(MAX(commit_seq), 0) FROM results").fetchone()
        hi += 1
        while lo < hi:
            mid = (lo + hi) // 2
            row = c.execute("SELECT committed FROM results WHERE commit_seq >= ? ORDER BY commit_seq LIMIT 1",
                            (mid,)).fetchone()
            if row is None or row[0] >= ts:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def has_wide_results(self) -> bool:
        """Whether a result of more than two players is committed (their seats past the second have no index)."""
        return self.conn.execute(
            "SELECT 1 FROM results WHERE json_array_length(players) > 2 LIMIT 1").fetchone() is not None

    def results_page(self, *, lo: int | None = None, hi: int | None = None, game: str | None = None,
                     player: str | None = None, outcome: str | None = None, newest_first: bool = True,
                     limit: int = 50, wide: bool | None = None) -> list[ResultRow]:
        """At most `limit` results with commit numbers in [`lo`, `hi`) (None: unbounded), newest first (or
        oldest first), filtered: of `game`; with `player` in a seat; by `outcome` ("draw"; "win" or "loss",
        of `player` if given, else any decided result; or the result's outcome "forfeit", "max_moves" or
        "normal"; anything else does not filter). The player filter reads the indexes on the first two
        seats and, where results of more players are committed (`wide`; None: look), the other seats too.
        Keyset paging: a page costs the same at the first result as at the millionth."""
        where, args = [], []
        if lo is not None:
            where.append("commit_seq >= ?")
            args.append(lo)
        if hi is not None:
            where.append("commit_seq < ?")
            args.append(hi)
        if game:
            where.append("game = ?")
            args.append(game)
        if outcome:
            if outcome == "draw":
                where.append("draw = 1")
            elif outcome in ("win", "loss"):
                where.append("winner IS NOT NULL")
                if player:
                    op = "=" if outcome == "win" else "!="
                    where.append(f"json_extract(players, '$[' || winner || ']') {op} ?")
                    args.append(player)
            elif outcome in ("forfeit", "max_moves", "normal"):
                where.append("outcome = ?")
                args.append(outcome)
        order = "DESC" if newest_first else "ASC"
        cond = " AND ".join(where) or "1"
        c = self.conn
        if player:
            seats = ["json_extract(players, '$[0]') = ?", "json_extract(players, '$[1]') = ?"]
            if (self.has_wide_results() if wide is None else wide):
                seats.append("(json_array_length(players) > 2 AND EXISTS (SELECT 1 FROM json_each(results.players) "
                             "WHERE json_each.key >= 2 AND json_each.value = ?))")
            parts = [f"SELECT * FROM (SELECT * FROM results WHERE {seat} AND {cond} "
                     f"ORDER BY commit_seq {order} LIMIT ?)" for seat in seats]
            sql = " UNION ".join(parts) + f" ORDER BY commit_seq {order} LIMIT ?"
            params = [x for _ in seats for x in (player, *args, limit)] + [limit]
            rows = c.execute(sql, params).fetchall()
        else:
            rows = c.execute(f"SELECT * FROM results WHERE {cond} ORDER BY commit_seq {order} LIMIT ?",
                             (*args, limit)).fetchall()
        return [_result(r) for r in rows]

    def seat_pairs(self, game: str | None = None) -> list[tuple[str, str]]:
        """(first match id, second match id) of every pair of `game` (None: every game) whose two results
        are both committed, in the order the first matches were scheduled: the same players with the seats
        swapped (`MatchRow.pair`). A pair whose second match is owed (a budget that ended between the two)
        or failed is left out."""
        return [(a, b) for a, b, _ in self._pairs(game)]

    def duplicate_pairs(self, game: str | None = None) -> list[tuple[str, str]]:
        """`seat_pairs` whose two matches share their seed: duplicate matches (the same chance outcomes,
        dealt to the same seats, in a game whose core draws chance from the match seed, such as OpenSpiel's
        poker), to be scored as one result: each player's return summed over the two."""
        return [(a, b) for a, b, same in self._pairs(game) if same]

    def _pairs(self, game: str | None) -> list[tuple[str, str, bool]]:
        q = ("SELECT r1.match_id, r2.match_id, m1.seed = m2.seed FROM results r1 "
             "JOIN results r2 ON r2.pair = r1.match_id AND r2.match_id != r1.match_id "
             "JOIN matches m1 ON m1.match_id = r1.match_id JOIN matches m2 ON m2.match_id = r2.match_id "
             "WHERE r1.pair = r1.match_id")
        args: list = []
        if game is not None:
            q += " AND r1.game=?"
            args.append(game)
        return [(a, b, bool(same)) for a, b, same in self.conn.execute(q + " ORDER BY m1.seq", args)]

    def read_replay(self, match_id: str) -> Replay:
        """The replay of committed match `match_id`, wherever the league keeps it. ReplayError when the
        league has no result or no replay of that id (an id is looked up, never used as a path)."""
        row = self.result_for(match_id) if isinstance(match_id, str) else None
        if row is None:
            raise ReplayError(f"no match {match_id!r} in the league at {self.dir}")
        blob = archive.get(self.conn, match_id)
        if blob is not None:
            return parse_replay(blob, blob_ref(self.db_path, match_id))
        if not row.replay:
            raise ReplayError(f"match {match_id} has no replay")
        # This folder's own copy first (the folder may have moved since the path was stored).
        stored = Path(row.replay)
        local = self.replay_dir / stored.name
        return read_replay(local if local.exists() else stored)

    # -- ratings and payoff --------------------------------------------------------------
    def elo(self, game: str = OVERALL) -> dict[str, float]:
        rows = self.conn.execute("SELECT player, value FROM ratings WHERE system='elo' AND game=?", (game,))
        return {p: json.loads(v) for p, v in rows}

    def openskill(self, game: str = OVERALL) -> dict[str, tuple[float, float]]:
        rows = self.conn.execute("SELECT player, value FROM ratings WHERE system='openskill' AND game=?", (game,))
        return {p: tuple(json.loads(v)) for p, v in rows}

    def rated_games(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT DISTINCT game FROM ratings ORDER BY game")]

    def rating_history(self, game: str = OVERALL,
                       players: Sequence[str] | None = None) -> list[tuple[int, str, float, float, float]]:
        """(commit number, player, Elo, mu, sigma) after each rated commit of `game`, in commit order; with
        `players`, only theirs."""
        if players is None:
            return self.conn.execute("SELECT commit_seq, player, elo, mu, sigma FROM rating_history WHERE game=? "
                                     "ORDER BY commit_seq", (game,)).fetchall()
        names = list(players)
        marks = ",".join("?" * len(names))
        return self.conn.execute(f"SELECT commit_seq, player, elo, mu, sigma FROM rating_history WHERE game=? AND "
                                 f"player IN ({marks}) ORDER BY commit_seq", (game, *names)).fetchall()

    def payoff(self, game: str = OVERALL, players: Sequence[str] | None = None) -> Payoff:
        """The decayed payoff table of `game`; with `players`, only the pairs among them."""
        if players is None:
            rows = self.conn.execute("SELECT home, away, w, d, l, n FROM payoff WHERE game=?", (game,)).fetchall()
        else:
            names = list(players)
            marks = ",".join("?" * len(names))
            rows = self.conn.execute(f"SELECT home, away, w, d, l, n FROM payoff WHERE game=? AND home IN ({marks}) "
                                     f"AND away IN ({marks})", (game, *names, *names)).fetchall()
        return Payoff.from_dict({"decay": self.payoff_decay, "pairs": [list(r) for r in rows]})

    def records(self, game: str = OVERALL) -> dict[str, tuple[int, int, int]]:
        """Exact (wins, draws, losses) per player over the rated results of `game` (OVERALL: every game)."""
        return {p: (w, d, l) for p, w, d, l in
                self.conn.execute("SELECT player, w, d, l FROM records WHERE game=?", (game,))}

    # -- one-player games --------------------------------------------------------------
    def one_player_games(self) -> list[str]:
        """The games played by one player at a time (single-agent tasks), in config order, as the league
        found them when it last started (a store no league started: the games of one-player results)."""
        known = self.get_meta("one_player_games")
        if known is not None:
            return list(known)
        return [r[0] for r in self.conn.execute(
            "SELECT DISTINCT game FROM results WHERE json_array_length(players)=1 ORDER BY game")]

    def episodes(self, game: str) -> list[tuple[str, int, float]]:
        """(player, seed, return) of every one-player result of `game`, in commit order."""
        rows = self.conn.execute("SELECT r.players, r.returns, m.seed FROM results r JOIN matches m USING(match_id) "
                                 "WHERE r.game=? AND json_array_length(r.players)=1 ORDER BY r.commit_seq", (game,))
        return [(json.loads(p)[0], int(seed), float(json.loads(ret)[0])) for p, ret, seed in rows]

    def forfeits(self, game: str) -> dict[str, int]:
        """Per player of one-player game `game`: its episodes that ended by a forfeit (an invalid move,
        an error, a timeout), whose return is only what the episode had earned when it stopped."""
        rows = self.conn.execute("SELECT json_extract(players, '$[0]'), COUNT(*) FROM results WHERE game=? AND "
                                 "json_array_length(players)=1 AND outcome='forfeit' GROUP BY 1", (game,))
        return {p: int(n) for p, n in rows}

    def return_table(self, game: str, seeds: Iterable[int] | None = None) -> dict[str, tuple[int, float, float]]:
        """Per player of one-player game `game`: (episodes, mean return, standard deviation of the returns,
        ddof=0), over all its results or over those on `seeds` only."""
        return return_stats(self.episodes(game), seeds)

    def common_seeds(self, game: str, players: Iterable[str] | None = None) -> list[int]:
        """The seeds of `game` that every one of `players` (default: the active players of `game`) has
        finished, in the order they were first finished; none while a player has none."""
        return common_seeds_of(self.episodes(game), self._game_players(game) if players is None else players)

    def common_return_table(self, game: str) -> dict[str, tuple[int, float, float]]:
        """`return_table` over the common seeds only, for the active players of `game`: the fair
        comparison mid-run (every player on the same episodes). Rank by mean, highest first."""
        eps, players = self.episodes(game), self._game_players(game)
        table = return_stats(eps, common_seeds_of(eps, players))
        return {p: table[p] for p in players if p in table}

    def _game_players(self, game: str) -> list[str]:
        return [p.name for p in self.players(active_only=True) if game in p.games]

    def recompute(self, game: str = OVERALL) -> tuple[EloTable, OpenSkillTable]:
        """Ratings rebuilt from the stored result log by a new rater with the league's settings, through
        the same code path as live commits (`LeagueRatings.replay`)."""
        results = self.results(None if game == OVERALL else game)
        return LeagueRatings(self.elo_k, self.payoff_decay).replay(((r.players, r.returns) for r in results), game)

    # -- events ------------------------------------------------------------------------
    def add_event(self, kind: str, player: str | None = None, **data: Any) -> None:
        with self.tx() as c:
            c.execute("INSERT INTO events(t, kind, player, data) VALUES(?,?,?,?)",
                      (time.time(), kind, player, json.dumps(data)))

    def events(self, kind: str | None = None) -> list[dict]:
        q, args = "SELECT t, kind, player, data FROM events", []
        if kind:
            q += " WHERE kind=?"
            args.append(kind)
        return [{"t": t, "kind": k, "player": p, **json.loads(d or "{}")} for t, k, p, d in
                self.conn.execute(q + " ORDER BY id", args)]


def return_stats(episodes: Iterable[tuple[str, int, float]],
                 seeds: Iterable[int] | None = None) -> dict[str, tuple[int, float, float]]:
    """(episodes, mean, std with ddof=0) of the returns per player of (player, seed, return) rows, only
    those on `seeds` if given."""
    keep = None if seeds is None else set(seeds)
    by: dict[str, list[float]] = {}
    for player, seed, ret in episodes:
        if keep is None or seed in keep:
            by.setdefault(player, []).append(ret)
    out = {}
    for player, rets in by.items():
        mean = math.fsum(rets) / len(rets)
        out[player] = (len(rets), mean, math.sqrt(math.fsum((x - mean) ** 2 for x in rets) / len(rets)))
    return out


def common_seeds_of(episodes: Iterable[tuple[str, int, float]], players: Iterable[str]) -> list[int]:
    """The seeds that each of `players` has a (player, seed, return) row on, in order of first appearance."""
    want = set(players)
    if not want:
        return []
    seen: dict[int, set[str]] = {}
    for player, seed, _ in episodes:
        seen.setdefault(seed, set()).add(player)
    return [s for s, who in seen.items() if want <= who]


def _player(r) -> PlayerRow:
    return PlayerRow(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6], r[7], bool(r[8]), r[9],
                     json.loads(r[10]) if r[10] else None, r[11])


def _match(r) -> MatchRow:
    # matches: match_id, seq, game, players, specs, seed, status, attempts, note, created, started, finished,
    # source, pair (absent from rows of a query that names its columns)
    return MatchRow(r[0], r[1], r[2], json.loads(r[3]), json.loads(r[4]), r[5], r[6], r[7], r[8],
                    r[13] if len(r) > 13 else None)


def _result(r) -> ResultRow:
    return ResultRow(r[0], r[1], r[2], json.loads(r[3]), json.loads(r[4]), r[5], bool(r[6]), r[7], r[8], r[9],
                     json.loads(r[10]) if r[10] else [], r[11], r[12], r[13], r[14] if len(r) > 14 else None)
