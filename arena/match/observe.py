"""What observed seats saw as they played, and the strategies asked at their positions.

A match can keep, for chosen seats (`MatchJob.observe`), what each of them saw before each of its
accepted moves: ``(seat, observation.raw, action, answer)`` on ``MatchResult.observed``, in the order
the moves were played (the structured view a network reads, and the move as the replay records it).
Imitation learns from these and re-simulates nothing (`arena.match.verify.observed_moves` recovers
the same views from a replay, for matches played elsewhere).

`answer` is what a *strategy reader* says at that position (`MatchJob.ask`): ``"own"``, a reader
rebuilt from the seat's own spec; an agent spec, one labeller for every observed seat; ``"played"``,
the seat's playing agent itself, for an agent that answers from the search that chose its move
(``answers_own_move``: `arena.agents.policy_search`; expert iteration's labels, at no second
search); None, no answers. A reader is an agent whose strategy can be read (`strategy_reader`: CFR's
table, a search's root visit shares); it is never the agent that plays, except as ``"played"``, whose
answer is the move's own search: so asking changes nothing of the match. Readers are built once a process (`Readers`) and lent to one match at a time, reset first
from the match's seed, so the answers depend on the match alone, not on the workers or on which
other matches are in flight.
"""

from __future__ import annotations

from typing import Any, Callable

from arena.agents.base import derive_seed
from arena.errors import ArenaError

#: The salt of a reader's seed (`reader_seed`), apart from the seats' own (0, 1, ...).
_READER_SALT = 7_001


def strategy_reader(agent: Any) -> Any:
    """What is read of `agent` at a position: its strategy (`BaseAgent.action_probabilities`), else
    its search's policy (`BaseAgent.search_policy`), else None."""
    return getattr(agent, "action_probabilities", None) or getattr(agent, "search_policy", None)


#: `Readers.lend`'s answer for a seat asked ``"played"``: the match resolves it to its own agent there
#: (`played_asker`).
PLAYED = "played"


def played_asker(agent: Any, seat: int) -> Callable[[Any], tuple[list, Any]]:
    """The ``"played"`` reader of a seat: its playing agent, which must answer from its move's own search."""
    if not getattr(agent, "answers_own_move", False):
        raise ArenaError(f"seat {seat}'s player ({getattr(agent, 'spec', type(agent).__name__)}) cannot label its "
                         "own moves without searching again: ask \"played\" only of policy_mcts players")
    return asker(agent)


def reader_seed(match_seed: int | None, seat: int) -> int | None:
    """The seed a seat's reader is reset with before a match (not the seat's agent's own)."""
    return derive_seed(match_seed, _READER_SALT + seat)


def asker(agent: Any) -> Callable[[Any], tuple[list, Any]]:
    """observation -> (legal actions, the reader's answer there): the answer an observed move carries."""
    read = strategy_reader(agent)
    return lambda o: (list(o.legal_actions), read(o))


class Readers:
    """The strategy readers of one process: built once per (game, spec), lent to one match at a time
    (`lend`; a match in flight holds its own, so lock-step matches never share one), and given back
    when the match ends (`give_back`)."""

    def __init__(self):
        self._free: dict[tuple, list[Any]] = {}
        #: (game key, spec) of an agent whose strategy cannot be read (asked "own": no answers).
        self._unreadable: set[tuple] = set()

    def _take(self, gkey: tuple, core: Any, spec: str, own: bool) -> Any:
        key = (gkey, spec)
        if key in self._unreadable:
            return None
        free = self._free.setdefault(key, [])
        if free:
            return free.pop()
        from arena.agents.specs import make_agent

        try:
            agent = make_agent(spec, core, 0)
        except ArenaError:
            if not own:
                raise
            agent = None  # a teacher that cannot be rebuilt here (a missing checkpoint) gives its moves alone
        if not callable(strategy_reader(agent)):
            if not own:
                raise ArenaError(f"{spec} cannot tell its action probabilities in {core.game_id}: ask a labeller "
                                 "whose strategy can be read (mcts, cfr, policy_mcts)")
            self._unreadable.add(key)
            return None
        return agent

    def lend(self, gkey: tuple, core: Any, specs: tuple[str, ...], seed: int | None, observe: tuple[int, ...],
             ask: str | None) -> tuple[dict[int, Callable] | None, list]:
        """(seat -> the answer at an observation, what was lent) for a match of `specs` with `seed`:
        a reader for each observed seat whose strategy can be read, reset with `reader_seed`."""
        if not observe or ask is None:
            return None, []
        if ask == PLAYED:  # the match's own agents answer (`played_asker`): nothing is lent
            return {seat: PLAYED for seat in observe}, []
        asks, lent = {}, []
        for seat in observe:
            spec = specs[seat] if ask == "own" else ask
            agent = self._take(gkey, core, spec, ask == "own")
            if agent is None:
                continue
            if callable(getattr(agent, "reset", None)):
                agent.reset(reader_seed(seed, seat))
            asks[seat] = asker(agent)
            lent.append(((gkey, spec), agent))
        return asks, lent

    def give_back(self, lent: list) -> None:
        for key, agent in lent:
            self._free.setdefault(key, []).append(agent)
