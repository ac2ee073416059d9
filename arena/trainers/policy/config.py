"""The SCC trainer's configuration (``configs/train/scc_*.yaml`` with ``trainer: scc``), validated into
typed dataclasses by `arena.trainers.registry.read_train_config`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Optional

from arena.league.session import RolesConfig
from arena.trainers.common.base import TrainerConfig
from arena.trainers.common.device import Device
from arena.trainers.parallel.config import ParallelConfig
from arena.trainers.policy.learner import LearnerSettings


@dataclass
class DaggerConfig:
    """Rounds of imitation on the policy's own positions (DAgger, Ross, Gordon and Bagnell 2011): a
    policy fitted only to its teachers' games meets positions they never reach, and its errors there
    compound. Each round the current imitation policy (sampling its moves) plays `matches` seat-swapped
    matches against `opponent`, into the run's league as ``<main>@dagger<round>``; the labeller
    (`ImitationConfig.label`) labels every position where it moved, and the policy trains on, and is
    validated on, everything so far for up to `epochs` more epochs."""

    rounds: int = 0
    matches: int = 200
    epochs: int = 6
    #: The agent spec the policy plays in the rounds (None: the second teacher). The positions that
    #: matter are those it meets against strong play; the teachers may play noisily on purpose.
    opponent: Optional[str] = None

    def __post_init__(self):
        if self.rounds < 0:
            raise ValueError(f"il.dagger.rounds must be >= 0, got {self.rounds}")
        if self.rounds and (self.matches < 2 or self.epochs < 1):
            raise ValueError("il.dagger: a round needs matches >= 2 (one to validate on) and epochs >= 1, got "
                             f"matches {self.matches}, epochs {self.epochs}")


@dataclass
class ExpertConfig:
    """Rounds of expert iteration after imitation (Anthony, Tian and Barber 2017; AlphaZero's loop):
    the policy improves on its teacher with its own search, no stronger labeller. Each round the
    policy as it stands searches (``policy_mcts``: PUCT over its priors and value, `simulations` a
    move, the first `explore` moves drawn from the visits) against itself for `matches` games, into
    the run's league as ``<main>@expert<round>``; every move is labelled by the search that chose it
    (the share of its root visits each move received) and the game's outcome, and the network
    fits both (the value with weight `value_coef`) on the positions of the last `window` rounds for
    up to `epochs` epochs (with `mix` imitation positions per own one), validated on held-out games of
    those rounds. For two-player zero-sum
    perfect-information OpenSpiel games (Connect Four, tic-tac-toe)."""

    rounds: int = 0
    matches: int = 200
    simulations: int = 100
    explore: int = 8
    uct_c: float = 2.0
    epochs: int = 4
    window: int = 2
    value_coef: float = 1.0
    #: Imitation positions drawn afresh into each round's fit, per position of the rounds' own (so the
    #: network keeps what it learnt from its teacher where its own games do not go); 0: none.
    mix: float = 1.0
    #: The learning rate of the rounds' fits (None: ``il.lr``).
    lr: Optional[float] = None

    def __post_init__(self):
        if self.rounds < 0:
            raise ValueError(f"il.expert.rounds must be >= 0, got {self.rounds}")
        if self.rounds and (self.matches < 2 or self.epochs < 1 or self.window < 1):
            raise ValueError("il.expert: a round needs matches >= 2 (one to validate on), epochs >= 1 and window >= 1, "
                             f"got matches {self.matches}, epochs {self.epochs}, window {self.window}")
        if self.simulations < 2 or self.explore < 0 or not self.uct_c > 0 or self.value_coef < 0 or self.mix < 0:
            raise ValueError("il.expert: simulations >= 2, explore >= 0, uct_c > 0, value_coef >= 0 and mix >= 0, got "
                             f"{self.simulations}, {self.explore}, {self.uct_c}, {self.value_coef}, {self.mix}")
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"il.expert.lr must be > 0, got {self.lr}")


@dataclass
class ImitationConfig:
    """SCC's first stage: behaviour cloning on league replays of chosen players."""

    #: Teacher matches played into the run's league and imitated: one spec per seat. The seats'
    #: players are named by their specs (see `players`).
    teachers: list[str] = field(default_factory=lambda: ["mcts:simulations=100", "mcts:simulations=100"])
    #: How many teacher matches to play (0 with `league`: imitate that league's replays only).
    matches: int = 400
    #: Imitate the replays of another league's folder instead (its players named in `players`).
    league: Optional[str] = None
    #: League player names whose moves are imitated (None: every teacher seat / every player).
    players: Optional[list[str]] = None
    #: Worker processes for the teacher matches.
    workers: int = 2
    epochs: int = 30
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-4
    #: Share of the matches (not moves: no position leaks across the split) held out for validation.
    val_fraction: float = 0.1
    #: Stop when the validation loss has not improved for this many epochs; the best epoch is kept.
    patience: int = 4
    #: The value head also learns the final outcome, with this weight (a warm critic for RL).
    value_coef: float = 0.25
    #: Label smoothing: this share of each part's target is the uniform policy over its legal choices,
    #: so the choices the teacher never makes keep some probability for RL to sample (0: none).
    smoothing: float = 0.0
    #: What is imitated: "auto", the teachers' action probabilities at every position where every
    #: teacher's strategy can be read (CFR's table), else their moves; "moves", the moves alone.
    targets: str = "auto"
    #: An agent spec whose strategy can be read (``mcts:simulations=3000,backend=cpp``) that labels every
    #: imitated position with its action probabilities, in place of the seat's own player: the teacher
    #: matches give the positions, the labeller the targets. None: each seat's player.
    label: Optional[str] = None
    #: Train on each position's mirror image too, where the game's board has one (`GameCore.mirror`:
    #: Connect Four, tic-tac-toe); validation stays on the positions as played.
    mirror: bool = False
    #: Rounds on the policy's own positions, labelled by `label` (none by default).
    dagger: DaggerConfig = field(default_factory=DaggerConfig)
    #: Rounds of expert iteration after the imitation (and DAgger) rounds (none by default).
    expert: ExpertConfig = field(default_factory=ExpertConfig)
    #: A folder of StarCraft II's own replays (``.SC2Replay``, at most
    #: `arena.envs.sc2.replay_observer.MAX_REPLAYS` of them) on the run's map and game build, imitated
    #: from what each player saw and did as the game's replay observer plays them again (SCC, AlphaStar);
    #: every player's perspective, or those of `players` named as seats (``player_1``) or player ids
    #: (``"1"``). Only for the ``sc2/`` games (raw interface); with or without teacher matches.
    sc2_replays: Optional[str] = None

    def __post_init__(self):
        if self.dagger.rounds and self.label is None:
            raise ValueError("il.dagger labels the policy's own positions: set il.label to a labeller whose "
                             "strategy can be read (e.g. mcts:simulations=3000,backend=cpp)")
        if self.label is not None and self.targets != "auto":
            raise ValueError("il.label gives action probabilities to fit: it needs il.targets: auto")
        if self.targets not in ("auto", "moves"):
            raise ValueError(f"il.targets must be auto or moves, got {self.targets!r}")
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"il.val_fraction must be in (0, 1), got {self.val_fraction}")
        if self.epochs < 1 or self.batch_size < 1 or self.patience < 1:
            raise ValueError("il.epochs, il.batch_size and il.patience must be >= 1")
        if not 0.0 <= self.smoothing < 1.0:
            raise ValueError(f"il.smoothing must be in [0, 1), got {self.smoothing}")
        from arena.workers import check_workers

        check_workers(self.workers, "il.workers")
        if self.matches < 0:
            raise ValueError("il.matches must be >= 0")
        if self.sc2_replays is not None and not str(self.sc2_replays).strip():
            raise ValueError("il.sc2_replays: a folder of .SC2Replay files, or leave it out")
        if self.sc2_replays and self.players and (self.matches or self.league):
            raise ValueError("il.players names the replays' players (player_1, \"2\") when il.sc2_replays is read "
                             "alone: set il.matches: 0 and no il.league, or leave il.players out")


