"""People playing league players from the browser: one session (one match) per page.

Each person plays as a league player of their own, ``human:NAME`` (`arena.league.play`: the name
rules, guest names); the API keeps a browser's name in a cookie. At the end a session reports the
rating change of its match's own commit (`rating_change`), not "rating now minus at the start".

A session schedules its match through the league's own path (`schedule_human_match`), plays
it on a thread of its own with `run_match_job`, a `WebHumanAgent` in the person's seat, and
commits it with `League.commit`: recorded and rated like the league's own matches, at most
once (the commit is idempotent on the match id), and never over the league's own results
(ratings are read and written inside the commit's transaction).

The agent blocks in ``act`` until the page posts a move. What the page posts is read as the
terminal reads what a person types (`HumanAgent.parse`): a move that is no move is answered at
once with the reason and asked again; a move the game itself refuses comes back as the match
loop's ``feedback`` on the next ask. The page polls the session's state; when no poll came for
``idle_timeout`` seconds (the tab was closed) or no move came within ``move_time_limit``, the
agent raises `Forfeit` and the match ends there, a forfeit recorded once.

A server stopped in an orderly way forfeits its matches; one killed (SIGKILL, a power cut) cannot.
So each server holds a lock file in the league folder (``.web-servers/ID.lock``, locked with
``flock`` for as long as the process lives) and writes its id in the note of each match it plays.
When a server opens the league, a match still ``running`` whose server's lock is free (that
process is gone) is closed as ``failed`` with the note "aborted: ...": no result and no rating (the
process that could have committed it is gone, and the league requeues only its own matches). A
match of a server still running is left alone.
"""

from __future__ import annotations

import os
import queue
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena.agents.base import BaseAgent, Forfeit
from arena.agents.human import HumanAgent
from arena.errors import ArenaError

from arena.ui.web.boards import board_of, move_cell, move_label, seat_mark

#: Sessions playing at once (each a thread and, for a search player, its CPU).
MAX_SESSIONS = 32
#: Matches one client address may start a minute on a server without a token (each adds a
#: scheduled match, and a new name adds a player to the league, for good).
STARTS_PER_MINUTE = 20


#: The note of a match a web server is playing: this, then the server's id.
WEB_NOTE = "web play, server "
#: Folder (in the league folder) of the running servers' lock files.
SERVERS_DIR = ".web-servers"
_SERVER_ID = re.compile(r"^[0-9a-f]{16}$")


class SessionGone(Exception):
    """The session ended (or was never there)."""


class TooBusy(ArenaError):
    """Refused for now (the session cap, the rate limit): try again later. `retry_after`: seconds."""

    def __init__(self, message: str, retry_after: float = 1.0):
        super().__init__(message)
        self.retry_after = retry_after


class LeagueStarting(TooBusy):
    """The league is still being made: `arena league run --serve` serves it from its first moment, and
    writes its config after its players, so until then there is no league to schedule a match in."""


#: Seconds a request made while the league is being made is told to wait (``Retry-After``).
STARTING_RETRY = 2.0


def league_starting(directory: Path) -> LeagueStarting:
    return LeagueStarting(f"the league in {directory} is starting (its players and config are being written): "
                          f"try again in {STARTING_RETRY:g}s", retry_after=STARTING_RETRY)


class RateLimit:
    """A token bucket per client: `rate` starts a minute, in bursts of up to `rate`."""

    def __init__(self, rate: int, max_clients: int = 10_000):
        self.rate, self.max_clients = rate, max_clients
        self.buckets: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def take(self, client: str) -> None:
        """Count one start of `client`; TooBusy when it has none left."""
        if self.rate <= 0:
            return
        per_s = self.rate / 60.0
        now = time.monotonic()
        with self.lock:
            tokens, at = self.buckets.get(client, (float(self.rate), now))
            tokens = min(float(self.rate), tokens + (now - at) * per_s)
            if tokens < 1.0:
                wait = (1.0 - tokens) / per_s
                raise TooBusy(f"too many matches started from {client}: {self.rate} a minute without a token; "
                              f"try again in {wait:.0f}s (the server's owner can set a token to lift this)",
                              retry_after=wait)
            self.buckets[client] = (tokens - 1.0, now)
            if len(self.buckets) > self.max_clients:  # forget the clients whose bucket is full again
                full = [k for k, (t, a) in self.buckets.items() if t + (now - a) * per_s >= self.rate]
                for k in full:
                    self.buckets.pop(k, None)
                while len(self.buckets) > self.max_clients:
                    self.buckets.pop(next(iter(self.buckets)))


