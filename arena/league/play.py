"""A human at the terminal plays one of the league's players; the match is stored and rated."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

from arena.league.manager import league_config_of
from arena.league.storage import LeagueStore


def play_against(directory: str | Path, player: str, game: str | None = None, seat: int = 0,
                 seed: int | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 human_name: str = "human") -> dict:
    """A human at the terminal plays league player `player`; the match is stored and rated."""
    from arena.agents.human import HumanAgent
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.match import play_match
    from arena.replays.format import replay_path, write_replay

    store = LeagueStore(directory, create=False)
    cfg = league_config_of(store)
    row = store.player(player)
    if row is None:
        names = ", ".join(p.name for p in store.players())
        raise KeyError(f"no player {player!r} in the league at {directory} (players: {names})")
    game = game or row.games[0]
    if game not in row.games:
        raise ValueError(f"{player} plays {', '.join(row.games)}, not {game}")
    if store.player(human_name) is None:
        store.add_player(human_name, "human", "human", cfg.game_ids)
        store.update_player(human_name, active=0)  # never scheduled by the league itself
    kwargs = next((g.kwargs for g in cfg.games if g.id == game), {})
    core = make_core(game, **kwargs)
    seats = [human_name, player] if seat == 0 else [player, human_name]
    match = store.enqueue(game, seats, ["human" if n == human_name else row.spec for n in seats],
                          seed=seed if seed is not None else int(time.time()) % (2**31), status="running",
                          note="human vs league player", source="external")
    agents = [HumanAgent(stdin=stdin, stdout=stdout) if n == human_name else make_agent(row.spec, core, match.seed)
              for n in seats]
    res = play_match(core, agents, seed=match.seed, match_id=match.match_id,
                     move_time_limit=None, game_kwargs=kwargs or None)
    path = write_replay(res.replay, replay_path(store.replay_dir, match.match_id, cfg.compress_replays))
    store.commit_result(match.match_id, res.returns, res.winner, res.draw, res.outcome, res.moves, res.reason,
                        res.invalid, res.duration, str(path))
    out = {"match_id": match.match_id, "players": seats, "returns": res.returns, "winner": res.winner,
           "draw": res.draw, "outcome": res.outcome, "replay": str(path),
           "elo": {n: store.elo(game).get(n) for n in seats}}
    store.close()
    return out
