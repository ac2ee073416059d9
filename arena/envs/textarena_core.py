"""TextArena games as arena games: any two-player TextArena id.

Spec
----
* Ids: ``textarena/<TextArena id>`` (for example ``textarena/TicTacToe-v0``,
  ``textarena/KuhnPoker-v0-short-train``) and the curated ids of the self-play
  papers: ``arena/TicTacToe-v0``, ``arena/KuhnPoker-v1`` (ante 1, 5 rounds, as
  SPIRAL), ``arena/KuhnPoker-v2`` (the same with real stakes, `arena.envs.kuhn`),
  ``arena/SimpleNegotiation-v1`` (10 turns, as SPIRAL) and
  ``arena/SimpleNegotiation-v2`` (a view and rules for people, `NegotiationCore`).
* Players: two, ``player_0`` and ``player_1`` (TextArena's ids 0 and 1).
* Actions: free text (``FreeText``), validated by the game itself
  (``"[4]"``, ``"[bet]"``, ``"[Offer: 1 Wheat -> 1 Ore]"``). Where the arena
  knows a game's legal set (TicTacToe, Kuhn Poker) ``legal_actions`` lists it;
  Simple Negotiation offers ``sample_action`` for random play.
* Observation: the text TextArena builds for the player (its wrappers decide
  how much history is shown); ``arena/SimpleNegotiation-v2`` builds its own. Once the game is
  over each player's view is the final position: the messages of the last move (the winning
  mark, the last showdown), which TextArena queues and never shows, are read in, and the lines
  offering moves are left out (Kuhn Poker's extra hand dealt after the last round too, in the
  place of its board: ``Game over: <reason>``).
* For people (`human_view`, `rules`): the view without TextArena's prompt, which is the rules
  (`rules` gives it, for a terminal to print once), and without the list of moves where the
  arena knows them (TicTacToe, Kuhn Poker); Kuhn Poker's adds the round, the card and the pot.
* Rewards: TextArena's final rewards from ``close()`` (0.7 semantics), at the end.
* Invalid moves: reported to the caller with TextArena's reason (the same player
  moves again); the arena's invalid-move policy decides when the offender loses.
* Seeding: TextArena seeds and draws from the global ``random`` module. Every
  call into TextArena runs with this core's own saved ``random`` state swapped
  in, and the caller's global state is restored afterwards, so a seed gives the
  same match every time and the rest of the process is unaffected.

Kuhn Poker
----------
* ``arena/KuhnPoker-v1``: TextArena's ``KuhnPoker-v0-short-train`` as it is, SPIRAL's exact
  setting (SPIRAL's published results are on it). Its quirk: TextArena (0.7.4, and the 0.6.4
  SPIRAL pins) sets the pot to the two antes each round and never adds a bet or a call to it,
  so after bet-call the winner takes 2 chips, as after check-check: every round is worth +-1.
* ``arena/KuhnPoker-v2``: real stakes, a bet and a call each put 1 chip in the pot (Kuhn's and
  OpenSpiel's ``kuhn_poker`` payoffs); the text interface, 5 rounds and the returns are v1's.

Simple Negotiation
------------------
* ``arena/SimpleNegotiation-v1``: TextArena's ``SimpleNegotiation-v0`` as it is, SPIRAL's
  setting; its view and rules are kept byte for byte (a golden replay checks them). What a
  player sees is the prompt with the *starting* inventory and one line per game event
  ("Player 1 made no new trade offer"): never the current inventory, the other side's
  message text or the turn. An offer stays open after it is denied, so ``[Accept]`` later
  takes it, even by the player who made it ("Player 0 accepted the trade offer from Player 0").
  TextArena plays one turn more than ``max_turns`` (11 for 10: its turn-limit check runs before
  the turn counter moves; an offer on the extra turn is ignored).
* ``arena/SimpleNegotiation-v2`` (`NegotiationCore`): the same game and values with a view that
  shows the current inventory with its values and total, the offer waiting for an answer, the
  turns played with the messages the players wrote, and the turns left. Rules: an offer is
  open for one answer, the other player's next turn (anything but ``[Accept]`` denies it);
  ``[Accept]`` or ``[Deny]`` with no offer open for the player, and ``[Accept]`` without the
  resources asked for, are invalid moves with the reason; the game lasts ``max_turns`` turns.
"""

