"""The JSON API under the pages: /api/league, /api/players, /api/matches, /api/replays/<id>, /api/play.

Everything the pages show comes from here, so other tools read a league the same way (the
schema is FastAPI's, at /openapi.json). Ids in paths are looked up in the league's store,
never used as file paths: an id that is not a committed match is a 404 with a JSON error.
With a token set, playing and everything else that writes needs it (``Authorization: Bearer
TOKEN`` or ``X-Arena-Token: TOKEN``); without one, each client address may start
`STARTS_PER_MINUTE` matches a minute (a start can add a player to the league). A person plays as
``human:NAME``: the name given, else the browser's (the ``arena_player`` cookie, set by each start),
else a new guest name; a name the rules refuse is a 400 that says why. Query values are
range-checked (a 422 or 400 with one line), and a league database deleted or replaced under the
server is a 503 with one line, never an answer from the old file.

The match list and a match are answered on the server's event loop (`async` handlers: a few
indexed SQLite reads, well under a millisecond at a million matches); the thread pool's hop
and its threads' contention for the interpreter cost more than that (``benchmarks/bench_web.py``:
p99 of a page of the list 193 -> 60 ms under 50 clients). What can take longer (the leaderboard
when the league moved on: payoff and alpha-rank; a replay, re-simulated) stays on the pool.
"""

from __future__ import annotations

import gzip
import hmac
import json
import threading
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Annotated, Any, Optional, Union

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, StringConstraints

from arena.errors import ArenaError, ReplayError
from arena.league.play import BadName, check_name
from arena.league.storage import OVERALL

from arena.fsio import valid_match_id
from arena.ui.web.data import MAX_PAGE, OUTCOMES, LeagueData
from arena.ui.web.play import LeagueStarting, PlayManager, RateLimit, SessionGone, TooBusy, league_starting
from arena.ui.web.replays import replay_json

#: Longest move a person may send (the replay format keeps this much of a move verbatim).
MAX_MOVE = 4096
#: Longest name a request may carry (a longer one is a 422; the name rules, `arena.league.play.check_name`,
#: allow 24 characters and answer 25-64 with a 400 that says so).
MAX_NAME = 64
#: The cookie that keeps a browser's name (the person it plays as) between matches.
NAME_COOKIE = "arena_player"
#: How long a browser keeps its name without playing: a year.
NAME_COOKIE_AGE = 365 * 24 * 3600
REPLAY_CACHE = 32
#: Largest commit number a page cursor (`before`, `after`) may name (SQLite's integers are 64-bit).
MAX_CURSOR = 2**62
#: Dates the match list's filters accept, in Unix seconds (years 1970 to 9999).
MAX_DATE = 253402300799.0


class StartPlay(BaseModel):
    game: Optional[str] = Field(None, max_length=200, description="Game id (default: the player's first game).")
    player: str = Field(..., max_length=200, description="The league player to play against.")
    seat: int = Field(0, ge=0, le=16, description="Your seat, 0, 1, ... (which one moves first is the game's rule: "
                      "/api/play/options gives it as 'first').")
    name: str = Field("", max_length=MAX_NAME, description="The name you play under, rated as the league player "
                      "'human:NAME': 1-24 letters, digits, '.', '_', '-'. Empty: the name this browser played under "
                      "(its cookie), else a new guest name.")
    seed: Optional[int] = Field(None, ge=0, lt=2**31)


class Move(BaseModel):
    move: Union[int, Annotated[str, StringConstraints(max_length=MAX_MOVE)]] = Field(
        ..., description="An action id, a legal move's text, or free text.")


def _first(game: str) -> Optional[int]:
    """The seat that moves first in `game` by its rules (`first_mover`); None where none does, or where the
    game cannot be made here (a plug-in not loaded in this server)."""
    from arena.envs.registry import first_mover

    try:
        return first_mover(game)
    except Exception:  # noqa: BLE001 - a page's hint, never a failed request
        return None


def _date(x: Optional[str]) -> Optional[float]:
    """An ISO date or time (UTC where no zone is given) or Unix seconds, as Unix seconds."""
    if x is None or x == "":
        return None
    bad = HTTPException(400, f"not a date: {x!r} (write 2025-01-31, 2025-01-31T12:00 or Unix seconds)")
    try:
        t = float(x)
    except ValueError:
        try:
            d = datetime.fromisoformat(x)
            if d.tzinfo is None:
                d = d.replace(tzinfo=timezone.utc)
            t = d.timestamp()
        except (ValueError, OverflowError):
            raise bad from None
    if not 0.0 <= t <= MAX_DATE:  # also NaN and the infinities
        raise HTTPException(400, f"date {x!r} out of range (1970-01-01 to 9999-12-31)")
    return t