@dataclass
class PlaySettings:
    #: Seconds a person has for one move.
    move_time_limit: float = 300.0
    #: Seconds without a poll from the page after which the person has left: a forfeit.
    idle_timeout: float = 20.0
    #: Sessions kept in memory after their match ended (their page can still show the end).
    keep_finished: int = 200
    #: Sessions playing at once (None: `MAX_SESSIONS`); a start over it is refused (429).
    max_sessions: int | None = None
    #: Without a token: matches one client address may start a minute (0: no limit).
    starts_per_minute: int = STARTS_PER_MINUTE


def _readable(observation) -> str:
    """The view a person reads: the game's ``human_view`` where it has one (poker in words), else its text."""
    try:
        view = observation.human_view
    except Exception:
        view = None
    return view if isinstance(view, str) and view else observation.text


def _rules(observation) -> str | None:
    """The rules the game's text repeats and its readable view leaves out (TextArena's prompt), or None."""
    try:
        rules = observation.rules
    except Exception:
        rules = None
    return rules if isinstance(rules, str) and rules else None


class WebHumanAgent(BaseAgent):
    """A person on a web page, as an agent: `act` waits for the page's move."""

    spec = "human"

    def __init__(self, session: "PlaySession"):
        self.session = session
        self._parser = HumanAgent(max_tries=1)

    def act(self, observation) -> Any:
        s = self.session
        if s.resigned:  # resigned while the other side was to move
            raise Forfeit("the player resigned")
        legal = observation.legal_actions
        board = board_of(observation.game_id, observation.text)
        moves = []
        for a in legal or []:
            label = observation.action_to_text(a) if observation.action_kind == "discrete" else str(a)
            moves.append({"value": a, "label": move_label(observation.game_id, board, a, label),
                          "cell": move_cell(observation.game_id, board, a, label)})
        asked = time.monotonic()
        with s.lock:
            view = _readable(observation)
            readable = view != observation.text
            s.turn = {"view": view, "readable": readable, "rules": _rules(observation) if readable else None,
                      "board": board, "legal": moves, "action_kind": observation.action_kind,
                      "feedback": observation.feedback, "step": observation.step,
                      "deadline": time.time() + s.settings.move_time_limit, "free_text": observation.action_kind == "text"
                      and not legal}
            s.status = "your_turn"
        try:
            while True:
                try:
                    raw, reply = s.moves.get(timeout=0.1)
                except queue.Empty:
                    now = time.monotonic()
                    if s.stop.is_set():
                        raise Forfeit("the server stopped during the match") from None
                    if now - s.last_seen > s.settings.idle_timeout:
                        raise Forfeit(f"the player left the page (no contact for {s.settings.idle_timeout:g}s)") from None
                    if now - asked > s.settings.move_time_limit:
                        raise Forfeit(f"no move within the {s.settings.move_time_limit:g}s limit") from None
                    continue
                if raw is None:  # resigned
                    reply.put(None)
                    raise Forfeit("the player resigned")
                move, why = self._parser.parse(observation, str(raw), legal)
                reply.put(why)
                if why is None:
                    with s.lock:
                        s.log.append({"player": s.seat, "move": observation.action_to_text(move)
                                      if observation.action_kind == "discrete" else str(move)})
                    return move
        finally:
            with s.lock:
                s.turn = None
                if s.status == "your_turn":
                    s.status = "opponent"

    def match_over(self, view: str, result: Any, seat: int) -> None:
        with self.session.lock:
            self.session.final_view = view


