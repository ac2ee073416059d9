"""TextArena games as arena games: any two-player TextArena id.

Spec
----
* Ids: ``textarena/<TextArena id>`` (for example ``textarena/TicTacToe-v0``,
  ``textarena/KuhnPoker-v0-short-train``) and the curated ids of the self-play
  papers: ``arena/TicTacToe-v0``, ``arena/KuhnPoker-v1`` (ante 1, 5 rounds, as
  SPIRAL) and ``arena/SimpleNegotiation-v1`` (10 turns, as SPIRAL).
* Players: two, ``player_0`` and ``player_1`` (TextArena's ids 0 and 1).
* Actions: free text (``FreeText``), validated by the game itself
  (``"[4]"``, ``"[bet]"``, ``"[Offer: 1 Wheat -> 1 Ore]"``). Where the arena
  knows a game's legal set (TicTacToe, Kuhn Poker) ``legal_actions`` lists it;
  Simple Negotiation offers ``sample_action`` for random play.
* Observation: the text TextArena builds for the player (its wrappers decide
  how much history is shown).
* Rewards: TextArena's final rewards from ``close()`` (0.7 semantics), at the end.
* Invalid moves: reported to the caller with TextArena's reason (the same player
  moves again); the arena's invalid-move policy decides when the offender loses.
* Seeding: TextArena seeds and draws from the global ``random`` module. Every
  call into TextArena runs with this core's own saved ``random`` state swapped
  in, and the caller's global state is restored afterwards, so a seed gives the
  same match every time and the rest of the process is unaffected.
"""

from __future__ import annotations

import contextlib
import random
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


def _textarena():
    # Importing textarena.envs pulls only the registry; game modules load lazily by id.
    import textarena as ta

    return ta


def _unwrap(env):
    while hasattr(env, "env"):
        env = env.env
    return env


class TextArenaCore(GameCore):
    source = "textarena"
    action_kind = "text"

    def __init__(self, env_id: str, game_id: str | None = None, **env_kwargs: Any):
        ta = _textarena()
        from textarena.envs.registration import ENV_REGISTRY

        if env_id not in ENV_REGISTRY:
            raise ValueError(f"unknown TextArena id {env_id!r}")
        self.ta_id = env_id
        self.game_id = game_id or f"textarena/{env_id}"
        self.settings = {"env_id": env_id, **env_kwargs}
        self._env_kwargs = dict(env_kwargs)
        self.engine = {"textarena": _pkg_version("textarena")}
        self.players = ["player_0", "player_1"]
        self._rand_state = random.Random(0).getstate()
        with self._own_random():
            self.env = ta.make(env_id, **env_kwargs)
        self.base = _unwrap(self.env)
        self._kind = type(self.base).__name__
        self._texts = ["", ""]
        self._current = TERMINAL
        self._returns = [0.0, 0.0]
        self._done = True
        self._invalid_reason: str | None = None
        self._random_free = False
        self.outcome_reason = ""

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
        if self._kind in _RANDOM_FREE:
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
            self.env = _textarena().make(self.ta_id, **self._env_kwargs)
            self.base = _unwrap(self.env)
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

    # -- outcome ---------------------------------------------------------------
    def returns(self) -> list[float]:
        return list(self._returns)

    def step_rewards(self) -> list[float]:
        return list(self._returns) if self._done else [0.0, 0.0]

    # -- views -------------------------------------------------------------------
    def text(self, p: int) -> str:
        return self._texts[p]

    def legal_actions(self, p: int) -> list | None:
        if self._done or p != self._current:
            return [] if self._kind in ("TicTacToeEnv", "KuhnPokerEnv") else None
        gs = self.base.state.game_state
        if self._kind == "TicTacToeEnv":
            board = gs["board"]
            return [_CELLS[r * 3 + c] for r in range(3) for c in range(3) if board[r][c] == ""]
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
            mine = gs["player_resources"][p]
            have = [r for r in _RESOURCES if mine.get(r, 0) > 0]
            if not have:
                return "[Deny]"
            give = have[int(rng.integers(len(have)))]
            want = _RESOURCES[int(rng.integers(len(_RESOURCES)))]
            q1 = int(rng.integers(1, min(mine[give], 5) + 1))
            q2 = int(rng.integers(1, 6))
            return f"[Offer: {q1} {give} -> {q2} {want}]"
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

