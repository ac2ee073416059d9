"""The browser side of a league: a live leaderboard, the match list, a replay viewer, and play.

``arena serve DIR`` (or ``arena league run ... --serve``) serves it at http://127.0.0.1:8000.
FastAPI and uvicorn are the ``web`` extra; importing this package without them raises
`MissingExtra` naming it. The front-end is plain HTML, CSS and JavaScript shipped in the
package (``static/``, ``templates/``): no network is needed to use it.
"""

from __future__ import annotations

from arena.errors import MissingExtra

try:
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingExtra("the web pages (arena serve)", "web", e) from None

from arena.ui.web.app import (  # noqa: E402
    BackgroundServer, ServerLimits, create_app, host_warning, read_token, serve, start_in_background)
from arena.ui.web.play import PlaySettings  # noqa: E402

__all__ = ["BackgroundServer", "PlaySettings", "ServerLimits", "create_app", "host_warning", "read_token", "serve",
           "start_in_background"]
