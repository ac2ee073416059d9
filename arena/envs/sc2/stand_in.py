"""A stand-in StarCraft II game executable that speaks the real protocol (`arena sc2 stand-in DIR`).

pysc2 launches ``$SC2PATH/Versions/Base75689/SC2_x64 -listen 127.0.0.1 -port N -dataDir D
-tempDir T [-eglpath lib | -osmesapath lib | -headlessNoRender] [-dataVersion X]`` and talks to
it over a websocket at ``ws://127.0.0.1:N/sc2api``: one serialized ``s2clientprotocol``
``Request`` per frame, one ``Response`` back, each carrying the game's status. This module is
that executable (`make_sc2path` writes a launcher for it), so that the unmodified pysc2 client
path -- `SC2Env`, `RemoteController`, `StarcraftProcess` -- runs end to end without the game: the
test suite's StarCraft II tests run against it, and a person sees a league, ratings and replays on
StarCraft II ids before installing the game (docs/sc2.md, "Without the game").

Standard library and the ``s2clientprotocol`` protobufs only: the websocket server (the RFC 6455
handshake and frames) is written here, since pysc2's client is the only peer it must satisfy.

The world is a toy: a 64x64 map, marines (unit type 48) that move at 0.35 per game loop and
shoot (range 5, 6 damage, 10 loops cool-down, 45 hit points), and

* on a mini-game map (``mini_games/*``, one player): a beacon (unit type 317, neutral) that the
  marine scores a point on reaching, after which the beacon moves; the episode ends at
  ``FAKE_SC2_EPISODE_LOOPS`` (default 2688, MoveToBeacon's 120 s) with Victory if it scored;
* on any other map (two players, agents or the built-in bot): three marines a side; a side with
  no units left loses, both at once is a tie. The bot attacks the nearest enemy with every idle
  unit (``FAKE_SC2_BOT_PASSIVE=1``: it stays put). Idle units fire at enemies in range.

Abilities (``Observation.abilities``, which pysc2 turns into ``available_actions``): Move (16),
Attack (23) and Stop (4) while units are selected; orders take the specific or general ids.
An action naming a unit that is not the player's, an unknown ability or no selected units gets
an error ``ActionResult`` (in ``ResponseAction`` and the next observation's ``action_errors``).

Two agents: pysc2 launches one game per agent, creates the game on the first (the host) and
joins both with ``server_ports``. As the real game does, the processes meet over those ports:
the host, on ``join_game``, holds the world and listens on ``server_ports.game_port``; the other
process connects there and forwards its player's requests (JSON lines, protobufs in base64).
The world steps in lockstep: a step returns once every joined agent has asked for that loop.
A player that leaves (or whose process disconnects) before the end loses.

Replays. ``save_replay`` answers with the stand-in's own replay format (`REPLAY_MAGIC`, then one
JSON object, `read_replay`): the map, the world's seed and episode, the switches that change the world
(below), each player's setup and interface options, every action each player sent with its game
loop, the last loop and the results -- all it needs to play the game again, since its world is
deterministic given those. ``replay_info`` reads that header (map, players and results, game loops,
game version and build); ``start_replay`` (``replay_data`` or ``replay_path``, ``observed_player_id``,
``options``) builds the world again and ``step`` / ``observation`` play it on: each loop's recorded
actions are applied as they were, and the observed player sees what it saw, with the interface
options of the request, its own actions of the interval in ``ResponseObservation.actions`` (the
raw unit commands as sent, stamped with their game loop) and its refused ones in
``action_errors``; at the last recorded loop the replay ends (``player_result``: the recorded
results, Undecided where the game had not ended). The real game differs: its replays are MPQ
archives of the players' commands that only the build that wrote them plays, it reports the
commands it executed (not the requests, so no empty no-op actions, and a person's selections and
camera moves as well), and ``disable_fog``, ``realtime`` and observer actions are its own; the
stand-in reads only its own replays (anything else is ``InvalidReplayData``) and takes no actions
in a replay.

Environment variables for tests:

* ``FAKE_SC2_DIE_AT_LOOP=N``: the process exits (code 3) without answering the step that reaches
  game loop N, as a crashed game would;
* ``FAKE_SC2_REJECT_ABILITY=ID``: every command with that ability id gets ``ActionResult.Error``;
* ``FAKE_SC2_EPISODE_LOOPS=N``: mini-game length (and, when set, a tie at N on two-player maps);
* ``FAKE_SC2_LISTEN_DELAY=S``: wait S seconds before listening (a slow start);
* ``FAKE_SC2_BOT_PASSIVE=1``: the built-in bot does nothing;
* ``FAKE_SC2_TRACE=path``: append one line per request (pid, request kind, detail) to that file.

Every launch appends a JSON line (pid, argv, start time) to ``<dataDir>/fake_sc2_launches.jsonl``.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import math
import os
import random
import shutil
import socket
import struct
import sys
import threading
import time
from pathlib import Path

from s2clientprotocol import common_pb2 as common
from s2clientprotocol import error_pb2, raw_pb2, score_pb2, spatial_pb2, ui_pb2
from s2clientprotocol import sc2api_pb2 as sc_pb

GAME_VERSION = "4.10.0"
BASE_BUILD = 75689
DATA_VERSION = "B89B5D6FA7CBF6452E721311BFBC6CB2"
LAUNCH_LOG = "fake_sc2_launches.jsonl"
MINI_GAMES = ("BuildMarines", "CollectMineralsAndGas", "CollectMineralShards", "DefeatRoaches",
              "DefeatZerglingsAndBanelings", "FindAndDefeatZerglings", "MoveToBeacon")
#: Two-player maps `make_sc2path` creates (placeholder bytes): a melee map and a ladder map.
TWO_PLAYER_MAPS = ("Melee/Simple64.SC2Map", "Ladder2017Season4/AbyssalReefLE.SC2Map")
#: The stand-in's replay files: this line, then one JSON object (`World.replay`, `read_replay`).
REPLAY_MAGIC = b"FAKE-SC2Replay\n"
REPLAY_FORMAT = 2

MAP_SIZE = 64
MARINE, BEACON = 48, 317
NEUTRAL = 16
MOVE, ATTACK, STOP, SMART = 16, 23, 4, 1
GENERAL = {3794: MOVE, 3674: ATTACK, 3665: STOP}
SPEED, RANGE, DAMAGE, COOLDOWN, HEALTH, SIGHT = 0.35, 5.0, 6, 10, 45, 9.0
JOIN_TIMEOUT = STEP_TIMEOUT = 60.0

Status = sc_pb.Status
OK = error_pb2.ActionResult.Value("Success")
NOT_SUPPORTED = error_pb2.ActionResult.Value("NotSupported")
REJECTED = error_pb2.ActionResult.Value("Error")
NOT_YOURS = error_pb2.ActionResult.Value("YouCantControlThatUnit")


# ---------------------------------------------------------------------------------------------
# The websocket server side (RFC 6455): handshake, binary frames out, any data frames in.

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE = 64 << 20


class WebSocket:
    """One accepted websocket connection; `recv` gives whole messages, `send` binary frames."""

    def __init__(self, conn: socket.socket, leftover: bytes = b""):
        self.conn, self.buf = conn, bytearray(leftover)

    @classmethod
    def accept(cls, conn: socket.socket) -> WebSocket | None:
        """Read the HTTP upgrade request and answer it: 101 for ``/sc2api``, else 404 or 400."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk or len(data) > 65536:
                conn.close()
                return None
            data += chunk
        head, _, leftover = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
        key = headers.get("sec-websocket-key")
        if len(parts) < 2 or parts[1] != "/sc2api":
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            conn.close()
            return None
        if not key or "websocket" not in headers.get("upgrade", "").lower():
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            conn.close()
            return None
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Accept: {accept}\r\n\r\n").encode())
        return cls(conn, leftover)

    def _read(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            chunk = self.conn.recv(max(65536, n - len(self.buf)))
            if not chunk:
                return None
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def recv(self) -> bytes | None:
        """The next data message (text or binary, as bytes), or None once the peer closed."""
        message, opcode_of_message = bytearray(), None
        while True:
            head = self._read(2)
            if head is None:
                return None
            fin, opcode = head[0] & 0x80, head[0] & 0x0F
            masked, length = head[1] & 0x80, head[1] & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2) or b"\0\0")[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8) or b"\0" * 8)[0]
            if length > MAX_MESSAGE:
                return None
            mask = self._read(4) if masked else None
            payload = self._read(length) if length else b""
            if payload is None or (masked and mask is None):
                return None
            if mask:
                payload = _unmask(payload, mask)
            if opcode == 0x8:  # close: echo it, then done
                self._frame(0x8, payload[:2])
                return None
            if opcode == 0x9:  # ping
                self._frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            if opcode in (0x1, 0x2):
                opcode_of_message = opcode
                message = bytearray(payload)
            elif opcode == 0x0 and opcode_of_message is not None:
                message += payload
            else:
                return None
            if fin:
                return bytes(message)

    def send(self, payload: bytes):
        self._frame(0x2, payload)

    def _frame(self, opcode: int, payload: bytes):
        n = len(payload)
        if n < 126:
            head = struct.pack(">BB", 0x80 | opcode, n)
        elif n < 1 << 16:
            head = struct.pack(">BBH", 0x80 | opcode, 126, n)
        else:
            head = struct.pack(">BBQ", 0x80 | opcode, 127, n)
        try:
            self.conn.sendall(head + payload)
        except OSError:
            pass

    def close(self):
        try:
            self.conn.close()
        except OSError:
            pass