@dataclass
class LearnerSpec:
    """A learning player of the run's league and its AlphaStar role."""

    name: str
    role: Literal["main", "main_exploiter", "league_exploiter"] = "main"


@dataclass
class EvalConfig:
    every: int = 10
    games: int = 200
    #: Greedy seat-swapped games against each; `best` follows the win rate against the first.
    opponents: list[str] = field(default_factory=lambda: ["random"])
    #: Also the main's NashConv (OpenSpiel's exact best responses; small poker games), each evaluation.
    nash_conv: bool = False
    #: Also the tactics probe of the main's greedy policy on this many random positions of each kind
    #: (`arena.agents.probe`: immediate wins taken, single threats blocked; two-player
    #: perfect-information OpenSpiel games); 0: none.
    tactics: int = 0

    def __post_init__(self):
        if self.every < 1 or self.games < 2 or not self.opponents:
            raise ValueError("eval.every >= 1, eval.games >= 2 and at least one eval.opponents are required")
        if self.tactics < 0:
            raise ValueError(f"eval.tactics is a number of positions >= 0, got {self.tactics}")


@dataclass
class MagnetConfig:
    """The policy the RL loss's KL pulls towards (the magnet of magnetic mirror descent; R-NaD's
    regularisation policy). Its coefficient is the config's ``kl_coef``/``kl_end``/``kl_schedule``."""

    #: "imitation": the imitation policy (SCC, AlphaStar); "uniform": the uniform policy over the legal
    #: moves (no network); "copy": a frozen copy of each learner's own policy, replaced by its current
    #: weights every `every` iterations (R-NaD's regularisation policy update).
    kind: Literal["imitation", "uniform", "copy"] = "imitation"
    #: Iterations between a copy magnet's refreshes (kind copy only).
    every: int = 0
    #: kind copy: each magnet's stage runs the learning-rate and KL schedules from their start over its
    #: `every` iterations (R-NaD: each regularised game is solved, its noise annealed away, before the
    #: magnet moves to the solution); false: one schedule over the whole run.
    restart: bool = False

    def __post_init__(self):
        if self.kind not in ("imitation", "uniform", "copy"):
            raise ValueError(f"magnet.kind must be imitation, uniform or copy, got {self.kind!r}")
        if self.kind == "copy" and self.every < 1:
            raise ValueError(f"magnet.every: a copy magnet is refreshed every N >= 1 iterations, got {self.every} "
                             "(set magnet.every, e.g. 10)")
        if self.kind != "copy" and self.every:
            raise ValueError(f"magnet.every is for magnet.kind copy, not {self.kind} (remove it or set kind: copy)")
        if self.kind != "copy" and self.restart:
            raise ValueError(f"magnet.restart is for magnet.kind copy, not {self.kind} (remove it or set kind: copy)")


