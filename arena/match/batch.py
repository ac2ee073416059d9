"""Many matches: seat swapping, optional worker processes, replays on disk, a summary table."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Sequence

from arena.agents.base import derive_seed
from arena.agents.specs import make_agent
from arena.envs.registry import make_core
from arena.match.loop import InvalidMovePolicy, MatchResult, check_agent_count
from arena.match.pool import JobsWork, MatchPool, play_jobs
from arena.match.runner import MatchJob


def schedule(n: int, specs: Sequence[str], seed: int, swap_seats: bool, game_id: str, *,
             game_kwargs: dict | None = None, policy: InvalidMovePolicy | None = None,
             move_time_limit: float | None = None, max_moves: int | None = None, replay_dir: str | None = None,
             compress: bool = True, record: bool = False, plugins: Sequence[str] = (), observe: Collection[int] = (),
             ask: str | None = None) -> list[MatchJob]:
    """Match i uses seed `seed + i` and, with seat swapping, rotates who sits where. `observe`: which of
    `specs` (by index) are observed, wherever they sit (`MatchJob.observe`, `MatchJob.ask`)."""
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
                             plugins=tuple(plugins), seats=seats,
                             observe=tuple(s for s, j in enumerate(seats) if j in observe), ask=ask))
    return jobs


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
    observe: Collection[int] = (),
    ask: str | None = None,
) -> list[MatchResult]:
    """Play `n` matches of `game` between agents built from `specs`, seats rotating match by match.

    Replays are written to `replay_dir` when given, else kept on the results with `record=True`.
    `only` plays just those of the `n` matches (by index, each with the seed and seats it has among
    all `n`): a run stopped part-way plays the rest.

    `observe`: which of `specs` (by index) keep what they saw as they played, wherever they sit
    (``result.observed``, `arena.match.observe`); `ask`: what answers at each of their moves (None,
    ``"own"`` or a labeller's spec: `MatchJob.ask`), the same whatever the number of workers.
    """
    from arena.workers import check_workers

    check_workers(workers, "workers")  # before the game is made or a process started
    policy = policy or InvalidMovePolicy()
    core = make_core(game, **(game_kwargs or {}))
    check_agent_count(core, len(specs))
    rdir = str(replay_dir) if replay_dir is not None else None
    if rdir is not None:
        Path(rdir).mkdir(parents=True, exist_ok=True)
    jobs = schedule(n, specs, seed, swap_seats, core.game_id, game_kwargs=game_kwargs, policy=policy,
                    move_time_limit=move_time_limit, max_moves=max_moves, replay_dir=rdir, compress=compress,
                    record=record, plugins=plugins, observe=frozenset(observe), ask=ask)
    if only is not None:
        keep = set(only)
        jobs = [j for i, j in enumerate(jobs) if i in keep]
        n = len(jobs)
        if not jobs:
            return []
    # A neural policy among the specs answers its moves of many matches in one call (lock step).
    lockstep = move_time_limit is None and "human" not in specs and any(
        callable(getattr(make_agent(spec, core, derive_seed(0, k)), "act_batch", None))
        for k, spec in enumerate(specs))
    if workers <= 1 or n <= 1:
        return play_jobs(jobs, lockstep=lockstep, on_result=on_result)
    workers = min(workers, n)
    # Small chunks stream results back (progress, and a clean stop keeps what finished); each worker
    # keeps its game and agents between chunks. Forked workers inherit the caches warmed above (CFR
    # policies are solved once, here).
    size = max(1, min(10, n // (workers * 8)))
    chunks = [JobsWork(jobs[i:i + size], lockstep=lockstep) for i in range(0, n, size)]
    results: list[MatchResult] = []
    with MatchPool("local", workers, start="fork") as pool:
        for _, part in pool.stream(chunks):
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

