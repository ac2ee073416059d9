"""The parallel facade over a game that refuses a move as it steps (StarCraft II's rejected
orders): the step was played, so its rewards count; a move refused before the step plays nothing."""

from plugins.squad_games import SquadCore

from arena.envs.parallel import GameParallelEnv


class RefusingCore(SquadCore):
    """Plays every step (rewarding red a quarter), then says red's order was rejected (as the game's
    action result does)."""

    def apply_joint(self, actions):
        super().apply_joint(actions)
        self._step = [0.25, -0.25]
        return {0: "the game rejected the order"}


def test_an_engine_refusal_after_the_step_keeps_the_steps_rewards():
    env = GameParallelEnv(RefusingCore(ticks=1), invalid_move_limit=5)
    env.reset(seed=0)
    _, rewards, done, _, infos = env.step({a: {"type": 0} for a in env.agents})
    assert all(done.values()) and rewards == {"red": 0.25, "blue": -0.25}
    assert infos["red"]["invalid_move"] == "the game rejected the order" and "invalid_move" not in infos["blue"]


def test_a_move_refused_before_the_step_plays_nothing():
    env = GameParallelEnv(RefusingCore(ticks=1), invalid_move_limit=5)
    env.reset(seed=0)
    _, rewards, done, _, infos = env.step({"red": {"type": 99}, "blue": {"type": 0}})
    assert rewards == {"red": 0.0, "blue": 0.0} and not any(done.values()) and env.core.t == 0
    assert "invalid_move" in infos["red"]
