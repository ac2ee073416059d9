"""PettingZoo parallel facade over a simultaneous-move `GameCore`.

The AEC facade (`arena.envs.aec.GameAECEnv`) serves games whose players take turns; a game whose
players all move at once (StarCraft's case) is driven through PettingZoo's parallel API with this
one, so it passes `parallel_api_test` and `parallel_seed_test` like any PettingZoo game. Used on its
own (outside the arena's match loop): an illegal move is reported in
``infos[agent]["invalid_move"]`` and the tick is not played (the players move again); after
``invalid_move_limit`` retries the offender forfeits by the match engine's rule
(`arena.envs.core.InvalidMovePolicy`), as in the AEC facade.
"""

from __future__ import annotations

from typing import Any

from pettingzoo import ParallelEnv

from arena.envs.aec import CoreSpaces
from arena.envs.core import SIMULTANEOUS, TERMINAL, GameCore


class GameParallelEnv(CoreSpaces, ParallelEnv):
    metadata = {"render_modes": ["ansi", "human"], "name": "arena_game", "is_parallelizable": True}

    def __init__(self, core: GameCore, render_mode: str | None = None, invalid_move_limit: int | None = 1):
        self._attach(core, render_mode, invalid_move_limit)
        self._invalid: dict[str, int] = {}

    def _observations(self) -> dict[str, Any]:
        return {a: self.core.observation(self._index[a]) for a in self.agents}

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.core.reset(seed)
        self.agents = list(self.possible_agents)
        self._invalid = {a: 0 for a in self.agents}
        p = self.core.current_player()
        if p not in (SIMULTANEOUS, TERMINAL):
            raise NotImplementedError(f"{self.core.game_id} is a turn-taking game: use its AEC env")
        return self._observations(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]):
        core = self.core
        infos: dict[str, dict] = {a: {} for a in self.agents}
        moves, refused = {}, {}
        for a in self.agents:
            i = self._index[a]
            move, why = core.validate(i, actions.get(a)) if a in actions else (None, "no move was given")
            if why is None:
                moves[i] = move
            else:
                refused[a] = why
        stepped = not refused  # a move refused before the step: nothing was played
        if stepped:
            for i, why in core.apply_joint(moves).items():
                refused[self.possible_agents[i]] = why
            for a in self.agents:
                if a not in refused:
                    self._invalid[a] = 0
        for a, why in refused.items():
            infos[a]["invalid_move"] = why
            self._invalid[a] += 1
        before = core.returns()
        policy = self.policy
        over = [a for a in refused if policy is not None and policy.forfeits(self._invalid[a])]
        if over and not core.is_terminal():
            final = policy.forfeit_returns(self._index[over[0]], before)
            rewards = {a: final[self._index[a]] - before[self._index[a]] for a in self.agents}
            done = True
        else:
            # an engine that refuses a move as it steps (StarCraft II) has still played the step: its rewards count
            step = core.step_rewards() if stepped else [0.0] * len(self.possible_agents)
            rewards = {a: float(step[self._index[a]]) for a in self.agents}
            done = core.is_terminal()
        obs = self._observations()
        terminations = {a: done for a in self.agents}
        truncations = {a: False for a in self.agents}
        if done:
            self.agents = []
        if self.render_mode == "human":
            self.render()
        return obs, rewards, terminations, truncations, infos

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        text = self.core.text(0)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def state(self):
        raise NotImplementedError(f"{self.core.game_id} has no global state view")

    def close(self) -> None:
        self.core.close()
