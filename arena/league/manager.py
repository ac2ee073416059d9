"""The league: who plays whom, results recorded exactly once, ratings, snapshots, resume.

`League.run` keeps up to ``in_flight`` matches queued on the match pool (`arena.match.pool`), commits
each batch of finished matches (results, replays, Elo, OpenSkill, payoff) in one
transaction, feeds learning players, snapshots and resets them by their
role's rules, and stops at the match budget. Stop it at any moment (Ctrl-C,
kill -9, a crashed worker) and run it again: matches that were in flight are
committed from their replay file if it was written (``replays: files``), else
re-queued with the same id and seed (a replay kept in the database is written
with its result, never without it); nothing is lost or counted twice, and ratings continue from the
database.

`League` is a `arena.league.protocols.LeagueClient`: the run loop, external
trainers and live human play all use the same `next_pairing(learner)`,
`begin(pairing)` + `commit(match_id, result)` and `add_snapshot(parent, spec)`.

A one-player game (a single-agent task: any Gymnasium env) is a league game
too: a match is one player playing one episode. Its episodes take ``seeds``
slots per player in each round of the pairing, and every player plays the
same seeds, seed by seed (`common_seed`), so that players are ranked by mean
return on common seeds (`LeagueStore.common_return_table`); such results get
no Elo, OpenSkill or payoff.

Seat balance and duplicate matches (``seat_balance``, ``duplicate``; docs/league.md, "Fewer games
for the same confidence"): a pairing of fixed players that uniform or pfsp draws on a two-player game
is played in both seat orders, (a, b) and then (b, a) as the next fixed-player match (round_robin keeps
its schedule, seats swapped round by round, and pairs a pair's matches of rounds 2k and 2k+1); the
second reuses the first's seed where ``duplicate`` is on for the game. The owed second is in the store's meta
(``pair_next``), written in the transaction that enqueues the first and cleared in the one that
enqueues the second, so a stop anywhere between them neither loses nor doubles it; both matches carry
the pair's id (`MatchRow.pair`, `LeagueStore.duplicate_pairs`).

One league, one writer: a `League` that is not passive takes the folder's lock
(`arena.league.lock`) before it touches the database and holds it while it
lives; a second `arena league run` (or trainer) on the folder is refused with
one line naming the PID that holds it. Matches found running when the league
starts were left by a process that stopped: they go back to the queue without
spending an attempt (`LeagueStore.release`), so no number of kills marks a
match failed.

Settings of a league run again on its folder with a changed config:

* refused with one line (restore the value or start a new league in another
  --dir) once they have been used: ``elo_k`` and ``payoff_decay`` after the
  first rated result (a second K-factor or decay would mix two rating scales
  in one table, and ``arena ratings --recompute`` recomputes with one),
  ``seed`` after the first match (match seeds and the common seeds of
  one-player games derive from it), and the game ids;
* applied (from the next match on) otherwise, and always for the rest: the
  budget (``matches``), ``workers``, ``in_flight``, ``backend``, ``pairing``,
  ``pfsp_weighting``, ``seat_balance`` and ``duplicate`` (an owed second match is still played),
  ``seeds``, ``move_time_limit``, ``invalid_allowance``,
  ``max_attempts``, ``update_every``, ``record``, ``replays`` (readers take
  either kind), game weights and kwargs, ``roles``, and the players (a new one
  joins; one left out is retired; an existing name with another agent spec is
  refused).

Every value is validated (`LeagueConfig`) before a league is created, so a
bad value never reaches a league's stored settings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import numpy as np

from arena.agents.specs import played_by_game
from arena.errors import AgentSpecError, ArenaError, ConfigError, IncompatibleAgent
from arena.fsio import sweep_orphans, sync_folder
from arena.league.config import LeagueConfig
from arena.league.learners import make_learner
from arena.league.lock import LOCK_FILE, writer_lock
from arena.league.protocols import LearningPlayer, Pairing
from arena.league.roles import Member, RoleStep, after_update, choose_opponent
from arena.league.storage import OVERALL, LeagueStore, MatchRow, PlayerRow, ResultRow, check_rating_settings
from arena.match.loop import InvalidMovePolicy, MatchResult
from arena.match.pool import JobsWork, MatchPool
from arena.match.runner import MatchJob, keep_replay
from arena.replays.format import LEAGUE_DB, Replay, ReplayError, parse_replay, read_replay, replay_path


#: The store's meta key of the second matches seat-balanced pairs owe, oldest first (`League._owed_pairing`).
PAIR_NEXT = "pair_next"


def _seed(league_seed: int, seq: int) -> int:
    return (league_seed * 1_000_003 + seq * 7919 + 17) % (2**31)


def common_seed(league_seed: int, index: int) -> int:
    """The seed of episode `index` of a one-player game, the same for every player: a function of the
    league's seed and the index only (distinct indices give distinct seeds: 104_729 is odd)."""
    return (league_seed * 1_000_003 + index * 104_729 + 11) % (2**31)


