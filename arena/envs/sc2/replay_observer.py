"""Reading StarCraft II's own replays (``.SC2Replay``) through the game's replay observer.

SCC and AlphaStar imitate people from the game's replays: the game plays a replay again and, from
one player's perspective, reports at each step what that player saw and the orders it gave
(``ResponseObservation.actions``). This module drives that through pysc2's own machinery, as its
``replay_actions`` does: `run_configs.get().start()` launches the game, ``controller.replay_info``
reads the replay's header (map, players, results, length, game build), ``controller.start_replay``
starts it for one player with the seats' interface options, and ``controller.step`` /
``controller.observe`` walk it ``step_mul`` loops at a time.

What comes out is what a match's seat would have seen and sent (`observed_moves`): the arena's view
of each step, built by the game's core from pysc2's observation (`SC2Core.view`, as
`SC2Core.observation` builds it in a match), and the player's order of that step as a move of the
core's action model (`SC2Core.move_of`: pysc2's `reverse_raw_action`, then `function_call`
backwards), as ``(seat, view arrays, move, None)``, the tuples a match keeps for an observed seat
(``MatchResult.observed``), so `arena.trainers.policy.imitation.from_observed` turns either into
the same demonstrations. Per step: the orders the game reports in the next observation are those
given after the view (pysc2 stamps each with its game loop); a camera move is no order; the first
order the model can say is the move, a step with none is a no-op, and a step whose only orders the
model cannot say (a build order, a unit beyond the entity slots), or whose order the game refused
(``action_errors``; a match keeps no refused move either), is left out.

The raw interface only (the default): a feature-layer replay would need pysc2's screen-coordinate
actions read backwards and is refused with one line. A replay plays only in the game build that
wrote it, on the map it was played on: a replay of another build, map or kind of game is a one-line
`ArenaError` before anything is read, as are a missing game, a missing map and the missing extra.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from arena.errors import ArenaError, clipped

#: The most files a folder of replays may hold, and the most bytes one replay may have.
MAX_REPLAYS = 10_000
MAX_REPLAY_BYTES = 64 << 20


@dataclass(frozen=True)
class ReplayInfo:
    """What the game says of a replay before playing it (``ResponseReplayInfo``)."""

    map_name: str
    map_path: str
    #: Player ids that played (participants and the game's AI), in order.
    players: tuple[int, ...]
    #: pysc2 player id -> +1 (victory), -1 (defeat), 0 (a tie, or undecided).
    outcome: dict[int, float]
    #: The ids of the players an arena agent could have been (not the game's AI).
    humans: tuple[int, ...]
    game_loops: int
    game_version: str
    base_build: int


def replay_files(folder: str | Path, what: str = "the folder") -> list[Path]:
    """The ``.SC2Replay`` files in `folder`, sorted; a one-line `ArenaError` for a missing folder, none
    in it, or more than `MAX_REPLAYS`."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise ArenaError(f"{what}: {folder} is not a folder: point it at a folder of .SC2Replay files")
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() == ".sc2replay")
    if not files:
        raise ArenaError(f"{what}: no .SC2Replay files in {folder} (a league with 'replays: files' keeps one "
                         "beside each StarCraft II match's replay)")
    if len(files) > MAX_REPLAYS:
        raise ArenaError(f"{what}: {folder} holds {len(files)} .SC2Replay files, more than {MAX_REPLAYS}: split it")
    return files


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