from __future__ import annotations

import contextlib
import importlib
import random
import re
from importlib.metadata import version as _pkg_version
from typing import Any

import numpy as np

from arena.envs.core import TERMINAL, GameCore
from arena.envs.spaces import FreeText

_RESOURCES = ["Wheat", "Wood", "Sheep", "Brick", "Ore"]
#: TextArena games whose reset, step and observation code never touches `random` (read from
#: textarena 0.7.4's source); all others run with the state swap.
_RANDOM_FREE = frozenset({"TicTacToeEnv"})
_CELLS = [f"[{i}]" for i in range(9)]
#: The lines of a view that offer the moves (TicTacToe's, Kuhn Poker's): left out once the game is over,
#: and from the view for people (whose terminal numbers the legal moves itself).
_MOVES_LINE = re.compile(r"^\s*(\[GAME\] )?(Available Moves:|Your available actions are:)")
#: TextArena 0.7.4 observation wrappers whose ``observation(player_id, obs)`` only appends `obs` to
#: ``full_observations[player_id]`` and returns ``_convert_obs_to_str(player_id)``, a string made
#: from that list alone (and the fixed role names): the core keeps the list up to date every move
#: and builds the string only when someone reads it (`_LazyText`).
_LAZY_WRAPPERS = frozenset({"GameMessagesAndCurrentBoardObservationWrapper", "GameMessagesObservationWrapper",
                            "LLMObservationWrapper"})
#: A player's view whose text is not built yet.
_PENDING = object()


def _textarena():
    # Importing textarena.envs pulls only the registry; game modules load lazily by id.
    import textarena as ta

    return ta


def _is_prompt(entry) -> bool:
    kind = entry[2] if isinstance(entry, tuple) and len(entry) > 2 else None
    return getattr(kind, "name", None) == "PROMPT"


def _unwrap(env):
    while hasattr(env, "env"):
        env = env.env
    return env


def _textarena_kind(env) -> str:
    """Name of the TextArena game class `env` is or derives from (``KuhnPokerEnv`` for v2's)."""
    for cls in type(env).__mro__:
        if cls.__module__.startswith("textarena."):
            return cls.__name__
    return type(env).__name__


class _LazyText:
    """The observation wrapper's work, split: its bookkeeping every move, its string on demand.

    A player's view string depends only on that player's history list, which changes only when
    that player is observed again; so building it when first read (or never, when no agent,
    replay or view reads it: random and neural players, ``record="actions"``) gives the same string
    TextArena's ``get_observation`` would have built. Anyone else who calls the env's
    ``get_observation`` (the final view does) first settles the pending view of that player.
    """

    def __init__(self, core: "TextArenaCore", wrapper):
        self.wrapper = wrapper
        self.inner = wrapper.env.get_observation
        self.history = wrapper.full_observations
        convert = self.convert = type(wrapper)._convert_obs_to_str
        original = type(wrapper).observation

        def observation(player_id, observation):  # for callers of env.get_observation() other than the core
            views = core._texts
            if 0 <= player_id < len(views) and views[player_id] is _PENDING:
                views[player_id] = convert(wrapper, player_id=player_id)  # before the history grows
            return original(wrapper, player_id, observation)

        wrapper.observation = observation

    def text(self, pid: int) -> str:
        return self.convert(self.wrapper, player_id=pid)


def _lazy_wrapper(env):
    """The one observation wrapper of `env`'s chain when it is a `_LAZY_WRAPPERS` kind and every other
    layer passes ``get_observation`` through unchanged; else None (then views are built eagerly)."""
    from textarena.core import ObservationWrapper, Wrapper

    found = None
    w = env
    while isinstance(w, Wrapper):
        if isinstance(w, ObservationWrapper):
            kind = type(w)
            if (found is not None or kind.__name__ not in _LAZY_WRAPPERS or not kind.__module__.startswith("textarena.")
                    or kind.get_observation is not ObservationWrapper.get_observation):
                return None
            found = w
        elif type(w).get_observation is not Wrapper.get_observation:
            return None
        w = w.env
    if found is None or not isinstance(found.__dict__.get("full_observations"), dict):
        return None
    return found