def _unmask(payload: bytes, mask: bytes) -> bytes:
    """XOR with the 4-byte mask, done on whole integers (a byte loop is slow for big messages)."""
    n = len(payload)
    key = int.from_bytes((mask * (n // 4 + 1))[:n], "little")
    return (int.from_bytes(payload, "little") ^ key).to_bytes(n, "little")


# ---------------------------------------------------------------------------------------------
# The world.

def env_int(name: str, default: int | None = None) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


class Unit:
    __slots__ = (
        "cooldown",
        "facing",
        "health",
        "health_max",
        "order",
        "owner",
        "radius",
        "tag",
        "unit_type",
        "x",
        "y",
    )

    def __init__(self, tag, owner, unit_type, x, y, health=HEALTH, radius=0.375):
        self.tag, self.owner, self.unit_type, self.x, self.y = tag, owner, unit_type, x, y
        self.health = self.health_max = health
        self.radius, self.order, self.cooldown, self.facing = radius, None, 0, 0.0


class Player:
    def __init__(self, pid: int, setup: sc_pb.PlayerSetup):
        self.pid, self.type = pid, setup.type
        self.race = setup.race or common.Terran
        self.difficulty, self.ai_build = setup.difficulty, setup.ai_build
        self.name, self.options = "", None
        self.joined = setup.type == sc_pb.Computer
        self.left = False
        self.reset()

    def reset(self):
        self.want = 0  # the game loop this player asked to step to
        self.selected: list[int] = []
        self.camera = (MAP_SIZE / 2, MAP_SIZE / 2)
        self.actions: list[sc_pb.Action] = []
        self.errors: list[sc_pb.ActionError] = []
        self.dead: list[int] = []
        self.score = 0
        self.killed = 0


class World:
    """The shared game: every method takes the player id and holds the lock."""

    def __init__(self, create: sc_pb.RequestCreateGame, map_path: str):
        self.map_path = map_path
        self.map_name = Path(map_path).stem
        self.mini_game = "mini_games" in map_path.replace("\\", "/") or self.map_name in MINI_GAMES
        self.seed = create.random_seed if create.HasField("random_seed") else random.randrange(1 << 30)
        self.players = {i + 1: Player(i + 1, s) for i, s in enumerate(create.player_setup)}
        self.cond = threading.Condition()
        self.episode_loops = env_int("FAKE_SC2_EPISODE_LOOPS", 2688 if self.mini_game else None)
        self.bot_passive = os.environ.get("FAKE_SC2_BOT_PASSIVE") == "1"
        self.reject = env_int("FAKE_SC2_REJECT_ABILITY")
        self.episode = 0
        #: In a replay (`from_replay`): the recorded game's final loop, results and actions by loop.
        self.replaying: dict | None = None
        self.reset()

    # -- set-up
    def participants(self):
        return [p for p in self.players.values() if p.type == sc_pb.Participant]

    def reset(self):
        with self.cond:
            self.episode += 1
            self.rng = random.Random(self.seed + self.episode)
            self.loop, self.units, self.next_tag = 0, {}, 1
            self.results: dict[int, int] = {}
            #: Every action a player sent this episode, in order: (game loop, player id, the Action's bytes).
            self.log: list[tuple[int, int, bytes]] = []
            for p in self.players.values():
                p.reset()
                p.left = False
            if self.mini_game:
                self.add(1, MARINE, *self.spot())
                self.add(NEUTRAL, BEACON, *self.spot(), health=0, radius=1.0)
            else:
                for pid, x in ((1, 26.0), (2, 38.0)):
                    for i in range(3):
                        self.add(pid, MARINE, x, 30.0 + 2 * i)
            self.cond.notify_all()

    def spot(self):
        return self.rng.uniform(23, 41), self.rng.uniform(23, 41)

    def add(self, owner, unit_type, x, y, **kw):
        u = Unit(0x100000000 + self.next_tag, owner, unit_type, x, y, **kw)
        self.next_tag += 1
        self.units[u.tag] = u
        return u

    def join(self, options: sc_pb.InterfaceOptions, race: int, name: str) -> int:
        with self.cond:
            free = [p for p in self.participants() if not p.joined]
            if not free:
                raise GameError("the game is full")
            p = free[0]
            p.joined, p.options, p.name = True, options, name
            if race:
                p.race = race
            self.cond.notify_all()
            return p.pid

    def wait_full(self, timeout=JOIN_TIMEOUT):
        with self.cond:
            if not self.cond.wait_for(lambda: all(p.joined for p in self.participants()), timeout):
                raise GameError("timed out waiting for the other players to join")

    @property
    def ended(self) -> bool:
        return bool(self.results)

    def status(self) -> int:
        return Status.ended if self.ended else Status.in_replay if self.replaying else Status.in_game

    # -- requests
    def seen_by(self, pid: int) -> Player:
        """Player `pid` as its observations show it: in a replay, with the replay's interface options
        (its recorded actions keep the options it played with)."""
        me = self.players[pid]
        if not self.replaying or self.replaying["options"] is me.options:
            return me
        view = copy.copy(me)
        view.options = self.replaying["options"]
        return view

    def game_info(self, pid: int) -> sc_pb.ResponseGameInfo:
        with self.cond:
            info = sc_pb.ResponseGameInfo(map_name=self.map_name, local_map_path=self.map_path)
            info.mod_names.append("Mods/Liberty.SC2Mod")
            for p in self.players.values():
                pi = info.player_info.add(player_id=p.pid, type=p.type, race_requested=p.race,
                                          race_actual=p.race if p.race != common.Random else common.Terran)
                if p.type == sc_pb.Computer:
                    pi.difficulty = p.difficulty
                    if p.ai_build:
                        pi.ai_build = p.ai_build
                else:
                    pi.player_name = p.name
            sr = info.start_raw
            sr.map_size.x = sr.map_size.y = MAP_SIZE
            for grid, value, bits in ((sr.pathing_grid, 0xFF, 1), (sr.placement_grid, 0xFF, 1),
                                      (sr.terrain_height, 128, 8)):
                grid.size.x = grid.size.y = MAP_SIZE
                grid.bits_per_pixel = bits
                grid.data = bytes([value]) * (MAP_SIZE * MAP_SIZE * bits // 8)
            sr.playable_area.p0.x = sr.playable_area.p0.y = 0
            sr.playable_area.p1.x = sr.playable_area.p1.y = MAP_SIZE
            if not self.mini_game:
                for x in (26.5, 37.5):
                    sr.start_locations.add(x=x, y=32.5)
            info.options.CopyFrom(self.seen_by(pid).options)
            return info

    def act(self, pid: int, request: sc_pb.RequestAction) -> sc_pb.ResponseAction:
        with self.cond:
            out = sc_pb.ResponseAction()
            if self.replaying:
                raise GameError("a replay takes no actions")
            for action in request.actions:
                if not self.ended:
                    self.log.append((self.loop, pid, action.SerializeToString()))
                result = OK if self.ended else self.apply(pid, action)
                out.result.append(result)
            return out

    def step(self, pid: int, count: int) -> int:
        """Advance in lockstep: the world moves to the lowest loop every agent asked for; this
        player's step returns once the world reached its own target (or the game ended)."""
        with self.cond:
            me = self.players[pid]
            target = self.loop + max(1, count)
            me.want = target
            deadline = time.monotonic() + STEP_TIMEOUT
            while not self.ended and self.loop < target:
                wanting = [p.want for p in self.participants() if not p.left]
                lowest = min(wanting) if wanting else target
                while self.loop < lowest and not self.ended:
                    self.tick()
                self.cond.notify_all()
                if self.ended or self.loop >= target:
                    break
                if not self.cond.wait(timeout=max(0.0, deadline - time.monotonic())):
                    raise GameError(f"timed out waiting for the other players to step to loop {target}")
            return self.loop

    def leave(self, pid: int):
        with self.cond:
            p = self.players[pid]
            p.left = True
            if not self.ended:
                self.results = {q.pid: (sc_pb.Defeat if q.pid == pid else sc_pb.Victory) for q in self.players.values()}
            self.cond.notify_all()

    def replay(self) -> bytes:
        """The stand-in's replay file (`REPLAY_MAGIC`, then one JSON object: see `read_replay`)."""
        with self.cond:
            if self.replaying:
                raise GameError("save_replay is for a game, not a replay")
            summary = {"format": REPLAY_FORMAT, "map": self.map_path, "loop": self.loop, "seed": self.seed,
                       "episode": self.episode, "game_version": GAME_VERSION, "base_build": BASE_BUILD,
                       "data_version": DATA_VERSION,
                       "players": [[p.pid, sc_pb.PlayerType.Name(p.type), p.name] for p in self.players.values()],
                       "setup": [{"id": p.pid, "type": int(p.type), "race": int(p.race), "difficulty": int(p.difficulty),
                                  "ai_build": int(p.ai_build),
                                  "options": _b64(p.options.SerializeToString()) if p.options is not None else None}
                                 for p in self.players.values()],
                       "settings": {"episode_loops": self.episode_loops, "bot_passive": self.bot_passive,
                                    "reject": self.reject},
                       "actions": [[loop, pid, _b64(data)] for loop, pid, data in self.log],
                       "results": {str(k): sc_pb.Result.Name(v) for k, v in self.results.items()}}
            return REPLAY_MAGIC + json.dumps(summary, sort_keys=True).encode()

    # -- replays: the recorded game played again from its seed and its players' actions
    @classmethod
    def from_replay(cls, record: dict, observed: int, options: sc_pb.InterfaceOptions) -> World:
        """The world of a replay `record` (`read_replay`) at its first loop, seen by player `observed`
        with the interface `options`; `replay_step` plays it on."""
        create = sc_pb.RequestCreateGame(random_seed=record["seed"])
        for p in record["setup"]:
            setup = create.player_setup.add(type=p["type"], race=p["race"])
            if p["type"] == sc_pb.Computer:
                setup.difficulty, setup.ai_build = p["difficulty"], p["ai_build"]
        world = cls(create, record["map"])
        settings = record["settings"]
        world.episode_loops, world.bot_passive, world.reject = (settings["episode_loops"], settings["bot_passive"],
                                                                settings["reject"])
        world.episode = record["episode"] - 1
        world.reset()
        by_loop: dict[int, list] = {}
        for loop, pid, data in record["actions"]:
            by_loop.setdefault(loop, []).append((pid, sc_pb.Action.FromString(base64.b64decode(data))))
        names = {pid: name for pid, _, name in record["players"]}
        for p, setup in zip(world.players.values(), record["setup"]):
            p.joined, p.name = True, names.get(p.pid, "")
            recorded = setup.get("options")
            p.options = sc_pb.InterfaceOptions.FromString(base64.b64decode(recorded)) if recorded else options
        world.replaying = {"final": record["loop"], "actions": by_loop, "observed": observed, "options": options,
                           "results": {int(k): sc_pb.Result.Value(v) for k, v in record["results"].items()}}
        return world

    def replay_step(self, count: int) -> int:
        """Play the replay on `count` loops: each loop's recorded actions (each by the player who sent
        it, under the interface it played with), then the loop; at the recording's last loop the
        replay ends (with the recorded results, or Undecided where the game had not ended)."""
        with self.cond:
            r = self.replaying
            for _ in range(max(1, count)):
                if self.ended or self.loop >= r["final"]:
                    break
                for pid, action in r["actions"].get(self.loop, ()):
                    self.apply(pid, action)
                self.tick()
            if self.loop >= r["final"] and not self.results:
                self.results = dict(r["results"]) or {pid: sc_pb.Undecided for pid in self.players}
            return self.loop

    # -- actions
    def apply(self, pid: int, action: sc_pb.Action) -> int:
        me = self.players[pid]
        result = OK
        if action.HasField("action_raw"):
            raw = action.action_raw
            if raw.HasField("unit_command"):
                cmd = raw.unit_command
                target = None
                if cmd.HasField("target_world_space_pos"):
                    target = (cmd.target_world_space_pos.x, cmd.target_world_space_pos.y)
                elif cmd.HasField("target_unit_tag"):
                    target = cmd.target_unit_tag
                result = self.command(me, list(cmd.unit_tags), cmd.ability_id, target)
                if result == OK:
                    me.selected = [t for t in cmd.unit_tags]  # raw_affects_selection, as pysc2 asks
            elif raw.HasField("camera_move"):
                me.camera = (raw.camera_move.center_world_space.x, raw.camera_move.center_world_space.y)
        for space in ("action_feature_layer", "action_render"):
            if action.HasField(space):
                result = self.apply_spatial(me, getattr(action, space))
        if action.HasField("action_ui") and action.action_ui.HasField("select_army"):
            me.selected = [u.tag for u in self.own(pid)]
        if result == OK:
            echo = sc_pb.Action()
            echo.CopyFrom(action)
            echo.game_loop = self.loop
            me.actions.append(echo)
        else:
            cmd = self.first_command(action)
            me.errors.append(sc_pb.ActionError(unit_tag=cmd[0] if cmd and cmd[0] else 0,
                                               ability_id=cmd[1] if cmd else 0, result=result))
        return result

    @staticmethod
    def first_command(action):
        if action.HasField("action_raw") and action.action_raw.HasField("unit_command"):
            c = action.action_raw.unit_command
            return (c.unit_tags[0] if c.unit_tags else 0), c.ability_id
        for space in ("action_feature_layer", "action_render"):
            if action.HasField(space) and getattr(action, space).HasField("unit_command"):
                return 0, getattr(action, space).unit_command.ability_id
        return None

    def apply_spatial(self, me: Player, spatial: spatial_pb2.ActionSpatial) -> int:
        opts = me.options.feature_layer if me.options.HasField("feature_layer") else None
        if spatial.HasField("camera_move"):
            me.camera = self.minimap_to_world(me, spatial.camera_move.center_minimap)
        elif spatial.HasField("unit_selection_point"):
            sel = spatial.unit_selection_point
            x, y = self.screen_to_world(me, sel.selection_screen_coord)
            hit = [u for u in self.own(me.pid) if math.hypot(u.x - x, u.y - y) <= u.radius + self.pixel(me)]
            hit = sorted(hit, key=lambda u: math.hypot(u.x - x, u.y - y))[:1]
            if sel.type == spatial_pb2.ActionSpatialUnitSelectionPoint.Toggle:
                me.selected = [t for t in me.selected if t not in {u.tag for u in hit}] + [
                    u.tag for u in hit if u.tag not in me.selected]
            elif sel.type == spatial_pb2.ActionSpatialUnitSelectionPoint.AddAllType:
                me.selected = sorted(set(me.selected) | {u.tag for u in hit})
            else:
                me.selected = [u.tag for u in hit]
        elif spatial.HasField("unit_selection_rect"):
            tags = set(me.selected) if spatial.unit_selection_rect.selection_add else set()
            for r in spatial.unit_selection_rect.selection_screen_coord:
                (x0, y0), (x1, y1) = self.screen_to_world(me, r.p0), self.screen_to_world(me, r.p1)
                for u in self.own(me.pid):
                    if min(x0, x1) <= u.x <= max(x0, x1) and min(y0, y1) <= u.y <= max(y0, y1):
                        tags.add(u.tag)
            me.selected = sorted(tags)
        elif spatial.HasField("unit_command"):
            cmd = spatial.unit_command
            target = None
            if cmd.HasField("target_screen_coord"):
                target = self.screen_to_world(me, cmd.target_screen_coord)
            elif cmd.HasField("target_minimap_coord"):
                target = self.minimap_to_world(me, cmd.target_minimap_coord)
            if not me.selected:
                return NOT_SUPPORTED
            return self.command(me, list(me.selected), cmd.ability_id, target)
        del opts
        return OK

    def command(self, me: Player, tags: list[int], ability: int, target) -> int:
        ability = GENERAL.get(ability, ability)
        if self.reject is not None and ability == GENERAL.get(self.reject, self.reject):
            return REJECTED
        if ability not in (MOVE, ATTACK, STOP, SMART):
            return NOT_SUPPORTED
        units = [self.units.get(t) for t in tags]
        if not tags or any(u is None or u.owner != me.pid for u in units):
            return NOT_YOURS
        if isinstance(target, int) and target not in self.units:
            return error_pb2.ActionResult.Value("CantTargetThatUnit")
        for u in units:
            if ability == STOP or target is None:
                u.order = None
            elif isinstance(target, int):
                u.order = ("attack_unit", target) if ability in (ATTACK, SMART) else ("move", target)
            else:
                u.order = ("attack_pt" if ability == ATTACK else "move", target)
        return OK

    # -- coordinates (the transforms of pysc2's features.Features.init_camera, backwards)
    def pixel(self, me: Player) -> float:
        fl = me.options.feature_layer
        return fl.width / max(1, fl.resolution.x) if me.options.HasField("feature_layer") else 1.0

    def screen_to_world(self, me: Player, p) -> tuple[float, float]:
        fl = me.options.feature_layer
        res = (fl.resolution.x or 1, fl.resolution.y or 1)
        width = fl.width or 24
        cx, cy = me.camera
        x = cx + (p.x + 0.5 - res[0] / 2) * width / res[0]
        y = cy - (p.y + 0.5 - res[1] / 2) * width / res[0]
        return x, y

    def world_to_screen(self, me: Player, x: float, y: float) -> tuple[int, int]:
        fl = me.options.feature_layer
        res = (fl.resolution.x, fl.resolution.y)
        width = fl.width or 24
        cx, cy = me.camera
        return (math.floor((x - cx) * res[0] / width + res[0] / 2),
                math.floor((cy - y) * res[0] / width + res[1] / 2))

    def minimap_to_world(self, me: Player, p) -> tuple[float, float]:
        fl = me.options.feature_layer
        mx = fl.minimap_resolution.x or MAP_SIZE
        return (p.x + 0.5) * MAP_SIZE / mx, MAP_SIZE - (p.y + 0.5) * MAP_SIZE / mx

    # -- simulation
    def own(self, pid: int):
        return [u for u in self.units.values() if u.owner == pid]

    def enemies_of(self, u: Unit):
        return [e for e in self.units.values() if e.owner not in (u.owner, NEUTRAL)]

    def tick(self):
        self.loop += 1
        if not self.bot_passive:
            for p in self.players.values():
                if p.type == sc_pb.Computer:
                    for u in self.own(p.pid):
                        if u.order is None:
                            near = self.nearest(u, self.enemies_of(u))
                            if near is not None:
                                u.order = ("attack_unit", near.tag)
        for u in sorted(self.units.values(), key=lambda u: u.tag):
            if u.tag in self.units and u.unit_type == MARINE:
                self.act_unit(u)
        if self.mini_game:
            self.score_beacon()
        else:
            alive = {pid for pid in self.players if self.own(pid)}
            if len(alive) < len(self.players):
                self.results = {pid: (sc_pb.Victory if pid in alive else sc_pb.Defeat if alive else sc_pb.Tie)
                                for pid in self.players}
        if not self.results and self.episode_loops and self.loop >= self.episode_loops:
            if self.mini_game:
                self.results = {1: sc_pb.Victory if self.players[1].score > 0 else sc_pb.Defeat}
            else:
                self.results = {pid: sc_pb.Tie for pid in self.players}

    def nearest(self, u: Unit, others):
        return min(others, key=lambda e: (math.hypot(e.x - u.x, e.y - u.y), e.tag), default=None)

    def act_unit(self, u: Unit):
        u.cooldown = max(0, u.cooldown - 1)
        order = u.order
        target = None
        if order and order[0] == "attack_unit":
            target = self.units.get(order[1])
            if target is None:
                u.order = order = None
        if target is None and (order is None or order[0] == "attack_pt"):
            sight = SIGHT if order else RANGE
            near = self.nearest(u, self.enemies_of(u))
            if near is not None and math.hypot(near.x - u.x, near.y - u.y) <= sight:
                target = near
        if target is not None:
            if math.hypot(target.x - u.x, target.y - u.y) <= RANGE + u.radius + target.radius:
                if u.cooldown == 0:
                    self.shoot(u, target)
                return
            self.move_towards(u, target.x, target.y)
            return
        if order and order[0] in ("move", "attack_pt"):
            goal = order[1]
            if isinstance(goal, int):  # move onto a unit: follow it
                g = self.units.get(goal)
                goal = (g.x, g.y) if g else (u.x, u.y)
            if self.move_towards(u, *goal):
                u.order = None

    def move_towards(self, u: Unit, x: float, y: float) -> bool:
        dx, dy = x - u.x, y - u.y
        d = math.hypot(dx, dy)
        if d <= SPEED:
            u.x, u.y = x, y
            return True
        u.x += dx / d * SPEED
        u.y += dy / d * SPEED
        u.facing = math.atan2(dy, dx) % (2 * math.pi)
        return False

    def shoot(self, u: Unit, target: Unit):
        u.cooldown = COOLDOWN
        target.health -= DAMAGE
        if target.health <= 0:
            del self.units[target.tag]
            for p in self.players.values():
                p.dead.append(target.tag)
                p.selected = [t for t in p.selected if t != target.tag]
            if u.owner in self.players:
                self.players[u.owner].killed += 1

    def score_beacon(self):
        beacon = next((b for b in self.units.values() if b.unit_type == BEACON), None)
        for m in self.own(1):
            if beacon is not None and math.hypot(m.x - beacon.x, m.y - beacon.y) <= beacon.radius + m.radius:
                self.players[1].score += 1
                while math.hypot(m.x - beacon.x, m.y - beacon.y) < 4:
                    beacon.x, beacon.y = self.spot()

    # -- observation
    def observe(self, pid: int, request: sc_pb.RequestObservation) -> sc_pb.ResponseObservation:
        with self.cond:
            me = self.seen_by(pid)
            res = sc_pb.ResponseObservation()
            res.actions.extend(me.actions)
            res.action_errors.extend(me.errors)
            me.actions.clear()  # (lists shared with `seen_by`'s view)
            me.errors.clear()
            obs = res.observation
            obs.game_loop = self.loop
            own = self.own(pid)
            pc = obs.player_common
            pc.player_id, pc.minerals, pc.food_cap = pid, 50, 15
            pc.food_used = pc.food_army = pc.army_count = len([u for u in own if u.unit_type == MARINE])
            if me.selected:
                for ability, point in ((MOVE, True), (ATTACK, True), (STOP, False)):
                    obs.abilities.add(ability_id=ability, requires_point=point)
            score = obs.score
            if self.mini_game:
                score.score_type, score.score = score_pb2.Score.Curriculum, me.score
            else:
                score.score_type, score.score = score_pb2.Score.Melee, 50 * me.killed
            score.score_details.killed_value_units = 50 * me.killed
            score.score_details.total_value_units = 50 * len(own)
            raw = obs.raw_data
            raw.player.camera.x, raw.player.camera.y = me.camera
            vis = raw.map_state.visibility
            vis.size.x = vis.size.y = MAP_SIZE
            vis.bits_per_pixel, vis.data = 8, bytes([2]) * (MAP_SIZE * MAP_SIZE)
            for u in sorted(self.units.values(), key=lambda u: u.tag):
                raw.units.append(self.unit_proto(me, u))
            raw.event.dead_units.extend(me.dead)
            me.dead.clear()
            if len(me.selected) == 1:
                u = self.units[me.selected[0]]
                obs.ui_data.single.unit.CopyFrom(ui_pb2.UnitInfo(unit_type=u.unit_type, player_relative=1,
                                                                 health=max(0, u.health)))
            elif me.selected:
                for t in me.selected:
                    obs.ui_data.multi.units.add(unit_type=self.units[t].unit_type, player_relative=1,
                                                health=max(0, self.units[t].health))
            if me.options.HasField("feature_layer"):
                self.render_layers(me, obs.feature_layer_data)
            if me.options.HasField("render"):
                for image, res_ in ((obs.render_data.map, me.options.render.resolution),
                                    (obs.render_data.minimap, me.options.render.minimap_resolution)):
                    image.size.x, image.size.y, image.bits_per_pixel = res_.x, res_.y, 24
                    image.data = bytes(3 * res_.x * res_.y)
            for rpid, result in sorted(self.results.items()):
                res.player_result.add(player_id=rpid, result=result)
            return res

    def unit_proto(self, me: Player, u: Unit) -> raw_pb2.Unit:
        alliance = raw_pb2.Neutral if u.owner == NEUTRAL else raw_pb2.Self if u.owner == me.pid else raw_pb2.Enemy
        p = raw_pb2.Unit(display_type=raw_pb2.Visible, alliance=alliance, tag=u.tag, unit_type=u.unit_type,
                         owner=u.owner, facing=u.facing, radius=u.radius, build_progress=1.0,
                         cloak=raw_pb2.NotCloaked, is_selected=u.tag in me.selected)
        p.pos.x, p.pos.y, p.pos.z = u.x, u.y, 8.0
        cx, cy = me.camera
        half = (me.options.feature_layer.width or 24) / 2
        p.is_on_screen = abs(u.x - cx) <= half and abs(u.y - cy) <= half
        if u.unit_type == MARINE:
            p.health, p.health_max = max(0, u.health), u.health_max
            p.is_active = u.order is not None
            if alliance == raw_pb2.Self:
                p.weapon_cooldown = u.cooldown
                if u.order:
                    kind, target = u.order
                    o = p.orders.add(ability_id=ATTACK if kind.startswith("attack") else MOVE)
                    if isinstance(target, int):
                        o.target_unit_tag = target
                    else:
                        o.target_world_space_pos.x, o.target_world_space_pos.y = target
        return p

    def render_layers(self, me: Player, data: spatial_pb2.ObservationFeatureLayer):
        fl = me.options.feature_layer
        sx, sy = fl.resolution.x, fl.resolution.y
        mx, my = fl.minimap_resolution.x, fl.minimap_resolution.y
        layers = {name: bytearray(sx * sy) for name in ("player_relative", "player_id", "selected", "unit_density")}
        unit_type = [0] * (sx * sy)
        hp = [0] * (sx * sy)
        scale = sx / (fl.width or 24)
        for u in sorted(self.units.values(), key=lambda u: u.tag):
            px, py = self.world_to_screen(me, u.x, u.y)
            r = max(0.5, u.radius * scale)
            rel = 3 if u.owner == NEUTRAL else 1 if u.owner == me.pid else 4
            for yy in range(max(0, math.floor(py - r)), min(sy, math.ceil(py + r) + 1)):
                for xx in range(max(0, math.floor(px - r)), min(sx, math.ceil(px + r) + 1)):
                    if (xx + 0.5 - px - 0.5) ** 2 + (yy + 0.5 - py - 0.5) ** 2 <= r * r:
                        i = yy * sx + xx
                        layers["player_relative"][i] = rel
                        layers["player_id"][i] = u.owner
                        layers["selected"][i] = 1 if u.tag in me.selected else 0
                        layers["unit_density"][i] = min(255, layers["unit_density"][i] + 1)
                        unit_type[i] = u.unit_type
                        hp[i] = max(0, u.health)
        screen = data.renders
        for name, buf in layers.items():
            _image(getattr(screen, name), sx, sy, 8, bytes(buf))
        _image(screen.unit_type, sx, sy, 32, struct.pack(f"<{sx * sy}i", *unit_type))
        _image(screen.unit_hit_points, sx, sy, 32, struct.pack(f"<{sx * sy}i", *hp))
        _image(screen.height_map, sx, sy, 8, bytes([128]) * (sx * sy))
        _image(screen.visibility_map, sx, sy, 8, bytes([2]) * (sx * sy))
        _image(screen.pathable, sx, sy, 8, bytes([1]) * (sx * sy))
        mini = data.minimap_renders
        rel = bytearray(mx * my)
        for u in self.units.values():
            x, y = int(u.x * mx / MAP_SIZE), int((MAP_SIZE - u.y) * my / MAP_SIZE)
            if 0 <= x < mx and 0 <= y < my:
                rel[y * mx + x] = 3 if u.owner == NEUTRAL else 1 if u.owner == me.pid else 4
        _image(mini.player_relative, mx, my, 8, bytes(rel))
        _image(mini.visibility_map, mx, my, 8, bytes([2]) * (mx * my))
        _image(mini.height_map, mx, my, 8, bytes([128]) * (mx * my))
        cam = bytearray(mx * my)
        half = (fl.width or 24) / 2
        cx, cy = me.camera
        for y in range(my):
            for x in range(mx):
                wx, wy = (x + 0.5) * MAP_SIZE / mx, MAP_SIZE - (y + 0.5) * MAP_SIZE / my
                cam[y * mx + x] = abs(wx - cx) <= half and abs(wy - cy) <= half
        _image(mini.camera, mx, my, 8, bytes(cam))


def _image(image: common.ImageData, x: int, y: int, bits: int, data: bytes):
    image.size.x, image.size.y, image.bits_per_pixel, image.data = x, y, bits, data


class GameError(Exception):
    """A request the game answers with an error string (``Response.error``)."""


# ---------------------------------------------------------------------------------------------
# Sessions: how one process's player reaches the world (in this process, or the host's).

class LocalSession:
    def __init__(self, world: World, pid: int, on_leave=None):
        self.world, self.pid, self.on_leave = world, pid, on_leave

    def call(self, op: str, data: bytes = b"", count: int = 0) -> tuple[int, bytes]:
        w = self.world
        if op == "game_info":
            out = w.game_info(self.pid).SerializeToString()
        elif op == "observe":
            out = w.observe(self.pid, sc_pb.RequestObservation.FromString(data)).SerializeToString()
        elif op == "act":
            out = w.act(self.pid, sc_pb.RequestAction.FromString(data)).SerializeToString()
        elif op == "step":
            out = str(w.replay_step(count) if w.replaying else w.step(self.pid, count)).encode()
        elif op == "leave":
            w.leave(self.pid)
            if self.on_leave:
                self.on_leave()
            out = b""
        elif op == "replay":
            out = w.replay()
        elif op == "status":
            out = b""
        else:
            raise GameError(f"unknown operation {op}")
        return w.status(), out


class RemoteSession:
    """The joining process's player: each call is one JSON line to the host and one back."""

    def __init__(self, sock: socket.socket, pid: int):
        self.sock, self.pid = sock, pid
        self.rfile = sock.makefile("rb")

    @classmethod
    def join(cls, port: int, join: sc_pb.RequestJoinGame) -> RemoteSession:
        deadline = time.monotonic() + JOIN_TIMEOUT
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=JOIN_TIMEOUT)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise GameError(f"could not reach the host game on port {port}")
                time.sleep(0.05)
        sock.settimeout(JOIN_TIMEOUT + STEP_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small request/reply lines
        session = cls(sock, 0)
        reply = session._rpc({"op": "join", "options": _b64(join.options.SerializeToString()),
                              "race": join.race, "name": join.player_name})
        session.pid = reply["player_id"]
        return session

    def _rpc(self, message: dict) -> dict:
        try:
            self.sock.sendall(json.dumps(message).encode() + b"\n")
            line = self.rfile.readline()
        except OSError as e:
            raise GameError(f"lost the connection to the host game: {e}") from e
        if not line:
            raise GameError("lost the connection to the host game")
        reply = json.loads(line)
        if "error" in reply:
            raise GameError(reply["error"])
        return reply

    def call(self, op: str, data: bytes = b"", count: int = 0) -> tuple[int, bytes]:
        reply = self._rpc({"op": op, "data": _b64(data), "count": count})
        if op == "leave":
            self.close()
        return reply["status"], base64.b64decode(reply["data"])

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class Host:
    """The host's side of a multiplayer game: listens on the game port, one thread per peer."""

    def __init__(self, world: World, port: int):
        self.world, self.stopped = world, threading.Event()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(4)
        self.listener.settimeout(0.1)
        self.thread = threading.Thread(target=self.accept_loop, daemon=True)
        self.thread.start()

    def accept_loop(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn: socket.socket):
        rfile, pid, left = conn.makefile("rb"), None, False
        try:
            for line in rfile:
                msg = json.loads(line)
                try:
                    if msg["op"] == "join":
                        options = sc_pb.InterfaceOptions.FromString(base64.b64decode(msg["options"]))
                        pid = self.world.join(options, msg["race"], msg["name"])
                        self.world.wait_full()
                        reply = {"player_id": pid}
                    else:
                        status, data = LocalSession(self.world, pid).call(
                            msg["op"], base64.b64decode(msg["data"]), msg["count"])
                        left = left or msg["op"] == "leave"
                        reply = {"status": status, "data": _b64(data)}
                except GameError as e:
                    reply = {"error": str(e)}
                conn.sendall(json.dumps(reply).encode() + b"\n")
        except OSError:
            pass
        finally:
            if pid is not None and not left:  # a peer that vanished left the game
                self.world.leave(pid)
            conn.close()

    def stop(self):
        """Stop listening now: the next game may bind the same port at once."""
        self.stopped.set()
        self.listener.close()
        self.thread.join(timeout=1.0)


# ---------------------------------------------------------------------------------------------
# The game process: one websocket client at a time, one Response per Request.

class Game:
    def __init__(self, data_dir: str, temp_dir: str):
        self.data_dir, self.temp_dir = Path(data_dir), Path(temp_dir)
        self.status = Status.launched
        self.create: sc_pb.RequestCreateGame | None = None
        self.map_path = ""
        self.world: World | None = None
        self.session: LocalSession | RemoteSession | None = None
        self.host: Host | None = None
        self.saved_maps: set[str] = set()
        self.die_at = env_int("FAKE_SC2_DIE_AT_LOOP")
        self.trace = os.environ.get("FAKE_SC2_TRACE")
        self.quit = False

    def write_trace(self, kind: str, message):
        detail = ""
        if kind == "step":
            detail = f"count={message.count}"
        elif kind == "observation":
            detail = f"game_loop={message.game_loop}"
        elif kind == "action":
            detail = f"actions={len(message.actions)}"
        elif kind == "save_map":
            detail = f"map_path={message.map_path} bytes={len(message.map_data)}"
        elif kind == "create_game":
            players = ",".join(sc_pb.PlayerType.Name(p.type) for p in message.player_setup)
            detail = (f"map_path={message.local_map.map_path} map_data={len(message.local_map.map_data)}B "
                      f"players={players} seed={message.random_seed}")
        elif kind == "join_game":
            ports = (f" server_ports={message.server_ports.game_port},{message.server_ports.base_port}"
                     f" client_ports={[(p.game_port, p.base_port) for p in message.client_ports]}"
                     if message.HasField("server_ports") else "")
            detail = f"race={common.Race.Name(message.race)} name={message.player_name!r}{ports} options=" + \
                " ".join(str(message.options).split())
        with open(self.trace, "a") as f:
            f.write(f"{os.getpid()} {time.time():.3f} {kind} {detail}\n")

    def serve(self, ws: WebSocket):
        while not self.quit:
            message = ws.recv()
            if message is None:
                break
            request = sc_pb.Request.FromString(message)
            response = self.handle(request)
            if response is not None:
                ws.send(response.SerializeToString())
        ws.close()

    def handle(self, request: sc_pb.Request) -> sc_pb.Response | None:
        kind = request.WhichOneof("request")
        if self.trace:
            self.write_trace(kind, getattr(request, kind))
        response = sc_pb.Response()
        if request.HasField("id"):
            response.id = request.id
        try:
            handler = getattr(self, f"on_{kind}", None)
            if handler is None:
                raise GameError(f"{kind} is not supported by the fake game")
            handler(getattr(request, kind), response)
        except GameError as e:
            response.error.append(str(e))
        except _Die:
            os._exit(3)
        except Exception as e:  # noqa: BLE001 -- a bug in the fake: answer with it rather than vanish
            import traceback

            traceback.print_exc()
            response.error.append(f"fake game error in {kind}: {e!r}")
        response.status = self.status
        return response

    def need_game(self):
        if self.session is None:
            raise GameError(f"Not in a game (status {Status.Name(self.status)})")

    def call(self, op: str, data: bytes = b"", count: int = 0) -> bytes:
        self.need_game()
        status, out = self.session.call(op, data, count)
        self.status = status
        return out

    # -- requests
    def on_ping(self, req, res):
        res.ping.game_version, res.ping.data_version = GAME_VERSION, DATA_VERSION
        res.ping.data_build = res.ping.base_build = BASE_BUILD

    def on_available_maps(self, req, res):
        maps = self.data_dir / "Maps"
        for path in sorted(maps.rglob("*.SC2Map")) if maps.is_dir() else []:
            res.available_maps.local_map_paths.append(str(path.relative_to(maps)))

    def on_save_map(self, req, res):
        if self.status not in (Status.launched, Status.init_game):
            raise GameError("save_map is only valid before a game")
        path = self.temp_dir / req.map_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(req.map_data)
        self.saved_maps.add(req.map_path)
        res.save_map.SetInParent()

    def on_create_game(self, req, res):
        res.create_game.SetInParent()
        err = sc_pb.ResponseCreateGame
        if self.session is not None and self.status not in (Status.ended, Status.in_game):
            raise GameError("create_game while a game is starting")
        if not req.player_setup:
            res.create_game.error, res.create_game.error_details = err.MissingPlayerSetup, "no players"
            return
        path = req.local_map.map_path
        known = (req.local_map.map_data or path in self.saved_maps or (self.data_dir / "Maps" / path).is_file()
                 or (os.path.isabs(path) and os.path.isfile(path)))
        if not path or not known:
            res.create_game.error = err.MissingMap if not path else err.InvalidMapPath
            res.create_game.error_details = f"map not found: {path!r}"
            return
        participants = sum(1 for p in req.player_setup if p.type == sc_pb.Participant)
        mini = "mini_games" in path or Path(path).stem in MINI_GAMES
        if (mini and len(req.player_setup) != 1) or (not mini and len(req.player_setup) != 2) or not participants:
            res.create_game.error = err.InvalidPlayerSetup
            res.create_game.error_details = f"{len(req.player_setup)} players on {path}"
            return
        self.end_session()
        self.create, self.map_path = req, path
        self.status = Status.init_game

    def on_join_game(self, req, res):
        res.join_game.SetInParent()
        err = sc_pb.ResponseJoinGame
        if self.status not in (Status.launched, Status.init_game):
            raise GameError(f"join_game in status {Status.Name(self.status)}")
        if not req.HasField("options"):
            res.join_game.error = err.MissingOptions
            return
        if self.create is not None:  # the host: this process holds the world
            world = World(self.create, self.map_path)
            multi = len(world.participants()) > 1
            if multi and not req.HasField("server_ports"):
                res.join_game.error, res.join_game.error_details = err.MissingPorts, "two agents need ports"
                return
            pid = world.join(req.options, req.race, req.player_name)
            if multi:
                self.host = Host(world, req.server_ports.game_port)
                try:
                    world.wait_full()
                except GameError as e:
                    self.host.stop()
                    self.host = None
                    res.join_game.error, res.join_game.error_details = err.NetworkError, str(e)
                    return
            self.world, self.create = world, None
            self.session = LocalSession(world, pid)
        else:  # another process hosts: meet it on the server's game port
            if not req.HasField("server_ports"):
                res.join_game.error, res.join_game.error_details = err.MissingPorts, "no game created here"
                return
            try:
                self.session = RemoteSession.join(req.server_ports.game_port, req)
            except GameError as e:
                res.join_game.error, res.join_game.error_details = err.NetworkError, str(e)
                return
            pid = self.session.pid
        res.join_game.player_id = pid
        self.status = Status.in_game

    def on_restart_game(self, req, res):
        res.restart_game.SetInParent()
        self.need_game()
        if not isinstance(self.session, LocalSession) or len(self.world.participants()) != 1:
            res.restart_game.error = sc_pb.ResponseRestartGame.LaunchError
            res.restart_game.error_details = "restart is only for single-player games"
            return
        self.world.reset()
        self.status = Status.in_game

    def on_game_info(self, req, res):
        res.game_info.ParseFromString(self.call("game_info"))

    def on_observation(self, req, res):
        res.observation.ParseFromString(self.call("observe", req.SerializeToString()))

    def on_action(self, req, res):
        if self.status == Status.ended:
            raise GameError("Game has already ended")
        res.action.ParseFromString(self.call("act", req.SerializeToString()))

    def on_step(self, req, res):
        if self.status == Status.ended:
            raise GameError("Game has already ended")
        loop = int(self.call("step", count=req.count or 1))
        if self.die_at is not None and loop >= self.die_at:
            raise _Die()
        res.step.simulation_loop = loop

    def on_leave_game(self, req, res):
        self.call("leave")
        self.end_session()
        res.leave_game.SetInParent()

    def on_save_replay(self, req, res):
        res.save_replay.data = self.call("replay")

    def replay_record(self, req, errors) -> dict | None:
        """The replay a `RequestReplayInfo` / `RequestStartReplay` names (its bytes, or a path: absolute
        or under ``Replays/``), read; None with the response's error set."""
        data = req.replay_data
        if not data:
            if not req.replay_path:
                self.replay_error = (errors.MissingReplay, "no replay_data or replay_path")
                return None
            path = Path(req.replay_path)
            path = path if path.is_absolute() else self.data_dir / "Replays" / path
            try:
                data = path.read_bytes()
            except OSError as e:
                self.replay_error = (errors.InvalidReplayPath, f"cannot read {path}: {e.strerror}")
                return None
        try:
            return read_replay(data)
        except ValueError as e:
            self.replay_error = (errors.InvalidReplayData, str(e))
            return None

    def on_replay_info(self, req, res):
        info = res.replay_info
        info.SetInParent()
        record = self.replay_record(req, sc_pb.ResponseReplayInfo)
        if record is None:
            info.error, info.error_details = self.replay_error
            return
        info.map_name, info.local_map_path = Path(record["map"]).stem, record["map"]
        info.game_duration_loops = record["loop"]
        info.game_duration_seconds = record["loop"] / 22.4
        info.game_version, info.data_version = record["game_version"], record["data_version"]
        info.data_build = info.base_build = record["base_build"]
        results = record["results"]
        names = {pid: name for pid, _, name in record["players"]}
        for p in record["setup"]:
            extra = info.player_info.add()
            pi = extra.player_info
            pi.player_id, pi.type, pi.race_requested = p["id"], p["type"], p["race"]
            pi.race_actual = p["race"] if p["race"] != common.Random else common.Terran
            if p["type"] == sc_pb.Computer:
                pi.difficulty = p["difficulty"]
            else:
                pi.player_name = names.get(p["id"], "")
            extra.player_result.player_id = p["id"]
            extra.player_result.result = sc_pb.Result.Value(results.get(str(p["id"]), "Undecided"))

    def on_start_replay(self, req, res):
        res.start_replay.SetInParent()
        err = sc_pb.ResponseStartReplay
        record = self.replay_record(req, err)
        if record is None:
            res.start_replay.error, res.start_replay.error_details = self.replay_error
            return
        if not req.HasField("options"):
            res.start_replay.error = err.MissingOptions
            return
        path = record["map"]
        if not (req.map_data or (self.data_dir / "Maps" / path).is_file() or (os.path.isabs(path) and os.path.isfile(path))):
            res.start_replay.error, res.start_replay.error_details = err.InvalidMapData, f"map not found: {path!r}"
            return
        players = [p["id"] for p in record["setup"] if p["type"] == sc_pb.Participant]
        observed = req.observed_player_id or players[0]
        if observed not in players:
            res.start_replay.error = err.InvalidObservedPlayerId
            res.start_replay.error_details = f"player {observed} did not play in this replay (players {players})"
            return
        self.end_session()
        self.world = World.from_replay(record, observed, req.options)
        self.session = LocalSession(self.world, observed)
        self.status = Status.in_replay

    def on_data(self, req, res):
        res.data.SetInParent()

    def on_query(self, req, res):
        res.query.SetInParent()

    def on_debug(self, req, res):
        res.debug.SetInParent()

    def on_quit(self, req, res):
        res.quit.SetInParent()
        self.quit = True

    def end_session(self):
        if self.host is not None:
            self.host.stop()
            self.host = None
        if isinstance(self.session, RemoteSession):
            self.session.close()
        self.session, self.world = None, None
        self.status = Status.launched


def read_replay(data: bytes) -> dict:
    """A replay this stand-in wrote (`World.replay`), as its JSON object: ``map`` (the map's path),
    ``seed`` and ``episode`` (the world's random state), ``settings`` (the switches that change the
    world), ``setup`` (each player's type, race, AI level and interface options), ``actions`` (every
    action a player sent: game loop, player id, the ``Action`` protobuf in base64), ``loop`` (the last
    game loop), ``results``, and the game's version. A `ValueError` for anything else."""
    if not data.startswith(REPLAY_MAGIC):
        raise ValueError("not a replay of this game (the stand-in reads only the replays it wrote)")
    try:
        record = json.loads(data[len(REPLAY_MAGIC):])
    except ValueError as e:
        raise ValueError(f"a damaged replay: {e}") from None
    if not isinstance(record, dict) or record.get("format") != REPLAY_FORMAT:
        raise ValueError(f"a replay of another format (this stand-in reads format {REPLAY_FORMAT})")
    return record


class _Die(Exception):
    """FAKE_SC2_DIE_AT_LOOP reached: exit without answering."""


def parse_args(argv: list[str]) -> dict[str, str]:
    """SC2's flags are ``-name value`` pairs and bare ``-name`` switches."""
    flags, i = {}, 0
    while i < len(argv):
        name = argv[i].lstrip("-")
        if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            flags[name], i = argv[i + 1], i + 2
        else:
            flags[name], i = "", i + 1
    return flags


def main(argv: list[str]) -> int:
    started = time.time()
    flags = parse_args(argv)
    data_dir, temp_dir = flags.get("dataDir", "."), flags.get("tempDir") or os.getcwd()
    record = {"pid": os.getpid(), "argv": argv, "started": started}
    try:
        with open(os.path.join(data_dir, LAUNCH_LOG), "a") as f:
            f.write(json.dumps(record) + "\n")
    except OSError:
        pass
    delay = float(os.environ.get("FAKE_SC2_LISTEN_DELAY") or 0)
    if delay:
        time.sleep(delay)
    server = socket.socket(socket.AF_INET6 if "ipv6" in flags else socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((flags.get("listen", "127.0.0.1"), int(flags["port"])))
    server.listen(1)
    game = Game(data_dir, temp_dir)
    while not game.quit:
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ws = WebSocket.accept(conn)
        if ws is not None:
            game.serve(ws)
    game.end_session()
    server.close()
    return 0


# ---------------------------------------------------------------------------------------------
# A temporary SC2PATH whose "game" is this module.

def make_sc2path(root: str | os.PathLike, python: str | None = None) -> Path:
    """Lay out a StarCraft II install under `root` whose binary runs this fake; return `root`.

    ``Versions/Base75689/SC2_x64`` is a shell launcher that ``exec``s this module with `python`
    (default: this interpreter), so the process pysc2 starts and later terminates is the fake
    itself. ``Maps/mini_games/`` holds pysc2-evolved's seven shipped mini-game maps (placeholder
    bytes when it is not installed); `TWO_PLAYER_MAPS` are placeholders (the fake never reads a
    map's contents, only its path).
    """
    root = Path(root)
    exe = root / "Versions" / f"Base{BASE_BUILD:05d}" / "SC2_x64"
    exe.parent.mkdir(parents=True, exist_ok=True)
    python = python or sys.executable
    # -P: this file's folder (the arena's sc2 package) is not put first on the game process's import path
    exe.write_text(f"#!/bin/sh\nexec {_sh(python)} -P {_sh(str(Path(__file__).resolve()))} \"$@\"\n")
    exe.chmod(0o755)
    for sub in ("Libs", "Replays", "Maps/mini_games"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    shipped = _shipped_maps()
    for name in MINI_GAMES:
        target = root / "Maps" / "mini_games" / f"{name}.SC2Map"
        source = shipped / f"{name}.SC2Map" if shipped else None
        if source is not None and source.is_file():
            shutil.copyfile(source, target)
        else:
            target.write_bytes(b"FAKE-SC2Map " + name.encode())
    for rel in TWO_PLAYER_MAPS:
        target = root / "Maps" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"FAKE-SC2Map " + rel.encode())
    return root


def _shipped_maps() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("pysc2_evolved")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "maps" / "mini_games"


def _sh(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def launches(sc2path: str | os.PathLike) -> list[dict]:
    """The launch records the fake processes wrote under `sc2path` (pid, argv, start time)."""
    path = Path(sc2path) / LAUNCH_LOG
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []



def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie is dead, just not reaped by its parent)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:  # gone between the two looks
        return False

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
