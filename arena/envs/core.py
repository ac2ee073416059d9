"""`GameCore`: the engine-level view of a game that the one match loop drives.

Every game the arena plays is seen through a core: the OpenSpiel and TextArena
adapters implement it directly, and `arena.envs.farama` builds one over any
plain PettingZoo (AEC or parallel) or Gymnasium env, so plug-in games need
nothing of the arena. PettingZoo's AEC API is a facade over a core
(`arena.envs.aec.GameAECEnv`), which is how the built-in games pass
`api_test` and `seed_test`.

The core is deliberately small and flat: a plain move costs the match loop one
`current_player()`, one `legal_actions()` (shown to the agent and checked
against, so `validate()` runs only for moves outside that list), one `apply()`
and, when the replay keeps text, one `text()`. A core may answer those from the
engine directly: `OpenSpielCore` binds them to the state's own methods at each
reset, and `TextArenaCore` builds a view's text only when it is read.

Moves come in four kinds (`ACTION_KINDS`): ``discrete``, ``text``, ``continuous`` and
``structured``. Every kind but text has an action model (`action_model`,
`arena.envs.actions.ActionModel`): a discrete move is one categorical part, a continuous one a box,
a structured one (StarCraft's: an action type, units chosen by pointer, a target unit or a map
cell) a dict of parts, each masked by the observation and by the parts chosen before it. The core
is also the moves' codec: `encode_action` is the JSON form a replay stores, which `validate`
reads back.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from arena.envs.actions import ActionModel, json_form
from arena.envs.actions import short_repr as _short

# Same numbering as OpenSpiel's special player ids.
TERMINAL = -4
SIMULTANEOUS = -2

ACTION_KINDS = ("discrete", "text", "continuous", "structured")

#: Longest free-text action accepted before it counts as an invalid move.
MAX_ACTION_CHARS = 4096


def int_setting(name: str, value: Any, lo: int, hi: int, example: int | None = None) -> int:
    """A game setting that must be a whole number in ``[lo, hi]`` (bools refused), or a `ValueError`
    that says what to give."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        hint = f" (e.g. {name}={example})" if example is not None else ""
        raise ValueError(f"{name} must be a whole number in [{lo}, {hi}]{hint}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class InvalidMovePolicy:
    """What an invalid move costs: the arena's one rule, played by the match engine
    (`arena.match.loop`) and by the PettingZoo facades an outside trainer steps (`arena.envs.aec`,
    `arena.envs.parallel`, whose ``invalid_move_limit`` is the `allowance`).

    An invalid move (illegal, malformed, refused by the game) is answered by asking the same player
    again, up to `allowance` times for that move; the next failure forfeits the match
    (`forfeits`), which ends with `forfeit_returns`."""

    #: Retries allowed for one move after an invalid attempt (TextArena's default is 1).
    allowance: int = 1
    #: Final return of the player who forfeits, and of every other player.
    loss: float = -1.0
    win: float = 1.0

    def __post_init__(self):
        if self.allowance < 0:
            raise ValueError(f"invalid-move allowance must be >= 0, got {self.allowance}")

    def forfeits(self, failures: int) -> bool:
        """Whether a player whose move has failed `failures` times (this failure counted) forfeits."""
        return failures > self.allowance

    def forfeit_returns(self, offender: int, earned: Sequence[float]) -> list[float]:
        """Final returns when `offender` forfeits, given what every player had `earned` so far: `loss`
        for it and `win` for every other player; in a one-player game (no one to win) the episode
        ends with what it earned."""
        if len(earned) == 1:
            return [float(earned[0])]
        out = [self.win] * len(earned)
        out[offender] = self.loss
        return out


class GameCore:
    """Base class for game cores: the contract between a game and everything that plays, trains
    on, replays or shows it.

    Every core sets `players`, `engine` and `settings` (in `__init__` or on the class) and
    implements `reset`, `current_player`, `apply` (or `apply_joint` for simultaneous moves),
    `returns`, `text`, and `observation_space` / `action_space` for neural players (and
    `step_rewards` where it is stepped through PettingZoo: the facades' rewards are its step
    rewards, zeros by default). Everything else is declared here with its default, which is what a
    core that does not set it gets: the arena reads each one as a plain attribute or call, so this
    class is the whole list (after OpenSpiel's ``GameType``)."""

    # -- what the game is ------------------------------------------------------------------
    #: The registered id (``ns/Name-vN``), written into replays and ratings.
    game_id: str = "?"
    #: Seat names, in seat order; their number is the number of players.
    players: list[str]
    #: How moves are given (`ACTION_KINDS`): the match loop's legality check, the agents' choice of
    #: head and the replays' action codec follow it.
    action_kind: str = "discrete"
    #: Where the game comes from (``"openspiel"``, ``"textarena"``, ``"pettingzoo"``, ...): agents
    #: that read an engine's own state (search, NashConv) check it before they do.
    source: str = "?"
    #: Engine package and version, written into replay headers.
    engine: dict[str, str]
    #: Game-specific settings (kwargs) that, with the seed, fully determine the game.
    settings: dict[str, Any]
    #: Longest free-text action accepted before it counts as an invalid move.
    max_action_chars: int = MAX_ACTION_CHARS
    #: How a match's result is rated (`arena.envs.registry.game_scoring`): ``"win"`` (win / draw / loss,
    #: board games) or ``"payoff"`` (the returns themselves: poker, negotiation, general-sum games);
    #: None: the game does not say (the registration or the default decides).
    scoring: str | None = None
    #: Whether every player sees the whole state (OpenSpiel's ``GameType.information``): the search
    #: agents (``mcts``, ``tactics``, ``policy_mcts``, the tactics probe) play only such games; CFR and
    #: NashConv (``eval.nash_conv``, the exploitability table) only the others. False: not declared,
    #: and search agents refuse the game.
    perfect_information: bool = False
    #: Whether ``arena replay verify`` and the viewers can play a replay's moves again through this core
    #: (`arena.match.verify`). False: the rules live in a process of the game's own (StarCraft II):
    #: `check_replay` checks what it can, `not_resimulated` says why, `watch_hint` how to watch it.
    resimulates: bool = True
    #: Length of `all_observations` (every player's tensor), the extra input of a privileged critic in
    #: a game of hidden information (`arena.inference.policy_nets.privileged_vector`); 0: none.
    privileged_dim: int = 0

    # -- what the last step did ------------------------------------------------------------
    #: Why the match ended as it did, in the game's words (TextArena's reason, StarCraft's winner): the
    #: ``reason`` of a `MatchResult` and replay that ended by the rules. "": the game gives none.
    outcome_reason: str = ""
    #: The last step ended the episode by truncation (a time limit, a simulator failure), not by the
    #: rules: PPO's rollouts bootstrap the value from where it was cut (`arena.trainers.policy.segments`).
    truncated: bool = False
    #: The last step's ``info`` (Gymnasium's, `arena.envs.farama.GymCore`); an ``"error"`` key says the
    #: simulator failed (counted by PPO's rollouts). Empty: nothing to say.
    info: Mapping[str, Any] = MappingProxyType({})

    # -- how the arena drives it -----------------------------------------------------------
    #: The env the core drives, where it drives one (any Farama env, TextArena's, the Skirmish env):
    #: the video writer and the web replay draw its frames (``render()``, `arena.ui.video`) and its
    #: ``skeleton()`` (`arena.ui.web.replays`). None: the core drives no env.
    env: Any = None
    #: `apply` as one engine call for the player to move, ``apply_fast(action)``: it returns nothing and
    #: raises where `apply` would return a reason, and the match loop then asks `apply` for the reason
    #: (`OpenSpielCore` binds it to the state's own at each reset). None: the loop calls `apply`.
    apply_fast: Callable[[Any], Any] | None = None

    @property
    def lists_legal_moves(self) -> bool:
        """Whether `legal_actions` lists the moves (not for free text, continuous or structured actions)."""
        return self.action_kind == "discrete"

    # -- lifecycle -----------------------------------------------------------------
    def seat_agents(self, agents: list[Any]) -> None:
        """The match loop's word on who sits where (the agent objects, in seat order), before `reset`:
        for a game that must know before it starts (StarCraft II's own AI takes the seat of an agent
        with ``sc2_bot``). Nothing by default."""

    def reset(self, seed: int | None = None) -> None:
        """Start a new match; the same `seed` gives the same match, move for move."""
        raise NotImplementedError

    def current_player(self) -> int:
        """Index of the player to move, `SIMULTANEOUS`, or `TERMINAL`."""
        raise NotImplementedError

    def acting_players(self) -> list[int]:
        """Players that act now; for simultaneous-move games all that are still in."""
        p = self.current_player()
        return [] if p == TERMINAL else [p]

    def is_terminal(self) -> bool:
        """Whether the match is over."""
        return self.current_player() == TERMINAL

    # -- moves -----------------------------------------------------------------
    def legal_actions(self, p: int) -> list | None:
        """Legal actions of player `p`, or None where the set is not enumerable (free text, continuous)."""
        return None

    def validate(self, p: int, action: Any) -> tuple[Any, str | None]:
        """Normalise `action` or say why it is not a legal move. Never raises."""
        cur = self.current_player()
        if cur != p and cur != SIMULTANEOUS:
            return None, "the game is over" if cur == TERMINAL else f"it is not {self.players[p]}'s turn"
        refused = getattr(action, "invalid_reason", None)  # e.g. an LLM output with no readable move
        if refused:
            return None, str(refused)
        kind = self.action_kind
        if kind == "discrete":
            if isinstance(action, str):
                try:
                    action = self.text_to_action(p, action)
                except (ValueError, KeyError) as e:
                    return None, f"could not read {_short(action)!r} as a move: {e}"
            if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
                return None, f"expected an integer action, got {type(action).__name__} {_short(action)!r}"
            action = int(action)
            legal = self.legal_actions(p)
            if legal is not None and action not in legal:
                return None, f"action {action} is not legal here (legal: {_short(legal)})"
            return action, None
        if kind == "text":
            if not isinstance(action, str):
                return None, f"expected a text action, got {type(action).__name__} {_short(action)!r}"
            if len(action) > self.max_action_chars:
                return None, f"action text is {len(action)} characters, longer than the limit of {self.max_action_chars}"
            legal = self.legal_actions(p)
            if legal is not None and action not in legal:
                # Text games validate content themselves (apply() reports); a known
                # legal list is only used to normalise whitespace.
                stripped = action.strip()
                if stripped in legal:
                    action = stripped
            return action, None
        if kind == "structured":
            return self.action_model(p).check(action, self.observation(p))
        # continuous
        space = self.action_space(p)
        try:
            arr = np.asarray(action, dtype=space.dtype if space.dtype is not None else np.float32)
        except (TypeError, ValueError) as e:
            return None, f"could not read {_short(action)!r} as a {space}: {e}"
        if arr.shape != space.shape:
            return None, f"action has shape {arr.shape}, expected {space.shape}"
        if not np.all(np.isfinite(arr)):
            return None, "action contains NaN or infinity"
        low, high = getattr(space, "low", None), getattr(space, "high", None)
        if low is not None:
            arr = np.clip(arr, low, high).astype(arr.dtype, copy=False)
        return arr, None

    def apply(self, p: int, action: Any) -> str | None:
        """Apply a validated action of player `p`. Returns a reason when the engine refuses it."""
        raise NotImplementedError

    def apply_joint(self, actions: dict[int, Any]) -> dict[int, str]:
        """Simultaneous-move step; returns {player: reason} for refused actions."""
        raise NotImplementedError(f"{self.game_id} is not a simultaneous-move game")

    # -- outcome -----------------------------------------------------------------
    def returns(self) -> list[float]:
        """Cumulative return of every player so far (final once terminal)."""
        raise NotImplementedError

    def step_rewards(self) -> list[float]:
        """Rewards produced by the last `apply`/`apply_joint` (zeros by default)."""
        return [0.0] * len(self.players)

    def shaped_rewards(self) -> list[float] | None:
        """A dense per-player reward for the last step beside the outcome (Skirmish's damage dealt minus
        damage taken), which the SCC trainer's actors weigh in (`arena.trainers.policy.actors`). None:
        the game has none."""
        return None

    def end_match(self) -> None:
        """The match loop's word that the match is over (the rules, a forfeit or a ``max_moves`` cut),
        before the result is written: a game with a process of its own keeps its files and quits it
        now. Nothing by default."""

    def attachments(self) -> dict[str, bytes] | None:
        """Files the game made during the match (suffix -> bytes, StarCraft II's ``.SC2Replay``), kept
        beside the replay and named in its header by their sha256 (`arena.match.loop.finish_match`).
        None: no files."""
        return None

    # -- views -----------------------------------------------------------------
    def text(self, p: int) -> str:
        """What player `p` sees, as text (for LLM and human players)."""
        raise NotImplementedError

    def rules(self, p: int) -> str | None:
        """The rules as the game states them to player `p`, where every view repeats them (TextArena's
        prompt): a person at the terminal reads them once. None: the views carry no rules."""
        return None

    def human_view(self, p: int) -> str:
        """What a person reads (at the terminal, in ``arena replay show``): `text` unless the game has a
        more readable rendering (cards by name, betting in words, no repeated rules). Agents and
        replays keep `text`."""
        return self.text(p)

    def information_state(self, p: int) -> str:
        """Player `p`'s information state (OpenSpiel's string: the private history it has seen), which
        tabular strategies (CFR) are keyed by (`arena.envs.observation.Observation.information_state`).
        Raises NotImplementedError where the game has none."""
        raise NotImplementedError(f"{self.game_id} has no information-state view")

    def observation(self, p: int) -> Any:
        """Structured observation for neural players (defaults to the text)."""
        return self.text(p)

    def all_observations(self) -> np.ndarray:
        """Every player's observation tensor, concatenated (`privileged_dim` long): what a privileged
        critic reads. Asked only of a game with `privileged_dim` > 0."""
        raise NotImplementedError(f"{self.game_id} has no privileged view (privileged_dim is 0)")

    def battle(self) -> dict[str, Any] | None:
        """The position as the web replay draws it (units, their positions and health:
        `arena.envs.skirmish_draw`). None: the game has no such drawing."""
        return None

    def mirror(self) -> np.ndarray | None:
        """The board's left-right mirror, where the game has one: the permutation taking each move to
        its mirror image, the observation tensor's last axis reversed being the mirrored position (a
        symmetry of the rules: imitation may train on both images, ``il.mirror``). None: no mirror."""
        return None

    def action_mask(self, p: int) -> np.ndarray | None:
        """Player `p`'s legal moves as a 0/1 array over the discrete actions; None where there is none."""
        return None

    def action_model(self, p: int):
        """The parts of player `p`'s moves (`arena.envs.actions.ActionModel`): one categorical part
        for a discrete game, one box for a continuous one; a structured game overrides this. None
        for text games."""
        if self.action_kind == "discrete":
            return ActionModel.discrete(self.action_space(p).n)
        if self.action_kind == "continuous":
            space = self.action_space(p)
            return ActionModel.continuous(space.shape, space.low, space.high)
        return None

    def encode_action(self, action: Any) -> Any:
        """The JSON form a replay stores of `action` (a checked move, or whatever an agent returned).
        `validate` reads a stored structured move back; other kinds store the move itself."""
        if self.action_kind == "structured" and isinstance(action, dict):
            p = self.current_player()
            model = self.action_model(p if p >= 0 else 0)
            checked, why = model.check(action)
            if why is None:
                return model.encode(checked)
        return json_form(action)

    def action_to_text(self, p: int, action: Any) -> str:
        """`action` as player `p` would write it (replays' text, LLM and human players)."""
        if self.action_kind == "structured" and isinstance(action, dict):
            return self.action_model(p).to_text(action)
        if isinstance(action, np.ndarray):
            return "[" + ", ".join(f"{x:.4g}" for x in action.ravel()) + "]"
        return str(action)

    def text_to_action(self, p: int, text: str) -> Any:
        """Inverse of `action_to_text` for discrete games; raises ValueError."""
        text = text.strip()
        legal = self.legal_actions(p) or []
        for a in legal:
            if self.action_to_text(p, a) == text:
                return a
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"no legal move is written {text!r}") from None

    def sample_action(self, p: int, rng: np.random.Generator) -> Any:
        """A random move for games whose legal set is not enumerable; None if unknown."""
        legal = self.legal_actions(p)
        if legal:
            return legal[int(rng.integers(len(legal)))]
        if self.action_kind == "continuous":
            space = self.action_space(p)
            return rng.uniform(space.low, space.high).astype(space.dtype)
        if self.action_kind == "structured":
            return self.action_model(p).sample(self.observation(p), rng)
        return None

    def privileged(self, p: int) -> str | None:
        """Information hidden from player `p` that a privileged critic may see."""
        return None

    def engine_state(self) -> Any:
        """The engine's own state, for search agents on perfect-information games."""
        raise NotImplementedError(f"{self.game_id} does not expose an engine state to search agents")

    def observation_space(self, p: int):
        """The Gymnasium space of `observation(p)` (what a neural player reads)."""
        raise NotImplementedError

    def action_space(self, p: int):
        """The Gymnasium space of player `p`'s moves."""
        raise NotImplementedError

    def close(self) -> None:
        """Free what the game holds (a process, a window). Nothing by default."""

    # -- replays a game plays itself (`resimulates` False) ----------------------------------------
    def not_resimulated(self, replay: Any) -> str:
        """Why ``arena replay verify`` does not play `replay` again, in one line (asked when `resimulates`
        is False)."""
        return (f"replay {replay.header.get('match_id', '?')} of {self.game_id} is not re-simulated: the game's "
                "rules do not run in the arena")

    def check_replay(self, replay: Any) -> dict[str, list[str]]:
        """``{"differences", "warnings", "checks"}``: what ``arena replay verify`` checks of a replay it
        cannot re-simulate (asked when `resimulates` is False). By default nothing is checked."""
        return {"differences": [], "warnings": [self.not_resimulated(replay)], "checks": []}

    def watch_hint(self, replay: Any) -> list[str]:
        """Lines ``arena replay show`` prints on watching a match the arena cannot re-simulate (where the
        game's own replay file is). None by default."""
        return []

    # -- description -------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """One row of ``arena games``: id, players, action kind, source."""
        return {
            "id": self.game_id,
            "players": len(self.players),
            "action": self.action_kind,
            "source": self.source,
        }
