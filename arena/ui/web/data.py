"""What the web pages read from a league: plain JSON-ready data, cached per league version.

The server reads the league's SQLite database through a small pool of connections (at most
`MAX_READERS`; WAL: readers never block the league's commits, nor it them) and never writes
through them. A request takes one for as long as it reads and gives it back: the server's worker
threads come and go, its connections do not grow with them. The thread of the server's event
loop (the `async` handlers) has one of its own, so it never waits for a worker's. Each time a connection is taken,
the database file is checked to be the one the server opened: deleted or replaced under a
running server, every read is a `LeagueGone` (a 503 with one line), never an answer from the
old file. Views of
the whole league (the leaderboard, the payoff with its alpha-rank, the rating curves) are
cached under the league's version (its last commit, its players, its config): a table is reused
until the league's data changes. A running league commits hundreds of times a second and a fitted
table takes a good part of a second to compute, so each view is computed by one request at a time
(single flight): the requests that come while it runs are answered with the previous table (a
computation behind), or, where there is none yet, wait for that computation and take its result;
and a table is reused for `REUSE_FOR` times as long as it took to compute even if the league moved
on, so a league that never stops committing does not keep the server computing. Recomputing once
per waiting request, as the first version did, made ``/api/players``' p99 14 s under 50 clients
while a league wrote; now 0.25 s (``benchmarks/bench_web.py --writer``). Each table says the
version it is of, so the page knows to ask again.

Matches are listed with keyset paging on the results' commit order (``before`` / ``after`` a
commit number): a page costs the same at the first result as at the millionth
(`arena.league.queries.result_page`). Every read goes through the league's store and queries:
no SQL here.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import math
import os
import queue
import sqlite3
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from arena.league.queries import (default_scope, describe_outcome, game_label, league_name, payoff_data, rating_rows,
                                  result_page, return_rows)
from arena.errors import ArenaError
from arena.league.storage import OVERALL, LeagueStore

#: Most matches one page of the list holds.
MAX_PAGE = 200
#: A table is reused this many times as long as it took to compute after it was made, even if the
#: league moved on meanwhile: a league that commits all the time would keep the server computing
#: tables back to back (a fitted table of 50 players takes 0.4 s; of 1,000 players and a million
#: results, 11 s), taking the CPU from the requests. The server spends at most 1 / (1 + this) of its
#: time on each view.
REUSE_FOR = 4.0
#: Players drawn in the rating curves and the payoff heatmap by default (best by Elo).
CURVE_PLAYERS = 8
HISTORY_POINTS = 300
OUTCOMES = ("win", "loss", "draw", "forfeit", "max_moves", "normal")
#: Read connections open at once (each a few file descriptors: the database, its WAL and index).
MAX_READERS = 8
#: Seconds a request waits for a read connection when all are taken before it is a 503.
READER_WAIT = 30.0


class LeagueGone(ArenaError):
    """The league database the server opened was deleted or replaced, or cannot be read."""


def _reads(method):
    """Run `method` holding one read connection (the same one for the reads nested in it)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self.reading():
            return method(self, *args, **kwargs)
    return wrapper


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _num(x: Any) -> float | None:
    """A float for JSON (NaN and infinities: None)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


class _Flight:
    """One computation of a view, running: those who wait for it take its result (or its error)."""

    __slots__ = ("done", "value", "error")

    def __init__(self):
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class _Cached:
    """A view of the league: the last table computed (`value`, at the league's version `key`) and the
    computation of a newer one running now (`flight`), if any."""

    __slots__ = ("key", "value", "flight", "until")

    def __init__(self):
        self.key: Any = None
        self.value: Any = None
        self.flight: _Flight | None = None
        #: Until when (monotonic) the table is reused even though the league moved on (`REUSE_FOR`).
        self.until = 0.0


class LeagueData:
    """Read access to one league for the web pages (thread-safe: a pool of read connections)."""

    def __init__(self, directory: str | Path, max_readers: int = MAX_READERS):
        self.dir = Path(directory)
        first = LeagueStore(self.dir, create=False)  # the error for a folder that holds no league
        self.db_path = first.db_path
        self._identity = self._file_identity()
        self._idle: queue.LifoQueue[LeagueStore] = queue.LifoQueue()
        self._idle.put(first)
        self._open = 1
        self._max = max(1, int(max_readers))
        self._pool_lock = threading.Lock()
        self._local = threading.local()
        self._closed = False
        self._loop_thread: int | None = None  # the event loop's thread, and its own connection
        self._loop_store: LeagueStore | None = None
        self._cache: dict[tuple, _Cached] = {}
        self._cache_lock = threading.Lock()
        #: Views computed, by name (``"leaderboard"``, ``"payoff"``, ...): what the single flight saves.
        self.computed: collections.Counter[str] = collections.Counter()
        self._wide: bool | None = None  # are there results of more than two players?
        self._ready = False  # the league's config is written (once it is, it stays)

    # -- connections and the version ---------------------------------------------------------
    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.db_path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def check_database(self) -> None:
        """LeagueGone when the database file is not the one the server opened."""
        now = self._file_identity()
        if now == self._identity:
            return
        what = "deleted" if now is None else "replaced"
        raise LeagueGone(f"the league database {self.db_path} was {what} while the server ran: "
                         f"restart `arena serve {self.dir}` to serve what is there now")

    @contextlib.contextmanager
    def reading(self):
        """Hold one read connection (a nested call in the same thread shares it)."""
        held = getattr(self._local, "store", None)
        if held is not None:
            yield held
            return
        self.check_database()
        s = self._take_loops() if _on_event_loop() else None
        if s is None:
            s = self._take()
        self._local.store = s
        ok = False
        try:
            yield s
            ok = True
        except sqlite3.Error:
            raise
        except Exception:
            ok = True  # an error of the request (no such replay), not of the connection
            raise
        finally:
            self._local.store = None
            self._give_back(s, ok)

    def _take(self) -> LeagueStore:
        if self._closed:
            raise LeagueGone("the server is stopping")
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._pool_lock:
            grow = self._open < self._max
            if grow:
                self._open += 1
        if grow:
            try:
                return LeagueStore(self.dir, create=False)
            except BaseException:
                with self._pool_lock:
                    self._open -= 1
                raise
        try:
            return self._idle.get(timeout=READER_WAIT)
        except queue.Empty:
            raise LeagueGone(f"the server is busy (all {self._max} database readers taken for {READER_WAIT:g}s): "
                             "try again") from None

    def _take_loops(self) -> LeagueStore | None:
        """The event loop thread's own connection (None on another loop's thread: it uses the pool)."""
        me = threading.get_ident()
        with self._pool_lock:
            if self._closed or self._loop_thread not in (None, me):
                return None
            self._loop_thread = me
            if self._loop_store is None:
                self._loop_store = LeagueStore(self.dir, create=False)
            return self._loop_store

    def _give_back(self, s: LeagueStore, ok: bool) -> None:
        if s is self._loop_store:
            if not ok or self._closed:
                with self._pool_lock:
                    self._loop_store = None
                s.close()
            return
        if ok and not self._closed and s.conn.in_transaction is False:
            self._idle.put(s)
            return
        with self._pool_lock:  # after an error the connection may be in any state: a fresh one next time
            self._open -= 1
        try:
            s.close()
        except Exception:
            pass

    @property
    def store(self) -> LeagueStore:
        """The connection this thread holds (inside `reading`)."""
        s = getattr(self._local, "store", None)
        if s is None:
            raise RuntimeError("LeagueData.store is only there inside `with data.reading():`")
        return s

    @property
    def connections(self) -> int:
        """Read connections open now (at most `max_readers`, and the event loop's)."""
        return self._open + (self._loop_store is not None)

    def close(self) -> None:
        self._closed = True
        with self._pool_lock:
            loops, self._loop_store = self._loop_store, None
        if loops is not None:
            loops.close()
        while True:
            try:
                s = self._idle.get_nowait()
            except queue.Empty:
                break
            with self._pool_lock:
                self._open -= 1
            try:
                s.close()
            except Exception:
                pass

    @_reads
    def version(self) -> list[int]:
        """Moves when a result is committed, a player is added or changed, or the league's config is
        first written (`arena league run` writes it after its players: until then there is nothing to play)."""
        return list(self.store.state_version())

    def cached(self, name: tuple, compute: Callable[[], Any]) -> Any:
        """The view `name` at the league's version: `compute()` (run holding a read connection) once per
        version, and by one request at a time. While it runs, the others take the previous table, or
        where there is none, wait for this computation and take its result (or its error)."""
        key = tuple(self.version())
        nested = getattr(self._local, "store", None) is not None  # inside another view's computation
        lead = False
        with self._cache_lock:
            entry = self._cache.get(name)
            if entry is None:
                entry = self._cache[name] = _Cached()
            if entry.key == key:
                return entry.value
            flight = entry.flight
            if entry.key is not None and (flight is not None or time.monotonic() < entry.until):
                return entry.value  # a newer one is being computed, or was just now: the previous table
            if flight is None:
                flight = entry.flight = _Flight()
                lead = True
        if not lead:
            if not nested:
                return self._join(flight)
            # Never wait for another thread while holding a read connection (that thread may be waiting
            # for one): the first table of this view is computed here too, unshared.
            with self._cache_lock:
                self.computed[name[0]] += 1
            return compute()
        began = time.monotonic()
        try:
            with self.reading():
                value = compute()
        except BaseException as e:
            flight.error = e
            raise
        else:
            flight.value = value
            now = time.monotonic()
            with self._cache_lock:
                entry.key, entry.value, entry.until = key, value, now + REUSE_FOR * (now - began)
        finally:
            with self._cache_lock:
                self.computed[name[0]] += 1
                entry.flight = None
            flight.done.set()
        return value

    @staticmethod
    def _join(flight: _Flight) -> Any:
        """The result of a computation another request runs (waited for without a read connection)."""
        flight.done.wait()
        if flight.error is not None:
            raise flight.error
        return flight.value

    def ready(self) -> bool:
        """Whether the league is made: its config is written (`arena league run` writes it after its
        players; `league run --serve` serves the league from before that)."""
        if not self._ready:
            with self.reading() as s:
                self._ready = s.get_meta("config") is not None
        return self._ready

    # -- the league ----------------------------------------------------------------------------
    @_reads
    def summary(self) -> dict:
        s = self.store
        results = s.last_commit()
        running = s.match_count("running")
        cfg = s.get_meta("config") or {}
        games = [g.get("id") if isinstance(g, dict) else g for g in cfg.get("games", [])]
        return {"name": league_name(s), "version": self.version(), "last_commit": results,
                "players": s.player_count(humans=False), "running": running, "games": games}

    def games(self) -> dict:
        """The rating scopes (OVERALL first, once), the one-player games, and the scope a page opens on
        (`default_scope`: a league of one game opens on that game's table).

        A league of one-player games only has no rating scope at all (its table is the returns'):
        ``rated`` is empty and ``default`` is its first game, not an empty "all games" Elo table."""
        def compute():
            s = self.store
            solo = s.one_player_games()
            cfg = s.get_meta("config") or {}
            configured = [g.get("id") if isinstance(g, dict) else g for g in cfg.get("games", [])]
            # the store keeps OVERALL among its rated games: list it once, first
            per_game = [g for g in s.rated_games() if g != OVERALL]
            two_player = per_game or [g for g in configured if g not in solo] or not solo
            rated = [OVERALL, *per_game] if two_player else []
            return {"rated": rated, "solo": solo, "default": default_scope(s) if rated else solo[0],
                    "labels": {OVERALL: game_label(OVERALL)}}
        return self.cached(("games",), compute)

    def leaderboard(self, game: str = OVERALL, sort: str = "rating") -> dict:
        return self.cached(("leaderboard", game, sort), lambda: self._leaderboard(game, sort))

    def _leaderboard(self, game: str, sort: str) -> dict:
        # `version`: the league's version the table is of (at least): a page that saw a newer one while
        # this table was served (a computation behind) asks again (static/app.js)
        s = self.store
        version = self.version()
        kinds = {p.name: (p.kind, p.role, p.active) for p in s.players()}
        if game in s.one_player_games():
            rows = [{"player": r.player, "kind": kinds.get(r.player, ("?",))[0], "mean": _num(r.mean),
                     "std": _num(r.std), "episodes": r.episodes, "common_seeds": r.common_seeds,
                     "forfeits": r.forfeits} for r in return_rows(s, game)]
            return {"game": game, "label": game_label(game), "kind": "returns", "rows": rows, "version": version}
        from arena.ui.views import fitted_board

        pay = self.payoff(game)
        mass = dict(zip(pay["players"], pay["alpharank"] or []))
        board = fitted_board(s, game)
        fitted = {r.player: r for r in board.rows}
        order = [r.player for r in board.rows]
        live = {r.player: r for r in rating_rows(s, game, sort if sort != "rating" else "elo")}
        names = order + [p for p in live if p not in fitted] if sort == "rating" else list(live)
        rows = []
        for name in names:
            r, f = live.get(name), fitted.get(name)
            kind, role, active = kinds.get(name, ("?", None, True))
            row = {"player": name, "kind": kind, "role": role, "active": bool(active),
                   "elo": _num(r.elo) if r else None, "mu": _num(r.mu) if r else None,
                   "sigma": _num(r.sigma) if r else None, "conservative": _num(r.conservative) if r else None,
                   "games": r.games if r else (f.games if f else 0), "wins": r.wins if r else None,
                   "draws": r.draws if r else None, "losses": r.losses if r else None,
                   "win_rate": _num(r.win_rate) if r else None, "alpharank": _num(mass.get(name)),
                   "rating": None, "rating_lo": None, "rating_hi": None, "rank": None, "rank_lo": None,
                   "rank_hi": None, "provisional": True, "forfeits": 0, "invalid_per_game": None, "payoff": None,
                   "payoff_lo": None, "payoff_hi": None, "nash": None, "nash_lo": None, "nash_hi": None}
            if f is not None:
                row.update({"rating": _num(f.rating), "rating_lo": _num(f.lo), "rating_hi": _num(f.hi),
                            "rank": f.rank, "rank_lo": f.rank_lo, "rank_hi": f.rank_hi, "provisional": f.provisional,
                            "forfeits": f.forfeits, "invalid_per_game": _num(f.invalid_rate)})
                if f.payoff is not None:
                    row.update({"payoff": _num(f.payoff.mean), "payoff_lo": _num(f.payoff.lo),
                                "payoff_hi": _num(f.payoff.hi)})
                if f.nash is not None:
                    row.update({"nash": _num(f.nash.mean), "nash_lo": _num(f.nash.lo), "nash_hi": _num(f.nash.hi)})
            rows.append(row)
        return {"game": game, "label": game_label(game), "kind": "rated", "rows": rows, "version": version,
                "alpharank_note": pay["note"], "alpharank_error": pay["alpharank_error"],
                "scoring": board.scoring, "fit": {"note": board.note(), "anchor": board.anchor,
                                                  "anchor_value": board.anchor_value, "stability": board.stability,
                                                  "top_k": board.top_k, "resamples": board.resamples,
                                                  "results": board.results}}

    def payoff(self, game: str = OVERALL) -> dict:
        def compute():
            version = self.version()  # as the leaderboard's: a page served this table a computation behind asks again
            d = payoff_data(self.store, game)
            return {"game": game, "version": version, "players": d.players, "kind": d.kind,
                    "mean_payoff": None if d.mean_payoff is None else
                    [[_num(x) for x in row] for row in d.mean_payoff.tolist()],
                    "win_rate": [[_num(x) for x in row] for row in d.win_rate.tolist()],
                    "games": [[_num(x) for x in row] for row in d.games.tolist()],
                    "alpharank": None if d.alpharank is None else [_num(x) for x in d.alpharank.tolist()],
                    "alpharank_error": d.alpharank_error, "note": d.capped_note,
                    "total_players": d.total_players}
        return self.cached(("payoff", game), compute)

    def history(self, game: str = OVERALL, top: int = CURVE_PLAYERS) -> dict:
        return self.cached(("history", game, top), lambda: self._history(game, top))

    def _history(self, game: str, top: int) -> dict:
        s = self.store
        version = self.version()
        elo = s.elo(game)
        players = sorted(elo, key=lambda p: (-elo[p], p))[:max(0, top)]
        if not players:
            return {"game": game, "version": version, "players": [], "series": {}}
        rows = s.rating_history(game, players)
        series: dict[str, list] = {p: [] for p in players}
        for seq, p, e, mu, sigma in rows:
            series[p].append([seq, _num(e), _num(mu - 3 * sigma) if mu is not None and sigma is not None else None])
        for p, pts in series.items():
            if len(pts) > HISTORY_POINTS:
                step = len(pts) / HISTORY_POINTS
                series[p] = [pts[int(i * step)] for i in range(HISTORY_POINTS - 1)] + [pts[-1]]
        return {"game": game, "version": version, "players": players, "series": series}

    # -- matches ------------------------------------------------------------------------------
    def _has_wide(self) -> bool:
        if self._wide is None:
            self._wide = self.store.has_wide_results()
        return self._wide

    @_reads
    def matches(self, game: str | None = None, player: str | None = None, outcome: str | None = None,
                since: float | None = None, until: float | None = None, before: int | None = None,
                after: int | None = None, limit: int = 50) -> dict:
        """One page of committed matches, newest first, filtered; `before` / `after`: keyset cursors."""
        limit = max(1, min(int(limit), MAX_PAGE))
        page = result_page(self.store, game, player, outcome, since, until, before, after, limit,
                           wide=self._has_wide() if player else False)
        results = page.results
        items = [self.match_item(r) for r in results]
        full = len(results) == limit
        newest = results[0].commit_seq if results else None
        oldest = results[-1].commit_seq if results else None
        return {"matches": items, "limit": limit,
                "older": oldest if results and (full or page.ascending) else None,
                "newer": newest if results and (not page.ascending and before is not None or page.ascending and full)
                else None,
                "last_commit": page.last_commit}

    @staticmethod
    def match_item(r) -> dict:
        return {"match_id": r.match_id, "commit_seq": r.commit_seq, "game": r.game, "players": r.players,
                "returns": [_num(x) for x in r.returns], "winner": r.winner, "draw": r.draw, "outcome": r.outcome,
                "reason": r.reason, "moves": r.moves, "committed": r.committed,
                "date": datetime.fromtimestamp(r.committed, timezone.utc).isoformat(timespec="seconds"),
                "text": describe_outcome(r), "replay": bool(r.replay)}

    @_reads
    def match(self, match_id: str) -> dict | None:
        r = self.store.result_for(match_id)
        if r is None:
            return None
        item = self.match_item(r)
        m = self.store.match_info(match_id)
        if m is not None:
            item.update(seed=m.seed, specs=m.specs, source=m.source, created=m.created, started=m.started,
                        finished=m.finished)
        return item

    @_reads
    def result_for(self, match_id: str):
        """The committed result of `match_id` (None: no such match)."""
        return self.store.result_for(match_id)

    @_reads
    def read_replay(self, match_id: str):
        return self.store.read_replay(match_id)

    def players(self) -> list[dict]:
        return self.cached(("players",), lambda: [
            {"name": p.name, "kind": p.kind, "role": p.role, "games": p.games, "active": p.active,
             "version": p.version, "steps": p.steps, "parent": p.parent} for p in self.store.players()])
