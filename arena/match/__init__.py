"""Matches: the one match loop, the one job runner, batch play and replay verification.

* :mod:`arena.match.loop`    `play_match`, `MatchResult`, the invalid-move policy.
* :mod:`arena.match.runner`  `run_scheduled`: play one scheduled match (a `MatchJob`) and return its
  `MatchResult`, with the replay written; the league's executors, batch play, live human play and
  the trainers' rollouts all go through it.
* :mod:`arena.match.batch`   many matches with seat swapping and worker processes.
* :mod:`arena.match.verify`  re-simulate a replay and report the first difference.
"""

from arena.match.loop import InvalidMovePolicy, MatchResult, MoveTimeout, RecordedFault, play_match

__all__ = ["InvalidMovePolicy", "MatchResult", "MoveTimeout", "RecordedFault", "play_match"]
