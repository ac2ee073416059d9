"""The web app: pages, static files, the API, and the server that runs them.

`create_app(directory)` builds the FastAPI app of one league; `serve` runs it in the
foreground (``arena serve DIR``), `start_in_background` on a thread of the calling process
(``arena league run ... --serve``, tests). The pages are HTML shells from ``templates/``
that load their data from the API with the script in ``static/``: nothing is fetched from
elsewhere, so the pages work offline (``/docs`` too: a plain page of the API's operations, no
script from a CDN).

Strangers: the server answers only to the Host names of the address it is bound to (with the
default 127.0.0.1: localhost and 127.0.0.1), so a page of another site cannot reach it through
DNS rebinding; a client must send a whole request within `ServerLimits.request_timeout` seconds
or its connection is closed (slow-loris), and when `ServerLimits.max_connections` are open a new
one closes the oldest that has not sent a whole request. A request's head (request line and
headers) over `MAX_HEAD` and its body over `MAX_BODY` are refused with 413. Every error is JSON
with one line.
"""

from __future__ import annotations

import html
import json
import os
import socket
import sqlite3
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Callable, Optional

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from arena.errors import ArenaError

from arena.fsio import valid_match_id
from arena.ui.web.api import build_router
from arena.ui.web.data import LeagueData
from arena.ui.web.play import PlayManager, PlaySettings

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
TEMPLATES = HERE / "templates"
#: Largest request body accepted (a move, a start request: a few hundred bytes).
MAX_BODY = 16 * 1024
#: Largest request head accepted: the request line and the headers (a browser's are under 2 KiB;
#: the name cookie and a token a few dozen bytes more).
MAX_HEAD = 16 * 1024
PAGES = {"leaderboard": "Leaderboard", "matches": "Matches", "replay": "Replay", "play": "Play"}
#: The Host names a server bound to a loopback address answers to.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: Environment variable a token may come from (a token on the command line shows in `ps`).
TOKEN_ENV = "ARENA_TOKEN"
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; "
       "base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}


@dataclass
class ServerLimits:
    """What one client may hold of the server (`serve`, `BackgroundServer`)."""

    #: Seconds a client has to send a whole request (headers and body), counted from its connection
    #: or from the previous answer on it; past that the connection is closed (slow-loris).
    request_timeout: float = 10.0
    #: Seconds an idle keep-alive connection stays open.
    keep_alive: float = 5.0
    #: Connections open at once: past this, a new one closes the connection that has waited longest
    #: without sending a whole request (or is itself closed when every connection is being answered).
    max_connections: int = 500


def read_token(token: Optional[str] = None, token_file: Optional[str | Path] = None,
               environ: Optional[dict] = None) -> Optional[str]:
    """The server's token: from `token_file`, else `token`, else the environment's ``ARENA_TOKEN``
    (None: no token). ArenaError with the fix when it is unreadable, empty or not one word."""
    if token is not None and token_file is not None:
        raise ArenaError("give the token once: --token-file PATH (preferred) or --token, not both")
    where = "--token"
    if token_file is not None:
        where = f"the token file {token_file}"
        try:
            token = Path(token_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ArenaError(f"cannot read {where} ({getattr(e, 'strerror', None) or e}): "
                             "write the token in a file only you can read") from None
    elif token is None:
        env = os.environ if environ is None else environ
        token = env.get(TOKEN_ENV) or None
        where = f"${TOKEN_ENV}"
    if token is None:
        return None
    token = token.strip()
    if not token:
        raise ArenaError(f"{where} is empty: write the token there (a long random word, e.g. from "
                         "`python -c 'import secrets; print(secrets.token_urlsafe())'`)")
    if not all(33 <= ord(ch) < 127 for ch in token):
        raise ArenaError(f"{where}: a token is one word of printable ASCII (letters, digits, punctuation)")
    return token


def allowed_hosts(host: str) -> Optional[frozenset[str]]:
    """The Host names a server bound to `host` answers to (None: any, when bound to every interface)."""
    h = host.strip("[]").lower()
    if h in ("", "0.0.0.0", "::"):
        return None
    return LOOPBACK_NAMES | {h}


def _host_name(value: str) -> str:
    """A Host header's name, without its port (``[::1]:8000`` -> ``::1``)."""
    v = value.strip().lower()
    if v.startswith("["):
        return v[1:v.index("]")] if "]" in v else v
    if v.count(":") == 1:
        return v.split(":", 1)[0]
    return v


class HostCheck:
    """ASGI middleware: a request whose Host is not one of `allowed` is refused (400, JSON).

    A page of another site that points its own name at 127.0.0.1 (DNS rebinding) sends its own
    name as Host: this is what keeps it from reading or playing a server bound to 127.0.0.1."""

    def __init__(self, app, allowed: Optional[frozenset[str]]):
        self.app, self.allowed = app, allowed

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self.allowed is None:
            return await self.app(scope, receive, send)
        host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), None)
        if host is None or _host_name(host) in self.allowed:
            return await self.app(scope, receive, send)
        names = ", ".join(sorted(self.allowed))
        await _json_error(send, 400, f"this server answers to Host {names}, not {host[:100]!r}: "
                          "open it by one of those names (with --host 0.0.0.0 it answers to any)")


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
    await _json_error(send, 413, f"request body over {limit} bytes")