def _random_offer(mine: dict, rng: np.random.Generator) -> str | None:
    """An offer of 1-5 of a resource `mine` holds for 1-5 of any resource; None when it holds nothing."""
    have = [r for r in _RESOURCES if mine.get(r, 0) > 0]
    if not have:
        return None
    give = have[int(rng.integers(len(have)))]
    want = _RESOURCES[int(rng.integers(len(_RESOURCES)))]
    q1 = int(rng.integers(1, min(mine[give], 5) + 1))
    q2 = int(rng.integers(1, 6))
    return f"[Offer: {q1} {give} -> {q2} {want}]"


class TextArenaCore(GameCore):
    source = "textarena"
    action_kind = "text"

    def __init__(self, env_id: str, game_id: str | None = None, env_class: str | None = None, **env_kwargs: Any):
        """`env_class` (``"module:attr"``) plays the TextArena id with that game class instead of the
        id's own, with the id's kwargs and wrappers (``arena/KuhnPoker-v2``)."""
        _textarena()
        from textarena.envs.registration import ENV_REGISTRY

        if env_id not in ENV_REGISTRY:
            raise ValueError(f"unknown TextArena id {env_id!r}")
        self.ta_id = env_id
        self.game_id = game_id or f"textarena/{env_id}"
        self.settings = {"env_id": env_id, **({"env_class": env_class} if env_class else {}), **env_kwargs}
        self._env_kwargs = dict(env_kwargs)
        self._env_class = None
        if env_class is not None:
            module, _, attr = env_class.partition(":")
            self._env_class = getattr(importlib.import_module(module), attr)
        self.engine = {"textarena": _pkg_version("textarena")}
        self.players = ["player_0", "player_1"]
        self._rand_state = random.Random(0).getstate()
        with self._own_random():
            self.env = self._make_env()
        self.base = _unwrap(self.env)
        self._kind = _textarena_kind(self.base)
        self._texts = ["", ""]
        self._lazy = self._make_lazy()
        self._current = TERMINAL
        self._returns = [0.0, 0.0]
        self._done = True
        self._invalid_reason: str | None = None
        self._random_free = False
        self.outcome_reason = ""

    def _make_env(self):
        ta = _textarena()
        if self._env_class is None:
            return ta.make(self.ta_id, **self._env_kwargs)
        from textarena.envs.registration import ENV_REGISTRY

        # What ta.make does, with the game class replaced.
        spec = ENV_REGISTRY[self.ta_id]
        env = self._env_class(**{**spec.kwargs, **self._env_kwargs})
        env.env_id, env.entry_point = self.ta_id, self._env_class
        for wrapper in spec.default_wrappers or []:
            env = wrapper(env)
        return env

    def _make_lazy(self) -> _LazyText | None:
        w = _lazy_wrapper(self.env)
        return _LazyText(self, w) if w is not None else None

    @contextlib.contextmanager
    def _own_random(self):
        saved = random.getstate()
        random.setstate(self._rand_state)
        try:
            yield
        finally:
            self._rand_state = random.getstate()
            random.setstate(saved)

    # -- lifecycle -------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        if seed is None:
            seed = int(np.random.default_rng().integers(2**31))
        # TextArena's observation wrappers keep their history in `full_observations`,
        # set only in __init__: without clearing it, one match's messages would leak
        # into the next match's observations.
        w = self.env
        while w is not None:
            hist = w.__dict__.get("full_observations")  # __dict__: TextArena wrappers forward getattr
            if isinstance(hist, dict):
                hist.clear()
            w = w.__dict__.get("env")
        if type(self.base).__name__ in _RANDOM_FREE:  # the class itself: a subclass may draw
            # No draws from `random` at all: skip the state swap (12 us a call), and do not
            # pass the seed, which TextArena would feed to the global `random.seed`.
            self._random_free = True
            self.env.reset(num_players=2, seed=None)
            self._after_reset()
            return
        self._random_free = False
        self._rand_state = random.Random(seed).getstate()
        with self._own_random():
            # A fresh env per match: TextArena games keep state across reset() (Kuhn
            # Poker shuffles its deck list in place), so reuse would make a seed's deal
            # depend on the matches played before it.
            self.env = self._make_env()
            self.base = _unwrap(self.env)
            self._lazy = self._make_lazy()
            self.env.reset(num_players=2, seed=seed)
            self._after_reset()

    def _after_reset(self) -> None:
        state = self.base.state
        # The arena owns the invalid-move policy: TextArena must never end the
        # game on its own for an invalid move, only report it.
        state.error_allowance = 1 << 30
        original = state.set_invalid_move

        def record_invalid(reason: str, *args, _orig=original, **kwargs):
            self._invalid_reason = str(reason)
            return _orig(reason, *args, **kwargs)

        state.set_invalid_move = record_invalid
        self._texts = ["", ""]
        self._returns = [0.0, 0.0]
        self._done = False
        self.outcome_reason = ""
        self._observe()

    def _observe(self) -> None:
        lazy = self._lazy
        if lazy is not None:
            # What the wrapper's get_observation() does, without building the string.
            pid, obs = lazy.inner()
            if obs is not None:
                lazy.history.setdefault(pid, []).extend(obs)
            self._texts[pid] = _PENDING  # built by text(pid) if anyone reads it
        else:
            pid, text = self.env.get_observation()
            self._texts[pid] = text
        self._current = pid

    def current_player(self) -> int:
        return TERMINAL if self._done else self._current

    def is_terminal(self) -> bool:
        return self._done

    def apply(self, p: int, action: Any) -> str | None:
        self._invalid_reason = None
        if self._random_free:
            self._step(action)
        else:
            with self._own_random():
                self._step(action)
        return self._invalid_reason

    def _step(self, action: str) -> None:
        done, _info = self.env.step(action=action)
        if done:
            self._finish()
        else:
            self._observe()

    def _finish(self) -> None:
        rewards, game_info = self.env.close()
        self._returns = [float(rewards.get(i, 0.0)) for i in range(2)] if rewards else [0.0, 0.0]
        reasons = {str(v.get("reason", "")) for v in (game_info or {}).values() if isinstance(v, dict)}
        self.outcome_reason = "; ".join(sorted(r for r in reasons if r))
        self._done = True
        self._final_views()

    def _final_views(self) -> None:
        """Each player's view of the final position. The move that ends a TextArena game leaves its
        messages (the last mark, the last showdown) queued for the players, and TextArena never asks
        for them: each player's view would stop before the last move. Here every player's queue is
        read through the observation wrappers as TextArena would at that player's next turn."""
        st = getattr(self.base, "state", None)
        queues = getattr(st, "observations", None)
        if not isinstance(queues, dict):
            return
        if self._kind == "KuhnPokerEnv":
            # After the last round TextArena deals one more hand ("Starting round 6 out of 5"): not played.
            gs = st.game_state
            phantom = f"### Starting round {gs.get('current_round')} out of"
            from textarena.core import GAME_ID, ObservationType

            for p, queue in queues.items():
                queues[p] = [m for m in queue if not str(m[1]).startswith((phantom, "Your available actions"))]
                # in the place of the board (the moves offered, or the round's first line again)
                queues[p].append((GAME_ID, f"Game over: {self.outcome_reason}".rstrip(": "),
                                  ObservationType.GAME_BOARD))
        mover = st.current_player_id
        try:
            for p in range(2):
                st.current_player_id = p
                self._observe()
        finally:
            st.current_player_id = mover

    # -- outcome ---------------------------------------------------------------
    def returns(self) -> list[float]:
        return list(self._returns)

    def step_rewards(self) -> list[float]:
        return list(self._returns) if self._done else [0.0, 0.0]

    # -- views -------------------------------------------------------------------
    def text(self, p: int) -> str:
        text = self._texts[p]
        if text is _PENDING:
            text = self._texts[p] = self._lazy.text(p)
        if self._done and text:
            # The final position: no moves are left to offer.
            text = "\n".join(ln for ln in text.split("\n") if not _MOVES_LINE.match(ln)).rstrip()
        return text

    def rules(self, p: int) -> str | None:
        """The game's prompt for player `p` (its rules), which TextArena repeats in every view."""
        for entry in self._history(p):
            if _is_prompt(entry):
                return str(entry[1]).strip() or None
        return None

    def human_view(self, p: int) -> str:
        """The view without the rules (`rules` has them) and, where the arena knows the legal moves
        (TicTacToe, Kuhn Poker: a person's terminal numbers them), without TextArena's line of moves;
        in Kuhn Poker with the pot."""
        text = self.text(p)
        if self._kind in ("TicTacToeEnv", "KuhnPokerEnv"):
            text = "\n".join(ln for ln in text.split("\n") if not _MOVES_LINE.match(ln))
        rules = self.rules(p)
        if rules:
            at = text.find(rules)
            if at >= 0:
                before = text[:at]
                if before.rstrip().endswith("[GAME]"):  # LLMObservationWrapper's sender tag
                    before = before.rstrip()[:-len("[GAME]")]
                text = before + text[at + len(rules):]
        lines = text.rstrip().split("\n")
        while lines and not lines[0].strip():
            lines.pop(0)
        text = "\n".join(lines) or "(no moves yet)"
        if self._kind == "KuhnPokerEnv" and not self._done:
            gs, base = self.base.state.game_state, self.base
            text += (f"\nRound {gs['current_round']} of {base.max_rounds}: your card is "
                     f"{base._rank_to_str(gs['player_cards'][p])}, the pot is {gs['pot']} chips")
        return text

    def _history(self, p: int) -> list:
        """Player `p`'s entries ``(sender, message, type)`` in the observation wrapper's history."""
        w = self.env
        while w is not None:
            hist = w.__dict__.get("full_observations")
            if isinstance(hist, dict):
                return list(hist.get(p) or [])
            w = w.__dict__.get("env")
        return []

    def action_to_text(self, p: int, action: Any) -> str:
        return action if type(action) is str else super().action_to_text(p, action)

    @property
    def lists_legal_moves(self) -> bool:
        return self._kind in ("TicTacToeEnv", "KuhnPokerEnv")

    def legal_actions(self, p: int) -> list | None:
        if self._done or p != self._current:
            return [] if self._kind in ("TicTacToeEnv", "KuhnPokerEnv") else None
        gs = self.base.state.game_state
        if self._kind == "TicTacToeEnv":
            r0, r1, r2 = gs["board"]
            return [c for c, v in zip(_CELLS, (*r0, *r1, *r2)) if v == ""]
        if self._kind == "KuhnPokerEnv":
            tree = gs.get("current_legal_action_tree")
            return [f"[{k}]" for k in tree] if isinstance(tree, dict) else []
        return None

    def sample_action(self, p: int, rng: np.random.Generator) -> Any:
        legal = self.legal_actions(p)
        if legal:
            return legal[int(rng.integers(len(legal)))]
        if self._kind == "SimpleNegotiationEnv":
            gs = self.base.state.game_state
            choice = int(rng.integers(3))
            if choice == 0 and gs.get("current_offer"):
                return "[Accept]"
            if choice == 1:
                return "[Deny]"
            return _random_offer(gs["player_resources"][p], rng) or "[Deny]"
        return None

    def text_to_action(self, p: int, text: str) -> Any:
        return text

    def privileged(self, p: int) -> str | None:
        """The opponent's hidden information: its card (Kuhn) or its values (negotiation)."""
        if self._done:
            return None
        gs = self.base.state.game_state
        o = 1 - p
        if self._kind == "KuhnPokerEnv":
            return f"Opponent's card: {'JQK'[gs['player_cards'][o]]}"
        if self._kind == "SimpleNegotiationEnv":
            vals = gs["player_values"][o]
            return "Opponent's values: " + ", ".join(f"{k} {v}" for k, v in vals.items())
        return None

    def observation_space(self, p: int):
        return FreeText()

    def action_space(self, p: int):
        return FreeText(self.max_action_chars)