class League:
    def __init__(self, cfg: LeagueConfig, directory: str | Path, *, backend: str | None = None,
                 address: str | None = None, passive: bool = False, store: LeagueStore | None = None,
                 config_owner: str | None = None):
        """`config_owner`: who this config speaks for in a league several configs share (a trainer's, in a
        mixed league: ``"scc/config"``); the fixed players it adds are recorded as that owner's, and its
        sync retires only that owner's players, never those another config or a trainer added. None: the
        league's own config (`arena league run`)."""
        self.cfg = cfg
        self.config_owner = config_owner
        self.dir = Path(directory)
        self.backend = backend or cfg.backend
        self.address = address or cfg.ray_address
        #: The writer lock (`arena.league.lock`), held while this league lives; None when passive.
        self.lock = None
        if not passive:
            from arena.config import writable_folder
            from arena.league.config import check_game_settings

            check_game_settings(cfg)
            writable_folder(self.dir, "the league folder")
            self.lock = writer_lock(self.dir)
        new = store is None and not passive and not (self.dir / LEAGUE_DB).exists()
        self.store = store or LeagueStore(self.dir, elo_k=cfg.elo_k, payoff_decay=cfg.payoff_decay)
        try:
            self._start(cfg, passive)
        except BaseException:
            if new:  # a league that failed as it was made (a missing checkpoint, a bad spec): leave no half of it
                self._unmake()
            raise

    def _unmake(self) -> None:
        """Remove what making this league wrote (its database, lock and empty folders; the folder itself if
        nothing else is in it)."""
        self.store.close()
        for name in (LEAGUE_DB, LEAGUE_DB + "-wal", LEAGUE_DB + "-shm", LEAGUE_DB + "-journal", LOCK_FILE):
            with contextlib.suppress(OSError):
                (self.dir / name).unlink()
        for sub in (self.store.replay_dir, self.store.players_dir, self.dir):
            with contextlib.suppress(OSError):
                sub.rmdir()  # only if empty

    def _start(self, cfg: LeagueConfig, passive: bool) -> None:
        self._eligible_cache: dict[tuple[str, str], bool] = {}
        self._seats_cache: dict[str, int] = {}
        self._chance_cache: dict[str, bool] = {}  # filled with _seats_cache: whether a game's core declares chance
        self._scoring_cache: dict[str, str] = {}  # and how its results are rated (`scoring`)
        self._view_key: tuple[int, int] | None = None  # the pairing view's cache key (`_pairing_view`)
        self._view: tuple[dict, list, list] = ({}, [], [])
        self.learners: dict[str, LearningPlayer] = {}
        starts = int(self.store.get_meta("starts", 0))
        self.rng = np.random.default_rng([cfg.seed, starts])
        if passive:
            return  # a client of a league that another process may be running: no config sync, no learners
        self._check_fixed_settings()
        with self.store.tx():
            self.store.set_meta("starts", starts + 1)
        self._sync_config()
        self._load_learners()

    def close(self) -> None:
        """Close the database and let go of the writer lock."""
        self.store.close()
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    @classmethod
    def open(cls, directory: str | Path) -> "League":
        """A passive client of an existing league (live play, tools): it schedules and commits matches
        with the league's stored config, while the league itself may be running in another process;
        it never changes the league's players or feeds its learners."""
        store = LeagueStore(directory, create=False)
        return cls(league_config_of(store), directory, passive=True, store=store)

    def game_kwargs(self, game: str) -> dict:
        """The configured settings of `game` in this league."""
        return self._game_kwargs(game)

    # -- configuration and players ------------------------------------------------------
    def _check_fixed_settings(self) -> None:
        """elo_k, payoff_decay and seed: a changed value is applied while nothing has used the old one,
        else refused with one line (see the module docstring)."""
        store, cfg = self.store, self.cfg
        rated = store.conn.execute("SELECT 1 FROM rating_history LIMIT 1").fetchone() is not None
        old_k, old_decay = store.elo_k, store.payoff_decay
        try:
            check_rating_settings(old_k, old_decay)
            stored_ok = True
        except ConfigError:
            stored_ok = False
        if rated and not stored_ok:
            raise ConfigError(f"{self.dir}: this league was created with elo_k {old_k} and payoff_decay {old_decay}, "
                              "and its ratings are not numbers; they cannot be repaired: start a new league in "
                              "another --dir")
        for name, old, new in (("elo_k", old_k, cfg.elo_k), ("payoff_decay", old_decay, cfg.payoff_decay)):
            if float(old) != float(new) and rated:
                raise ConfigError(f"{self.dir}: {name} is {new:g} in the config, but this league's ratings were "
                                  f"computed with {name} {old:g}: restore {name}: {old:g}, or start a new league "
                                  "in another --dir")
        if float(old_k) != float(cfg.elo_k) or float(old_decay) != float(cfg.payoff_decay):  # nothing rated yet
            with store.tx():
                store.set_meta("elo_k", cfg.elo_k)
                store.set_meta("payoff_decay", cfg.payoff_decay)
            store.elo_k, store.payoff_decay = float(cfg.elo_k), float(cfg.payoff_decay)  # a new rater
        stored = store.get_meta("config")
        old_seed = stored.get("seed") if isinstance(stored, dict) else None
        if old_seed is not None and old_seed != cfg.seed and int(store.get_meta("next_seq", 0)) > 0:
            raise ConfigError(f"{self.dir}: seed is {cfg.seed} in the config, but this league's matches were seeded "
                              f"from seed {old_seed}: restore seed: {old_seed}, or start a new league in another --dir")

    def _sync_config(self) -> None:
        cfg, store = self.cfg, self.store
        for entry in cfg.learners:
            solo = [g for g in (entry.games or cfg.game_ids) if self._seats(g) == 1]
            if solo:
                raise ConfigError(
                    f"learner {entry.name!r}: {solo[0]} is a one-player game, and learning players need a two-player "
                    "game (give it only two-player games); single-agent tasks are trained with `arena train`")
        stored = store.get_meta("config")
        if stored is not None:
            old_games = [g["id"] for g in stored["games"]]
            if sorted(old_games) != sorted(cfg.game_ids):
                raise ConfigError(
                    f"{self.dir}: this league plays {', '.join(old_games)}; the config now says "
                    f"{', '.join(cfg.game_ids)}. Game ids cannot change in a running league: restore them, "
                    "or start a new league in another --dir."
                )
        wanted = self._sync_players(cfg.players, self.config_owner)
        known = {p.name: p for p in store.players()}
        for entry in cfg.learners:
            wanted.add(entry.name)
            if entry.name in known:
                if known[entry.name].role != entry.role:
                    raise ConfigError(f"learner {entry.name!r} was a {known[entry.name].role}, the config says "
                                      f"{entry.role}; give it a new name")
                store.update_player(entry.name, active=1)
        for name, row in known.items():
            # Only the config's own players are the config's to retire: not those a trainer added (its
            # teachers, learners, snapshots: an owner, or a learner of a league from before owners
            # marked "external"), whose config lists only its opponents, nor another config's (a
            # mixed league's other trainer: `config_owner`).
            managed = row.owner == self.config_owner and (
                row.kind == "fixed" or (row.kind == "learner" and not (row.state or {}).get("external")))
            if managed and name not in wanted:
                store.update_player(name, active=0)
        with store.tx():
            store.set_meta("config", asdict(cfg))
            store.set_meta("one_player_games", [g for g in cfg.game_ids if self._seats(g) == 1])
            # how each game is rated (the leaderboard reads it; kept for games the config no longer names)
            store.set_meta("scoring", {**(store.get_meta("scoring") or {}),
                                       **{g: self.scoring(g) for g in cfg.game_ids}})

    def _games_for(self, spec: str, games: list[str] | None) -> list[str]:
        if games is None:
            return [g for g in self.cfg.game_ids if self._can_play(spec, g)]
        for g in games:
            if not self._can_play(spec, g):
                raise ConfigError(f"{spec} cannot play {g}: remove {g} from its games")
        return list(games)

    def _can_play(self, spec: str, game: str) -> bool:
        key = (spec, game)
        if key not in self._eligible_cache:
            from arena.agents.specs import make_agent
            from arena.envs.registry import make_core

            try:
                make_agent(spec, make_core(game, **self._game_kwargs(game)), 0)
                ok = True
            except (IncompatibleAgent, NotImplementedError):
                ok = False  # a well-formed spec of an agent that cannot play this game
            except AgentSpecError as e:  # a typo'd kind or option, a bad value: the config must name it
                raise ConfigError(str(e)) from None
            self._eligible_cache[key] = ok
        return self._eligible_cache[key]

    def _seats(self, game: str) -> int:
        """How many players `game` seats (1: a single-agent task), from one core per game."""
        if game not in self._seats_cache:
            from arena.envs.registry import game_scoring, make_core

            core = make_core(game, **self._game_kwargs(game))
            self._seats_cache[game] = len(core.players)
            self._chance_cache[game] = bool(core.describe().get("chance", False))
            self._scoring_cache[game] = game_scoring(game, core)
        return self._seats_cache[game]

    def scoring(self, game: str) -> str:
        """How `game`'s results are rated: the config's ``scoring`` for it, else what the game declares
        (`arena.envs.registry.game_scoring`: ``win``, ``payoff``, or ``return`` for a one-player game)."""
        entry = next((g for g in self.cfg.games if g.id == game), None)
        if entry is not None and entry.scoring is not None and self._seats(game) > 1:
            return entry.scoring
        self._seats(game)
        return self._scoring_cache[game]

    def seat_balanced(self, game: str) -> bool:
        """Whether the league plays each fixed pairing on `game` in both seat orders (``seat_balance``, on a
        two-player game)."""
        return bool(self.cfg.seat_balance) and self._seats(game) == 2

    def duplicate(self, game: str) -> bool:
        """Whether the second match of a pair on `game` reuses the first's seed (``duplicate``: "auto" is
        on where the game's core declares chance, ``describe()["chance"]``)."""
        if not self.seat_balanced(game):
            return False
        if self.cfg.duplicate == "auto":
            return self._chance_cache.get(game, False)
        return bool(self.cfg.duplicate)

    def _game_kwargs(self, game: str) -> dict:
        for g in self.cfg.games:
            if g.id == game:
                return dict(g.kwargs)
        return {}

    def _load_learners(self) -> None:
        store = self.store
        for entry in self.cfg.learners:
            learner = make_learner(entry.learner, entry.name, self.dir / "players" / entry.name, dict(entry.options))
            row = store.player(entry.name)
            games = entry.games or self.cfg.game_ids
            if row is None:
                spec = learner.update(self._version_path(entry.name, 0))
                store.add_player(entry.name, "learner", spec, games, role=entry.role,
                                 state={"last_commit_seq": 0, "steps_at_snapshot": 0, "snapshots": 0})
                store.add_event("created", entry.name, role=entry.role)
            else:
                learner.load(self._version_path(entry.name, row.version))
                # Re-learn what was committed after the last saved update (lost with the process).
                since = (row.state or {}).get("last_commit_seq", 0)
                for r in store.results(since=since):
                    for seat, name in enumerate(r.players):
                        if name == entry.name and r.replay:
                            learner.learn(store.read_replay(r.match_id), seat)
            self.learners[entry.name] = learner

    def _version_path(self, name: str, version: int) -> Path:
        return self.dir / "players" / name / f"v{version:05d}.json"

    def members(self) -> list[Member]:
        return [Member(p.name, p.kind, p.role, p.parent) for p in self.store.players(active_only=True)]

    # -- matchmaking ---------------------------------------------------------------------
    def _win_rate_fn(self, game: str) -> Callable[[str, str], float]:
        payoff = self.store.payoff(game)
        return payoff.win_rate

    def win_rates(self, game: str) -> Callable[[str, str], float]:
        """``win_rate(a, b)``: a's decayed win rate against b on `game` (the role rules' input)."""
        return self._win_rate_fn(game)

    def _pick_game(self, games: list[str], rng: np.random.Generator | None = None) -> str:
        weights = {g.id: g.weight for g in self.cfg.games}
        w = np.array([weights.get(g, 1.0) for g in games], dtype=float)
        return games[int((rng or self.rng).choice(len(games), p=w / w.sum()))]

    def next_pairing(self, learner: str | None = None, rng: np.random.Generator | None = None) -> Pairing:
        """The next match: for `learner` by its role, else fixed players by the configured pairing.
        `rng`: a trainer's own generator for a learner's draws (None: the league's)."""
        if learner is not None and rng is not None:
            return self._learner_pairing(learner, rng)
        players, frozen_by_game, solo = self._pairing_view()
        learners = [n for n, p in players.items() if p.kind == "learner"]
        if learner is None and learners and self.rng.random() < self.cfg.roles.learner_share:
            # Learners take turns as the scheduling player (each is also picked as others' opponent).
            with self.store.tx():
                turn = int(self.store.get_meta("learner_turn", 0))
                self.store.set_meta("learner_turn", turn + 1)
            learner = sorted(learners)[turn % len(learners)]
        if learner is not None:
            return self._learner_pairing(learner, self.rng)
        # A fixed players' slot: the second match a pair owes, if any, else a new draw. (Without learners
        # every slot is one, and a pair's two matches are back to back; with learners, learner_share of
        # the matches stay the learners'.)
        owed = self._owed_pairing(players)
        if owed is not None:
            return owed
        return self._fixed_pairing(players, frozen_by_game, solo)

    def _owed_pairing(self, players: dict, seats: tuple[str, str] | None = None,
                      game: str | None = None) -> Pairing | None:
        """The second match a begun pair owes (`begin`) while it is not begun itself: the same players with
        the seats swapped, on the first's seed for a duplicate. Kept in the store's meta (``pair_next``),
        written in the transaction that enqueues the first match and cleared in the one that enqueues the
        second, so a league stopped anywhere between the two schedules it exactly once (a list, oldest
        first: a first begun by another process meanwhile loses nothing).

        Without `seats`: the oldest owed second due as the next fixed-player match (uniform, pfsp), or any
        once the pairing is no longer round_robin. With `seats` and `game`: the owed second of exactly
        those seats, which round_robin plays at that pair's turn in the next round (``in_turn``). An owed
        second whose player has left the league or its game is dropped (the pair stays incomplete; event
        ``pair_dropped``)."""
        owed_list = self.store.get_meta(PAIR_NEXT) or []
        if not owed_list:
            return None
        valid = lambda o: all(n in players and o["game"] in players[n].games for n in o["players"])  # noqa: E731
        gone = [o for o in owed_list if not valid(o)]
        if gone:
            with self.store.tx():
                now = self.store.get_meta(PAIR_NEXT) or []
                self.store.set_meta(PAIR_NEXT, [o for o in now if o not in gone])
                for o in gone:
                    if o in now:
                        self.store.add_event("pair_dropped", None, pair=o["pair"], players=o["players"], game=o["game"])
        rr = self.cfg.pairing == "round_robin"
        for o in owed_list:
            if o in gone:
                continue
            if seats is None and (not o.get("in_turn") or not rr) or \
                    seats is not None and o["game"] == game and tuple(o["players"]) == tuple(seats):
                names = list(o["players"])
                return Pairing(o["game"], names, [players[n].spec for n in names], o.get("why", ""),
                               seed=o.get("seed"), pair=o["pair"])
        return None

    def _paired(self, g: str, seats: list[str], players: dict, why: str, in_turn: bool = False) -> Pairing:
        """A pairing of fixed players drawn by the configured pairing: the first of a pair when `g` is seat
        balanced (`begin` then owes the swapped second: the next fixed-player match, or with `in_turn` the
        pair's turn in round_robin's next round), else a single match."""
        specs = [players[n].spec for n in seats]
        if not self.seat_balanced(g):
            return Pairing(g, seats, specs, why)
        return Pairing(g, seats, specs, why, pair=True, duplicate=self.duplicate(g), in_turn=in_turn)

    def _learner_pairing(self, learner: str, rng: np.random.Generator) -> Pairing:
        players = self._pairing_view()[0]
        me = players[learner]
        game = self._pick_game(me.games, rng)
        pool = [Member(p.name, p.kind, p.role, p.parent) for p in players.values() if game in p.games]
        opp, why = choose_opponent(Member(me.name, me.kind, me.role, me.parent), pool, self._win_rate_fn(game),
                                   self.cfg.roles, rng)
        seats = [learner, opp] if rng.random() < 0.5 else [opp, learner]
        return Pairing(game, seats, [players[n].spec for n in seats], why)

    def _pairing_view(self) -> tuple[dict, list[tuple[str, list[str]]], list[tuple[str, list[str]]]]:
        """The active players by name, and per two-player game and per one-player game the sorted frozen
        players that play it; rebuilt only when the players change (here or in another process), not
        per match."""
        key = (self.store.players_version, self.store.data_version())
        if self._view_key != key:
            players = {p.name: p for p in self.store.players(active_only=True)}
            frozen = sorted(n for n, p in players.items() if p.kind in ("fixed", "historical"))
            by_game = [(g, [n for n in frozen if g in players[n].games]) for g in self.cfg.game_ids]
            solo = [(g, names) for g, names in by_game if self._seats(g) == 1]
            by_game = [(g, names) for g, names in by_game if self._seats(g) != 1]
            self._view, self._view_key = (players, by_game, solo), key
        return self._view

    @staticmethod
    def _combo(by_game: list[tuple[str, list[str]]], i: int) -> tuple[str, str, str]:
        """The i-th (game, a, b) of all pairs of frozen players sharing a game, in the order of
        ``for game: for a, b in combinations(players of game, 2)``, without listing them: O(games)
        a pairing however many players there are."""
        for g, names in by_game:
            n = len(names)
            pairs = n * (n - 1) // 2
            if i < pairs:
                # the row of pair i: a is the largest index with a*(2n-a-1)/2 <= i
                lo, hi = 0, n - 2
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if mid * (2 * n - mid - 1) // 2 <= i:
                        lo = mid
                    else:
                        hi = mid - 1
                a = lo
                b = a + 1 + i - a * (2 * n - a - 1) // 2
                return g, names[a], names[b]
            i -= pairs
        raise IndexError(i)

    def _fixed_pairing(self, players, by_game, solo) -> Pairing:
        # A round: every pair of each two-player game once, then `seeds` episodes per player of each
        # one-player game (without one-player games, exactly the pairs as before).
        pairs = sum(len(names) * (len(names) - 1) // 2 for _, names in by_game)
        total = pairs + self.cfg.seeds * sum(len(names) for _, names in solo)
        if not total:
            raise ConfigError("no two frozen players share a game: add players or games")
        # Two seats the game plays itself (StarCraft II's built-in AI) never meet: such a pair is passed over.
        apart = lambda a, b: played_by_game(players[a].spec) and played_by_game(players[b].spec)  # noqa: E731
        if self.cfg.pairing == "round_robin":
            for _ in range(total):
                with self.store.tx():
                    i = int(self.store.get_meta("rr_index", 0))
                    self.store.set_meta("rr_index", i + 1)
                if i % total >= pairs:
                    return self._episode(players, solo, i % total - pairs)
                g, a, b = self._combo(by_game, i % total)
                if not apart(a, b):
                    # A pair's seats alternate round by round. With seat balance, the two are recorded as a
                    # pair: the second (next round) is the one the first owes, on its seed for a duplicate.
                    seats = [a, b] if (i // total) % 2 == 0 else [b, a]
                    owed = self._owed_pairing(players, tuple(seats), g) if self.seat_balanced(g) else None
                    return owed or self._paired(g, seats, players, "round_robin", in_turn=True)
            raise ConfigError("no two players can meet: every pair is of seats the game plays itself (sc2bot)")
        for _ in range(100 * total):
            k = int(self.rng.integers(total))
            if k >= pairs:
                return self._episode(players, solo, k - pairs)
            g, a, b = self._combo(by_game, k)
            if not apart(a, b):
                break
        else:
            raise ConfigError("no two players can meet: every pair is of seats the game plays itself (sc2bot)")
        if self.cfg.pairing == "pfsp":
            others = [n for n in dict(by_game)[g] if n != a and not apart(a, n)]
            from arena.league.pfsp import pfsp_sample

            wr = self._win_rate_fn(g)
            b = pfsp_sample(others, [wr(a, o) for o in others], self.cfg.pfsp_weighting, self.rng)
        seats = [a, b] if self.rng.random() < 0.5 else [b, a]
        return self._paired(g, seats, players, self.cfg.pairing)

    def _episode(self, players, solo, k: int) -> Pairing:
        """The next episode of the one-player game that holds slot `k` of the round. The player furthest
        behind on the game's seed list plays its next seed (ties by name): seed j goes to every player
        before seed j+1, and a player who joins later catches up from seed 0. Each player's next seed
        index is in the store's meta, in the transaction that enqueues the match (the refill's), so a
        stopped league neither skips nor repeats a (player, seed)."""
        for game, names in solo:
            if k < self.cfg.seeds * len(names):
                break
            k -= self.cfg.seeds * len(names)
        key = f"seed_next:{game}"
        with self.store.tx():
            nxt = self.store.get_meta(key, {})
            name = min(names, key=lambda n: nxt.get(n, 0))
            j = int(nxt.get(name, 0))
            nxt[name] = j + 1
            self.store.set_meta(key, nxt)
        return Pairing(game, [name], [players[name].spec], f"seed {j}", seed=common_seed(self.cfg.seed, j))

    # -- the interface for trainers --------------------------------------------------------
    def begin(self, pairing: Pairing, *, status: str = "queued", source: str = "league", seed: int | None = None,
              note: str | None = None) -> MatchRow:
        """Give the match its id and seed (`seed`, else the pairing's, else the league's seed sequence) in
        one transaction. Matches with ``source`` other than "league" never count toward the budget.

        The first match of a pair (``pairing.pair`` True) records in the same transaction the second it
        owes: the same players with the seats swapped, on this match's seed for a duplicate, which
        `next_pairing` gives next; the second (``pairing.pair``: the first's id) clears it in the
        transaction that enqueues it, and a second already begun is returned, never begun twice."""
        league_seed = self.cfg.seed
        seed = seed if seed is not None else pairing.seed
        seed = seed if seed is not None else (lambda seq: _seed(league_seed, seq))
        note = pairing.why if note is None else note
        enqueue = lambda pair=None: self.store.enqueue(pairing.game, pairing.players, pairing.specs,  # noqa: E731
                                                       seed=seed, status=status, note=note, source=source, pair=pair)
        if pairing.pair is None:
            return enqueue()
        with self.store.tx():
            if pairing.pair is True:
                row = enqueue(True)
                second = {"pair": row.match_id, "game": row.game, "players": list(reversed(row.players)),
                          "seed": row.seed if pairing.duplicate else None, "in_turn": pairing.in_turn,
                          "why": f"{pairing.why}, " + (f"duplicate of {row.match_id}" if pairing.duplicate
                                                       else f"seats of {row.match_id} swapped")}
                self.store.set_meta(PAIR_NEXT, (self.store.get_meta(PAIR_NEXT) or []) + [second])
                return row
            owed = self.store.get_meta(PAIR_NEXT) or []
            rest = [o for o in owed if o.get("pair") != pairing.pair]
            if len(rest) < len(owed):
                self.store.set_meta(PAIR_NEXT, rest)
            else:
                begun = self.store.paired_match(pairing.pair)
                if begun is not None:
                    return begun
            return enqueue(pairing.pair)

    def commit(self, match_id: str, result: MatchResult) -> bool:
        """Commit a finished match (idempotent) and feed the learning players that played it."""
        return self.commit_many([(match_id, result)])[0]

    def commit_many(self, items: list[tuple[str, MatchResult]]) -> list[bool]:
        """Group commit: the batch's results, ratings and payoff in one transaction (each match at most
        once), then the learning players are fed, in commit order."""
        if not items:
            return []
        if any(r.replay_path and r.replay_blob is None for _, r in items):
            # The batch's replay files become durable in one flush before the transaction that points at
            # them: a result is never committed without its replay, even after a power loss.
            sync_folder(self.store.replay_dir)
        fresh = self.store.commit_results(items)
        for (match_id, result), new in zip(items, fresh):
            if new:
                self._feed_learners(match_id, result)
        return fresh

    def attach_replay(self, match_id: str, result: MatchResult) -> MatchResult:
        """Ready `result`'s in-memory replay (played outside `job`, e.g. by a trainer) to be kept as
        the league keeps replays, under `match_id`, by the next `commit_many`."""
        if result.replay is None:
            return result
        return keep_replay(result, match_id, self._replay_dir(), self.cfg.compress_replays, durable=False)

    def _replay_dir(self) -> str | None:
        """The folder of the league's replay files; None when it keeps them in its database."""
        return str(self.store.replay_dir) if self.cfg.replays == "files" else None

    def add_snapshot(self, parent: str, spec: str, name: str | None = None) -> str:
        """Freeze `spec` (weights of learning player `parent`) as a historical player."""
        with self.store.tx():  # the snapshot, its parent's count and the event: all or nothing
            prow = self.store.player(parent)
            if prow is None:
                raise KeyError(f"no player {parent!r} in this league")
            state = dict(prow.state or {})
            n = int(state.get("snapshots", 0)) + 1
            name = name or f"{parent}@{n}"
            self.store.add_player(name, "historical", spec, prow.games, role=prow.role, parent=parent,
                                  owner=prow.owner)
            state.update(snapshots=n, steps_at_snapshot=prow.steps)
            self.store.update_player(parent, state=state)
            self.store.add_event("snapshot", parent, snapshot=name, steps=prow.steps, version=prow.version)
        return name

    # -- what a trainer reads and writes (`arena.league.protocols.LeagueClient`) -----------------------
    def player(self, name: str) -> PlayerRow | None:
        """Player `name`'s row (None: no such player)."""
        return self.store.player(name)

    def players(self, active_only: bool = False) -> list[PlayerRow]:
        return self.store.players(active_only=active_only)

    def add_player(self, name: str, kind: str, spec: str, games: list[str], *, role: str | None = None,
                   state: dict | None = None, owner: str | None = None) -> None:
        """A player a trainer adds (its learner, its teachers): `owner` is the trainer's, so no config's
        sync retires it."""
        self.store.add_player(name, kind, spec, games, role=role, state=state, owner=owner)

    def update_player(self, name: str, **fields) -> None:
        self.store.update_player(name, **fields)

    def transaction(self):
        """One write transaction around several calls (nested calls join it)."""
        return self.store.tx()

    def matches(self, source: str | None = None) -> list[MatchRow]:
        return self.store.matches(source=source)

    def result_for(self, match_id: str) -> ResultRow | None:
        """The result of match `match_id` (None: not committed)."""
        return self.store.result_for(match_id)

    def results(self, game: str | None = None) -> list[ResultRow]:
        return self.store.results(game=game)

    def read_replay(self, match_id: str) -> Replay:
        return self.store.read_replay(match_id)

    def meta(self, key: str, default=None):
        return self.store.get_meta(key, default)

    def set_meta(self, key: str, value) -> None:
        self.store.set_meta(key, value)

    def add_event(self, kind: str, player: str | None = None, **data) -> None:
        self.store.add_event(kind, player, **data)

    def _sync_players(self, players: list, owner: str | None) -> set[str]:
        """A config's fixed players added (under `owner`) or re-activated; `owner`'s fixed players the
        list no longer names retired. Returns the names listed."""
        store = self.store
        known = {p.name: p for p in store.players()}
        wanted = set()
        for p in players:
            wanted.add(p.name)
            try:
                games = self._games_for(p.agent, p.games)
            except ConfigError as e:
                raise ConfigError(f"player {p.name!r}: {e}") from None
            if p.name in known:
                if known[p.name].spec != p.agent:
                    raise ConfigError(
                        f"player {p.name!r} was {known[p.name].spec!r} and is now {p.agent!r}: its ratings would "
                        "mix two agents. Give the new agent a new name.")
                claim = {"owner": owner} if owner and known[p.name].owner is None else {}
                store.update_player(p.name, games=games, active=1, **claim)
            else:
                if not games:
                    raise ConfigError(f"player {p.name!r} ({p.agent}) can play none of the league's games")
                store.add_player(p.name, "fixed", p.agent, games, owner=owner)
        for name, row in known.items():
            if row.owner == owner and row.kind == "fixed" and name not in wanted and owner is not None:
                store.update_player(name, active=0)
        return wanted

    # -- learning players --------------------------------------------------------------------
    def _feed_learners(self, match_id: str, result: MatchResult) -> None:
        if not self.learners:
            return
        row = self.store.result_for(match_id)
        touched = [n for n in dict.fromkeys(row.players) if n in self.learners]
        if not touched:
            return
        if result.replay is not None:
            replay = result.replay
        elif result.replay_blob is not None:
            replay = parse_replay(result.replay_blob, match_id)
        else:
            replay = read_replay(result.replay_path)
        for seat, name in enumerate(row.players):
            if name in self.learners:
                self.learners[name].learn(replay, seat)
        for name in touched:
            if self.learners[name].pending >= self.cfg.update_every:
                self._update_learner(name, row.commit_seq)

    def _update_learner(self, name: str, commit_seq: int) -> None:
        learner, prow = self.learners[name], self.store.player(name)
        version = prow.version + 1
        spec = learner.update(self._version_path(name, version))
        state = dict(prow.state or {})
        state["last_commit_seq"] = commit_seq
        self.store.update_player(name, spec=spec, version=version, state=state)
        step = self.role_step(name, self.rng)
        if step.snapshot:
            snap = self.add_snapshot(name, learner.freeze(self.dir / "players" / "frozen" / f"{name}-v{version}.json"))
            if step.reset:
                source = step.branch_from
                src = self.store.player(source) if source is not None else None
                learner.reset_to(self._version_path(source, src.version) if src is not None else None)
                version += 1
                spec = learner.update(self._version_path(name, version))
                self.store.update_player(name, spec=spec, version=version)
                self.store.add_event("reset", name, branched_from=source, after_snapshot=snap)

    def role_step(self, name: str, rng: np.random.Generator, *, due: bool = False) -> RoleStep:
        """The role lifecycle after an update of learning player `name` (`arena.league.roles.after_update`),
        the one rule for the league's own learners and a trainer's (`due`: its own snapshot schedule)."""
        prow = self.store.player(name)
        if prow is None:
            raise KeyError(f"no player {name!r} in this league")
        state = prow.state or {}
        steps_since = prow.steps - int(state.get("steps_at_snapshot", 0))
        game = OVERALL if len(prow.games) > 1 else prow.games[0]
        return after_update(Member(name, "learner", prow.role, None), steps_since, self.members(),
                            self._win_rate_fn(game), self.cfg.roles, rng, due=due)

    # -- running ---------------------------------------------------------------------------
    def job(self, row: MatchRow, **changes) -> MatchJob:
        """The job that plays match `row` as the league plays it (its settings, where its replay goes);
        `changes` override `MatchJob` fields (e.g. a person's ``move_time_limit``)."""
        job = MatchJob(match_id=row.match_id, game=row.game, specs=tuple(row.specs), seed=row.seed,
                        game_kwargs=self._game_kwargs(row.game),
                        policy=InvalidMovePolicy(allowance=self.cfg.invalid_allowance),
                        move_time_limit=self.cfg.move_time_limit, record=self.cfg.record,
                        replay_dir=self._replay_dir(), replay_blob=self.cfg.replays == "database",
                        compress=self.cfg.compress_replays,
                        durable=False)  # files: synced per batch, in commit_many
        return dataclasses.replace(job, **changes) if changes else job

    def recover(self) -> dict[str, int]:
        """Matches left running by a stopped process: commit from their replay, else re-queue."""
        counts = {"committed_from_replay": 0, "requeued": 0}
        sweep_orphans(self.store.replay_dir)  # temporary files of writers killed mid-write
        for m in self.store.matches(status="running", source="league"):
            path = replay_path(self.store.replay_dir, m.match_id, self.cfg.compress_replays)
            try:
                rep = read_replay(path) if path.exists() else None
            except ReplayError:
                rep = None
            if rep is not None:
                self.commit(m.match_id, MatchResult.from_replay(rep, str(path)))
                counts["committed_from_replay"] += 1
            else:
                # Not an attempt of the match's: its process stopped, not the match (see `LeagueStore.release`).
                self.store.release(m.match_id, "re-queued after the league stopped mid-match")
                counts["requeued"] += 1
        return counts

    def run(self, matches: int | None = None, on_progress: Callable[[dict], None] | None = None,
            stop: Callable[[], bool] | None = None) -> dict:
        """Play until `matches` results (default: the config's budget) are committed."""
        target = self.cfg.matches if matches is None else matches
        recovered = self.recover()
        # The league's matches on the one match pool: a worker that dies loses only the matches it held
        # (returned as `WorkerLost`, re-queued below); a full disk is raised at once (re-queueing would only
        # fail the same way; matches whose replays made it to disk are committed from them on the next run).
        executor = MatchPool(self.backend, self.cfg.workers, address=self.address)
        inflight: dict[str, MatchRow] = {}
        # The budget counts the league's own matches; counted in memory after one query (external
        # commits, e.g. a human playing a league player, never count toward it).
        committed = [self.store.result_count("league")]
        count = lambda: committed[0]  # noqa: E731
        started, done_at_start = time.perf_counter(), count()
        failures = streak = 0
        # Matches that fail one after another with nothing committed between them (an agent that cannot
        # be built in a worker, a game that raises at reset): past this many the run stops and says why,
        # instead of scheduling new matches that fail the same way forever.
        give_up = max(20, 2 * self.cfg.in_flight * self.cfg.max_attempts)
        try:
            while True:
                done = count()
                if (done >= target and not inflight) or (stop is not None and stop()):
                    break
                if done + len(inflight) < target and len(inflight) < self.cfg.in_flight:
                    queued = [m for m in self.store.matches(status="queued", source="league")
                              if m.match_id not in inflight]
                    rows = []
                    with self.store.tx():  # schedule the whole refill in one transaction
                        while done + len(inflight) + len(rows) < target and \
                                len(inflight) + len(rows) < self.cfg.in_flight:
                            if queued:
                                row = queued.pop(0)
                                self.store.mark_running(row.match_id)
                            else:
                                row = self.begin(self.next_pairing(), status="running")
                            rows.append(row)
                    for row in rows:
                        inflight[row.match_id] = row
                        executor.send(row.match_id, JobsWork([self.job(row)]))
                finished = []
                for mid, out in executor.recv(timeout=0.5):
                    inflight.pop(mid, None)
                    out = out if isinstance(out, BaseException) else out[0]
                    if isinstance(out, BaseException):
                        failures += 1
                        streak += 1
                        why = f"{type(out).__name__}: {out}"
                        self.store.requeue(mid, why, self.cfg.max_attempts)
                        if streak >= give_up:
                            raise ArenaError(f"league stopped: {streak} matches failed in a row and none finished; "
                                             f"the last: {why.splitlines()[0][:300]}")
                    else:
                        finished.append((mid, out))
                        streak = 0
                committed[0] += sum(self.commit_many(finished))
                if on_progress is not None:
                    elapsed = time.perf_counter() - started
                    now_done = count()
                    new = now_done - done_at_start
                    on_progress({"done": now_done, "target": target, "inflight": len(inflight),
                                 "rate": new / elapsed if elapsed > 0 else 0.0, "failures": failures})
        finally:
            executor.close()
            sweep_orphans(self.store.replay_dir)  # what workers stopped mid-write left behind
        elapsed = time.perf_counter() - started
        new = count() - done_at_start
        return {"results": count(), "new": new, "seconds": elapsed,
                "matches_per_s": new / elapsed if elapsed > 0 else 0.0, "failures": failures, **recovered}


def open_league(directory: str | Path) -> LeagueStore:
    """Read-only access to an existing league's state (for status, ratings, reports)."""
    return LeagueStore(directory, create=False)


def league_config_of(store: LeagueStore) -> LeagueConfig:
    from arena.config import from_dict

    return from_dict(LeagueConfig, json.loads(json.dumps(store.get_meta("config"))))
