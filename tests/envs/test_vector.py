"""Parallel env processes: the same results as in-process envs, and a killed worker is replaced."""

import os
import signal

import numpy as np
import pytest

from arena.envs.vector import SubprocessEnvs


def _play(envs, steps, seed=0):
    rng = np.random.default_rng(seed)
    obs = envs.reset(range(envs.n), [10 + i for i in range(envs.n)])
    trace = [np.stack(obs)]
    for _ in range(steps):
        o, r, te, tr, _ = envs.step([int(rng.integers(2)) for _ in range(envs.n)])
        done = [i for i in range(envs.n) if te[i] or tr[i]]
        if done:
            for i, x in zip(done, envs.reset(done, [99 + i for i in done])):
                o[i] = x
        trace.append(np.concatenate([np.stack(o).ravel(), r]))
    return trace


def test_processes_give_what_in_process_envs_give():
    with SubprocessEnvs("CartPole-v1", 2) as a, SubprocessEnvs("CartPole-v1", 2, workers=False) as b:
        assert a.observation_space == b.observation_space
        ta, tb = _play(a, 60), _play(b, 60)
    assert all(np.array_equal(x, y) for x, y in zip(ta, tb))


def test_a_killed_worker_is_restarted_and_its_episode_truncated():
    with SubprocessEnvs("CartPole-v1", 2) as envs:
        envs.reset([0, 1], [0, 1])
        os.kill(envs._procs[1].pid, signal.SIGKILL)
        envs._procs[1].join(timeout=10)
        obs, r, te, tr, infos = envs.step([0, 0])
        assert envs.restarts == 1
        assert tr[1] and not tr[0] and "died" in infos[1]["error"] and "restarted" in infos[1]["error"]
        assert "error" not in infos[0]
        fresh = envs.reset([1], [1])[0]
        obs, r, te, tr, infos = envs.step([0, 1])
        assert fresh.shape == (4,) and r[1] == 1.0 and not tr[1]


def test_a_game_that_cannot_be_made_is_a_clear_error():
    with pytest.raises(Exception, match="unknown game id"):
        SubprocessEnvs("nothing/like-this-v0", 1)
