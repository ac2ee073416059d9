"""OpenSpiel games as arena games: any pyspiel game by name.

Spec
----
* Ids: ``openspiel/<pyspiel short name>-v0`` (for example ``openspiel/connect_four-v0``);
  game parameters go in ``params`` (``make("openspiel/kuhn_poker-v0", params={"players": 3})``).
  Any name in ``pyspiel.registered_names()`` works through the id pattern without
  registration code.
* Players: the game's ``num_players()``, named ``player_0`` ... Chance nodes are
  resolved inside the core from its own seeded ``np.random.Generator``.
* Actions: ``Discrete(num_distinct_actions)``; moves are applied with OpenSpiel's
  legality check (plain ``apply_action`` accepts illegal moves).
* Observation: text view (``observation_string``, or ``information_state_string``
  for imperfect-information games) and a dict ``{"observation": tensor, "action_mask": int8}``
  (the information-state tensor where the text is the information state).
  For people (`human_view`): Kuhn and Leduc poker in words (`poker_view`: the cards by name,
  the betting, the pot, the showdown); other games show the text.
* Rewards: OpenSpiel's per-step rewards; returns at the end.
* Versions: v0 is the engine's game as-is.

Simultaneous-move OpenSpiel games are not supported yet (sequential games only).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyspiel
from gymnasium import spaces

from arena.envs.core import SIMULTANEOUS, TERMINAL, GameCore

_GAME_CACHE: dict[tuple[str, tuple], Any] = {}


def load_game(name: str, params: dict | None = None):
    key = (name, tuple(sorted((params or {}).items())))
    game = _GAME_CACHE.get(key)
    if game is None:
        game = pyspiel.load_game(name, dict(params or {}))
        _GAME_CACHE[key] = game
    return game


#: Games whose board plays the same mirrored left to right: their moves are the board's columns, or
#: its cells row by row.
_MIRRORS = {"connect_four": "columns", "tic_tac_toe": "cells"}


class OpenSpielCore(GameCore):
    source = "openspiel"
    action_kind = "discrete"

    def __init__(self, game: str, params: dict | None = None, game_id: str | None = None):
        if game not in pyspiel.registered_names():
            raise ValueError(f"unknown OpenSpiel game {game!r}; see pyspiel.registered_names()")
        self.game = load_game(game, params)
        gtype = self.game.get_type()
        if gtype.dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS:
            raise NotImplementedError(
                f"OpenSpiel game {game!r} is a simultaneous-move game; only sequential games are supported"
            )
        self.game_id = game_id or f"openspiel/{game}-v0"
        self.settings = {"game": game, "params": dict(params or {})}
        self.engine = {"open_spiel": _spiel_version()}
        n = self.game.num_players()
        self.players = [f"player_{i}" for i in range(n)]
        self.num_actions = self.game.num_distinct_actions()
        self.perfect_information = gtype.information == pyspiel.GameType.Information.PERFECT_INFORMATION
        # Imperfect-information games: the information state string carries the
        # player's private history (Kuhn's observation string is only "111").
        if self.perfect_information or not gtype.provides_information_state_string:
            self._text_fn = "observation_string"
        else:
            self._text_fn = "information_state_string"
        # The tensor follows the text: imperfect-information games show the information-state tensor
        # (perfect recall: the betting history too, which poker's observation tensor drops).
        self._use_info_tensor = gtype.provides_information_state_tensor
        self._use_obs_tensor = gtype.provides_observation_tensor and not (
            self._text_fn == "information_state_string" and self._use_info_tensor)
        if self._use_obs_tensor:
            shape = tuple(self.game.observation_tensor_shape())
        elif self._use_info_tensor:
            shape = tuple(self.game.information_state_tensor_shape())
        else:
            shape = None
        self._obs_shape = shape
        #: Length of `all_observations` (every player's tensor), the privileged critic's input in games
        #: of hidden information; 0 for perfect-information games.
        self.privileged_dim = 0 if self.perfect_information or shape is None else n * int(np.prod(shape))
        self._has_chance = gtype.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC
        # Rated by the returns where they are more than a win, a draw or a loss: a general-sum game, or
        # utilities beyond +-1 (poker's chips, backgammon's gammons); win / draw / loss otherwise.
        general = gtype.utility == pyspiel.GameType.Utility.GENERAL_SUM
        self.scoring = "payoff" if general or self.game.max_utility() > 1 or self.game.min_utility() < -1 else "win"
        # Rewards only at the end (tic-tac-toe, connect four, poker): no per-move sum to keep, and
        # the last step's rewards are the state's own.
        self._terminal_rewards = gtype.reward_model == pyspiel.GameType.RewardModel.TERMINAL
        # Sequential games name the player to move as the core does (TERMINAL at the end; chance
        # nodes never show: they are resolved inside), so the engine may answer for the core.
        self._engine_players = gtype.dynamics == pyspiel.GameType.Dynamics.SEQUENTIAL
        self.state = None
        #: `apply` without its Python call, where nothing else happens after a move (no chance node to
        #: resolve, no per-move rewards to add up, no subclass's own `apply`): bound to the state's
        #: `apply_action_with_legality_check` at each reset, it returns nothing and raises where `apply`
        #: returns the reason (the match loop then asks `apply`, which gives it: a refused move leaves the
        #: state as it was). None elsewhere.
        self.apply_fast = None
        self._apply_plain = (not self._has_chance and self._terminal_rewards
                             and type(self).apply is OpenSpielCore.apply)
        self._rng = None
        self._seed = None
        self._returns = [0.0] * n
        self._last_rewards = [0.0] * n

    # -- lifecycle -------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        self._seed = seed
        self._rng = None  # built at the first chance node
        state = self.state = self.game.new_initial_state()
        # The match loop calls these every move: bound to the new state's own methods (same
        # answers as the methods below), they cost no Python call.
        self.legal_actions = state.legal_actions
        self.text = getattr(state, self._text_fn)
        if self._engine_players:
            self.current_player = state.current_player
        if self._apply_plain:
            self.apply_fast = state.apply_action_with_legality_check
        if not self._terminal_rewards:  # (with rewards only at the end, apply never adds to them: the zeros stay)
            self._returns = [0.0] * len(self.players)
            self._last_rewards = [0.0] * len(self.players)
        if self._has_chance:
            self._resolve_chance()

    def _resolve_chance(self) -> None:
        state = self.state
        while state.is_chance_node():
            outcomes = state.chance_outcomes()
            probs = np.fromiter((p for _, p in outcomes), dtype=np.float64, count=len(outcomes))
            if self._rng is None:
                self._rng = np.random.default_rng(self._seed)
            i = int(self._rng.choice(len(outcomes), p=probs / probs.sum()))
            state.apply_action(outcomes[i][0])

    def current_player(self) -> int:
        p = self.state.current_player()
        if p < 0 and p != SIMULTANEOUS:
            return TERMINAL
        return p

    def is_terminal(self) -> bool:
        return self.state.is_terminal()

    def legal_actions(self, p: int) -> list:
        return self.state.legal_actions(p)

    def apply(self, p: int, action: Any) -> str | None:
        state = self.state
        try:
            state.apply_action_with_legality_check(action)
        except pyspiel.SpielError as e:  # validate() normally catches this first
            return f"OpenSpiel refused action {action}: {e}"
        if self._has_chance:
            self._resolve_chance()
        if not self._terminal_rewards:
            rewards = state.rewards()
            self._last_rewards = rewards
            ret = self._returns
            for i, r in enumerate(rewards):
                ret[i] += r
        return None

    # -- outcome -------------------------------------------------------------------
    def returns(self) -> list[float]:
        if self.state is not None and self.state.is_terminal():
            return list(self.state.returns())
        return list(self._returns)

    def step_rewards(self) -> list[float]:
        if self._terminal_rewards and self.state is not None:
            return list(self.state.rewards())  # zeros until the end, then the returns
        return list(self._last_rewards)

    # -- views -------------------------------------------------------------------
    def text(self, p: int) -> str:
        if self._text_fn == "observation_string":
            return self.state.observation_string(p)
        return self.state.information_state_string(p)

    def observation(self, p: int) -> dict:
        return self.observation_of(self.state, p)

    def mirror(self) -> np.ndarray | None:
        kind, shape = _MIRRORS.get(self.settings["game"]), self._obs_shape
        if kind is None or shape is None or len(shape) != 3:
            return None
        h, w = shape[1], shape[2]
        cols = np.arange(w)[::-1]
        perm = cols if kind == "columns" else (np.arange(h)[:, None] * w + cols[None, :]).ravel()
        return perm.copy() if len(perm) == self.num_actions else None

    def observation_of(self, state, p: int) -> dict:
        """`observation` of any state of this game (a search's), as player `p` sees it."""
        if self._use_obs_tensor:
            obs = np.asarray(state.observation_tensor(p), dtype=np.float32).reshape(self._obs_shape)
        elif self._use_info_tensor:
            obs = np.asarray(state.information_state_tensor(p), dtype=np.float32).reshape(self._obs_shape)
        else:
            obs = getattr(state, self._text_fn)(p)
        return {"observation": obs, "action_mask": self._mask_of(state, p)}

    def all_observations(self) -> np.ndarray:
        """Every player's observation tensor, concatenated (what a privileged critic may read)."""
        fn = self.state.observation_tensor if self._use_obs_tensor else self.state.information_state_tensor
        return np.concatenate([np.asarray(fn(p), dtype=np.float32) for p in range(len(self.players))])

    def action_mask(self, p: int) -> np.ndarray:
        return self._mask_of(self.state, p)

    def _mask_of(self, state, p: int) -> np.ndarray:
        mask = np.zeros(self.num_actions, dtype=np.int8)
        if not state.is_terminal() and state.current_player() == p:
            mask[state.legal_actions(p)] = 1
        return mask

    def action_to_text(self, p: int, action: Any) -> str:
        return self.state.action_to_string(p, int(action))

    def human_view(self, p: int) -> str:
        """Kuhn and Leduc poker in words (`poker_view`): the engine's view (``"1pb"``) is kept for agents
        and replays; other games show their own text."""
        name = self.settings["game"]
        if name in ("kuhn_poker", "leduc_poker") and self.state is not None:
            try:
                return poker_view(name, self.state, p, self.game.get_parameters())
            except Exception:  # an unforeseen variant: the engine's own view
                pass
        return self.text(p)

    def information_state(self, p: int) -> str:
        return self.state.information_state_string(p)

    def engine_state(self):
        if not self.perfect_information:
            raise NotImplementedError(
                f"{self.game_id} has imperfect information: search agents may not read the true state"
            )
        return self.state.clone()

    def privileged(self, p: int) -> str | None:
        # The full state (both hands in poker) for a privileged critic.
        return str(self.state)

    def observation_space(self, p: int):
        mask = spaces.Box(0, 1, shape=(self.num_actions,), dtype=np.int8)
        if self._obs_shape is None:
            from arena.envs.spaces import FreeText

            return spaces.Dict({"observation": FreeText(), "action_mask": mask})
        obs = spaces.Box(-np.inf, np.inf, shape=self._obs_shape, dtype=np.float32)
        return spaces.Dict({"observation": obs, "action_mask": mask})

    def action_space(self, p: int):
        return spaces.Discrete(self.num_actions)

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        gtype = self.game.get_type()
        d["info"] = "perfect" if self.perfect_information else "imperfect"
        d["chance"] = gtype.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC
        return d


# -- poker in words ------------------------------------------------------------------------
_RANKS = "JQKA"
_SUITS = "♠♥♦♣"


def _player(q: int, p: int) -> str:
    return "you" if q == p else f"player {q}"


def _card(name: str, card: int, params: dict) -> str:
    if name == "kuhn_poker":
        return _RANKS[card] if params.get("players", 2) + 1 <= len(_RANKS) else f"card {card}"
    suits = int(params.get("suits", 2) or 2)  # Leduc: card // suits is the rank, card % suits the suit
    rank, suit = divmod(card, suits)
    return (_RANKS[rank] if rank < len(_RANKS) else str(rank)) + (_SUITS[suit] if suit < len(_SUITS) else "")


#: Leduc's bet (and raise) in each betting round: 2 chips in the first, 4 in the second.
LEDUC_BET_SIZES = (2, 4)


def betting_in_words(name: str, rounds: list[list[Any]], players: int = 2) -> tuple[list[dict], list[int], set[int]]:
    """A Kuhn or Leduc hand's betting (`rounds`: each betting round's action ids, in order) as
    ``(moves, stake, folded)``: each move ``{"player", "round", "text"}`` in words (``"checked"``,
    ``"bet 1"``, ``"called"``, ``"folded"``; Leduc's ``"bet 2"``, ``"raised 4"``), each player's
    chips in the pot (the antes of 1 included) and the players who folded.

    Kuhn (0: pass, 1: bet): one round, the players in turn from player 0; a pass is a fold once a
    bet is to be answered, a bet is then a call. Leduc (0: fold, 1: call, 2: raise): each round
    starts with player 0 and goes round the players still in; a call with nothing to call is a
    check, a raise with nothing bet in the round a bet. Any other action is kept as its text."""
    leduc = name == "leduc_poker"
    stake, folded, moves = [1] * players, set(), []
    for r, actions in enumerate(rounds):
        size = LEDUC_BET_SIZES[min(r, len(LEDUC_BET_SIZES) - 1)]
        q, bet_in_round = 0, False
        for a in actions:
            while q in folded:
                q = (q + 1) % players
            top = max(stake)
            if not leduc and a == 1:
                word = "called" if bet_in_round else "bet 1"
                stake[q] += 1
                bet_in_round = True
            elif not leduc and a == 0:
                word = "folded" if bet_in_round else "checked"
                if bet_in_round:
                    folded.add(q)
            elif leduc and a == 0:
                word = "folded"
                folded.add(q)
            elif leduc and a == 1:
                word = "called" if stake[q] < top else "checked"
                stake[q] = top
            elif leduc and a == 2:
                word = f"{'raised' if bet_in_round else 'bet'} {size}"
                stake[q] = top + size
                bet_in_round = True
            else:
                word = str(a)
            moves.append({"player": q, "round": r + 1, "text": word})
            q = (q + 1) % players
    return moves, stake, folded


def poker_view(name: str, state, p: int, params: dict) -> str:
    """What player `p` knows of a Kuhn or Leduc poker hand, in words: its card (and Leduc's public
    card), each betting round as moves ("player 0 checked, you bet 1"), the pot and, at the end, the
    cards shown down and what `p` won or lost. Read off the engine's history (`betting_in_words`),
    showing the other players' cards only where a showdown reveals them."""
    n = state.num_players()
    leduc = name == "leduc_poker"
    history = [(pa.player, pa.action) for pa in state.full_history()]
    deals = [a for q, a in history if q < 0]
    private = deals[:n]
    public = deals[n] if leduc and len(deals) > n else None
    rounds: list[list[int]] = [[]]
    chance_seen = 0
    for q, a in history:
        if q < 0:
            chance_seen += 1
            if chance_seen > n:  # Leduc's public card opens round 2
                rounds.append([])
            continue
        rounds[-1].append(a)
    moves, stake, folded = betting_in_words(name, rounds, n)
    title = "Kuhn poker" if not leduc else "Leduc poker"
    lines = [f"{title}: you are player {p}"]
    lines.append(f"Your card: {_card(name, private[p], params)}" if p < len(private) else "Your card: not dealt yet")
    if leduc:
        lines.append(f"Public card: {_card(name, public, params)}" if public is not None else
                     "Public card: none (the hand ended before it was dealt)" if state.is_terminal() else
                     "Public card: not dealt yet (it comes after the first betting round)")
    for i in range(1, len(rounds) + 1):
        said = [f"{_player(m['player'], p)} {m['text']}" for m in moves if m["round"] == i]
        label = "Betting" if not leduc else f"Round {i} betting"
        lines.append(f"{label}: {', '.join(said) if said else 'no moves yet'}")
    lines.append(f"Pot: {sum(stake)} chips (you put in {stake[p]})")
    if state.is_terminal():
        left = [i for i in range(n) if i not in folded]
        if len(left) > 1:
            shown = ", ".join(f"{_player(i, p)} {'have' if i == p else 'has'} {_card(name, private[i], params)}"
                              for i in left)
            lines.append(f"Showdown: {shown}")
        elif left:
            lines.append(f"No showdown: everyone else folded to {_player(left[0], p)}")
        won = state.returns()[p]
        lines.append(f"You {'win' if won > 0 else 'lose' if won < 0 else 'get back'} "
                     f"{abs(won):g} chip{'s' if abs(won) != 1 else ''}" + (" (a tie)" if won == 0 else ""))
    return "\n".join(lines)


def _spiel_version() -> str:
    from importlib.metadata import version

    try:
        return version("open_spiel")
    except Exception:  # pragma: no cover
        return "unknown"
