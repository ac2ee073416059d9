"""A human at the terminal plays one of the league's players; the match is stored and rated."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any, TextIO

from arena.league.manager import League
from arena.league.protocols import Pairing
from arena.league.storage import MatchRow
from arena.match.runner import MatchJob


def schedule_human_match(league: League, player: str, game: str | None = None, seat: int = 0,
                         seed: int | None = None, human_name: str = "human",
                         note: str | None = None) -> tuple[MatchRow, MatchJob, list[str]]:
    """Check a person's request to play league player `player`, add the person as a human player
    (never scheduled by the league itself) and schedule the match: (match row, its job, the seats).
    The terminal (`play_against`) and the web page both start their matches here, so a person's
    match is played, recorded and rated as the league's own are. `note`: the match's note, written
    in the transaction that schedules it (a web server's claim on its match)."""
    from arena.envs.registry import make_core
    from arena.errors import ArenaError
    from arena.match.loop import InvalidMovePolicy

    store, cfg = league.store, league.cfg
    directory = league.dir
    row = store.player(player)
    if row is None or row.kind == "human":
        names = ", ".join(p.name for p in store.players() if p.kind != "human")
        raise ArenaError(f"no player {player!r} in the league at {directory}; its players: {names}")
    game = game or row.games[0]
    if game not in row.games:
        raise ArenaError(f"{player} plays {', '.join(row.games)}, not {game}: pick one of those games")
    n_seats = len(make_core(game, **league.game_kwargs(game)).players)
    if not 0 <= seat < n_seats:
        raise ArenaError(f"--seat {seat}: {game} has seats 0-{n_seats - 1}")
    known = store.player(human_name)
    if known is not None and known.kind != "human":
        raise ArenaError(f"{human_name!r} is a league player's name: pick another name to play under")
    if known is None:
        try:
            store.add_player(human_name, "human", "human", cfg.game_ids)
        except sqlite3.IntegrityError:
            pass  # added at the same moment by another session of the same person
        store.update_player(human_name, active=0)  # never scheduled by the league itself
    seats = [player] * n_seats
    seats[seat] = human_name
    pairing = Pairing(game, seats, ["human" if n == human_name else row.spec for n in seats], "human vs league player")
    match = league.begin(pairing, status="running", source="external",
                         seed=seed if seed is not None else int(time.time()) % (2**31), note=note)
    job = league.job(match, policy=InvalidMovePolicy(), move_time_limit=None, record="text")
    return match, job, seats


def play_against(directory: str | Path, player: str, game: str | None = None, seat: int = 0,
                 seed: int | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 human_name: str = "human", agent: Any = None) -> dict:
    """A human at the terminal plays league player `player`; the match is stored and rated.
    `agent`: the person's agent (default: a `HumanAgent` on `stdin` / `stdout`)."""
    from arena.agents.human import HumanAgent
    from arena.match.runner import run_match_job

    league = League.open(directory)
    store = league.store
    match, job, seats = schedule_human_match(league, player, game, seat, seed, human_name)
    game = match.game
    human = agent if agent is not None else HumanAgent(stdin=stdin, stdout=stdout)
    res = run_match_job(job, agents=[human if n == human_name else None for n in seats])
    league.commit(match.match_id, res)
    out = {"match_id": match.match_id, "players": seats, "returns": res.returns, "winner": res.winner,
           "draw": res.draw, "outcome": res.outcome, "replay": res.replay_path,
           "elo": {n: store.elo(game).get(n) for n in seats}}
    store.close()
    return out