def head_size(scope) -> int:
    """Bytes of a request's head as it was sent: ``METHOD TARGET HTTP/1.1`` and each ``Name: value`` line."""
    size = len(scope.get("method", "")) + len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") + 12
    return size + sum(len(k) + len(v) + 4 for k, v in scope.get("headers", []))


def head_too_large(limit: int = MAX_HEAD) -> str:
    return (f"request headers over {limit} bytes (the request line and headers): send fewer or shorter "
            "headers (a cookie of another site on this host name counts too)")


class HeadLimit:
    """ASGI middleware: a request whose head (request line and headers) is over `limit` bytes is
    refused with 413 and its connection closed.

    The HTTP protocol refuses a head that grows past the limit before it is whole (`_HeadLimitH11`,
    `_HeadLimitHttptools`); this refuses one that came whole in one read (h11 measures only what it
    holds incomplete, so a 70 KB head sent at once was parsed and answered)."""

    def __init__(self, app, limit: int = MAX_HEAD):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and head_size(scope) > self.limit:
            return await _json_error(send, 413, head_too_large(self.limit), close=True)
        return await self.app(scope, receive, send)


async def _json_error(send, status: int, message: str, close: bool = False) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _raw_413(limit: int) -> bytes:
    """A whole 413 answer as bytes, for the HTTP protocol to write before the request reaches the app."""
    body = json.dumps({"error": head_too_large(limit)}).encode()
    return (b"HTTP/1.1 413 Content Too Large\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)


def _page(name: str, title: str, league: str, **extra: str) -> HTMLResponse:
    base = Template((TEMPLATES / "base.html").read_text())
    body = Template((TEMPLATES / f"{name}.html").read_text())
    values = {k: html.escape(str(v), quote=True) for k, v in extra.items()}
    values.update(page=name, title=html.escape(title), league=html.escape(league))
    here = ' class="here"'
    nav = "".join(f'<a href="{href}"{here if key == name else ""}>{label}</a>'
                  for key, href, label in (("leaderboard", "/", "Leaderboard"), ("matches", "/matches", "Matches"),
                                           ("play", "/play", "Play")))
    return HTMLResponse(base.substitute(values, nav=nav, body=body.substitute(values)), headers=SECURITY_HEADERS)


def _docs_page(app: FastAPI) -> HTMLResponse:
    """The API's operations as a plain page (no script: it works offline and under the CSP)."""
    e = html.escape
    rows = []
    for path, ops in app.openapi().get("paths", {}).items():
        for method, op in ops.items():
            params = ", ".join(p.get("name", "") + ("*" if p.get("required") else "")
                               for p in op.get("parameters", []))
            link = f'<a href="{e(path)}">{e(path)}</a>' if method == "get" and "{" not in path else e(path)
            rows.append(f"<tr><td><code>{e(method.upper())}</code></td><td><code>{link}</code></td>"
                        f"<td>{e(op.get('summary', ''))}</td><td><code>{e(params)}</code></td></tr>")
    page = ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>arena league: API</title>"
            "<link rel=\"stylesheet\" href=\"/static/style.css\"></head><body><main><h1>The league's JSON API</h1>"
            "<p>The schema: <a href=\"/openapi.json\">/openapi.json</a> (OpenAPI 3). Parameters marked * are "
            "required. Playing needs the server's token when it has one: <code>Authorization: Bearer TOKEN</code>."
            "</p><table><thead><tr><th>method</th><th>path</th><th>what</th><th>parameters</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></main></body></html>")
    return HTMLResponse(page, headers=SECURITY_HEADERS)


