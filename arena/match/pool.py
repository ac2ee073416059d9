"""The one match driver: a pool of matches with send/receive backends.

Every match of the arena is played by one engine, `arena.match.loop.Match` driven by
`arena.match.loop.run_matches`: a match plays until a *batched* agent (a neural policy, a learner's
actor: one with ``act_batch``) must answer, every waiting move of that agent across the matches in
flight goes into one call, and the matches go on. `play_match` is that engine with one match and
nothing batched.

This module puts the engine behind one pool. A caller `send`s *work* (some matches, as plain
picklable data) under a key and `recv`s whatever has finished, from one of three backends:

=============  =====================================================================================
``inline``     in the caller's process (tests, exact-order runs, a trainer with ``actors: 0``)
``local``      a pool of worker processes that die with the caller (`arena.procs`); a worker that dies
               loses only the work it held (reported as `WorkerLost`) and the pool is rebuilt
``ray``        Ray tasks, on a local Ray started for the run (loopback only, dying with the caller:
               `arena.procs.start_local_ray`) or on a cluster at an address (``address``, joined only then)
=============  =====================================================================================

Work is anything with ``run() -> output`` that pickles: `JobsWork` (scheduled `MatchJob`\\ s: the
league, ``arena play``, imitation's teacher matches), and the neural-policy trainer's pairings
(`arena.trainers.policy.actors`: the learners' weights travel with them and their trajectories come
back). The worker runs it on the one engine; per-process caches keep game cores and agents between
pieces of work (a league replays the same few specs thousands of times).

A full disk is not a failed match: `recv` raises the worker's `DiskFull` at once.

Why not a vectorised-env library (PufferLib, EnvPool): they step a fixed set of copies of one
environment with one policy over shared buffers. A match here has per-match agents (search,
people, language models, frozen snapshots) beside the batched ones, a league pairing per match,
an invalid-move policy and a replay; the engine batches the moves of every network across
matches, and the worker processes hold whole matches (a tic-tac-toe move is microseconds: per-move
messages between processes would cost more than the game). docs/architecture.md has the figures.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from arena.agents.base import derive_seed
from arena.agents.specs import make_agent
from arena.envs.core import GameCore
from arena.envs.registry import load_plugin, make_core
from arena.errors import DiskFull
from arena.match.loop import InvalidMovePolicy, Match, MatchResult, record_mode, run_matches
from arena.match.observe import Readers
from arena.match.runner import MatchJob, finish_job, job_game_key, job_record, run_match_job
from arena.procs import die_with, forkserver_preload, start_local_ray, stop_local_ray

BACKENDS = ("inline", "local", "ray")


class WorkerLost(RuntimeError):
    """The process running a piece of work died before returning it."""


# -- the engine over many matches ------------------------------------------------------------------
def play_lockstep(
    game: Any,
    seats: Sequence[Sequence[Any]],
    seeds: Sequence[int | None],
    *,
    policy: InvalidMovePolicy | None = None,
    max_moves: int | None = None,
    record: bool | str = "actions",
    game_kwargs: dict | None = None,
    match_ids: Sequence[str] | None = None,
    shared: dict[str, Any] | None = None,
    cores: Sequence[GameCore] | None = None,
    on_result: Callable[[MatchResult], None] | None = None,
    move_time_limit: float | None = None,
    width: int | None = None,
    observe: Iterable[int] = (),
    ask: dict[int, Callable[[Any], Any]] | None = None,
) -> list[MatchResult]:
    """Play ``len(seats)`` matches of `game` together on the engine (`run_matches`); match i seats
    ``seats[i]`` (agent objects or spec strings) with seed ``seeds[i]``. A spec found in `shared` is
    played by that (batched) agent object in every match; other specs are built per match as
    `play_match` builds them. `cores`: the games to play on, made by the caller (one per match; a
    batched agent tells its matches apart by ``observation.core``). Results in order; the replays
    are `play_match`'s for the same seeds. A batched agent is shared by the matches: it is not reset
    per match (seed it once). `width`: at most this many matches in flight (`run_matches`). `observe`
    and `ask`: what those seats of every match saw as they played (`Match`; `ask`'s functions are
    shared by the matches in flight: give stateless ones, or play through `play_jobs`, which lends
    each match readers of its own)."""
    if len(seeds) != len(seats):
        raise ValueError(f"{len(seats)} matches but {len(seeds)} seeds")
    record_mode(record)  # a bad record mode fails here, before any match starts

    def matches():  # made as room opens when `width` bounds the matches in flight
        for i, (agents, seed) in enumerate(zip(seats, seeds)):
            if cores is not None:
                core = cores[i]
            elif isinstance(game, GameCore) and len(seats) == 1:
                core = game
            else:
                core = make_core(game if isinstance(game, str) else game.game_id, **(game_kwargs or {}))
            made.append(Match(core, agents, seed, policy=policy, max_moves=max_moves,
                              match_id=match_ids[i] if match_ids is not None else None, record=record,
                              game_kwargs=game_kwargs, batched=True, shared=shared, index=i,
                              move_time_limit=move_time_limit, observe=observe, ask=ask))
            yield made[-1]

    made: list[Match] = []
    run_matches(matches(), on_result, width=width)
    return [m.result for m in made]


# -- per-process caches ------------------------------------------------------------------------------
#: A worker's cores, agents and strategy readers, kept between pieces of work (`JobsWork`).
_CACHE: dict[str, Any] = {"cores": {}, "agents": {}, "readers": Readers()}

_gkey = job_game_key


def play_jobs(jobs: Sequence[MatchJob], *, lockstep: bool = False, width: int = 64,
              on_result: Callable[[MatchResult], None] | None = None,
              cache: dict[str, dict] | None = None) -> list[MatchResult]:
    """Play scheduled matches on the engine and do with each result what its job says (`finish_job`:
    seats, replay file or bytes). `cache` keeps game cores, agents and the strategy readers of observed
    seats between calls (a worker's; None: built for this call only).

    ``lockstep=False``: one match after another, each agent object reused and re-seeded per match
    (`play_match` resets it with the match's seed, so a match is the same whatever was played
    before). ``lockstep=True``: `width` matches in flight at once; an agent that answers in batches
    (``act_batch``: a neural policy) is one object for all of them and answers every waiting move in
    one call, each match's from the generator its seat would have alone (`seat_match`), so a match plays
    the same whichever others are in flight; other agents are built per match."""
    results: list[MatchResult] = []
    if not jobs:
        return results
    for mod in dict.fromkeys(m for j in jobs for m in j.plugins):
        load_plugin(mod)
    if cache is None:
        cache = {"cores": {}, "agents": {}}
    cores, cached = cache["cores"], cache["agents"]
    readers = cache.setdefault("readers", Readers())

    def core_of(gkey: tuple, job: MatchJob) -> GameCore:
        core = cores.get(gkey)
        if core is None:
            core = cores[gkey] = make_core(job.game, **job.game_kwargs)
        return core

    def agent_of(gkey: tuple, job: MatchJob, spec: str, seat: int | None) -> Any:
        """The cached agent of `spec` in `seat` (None: the one shared by every seat, a batched agent)."""
        key = (gkey, spec, seat)
        agent = cached.get(key)
        if agent is None:
            if len(cached) > 256:  # learners add a spec per weights version: keep the cache bounded
                cached.clear()
            agent = cached[key] = make_agent(spec, core_of(gkey, job), derive_seed(job.seed, seat or 0))
        return agent

    def done(res: MatchResult, job: MatchJob | None) -> None:
        if job is not None:
            finish_job(job, res)
        results.append(res)
        if on_result is not None:
            on_result(res)

    if not lockstep:
        for job in jobs:
            gkey = _gkey(job)
            agents = [agent_of(gkey, job, spec, seat) for seat, spec in enumerate(job.specs)]
            done(run_match_job(job, agents=agents, core=core_of(gkey, job), readers=readers), None)  # finished there
            if any(getattr(a, "stop_requested", False) for a in agents):
                break  # an agent ended the run (a person who quit): the matches played so far stand
        return results
    first = jobs[0]
    shared: dict[str, Any] = {}
    for spec in dict.fromkeys(s for j in jobs for s in j.specs):
        if spec == "human":
            continue
        agent = agent_of(_gkey(first), first, spec, None)
        if callable(getattr(agent, "act_batch", None)):
            agent.reset(first.seed)
            shared[spec] = agent
    by_id = {j.match_id: (k, j) for k, j in enumerate(jobs)}
    lent: dict[str, list] = {}  # the readers a match in flight holds, by match id

    def matches():  # made as room opens: `width` in flight until the last ones
        for k, job in enumerate(jobs):
            asks = None
            if job.observe and job.ask is not None:
                gkey = _gkey(job)
                asks, lent[job.match_id] = readers.lend(gkey, core_of(gkey, job), job.specs, job.seed, job.observe,
                                                        job.ask)
            yield Match(make_core(job.game, **job.game_kwargs), list(job.specs), job.seed, policy=job.policy,
                        max_moves=job.max_moves, match_id=job.match_id, move_time_limit=job.move_time_limit,
                        record=job_record(job), game_kwargs=job.game_kwargs or None, batched=True, shared=shared,
                        index=k, observe=job.observe, ask=asks)

    def ended(res: MatchResult) -> None:
        if res.match_id in lent:
            readers.give_back(lent.pop(res.match_id))
        done(res, by_id[res.match_id][1])

    run_matches(matches(), ended, width=width)
    results.sort(key=lambda r: by_id[r.match_id][0])  # in the jobs' order, as one after another gives them
    return results


@dataclass
class JobsWork:
    """Scheduled matches for a backend to play (`play_jobs`)."""

    jobs: list[MatchJob]
    lockstep: bool = False
    width: int = 64

    def run(self) -> list[MatchResult]:
        return play_jobs(self.jobs, lockstep=self.lockstep, width=self.width, cache=_CACHE)


# -- the backends ----------------------------------------------------------------------------------
def _init_worker(owner: int, environ: dict[str, str] | None = None) -> None:
    # Ctrl-C goes to the whole process group: the caller decides how to stop (it finishes or
    # abandons the work in flight); a worker that raised KeyboardInterrupt would only print its
    # traceback. Workers die with the caller, even on kill -9 (arena.procs).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with(owner)
    if environ is not None:
        # A forkserver's children inherit the forkserver's environment, frozen when the first pool of
        # the process started it; a worker takes its caller's, as of this pool, as a forked or spawned
        # child would (a game's install path such as SC2PATH set after the first pool, and every
        # process the worker launches, e.g. a game, sees it).
        os.environ.clear()
        os.environ.update(environ)


def _run(work: Any) -> Any:
    torch = sys.modules.get("torch")
    if torch is not None:
        # A forked child whose parent already ran torch ops: the parent's OpenMP thread pool does not
        # survive the fork and the child's first parallel op would wait on it forever; one intra-op
        # thread per worker needs no pool (and workers x threads would oversubscribe the cores anyway).
        torch.set_num_threads(1)
    return work.run()


class _Inline:
    def __init__(self):
        self._done: list[tuple[Any, Any]] = []

    def send(self, key: Any, work: Any) -> None:
        try:
            out = work.run()
        except DiskFull:
            raise
        except Exception as e:
            out = e
        self._done.append((key, out))

    def recv(self, timeout: float | None) -> list[tuple[Any, Any]]:
        out, self._done = self._done, []
        return out

    def pending(self) -> int:
        return len(self._done)

    def close(self) -> None:
        self._done.clear()


class _Local:
    def __init__(self, workers: int, start: str):
        self.workers = max(1, workers)
        methods = mp.get_all_start_methods()
        self._ctx = mp.get_context(start if start in methods else "spawn")
        self._pool = self._new_pool()
        self._futures: dict[cf.Future, Any] = {}

    def _new_pool(self):
        if self._ctx.get_start_method() == "forkserver":
            forkserver_preload(self._ctx)
        return cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=self._ctx, initializer=_init_worker,
                                      initargs=(os.getpid(), dict(os.environ)))

    def send(self, key: Any, work: Any) -> None:
        try:
            fut = self._pool.submit(_run, work)
        except cf.process.BrokenProcessPool:
            self._pool = self._new_pool()
            fut = self._pool.submit(_run, work)
        self._futures[fut] = key

    def recv(self, timeout: float | None) -> list[tuple[Any, Any]]:
        if not self._futures:
            return []
        done, _ = cf.wait(list(self._futures), timeout=timeout, return_when=cf.FIRST_COMPLETED)
        out, broken = [], False
        for fut in done:
            key = self._futures.pop(fut)
            try:
                out.append((key, fut.result()))
            except DiskFull:
                raise
            except cf.process.BrokenProcessPool as e:
                broken = True
                out.append((key, WorkerLost(f"worker process died while playing {key}: {e}")))
            except Exception as e:
                out.append((key, e))
        if broken:
            # Everything still held by the dead pool is lost with it; report it all.
            for fut, key in list(self._futures.items()):
                out.append((key, WorkerLost(f"worker pool broke while {key} was queued")))
            self._futures.clear()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()
        return out

    def pending(self) -> int:
        return len(self._futures)

    def close(self) -> None:
        # Queued work is cancelled and a worker mid-work is stopped: what it held is not returned.
        procs = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:  # reaped, so a caller may sweep what they left (`arena.fsio.sweep_orphans`)
            p.join(timeout=5)
        self._futures.clear()


class _Ray:
    def __init__(self, workers: int, address: str | None, temp_dir: str | None):
        from arena.errors import require

        self.ray = ray = require("ray", "the Ray backend", "ray")
        self._started = self._local = False
        self._own_temp: str | None = None
        if not ray.is_initialized():
            if address and address != "local":
                # Joining a cluster, only when asked for: its nodes trust each other (docs/security.md).
                ray.init(address=address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
            else:
                # A Ray of this run only: on the loopback interface, dying with this process (arena.procs).
                # Ray's socket paths must stay short: its session files go under a short temp path. Ray makes
                # that folder writable by everyone (0777, for a machine shared by its users): it goes inside a
                # folder of ours (0700) that nobody else may enter.
                self._own_temp = None if temp_dir else tempfile.mkdtemp(prefix="arena-ray-")
                start_local_ray(ray, num_cpus=workers or os.cpu_count() or 1, include_dashboard=False,
                                log_to_driver=False, _temp_dir=temp_dir or os.path.join(self._own_temp, "r"))
                self._local = True
            self._started = True
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_run)
        self._refs: dict[Any, Any] = {}

    def send(self, key: Any, work: Any) -> None:
        self._refs[self._remote.remote(work)] = key

    def recv(self, timeout: float | None) -> list[tuple[Any, Any]]:
        if not self._refs:
            return []
        ready, _ = self.ray.wait(list(self._refs), num_returns=len(self._refs) if timeout is not None else 1,
                                 timeout=timeout)
        out = []
        for ref in ready:
            key = self._refs.pop(ref)
            try:
                out.append((key, self.ray.get(ref)))
            except Exception as e:  # RayTaskError, WorkerCrashedError: the caller decides (the league re-queues)
                cause = e if isinstance(e, DiskFull) else getattr(e, "cause", None)
                if isinstance(cause, DiskFull):
                    raise cause from e
                out.append((key, WorkerLost(f"Ray task for {key} failed: {type(e).__name__}: {e}")))
        return out

    def pending(self) -> int:
        return len(self._refs)

    def close(self) -> None:
        for ref in list(self._refs):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:
                pass
        self._refs.clear()
        if self._started:
            if self._local:
                stop_local_ray(self.ray)
                if self._own_temp is not None:  # its session logs: nothing reads them once Ray is down
                    shutil.rmtree(self._own_temp, ignore_errors=True)
            else:
                self.ray.shutdown()
            self._started = False


class MatchPool:
    """Matches played by one of the backends (see the module docstring). `send` hands over a piece of
    work under a key and returns at once (``inline`` plays it there and then); `recv` returns
    ``(key, output or exception)`` for what has finished (waiting up to `timeout` seconds for the
    first; None: until one has). `play` sends a list of work and returns the outputs in order."""

    def __init__(self, backend: str = "inline", workers: int = 1, *, address: str | None = None,
                 temp_dir: str | None = None, start: str = "forkserver"):
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}: {', '.join(BACKENDS)}")
        self.backend = backend
        if backend == "inline":
            self._impl: Any = _Inline()
        elif backend == "local":
            self._impl = _Local(workers or os.cpu_count() or 1, start)
        else:
            self._impl = _Ray(workers, address, temp_dir)

    def send(self, key: Any, work: Any) -> None:
        self._impl.send(key, work)

    def recv(self, timeout: float | None = None) -> list[tuple[Any, Any]]:
        return self._impl.recv(timeout)

    @property
    def pending(self) -> int:
        """Work sent and not yet received."""
        return self._impl.pending()

    def drain(self) -> Iterable[tuple[Any, Any]]:
        """Yield ``(key, output)`` for every piece of work sent and not received yet, as each finishes;
        an exception a piece of work raised is raised here."""
        while self.pending:
            for key, out in self.recv(None):
                if isinstance(out, BaseException):
                    raise out
                yield key, out

    def stream(self, works: Iterable[Any]) -> Iterable[tuple[int, Any]]:
        """Send every piece of work, then yield ``(index, output)`` as each finishes (`drain`)."""
        for i, w in enumerate(works):
            self.send(i, w)
        yield from self.drain()

    def play(self, works: Sequence[Any]) -> list[Any]:
        out: list[Any] = [None] * len(works)
        for i, o in self.stream(works):
            out[i] = o
        return out

    def close(self) -> None:
        self._impl.close()

    def __enter__(self) -> "MatchPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