@dataclass
class PlaySession:
    id: str
    game: str
    opponent: str
    human: str
    seat: int
    settings: PlaySettings
    #: The person's name (`human` is their league player, ``human:NAME``).
    name: str = ""
    match_id: str = ""
    players: list[str] = field(default_factory=list)
    status: str = "starting"  # starting, your_turn, opponent, over, error
    turn: dict | None = None
    final_view: str | None = None
    #: At the end: every seat's board (the other side's cards too) and this person's readable view.
    final_boards: list | None = None
    final_readable: str | None = None
    result: dict | None = None
    error: str | None = None
    log: list[dict] = field(default_factory=list)
    #: Each seat's Elo in the game's scope: at the start, then (at the end) around this match's own
    #: commit, with `elo_change` the change that commit made (`rating_change`).
    elo_before: dict = field(default_factory=dict)
    elo_after: dict = field(default_factory=dict)
    elo_change: dict = field(default_factory=dict)
    created: float = field(default_factory=time.time)
    lock: threading.Lock = field(default_factory=threading.Lock)
    moves: "queue.Queue[tuple[Any, queue.Queue]]" = field(default_factory=queue.Queue)
    stop: threading.Event = field(default_factory=threading.Event)
    last_seen: float = field(default_factory=time.monotonic)
    thread: threading.Thread | None = None
    #: Resigned while it was not this person's turn: the forfeit comes at their next turn.
    resigned: bool = False

    def state(self) -> dict:
        """What the page shows (and a poll: the person is still there)."""
        self.last_seen = time.monotonic()
        with self.lock:
            turn = dict(self.turn) if self.turn else None
            if turn is not None:
                turn["seconds_left"] = max(0.0, turn.pop("deadline") - time.time())
            return {"session": self.id, "match_id": self.match_id, "game": self.game, "players": self.players,
                    "seat": self.seat, "mark": seat_mark(self.game, self.seat), "you": self.human, "name": self.name,
                    "opponent": self.opponent,
                    "status": self.status,
                    "turn": turn, "final_view": self.final_readable or self.final_view,
                    "final_readable": self.final_readable is not None,
                    "final_board": board_of(self.game, self.final_view), "final_boards": self.final_boards,
                    "result": self.result,
                    "error": self.error, "log": list(self.log), "elo_before": self.elo_before,
                    "elo_after": self.elo_after, "elo_change": self.elo_change}

    def resign(self) -> None:
        """Give the match up: at once on this person's turn, else as soon as it is theirs."""
        if self.status == "your_turn":
            self.submit(None)
        elif self.status not in ("over", "error"):
            self.resigned = True

    def submit(self, move: Any, wait: float = 10.0) -> str | None:
        """Hand the page's move to the waiting agent: None when it is taken, else why not."""
        self.last_seen = time.monotonic()
        if self.status != "your_turn":
            return "it is not your turn" if self.status in ("opponent", "starting") else "the match is over"
        reply: queue.Queue = queue.Queue()
        self.moves.put((move, reply))
        try:
            return reply.get(timeout=wait)
        except queue.Empty:
            return "the move was not taken in time; try again"


def _server_alive(directory: Path, server_id: str) -> bool:
    """Whether the server `server_id` still holds its lock (a lock file not there: it is gone)."""
    if not _SERVER_ID.match(server_id):
        return False
    try:
        import fcntl
    except ImportError:  # no flock here: never take another server's match for abandoned
        return True
    path = directory / SERVERS_DIR / f"{server_id}.lock"
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True  # held: that server is running
    else:
        try:
            path.unlink()
        except OSError:
            pass
        return False
    finally:
        os.close(fd)


def resolve_abandoned(directory: str | Path) -> list[str]:
    """Close the web matches left ``running`` by servers that are gone (as failed, note "aborted: ...",
    never rated); the ids closed."""
    from arena.league.storage import LeagueStore

    directory = Path(directory)
    store = LeagueStore(directory, create=False)
    done: list[str] = []
    try:
        alive: dict[str, bool] = {}
        for m in store.matches(status="running", source="external", note_prefix=WEB_NOTE):
            owner = m.note[len(WEB_NOTE):]
            if owner not in alive:
                alive[owner] = _server_alive(directory, owner)
            if alive[owner]:
                continue
            if store.abandon(m.match_id, f"aborted: the web server playing it (server {owner}) stopped during the "
                                         "match; not rated"):
                done.append(m.match_id)
    finally:
        store.close()
    return done


class _ServerLock:
    """This server's lock file, held (flock) while the process lives; its id goes in its matches' notes."""

    def __init__(self, directory: Path):
        import fcntl

        self.id = secrets.token_hex(8)
        folder = directory / SERVERS_DIR
        folder.mkdir(exist_ok=True)
        self.path = folder / f"{self.id}.lock"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink()
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None


def _final_frame(league, match_id: str) -> dict | None:
    """The end of a person's match as the replay page shows it (every seat's board: the cards the
    other side held), read from its replay; None where it cannot be (the result stands without it)."""
    from arena.ui.web.replays import final_frame

    try:
        return final_frame(league.store.read_replay(match_id))
    except Exception:
        return None


