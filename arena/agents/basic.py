"""Random and fixed-rule agents."""

from __future__ import annotations

import _random
import random
import re
from typing import Any

import numpy as np

from arena.agents.base import BaseAgent
from arena.envs.observation import Observation

#: What `random.Random.seed(a)` comes down to for an int or None (its own code only checks the type and
#: turns str/bytes into an int first): the Mersenne Twister's seeding, without the Python-level call.
_seed_mt = _random.Random.seed


class RandomAgent(BaseAgent):
    """Uniform over legal moves (or the game's own sampler for free-text and continuous moves).

    Draws from its own seeded generators, never the global `random` state.

    Seeding is lazy: the Mersenne Twister's seeding (about 4 us, most of what a bare tic-tac-toe game
    costs) happens at the first draw after `__init__` or `reset`, not before. Every draw is the
    same as with eager seeding (the generator is seeded with the same seed before it is first read);
    what is saved is the seeding nobody reads: an agent built for one match (a spec string, a league
    job) is built with its seed and then reset with that same seed, and an agent that never moves
    in a match never seeds. A seed that is neither an int nor None (str, bytes, float) is seeded at
    once, so a bad one still fails where it is given.
    """

    spec = "random"

    def __init__(self, seed: int | None = None):
        # A generator not seeded yet (`__new__` runs no `__init__`, which would seed it; nothing reads
        # its state before `_seed_now`). `gauss_next` is what `random.Random.__init__` would set (its
        # getstate(), and so pickling, reads it).
        py = self._py = random.Random.__new__(random.Random)
        py.gauss_next = None
        # randrange(n) is _randbelow(n) for n > 0 (CPython's random.py since 3.2): the same draws
        # without randrange's argument checks, one call less per move.
        self._below = py._randbelow
        RandomAgent.reset(self, seed)  # this class's own (a subclass's reset may need its own __init__ first)

    def reset(self, seed: int | None = None) -> None:
        self._seed = seed
        self._np = None  # built on first use: most games never need it
        if seed is None or type(seed) is int:
            self._pending = True  # seeded by the first draw (`_seed_now`)
        else:
            self._py.seed(seed)  # str, bytes, float, or a bad type (which raises here, as it always did)
            self._pending = False

    def _seed_now(self) -> None:
        """Seed the generator with the pending seed: ``random.Random.seed(seed)`` for an int or None,
        as the C call it ends in (its only other work, resetting `gauss_next`, concerns `gauss()`,
        which this agent never calls)."""
        _seed_mt(self._py, self._seed)
        self._pending = False

    def _np_rng(self) -> np.random.Generator:
        if self._np is None:
            self._np = np.random.default_rng(self._seed)
        return self._np

    def act_legal(self, legal: list) -> Any:
        """`act`'s move for a non-empty legal list (the match loop's fast path): ``legal[randrange(n)]``,
        written out as CPython's `_randbelow_with_getrandbits` draws it, so the stream is the same as
        `act`'s (a test checks it draw for draw)."""
        if self._pending:
            self._seed_now()
        n = len(legal)
        k = n.bit_length()
        getrandbits = self._py.getrandbits  # (not kept on self: copy.deepcopy would keep a builtin method bound to the original)
        r = getrandbits(k)
        while r >= n:
            r = getrandbits(k)
        return legal[r]

    def act(self, observation: Observation) -> Any:
        legal = observation.legal_actions
        if legal:
            if self._pending:
                self._seed_now()
            return legal[self._below(len(legal))]
        action = observation.sample_action(self._np_rng())
        if action is None:
            raise ValueError(
                f"the random agent cannot play {observation.game_id}: the game lists no legal moves and has no sampler"
            )
        return action


class FirstLegalAgent(BaseAgent):
    """Always the first legal move: a deterministic baseline for tests and sanity checks."""

    spec = "first"

    def act_legal(self, legal: list) -> Any:
        return legal[0]

    def act(self, observation: Observation) -> Any:
        legal = observation.legal_actions
        if not legal:
            raise ValueError(f"{observation.game_id} lists no legal moves")
        return legal[0]


class ConstantAgent(BaseAgent):
    """The same continuous action every move: ``constant:value=0.05`` in every component, clipped to
    the action box (from Python, `value` may also be one number per component). A baseline for
    control tasks: ``constant:value=0`` holds every muscle of the prosthetics task at rest."""

    def __init__(self, space: Any, value: Any = 0.0):
        low, high = np.broadcast_to(space.low, space.shape), np.broadcast_to(space.high, space.shape)
        try:
            v = np.broadcast_to(np.asarray(value, dtype=np.float64), space.shape)
        except ValueError:
            raise ValueError(f"value {value!r} does not fit actions of shape {space.shape}") from None
        self.action = np.clip(v, low, high).astype(space.dtype)
        self.spec = f"constant:value={value!r}"

    def act(self, observation: Observation) -> Any:
        return self.action.copy()


#: The games the `trader` reads: the negotiation view it parses is `NegotiationCore.text`'s.
TRADER_GAMES = ("arena/SimpleNegotiation-v2",)
_RESOURCE_LINE = re.compile(r"^\s+([A-Za-z]+)\s+(\d+) x\s+(\d+) =\s+-?\d+$", re.MULTILINE)
_OFFER_FOR_ME = re.compile(r"^Offer for you from Player \d+: .*\(([+-]\d+) by your values\)\.$", re.MULTILINE)


class TraderAgent(BaseAgent):
    """A reference player for Simple Negotiation (``arena/SimpleNegotiation-v2``), reading only its own
    view: it accepts an offer exactly when the offer raises the total value of its resources by its own
    values (and it holds what the offer asks for); otherwise it offers one unit of its least valued
    resource for one of its most valued (the pair moving down its list turn by turn, so a refused trade
    is not repeated at once), and makes no offer on the last turn, when none could be answered. It never
    gives more value than it gets, so it cannot lose value against any player; the deterministic
    baseline that rates above random on the negotiation table, as CFR does on the poker ones."""

    spec = "trader"

    def __init__(self) -> None:
        self._turn = 0

    def reset(self, seed: int | None = None) -> None:
        self._turn = 0

    def act(self, observation: Observation) -> Any:
        text = observation.text
        found = _OFFER_FOR_ME.search(text)
        if found and int(found.group(1)) > 0 and "You do not have the resources to accept it." not in text:
            return "[Accept]"
        if "This is the last turn" in text:
            return "[Deny] No more trades." if found else "No more trades."
        mine = [(int(v), r, int(q)) for r, q, v in _RESOURCE_LINE.findall(text)]
        if len(mine) < 2:
            raise ValueError("the negotiation view lists no resources to trade: the trader reads "
                             f"{', '.join(TRADER_GAMES)}'s view")
        by_value = sorted(mine)
        held = [m for m in by_value if m[2] > 0]
        if not held:
            return "I have nothing to trade."
        k = self._turn % (len(by_value) - 1)
        self._turn += 1
        give = held[min(k, len(held) - 1)]
        want = [m for m in by_value if m[0] > give[0]]
        if not want:
            return "[Deny]" if found else "Nothing to trade for now."
        get = want[-1 - (k % len(want))]
        return f"[Offer: 1 {give[1]} -> 1 {get[1]}] One of my {give[1]} for one of your {get[1]}?"