class ReplayObserver:
    """One game process that plays replays for `core`'s game (an `SC2Core`, never reset: it lends its
    settings, its views and its action model); use as a context manager (the game quits at its end)."""

    def __init__(self, core: Any):
        from arena.envs.sc2.game import SC2Core
        from arena.envs.sc2.install import check_install

        if not isinstance(core, SC2Core):
            raise ArenaError(f"{core.game_id} is not a StarCraft II game: .SC2Replay files are "
                             "read for the sc2/<map>-v0 games")
        if core.cfg.interface != "raw":
            raise ArenaError(f"{core.game_id}: .SC2Replay files are read for the raw interface (interface=raw), "
                             f"not {core.cfg.interface}")
        self.core = core
        from arena.envs.sc2._pysc2 import pysc2

        pysc2()  # the extra first (one line naming it), then the game
        check_install()
        self._run_configs, self._features = pysc2("run_configs"), pysc2("lib.features")
        self._map_path = core._map_path()
        check_install(self._map_path)
        self._proc = self._controller = None
        self._ping = None
        self.last_score = 0.0

    def __enter__(self) -> ReplayObserver:
        from arena.envs.sc2.game import SC2GameCrashed

        try:
            self._proc = self._run_configs.get().start(want_rgb=False)
            self._controller = self._proc.controller
            self._ping = self._controller.ping()
        except Exception as e:
            self.close()
            raise SC2GameCrashed(f"StarCraft II did not start to read replays: {type(e).__name__}: "
                                 f"{clipped(str(e).splitlines()[0] if str(e) else '', 200)}") from None
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        proc, self._proc, self._controller = self._proc, None, None
        if proc is not None:
            try:
                proc.close()
            except Exception:
                pass

    # -- one replay ---------------------------------------------------------------------------------
    def read(self, path: str | Path) -> bytes:
        """A replay file's bytes (at most `MAX_REPLAY_BYTES`)."""
        path = Path(path)
        size = path.stat().st_size
        if size > MAX_REPLAY_BYTES:
            raise ArenaError(f"{path} is {size} bytes, more than a replay may have ({MAX_REPLAY_BYTES})")
        return path.read_bytes()

    def info(self, data: bytes, name: str = "the replay") -> ReplayInfo:
        """The replay's header, checked against the game here and `core`'s map and players."""
        from arena.envs.sc2._pysc2 import sc_pb

        pb = sc_pb()
        try:
            got = self._controller.replay_info(data)
        except Exception as e:
            raise ArenaError(f"{name} is not a replay the game here can read: {clipped(_first_line(e), 200)}") from None
        players, outcome, humans = [], {}, []
        for extra in got.player_info:
            pid = int(extra.player_info.player_id)
            players.append(pid)
            if extra.player_info.type != pb.Computer:
                humans.append(pid)
            result = extra.player_result.result if extra.HasField("player_result") else pb.Undecided
            outcome[pid] = {pb.Victory: 1.0, pb.Defeat: -1.0}.get(result, 0.0)
        info = ReplayInfo(str(got.map_name), str(got.local_map_path), tuple(players), outcome, tuple(humans),
                          int(got.game_duration_loops), str(got.game_version), int(got.base_build))
        core = self.core
        here = int(self._ping.base_build)
        if info.base_build != here:
            raise ArenaError(f"{name} is from StarCraft II {info.game_version} (base build {info.base_build}); the "
                             f"game here is base build {here}: read it with Versions/Base{info.base_build} installed "
                             "under $SC2PATH as the game pysc2 launches")
        wanted = {_key(core.cfg.map), _key(Path(self._map_path).stem)}
        theirs = _key(Path(info.map_path).stem) if info.map_path else _key(info.map_name)
        if theirs not in wanted:
            raise ArenaError(f"{name} is a game on {info.map_path or info.map_name}, not {core.game_id}'s map "
                             f"{self._map_path}: imitate replays of the run's own map")
        if len(players) != len(core.players):
            raise ArenaError(f"{name} has {len(players)} players; {core.game_id} has {len(core.players)}")
        return info

    def observed_moves(self, data: bytes, player: int, info: ReplayInfo) -> Iterator[tuple]:
        """``(seat, view arrays, move, None)`` for each step player `player` (a pysc2 player id) moved in
        the replay `data`, in order (see the module docstring); its seat is ``player - 1``."""
        from arena.envs.sc2._pysc2 import sc2_env, sc_pb

        core, cfg, feat = self.core, self.core.cfg, self._features
        c = self._controller
        aif = core.interface_format()
        interface = sc2_env().SC2Env._get_interface(aif, require_raw=False)
        map_data = None
        if info.map_path:
            try:
                map_data = self._run_configs.get().map_data(info.map_path)
            except Exception:
                map_data = None  # the game finds it under Maps/ itself
        c.start_replay(sc_pb().RequestStartReplay(replay_data=data, map_data=map_data, options=interface,
                                                  observed_player_id=player))
        f = feat.features_from_game_info(c.game_info(), agent_interface_format=aif, map_name=cfg.map)
        seat, step = player - 1, 0
        pb = c.observe()
        obs = f.transform_obs(pb)
        first = None
        while not pb.player_result and not c.status_ended and (not cfg.max_steps or step < cfg.max_steps):
            c.step(cfg.step_mul)
            nxt = c.observe()
            view = core.view(obs, step)
            move = None if nxt.action_errors else self._move(f, nxt.actions, obs, view)
            if move is not None:
                yield seat, dict(view.arrays), move, None
            pb, obs, step = nxt, f.transform_obs(nxt), step + 1
            if first is None:  # pysc2's reward of a match's first step is always 0: the sum starts here
                first = float(obs["score_cumulative"][0])
        #: The observed player's score over the replay: a mini-game's return (pysc2's rewards summed).
        self.last_score = float(obs["score_cumulative"][0]) - (first or 0.0)

    def _move(self, f: Any, orders: Any, obs: Any, view: Any) -> dict | None:
        """The player's move of one step from the orders the game reported (None: none the model can say)."""
        from arena.envs.sc2._pysc2 import actions

        names = actions().RAW_FUNCTIONS
        unsaid = False
        for action in orders:
            try:
                call = f.reverse_raw_action(action, obs)
            except ValueError:
                unsaid = True
                continue
            if int(call.function) in (int(names.no_op.id), int(names.raw_move_camera.id)):
                continue
            move = self.core.move_of(call, view)
            if move is not None:
                return move
            unsaid = True
        return None if unsaid else {"type": 0}


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def replay_moves(core: Any, files: list[Path], players: list[int] | None = None) -> Iterator[tuple[int, list, list]]:
    """For each replay of `files` (in order), ``(its index, the seats' returns, its observed moves)`` as
    `arena.trainers.policy.imitation.from_observed` takes them: the moves of every player an arena agent
    could have been (not the game's AI), or of `players` (pysc2 player ids, 1 and 2), each perspective
    played through once. All replays are checked (build, map, players) before the first is played."""
    with ReplayObserver(core) as observer:
        infos = [observer.info(observer.read(path), str(path)) for path in files]
        for i, (path, info) in enumerate(zip(files, infos)):
            data = observer.read(path)
            who = [p for p in info.humans if players is None or p in players]
            returns = [info.outcome.get(s + 1, 0.0) for s in range(len(core.players))]
            moves = []
            for pid in who:
                moves.extend(observer.observed_moves(data, pid, info))
            if core.cfg.mini_game:
                returns = [float(observer.last_score)] if moves else returns
            yield i, returns, moves