def create_app(directory: str | Path, token: Optional[str] = None, play: PlaySettings | None = None,
               hosts: Optional[frozenset[str]] = None) -> FastAPI:
    """The app of the league in `directory` (ArenaError when there is none). `hosts`: the Host names
    it answers to (None: any; `serve` passes those of the address it binds)."""
    data = LeagueData(directory)
    plays = PlayManager(directory, play)

    @asynccontextmanager
    async def lifespan(app):
        yield
        plays.shutdown()
        data.close()

    # FastAPI's own /docs and /redoc load their scripts from a CDN: off; /docs is a plain page.
    app = FastAPI(title="arena league", version="1", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Read a league (ratings, matches, replays) and play its players.")
    app.state.data, app.state.plays = data, plays
    app.add_middleware(BodyLimit)
    app.add_middleware(HostCheck, allowed=hosts)
    app.add_middleware(HeadLimit)  # outermost: checked before anything else

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        if request.url.path.startswith("/api/") or exc.status_code != 404:
            return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)
        why = str(exc.detail) if exc.detail and exc.detail != "Not Found" else "no such page"
        page = _page("notfound", f"{name}: not found", name, path=request.url.path[:200], why=why)
        page.status_code = 404
        return page

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
        return JSONResponse({"error": f"{where}: {first.get('msg', 'invalid request')}" if where else
                             first.get("msg", "invalid request")}, status_code=422)

    @app.exception_handler(ArenaError)
    async def league_unreadable(request: Request, exc: ArenaError):
        # Requests' own mistakes are answered by the routes; what gets here is the league itself
        # (deleted, replaced, busy): one line, 503.
        return JSONResponse({"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__},
                            status_code=503)

    @app.exception_handler(sqlite3.Error)
    async def database_error(request: Request, exc: sqlite3.Error):
        return JSONResponse({"error": f"the league database {data.db_path} cannot be read ({exc}): "
                             "check it with `arena league status`, then restart the server"}, status_code=503)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception):
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); the server's log has the details"},
                            status_code=500)

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs_page():
        return _docs_page(app)

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
        if not valid_match_id(match_id) or data.result_for(match_id) is None:
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
            " and, without a token (--token-file or $ARENA_TOKEN), play as anyone")


class _RequestDeadline:
    """Mixed into uvicorn's HTTP protocol: a connection must send each whole request within
    `limits.request_timeout` seconds (from its opening, or from the previous answer) or it is closed;
    and past `limits.max_connections` open connections, the one that has waited longest without
    sending a whole request is closed to make room. A request being answered is never cut."""

    limits: ServerLimits = ServerLimits()

    def connection_made(self, transport) -> None:
        self._deadline = None
        self._waiting_since: float | None = None
        super().connection_made(transport)
        self._watch()
        if len(self.connections) > self.limits.max_connections:
            self._make_room()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc) -> None:
        self._stop_deadline()
        self._waiting_since = None
        super().connection_lost(exc)

    def _watch(self) -> None:
        c = self.cycle
        if c is not None and not c.response_complete and not c.more_body:  # a whole request, being answered
            self._stop_deadline()
            self._waiting_since = None
        elif self._deadline is None and not self.transport.is_closing():  # waiting for (the rest of) one
            self._waiting_since = self.loop.time()
            self._deadline = self.loop.call_later(self.limits.request_timeout, self._too_slow)

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def _make_room(self) -> None:
        waiting = [c for c in self.connections if c is not self and getattr(c, "_waiting_since", None) is not None
                   and not c.transport.is_closing()]
        victim = min(waiting, key=lambda c: c._waiting_since) if waiting else self
        victim._stop_deadline()
        victim._waiting_since = None
        victim.transport.close()