class PlayManager:
    """The server's play sessions: start one, find one, stop them all at shutdown."""

    def __init__(self, directory: str | Path, settings: PlaySettings | None = None):
        self.dir = Path(directory)
        self.settings = settings or PlaySettings()
        self._lock_file: _ServerLock | None = None
        #: Web matches of servers that were gone, closed when this one opened the league.
        self.aborted: list[str] = []
        try:
            self.aborted = resolve_abandoned(self.dir)
        except Exception:  # a read-only or busy league: serving it matters more than tidying it
            pass
        self.sessions: dict[str, PlaySession] = {}
        self.lock = threading.Lock()
        self._starting = 0  # starts between the cap's check and their session's insertion

    def active(self) -> list[PlaySession]:
        return [s for s in self.sessions.values() if s.status not in ("over", "error")]

    def start(self, game: str, opponent: str, seat: int = 0, name: str | None = None,
              seed: int | None = None) -> PlaySession:
        """Start a match of the person called `name` (None: a new guest name; `arena.league.play`'s
        rules) against league player `opponent`. ArenaError (BadName for a name) when it cannot be."""
        from arena.league.play import person_of, schedule_human_match

        cap = self.settings.max_sessions if self.settings.max_sessions is not None else MAX_SESSIONS
        # The cap is checked and the place taken in one step: a start that is still scheduling
        # its match holds a place, so concurrent starts can never pass the cap together.
        with self.lock:
            if len(self.active()) + self._starting >= cap:
                raise TooBusy(f"{cap} matches are being played already: try again when one ends", retry_after=5.0)
            self._starting += 1
            self._forget_finished()
        try:
            league = self._open_league()
            try:
                # claimed as it is scheduled (one transaction): a server killed at any moment after
                # leaves no match that the next server cannot close
                match, job, seats = schedule_human_match(league, opponent, game, seat, seed, name,
                                                         note=self._claim_note())
            except BaseException:
                league.store.close()
                raise
            human = seats[seat]
            s = PlaySession(secrets.token_urlsafe(16), match.game, opponent, human, seat, self.settings,
                            name=person_of(human) or human, match_id=match.match_id, players=seats)
            elo = league.store.elo(match.game)
            s.elo_before = {n: elo.get(n) for n in seats}
            with self.lock:
                self.sessions[s.id] = s
        finally:
            with self.lock:
                self._starting -= 1
        s.thread = threading.Thread(target=self._play, args=(s, league, job, seats), daemon=True,
                                    name=f"arena-play-{match.match_id}")
        s.thread.start()
        return s

    def _open_league(self):
        """The league as a passive client (`League.open`); `LeagueStarting` while it has no config yet."""
        from arena.league.manager import League, league_config_of
        from arena.league.storage import LeagueStore

        store = LeagueStore(self.dir, create=False)
        try:
            if store.get_meta("config") is None:
                raise league_starting(self.dir)
            return League(league_config_of(store), self.dir, passive=True, store=store)
        except BaseException:
            store.close()
            raise

    def _claim_note(self) -> str | None:
        """The note that claims a match for this server (after taking the server's lock, once); None
        where no lock can be taken (no flock, a folder it cannot write): the match is not claimed."""
        with self.lock:
            if self._lock_file is None:
                try:
                    self._lock_file = _ServerLock(self.dir)
                except (ImportError, OSError):
                    return None
        return WEB_NOTE + self._lock_file.id

    def _play(self, s: PlaySession, league, job, seats: list[str]) -> None:
        from arena.league.play import rating_change
        from arena.league.queries import describe_outcome
        from arena.match.runner import run_match_job

        try:
            agent = WebHumanAgent(s)
            with s.lock:
                s.status = "opponent"
            res = run_match_job(job, agents=[agent if i == s.seat else None for i in range(len(seats))])
            league.commit(s.match_id, res)
            row = league.store.result_for(s.match_id)
            # this match's own change: its commit's rating rows, never "now minus at the start" (a
            # forfeit of the same person committed meanwhile would be in that)
            change = rating_change(league.store, s.match_id, s.game)
            end = _final_frame(league, s.match_id)
            with s.lock:
                s.elo_before = {n: change[n]["before"] if n in change else s.elo_before.get(n) for n in seats}
                s.elo_after = {n: change[n]["after"] if n in change else None for n in seats}
                s.elo_change = {n: change[n]["change"] if n in change else None for n in seats}
                if end is not None:
                    s.final_boards = end["boards"]
                    s.final_readable = (end.get("readable") or [None] * len(seats))[s.seat]
                s.result = {"returns": res.returns, "winner": res.winner, "draw": res.draw, "outcome": res.outcome,
                            "reason": res.reason, "text": describe_outcome(row) if row else res.outcome,
                            "you_won": res.winner == s.seat and not res.draw}
                s.status = "over"
        except Exception as e:
            with s.lock:
                s.error = f"{type(e).__name__}: {e}"
                s.status = "error"
        finally:
            league.store.close()

    def get(self, sid: str) -> PlaySession:
        s = self.sessions.get(sid) if isinstance(sid, str) else None
        if s is None:
            raise SessionGone(f"no play session {sid!r}")
        return s

    def _forget_finished(self) -> None:
        done = [s for s in self.sessions.values() if s.status in ("over", "error")]
        for s in sorted(done, key=lambda s: s.created)[: max(0, len(done) - self.settings.keep_finished)]:
            self.sessions.pop(s.id, None)

    def shutdown(self, wait: float = 10.0) -> None:
        """Stop every match being played: each ends as its person's forfeit, committed once."""
        for s in list(self.sessions.values()):
            s.stop.set()
        deadline = time.monotonic() + wait
        for s in list(self.sessions.values()):
            if s.thread is not None:
                s.thread.join(max(0.0, deadline - time.monotonic()))
        if self._lock_file is not None and not any(s.thread is not None and s.thread.is_alive()
                                                   for s in self.sessions.values()):
            self._lock_file.release()
