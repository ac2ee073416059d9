"""Game cores over plain Farama environments, so existing envs play unchanged.

* `AECCore`: any PettingZoo AEC env (turn-based). Legal moves come from an
  ``action_mask`` in the observation dict or in ``infos``.
* `ParallelCore`: any PettingZoo parallel env (simultaneous moves).
* `GymCore`: any single-agent Gymnasium env: a one-player game scored by return.

The text view (what a language-model or human player reads, and what replays store
at every step) is, in order of preference:

1. the env's own ``ansi`` rendering, where ``metadata["render_modes"]`` has one
   (chess_v6: the board as python-chess prints it), even if the env was made without
   a render mode. It shows the whole board: for a game with hidden information whose
   ansi view shows everything, register the env with a render mode of your own.
2. for a board-plane observation, a ``(H, W, C)`` array of 0/1 with a few planes
   (connect_four_v3, tictactoe_v3: 2), a grid with one symbol per plane;
3. a small observation (up to `MAX_PRINTED` numbers) printed as it is;
4. otherwise one line: dtype, shape, how many entries are set and a digest (go_v5's
   19x19x17 planes), so that replays stay small and equal observations give equal text.

An ``action_mask`` in a dict observation is left out of the text: the legal moves reach
players through ``legal_actions``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np
from gymnasium import spaces

from arena.envs.core import SIMULTANEOUS, TERMINAL, GameCore
from arena.envs.spaces import FreeText


def action_kind_of(space) -> str:
    if isinstance(space, (spaces.Discrete,)):
        return "discrete"
    if isinstance(space, (spaces.Text, FreeText)):
        return "text"
    if isinstance(space, spaces.Box):
        return "continuous"
    raise TypeError(f"unsupported action space {space!r}: the arena plays Discrete, Box and text action spaces")


#: Observations with at most this many numbers are printed in full.
MAX_PRINTED = 256
#: Board planes drawn as a grid: symbols of planes 0, 1, ... (a cell with several: ``*``).
PLANE_SYMBOLS = "xo#@+%&$"


def text_of(obs: Any) -> str:
    if isinstance(obs, str):
        return obs
    if isinstance(obs, dict):
        items = {k: v for k, v in obs.items() if k != "action_mask"}
        if list(items) == ["observation"]:
            return text_of(items["observation"])
        return "\n".join(f"{k}: {text_of(v)}" for k, v in items.items())
    if isinstance(obs, np.ndarray):
        return array_text(obs)
    return repr(obs)


def array_text(obs: np.ndarray) -> str:
    """A compact text of an array observation: board planes as a grid, small arrays in full, else a digest."""
    planes = planes_text(obs)
    if planes is not None:
        return planes
    if obs.size <= MAX_PRINTED:
        return np.array2string(obs, precision=3, separator=",", threshold=10_000, max_line_width=120)
    import hashlib

    data = np.ascontiguousarray(obs)
    digest = hashlib.sha1(str(data.dtype).encode() + str(data.shape).encode() + data.tobytes()).hexdigest()[:12]
    nonzero = int(np.count_nonzero(data))
    return f"{data.dtype} array {'x'.join(map(str, data.shape))}, {nonzero} nonzero, digest {digest} (no text view)"


def planes_text(obs: np.ndarray) -> str | None:
    """A (H, W, C) 0/1 observation with few planes as a grid; None if it is not one.

    Planes that are the same everywhere (a "whose turn" plane) are named under the grid
    rather than drawn.
    """
    if obs.ndim != 3 or obs.size == 0 or obs.dtype.kind not in "biuf":
        return None
    h, w, c = obs.shape
    if not (1 <= c <= len(PLANE_SYMBOLS)) or h > 64 or w > 64:
        return None
    vals = np.asarray(obs)
    if not np.all((vals == 0) | (vals == 1)):
        return None
    vals = vals.astype(bool)
    drawn = [k for k in range(c) if vals[:, :, k].any() and not vals[:, :, k].all()]
    constant = [k for k in range(c) if k not in drawn]
    if c > 4 and len(drawn) > 1 and vals[:, :, drawn].sum(axis=2).max() > 1:
        return None  # many planes that overlap (stacked histories): a grid of "*" says nothing
    rows = []
    for i in range(h):
        cells = []
        for j in range(w):
            on = [k for k in drawn if vals[i, j, k]]
            cells.append("." if not on else PLANE_SYMBOLS[on[0]] if len(on) == 1 else "*")
        rows.append(" ".join(cells))
    legend = [f"{PLANE_SYMBOLS[k]}: plane {k}" for k in range(c) if k not in constant]
    legend += [f"plane {k}: all {int(vals[0, 0, k])}" for k in constant]
    return "\n".join(rows) + "\n(" + ", ".join(legend) + ")"


def _ansi_render(env) -> str | None:
    """The env's ansi rendering, if it has one, whatever render mode it was made with."""
    if getattr(env, "render_mode", None) == "ansi":
        try:
            out = env.render()
        except Exception:
            return None
        return out if isinstance(out, str) else None
    base = getattr(env, "unwrapped", env)
    modes = (getattr(base, "metadata", None) or {}).get("render_modes") or ()
    if "ansi" not in modes or getattr(base, "render_mode", None) is not None:
        return None  # made for a window or frames: leave it as it is
    try:
        base.render_mode = "ansi"
        try:
            out = base.render()
        finally:
            base.render_mode = None
    except Exception:  # an env whose ansi mode needs setting up at construction
        return None
    return out if isinstance(out, str) else None