class _HeadLimitH11:
    """Mixed into uvicorn's h11 protocol: h11 refuses a head still incomplete past
    ``h11_max_incomplete_event_size`` (`MAX_HEAD`, set in `_config`) as any bad request, and uvicorn
    answers 400; a head that is too large is answered 413, as the app answers one that came whole."""

    def send_400_response(self, msg: str) -> None:
        buffered, _ = self.conn.trailing_data
        if len(buffered) > MAX_HEAD and b"\r\n\r\n" not in buffered[:MAX_HEAD + 4]:
            self.transport.write(_raw_413(MAX_HEAD))
            self.transport.close()
            return
        super().send_400_response(msg)


class _HeadLimitHttptools:
    """Mixed into uvicorn's httptools protocol, which has no limit of its own (it keeps a header it has
    not seen the end of, however long): the bytes of a request's head are counted as they come, up to
    its blank line, and past `MAX_HEAD` the request is answered 413 and the connection closed."""

    _in_head = True  # from the connection's start, and after each request, until a head's blank line
    _head = 0
    _tail = b""  # the last bytes of the head so far: its blank line may straddle two reads

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            seen = self._tail + data
            end = seen.find(b"\r\n\r\n")
            self._head += len(data) if end < 0 else end + 4 - len(self._tail)
            if self._head > MAX_HEAD:
                self._in_head = False
                self.transport.write(_raw_413(MAX_HEAD))
                self.transport.close()
                return
            self._tail = seen[-3:]
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head, self._head, self._tail = True, 0, b""
        super().on_message_complete()


def _protocol(limits: ServerLimits) -> type:
    """uvicorn's HTTP protocol (the one its "auto" picks) with `_RequestDeadline` and the head's limit
    mixed in."""
    try:
        import httptools  # noqa: F401
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
        head = _HeadLimitHttptools
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
        head = _HeadLimitH11
    return type("ArenaHttpProtocol", (_RequestDeadline, head, base), {"limits": limits})


def _config(app, host: str, port: int, limits: ServerLimits | None = None):
    import uvicorn

    limits = limits or ServerLimits()
    # limit_concurrency stays above max_connections: it answers 503 only when that many requests
    # are being answered at once, never because idle connections fill it.
    return uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                          timeout_graceful_shutdown=5, timeout_keep_alive=limits.keep_alive,
                          limit_concurrency=2 * limits.max_connections, backlog=2048, http=_protocol(limits),
                          h11_max_incomplete_event_size=MAX_HEAD)


def serve(directory: str | Path, host: str = "127.0.0.1", port: int = 8000, token: Optional[str] = None,
          echo: Callable[[str], None] = print, play: PlaySettings | None = None,
          limits: ServerLimits | None = None) -> None:
    """Serve the league in the foreground until Ctrl-C."""
    import uvicorn

    app = create_app(directory, token, play, hosts=allowed_hosts(host))
    _check_port(host, port)
    warn = host_warning(host)
    if warn:
        echo(warn)
    aborted = app.state.plays.aborted
    if aborted:
        echo(f"closed {len(aborted)} web match(es) left running by a server that stopped: "
             f"{', '.join(aborted[:5])}{' ...' if len(aborted) > 5 else ''} (failed, not rated)")
    echo(f"serving {directory} at http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
         + (" (token required to play)" if token else "") + "; Ctrl-C stops")
    uvicorn.Server(_config(app, host, port, limits)).run()


class BackgroundServer:
    """A server on a thread of this process; `stop` ends it (and forfeits matches being played)."""

    def __init__(self, directory: str | Path, host: str = "127.0.0.1", port: int = 8000,
                 token: Optional[str] = None, play: PlaySettings | None = None, limits: ServerLimits | None = None):
        import uvicorn

        self.app = create_app(directory, token, play, hosts=allowed_hosts(host))
        if port != 0:
            _check_port(host, port)
        self.server = uvicorn.Server(_config(self.app, host, port, limits))
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
                        token: Optional[str] = None, play: PlaySettings | None = None,
                        limits: ServerLimits | None = None) -> BackgroundServer:
    return BackgroundServer(directory, host, port, token, play, limits).start()

