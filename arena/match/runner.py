"""The one job runner: play a scheduled match and return its `MatchResult`.

A `MatchJob` is everything needed to play one match anywhere (this process, a
forked or forkserver worker, a Ray task: `arena.match.pool`): the match id and
seed the scheduler gave it, the game, one agent spec per seat and the match
settings. The league, batch play and a human playing a league player run their
matches through :func:`run_match_job` (or, in lock step, through the pool's
`play_jobs`, which finishes each job the same way with `finish_job`), so a match
is played, recorded and written the same way whoever scheduled it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from arena.agents.base import derive_seed
from arena.agents.specs import make_agent
from arena.envs.registry import load_plugin, make_core
from arena.match.loop import InvalidMovePolicy, MatchResult, play_match
from arena.match.observe import Readers
from arena.replays.format import RECORD_MODES, replay_bytes, replay_path, write_replay


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
    #: fsync the replay before returning (False: the caller syncs a batch of them at once; the
    #: league's group commit does, before the batch's one transaction).
    durable: bool = True
    #: Set ``result.replay_blob`` to the replay's gzipped bytes (for a league that keeps replays in its
    #: database) instead of writing a file; the in-memory replay is then dropped unless ``keep_replay``.
    replay_blob: bool = False
    #: What a recorded replay holds: "text" (each player's observation text and the move's text too:
    #: what imitation and the league's tabular learners read) or "actions" (what re-simulation needs;
    #: `arena replay show` re-simulates the views).
    record: str = "text"
    #: Record the replay and keep it on the result (for callers that read it at once). A record mode
    #: instead of True (``play_matches(record="actions")`` passes its argument here) sets `record` and
    #: keeps the replay only when it is not written to `replay_dir`.
    keep_replay: bool | str = False
    #: Plug-in modules to import first (worker processes start without the caller's imports).
    plugins: tuple[str, ...] = ()
    #: Batch play: which of the caller's agents sits in each seat (reported back on the result).
    seats: tuple[int, ...] | None = None
    #: Seats whose every accepted move keeps what the player saw (``result.observed``: `arena.match.observe`).
    observe: tuple[int, ...] = ()
    #: What each observed move is answered by: None, nothing; ``"own"``, a strategy reader rebuilt from the
    #: seat's own spec; else the agent spec of a labeller whose strategy is read (`arena.match.observe.Readers`).
    ask: str | None = None

    def __post_init__(self):
        keep = self.keep_replay
        if isinstance(keep, str):
            object.__setattr__(self, "record", keep)
            object.__setattr__(self, "keep_replay", self.replay_dir is None)
        if self.record not in RECORD_MODES:
            raise ValueError(f"record must be one of {', '.join(map(repr, RECORD_MODES))}, got {self.record!r}")


def run_match_job(job: MatchJob, agents: Sequence[Any] | None = None, core: Any = None,
                  readers: Readers | None = None) -> MatchResult:
    """Play `job`. `agents` (one per seat; None entries are built from the job's specs), `core` and
    `readers` (the strategy readers of observed seats) let a caller reuse objects across matches
    (worker caches, a human at the terminal, LLM seats)."""
    for mod in job.plugins:
        load_plugin(mod)
    owned = core is None
    if owned:
        core = make_core(job.game, **job.game_kwargs)
    try:
        seated = list(agents) if agents is not None else [None] * len(job.specs)
        for seat, spec in enumerate(job.specs):
            if seated[seat] is None:
                seated[seat] = make_agent(spec, core, derive_seed(job.seed, seat))
        asks, lent = None, []
        if job.observe and job.ask is not None:
            readers = readers if readers is not None else Readers()
            asks, lent = readers.lend(job_game_key(job), core, job.specs, job.seed, job.observe, job.ask)
        res = play_match(core, seated, seed=job.seed, policy=job.policy, move_time_limit=job.move_time_limit,
                         max_moves=job.max_moves, match_id=job.match_id, record=job_record(job),
                         game_kwargs=job.game_kwargs or None, observe=job.observe, ask=asks)
        if lent:
            readers.give_back(lent)
    finally:
        if owned:  # a game with a process of its own (StarCraft II) quits with its match
            core.close()
    return finish_job(job, res)


def job_game_key(job: MatchJob) -> tuple:
    """The key of `job`'s game and settings in a process's caches."""
    return job.game, repr(sorted(job.game_kwargs.items()))


def job_record(job: MatchJob) -> str | bool:
    """What the match loop records for `job`: its record mode when the replay is written or kept, else nothing."""
    return job.record if job.replay_dir is not None or job.replay_blob or job.keep_replay else False


def finish_job(job: MatchJob, res: MatchResult) -> MatchResult:
    """What a job does with its played match: the seats, the replay file, and whether the replay stays."""
    if job.seats is not None:
        res.seats = list(job.seats)
    if job.replay_dir is None and not job.replay_blob:
        return res
    keep_replay(res, job.match_id, job.replay_dir, job.compress, job.durable)
    if not job.keep_replay:
        res.replay = None  # on disk or in bytes now: keep what crosses process boundaries small
    return res


def keep_replay(res: MatchResult, match_id: str, replay_dir: str | os.PathLike | None, compress: bool = True,
                durable: bool = True) -> MatchResult:
    """Keep `res`'s in-memory replay under `match_id`: as a file in `replay_dir` (``res.replay_path``), or,
    with no folder, as its gzipped bytes (``res.replay_blob``, for a league that keeps replays in its
    database)."""
    res.replay.header["match_id"] = match_id
    if replay_dir is not None:
        res.replay_path = str(write_replay(res.replay, replay_path(replay_dir, match_id, compress), durable=durable))
        if res.attachments:  # the game's own files (a .SC2Replay), beside the replay under its match id
            from arena.fsio import atomic_write_bytes

            for suffix, data in sorted(res.attachments.items()):
                atomic_write_bytes(Path(replay_dir) / f"{match_id}{suffix}", data, durable=durable)
            res.attachments = None  # on disk now
    else:
        res.replay_blob = replay_bytes(res.replay)
    return res
