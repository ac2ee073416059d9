"""A human at the terminal plays one of the league's players; the match is stored and rated."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

from arena.league.manager import League, Pairing


def play_against(directory: str | Path, player: str, game: str | None = None, seat: int = 0,
                 seed: int | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 human_name: str = "human") -> dict:
    """A human at the terminal plays league player `player`; the match is stored and rated."""
    from arena.agents.human import HumanAgent
    from arena.envs.registry import make_core
    from arena.errors import ArenaError
    from arena.match.runner import MatchJob, run_match_job

    league = League.open(directory)
    store, cfg = league.store, league.cfg
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
    if store.player(human_name) is None:
        store.add_player(human_name, "human", "human", cfg.game_ids)
        store.update_player(human_name, active=0)  # never scheduled by the league itself
    seats = [player] * n_seats
    seats[seat] = human_name
    pairing = Pairing(game, seats, ["human" if n == human_name else row.spec for n in seats], "human vs league player")
    match = league.begin(pairing, status="running", source="external",
                         seed=seed if seed is not None else int(time.time()) % (2**31))
    job = MatchJob(match_id=match.match_id, game=game, specs=tuple(match.specs), seed=match.seed,
                   game_kwargs=league.game_kwargs(game), replay_dir=str(store.replay_dir),
                   compress=cfg.compress_replays)
    human = HumanAgent(stdin=stdin, stdout=stdout)
    res = run_match_job(job, agents=[human if n == human_name else None for n in seats])
    league.commit(match.match_id, res)
    out = {"match_id": match.match_id, "players": seats, "returns": res.returns, "winner": res.winner,
           "draw": res.draw, "outcome": res.outcome, "replay": res.replay_path,
           "elo": {n: store.elo(game).get(n) for n in seats}}
    store.close()
    return out
