"""Matches: the one match engine, the match pool, the one job runner, batch play and replay verification.

* :mod:`arena.match.loop`    the engine: `Match`, `run_matches`, `play_match`, `MatchResult`, the
  invalid-move policy.
* :mod:`arena.match.pool`    `MatchPool`: the engine behind send/receive backends (this process,
  worker processes, Ray); `play_jobs`, `play_lockstep`.
* :mod:`arena.match.runner`  `run_match_job`: play one scheduled match (a `MatchJob`) and return its
  `MatchResult`, with the replay written.
* :mod:`arena.match.batch`   many matches with seat swapping, on the pool.
* :mod:`arena.match.verify`  re-simulate a replay and report the first difference.
"""

from arena.match.loop import InvalidMovePolicy, MatchResult, MoveTimeout, RecordedFault, play_match

__all__ = ["InvalidMovePolicy", "MatchResult", "MoveTimeout", "RecordedFault", "play_match"]
