"""The one job runner: play a scheduled match and return its `MatchResult`.

A `MatchJob` is everything needed to play one match anywhere (this process, a
forked or forkserver worker, a Ray task): the match id and seed the scheduler
gave it, the game, one agent spec per seat and the match settings. The league's
executors, batch play, a human playing a league player and the trainers'
rollouts all run their matches through :func:`run_match_job`, so a match is
played, recorded and written the same way whoever scheduled it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from arena.agents.base import derive_seed
from arena.agents.specs import make_agent
from arena.envs.registry import load_plugin, make_core
from arena.match.loop import InvalidMovePolicy, MatchResult, play_match
from arena.replays.format import replay_path, write_replay


@dataclass(frozen=True)
class MatchJob:
    """One scheduled match. Plain data: it pickles to worker processes and Ray tasks."""

    match_id: str
    game: str
    #: One agent spec per seat.
    specs: tuple[str, ...]
    seed: int
    game_kwargs: dict = field(default_factory=dict)
    policy: InvalidMovePolicy = field(default_factory=InvalidMovePolicy)
    move_time_limit: float | None = None
    max_moves: int | None = None
    #: Write the replay here (atomically) and set ``result.replay_path``; the in-memory replay is
    #: then dropped unless ``keep_replay``.
    replay_dir: str | None = None
    compress: bool = True
    #: Record the replay and keep it on the result (for callers that read it at once).
    keep_replay: bool = False
    #: Plug-in modules to import first (worker processes start without the caller's imports).
    plugins: tuple[str, ...] = ()
    #: Batch play: which of the caller's agents sits in each seat (reported back on the result).
    seats: tuple[int, ...] | None = None


def run_match_job(job: MatchJob, agents: Sequence[Any] | None = None, core: Any = None) -> MatchResult:
    """Play `job`. `agents` (one per seat; None entries are built from the job's specs) and `core`
    let a caller reuse objects across matches (worker caches, a human at the terminal, LLM seats)."""
    for mod in job.plugins:
        load_plugin(mod)
    if core is None:
        core = make_core(job.game, **job.game_kwargs)
    seated = list(agents) if agents is not None else [None] * len(job.specs)
    for seat, spec in enumerate(job.specs):
        if seated[seat] is None:
            seated[seat] = make_agent(spec, core, derive_seed(job.seed, seat))
    write = job.replay_dir is not None
    res = play_match(core, seated, seed=job.seed, policy=job.policy, move_time_limit=job.move_time_limit,
                     max_moves=job.max_moves, match_id=job.match_id, record=write or job.keep_replay,
                     game_kwargs=job.game_kwargs or None)
    if job.seats is not None:
        res.seats = list(job.seats)
    if write:
        res.replay_path = str(write_replay(res.replay, replay_path(job.replay_dir, job.match_id, job.compress)))
        if not job.keep_replay:
            res.replay = None  # on disk now: keep what crosses process boundaries small
    return res