def mask_of(obs: Any, info: dict | None) -> np.ndarray | None:
    if isinstance(obs, dict) and "action_mask" in obs:
        return np.asarray(obs["action_mask"])
    if info and "action_mask" in info:
        return np.asarray(info["action_mask"])
    return None


def _engine_of(env) -> dict[str, str]:
    own = getattr(getattr(env, "unwrapped", env), "engine", None)
    if isinstance(own, dict) and own:  # an env that names its engine (the OpenSim task: opensim's version)
        return {str(k): str(v) for k, v in own.items()}
    mod = type(getattr(env, "unwrapped", env)).__module__.split(".")[0]
    try:
        return {mod: version(mod)}
    except PackageNotFoundError:
        return {mod: "local"}


class _FaramaCore(GameCore):
    def __init__(self, env, game_id: str, settings: dict | None = None):
        self.env = env
        self.game_id = game_id
        self.settings = dict(settings or {})
        self.engine = _engine_of(env)
        base = getattr(env, "unwrapped", env)
        self._ansi = getattr(env, "render_mode", None) == "ansi" or "ansi" in (
            (getattr(base, "metadata", None) or {}).get("render_modes") or ())
        self._returns = [0.0] * len(self.players)
        self._last = [0.0] * len(self.players)

    def returns(self) -> list[float]:
        return list(self._returns)

    def step_rewards(self) -> list[float]:
        return list(self._last)

    def close(self) -> None:
        self.env.close()


class AECCore(_FaramaCore):
    source = "pettingzoo"

    def __init__(self, env, game_id: str, settings: dict | None = None):
        self.players = list(env.possible_agents)
        super().__init__(env, game_id, settings)
        self._index = {a: i for i, a in enumerate(self.players)}
        self.action_kind = action_kind_of(env.action_space(self.players[0]))
        self._done = True

    def reset(self, seed: int | None = None) -> None:
        self.env.reset(seed=seed)
        self._returns = [0.0] * len(self.players)
        self._done = False
        self._skip_dead()

    def _skip_dead(self) -> None:
        env = self.env
        while env.agents:
            a = env.agent_selection
            if env.terminations.get(a) or env.truncations.get(a):
                env.step(None)
            else:
                return
        self._done = True

    def current_player(self) -> int:
        if self._done or not self.env.agents:
            return TERMINAL
        return self._index[self.env.agent_selection]

    def legal_actions(self, p: int) -> list | None:
        if self.action_kind != "discrete":
            return None
        agent = self.players[p]
        if self._done or agent != self.env.agent_selection:
            return []
        mask = mask_of(self.env.observe(agent), self.env.infos.get(agent))
        if mask is None:
            return list(range(int(self.env.action_space(agent).n)))
        return np.flatnonzero(mask).tolist()

    def apply(self, p: int, action: Any) -> str | None:
        env = self.env
        env.step(action)
        self._last = [float(env.rewards.get(a, 0.0)) for a in self.players]
        for i, r in enumerate(self._last):
            self._returns[i] += r
        reason = (env.infos.get(self.players[p]) or {}).get("invalid_move")
        self._skip_dead()
        return reason

    def text(self, p: int) -> str:
        out = _ansi_render(self.env) if self._ansi else None
        if out is not None:
            return out
        return text_of(self.env.observe(self.players[p]))

    def observation(self, p: int) -> Any:
        return self.env.observe(self.players[p])

    def action_mask(self, p: int):
        agent = self.players[p]
        return mask_of(self.env.observe(agent), self.env.infos.get(agent))

    def observation_space(self, p: int):
        return self.env.observation_space(self.players[p])

    def action_space(self, p: int):
        return self.env.action_space(self.players[p])


