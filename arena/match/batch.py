"""Many matches: seat swapping, optional worker processes, replays on disk, a summary table."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Iterable, Sequence

from arena.agents.base import derive_seed
from arena.agents.specs import make_agent
from arena.envs.registry import load_plugin, make_core
from arena.match.loop import InvalidMovePolicy, MatchResult, check_agent_count
from arena.match.runner import MatchJob, run_match_job
from arena.procs import die_with


def schedule(n: int, specs: Sequence[str], seed: int, swap_seats: bool, game_id: str, *,
             game_kwargs: dict | None = None, policy: InvalidMovePolicy | None = None,
             move_time_limit: float | None = None, max_moves: int | None = None, replay_dir: str | None = None,
             compress: bool = True, record: bool = False, plugins: Sequence[str] = ()) -> list[MatchJob]:
    """Match i uses seed `seed + i` and, with seat swapping, rotates who sits where."""
    slug = game_id.replace("/", "_")
    k = len(specs)
    jobs = []
    for i in range(n):
        shift = i % k if swap_seats else 0
        seats = tuple((s + shift) % k for s in range(k))
        jobs.append(MatchJob(match_id=f"{slug}-{seed + i:08d}-{i:05d}", game=game_id,
                             specs=tuple(specs[j] for j in seats), seed=seed + i, game_kwargs=dict(game_kwargs or {}),
                             policy=policy or InvalidMovePolicy(), move_time_limit=move_time_limit,
                             max_moves=max_moves, replay_dir=replay_dir, compress=compress, keep_replay=record,
                             plugins=tuple(plugins), seats=seats))
    return jobs


def _play_jobs(game: str, specs: Sequence[str], jobs: Iterable[MatchJob], plugins: Sequence[str] = (),
               game_kwargs: dict | None = None, on_result: Callable[[MatchResult], None] | None = None,
               cache: dict | None = None) -> list[MatchResult]:
    for mod in plugins:
        load_plugin(mod)
    key = (game, repr(sorted((game_kwargs or {}).items())), tuple(specs))
    if cache is not None and key in cache:
        core, agents = cache[key]
    else:
        core = make_core(game, **(game_kwargs or {}))
        # One agent object per spec, built once and reset with a per-match seed.
        agents = [make_agent(s, core, derive_seed(0, k)) for k, s in enumerate(specs)]
        if cache is not None:
            cache.clear()
            cache[key] = (core, agents)
    results = []
    for job in jobs:
        res = run_match_job(job, agents=[agents[k] for k in job.seats], core=core)
        results.append(res)
        if on_result is not None:
            on_result(res)
        if any(getattr(a, "stop_requested", False) for a in agents):
            break  # an agent ended the run (a person who quit): the matches played so far stand
    return results


def _batched_agents(core, specs: Sequence[str]) -> dict:
    """The agents among `specs` that answer many moves in one call (neural policies), built once."""
    out = {}
    for k, spec in enumerate(specs):
        agent = make_agent(spec, core, derive_seed(0, k))
        if callable(getattr(agent, "act_batch", None)):
            out[spec] = agent
    return out


def _play_jobs_lockstep(game: str, specs: Sequence[str], jobs: Sequence[MatchJob], shared: dict,
                        plugins: Sequence[str], game_kwargs: dict | None,
                        on_result: Callable[[MatchResult], None] | None, chunk: int = 64) -> list[MatchResult]:
    """The jobs in lock step, `chunk` matches at a time: each neural policy answers every match it plays in
    with one forward pass a tick (`arena.match.lockstep`); replays, seats and results as `run_match_job`'s."""
    from arena.match.lockstep import play_lockstep
    from arena.match.runner import finish_job

    for mod in plugins:
        load_plugin(mod)
    for agent in shared.values():
        agent.reset(jobs[0].seed if jobs else 0)
    results: list[MatchResult] = []
    for i in range(0, len(jobs), chunk):
        part = list(jobs[i:i + chunk])
        first = part[0]
        write = first.replay_dir is not None or first.replay_blob

        def done(res: MatchResult, part=part) -> None:
            finish_job(next(j for j in part if j.match_id == res.match_id), res)
            if on_result is not None:
                on_result(res)

        results += play_lockstep(game, [list(j.specs) for j in part], [j.seed for j in part], policy=first.policy,
                                 max_moves=first.max_moves,
                                 record=first.record if write or first.keep_replay else False,
                                 game_kwargs=game_kwargs, match_ids=[j.match_id for j in part], shared=shared,
                                 on_result=done)
    return results


_WORKER_CACHE: dict = {}


def _init_worker(owner: int) -> None:
    # Ctrl-C goes to the whole process group: the parent stops the run and prints what finished;
    # a worker that also raised KeyboardInterrupt would only print its traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with(owner)  # and the workers die with this process, even on kill -9


