"""What the arena can say about a StarCraft II match's replay without the game playing it again.

An arena replay of a StarCraft II match records each seat's orders and the result, but the rules,
the map and the built-in AI are the game's: re-simulating it would need the same game build, the
same map file and a deterministic game, which the arena cannot check. So `arena replay verify`
says so plainly and checks what it can (`check_replay`):

* the header names the game's build (``engine``: version, base build, data version from the game);
* every recorded order is a well-formed move of the game's action model (its parts and their
  ranges; the masks of the moment were the game's and are not replayed);
* the result is consistent (one return a seat; +1 / -1 / 0 and a winner that agree on a 1v1 map);
* each file the game made (the ``.SC2Replay``) lies beside the replay and matches its recorded
  sha256;
* where a game is installed here, whether it is the recorded build (a ``.SC2Replay`` plays only in
  the build that wrote it: another build is one line naming the folder to install).

`arena replay show` prints the recorded steps and `watch_hint`: where the ``.SC2Replay`` is and the
command that plays it in the game.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arena.envs.sc2.install import check_install
from arena.errors import clipped
from arena.fsio import sha256_file, valid_match_id


def base_builds_here() -> list[int] | None:
    """The base builds of the game installed at ``$SC2PATH`` (``Versions/BaseNNNNN``), or None: no game."""
    try:
        root = check_install()
    except Exception:
        return None
    return sorted(int(p.name[4:]) for p in (root / "Versions").glob("Base*") if p.name[4:].isdigit())


def recorded_build(replay: Any) -> int | None:
    build = (replay.header.get("engine") or {}).get("sc2_base_build")
    return int(build) if isinstance(build, int) and not isinstance(build, bool) else None


#: The files the game makes beside a replay, by suffix: a header may name only these.
ATTACHMENT_SUFFIXES = (".SC2Replay",)
#: Largest game file that is hashed (a .SC2Replay of a long match is a few MB).
MAX_ATTACHMENT_BYTES = 256 << 20


def attachment_paths(replay: Any) -> dict[str, Path | None]:
    """Suffix -> where the game's file should lie (beside the replay file, named by the match id), or
    None where the replay was not read from a file. Only the game's own suffixes, and only for a match
    id of the arena's shape: a header cannot point these at another folder or file."""
    names = replay.header.get("attachments") or {}
    if not isinstance(names, dict) or not valid_match_id(replay.header.get("match_id")):
        return {}
    folder = Path(replay.source).parent if replay.source and "#" not in str(replay.source) else None
    return {s: (folder / f"{replay.header['match_id']}{s}" if folder is not None else None)
            for s in names if s in ATTACHMENT_SUFFIXES}


def _attachment_problems(replay: Any) -> list[str]:
    """What a header's attachments name that the arena never writes (read as differences, not files)."""
    names = replay.header.get("attachments") or {}
    if not isinstance(names, dict):
        return [f"the header's attachments are not a table of files: {clipped(repr(names), 80)}"]
    problems = [f"the header names a file {clipped(repr(s), 80)} that the game never makes (only "
                f"{', '.join(ATTACHMENT_SUFFIXES)}): not read" for s in names if s not in ATTACHMENT_SUFFIXES]
    if names and not valid_match_id(replay.header.get("match_id")):
        problems.append(f"the match id {clipped(repr(replay.header.get('match_id')), 80)} is not a match id "
                        "(letters, digits, _.:- ; no ..): its game files were not looked for")
    return problems


def build_note(replay: Any) -> str | None:
    """One line when the game here cannot play the replay's ``.SC2Replay`` (another build, or no game)."""
    build, here = recorded_build(replay), base_builds_here()
    if build is None:
        return None
    if here is None:
        return f"no StarCraft II game here (SC2PATH): the .SC2Replay plays only in the game, base build {build}"
    if build not in here:
        return (f"this replay is from StarCraft II base build {build}; the game here has {', '.join(map(str, here))}: "
                f"install Versions/Base{build} under $SC2PATH to watch it")
    return None