class ParallelCore(_FaramaCore):
    source = "pettingzoo"

    def __init__(self, env, game_id: str, settings: dict | None = None):
        self.players = list(env.possible_agents)
        super().__init__(env, game_id, settings)
        self._index = {a: i for i, a in enumerate(self.players)}
        self.action_kind = action_kind_of(env.action_space(self.players[0]))
        self._obs: dict = {}
        self._infos: dict = {}

    def reset(self, seed: int | None = None) -> None:
        self._obs, self._infos = self.env.reset(seed=seed)
        self._returns = [0.0] * len(self.players)

    def current_player(self) -> int:
        return SIMULTANEOUS if self.env.agents else TERMINAL

    def acting_players(self) -> list[int]:
        return [self._index[a] for a in self.env.agents]

    def legal_actions(self, p: int) -> list | None:
        if self.action_kind != "discrete":
            return None
        agent = self.players[p]
        if agent not in self.env.agents:
            return []
        mask = mask_of(self._obs.get(agent), self._infos.get(agent))
        if mask is None:
            return list(range(int(self.env.action_space(agent).n)))
        return np.flatnonzero(mask).tolist()

    def apply_joint(self, actions: dict[int, Any]) -> dict[int, str]:
        obs, rewards, _term, _trunc, infos = self.env.step({self.players[i]: a for i, a in actions.items()})
        self._obs, self._infos = obs, infos
        self._last = [float(rewards.get(a, 0.0)) for a in self.players]
        for i, r in enumerate(self._last):
            self._returns[i] += r
        return {}

    def text(self, p: int) -> str:
        out = _ansi_render(self.env) if self._ansi else None
        if out is not None:
            return out
        return text_of(self._obs.get(self.players[p]))

    def observation(self, p: int) -> Any:
        return self._obs.get(self.players[p])

    def observation_space(self, p: int):
        return self.env.observation_space(self.players[p])

    def action_space(self, p: int):
        return self.env.action_space(self.players[p])


class GymCore(_FaramaCore):
    """A single-agent Gymnasium env as a one-player game scored by return."""

    source = "gymnasium"

    def __init__(self, env, game_id: str, settings: dict | None = None):
        self.players = ["player_0"]
        super().__init__(env, game_id, settings)
        self.action_kind = action_kind_of(env.action_space)
        self._obs = None
        self._done = True
        #: The last step ended the episode by truncation (a time limit, a simulator failure), not by
        #: termination: a learner bootstraps from where it was cut (`arena.trainers.policy.segments`).
        self.truncated = False
        #: The last step's ``info`` (a simulator failure says ``info["error"]``).
        self.info: dict = {}

    def reset(self, seed: int | None = None) -> None:
        self._obs, self.info = self.env.reset(seed=seed)
        self.env.action_space.seed(seed)
        self._returns = [0.0]
        self._done = self.truncated = False

    def current_player(self) -> int:
        return TERMINAL if self._done else 0

    def legal_actions(self, p: int) -> list | None:
        if self.action_kind == "discrete":
            return [] if self._done else list(range(int(self.env.action_space.n)))
        return None

    def apply(self, p: int, action: Any) -> str | None:
        obs, reward, terminated, truncated, self.info = self.env.step(action)
        self._obs = obs
        self._last = [float(reward)]
        self._returns[0] += float(reward)
        self._done = bool(terminated or truncated)
        self.truncated = bool(truncated and not terminated)
        return None

    def text(self, p: int) -> str:
        out = _ansi_render(self.env) if self._ansi else None
        if out is not None:
            return out
        return text_of(self._obs)

    def observation(self, p: int) -> Any:
        return self._obs

    def observation_space(self, p: int):
        return self.env.observation_space

    def action_space(self, p: int):
        return self.env.action_space
