"""A tactics probe for two-player perfect-information OpenSpiel games: does an agent take an immediate
win, and does it stop the opponent's?

Positions come from random play (a random number of uniformly random moves from the start, seeded).
Two kinds are kept, each up to ``positions``:

* **win**: the player to move has a move that wins at once. Scored: the agent's move wins.
* **block**: the player to move has no winning move, the opponent would have exactly one winning
  reply if it were its turn now (one threat), and some move leaves the opponent no immediate win.
  Scored: after the agent's move the opponent has no winning reply.

Beside each rate stands what a uniformly random legal move scores on the same positions (its
expectation, exact), and a 95% Wilson interval. The SCC learner's evaluations report it
(`eval.tactics`: ``eval/tactics/...``), and `benchmarks/c4_strength.py` beside the win rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass
class ProbeResult:
    win_taken: float
    win_positions: int
    win_random: float
    block_made: float
    block_positions: int
    block_random: float

    def row(self, prefix: str = "") -> dict[str, float]:
        """The four rates as metrics, named ``<prefix>tactics/...``."""
        return {f"{prefix}tactics/win_taken": self.win_taken, f"{prefix}tactics/block_made": self.block_made,
                f"{prefix}tactics/win_random": self.win_random, f"{prefix}tactics/block_random": self.block_random}

    def describe(self) -> str:
        lo, hi = wilson(self.win_taken, self.win_positions)
        blo, bhi = wilson(self.block_made, self.block_positions)
        return (f"wins taken {self.win_taken:.3f} [{lo:.2f}, {hi:.2f}] of {self.win_positions} (random move "
                f"{self.win_random:.3f}); single threats blocked {self.block_made:.3f} [{blo:.2f}, {bhi:.2f}] of "
                f"{self.block_positions} (random move {self.block_random:.3f})")


def wilson(p: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a rate `p` measured on `n` trials."""
    if n <= 0:
        return (0.0, 1.0)
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def _wins(state, player: int) -> list[int]:
    from arena.agents.search import TacticsAgent

    return TacticsAgent._wins({a: state.child(a) for a in state.legal_actions()}, player)


def _wins_at_once(state, action: int, player: int) -> bool:
    c = state.child(action)
    return c.is_terminal() and c.returns()[player] > 0


def _threats(state, opponent: int) -> list[int]:
    """The opponent's winning moves if it moved now (the game's rules applied with the turn passed):
    for games whose moves do not depend on whose turn it is, as in Connect Four and tic-tac-toe, the
    opponent's winning replies after a move of ours that does not touch them."""
    return [a for a in state.legal_actions() if _opponent_wins_with(state, a, opponent)]


def _opponent_wins_with(state, action: int, opponent: int) -> bool:
    # play some other legal move of ours first that does not occupy `action`'s place, then the opponent's
    for b in state.legal_actions():
        if b == action:
            continue
        c = state.child(b)
        if c.is_terminal():
            continue
        if action in c.legal_actions():
            return _wins_at_once(c, action, opponent)
    return False


def _safe(state, action: int, opponent: int) -> bool:
    c = state.child(action)
    return c.is_terminal() or not _wins(c, opponent)


def probe_positions(core: Any, positions: int = 300, seed: int = 0, max_tries: int = 20000) -> dict[str, list]:
    """Positions of each kind from random play: {"win": [(moves, winning moves)], "block": [(moves, safe moves)]}."""
    rng = np.random.default_rng(seed)
    game = core.game
    out: dict[str, list] = {"win": [], "block": []}
    horizon = game.max_game_length()
    for _ in range(max_tries):
        if len(out["win"]) >= positions and len(out["block"]) >= positions:
            break
        s = game.new_initial_state()
        moves: list[int] = []
        for _ in range(int(rng.integers(0, horizon))):
            if s.is_terminal():
                break
            a = int(rng.choice(s.legal_actions()))
            s.apply_action(a)
            moves.append(a)
        if s.is_terminal():
            continue
        me = s.current_player()
        mine = _wins(s, me)
        if mine:
            if len(out["win"]) < positions:
                out["win"].append((moves, mine))
            continue
        if len(out["block"]) >= positions:
            continue
        if len(_threats(s, 1 - me)) != 1:
            continue
        safe = [a for a in s.legal_actions() if _safe(s, a, 1 - me)]
        if safe and len(safe) < len(s.legal_actions()):
            out["block"].append((moves, safe))
    return out


#: (game, positions, seed) -> `probe_positions`' answer (move lists: plain data).
_FOUND: dict[tuple[str, int, int], dict[str, list]] = {}


def tactics_probe(game_id: str, choose: Callable[[list], list[int]], positions: int = 300, seed: int = 0) -> ProbeResult:
    """Score `choose` (a list of `Observation` -> the moves, in order: an agent's ``act_batch``, or its
    ``act`` mapped) on `probe_positions`."""
    from arena.envs.observation import ShownLegal
    from arena.envs.registry import make_core

    core = make_core(game_id)
    if core.source != "openspiel" or not core.perfect_information \
            or len(core.players) != 2:
        raise ValueError(f"the tactics probe is for two-player perfect-information OpenSpiel games; {game_id} is not")
    key = (game_id, int(positions), int(seed))
    found = _FOUND.get(key)
    if found is None:  # the same positions at every evaluation of a run: found once per process
        found = _FOUND[key] = probe_positions(core, positions, seed)
    scores = {}
    for kind, rows in found.items():
        obs, cores = [], []
        for moves, _good in rows:
            c = make_core(game_id)
            c.reset(0)
            for a in moves:
                c.apply(c.current_player(), a)
            p = c.current_player()
            cores.append(c)
            obs.append(ShownLegal(c, p, len(moves), c.legal_actions(p)))
        chosen = choose(obs) if obs else []
        hit = [int(a in good) for a, (_m, good) in zip(chosen, rows)]
        rand = [len(good) / len(o.legal_actions) for o, (_m, good) in zip(obs, rows)]
        scores[kind] = (float(np.mean(hit)) if hit else float("nan"), len(hit),
                        float(np.mean(rand)) if rand else float("nan"))
        for c in cores:
            c.close()
    core.close()
    w, b = scores["win"], scores["block"]
    return ProbeResult(w[0], w[1], w[2], b[0], b[1], b[2])


def agent_chooser(agent: Any) -> Callable[[list], list[int]]:
    """`tactics_probe`'s `choose` for an agent: its ``act_batch`` where it has one, else ``act`` each."""
    batch = getattr(agent, "act_batch", None)
    if callable(batch):
        return lambda obs: [int(a) for a in batch(obs)]
    return lambda obs: [int(agent.act(o)) for o in obs]
