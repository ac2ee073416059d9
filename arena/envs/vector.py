"""Several copies of a single-agent Gymnasium game, each in its own process, stepped together.

A simulator such as OpenSim spends its time in C++ (about 17 ms a step for the prosthetics model
here), so parallel processes are the speed: `SubprocessEnvs` sends every env its action, then
collects every result, so the copies integrate at the same time while the caller's policy
answers for all of them in one batch.

* Each worker is a ``spawn``ed process that builds its env with `arena.envs.registry.make` (no
  torch, nothing of the caller is inherited) and dies with the process that started it
  (`arena.procs.die_with`).
* Resets are explicit, with a seed each (`reset`): the caller decides the seed schedule, so a
  run is reproducible whatever the number of workers.
* A worker that dies (killed, out of memory) is started again; its step comes back as a
  truncation with ``info["error"]`` naming what happened, and the next `reset` of that env starts
  from a fresh process. ``restarts`` counts them.
* ``workers=0`` runs the envs in the caller's process (no pipes: for tests and for measuring the
  pipes' cost).
* Ctrl-C is the caller's: a terminal sends SIGINT to every process of its group, and a worker that
  raised KeyboardInterrupt mid-step would only fail the step. Workers ignore SIGINT (they die with
  the caller, or close when it says so); a KeyboardInterrupt a worker reports anyway is raised as
  one in the caller, which decides how to stop.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import traceback
from typing import Any, Sequence

import numpy as np


def _worker(conn, game: str, kwargs: dict, owner: int, plugins: list[str]) -> None:
    from arena.procs import die_with

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller stops the run (see the module docstring)
    die_with(owner)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        from arena.envs.registry import load_plugin, make

        for module in plugins:  # the caller's `--plugin` games, registered here too
            load_plugin(module)
        env = make(game, **kwargs)
        conn.send(("ready", (env.observation_space, env.action_space)))
    except BaseException as e:  # noqa: BLE001 - reported to the caller, which raises it
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    while True:
        try:
            cmd, arg = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if cmd == "reset":
                out = env.reset(seed=arg)
            elif cmd == "step":
                out = env.step(arg)
            elif cmd == "call":
                name, args = arg
                out = getattr(env.unwrapped, name)(*args)
            elif cmd == "close":
                env.close()
                conn.send(("ok", None))
                return
            else:
                raise ValueError(f"unknown command {cmd!r}")
            conn.send(("ok", out))
        except KeyboardInterrupt:
            conn.send(("interrupted", None))
        except BaseException as e:  # noqa: BLE001
            conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"))


class WorkerDied(RuntimeError):
    pass


class SubprocessEnvs:
    def __init__(self, game: str, n: int, game_kwargs: dict | None = None, workers: bool = True):
        if n < 1:
            raise ValueError(f"need at least one env, got {n}")
        self.game, self.n, self.kwargs = game, int(n), dict(game_kwargs or {})
        self.in_process = not workers
        self.restarts = 0
        from arena.envs.registry import loaded_plugins

        self._plugins = loaded_plugins()
        self._ctx = mp.get_context("spawn")
        self._procs: list[Any] = [None] * self.n
        self._conns: list[Any] = [None] * self.n
        self._local: list[Any] = []
        self._pending: dict[int, tuple] = {}  # results of started steps not fetched yet (in-process, lost workers)
        if self.in_process:
            from arena.envs.registry import make

            self._local = [make(game, **self.kwargs) for _ in range(self.n)]
        else:
            for i in range(self.n):
                self._start(i, wait=False)
            for i in range(self.n):
                self._ready(i)
        if self.in_process:
            self.observation_space, self.action_space = self._local[0].observation_space, self._local[0].action_space

    # -- workers -------------------------------------------------------------------------------
    def _start(self, i: int, wait: bool = True) -> None:
        parent, child = self._ctx.Pipe()
        p = self._ctx.Process(target=_worker, args=(child, self.game, self.kwargs, os.getpid(), self._plugins), daemon=True,
                              name=f"env-{i}")
        p.start()
        child.close()
        self._procs[i], self._conns[i] = p, parent
        if wait:
            self._ready(i)

    def _ready(self, i: int) -> None:
        kind, msg = self._recv(i)
        if kind == "error":
            self.close()
            raise RuntimeError(f"{self.game}: the env could not be made in a worker: {msg}")
        self.observation_space, self.action_space = msg

    def _recv(self, i: int):
        try:
            return self._conns[i].recv()
        except (EOFError, OSError, ConnectionResetError) as e:
            raise WorkerDied(f"env worker {i} died ({type(e).__name__}; exit code {self._procs[i].exitcode})") from None

    def _send(self, i: int, msg) -> None:
        try:
            self._conns[i].send(msg)
        except (BrokenPipeError, OSError) as e:
            raise WorkerDied(f"env worker {i} died ({type(e).__name__})") from None

    def _restart(self, i: int) -> None:
        self.restarts += 1
        try:
            self._procs[i].kill()
            self._procs[i].join(timeout=5)
        except Exception:  # noqa: BLE001 - it is gone already
            pass
        self._start(i)

    def _result(self, i: int):
        kind, out = self._recv(i)
        if kind == "interrupted":
            raise KeyboardInterrupt
        if kind == "error":
            raise RuntimeError(f"{self.game} env {i}: {out}")
        return out

    # -- the API ----------------------------------------------------------------------------------
    def call(self, i: int, name: str, *args: Any) -> Any:
        """``env.unwrapped.<name>(*args)`` of env `i`."""
        if self.in_process:
            return getattr(self._local[i].unwrapped, name)(*args)
        self._send(i, ("call", (name, args)))
        return self._result(i)

    def reset(self, indices: Sequence[int], seeds: Sequence[int | None]) -> list[np.ndarray]:
        """Reset the envs `indices` with their `seeds`; their first observations, in that order."""
        if self.in_process:
            return [self._local[i].reset(seed=s)[0] for i, s in zip(indices, seeds)]
        for i, s in zip(indices, seeds):
            try:
                self._send(i, ("reset", s))
            except WorkerDied:
                self._restart(i)
                self._send(i, ("reset", s))
        out = []
        for i, s in zip(indices, seeds):
            try:
                out.append(self._result(i)[0])
            except WorkerDied:
                self._restart(i)
                self._send(i, ("reset", s))
                out.append(self._result(i)[0])
        return out

    def step(self, actions: Sequence[Any], indices: Sequence[int] | None = None
             ) -> tuple[list, np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        """Step the envs `indices` (default: all) with their actions, all at once:
        (observations, rewards, terminated, truncated, infos), in the order of `indices`."""
        idx = list(range(self.n)) if indices is None else list(indices)
        if len(actions) != len(idx):
            raise ValueError(f"expected {len(idx)} actions, got {len(actions)}")
        if self.in_process:
            outs = [self._local[i].step(a) for i, a in zip(idx, actions)]
        else:
            for i, a in zip(idx, actions):
                self.send_step(i, a)
            outs = [self.result(i) for i in idx]
        obs = [o[0] for o in outs]
        rew = np.array([o[1] for o in outs], dtype=np.float64)
        term = np.array([o[2] for o in outs], dtype=bool)
        trunc = np.array([o[3] for o in outs], dtype=bool)
        return obs, rew, term, trunc, [o[4] for o in outs]

    # -- asynchronous stepping: each env at its own pace ---------------------------------------------
    def send_step(self, i: int, action: Any) -> None:
        """Start a step of env `i`; its result comes from `result(i)` once `ready` lists it. Envs stepped
        this way never wait for each other (no per-step barrier: a slow step of one env does not hold
        the others back, and the caller's work for one overlaps the others' simulation)."""
        if self.in_process:
            self._pending[i] = self._local[i].step(action)
            return
        try:
            self._send(i, ("step", action))
        except WorkerDied as e:
            self._pending[i] = self._lost(i, str(e))

    def ready(self, timeout: float | None = None) -> list[int]:
        """The envs whose started step has a result waiting (blocks up to `timeout` for one)."""
        if self.in_process or self._pending:
            return sorted(self._pending)
        from multiprocessing.connection import wait

        by_conn = {self._conns[i]: i for i in range(self.n)}
        return sorted(by_conn[c] for c in wait(list(by_conn), timeout))

    def result(self, i: int) -> tuple:
        """The (observation, reward, terminated, truncated, info) of env `i`'s started step."""
        if i in self._pending:
            return self._pending.pop(i)
        try:
            return tuple(self._result(i))
        except WorkerDied as e:
            return self._lost(i, str(e))

    def _lost(self, i: int, why: str) -> tuple:
        self._restart(i)
        empty = np.zeros(self.observation_space.shape, dtype=self.observation_space.dtype)
        return (empty, 0.0, False, True, {"error": why + "; restarted"})

    def close(self) -> None:
        for e in self._local:
            e.close()
        self._local = []
        for i, (p, c) in enumerate(zip(self._procs, self._conns)):
            if p is None:
                continue
            try:
                c.send(("close", None))
                c.poll(5) and c.recv()
            except Exception:  # noqa: BLE001 - closing: a dead worker is fine
                pass
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
            self._procs[i] = None

    def __enter__(self) -> "SubprocessEnvs":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