def _json(obj: Any) -> Response:
    """A JSON response serialised once, straight from plain data (the API's data is plain already)."""
    return Response(_dumps(obj), media_type="application/json")


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()


def build_router(data: LeagueData, plays: PlayManager, token: Optional[str]) -> APIRouter:
    def database_there() -> None:
        data.check_database()  # LeagueGone: a 503 (the app's handler)

    router = APIRouter(prefix="/api", dependencies=[Depends(database_there)])
    replays: OrderedDict[str, dict] = OrderedDict()
    replay_lock = threading.Lock()
    starts = RateLimit(plays.settings.starts_per_minute if token is None else 0)

    def require_token(request: Request) -> None:
        if token is None:
            return
        given = request.headers.get("x-arena-token") or ""
        auth = request.headers.get("authorization") or ""
        if auth.lower().startswith("bearer "):
            given = given or auth[7:].strip()
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(401, "this server needs its token to play: give it as 'Authorization: Bearer TOKEN'")

    def checked_id(match_id: str) -> str:
        if not valid_match_id(match_id):
            raise HTTPException(404, f"no match {match_id[:80]!r} in this league")
        return match_id

    def load_replay(match_id: str):
        try:
            return data.read_replay(checked_id(match_id))
        except (ReplayError, OSError) as e:
            raise HTTPException(404, str(e) if isinstance(e, ReplayError) else f"match {match_id}: replay unreadable")

    @router.get("/league", summary="The league: name, counts, and its version (it moves with every commit)")
    def league() -> dict:
        out = data.summary()
        out["token_required"] = token is not None
        out["playing"] = len(plays.active())
        return out

    @router.get("/games", summary="Rating scopes ('*' is every game) and one-player games")
    def games() -> dict:
        return data.games()

    @router.get("/players", summary="The leaderboard of one rating scope (default '*': every game): fitted ratings "
                "with 95% intervals and provisional flags (sort 'rating'), the live Elo and OpenSkill beside")
    def players(game: str = Query(OVERALL, max_length=200),
                sort: str = Query("rating", pattern="^(rating|elo|mu|conservative|games|win_rate|name)$")) -> Response:
        body = data.cached(("leaderboard-json", game, sort), lambda: _dumps(data.leaderboard(game, sort)))
        return Response(body, media_type="application/json")

    @router.get("/roster", summary="Every player of the league: kind, role, games, version")
    def roster() -> list:
        return data.players()

    @router.get("/payoff", summary="The payoff matrix of the top players (decayed win rates; mean payoffs for a game "
                "scored by them, kind 'payoff'), with alpha-rank")
    def payoff(game: str = Query(OVERALL, max_length=200)) -> dict:
        return data.payoff(game)

    @router.get("/history", summary="Rating curves (Elo and OpenSkill mu - 3 sigma by commit) of the top players")
    def history(game: str = Query(OVERALL, max_length=200), top: int = Query(8, ge=1, le=50)) -> dict:
        return data.history(game, top)

    @router.get("/matches", summary="Committed matches, newest first: filters and keyset paging")
    async def matches(game: Optional[str] = Query(None, max_length=200), player: Optional[str] = Query(None, max_length=200),
                outcome: Optional[str] = Query(None, pattern="^(" + "|".join(OUTCOMES) + ")$"),
                since: Optional[str] = Query(None, max_length=40), until: Optional[str] = Query(None, max_length=40),
                before: Optional[int] = Query(None, ge=0, le=MAX_CURSOR),
                after: Optional[int] = Query(None, ge=0, le=MAX_CURSOR),
                limit: int = Query(50, ge=1, le=MAX_PAGE)) -> Response:
        return _json(data.matches(game or None, player or None, outcome, _date(since), _date(until), before, after,
                                  limit))

    @router.get("/matches/{match_id}", summary="One committed match")
    async def match(match_id: str) -> dict:
        m = data.match(checked_id(match_id))
        if m is None:
            raise HTTPException(404, f"no match {match_id!r} in this league")
        return m

    @router.get("/replays/{match_id}", summary="A replay: steps, and every player's view at every frame")
    def replay(match_id: str) -> dict:
        with replay_lock:
            hit = replays.get(match_id)
            if hit is not None:
                replays.move_to_end(match_id)
                return hit
        rep = load_replay(match_id)
        row = data.result_for(match_id)
        out = replay_json(rep, match_id, row.players if row else None)
        with replay_lock:
            replays[match_id] = out
            while len(replays) > REPLAY_CACHE:
                replays.popitem(last=False)
        return out

    @router.get("/replays/{match_id}/download", summary="The replay file (JSONL; gzip with ?gzip=1)",
                response_class=Response)
    def download(match_id: str, gzip_: bool = Query(False, alias="gzip")) -> Response:
        rep = load_replay(match_id)
        body = rep.to_text().encode()
        name = f"{match_id}.jsonl"
        if gzip_:
            body, name = gzip.compress(body, mtime=0), name + ".gz"
        return Response(body, media_type="application/gzip" if gzip_ else "application/x-ndjson",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    # -- play -----------------------------------------------------------------------------------
    def cookie_name(request: Request) -> Optional[str]:
        """The name in this browser's cookie, when it is one a person may take (else none)."""
        raw = request.cookies.get(NAME_COOKIE)
        if not raw or len(raw) > MAX_NAME:
            return None
        try:
            return check_name(raw)
        except BadName:
            return None

    @router.get("/play/options", summary="What can be played: each game and the league players that play it; "
                "'name': the name this browser played under (its cookie), or null")
    def play_options(request: Request) -> dict:
        # A one-player game has no seat for a person beside a league player: it is not offered here
        # (its table is the returns'), and `solo` names those left out so the page can say so.
        solo = set(data.games()["solo"])
        by_game: dict[str, list[str]] = {}
        for p in data.players():
            if p["kind"] == "human":
                continue
            for g in p["games"]:
                if g not in solo:
                    by_game.setdefault(g, []).append(p["name"])
        return {"games": [{"game": g, "players": names, "first": _first(g)} for g, names in by_game.items()],
                "solo": sorted(solo), "token_required": token is not None, "name": cookie_name(request)}

    @router.post("/play", summary="Start a match against a league player", dependencies=[Depends(require_token)])
    def play_start(req: StartPlay, request: Request, response: Response) -> Any:
        # The name typed, else this browser's (its cookie), else a new guest name; checked before anything
        # else, so a bad one is a 400 that says why (one line: the message shows it with escapes).
        name = req.name.strip() or cookie_name(request)
        if name is not None:
            try:
                name = check_name(name)
            except BadName as e:
                raise HTTPException(400, str(e)) from None
        solo = data.games()["solo"]
        if req.game in solo:
            raise HTTPException(400, f"{req.game} is a one-player game: there is no seat to play a league player "
                                "in (its leaderboard ranks the players by mean return)")
        if req.game is None:  # the player's first game that two can play
            row = next((p for p in data.players() if p["name"] == req.player and p["kind"] != "human"), None)
            if row is not None:
                two = [g for g in row["games"] if g not in solo]
                if not two:
                    raise HTTPException(400, f"{req.player} plays only one-player games ({', '.join(row['games'])}): "
                                        "there is nothing to play against it")
                req.game = two[0]
        try:
            if not data.ready():  # before the rate limit: a start refused for this costs the client none
                raise league_starting(data.dir)
            starts.take(request.client.host if request.client else "?")
            s = plays.start(req.game, req.player, req.seat, name, req.seed)
        except TooBusy as e:
            # the league being made: the server's state, not the client's (503); a limit: the client's (429)
            return JSONResponse({"error": str(e)}, status_code=503 if isinstance(e, LeagueStarting) else 429,
                                headers={"Retry-After": str(max(1, round(e.retry_after)))})
        except ArenaError as e:
            raise HTTPException(400, str(e)) from None
        # the browser keeps the name it plays under (HttpOnly: the page reads it from /api/play/options)
        response.set_cookie(NAME_COOKIE, s.name, max_age=NAME_COOKIE_AGE, path="/", httponly=True, samesite="lax")
        return s.state()

    def session(sid: str):
        try:
            return plays.get(sid)
        except SessionGone as e:
            raise HTTPException(404, str(e)) from None

    @router.get("/play/{sid}", summary="A play session's state (polling it says the player is still there)",
                dependencies=[Depends(require_token)])
    def play_state(sid: str) -> dict:
        return session(sid).state()

    @router.post("/play/{sid}/move", summary="Your move: an action id, a legal move's text, or free text",
                 dependencies=[Depends(require_token)])
    def play_move(sid: str, req: Move) -> Any:
        s = session(sid)
        why = s.submit(req.move)
        if why is not None:
            return JSONResponse({"error": why, "state": s.state()}, status_code=409 if "turn" in why or "over" in why
                                else 400)
        return s.state()

    @router.post("/play/{sid}/resign", summary="Give up the match (a forfeit; on the other side's turn, at your next turn)", dependencies=[Depends(require_token)])
    def play_resign(sid: str) -> dict:
        s = session(sid)
        s.resign()
        return s.state()

    return router
