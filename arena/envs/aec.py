"""PettingZoo AEC facade over a `GameCore`.

One class serves every built-in game, so every built-in game passes
PettingZoo's `api_test` and `seed_test` the same way. Used on its own (outside
the arena's match loop: RLlib steps it), an illegal action is reported in
``infos[agent]["invalid_move"]`` and the same agent moves again; after
``invalid_move_limit`` retries the offender forfeits. That is the match
engine's rule, `arena.envs.core.InvalidMovePolicy` with ``invalid_move_limit``
as its allowance (the offender -1, the others +1, the policy TextArena uses by
default; a one-player game ends with what it earned); None: no limit.
"""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv

from arena.envs.core import SIMULTANEOUS, TERMINAL, GameCore, InvalidMovePolicy
from arena.envs.spaces import TextObservation


class CoreSpaces:
    """What the PettingZoo facades share: the core, the agents, the spaces (the core's, made once
    per agent: PettingZoo's tests want the same object back every time) and the invalid-move policy."""

    def _attach(self, core: GameCore, render_mode: str | None, invalid_move_limit: int | None) -> None:
        if render_mode not in (None, "ansi", "human"):
            raise ValueError(f"render_mode must be None, 'ansi' or 'human', got {render_mode!r}")
        self.core = core
        self.render_mode = render_mode
        self.invalid_move_limit = invalid_move_limit
        #: The match engine's rule with ``invalid_move_limit`` retries; None: an agent may retry for ever.
        self.policy = None if invalid_move_limit is None else InvalidMovePolicy(allowance=invalid_move_limit)
        self.possible_agents = list(core.players)
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self._obs_spaces: dict[str, Any] = {}
        self._act_spaces: dict[str, Any] = {}
        self.metadata = dict(self.metadata, name=core.game_id)
        self.agents = []

    def observation_space(self, agent: str):
        space = self._obs_spaces.get(agent)
        if space is None:
            space = self._obs_spaces[agent] = self.core.observation_space(self._index[agent])
        return space

    def action_space(self, agent: str):
        space = self._act_spaces.get(agent)
        if space is None:
            space = self._act_spaces[agent] = self.core.action_space(self._index[agent])
        return space


class GameAECEnv(CoreSpaces, AECEnv):
    metadata = {"render_modes": ["ansi", "human"], "name": "arena_game", "is_parallelizable": False}

    def __init__(self, core: GameCore, render_mode: str | None = None, invalid_move_limit: int | None = 1):
        super().__init__()
        self._attach(core, render_mode, invalid_move_limit)
        self._forfeit: list[float] | None = None


    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.core.reset(seed)
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self._invalid = {a: 0 for a in self.agents}
        self._forfeit = None
        self.agent_selection = self.agents[0]
        self._sync()

    def _sync(self) -> None:
        p = self.core.current_player()
        if p == SIMULTANEOUS:
            raise NotImplementedError("simultaneous-move cores are driven through the parallel API")
        if p == TERMINAL:
            for a in self.agents:
                self.terminations[a] = True
        else:
            self.agent_selection = self.possible_agents[p]

    def observe(self, agent: str) -> Any:
        obs = self.core.observation(self._index[agent])
        if type(obs) is str:
            return TextObservation(obs)
        if isinstance(obs, dict) and type(obs.get("observation")) is str:
            obs["observation"] = TextObservation(obs["observation"])
        return obs

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        i = self._index[agent]
        self._cumulative_rewards[agent] = 0.0
        for a in self.agents:
            self.infos[a] = {}
        normalized, reason = self.core.validate(i, action)
        if reason is None:
            reason = self.core.apply(i, normalized)
        if reason is not None:
            self.infos[agent]["invalid_move"] = reason
            self._invalid[agent] += 1
            policy = self.policy
            if policy is not None and policy.forfeits(self._invalid[agent]) and not self.core.is_terminal():
                before = self.core.returns()
                final = policy.forfeit_returns(i, before)
                self._forfeit = final
                self.rewards = {a: final[k] - before[k] for k, a in enumerate(self.possible_agents) if a in self.rewards}
                for a in self.agents:
                    self.terminations[a] = True
                self._accumulate_rewards()
                return
        else:
            self._invalid[agent] = 0
        step = self.core.step_rewards()
        self.rewards = {a: float(step[self._index[a]]) for a in self.agents}
        self._sync()
        self._accumulate_rewards()
        if self.render_mode == "human":
            self.render()

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        core = self.core
        p = core.current_player()
        text = core.text(p if p >= 0 else 0)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        self.core.close()
