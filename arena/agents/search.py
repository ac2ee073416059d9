"""OpenSpiel search and solved agents: MCTS and one-ply tactics for perfect-information games, CFR for small poker."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from arena.agents.base import BaseAgent
from arena.envs.core import GameCore
from arena.errors import IncompatibleAgent
from arena.envs.observation import Observation


def _openspiel_game(core: GameCore | None, who: str):
    if core is None or core.source != "openspiel":
        gid = "this game" if core is None else core.game_id
        raise IncompatibleAgent(f"the {who} agent plays OpenSpiel games (openspiel/<name>-v0); {gid} is not one")
    return core.game


class MCTSAgent(BaseAgent):
    """OpenSpiel's MCTS with random-rollout evaluation (perfect-information games): UCT, proven wins and
    losses propagated (``solve``), the most visited move played.

    ``backend=python`` (the default) runs OpenSpiel's Python ``MCTSBot``, ``backend=cpp`` its C++ one
    (``pyspiel.MCTSBot``): the same algorithm about 20 times faster (Connect Four, 400 simulations:
    2.4 ms a move against 53 ms), which makes searches of thousands of simulations cheap enough to
    teach with. `search_policy` is the search's policy: the share of the root's visits each
    legal move received, from a search of its own (imitation distils it; `act` plays the argmax of
    another search). With probability ``epsilon`` it plays a uniformly random legal move instead (teacher
    matches that reach the positions a blunder leaves: wins to take, threats to block).
    """

    BACKENDS = ("python", "cpp")

    def __init__(self, core: GameCore | None, simulations: int = 200, rollouts: int = 1, uct_c: float = 2.0,
                 backend: str = "python", epsilon: float = 0.0, seed: int | None = None):
        from open_spiel.python.algorithms import mcts

        self._mcts = mcts
        self.game = _openspiel_game(core, "mcts")
        if not core.perfect_information:
            raise IncompatibleAgent(f"MCTS needs a perfect-information game; {core.game_id} is not")
        if backend not in self.BACKENDS:
            raise ValueError(f"mcts: backend must be python or cpp, got {backend!r}")
        self.simulations, self.rollouts, self.uct_c = int(simulations), int(rollouts), float(uct_c)
        if not 0.0 <= float(epsilon) <= 1.0:
            raise ValueError(f"mcts: epsilon must be in [0, 1], got {epsilon}")
        self.backend, self.epsilon = backend, float(epsilon)
        self.spec = f"mcts:simulations={self.simulations},rollouts={self.rollouts}" + (
            f",uct_c={self.uct_c:g}" if self.uct_c != 2.0 else "") + (",backend=cpp" if backend == "cpp" else "") + (
            f",epsilon={self.epsilon:g}" if self.epsilon else "")
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(seed)
        if self.backend == "cpp":
            import pyspiel

            # the C++ search takes a 32-bit signed seed; a match's seed may be any integer
            s = (int(seed) if seed is not None else int.from_bytes(os.urandom(4), "little")) % (2**31 - 1)
            evaluator = pyspiel.RandomRolloutEvaluator(self.rollouts, s)
            self.bot = pyspiel.MCTSBot(self.game, evaluator, self.uct_c, self.simulations, 1000, True, s, False)
            return
        rs = np.random.RandomState(seed)
        evaluator = self._mcts.RandomRolloutEvaluator(self.rollouts, rs)
        self.bot = self._mcts.MCTSBot(self.game, self.uct_c, self.simulations, evaluator, random_state=rs,
                                      solve=True, verbose=False)

    def act(self, observation: Observation) -> Any:
        if self.epsilon and self._rng.random() < self.epsilon:
            legal = observation.legal_actions
            return legal[int(self._rng.integers(len(legal)))]
        return self.bot.step(observation.engine_state())

    def search_policy(self, observation: Observation) -> list[float]:
        """The share of a new search's root visits each legal move received (``legal_actions``' order)."""
        return visit_shares(self.bot.mcts_search(observation.engine_state()), observation.legal_actions)


def visit_shares(root, legal: list) -> list[float]:
    """The search policy at `root` (an OpenSpiel MCTS ``SearchNode``, Python's or C++'s) over the moves
    of `legal`: the share of the root's visits each received, except where the search proved outcomes
    (``solve``; it stops as soon as the root is proven, so the visits then say little): all the mass on
    the moves proven to win, none on those proven to lose (unless every move is). Uniform where nothing
    was visited."""
    kids = {int(c.action): c for c in root.children}
    counts = np.zeros(len(legal), dtype=np.float64)
    proven = np.zeros(len(legal), dtype=np.float64)  # +1 a proven win for the mover, -1 a proven loss
    for i, a in enumerate(legal):
        c = kids.get(int(a))
        if c is None:
            continue
        counts[i] = float(c.explore_count)
        out = c.outcome
        if out is not None and len(out):
            proven[i] = np.sign(float(out[c.player]))
    if (proven > 0).any():
        v = (proven > 0).astype(np.float64)
    elif (proven < 0).any() and not (proven < 0).all():
        v = np.where(proven < 0, 0.0, np.maximum(counts, 1e-9))
    else:
        v = counts
    total = v.sum()
    return (v / total if total > 0 else np.full(len(legal), 1.0 / len(legal))).tolist()


class TacticsAgent(BaseAgent):
    """One-ply tactics for two-player perfect-information games: take a win, else deny the
    opponent an immediate win (block), else play at random.

    With probability ``epsilon`` it plays a uniformly random legal move instead. A cheap,
    stochastic sparring partner that punishes missed blocks at once, which random play does
    only by chance (tic-tac-toe vs random, seat-averaged: 0.80 wins; random 0.44).
    """

    def __init__(self, core: GameCore | None, epsilon: float = 0.0, seed: int | None = None):
        self.game = _openspiel_game(core, "tactics")
        if not core.perfect_information or self.game.num_players() != 2:
            raise IncompatibleAgent(f"the tactics agent needs a two-player perfect-information game; {core.game_id} is not")
        if not 0.0 <= float(epsilon) <= 1.0:
            raise ValueError(f"tactics: epsilon must be in [0, 1], got {epsilon}")
        self.epsilon = float(epsilon)
        self.spec = f"tactics:epsilon={self.epsilon:g}"
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(seed)

    @staticmethod
    def _wins(children: dict, player: int) -> list[int]:
        """The moves among ``children`` (move -> next state) that end the game with a positive return for ``player``."""
        return [a for a, c in children.items() if c.is_terminal() and c.returns()[player] > 0]

    def choose(self, state) -> int:
        legal = state.legal_actions()
        if self.epsilon and self._rng.random() < self.epsilon:
            return int(self._rng.choice(legal))
        children = {a: state.child(a) for a in legal}
        wins = self._wins(children, state.current_player())
        if wins:
            return int(self._rng.choice(wins))
        safe = [a for a, c in children.items() if c.is_terminal() or c.is_chance_node()
                or not self._wins({b: c.child(b) for b in c.legal_actions()}, c.current_player())]
        return int(self._rng.choice(safe or legal))

    def act(self, observation: Observation) -> Any:
        return self.choose(observation.engine_state())


_CFR_CACHE: dict[tuple[str, int], Any] = {}


class _SolvedPolicy:
    """A CFR+ average policy read back from the cache: the action probabilities of each information
    state, as `TabularPolicy.policy_for_key` gives them."""

    def __init__(self, table: dict[str, list[float]]):
        self._table = table

    def policy_for_key(self, key: str) -> list[float]:
        return self._table[key]


def cfr_cache_dir() -> Path:
    """Where solved CFR+ policies are kept: ``$ARENA_CACHE/cfr`` (default ``~/.cache/arena/cfr``)."""
    root = os.environ.get("ARENA_CACHE")
    return (Path(root).expanduser() if root else Path("~/.cache/arena").expanduser()) / "cfr"


def cfr_average_policy(game, iterations: int):
    """CFR+ average policy for a small game: computed once per machine, then read from `cfr_cache_dir`.

    Leduc poker takes 90-110 s to solve on 2 cores (300 iterations), and every worker process of a
    league would solve it again: the first process to need a game solves it under a file lock (and
    says so on stderr) and writes the table (information state -> action probabilities, plain JSON
    floats, which read back bit for bit); the others wait and read it. A cache file that does not
    parse is solved again.
    """
    key = (str(game), int(iterations))
    pol = _CFR_CACHE.get(key)
    if pol is None:
        pol = _CFR_CACHE[key] = _solved_from_cache(game, int(iterations))
    return pol


def _solved_from_cache(game, iterations: int):
    import fcntl
    import json
    import re
    import sys

    import pyspiel

    from arena.fsio import atomic_write_bytes

    name = re.sub(r"[^A-Za-z0-9_.=,-]+", "_", str(game))[:120]
    folder = cfr_cache_dir()
    path = folder / f"{name}-{iterations}-open_spiel{getattr(pyspiel, '__version__', '')}.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = open(folder / ".lock", "w")
    except OSError:  # no writable cache: solve in this process only
        return _solve(game, iterations)
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            table = json.loads(path.read_text())
            if isinstance(table, dict) and all(isinstance(v, list) for v in table.values()):
                return _SolvedPolicy(table)
        except (OSError, ValueError):
            pass
        print(f"solving CFR+ for {game} ({iterations} iterations, once; kept in {folder})", file=sys.stderr,
              flush=True)
        pol = _solve(game, iterations)
        table = {k: [float(x) for x in pol.action_probability_array[i]] for k, i in pol.state_lookup.items()}
        try:
            atomic_write_bytes(path, json.dumps(table).encode())
        except OSError:
            pass
        return _SolvedPolicy(table)


def _solve(game, iterations: int):
    from open_spiel.python.algorithms import cfr

    solver = cfr.CFRPlusSolver(game)
    for _ in range(iterations):
        solver.evaluate_and_update_policy()
    return solver.average_policy()


#: Text games whose every hand is a small OpenSpiel game, which the CFR agent plays by reading the hand from
#: the text (`kuhn_text_key`): ``arena/KuhnPoker-v2``'s hands are OpenSpiel's ``kuhn_poker`` (real stakes: a
#: bet and a call cost a chip); ``arena/KuhnPoker-v1``'s are Kuhn with free bets (TextArena's pot never grows),
#: another game with another equilibrium (`arena.envs.kuhn.free_bet_kuhn_game`).
TEXT_KUHN = ("arena/KuhnPoker-v2", "arena/KuhnPoker-v1")
_KUHN_CARDS = {"J": 0, "Q": 1, "K": 2}
_KUHN_MOVE = re.compile(r"Player \d+, submitted move: '\[(check|bet|call|fold)\]'", re.IGNORECASE)


def kuhn_text_key(text: str) -> str:
    """OpenSpiel's ``kuhn_poker`` information-state string of the hand a TextArena Kuhn Poker view is at:
    the player's card (0 J, 1 Q, 2 K) then the hand's moves so far, ``p`` for a check or a fold and ``b``
    for a bet or a call (the player who opens the hand is OpenSpiel's player 0). Read from the view's
    last ``### Starting round`` section; a view it cannot read raises `ValueError` naming what is missing."""
    head = text.rfind("### Starting round")
    if head < 0:
        raise ValueError("no '### Starting round' line in the Kuhn Poker view: cannot tell the hand")
    hand = text[head:]
    card = re.search(r"Your card is: '([JQK])'", hand)
    if card is None:
        raise ValueError("no \"Your card is: 'X'\" in the hand's view")
    moves = "".join("b" if m.lower() in ("bet", "call") else "p" for m in _KUHN_MOVE.findall(hand))
    return f"{_KUHN_CARDS[card.group(1)]}{moves}"


class CFRAgent(BaseAgent):
    """Plays a CFR+ average policy (near-Nash in Kuhn/Leduc poker), sampling with its own generator. On
    `TEXT_KUHN` (TextArena's Kuhn Poker with real stakes) it plays the same strategy, hand by hand, from the
    text it is shown (`kuhn_text_key`)."""

    def __init__(self, core: GameCore | None, iterations: int = 200, seed: int | None = None):
        game_id = core.game_id if core is not None else None
        self.text_kuhn = game_id in TEXT_KUHN
        self._free_bets = game_id == "arena/KuhnPoker-v1"
        if self._free_bets:
            from arena.envs.kuhn import free_bet_kuhn_game

            self.game = free_bet_kuhn_game()
        elif self.text_kuhn:
            import pyspiel

            self.game = pyspiel.load_game("kuhn_poker")
        else:
            self.game = _openspiel_game(core, "cfr")
        if core.perfect_information:
            raise IncompatibleAgent(f"CFR is for small imperfect-information games (kuhn_poker, leduc_poker); "
                             f"{core.game_id} has perfect information: use mcts")
        self.iterations = int(iterations)
        self.spec = f"cfr:iterations={self.iterations}"
        self.policy = cfr_average_policy(self.game, self.iterations)
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(seed)

    def hand_key(self, text: str) -> str:
        """The information state of the hand a `TEXT_KUHN` view is at, in the strings of the game solved:
        ``kuhn_poker``'s (``2pb``) or the free-bet Python game's (``p0 card:2 pb``)."""
        key = kuhn_text_key(text)
        if not self._free_bets:
            return key
        return f"p{(len(key) - 1) % 2} card:{key[0]}" + (f" {key[1:]}" if len(key) > 1 else "")

    def action_probabilities(self, observation: Observation) -> list[float]:
        """The average policy's probability of each legal move (in ``legal_actions``' order)."""
        legal = observation.legal_actions
        if self.text_kuhn:  # OpenSpiel's actions: 0 pass (check, fold), 1 bet (bet, call)
            probs = self.policy.policy_for_key(self.hand_key(observation.text))
            kinds = [1 if str(a).strip("[]").lower() in ("bet", "call") else 0 for a in legal]
            p = np.asarray([probs[k] for k in kinds], dtype=np.float64)
        else:
            probs = self.policy.policy_for_key(observation.information_state())
            p = np.asarray([probs[a] for a in legal], dtype=np.float64)
        total = p.sum()
        return (p / total if total > 0 else np.full(len(legal), 1.0 / len(legal))).tolist()

    def act(self, observation: Observation) -> Any:
        legal = observation.legal_actions
        return legal[int(self._rng.choice(len(legal), p=self.action_probabilities(observation)))]
