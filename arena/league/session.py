"""A trainer's way into a league: a session for one owner and its players.

A trainer declares the league it plays in (`LeagueSpec`: its game, its fixed opponents, its role
rules) and receives a `LeagueSession`, opened for it by its base class (`arena.trainers.common.base`)
or handed to it by a trainer that shares one league between several learners (`SharedLeague`). The
session is narrow on purpose; a trainer never builds a `League`, never issues SQL and never runs the
role rules itself:

* **join**: the players the trainer adds (its learners, teachers, evaluation player), recorded as the
  session owner's, so no league config's sync ever retires them;
* **ask**: the next opponent of a learner by its role's rule (`opponent`), and after an update what the
  role rules call for (`role_step`: snapshot, reset, branch from whom); the league runs the rules
  (`League.role_step`, the same lifecycle its own learners go through), the trainer acts on its weights;
* **apply**: what an iteration gives the league (`Bundle`: its played matches, the learners' new
  weight versions, snapshots, events) in ONE transaction, idempotent on (owner, iteration): the league
  keeps the last iteration applied per owner, so a trainer killed between its checkpoint and the
  league's transaction applies the checkpointed bundle again on resume and nothing is counted twice;
* **record**: matches played outside an iteration (an imitation stage's teacher matches), in one
  transaction, and read back by their note (`kept`) so a restarted stage plays only the rest;
* read-only queries: `player`, `players`, `replays_of` (another league's replays, to imitate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from arena.league.config import RolesConfig
from arena.league.protocols import Pairing

if TYPE_CHECKING:
    import numpy as np

    from arena.league.manager import League
    from arena.league.roles import RoleStep
    from arena.league.storage import PlayerRow
    from arena.match.loop import MatchResult
    from arena.replays.format import Replay

__all__ = ["Bundle", "LeagueSession", "LeagueSpec", "PlayedMatch", "RolesConfig", "SharedLeague", "Snapshot",
           "open_session", "replays_of"]


@dataclass
class LeagueSpec:
    """The league a trainer plays in: created with these settings, or joined with them when it exists."""

    game: str
    seed: int = 0
    game_kwargs: dict = field(default_factory=dict)
    #: The league's fixed players the trainer meets: league name -> agent spec.
    opponents: dict[str, str] = field(default_factory=dict)
    roles: RolesConfig = field(default_factory=RolesConfig)
    name: str = "train"
    #: What the league's own matches record in their replays ("actions", "text"; None: the game's default).
    record: str | None = None

    def merged(self, other: "LeagueSpec") -> "LeagueSpec":
        """This league with `other`'s opponents added (one league for two trainers' needs)."""
        return LeagueSpec(self.game, self.seed, dict(self.game_kwargs), {**other.opponents, **self.opponents},
                          self.roles, self.name, self.record)

    def config(self) -> Any:
        from arena.league.config import GameEntry, LeagueConfig, PlayerEntry

        return LeagueConfig(games=[GameEntry(self.game, kwargs=dict(self.game_kwargs))], name=self.name,
                            seed=self.seed, players=[PlayerEntry(n, s, [self.game]) for n, s in self.opponents.items()],
                            matches=0, roles=self.roles, record=self.record)


@dataclass
class PlayedMatch:
    """A match a trainer played, as the league records it."""

    players: list[str]  # league names, by seat
    specs: list[str]  # the agent specs the seats played with
    result: "MatchResult"
    why: str = ""
    note: str = ""
    #: Whether the league keeps the match's replay (the result's in-memory replay).
    keep_replay: bool = True


@dataclass
class Snapshot:
    parent: str
    spec: str
    name: str


@dataclass
class Bundle:
    """What one iteration of a trainer gives the league, applied in one transaction (`LeagueSession.apply`)."""

    matches: list[PlayedMatch] = field(default_factory=list)
    #: Player name -> the fields that change (``spec``, ``version``): a learner's new weights.
    players: dict[str, dict] = field(default_factory=dict)
    snapshots: list[Snapshot] = field(default_factory=list)
    #: ``{"kind": ..., "player": ..., **data}``: the league's event log (a reset).
    events: list[dict] = field(default_factory=list)


class LeagueSession:
    """A trainer's narrow client of a league, for one owner (see the module docstring)."""

    def __init__(self, league: "League", owner: str, game: str, *, closes: bool = False):
        self._league = league
        self.owner = owner
        self.game = game
        #: The league's folder.
        self.dir = Path(league.dir)
        self._closes = closes
        self._adopt_legacy_mark()

    # -- joining ----------------------------------------------------------------------------------
    def join(self, name: str, kind: str, spec: str, *, role: str | None = None, state: dict | None = None) -> bool:
        """Add player `name` (of `kind`: "learner", "fixed", "evaluation") as this owner's, unless the
        league has it already. True when added."""
        if self._league.player(name) is not None:
            return False
        self._league.add_player(name, kind, spec, [self.game], role=role, state=state, owner=self.owner)
        return True

    def claim(self, names: set[str], *, reactivate: set[str] = frozenset()) -> None:
        """Record as this owner's the unowned players in `names` (a league written before players had
        owners); those in `reactivate` are made active again (teachers an old config sync retired)."""
        with self._league.transaction():
            for p in self._league.players():
                if p.owner is None and p.name in names:
                    extra = {"active": 1} if p.name in reactivate else {}
                    self._league.update_player(p.name, owner=self.owner, **extra)

    # -- asking ------------------------------------------------------------------------------------
    def opponent(self, learner: str, rng: "np.random.Generator") -> tuple[str, str]:
        """(opponent name, why) for `learner` by its role's rule, drawn with the trainer's generator."""
        p = self._league.next_pairing(learner, rng)
        return next((x for x in p.players if x != learner), learner), p.why

    def role_step(self, learner: str, rng: "np.random.Generator", *, due: bool = False) -> "RoleStep":
        """What the role rules call for after an update of `learner` (`due`: the trainer's own snapshot
        schedule says now), drawn with the trainer's generator: the trainer takes the snapshot and does
        the reset on its weights, and hands both to the league in its iteration's `Bundle`."""
        return self._league.role_step(learner, rng, due=due)

    def snapshots_of(self, learner: str) -> int:
        """How many snapshots of `learner` the league holds."""
        row = self._league.player(learner)
        return int((row.state or {}).get("snapshots", 0)) if row is not None else 0

    # -- reading -----------------------------------------------------------------------------------
    def player(self, name: str) -> "PlayerRow | None":
        return self._league.player(name)

    def players(self, active_only: bool = False) -> "list[PlayerRow]":
        return self._league.players(active_only=active_only)

    def kept(self, note: str) -> Iterator[tuple[int, "Replay", list[str]]]:
        """(seed, replay, league names by seat) of every recorded match with `note` whose replay is kept."""
        for m in self._league.matches(source="external"):
            if m.note != note:
                continue
            r = self._league.result_for(m.match_id)
            if r is not None and r.replay:
                yield m.seed, self._league.read_replay(r.match_id), r.players

    # -- writing -----------------------------------------------------------------------------------
    def record(self, matches: list[PlayedMatch]) -> None:
        """Matches played outside an iteration, committed (rated, replays kept) in one transaction."""
        with self._league.transaction():
            self._commit(matches)

    def applied(self) -> int:
        """The last iteration of this owner the league has applied (-1: none)."""
        return int(self._league.meta(self._mark, -1))

    def apply(self, iteration: int, bundle: Bundle) -> bool:
        """Iteration `iteration`'s bundle in one transaction, once: False (and nothing written) when the
        league has applied this owner's `iteration` (or a later one) already."""
        league = self._league
        with league.transaction():
            if self.applied() >= iteration:
                return False
            # The matches of the bundle's new snapshots (their evaluation games) after the snapshots are
            # players; every other match before, so a snapshot counts its parent's games up to it.
            new = {s.name for s in bundle.snapshots}
            self._commit([m for m in bundle.matches if not new & set(m.players)])
            for name, fields in bundle.players.items():
                league.update_player(name, **fields)
            for s in bundle.snapshots:
                league.add_snapshot(s.parent, s.spec, name=s.name)
            self._commit([m for m in bundle.matches if new & set(m.players)])
            for ev in bundle.events:
                league.add_event(ev["kind"], ev.get("player"), **{k: v for k, v in ev.items()
                                                                  if k not in ("kind", "player")})
            league.set_meta(self._mark, iteration)
        return True

    def _commit(self, matches: list[PlayedMatch]) -> None:
        league, commits = self._league, []
        for m in matches:
            row = league.begin(Pairing(self.game, list(m.players), list(m.specs), m.why), status="running",
                               source="external", seed=m.result.seed or 0, note=m.note)
            commits.append((row.match_id, league.attach_replay(row.match_id, m.result) if m.keep_replay
                            else m.result))
        league.commit_many(commits)

    @property
    def _mark(self) -> str:
        return f"applied/{self.owner}"

    def _adopt_legacy_mark(self) -> None:
        """A league written when the policy trainer kept one global mark (``scc_applied``) continues from it."""
        league = self._league
        if self.owner.startswith("scc") and league.meta(self._mark) is None and league.meta("scc_applied") is not None:
            with league.transaction():
                league.set_meta(self._mark, int(league.meta("scc_applied")))

    def close(self) -> None:
        """Close the league if this session opened it (a shared league is its opener's to close)."""
        if self._closes:
            self._closes = False
            self._league.close()