def _worker(args):
    torch = sys.modules.get("torch")
    if torch is not None:
        # A forked child whose parent already ran torch ops: the parent's OpenMP thread pool does not
        # survive the fork and the child's first parallel op would wait on it forever; one intra-op
        # thread per worker needs no pool (and workers x threads would oversubscribe the cores anyway).
        torch.set_num_threads(1)
    return _play_jobs(*args, cache=_WORKER_CACHE)


def play_matches(
    game: str,
    specs: Sequence[str],
    n: int,
    seed: int = 0,
    *,
    swap_seats: bool = True,
    workers: int = 1,
    replay_dir: str | os.PathLike | None = None,
    compress: bool = True,
    policy: InvalidMovePolicy | None = None,
    move_time_limit: float | None = None,
    max_moves: int | None = None,
    plugins: Sequence[str] = (),
    game_kwargs: dict | None = None,
    record: bool = False,
    on_result: Callable[[MatchResult], None] | None = None,
    only: Collection[int] | None = None,
) -> list[MatchResult]:
    """Play `n` matches of `game` between agents built from `specs`, seats rotating match by match.

    Replays are written to `replay_dir` when given, else kept on the results with `record=True`.
    `only` plays just those of the `n` matches (by index, each with the seed and seats it has among
    all `n`): a run stopped part-way plays the rest.
    """
    policy = policy or InvalidMovePolicy()
    core = make_core(game, **(game_kwargs or {}))
    check_agent_count(core, len(specs))
    rdir = str(replay_dir) if replay_dir is not None else None
    if rdir is not None:
        Path(rdir).mkdir(parents=True, exist_ok=True)
    jobs = schedule(n, specs, seed, swap_seats, core.game_id, game_kwargs=game_kwargs, policy=policy,
                    move_time_limit=move_time_limit, max_moves=max_moves, replay_dir=rdir, compress=compress,
                    record=record, plugins=plugins)
    if only is not None:
        keep = set(only)
        jobs = [j for i, j in enumerate(jobs) if i in keep]
        n = len(jobs)
        if not jobs:
            return []
    common = (tuple(plugins), game_kwargs)
    if (workers <= 1 or n <= 1) and move_time_limit is None and "human" not in specs:
        batched = _batched_agents(core, specs)
        if batched:
            return _play_jobs_lockstep(game, specs, jobs, batched, plugins, game_kwargs, on_result)
    if workers <= 1 or n <= 1:
        return _play_jobs(game, list(specs), jobs, *common, on_result=on_result)
    workers = min(workers, n)
    for k, spec in enumerate(specs):  # warm per-process caches (CFR policies) before forking
        if spec != "human":
            make_agent(spec, core, derive_seed(0, k))
    # Small chunks stream results back (progress, and a clean stop keeps what finished); each worker
    # keeps its game and agents between chunks.
    size = max(1, min(10, n // (workers * 8)))
    chunks = [jobs[i:i + size] for i in range(0, n, size)]
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    results: list[MatchResult] = []
    with ctx.Pool(workers, initializer=_init_worker, initargs=(os.getpid(),)) as pool:
        for part in pool.imap_unordered(_worker, [(game, list(specs), c, *common) for c in chunks]):
            results.extend(part)
            if on_result is not None:
                for r in part:
                    on_result(r)
    results.sort(key=lambda r: r.match_id)
    return results


@dataclass
class AgentSummary:
    spec: str
    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    total_return: float = 0.0
    invalid: int = 0
    forfeits: int = 0
    move_time: float = 0.0
    move_calls: int = 0

    @property
    def win_rate(self) -> float:
        return (self.wins + 0.5 * self.draws) / self.games if self.games else 0.0

    @property
    def mean_return(self) -> float:
        return self.total_return / self.games if self.games else 0.0


def summarize(results: Sequence[MatchResult], specs: Sequence[str]) -> list[AgentSummary]:
    """Per original agent (not per seat): games, wins/draws/losses, mean return, invalid moves."""
    out = [AgentSummary(s) for s in specs]
    for r in results:
        seats = r.seats or list(range(len(specs)))
        for seat, k in enumerate(seats):
            s = out[k]
            s.games += 1
            s.total_return += r.returns[seat]
            s.invalid += r.invalid[seat] if r.invalid else 0
            s.forfeits += int(r.forfeiter == seat)
            s.move_time += r.move_time_total[seat] if r.move_time_total else 0.0
            s.move_calls += r.move_calls[seat] if r.move_calls else 0
            if r.draw:
                s.draws += 1
            elif r.winner == seat:
                s.wins += 1
            elif r.winner is not None or len(r.returns) > 1:
                s.losses += 1
    return out

