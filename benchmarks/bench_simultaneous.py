"""Benchmark: simultaneous moves answered in one batched call, against one forward pass a move.

Side by side in one process run, on the simultaneous-move test game with StarCraft's shape
(`tests/plugins/squad_games.py`: entities, a map and scalars in, a type / units / target-or-cell
move out; one structured policy, untrained, sampling, in both seats of 64 matches):

1. **lock step, simultaneous moves batched**: `arena.match.pool.play_lockstep`; every seat of
   every match still going answers its tick in one `act_batch` call (128 moves a forward pass at
   the start);
2. **lock step, one move a call**: the same matches and seeds with the policy wrapped so it has no
   `act_batch` (what lock step did for simultaneous games before: a forward pass a move);
3. **one match at a time**: `play_match` for each match (a forward pass a move).

Goal: (1) / (2) >= 10x. Also reported: lock-step moves/s of a Connect Four policy in 64 games
(the turn-taking case, unchanged by this; `bench_policy.py` compares it with one game at a time).

Run:  .venv/bin/python benchmarks/bench_simultaneous.py [--games 64] [--rounds 3]
"""

from __future__ import annotations

import os as _os
import sys as _sys

_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
_HERE = _os.path.dirname(_os.path.abspath(__file__))
_sys.path.insert(0, _HERE)
_sys.path.insert(0, _os.path.join(_os.path.dirname(_HERE), "tests"))  # the test games' plug-in module
from _common import markdown_table, versions as _versions  # noqa: E402

import argparse  # noqa: E402
import time  # noqa: E402

GAME = "test/Squads-v0"


class OneAtATime:
    """The policy without `act_batch`: lock step asks it one move at a time."""

    def __init__(self, agent):
        self.agent = agent
        self.spec = "one-at-a-time"

    def act(self, obs):
        return self.agent.act_batch([obs])[0]


def _policy(game: str, seed: int):
    import torch

    from arena.agents.neural import PolicyAgent
    from arena.envs import make_core
    from arena.inference.policy_nets import build_policy, spec_from_core

    torch.manual_seed(seed)
    return PolicyAgent(build_policy(spec_from_core(make_core(game))), seed=seed)


def _rate(play, seeds) -> float:
    t0 = time.perf_counter()
    moves = play(seeds)
    return moves / (time.perf_counter() - t0)


def bench(games: int, rounds: int) -> dict:
    from arena.envs import load_plugin
    from arena.match.pool import play_lockstep
    from arena.match.loop import play_match

    load_plugin("plugins.squad_games")
    agent = _policy(GAME, 0)
    one = OneAtATime(agent)

    def batched(seeds):
        # a simultaneous game's move is one tick of both seats: count the seats' moves
        return 2 * sum(r.moves for r in play_lockstep(GAME, [[agent, agent]] * len(seeds), seeds))

    def unbatched(seeds):
        return 2 * sum(r.moves for r in play_lockstep(GAME, [[one, one]] * len(seeds), seeds))

    def alone(seeds):
        return 2 * sum(play_match(GAME, [agent, agent], seed=s).moves for s in seeds)

    best = {"batched": 0.0, "unbatched": 0.0, "alone": 0.0}
    for r in range(rounds):
        seeds = list(range(r * games, (r + 1) * games))
        best["batched"] = max(best["batched"], _rate(batched, seeds))
        best["unbatched"] = max(best["unbatched"], _rate(unbatched, seeds))
        best["alone"] = max(best["alone"], _rate(alone, seeds[: games // 4]))
    c4 = _policy("openspiel/connect_four-v0", 1)
    rate = 0.0
    for r in range(rounds):
        seeds = list(range(r * games, (r + 1) * games))
        rate = max(rate, _rate(lambda s: sum(x.moves for x in play_lockstep(
            "openspiel/connect_four-v0", [[c4, c4]] * len(s), s)), seeds))
    best["connect_four"] = rate
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--games", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    print(_versions(("torch", "open_spiel", "pettingzoo")))
    b = bench(args.games, args.rounds)
    rows = [[f"lock step, simultaneous moves batched / one move a call ({args.games} Squads matches, moves/s)",
             f"{b['batched']:,.0f}", f"{b['unbatched']:,.0f}", f"{b['batched'] / b['unbatched']:.1f}x", ">= 10x"],
            ["lock step, simultaneous moves batched / one match at a time (moves/s)", f"{b['batched']:,.0f}",
             f"{b['alone']:,.0f}", f"{b['batched'] / b['alone']:.1f}x", "-"],
            [f"lock step, Connect Four policy, {args.games} games (moves/s)", f"{b['connect_four']:,.0f}", "-", "-",
             "reported"]]
    print(markdown_table(["comparison", "arena", "other", "ratio", "goal"], rows, {1, 2, 3}))


if __name__ == "__main__":
    main()