@dataclass
class SCCConfig(TrainerConfig):
    game: str = "openspiel/connect_four-v0"
    iterations: int = 100
    game_kwargs: dict[str, Any] = field(default_factory=dict)
    device: Device = "cpu"
    threads: int = 2
    #: Network: auto (conv for board planes, mlp for vectors, entity for entity lists), and sizes
    #: (`arena.inference.policy_nets.DEFAULT_SIZES`).
    arch: Literal["auto", "mlp", "conv", "entity"] = "auto"
    sizes: dict[str, Any] = field(default_factory=dict)
    il: Optional[ImitationConfig] = field(default_factory=ImitationConfig)
    learners: list[LearnerSpec] = field(default_factory=lambda: [LearnerSpec("main", "main"),
                                                                    LearnerSpec("main_exploiter", "main_exploiter")])
    #: Fixed players of the league (rated with the learners; PFSP opponents).
    opponents: list[str] = field(default_factory=lambda: ["random"])
    roles: RolesConfig = field(default_factory=lambda: RolesConfig(snapshot_steps=2000, snapshot_min_steps=400))
    #: Share of each learner's games against the fixed opponents (the rest by its role's rule).
    fixed_share: float = 0.2
    #: Matches per learner per iteration, played together (one batched forward a tick).
    games_per_iter: int = 64
    #: Actor processes (0: the actors run in the learner's process).
    actors: int = 0
    #: Where actor processes run: a local process pool, or Ray tasks (`ray_address`: a cluster; else a
    #: local Ray with `actors` CPUs).
    actors_backend: Literal["local", "ray"] = "local"
    ray_address: Optional[str] = None
    #: With actors > 0: the actors play the next iteration with the weights the learner had when it
    #: started on this one (one version of lag, corrected by the importance weights), instead of waiting.
    overlap: bool = False
    # -- the RL loss ------------------------------------------------------------------------
    #: The learner's settings (`arena.trainers.policy.learner.LearnerSettings`): algo (ppo, vtrace),
    #: epochs, minibatch, gamma, lam, clip, rho_bar, c_bar, value_coef, entropy_coef, upgo_coef,
    #: kl_direction, max_grad_norm, target_kl.
    learner: LearnerSettings = field(default_factory=LearnerSettings)
    lr: float = 3e-4
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    lr_end: float = 0.0
    #: The KL to the magnet (by default the imitation policy, SCC's anchor), its coefficient annealed from
    #: kl_coef to kl_end over the run (its direction: ``learner.kl_direction``).
    kl_coef: float = 0.1
    kl_end: float = 0.0
    kl_schedule: Literal["constant", "linear", "cosine"] = "linear"
    magnet: MagnetConfig = field(default_factory=MagnetConfig)
    #: Returns are multiplied by this before learning (poker: chips to about [-1, 1]).
    reward_scale: float = 1.0
    #: Weight of a game's dense per-move reward (`shaped_rewards`: Skirmish's damage dealt minus damage
    #: taken) added to the outcome; 0 learns from the outcome alone. Games without one ignore it.
    shaping: float = 0.0
    #: Exploration in the training rollouts: the chance that a trained seat draws a move's first part
    #: (a structured move's order type) uniformly from its legal choices rather than from its policy,
    #: the rest of the move from the policy given it. The behaviour log-probabilities are the mixture's,
    #: so V-trace (and PPO's ratio) see the policy that played. 0: the policy alone. Imitation leaves a
    #: first part the teacher never varies with almost no entropy (Skirmish: the move order's share is
    #: 0.000 through a whole run), and a choice that is never sampled is never learned.
    explore: float = 0.0
    eval: EvalConfig = field(default_factory=EvalConfig)
    #: Every learner's step data parallel over ranks (mode odc or fsdp; `arena.trainers.parallel.policy`).
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    #: A frozen snapshot of each learner is also taken every this many iterations (0: by the role rules only).
    snapshot_every: int = 0

    #: Keys that moved: an old config naming one at the top gets a one-line error naming the new place.
    moved_keys: ClassVar[dict[str, str]] = {k: f"learner.{k}" for k in LearnerSettings.FLAT_KEYS}

    def __post_init__(self):
        if not self.learners:
            raise ValueError("learners: at least one learning player is required")
        names = [e.name for e in self.learners]
        if len(set(names)) != len(names):
            raise ValueError(f"learners: duplicate name in {names}")
        if not any(e.role == "main" for e in self.learners):
            raise ValueError("learners: one of them must have role main (exploiters branch from it)")
        if self.iterations < 0 or self.games_per_iter < 1:
            raise ValueError("iterations >= 0 and games_per_iter >= 1 are required")
        if not 0.0 <= self.fixed_share <= 1.0:
            raise ValueError(f"fixed_share must be in [0, 1], got {self.fixed_share}")
        from arena.workers import MAX_RAY_WORKERS, MAX_WORKERS, check_workers

        check_workers(self.actors, "actors", MAX_RAY_WORKERS if self.actors_backend == "ray" else MAX_WORKERS, least=0)
        if self.shaping < 0:
            raise ValueError(f"shaping must be >= 0, got {self.shaping}")
        if not 0.0 <= self.explore <= 0.5:
            raise ValueError(f"explore must be in [0, 0.5] (a chance per move), got {self.explore}")
        if not self.opponents:
            raise ValueError("opponents: at least one fixed player is required (random is a good first one)")
        if self.kl_coef < 0 or self.kl_end < 0:
            raise ValueError(f"kl_coef and kl_end (the magnet's coefficient) must be >= 0, got {self.kl_coef} "
                             f"and {self.kl_end}")

    def _on_schedule(self, iteration: int) -> tuple[int, int]:
        """(iteration, length) on the schedules' curve: the run's, or the magnet stage's when a copy
        magnet restarts them (iteration 1 of a stage follows the refresh)."""
        m = self.magnet
        if m.kind == "copy" and m.restart:
            return (iteration - 1) % m.every + 1, m.every
        return iteration, self.iterations

    def lr_at(self, iteration: int) -> float:
        from arena.trainers.common.schedules import lr_at

        return lr_at(self.lr, *self._on_schedule(iteration), self.lr_schedule, self.lr_end)

    def kl_at(self, iteration: int) -> float:
        from arena.trainers.common.schedules import lr_at

        return lr_at(self.kl_coef, *self._on_schedule(iteration), self.kl_schedule, self.kl_end)