# -- Simple Negotiation v2 ------------------------------------------------------------------
_BRACKETED = re.compile(r"\[[^\[\]]*\]")


def _as_textarena_reads(action: str) -> str:
    # TextArena's ActionFormattingWrapper: text without any bracket is played as "[text]".
    return action if "[" in action or "]" in action else f"[{action}]"


def _items(resources: dict[str, int]) -> str:
    return ", ".join(f"{q} {r}" for r, q in resources.items())


class NegotiationCore(TextArenaCore):
    """``arena/SimpleNegotiation-v2``: TextArena's Simple Negotiation with a view and rules for people.

    The game (resources, values, offers, the winner: the larger gain in total value) is
    TextArena's ``SimpleNegotiation-v0``; this core changes what a player sees and closes three
    holes in the rules (see the module docstring's version history).

    View (`text`), built from the game state when asked: the player's current resources with its
    values and their total (and the change since the start), the offer open for it (who offers
    what, its worth by the player's values), every turn played (offers, answers, and the message
    each player wrote: the text of a move outside its brackets), and the turn with the turns left.

    Rules on top of TextArena's, checked before TextArena sees the move, so that a refused move
    changes nothing and `apply` returns the reason:

    * an offer is open for one answer, the other player's next turn; whatever that turn is,
      the offer is settled by it (``[Accept]`` takes it, anything else denies it);
    * ``[Accept]`` and ``[Deny]`` need an offer open for the player; ``[Accept]`` needs the
      resources the offer asks for; an offer must be readable and of resources the player has;
    * the game ends after ``max_turns`` turns (TextArena plays one more).
    """

    def _after_reset(self) -> None:
        #: One entry per turn played: player, the offer it answered, accepted, its new offer, message.
        self._turns: list[dict[str, Any]] = []
        super()._after_reset()

    def _open_offer(self, p: int) -> dict | None:
        offer = self.base.state.game_state.get("current_offer")
        return offer if offer is not None and offer["to_player"] == p else None

    def _value(self, p: int, resources: dict[str, int]) -> int:
        vals = self.base.state.game_state["player_values"][p]
        return sum(q * vals[r] for r, q in resources.items())

    def _refusal(self, p: int, action: str) -> str | None:
        base = self.base
        gs = base.state.game_state
        move = _as_textarena_reads(action)
        mine = gs["player_resources"][p]
        offer = self._open_offer(p)
        if base.accept_pattern.search(move):
            if offer is None:
                return ("there is no offer for you to accept: make one with [Offer: ... -> ...] "
                        "or write a message")
            if not base._check_if_sufficient_resources(offer["requested_resources"], mine):
                return (f"you cannot accept: the offer asks for {_items(offer['requested_resources'])} and you have "
                        f"{_items({r: mine.get(r, 0) for r in offer['requested_resources']})}")
        elif base.deny_pattern.search(move) and offer is None:
            return "there is no offer for you to deny: make one with [Offer: ... -> ...] or write a message"
        found = base.offer_pattern.search(move)
        if found:
            parsed = base._parse_offer(found.group(1).strip())
            if not parsed:
                return (f"could not read the offer {found.group(0)!r}: write it as [Offer: 2 Wheat, 1 Ore -> 3 Brick] "
                        f"with resources among {', '.join(base.resource_names)}")
            if not base._check_if_sufficient_resources(parsed["offered_resources"], mine):
                return (f"you offer {_items(parsed['offered_resources'])} and have "
                        f"{_items({r: mine.get(r, 0) for r in parsed['offered_resources']})}")
        return None

    def apply(self, p: int, action: Any) -> str | None:
        why = self._refusal(p, action)
        if why is not None:
            return why
        return super().apply(p, action)

    def _step(self, action: str) -> None:
        st = self.base.state
        gs = st.game_state
        p = self._current
        answered = self._open_offer(p)
        done, _info = self.env.step(action=action)
        if self._invalid_reason is None:  # the turn was played
            accepted = answered is not None and bool(self.base.accept_pattern.search(_as_textarena_reads(action)))
            if answered is not None and gs["current_offer"] is answered:
                gs["current_offer"] = None  # not accepted: denied, and closed (TextArena keeps it open)
            new = gs["current_offer"]
            self._turns.append({
                "player": p, "answered": answered, "accepted": accepted,
                "offer": new if new is not None and new["from_player"] == p else None,
                "message": self._message(action),
            })
            if not done and st.turn >= st.max_turns:
                self.base._determine_winner()
                done = True
        if done:
            self._finish()
        else:
            self._observe()

    def _message(self, action: str) -> str:
        """What the player wrote besides its move: the text outside brackets."""
        if "[" not in action and "]" not in action:
            move = f"[{action}]"
            b = self.base
            if b.accept_pattern.search(move) or b.deny_pattern.search(move) or b.offer_pattern.search(move):
                return ""  # a bare "accept" is the move itself
        return " ".join(_BRACKETED.sub(" ", action).split())

    def sample_action(self, p: int, rng: np.random.Generator) -> Any:
        gs = self.base.state.game_state
        mine = gs["player_resources"][p]
        offer = self._open_offer(p)
        if offer is not None:
            choice = int(rng.integers(3))
            if choice == 0 and self.base._check_if_sufficient_resources(offer["requested_resources"], mine):
                return "[Accept]"
            if choice < 2:
                return "[Deny]"
        return _random_offer(mine, rng) or "I have nothing to offer."

    def rules(self, p: int) -> str | None:
        return None  # the view states this core's own rules every turn (TextArena's prompt is not them)

    def text(self, p: int) -> str:
        if getattr(self.base, "state", None) is None:
            return ""
        st = self.base.state
        gs = st.game_state
        o = 1 - p
        res, vals, start = gs["player_resources"][p], gs["player_values"][p], gs["inventory_value"][p]["initial"]
        lines = [
            f"You are Player {p} in the Negotiation Game, against Player {o}.",
            "Trade so that the total value of your resources grows: the player whose total grows more wins.",
        ]
        if self._done:
            lines.append(f"The game is over after {st.turn} turns. {self.outcome_reason}")
        else:
            left = st.max_turns - st.turn
            whose = "your turn" if self._current == p else f"Player {o}'s turn"
            lines.append(f"Turn {st.turn + 1} of {st.max_turns}, {whose}: {left} turn{'s' if left != 1 else ''} left, "
                         "this one included.")
            if left == 1:
                lines.append("This is the last turn: an offer made now cannot be answered.")
        lines += ["", "Your resources now (quantity x your value each = value):"]
        lines += [f"  {r:<6} {res[r]:>3} x {vals[r]:>2} = {res[r] * vals[r]:>4}" for r in self.base.resource_names]
        total = self._value(p, res)
        lines.append(f"Total value: {total} (at the start {start}, change {total - start:+d})")
        lines.append("")
        offer = gs["current_offer"]
        if offer is None:
            lines.append("No offer is open.")
        elif offer["to_player"] == p:
            get, give = offer["offered_resources"], offer["requested_resources"]
            worth = self._value(p, get) - self._value(p, give)
            lines.append(f"Offer for you from Player {o}: you get {_items(get)}, you give {_items(give)} "
                         f"({worth:+d} by your values).")
            if not self.base._check_if_sufficient_resources(give, res):
                lines.append("You do not have the resources to accept it.")
            lines.append("Answer it on this turn: [Accept] takes it; anything else denies it.")
        else:
            lines.append(f"Your offer to Player {o} waits for an answer: you give "
                         f"{_items(offer['offered_resources'])}, you get {_items(offer['requested_resources'])}.")
        if self._turns:
            lines += ["", "Turns so far:"]
            for i, t in enumerate(self._turns, 1):
                who = "You" if t["player"] == p else f"Player {t['player']}"
                did = []
                if t["answered"] is not None:
                    a = t["answered"]
                    verb = "accepted" if t["accepted"] else "denied"
                    did.append(f"{verb} the offer of {_items(a['offered_resources'])} for "
                                f"{_items(a['requested_resources'])}")
                if t["offer"] is not None:
                    did.append(f"offered {_items(t['offer']['offered_resources'])} for "
                                f"{_items(t['offer']['requested_resources'])}")
                lines.append(f"  {i:>2}. {who}: {'; '.join(did) or 'made no offer'}")
                if t["message"]:
                    lines.append(f'      {who} wrote: "{t["message"]}"')
        if not self._done:
            lines += [
                "",
                f"Moves (anything you write outside the brackets is sent to Player {o} as a message):",
                f"  [Offer: 3 Sheep, 2 Ore -> 5 Brick]  give resources of yours for resources of Player {o}",
                "  [Accept] or [Deny]                  answer the offer made to you (only when there is one)",
            ]
        return "\n".join(lines)
