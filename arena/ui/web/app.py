"""The web app: pages, static files, the API, and the server that runs them.

`create_app(directory)` builds the FastAPI app of one league; `serve` runs it in the
foreground (``arena serve DIR``), `start_in_background` on a thread of the calling process
(``arena league run ... --serve``, tests). The pages are HTML shells from ``templates/``
that load their data from the API with the script in ``static/``: nothing is fetched from
elsewhere, so the pages work offline.
"""

from __future__ import annotations

import html
import json
import socket
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path
from string import Template
from typing import Callable, Optional

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from arena.errors import ArenaError

from arena.ui.web.api import build_router, valid_match_id
from arena.ui.web.data import LeagueData
from arena.ui.web.play import PlayManager, PlaySettings

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
TEMPLATES = HERE / "templates"
#: Largest request body accepted (a move, a start request: a few hundred bytes).
MAX_BODY = 16 * 1024
PAGES = {"leaderboard": "Leaderboard", "matches": "Matches", "replay": "Replay", "play": "Play"}


class BodyLimit:
    """ASGI middleware: a request whose body is over `limit` bytes is refused with 413."""

    def __init__(self, app, limit: int = MAX_BODY):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for k, v in scope.get("headers", []):
            if k == b"content-length" and (not v.isdigit() or int(v) > self.limit):
                return await _too_large(send, self.limit)
        seen = 0

        async def limited():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge()
            return msg

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await _too_large(send, self.limit)


class _TooLarge(Exception):
    pass


async def _too_large(send, limit: int) -> None:
    body = json.dumps({"error": f"request body over {limit} bytes"}).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _page(name: str, title: str, league: str, **extra: str) -> HTMLResponse:
    base = Template((TEMPLATES / "base.html").read_text())
    body = Template((TEMPLATES / f"{name}.html").read_text())
    values = {k: html.escape(str(v), quote=True) for k, v in extra.items()}
    values.update(page=name, title=html.escape(title), league=html.escape(league))
    here = ' class="here"'
    nav = "".join(f'<a href="{href}"{here if key == name else ""}>{label}</a>'
                  for key, href, label in (("leaderboard", "/", "Leaderboard"), ("matches", "/matches", "Matches"),
                                           ("play", "/play", "Play")))
    return HTMLResponse(base.substitute(values, nav=nav, body=body.substitute(values)),
                        headers={"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                                 "style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'",
                                 "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"})


def create_app(directory: str | Path, token: Optional[str] = None, play: PlaySettings | None = None) -> FastAPI:
    """The app of the league in `directory` (ArenaError when there is none)."""
    data = LeagueData(directory)
    plays = PlayManager(directory, play)

    @asynccontextmanager
    async def lifespan(app):
        yield
        plays.shutdown()
        data.close()

    app = FastAPI(title="arena league", version="1", lifespan=lifespan,
                  description="Read a league (ratings, matches, replays) and play its players.")
    app.state.data, app.state.plays = data, plays
    app.add_middleware(BodyLimit)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        if request.url.path.startswith("/api/") or exc.status_code != 404:
            return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)
        return HTMLResponse(f"<!doctype html><title>not found</title><p>Not found: "
                            f"{html.escape(request.url.path)}</p><p><a href=\"/\">the leaderboard</a></p>", 404)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
        return JSONResponse({"error": f"{where}: {first.get('msg', 'invalid request')}" if where else
                             first.get("msg", "invalid request")}, status_code=422)

    app.include_router(build_router(data, plays, token))
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    name = data.summary()["name"]

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def leaderboard_page():
        return _page("leaderboard", f"{name}: leaderboard", name)

    @app.get("/matches", response_class=HTMLResponse, include_in_schema=False)
    def matches_page():
        return _page("matches", f"{name}: matches", name)

    @app.get("/replay/{match_id}", response_class=HTMLResponse, include_in_schema=False)
    def replay_page(match_id: str):
        if not valid_match_id(match_id) or data.store.result_for(match_id) is None:
            raise HTTPException(404, "no such match")
        return _page("replay", f"{name}: replay {match_id}", name, match_id=match_id)

    @app.get("/play", response_class=HTMLResponse, include_in_schema=False)
    def play_page():
        return _page("play", f"{name}: play", name, token_required="1" if token else "0")

    return app


# -- running it ---------------------------------------------------------------------------------
def _check_port(host: str, port: int) -> None:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise ArenaError(f"cannot listen on {host}:{port} ({e.strerror or e}): pick another with --port, "
                             "or stop what is using it") from None


def host_warning(host: str) -> str | None:
    if host in ("127.0.0.1", "localhost", "::1"):
        return None
    return (f"warning: listening on {host}: anyone who can reach this machine can read the league"
            " and, without --token, play as anyone")


def _config(app, host: str, port: int):
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                          timeout_graceful_shutdown=5, limit_concurrency=1000, backlog=2048)


def serve(directory: str | Path, host: str = "127.0.0.1", port: int = 8000, token: Optional[str] = None,
          echo: Callable[[str], None] = print, play: PlaySettings | None = None) -> None:
    """Serve the league in the foreground until Ctrl-C."""
    import uvicorn

    app = create_app(directory, token, play)
    _check_port(host, port)
    warn = host_warning(host)
    if warn:
        echo(warn)
    echo(f"serving {directory} at http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
         + (" (token required to play)" if token else "") + "; Ctrl-C stops")
    uvicorn.Server(_config(app, host, port)).run()


class BackgroundServer:
    """A server on a thread of this process; `stop` ends it (and forfeits matches being played)."""

    def __init__(self, directory: str | Path, host: str = "127.0.0.1", port: int = 8000,
                 token: Optional[str] = None, play: PlaySettings | None = None):
        import uvicorn

        self.app = create_app(directory, token, play)
        if port != 0:
            _check_port(host, port)
        self.server = uvicorn.Server(_config(self.app, host, port))
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="arena-web")
        self.host = host

    @property
    def port(self) -> int:
        for s in self.server.servers:
            for sock in s.sockets:
                return sock.getsockname()[1]
        raise RuntimeError("the server is not listening")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "BackgroundServer":
        if self.thread.ident is None:  # not started yet (starting twice: the same server)
            self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive():
                raise ArenaError("the web server stopped while starting (see the messages above)")
            if time.monotonic() > deadline:
                raise ArenaError(f"the web server did not start within {timeout:g}s")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def start_in_background(directory: str | Path, host: str = "127.0.0.1", port: int = 8000,
                        token: Optional[str] = None, play: PlaySettings | None = None) -> BackgroundServer:
    return BackgroundServer(directory, host, port, token, play).start()

