"""League configuration (``configs/leagues/*.yaml``), validated into typed dataclasses.

Role thresholds and probabilities default to AlphaStar's published values
(Vinyals et al. 2019, pseudocode): main agents play 35% self-play, 50% PFSP
against all historicals and 15% verification; snapshots when a player beats
every historical more than 70% of the time or after a step budget; main
exploiters play the current mains while they win more than 10%; league
exploiters reset with probability 0.25 at each snapshot.

Every value is checked here, before a league folder exists (`elo_k` > 0, `payoff_decay` in
(0, 1], `seed` >= 0, `move_time_limit` > 0, the built-in agents' options by
`arena.agents.specs.check_spec`); what a changed value does to an existing league is in
`arena.league.manager`'s docstring.

A one-player game (any Gymnasium env) is a league game too: a match is one
player playing one episode, every player plays the same seeds, and players are
ranked by mean return on the seeds all of them have finished (``seeds``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from arena.config import load_yaml
from arena.errors import AgentSpecError, ConfigError, clipped, shown
from arena.league.storage import check_rating_settings, finite


Role = Literal["main", "main_exploiter", "league_exploiter"]

#: Player names and agent specs are shown in tables, pages and error messages: bounded.
MAX_NAME_CHARS = 100
MAX_SPEC_CHARS = 500


@dataclass
class GameEntry:
    id: str
    #: Relative share of matches on this game.
    weight: float = 1.0
    #: Keyword arguments for the game (e.g. OpenSpiel params).
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: How its results are rated: "win" (win / draw / loss) or "payoff" (the returns: chips, points);
    #: None: what the game declares (`arena.envs.registry.game_scoring`).
    scoring: Optional[str] = None

    def __post_init__(self):
        if not finite(self.weight) or self.weight <= 0:
            raise ValueError(f"game {shown(self.id)}: weight must be a finite number > 0, got {shown(self.weight)}")
        if self.scoring is not None and self.scoring not in ("win", "payoff"):
            raise ValueError(f"game {shown(self.id)}: scoring must be win or payoff, got {shown(self.scoring)}")


@dataclass
class PlayerEntry:
    """A fixed player: any agent spec."""

    name: str
    agent: str
    #: Games this player plays; None means every league game its agent can play.
    games: Optional[list[str]] = None


@dataclass
class LearnerEntry:
    """A learning player with an AlphaStar role; its weights change during the run."""

    name: str
    role: Role = "main"
    #: Learner kind: "tabular" (built in) or "module:Class" for your own.
    learner: str = "tabular"
    games: Optional[list[str]] = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class RolesConfig:
    main_selfplay: float = 0.35
    main_pfsp: float = 0.50
    main_verification: float = 0.15
    #: Verification: vs past main exploiters while win rate against them < this ...
    verification_exploiter_threshold: float = 0.3
    #: ... else vs its own past while win rate against them < this.
    verification_historical_threshold: float = 0.7
    #: Self-play falls back to PFSP-variance over an opponent's history when it wins < this.
    selfplay_fallback_threshold: float = 0.3
    #: Snapshot when the player beats every historical more than this ...
    snapshot_win_rate: float = 0.7
    #: ... or after this many of its own matches (AlphaStar: 2e9 steps; small games need far fewer).
    snapshot_steps: int = 200
    #: Matches before a snapshot may be considered at all.
    snapshot_min_steps: int = 50
    main_exploiter_threshold: float = 0.1
    league_exploiter_reset_p: float = 0.25
    #: Share of league matches that involve a learning player when there are any.
    learner_share: float = 0.8

    def __post_init__(self):
        total = self.main_selfplay + self.main_pfsp + self.main_verification
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"main_selfplay + main_pfsp + main_verification must be 1, got {total}")
        for name in ("main_selfplay", "main_pfsp", "main_verification", "verification_exploiter_threshold",
                     "verification_historical_threshold", "selfplay_fallback_threshold", "main_exploiter_threshold",
                     "learner_share", "league_exploiter_reset_p", "snapshot_win_rate"):
            v = getattr(self, name)
            if not finite(v) or not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {shown(v)}")
        if self.snapshot_steps < 1 or self.snapshot_min_steps < 0:
            raise ValueError(f"snapshot_steps must be >= 1 and snapshot_min_steps >= 0, got {self.snapshot_steps} "
                             f"and {self.snapshot_min_steps}")


@dataclass
class LeagueConfig:
    games: list[GameEntry]
    name: str = "league"
    seed: int = 0
    players: list[PlayerEntry] = field(default_factory=list)
    learners: list[LearnerEntry] = field(default_factory=list)
    #: Total results to collect (a resumed run continues up to this number).
    matches: int = 200
    #: How fixed players are paired: every pair in turn, uniformly, or by PFSP on win rates.
    pairing: Literal["round_robin", "uniform", "pfsp"] = "round_robin"
    #: One-player games (single-agent tasks): episodes per player per game in each round of the
    #: pairing, as each pair of a two-player game plays once per round. Every player plays the same
    #: seeds, seed by seed (seed j goes to every player before seed j+1); round r plays the new seeds
    #: r*seeds .. (r+1)*seeds-1, so a bigger budget gives more common seeds.
    seeds: int = 10
    pfsp_weighting: Literal["squared", "variance", "linear", "linear_capped"] = "variance"
    #: Seat balance by construction: each pairing of fixed players uniform or pfsp draws on a two-player
    #: game is played in both seat orders, (a, b) and then (b, a) as the league's next fixed-player match,
    #: so every pair has played as many matches in each seat (`arena.league.manager`); round_robin keeps
    #: its schedule (seats swapped round by round) and records rounds 2k and 2k+1 of a pair as a pair.
    #: false: one match per draw, seats at random (uniform, pfsp) and unpaired. Learning players' own
    #: pairings are not balanced (docs/league.md, "Fewer games for the same confidence").
    seat_balance: bool = True
    #: Duplicate matches: the second match of a seat-balanced pair reuses the first's seed, so in a game whose
    #: chance outcomes come from the match seed (OpenSpiel's: the cards of Kuhn and Leduc poker) each player
    #: is dealt the other's cards from the other seat, and the pair scored as one result (each player's
    #: returns summed, `LeagueStore.duplicate_pairs`) has the luck of the deal taken out. "auto": on for the
    #: two-player games whose core declares chance (``describe()["chance"]``), off for the rest; true: on for
    #: every two-player game; false: off (the second match of a pair gets a seed of its own). Needs
    #: seat_balance.
    #: (true, false or "auto"; typed Any so that any other value gets __post_init__'s message, which names them.)
    duplicate: Any = "auto"
    backend: Literal["local", "ray"] = "local"
    ray_address: Optional[str] = None
    workers: int = 2
    #: Matches queued ahead of the workers.
    in_flight: int = 8
    move_time_limit: Optional[float] = 30.0
    invalid_allowance: int = 1
    #: Retries of a match whose worker died before it is marked failed.
    max_attempts: int = 3
    elo_k: float = 32.0
    payoff_decay: float = 0.99
    #: Where replays are kept: "database" (gzipped, in the league's database, in the transaction that
    #: records the match: the faster, docs/benchmarks.md) or "files" (one file each under DIR/replays/,
    #: made durable a batch at a time before the batch is recorded). Readers take either.
    replays: Literal["database", "files"] = "database"
    #: With replays: files, gzip each file (.jsonl.gz); a database always keeps them gzipped.
    compress_replays: bool = True
    #: What each match's replay holds: "actions" (what re-simulation needs; `arena replay show` and
    #: `verify` re-simulate) or "text" (each player's observation text too, what tabular learners and
    #: imitation from league replays read). Default: "text" when the league has learners, else "actions".
    record: Optional[Literal["actions", "text"]] = None
    #: Learning players update after this many new results of theirs.
    update_every: int = 16
    roles: RolesConfig = field(default_factory=RolesConfig)

    def __post_init__(self):
        if not self.games:
            raise ValueError("games: a league needs at least one game")
        names = [p.name for p in self.players] + [p.name for p in self.learners]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"players: duplicate name {shown(sorted(dup)[0])}")
        bad = [n for n in names if not n or any(c in n for c in " /:\\")]
        if bad:
            raise ValueError(f"players: name {shown(bad[0])} may not be empty or contain spaces, '/', ':' or '\\'")
        long_name = next((n for n in names if len(n) > MAX_NAME_CHARS), None)
        if long_name is not None:
            raise ValueError(f"players: name {shown(long_name, 40)} is longer than {MAX_NAME_CHARS} characters")
        long_spec = next((p for p in self.players if isinstance(p.agent, str) and len(p.agent) > MAX_SPEC_CHARS), None)
        if long_spec is not None:
            raise ValueError(f"player {shown(long_spec.name)}: agent spec {shown(long_spec.agent, 40)} is longer than "
                             f"{MAX_SPEC_CHARS} characters")
        if len(names) < 1:
            raise ValueError("players: a league needs players")
        if self.seed < 0:
            raise ValueError(f"seed: must be >= 0, got {self.seed}")
        check_rating_settings(self.elo_k, self.payoff_decay)
        if self.move_time_limit is not None and (not finite(self.move_time_limit) or self.move_time_limit <= 0):
            raise ValueError(f"move_time_limit: seconds per move must be a finite number > 0 (or null for no limit), "
                             f"got {shown(self.move_time_limit)}")
        if self.invalid_allowance < 0 or self.max_attempts < 1 or self.update_every < 1:
            raise ValueError(f"invalid_allowance must be >= 0, max_attempts and update_every >= 1; got "
                             f"{self.invalid_allowance}, {self.max_attempts} and {self.update_every}")
        from arena.agents.specs import check_spec

        for p in self.players:
            try:
                check_spec(p.agent)
            except AgentSpecError as e:
                raise ValueError(f"player {shown(p.name)}: {e}") from None
        from arena.workers import MAX_RAY_WORKERS, MAX_WORKERS, check_workers

        check_workers(self.workers, "workers", MAX_RAY_WORKERS if self.backend == "ray" else MAX_WORKERS)
        if self.in_flight < 1 or self.matches < 0:
            raise ValueError("in_flight must be >= 1 and matches >= 0")
        if self.seeds < 1:
            raise ValueError(f"seeds: must be >= 1 (episodes per player in a round of a one-player game), got {self.seeds}")
        if not isinstance(self.seat_balance, bool):
            raise ValueError(f"seat_balance: expected true or false, got {shown(self.seat_balance)}")
        if not (isinstance(self.duplicate, bool) or self.duplicate == "auto"):
            raise ValueError(f"duplicate: must be true, false or auto, got {shown(self.duplicate)}")
        if self.duplicate is True and not self.seat_balance:
            raise ValueError("duplicate: true needs seat_balance: true (a duplicate is the seat-swapped second match "
                             "of a pair, on the first's seed): set seat_balance: true, or duplicate: false")
        if self.replays not in ("database", "files"):
            raise ValueError(f"replays: {shown(self.replays)} is not one of 'database', 'files'")
        if self.record is None:
            self.record = "text" if self.learners else "actions"
        elif self.record not in ("actions", "text"):
            raise ValueError(f"record: {shown(self.record)} is not one of 'actions', 'text'")
        tabular = [e.name for e in self.learners if e.learner == "tabular"]
        if self.record == "actions" and tabular:
            raise ValueError(f"record: actions, but the tabular learner {shown(tabular[0])} learns from the observation "
                             "text in replays: set record: text (or leave record out)")
        ids = [g.id for g in self.games]
        for p in list(self.players) + list(self.learners):
            for g in p.games or []:
                if g not in ids:
                    raise ValueError(f"player {shown(p.name)}: game {shown(g)} is not one of the league's games "
                                     f"({clipped(', '.join(ids))})")

    @property
    def game_ids(self) -> list[str]:
        return [g.id for g in self.games]


def check_game_settings(cfg: "LeagueConfig") -> None:
    """Each game a league config names is a registered game given only the settings it declares (a
    config is data: `arena.envs.registry.check_settings`); checked before a league folder is made."""
    from arena.envs.registry import check_settings

    for g in cfg.games:
        check_settings(g.id, g.kwargs)


def load_league_config(path, **overrides) -> LeagueConfig:
    """Load and validate a league YAML; keyword overrides (CLI flags) that are not None replace keys."""
    return load_yaml(LeagueConfig, path, {k: v for k, v in overrides.items() if v is not None})


__all__ = ["ConfigError", "GameEntry", "LeagueConfig", "LearnerEntry", "PlayerEntry", "RolesConfig",
           "load_league_config"]
