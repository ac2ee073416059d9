"""The main job on embedded defaults: a short round robin of the built-in agents on three games."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from arena.batch import AgentSummary, play_matches, summarize

DEFAULT_GAMES: dict[str, list[str]] = {
    "openspiel/tic_tac_toe-v0": ["random", "first", "mcts:simulations=100"],
    "openspiel/kuhn_poker-v0": ["random", "first", "cfr:iterations=200"],
    "arena/TicTacToe-v0": ["random", "first"],
}


@dataclass
class DemoConfig:
    out: str = "runs/demo"
    matches_per_pair: int = 20
    seed: int = 0
    workers: int = 2
    games: dict[str, list[str]] = field(default_factory=lambda: {k: list(v) for k, v in DEFAULT_GAMES.items()})


def run_demo(cfg: DemoConfig, console: Console | None = None) -> dict[str, list[AgentSummary]]:
    from arena.views import summary_table

    console = console or Console()
    out: dict[str, list[AgentSummary]] = {}
    for game, specs in cfg.games.items():
        totals = {s: AgentSummary(s) for s in specs}
        for a, b in itertools.combinations(specs, 2):
            rdir = Path(cfg.out) / game.replace("/", "_") / f"{_slug(a)}__vs__{_slug(b)}"
            res = play_matches(game, [a, b], cfg.matches_per_pair, seed=cfg.seed, workers=cfg.workers,
                               replay_dir=rdir)
            for s in summarize(res, [a, b]):
                t = totals[s.spec]
                for f in ("games", "wins", "draws", "losses", "total_return", "invalid", "forfeits", "move_time"):
                    setattr(t, f, getattr(t, f) + getattr(s, f))
        rows = sorted(totals.values(), key=lambda s: -s.win_rate)
        out[game] = rows
        console.print(summary_table(f"{game}: round robin, {cfg.matches_per_pair} matches per pair", rows))
    console.print(f"Replays: {Path(cfg.out).resolve()}  (arena replay list {cfg.out}/<game>/<pair>)")
    return out


def _slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in spec)