class SharedLeague:
    """One league opened for several trainers (`arena.trainers.mixed`): each gets its own session."""

    def __init__(self, spec: LeagueSpec, directory: str | Path, *, config_owner: str):
        from arena.league.manager import League

        self.spec = spec
        self.dir = Path(directory)
        self._league = League(spec.config(), self.dir, backend="inline", config_owner=config_owner)

    def session(self, owner: str) -> LeagueSession:
        return LeagueSession(self._league, owner, self.spec.game)

    def players(self) -> "list[PlayerRow]":
        return self._league.players()

    def player(self, name: str) -> "PlayerRow | None":
        return self._league.player(name)

    @property
    def lock(self) -> Any:
        return self._league.lock

    def close(self) -> None:
        self._league.close()


def open_session(spec: LeagueSpec, directory: str | Path, owner: str) -> LeagueSession:
    """The league in `directory` (created from `spec` when new; its config's players synced as
    ``<owner>/config``'s), as a session for `owner` that closes it."""
    from arena.league.manager import League

    league = League(spec.config(), directory, backend="inline", config_owner=f"{owner}/config")
    return LeagueSession(league, owner, spec.game, closes=True)


def replays_of(directory: str | Path, game: str, players: set[str] | None = None) -> list[tuple["Replay", list[str]]]:
    """The kept replays of `game` in the league in `directory` (of matches with one of `players`, when
    given), with the seats' league names: read passively, changing nothing."""
    from arena.league.manager import League

    other = League.open(directory)
    try:
        return [(other.read_replay(r.match_id), r.players) for r in other.results(game=game)
                if r.replay and (players is None or set(players) & set(r.players))]
    finally:
        other.close()
