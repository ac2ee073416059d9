"""Game cores over plain Farama environments, so existing envs play unchanged.

* `AECCore`: any PettingZoo AEC env (turn-based). Legal moves come from an
  ``action_mask`` in the observation dict or in ``infos``.
* `ParallelCore`: any PettingZoo parallel env (simultaneous moves).
* `GymCore`: any single-agent Gymnasium env: a one-player game scored by return.

The text view falls back to ``render()`` in ansi mode, else to the observation
itself printed compactly.
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


def text_of(obs: Any) -> str:
    if isinstance(obs, str):
        return obs
    if isinstance(obs, dict):
        return "\n".join(f"{k}: {text_of(v)}" for k, v in obs.items())
    if isinstance(obs, np.ndarray):
        return np.array2string(obs, precision=3, separator=",", threshold=10_000, max_line_width=120)
    return repr(obs)


def mask_of(obs: Any, info: dict | None) -> np.ndarray | None:
    if isinstance(obs, dict) and "action_mask" in obs:
        return np.asarray(obs["action_mask"])
    if info and "action_mask" in info:
        return np.asarray(info["action_mask"])
    return None


def _engine_of(env) -> dict[str, str]:
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
        if getattr(self.env, "render_mode", None) == "ansi":
            out = self.env.render()
            if isinstance(out, str):
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

    def reset(self, seed: int | None = None) -> None:
        self._obs, _ = self.env.reset(seed=seed)
        self.env.action_space.seed(seed)
        self._returns = [0.0]
        self._done = False

    def current_player(self) -> int:
        return TERMINAL if self._done else 0

    def legal_actions(self, p: int) -> list | None:
        if self.action_kind == "discrete":
            return [] if self._done else list(range(int(self.env.action_space.n)))
        return None

    def apply(self, p: int, action: Any) -> str | None:
        obs, reward, terminated, truncated, _ = self.env.step(action)
        self._obs = obs
        self._last = [float(reward)]
        self._returns[0] += float(reward)
        self._done = bool(terminated or truncated)
        return None

    def text(self, p: int) -> str:
        return text_of(self._obs)

    def observation(self, p: int) -> Any:
        return self._obs

    def observation_space(self, p: int):
        return self.env.observation_space

    def action_space(self, p: int):
        return self.env.action_space