def not_resimulated(replay: Any) -> str:
    """Why the arena does not play the match again, in one line."""
    build = recorded_build(replay)
    return (f"replay {replay.header['match_id']} is a StarCraft II match: the arena cannot re-simulate it (the rules, "
            f"the map and the built-in AI are the game's{f', base build {build}' if build else ''}); "
            "its recorded steps show, and the game's own .SC2Replay plays it in the game")


def watch_hint(replay: Any) -> list[str]:
    """Lines for `arena replay show`: the game's replay file and how to watch it."""
    paths = attachment_paths(replay)
    path = paths.get(".SC2Replay")
    if ".SC2Replay" not in paths:
        return ["no .SC2Replay was kept for this match (the game did not save one, or the league keeps replays "
                "in its database: use replays: files)"]
    lines = []
    if path is None:
        lines.append("the game's .SC2Replay lies beside the replay file of this match (read from a database here)")
    elif not path.is_file():
        lines.append(f"the game's replay {path} is missing")
    else:
        lines.append(f"watch it in the game: python -m pysc2_evolved.bin.play --replay {path}")
    note = build_note(replay)
    if note:
        lines.append(note)
    return lines


def check_replay(core: Any, replay: Any) -> dict[str, list[str]]:
    """``{"differences", "warnings", "checks"}`` of what can be checked (the module docstring)."""
    h, r = replay.header, replay.result
    diffs, warnings, checks = [], [not_resimulated(replay)], []
    engine = h.get("engine") or {}
    if recorded_build(replay) is None:
        diffs.append("the header names no game build (engine.sc2_base_build)")
    else:
        checks.append(f"the game: StarCraft II {engine.get('sc2_game_version', '?')}, base build "
                      f"{engine['sc2_base_build']}, data version {engine.get('sc2_data_version', '?')}")
    model = core.action_model(0)
    moves = bad = 0
    for s in replay.steps:
        if s.get("event") not in (None, "ok") or "action" not in s:
            continue
        moves += 1
        _, why = model.check(s["action"])
        if why is not None and bad < 3:
            diffs.append(f"step {s.get('t')} (player {s.get('player')}): not a move of this game: {why}")
        bad += why is not None
    if not bad:
        checks.append(f"{moves} orders are well-formed moves")
    returns = r.get("returns") or []
    n = len(h.get("players") or [])
    if len(returns) != n:
        diffs.append(f"the result has {len(returns)} returns for {n} players")
    elif n == 2:
        z = returns[0]
        winner = {1.0: 0, -1.0: 1}.get(z)
        if returns[1] != -z or r.get("winner") != winner:
            diffs.append(f"the result does not add up: returns {returns}, winner {r.get('winner')}")
        else:
            checks.append(f"the result adds up (returns {returns})")
    diffs += _attachment_problems(replay)
    for suffix, path in attachment_paths(replay).items():
        digest = h["attachments"][suffix]
        if path is None:
            warnings.append(f"{suffix}: the replay was not read from a file, so its {suffix} was not looked for")
        elif path.is_symlink() or not path.is_file():
            diffs.append(f"{path.name} is missing beside the replay" + (" (a link is not followed)" if
                                                                       path.is_symlink() else ""))
        elif (got := sha256_file(path, MAX_ATTACHMENT_BYTES)) is None:
            diffs.append(f"{path.name} is larger than {MAX_ATTACHMENT_BYTES >> 20} MiB: not the file the match saved")
        elif got != digest:
            diffs.append(f"{path.name} is not the file the match saved (its sha256 differs)")
        else:
            checks.append(f"{path.name} is the file the match saved (sha256)")
    note = build_note(replay)
    if note:
        warnings.append(note)
    return {"differences": diffs, "warnings": warnings, "checks": checks}
