"""SPIRAL-style self-play RL for language-model players, fed by the league.

One loop iteration:
1. ``games_per_iter`` matches, played concurrently (one batched engine for every
   LLM seat). Opponents come from the learner's own league by the main-agent
   rule (self-play, PFSP over fixed and historical players, verification), or
   pure self-play. In self-play both seats are trained.
2. Rewards: the match outcome of each learner seat (an invalid move ends the
   match: -1.5 for the offender, +0.5 for the other player, SPIRAL's training
   values), placed on the last token of each of the seat's turns, gamma 1.
3. Advantages: role-conditioned advantage estimation (RAE): an EMA baseline per
   (game, role), read before it is updated; or GRPO / Dr. GRPO / none for
   comparison; or a BPCO-style critic (bounded value head, Monte-Carlo targets,
   length-adaptive GAE, privileged critic input).
4. A DPPO-family loss (or PPO clip) on the tokens the model generated, with the
   rollout log-probs as the behaviour policy.
5. Every ``eval.every`` iterations: greedy evaluation games against fixed opponents, a
   checkpoint, and a frozen snapshot in the league; the training matches since the last
   checkpoint, the snapshot and its evaluation games (so snapshots are rated) enter the league
   in one transaction after the checkpoint that holds them (`Trainer.close_iteration`), so a run
   killed anywhere neither loses nor doubles a match; ``best`` links the checkpoint with the highest
   evaluation win rate against the first evaluation opponent (``best.json``).
6. At the end, with ``eval.confirm_top`` > 0, the top checkpoints of those
   evaluations play a second round on fresh games and ``best`` moves to its
   winner (a maximum over noisy evaluations overrates the checkpoint it picks).

Checkpoints hold the model, the optimizer, the loss scaler, the RAE baselines
and RNG states; ``arena train`` on an existing run folder resumes from the latest. The imitation
stage's matches are written to ``imitation-matches/`` as they are played: a run stopped before its
first checkpoint reads them back and plays only the rest.

Inside an iteration ``run(phase=...)`` hears ``phase(text, done, total)``: ``"rollout: matches"``,
``"update: epochs"`` and ``"evaluation: games"`` (and, in the imitation stage, its matches, its
examples and its epochs); ``arena train`` shows them as a second bar with a rate.

The trainer is three parts: the **Learner** (`arena.trainers.llm.learner.LLMLearner`:
model, optimizer, device, precision, ``step(batch)``), the **Actors**
(`arena.trainers.llm.rollout.LLMActors`: the generation engine and the rollouts) and
this module's **Coordinator**, `SpiralTrainer` (a `arena.trainers.common.base.Trainer`, whose
base owns the run folder, the checkpoint write, ``best``, the metrics, stopping and the league
session): the loop, the batch (advantages) and evaluation. The coordinator is the learner's
`arena.league.protocols.LearningPlayer` in its league (``weights``, ``load``,
``reset_to``, ``freeze``) and talks to the league only through its session
(`arena.league.session.LeagueSession`).
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import numpy as np

from arena.agents.prompts import make_template
from arena.league.session import Bundle, LeagueSpec, PlayedMatch, Snapshot
from arena.match.loop import InvalidMovePolicy
from arena.trainers.common.base import Trainer
from arena.trainers.common.checkpoints import checkpoint_path
from arena.trainers.common.metrics import read_metrics
from arena.trainers.llm.config import SpiralConfig
from arena.trainers.llm.learner import Batch, LearnerSettings, LLMLearner, Sample
from arena.trainers.llm.rollout import LEARNER, Episode, LLMActors

LEARNER_NAME = "learner"

__all__ = ["LEARNER_NAME", "Sample", "SpiralTrainer", "train", "validate"]


def _torch():
    from arena.errors import require

    return require("torch", "training", "llm")


def _slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in spec)[:40]


def league_spec(cfg: SpiralConfig, name: str) -> LeagueSpec:
    """The league a SPIRAL run plays in: its game and its opponents (fixed players)."""
    opponents = list(dict.fromkeys(cfg.opponents + cfg.eval.opponents))
    return LeagueSpec(cfg.game, cfg.seed, opponents={_slug(s): s for s in opponents}, name=name)


def _win_rate(episodes: list[Episode]) -> float:
    """The share of ``episodes`` a learner seat won."""
    return sum(1 for e in episodes if e.result.winner in e.learner_seats) / len(episodes)


# -- advantages: one function per config value, chosen once ------------------------------------
Trajectory = tuple[Episode, int]  # (episode, learner seat)


def _rae_advantages(trainer: "SpiralTrainer", trajs: list[Trajectory], rets: list[float]) -> list[float]:
    cfg = trainer.cfg

    def key(ep: Episode, seat: int) -> tuple[str, str]:
        return (cfg.game, f"{seat}" if cfg.learner.rae_key == "role" else f"{seat}@{ep.opponent}")

    return [trainer.rae.advantage(key(ep, seat), r) for (ep, seat), r in zip(trajs, rets)]


def _group_advantages(normalise: bool) -> Callable[["SpiralTrainer", list[Trajectory], list[float]], list[float]]:
    def advantages(trainer: "SpiralTrainer", trajs: list[Trajectory], rets: list[float]) -> list[float]:
        import torch

        from arena.trainers.common.advantages import dr_grpo_advantages, grpo_advantages

        fn = grpo_advantages if normalise else dr_grpo_advantages
        advs = [0.0] * len(trajs)
        for seat in {s for _, s in trajs}:  # one group per role
            idx = [i for i, (_, s) in enumerate(trajs) if s == seat]
            for i, v in zip(idx, fn(torch.tensor([rets[i] for i in idx])).tolist()):
                advs[i] = v
        return advs

    return advantages


ADVANTAGES: dict[str, Callable[["SpiralTrainer", list[Trajectory], list[float]], list[float]]] = {
    "rae": _rae_advantages,
    "grpo": _group_advantages(True),
    "dr_grpo": _group_advantages(False),
    "none": lambda trainer, trajs, rets: list(rets),
}


class SpiralTrainer(Trainer):
    """The coordinator of SPIRAL self-play: loop, league, batches, evaluation, checkpoints.

    `league`: a `SharedLeague` this trainer plays in with others (`arena.trainers.mixed`), else the
    trainer's base opens its own in its run folder."""

    def __init__(self, cfg: SpiralConfig, directory: str | Path, *, model: str | None = None, loss: str | None = None,
                 league: Any = None):
        torch = _torch()
        from arena.inference.models import load_model, make_tiny_model_folder, smollm2_folder
        from arena.trainers.common.advantages import RAEBaseline

        self.cfg = cfg
        if model is not None:
            cfg.model = model
        if loss is not None:
            cfg.learner.loss = loss
        validate(cfg)  # the whole config, before anything is written to the run folder
        super().__init__(cfg, directory)
        torch.set_num_threads(cfg.threads)
        state = self.latest_state()
        if state is not None:
            path = self.latest.resolve()
        elif cfg.model == "tiny":
            path = make_tiny_model_folder(self.dir / "model-init", seed=cfg.seed, **cfg.tiny_sizes)
        elif cfg.model == "smollm2":
            path = smollm2_folder()
        else:
            path = Path(cfg.model)
        model_obj, tok = load_model(path, dtype="fp32")
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        self.template = make_template(cfg.template if cfg.template != "auto" else
                                      ("compact" if cfg.model == "tiny" else "spiral"), tok)
        critic = None
        if cfg.learner.critic == "bpco":
            from arena.trainers.llm.critic import ValueHead

            critic = ValueHead(model_obj.config.hidden_size)
        if cfg.parallel.mode != "none":  # the step on several processes; rollouts stay here (rank 0)
            from arena.trainers.parallel.learner import ParallelLearner

            self.learner = ParallelLearner.start(model_obj, tok, LearnerSettings.of(cfg), cfg.parallel)
        else:
            self.learner = LLMLearner(model_obj, tok, LearnerSettings.of(cfg), critic=critic)
        engine = None
        if cfg.engine == "vllm":
            from arena.inference.engine import VLLMEngine

            engine = VLLMEngine(path, dtype=cfg.rollout_precision, max_model_len=cfg.vllm_max_model_len,
                                kv_cache_bytes=cfg.vllm_kv_cache_bytes, seed=cfg.seed, threads=cfg.threads,
                                max_logprobs=max(20, cfg.top_k))
        self.actors = LLMActors(self.learner.model, tok, self.template, game=cfg.game, device=self.learner.device,
                                precision=cfg.rollout_precision,
                                max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_k=cfg.top_k,
                                keep_privileged=critic is not None, engine=engine)
        #: Bumped at every change of the learner's weights (an update, imitation, a load); the rollout
        #: engine is synced to it before each batch of games, and each episode records it.
        self.weights_version = 0
        self.advantages = ADVANTAGES[cfg.learner.advantage]
        self.rae = RAEBaseline(cfg.learner.rae_decay)
        self.iteration = 0
        self.il_done = False
        self._pairing_rng_state = None
        #: The training matches since the last checkpoint: they enter the league with the next one.
        self._pending: list[PlayedMatch] = []
        if state is not None:
            self._load_state(state)
        self._setup_league(league)
        if state is not None:
            self.reapply(state)  # killed between its checkpoint and the league's transaction: applied now

    @property
    def model(self) -> Any:
        return self.learner.model

    @property
    def tok(self) -> Any:
        return self.learner.tok

    # -- league ------------------------------------------------------------------------
    def _setup_league(self, league: Any) -> None:
        cfg = self.cfg
        self.join_league("spiral", league_spec(cfg, f"train-{self.dir.name}"), league)
        self.session.join(LEARNER_NAME, "learner", self.weights(), role="main", state={"snapshots": 0, "external": True})
        self.train_opponents = sorted({_slug(s) for s in cfg.opponents})
        self.pairing_rule = {"selfplay": self._selfplay_opponent, "fixed": self._fixed_opponent,
                             "league": self._league_opponent}[cfg.opponent_mode]
        # The opponent draws are the trainer's own generator's; a resumed run continues its stream where the
        # checkpoint left it, so it plays the same next batch as a run that never stopped.
        self.rng = self.pairing_rng()
        if self._pairing_rng_state is not None:
            self.rng.bit_generator.state = self._pairing_rng_state

    def _selfplay_opponent(self) -> str:
        return LEARNER_NAME

    def _fixed_opponent(self) -> str:
        return self.train_opponents[int(self.rng.integers(len(self.train_opponents)))]

    def _league_opponent(self) -> str:
        if self.rng.random() < self.cfg.fixed_share:
            return self._fixed_opponent()
        return self.session.opponent(LEARNER_NAME, self.rng)[0]

    def _pairings(self, n: int) -> list[tuple[list[str], str]]:
        """`n` pairings (seat specs, opponent name) by the configured opponent rule, seats alternating."""
        out = []
        for i in range(n):
            opp = self.pairing_rule()
            if opp == LEARNER_NAME:
                out.append(([LEARNER, LEARNER], "self"))
                continue
            row = self.session.player(opp)
            spec = row.spec if row is not None else opp
            out.append(([LEARNER, spec] if i % 2 == 0 else [spec, LEARNER], opp))
        return out

    def _played(self, episodes: list[Episode], learner_name: str, evaluation: bool = False) -> list[PlayedMatch]:
        """The episodes as the league records them (rated external matches, never part of a budget); an
        evaluation's keep their replays."""
        out = []
        for ep in episodes:
            names = [learner_name if s == LEARNER else ep.opponent for s in ep.seats]
            if ep.opponent == "self":
                names = [learner_name, learner_name]
            specs = [self.weights() if s == LEARNER else s for s in ep.seats]
            out.append(PlayedMatch(names, specs, ep.result, note="evaluation" if evaluation else "training",
                                   keep_replay=evaluation))
        return out

    # -- the learning player (arena.league.protocols.LearningPlayer) ----------------------------
    @property
    def pending(self) -> int:
        return 0  # the coordinator updates every iteration; nothing waits for the league

    def weights(self) -> str:
        """The agent spec of the current weights (the latest checkpoint)."""
        return f"llm:{self.latest}"

    def load(self, path: str | Path) -> None:
        """Load a checkpoint folder's model weights into the live model."""
        self.learner.load_weights(path)
        self.weights_version += 1

    def reset_to(self, path: str | Path | None) -> None:
        """Restart from another checkpoint's weights, or (None) from this run's initial weights."""
        self.learner.load_weights(path if path is not None else self.dir / checkpoint_path(0))
        self.weights_version += 1

    def freeze(self, path: str | Path) -> str:
        """Save the current weights to folder `path`; returns the greedy spec that plays them."""
        self.learner.save_weights(path)
        return self._frozen_spec(path)

    def _frozen_spec(self, folder: str | Path) -> str:
        """The greedy agent spec that plays the weights in `folder` (a snapshot in the league)."""
        return f"llm:{folder},greedy=True,max_new_tokens={self.cfg.max_new_tokens},template={self.template.name}"

    # -- batches -------------------------------------------------------------------------
    def _play(self, pairings, *, greedy: bool, policy: InvalidMovePolicy, seed: int, concurrency: int,
              record: bool = False) -> list[Episode]:
        self.actors.sync(self.learner.model, self.weights_version)
        return self.actors.play(pairings, greedy=greedy, policy=policy, seed=seed, concurrency=concurrency,
                                record=record)

    def _samples(self, episodes: list[Episode]) -> list[Sample]:
        """The learner's samples of `episodes`: each generated response with its turn's advantage."""
        cfg, critic = self.cfg, self.learner.critic
        trajs = [(ep, seat) for ep in episodes for seat in ep.learner_seats]
        rets = [float(ep.result.returns[seat]) for ep, seat in trajs]
        advs = self.advantages(self, trajs, rets)
        turns_of = [ep.turns.get(seat, []) for ep, seat in trajs]
        priv_of = [ep.privileged.get(seat) or [None] * len(ts) for (ep, seat), ts in zip(trajs, turns_of)]
        values: list[float] = []
        if critic is not None:  # every turn's V(s) in a few batched forward passes
            values = self.learner.values([critic.text(t.prompt, p) for ts, ps in zip(turns_of, priv_of)
                                          for t, p in zip(ts, ps)])
        samples = []
        at = 0
        for turns, priv, ret, adv in zip(turns_of, priv_of, rets, advs):
            turn_advs = [adv * cfg.learner.turn_discount ** (len(turns) - 1 - k) for k in range(len(turns))]
            if critic is not None and turns:
                turn_advs = critic.turn_advantages(values[at:at + len(turns)], ret, cfg.learner.critic_alpha)
            at += len(turns)
            for t, a, pv in zip(turns, turn_advs, priv):
                g = t.generation
                if not g.token_ids:
                    continue
                samples.append(Sample(list(g.prompt_ids), list(g.token_ids), list(g.logprobs), g.topk_ids,
                                      g.topk_logprobs, float(a), ret,
                                      critic.text(t.prompt, pv) if critic is not None else None))
        return samples

    def update(self, samples: list[Sample]) -> dict[str, float]:
        """One learner step on `samples` (shuffled by a seed of the run seed and the iteration)."""
        stats = self.learner.step(Batch(samples, shuffle_seed=self.cfg.seed * 1000 + self.iteration))
        self.weights_version += 1
        return stats

    @staticmethod
    def _win_rates(episodes: list[Episode]) -> dict[str, float]:
        """Training win rate per opponent: each fixed opponent by name, the snapshots together."""
        games: dict[str, list[int]] = {}
        for e in episodes:
            if e.opponent == "self":
                continue  # both seats are the learner
            name = "historical" if e.opponent.startswith(LEARNER_NAME + "@") else e.opponent
            games.setdefault(name, []).append(int(e.result.winner in e.learner_seats))
        return {f"train/win_rate/{k}": float(np.mean(v)) for k, v in sorted(games.items())}

    # -- imitation, evaluation, checkpoints ----------------------------------------------------
    def encode_prompt(self, prompt: str) -> list[int]:
        return self.actors.encode_prompt(prompt)

    def imitation(self, progress: Callable[[str, int, int], None] | None = None) -> list[float]:
        from arena.envs.registry import make_core
        from arena.replays.format import list_replays, read_replay
        from arena.trainers.llm.sft import encode_examples, examples_from_replays, supervised_finetune

        il = self.cfg.il
        if il.replays:
            from arena.match.verify import text_replay

            # Actions-only replays (the default of `arena play --replays`) get their views by re-simulation.
            replays = [text_replay(read_replay(p)) for p in list_replays(il.replays)]
        else:
            replays = self._imitation_matches(progress)
        kind = make_core(self.cfg.game).action_kind
        if progress is not None:
            progress("imitation: building examples", 0, len(replays))
        examples = examples_from_replays(replays, self.template, kind, il.seats)
        pairs = encode_examples(self.tok, examples, self.encode_prompt)
        if progress is not None:
            progress("imitation: examples", 0, il.epochs * len(pairs))

        def trained(done: int) -> None:
            if progress is not None:
                progress("imitation: examples", done, il.epochs * len(pairs))

        def log(epoch: int, loss: float) -> None:
            self.metrics.log(0, **{"il/epoch": epoch, "il/loss": loss})
            if progress is not None:
                progress(f"imitation: epoch {epoch + 1}/{il.epochs}, loss {loss:.3f}", epoch + 1, il.epochs)

        losses = supervised_finetune(self.model, self.tok, pairs, epochs=il.epochs, lr=il.lr,
                                     batch_size=il.batch_size, seed=self.cfg.seed, autocast=self.learner.autocast,
                                     log=log, on_batch=trained)
        self.learner.model_changed()
        self.weights_version += 1
        self.il_done = True
        return losses

    def _imitation_matches(self, progress: Callable[[str, int, int], None] | None) -> list:
        """The imitation stage's ``il.matches`` matches, each written to ``imitation-matches/`` as it is
        played; a file of an earlier start (the same match: its id, seed and agents) is read back
        instead of played again. The replays, in match order."""
        from arena.envs.registry import make_core
        from arena.match.batch import play_matches, schedule
        from arena.replays.format import read_replay, replay_path, write_replay

        cfg, il = self.cfg, self.cfg.il
        folder = self.dir / "imitation-matches"
        folder.mkdir(parents=True, exist_ok=True)
        jobs = schedule(il.matches, il.agents, cfg.seed + 17, True, make_core(cfg.game).game_id)
        kept: dict[int, Any] = {}
        for i, job in enumerate(jobs):
            path = replay_path(folder, job.match_id)
            if path.exists():
                try:
                    rep = read_replay(path)
                except Exception:  # noqa: BLE001 - unreadable (cut by a power loss): played again
                    continue
                if rep.header.get("seed") == job.seed and list(rep.header.get("agents", [])) == list(job.specs):
                    kept[i] = rep
        index = {job.match_id: i for i, job in enumerate(jobs)}

        def played(res) -> None:
            # not fsynced one by one (3,000 small files): a stop keeps them; a power loss may cost a few
            write_replay(res.replay, replay_path(folder, res.match_id), durable=False)
            kept[index[res.match_id]] = res.replay
            if progress is not None and (len(kept) % 50 == 0 or len(kept) == il.matches):
                progress("imitation: playing matches", len(kept), il.matches)

        if progress is not None:
            progress("imitation: playing matches", len(kept), il.matches)
        play_matches(cfg.game, il.agents, il.matches, seed=cfg.seed + 17, record=True, on_result=played,
                     only=[i for i in range(il.matches) if i not in kept])
        return [kept[i] for i in sorted(kept)]

    def _eval_games(self, spec: str, games: int, seed: int, record: bool = False) -> list[Episode]:
        """``games`` greedy seat-swapped games of the current model against ``spec``; an invalid move
        loses at once (-1/+1), as in the evaluation SPIRAL reports."""
        pairings = [([LEARNER, spec] if i % 2 == 0 else [spec, LEARNER], _slug(spec)) for i in range(games)]
        return self._play(pairings, greedy=True, policy=InvalidMovePolicy(allowance=0), seed=seed,
                          concurrency=self.cfg.eval.concurrency, record=record)

    def evaluate(self, it: int, snapshot: str | None = None) -> tuple[dict[str, float], list[PlayedMatch]]:
        """Greedy seat-swapped games against each evaluation opponent: their metrics (logged), and, with
        `snapshot` (the name the current weights take in the league), the games as the league records them."""
        cfg = self.cfg
        out: dict[str, float] = {}
        played: list[PlayedMatch] = []
        invalid = moves = 0
        total = cfg.eval.games * len(cfg.eval.opponents)
        for k, spec in enumerate(cfg.eval.opponents):
            self._show("evaluation: games", k * cfg.eval.games, total)
            name = _slug(spec)
            eps = self._eval_games(spec, cfg.eval.games, 10_000_019 + it, record=snapshot is not None)
            draws = sum(1 for e in eps if e.result.draw)
            out[f"eval/win_rate/{name}"] = _win_rate(eps)
            out[f"eval/draw_rate/{name}"] = draws / len(eps)
            out[f"eval/return/{name}"] = float(np.mean([e.result.returns[e.learner_seats[0]] for e in eps]))
            invalid += sum(e.invalid_moves() for e in eps)
            moves += sum(e.moves() for e in eps)
            if snapshot is not None:
                played += self._played(eps, snapshot, evaluation=True)
        out["eval/invalid_rate"] = invalid / max(moves, 1)
        self._show("evaluation: games", total, total)
        self.metrics.log(it, **out)
        return out, played

    def _track_best(self, it: int, out: dict[str, float]) -> None:
        """Point ``best`` at the checkpoint with the highest evaluation win rate against the first
        evaluation opponent (ties keep the earlier one); ``best.json`` says which and why. Selecting
        on these games biases their figure upwards: evaluate ``best`` again on fresh games to report it."""
        key = f"eval/win_rate/{_slug(self.cfg.eval.opponents[0])}"
        self.track_best(it, key, out[key], invalid_rate=out["eval/invalid_rate"])

    def confirm_best(self) -> dict | None:
        """The second evaluation round: the ``eval.confirm_top`` checkpoints with the highest in-run
        evaluation play ``eval.confirm_games`` fresh games each (seeds no in-run evaluation used) and
        ``best`` moves to the one that wins most there (ties: the higher in-run figure, then the
        earlier iteration). ``best.json`` keeps every candidate's two figures. Idempotent: a resumed
        run whose round is on record does not play it again. Returns the new record (None: no round)."""
        ev = self.cfg.eval
        key = f"eval/win_rate/{_slug(ev.opponents[0])}"
        evals: dict[int, dict] = {}
        for r in read_metrics(self.metrics.path):
            if key in r and (self.dir / checkpoint_path(r["step"])).is_dir():
                evals[r["step"]] = r  # a re-run iteration (after a resume) keeps its last evaluation
        if ev.confirm_top < 1 or not evals:
            return None
        top = sorted(evals, key=lambda it: (-evals[it][key], it))[: ev.confirm_top]
        prev = self.best_record() or {}
        done = prev.get("confirm", {})
        if done.get("games") == ev.confirm_games and [c["iteration"] for c in done.get("candidates", [])] == top:
            return prev
        current = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        cands = []
        try:
            for it in top:
                ckpt = checkpoint_path(it)
                self.load(self.dir / ckpt)  # load_state_dict casts to the live dtype
                eps = self._eval_games(ev.opponents[0], ev.confirm_games, 30_000_001 + it)
                invalid = sum(e.invalid_moves() for e in eps) / max(1, sum(e.moves() for e in eps))
                cands.append({"iteration": it, "in_run": evals[it][key], "confirm": _win_rate(eps),
                              "invalid_rate": invalid, "checkpoint": str(ckpt)})
        finally:
            self.model.load_state_dict(current)
            self.learner.model_changed()
        win = max(cands, key=lambda c: (c["confirm"], c["in_run"], -c["iteration"]))
        record = {"iteration": win["iteration"], "metric": key, "value": win["in_run"],
                  "invalid_rate": win["invalid_rate"], "checkpoint": win["checkpoint"],
                  "confirm": {"games": ev.confirm_games, "win_rate": win["confirm"], "candidates": cands}}
        self.set_best(record)
        self.metrics.log(self.iteration, **{"confirm/best_iteration": win["iteration"],
                                            f"confirm/{key.removeprefix('eval/')}": win["confirm"]})
        return record

    def save(self, folder: Path, it: int) -> None:
        torch = _torch()
        folder.mkdir(parents=True, exist_ok=True)
        self.learner.save_weights(folder)
        self.save_state(folder, {
            "iteration": it, "il_done": self.il_done, **self.learner.state_dict(), "rae": self.rae.state_dict(),
            "torch_rng": torch.get_rng_state(), "py_random": random.getstate(), "config": asdict(self.cfg),
            "pairing_rng": self.rng.bit_generator.state,
        })

    def _load_state(self, state: dict) -> None:
        torch = _torch()
        self.iteration = int(state["iteration"])
        self.il_done = bool(state.get("il_done"))
        self.learner.load_state_dict(state)
        self.rae.load_state_dict(state["rae"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["py_random"])
        self._pairing_rng_state = state.get("pairing_rng")


    def snapshot(self, it: int, evaluate: bool = False) -> dict[str, float]:
        """Iteration `it` checkpointed and frozen into the league as a historical player (``learner@it``),
        with the training matches since the last checkpoint and (`evaluate`) the snapshot's evaluation
        games, in one transaction after the checkpoint. Returns the evaluation's metrics."""
        name = f"{LEARNER_NAME}@{it}"
        out, played = self.evaluate(it, snapshot=name) if evaluate else ({}, [])
        snap = Snapshot(LEARNER_NAME, self._frozen_spec(self.checkpoint_dir(it)), name)
        self.close_iteration(it, Bundle(self._pending + played, snapshots=[snap]))
        self._pending = []
        if evaluate:
            self._track_best(it, out)
        return out

    def save_finished(self, it: int) -> None:
        """Before a stop: iteration `it` checkpointed, with the training matches it has not given the league."""
        if not self.checkpoint_dir(it).is_dir():
            self.close_iteration(it, Bundle(self._pending))
            self._pending = []

    # -- the loop (`Trainer.run`: train to an iteration, resuming; progress; stop) -----------------------
    def on_phase(self, phase: Callable[[str, int, int], None] | None) -> None:
        """``phase(text, done, total)`` during the imitation warm start and inside each iteration
        (rollout, update epochs, evaluation)."""
        if hasattr(self.learner, "on_epoch"):  # the one-process learner reports its passes
            self.learner.on_epoch = None if phase is None else (lambda k, n: phase("update: epochs", k, n))

    def needs_start(self) -> bool:
        # a run resumed from its iteration-0 checkpoint has done this already
        return self.iteration == 0 and self.session.player(f"{LEARNER_NAME}@0") is None

    def start(self, last: int) -> None:
        torch = _torch()
        torch.manual_seed(self.cfg.seed)
        if self.cfg.il is not None and not self.il_done:
            self.imitation(progress=self._phase)
        self.snapshot(0, evaluate=True)

    def iterate(self, it: int, last: int) -> dict[str, float]:
        cfg = self.cfg
        policy = InvalidMovePolicy(allowance=0, loss=cfg.invalid_penalty, win=cfg.invalid_reward_other)
        t0 = time.perf_counter()
        lr = cfg.lr_at(it)
        self.learner.set_lr(lr)
        pairings = self._pairings(cfg.games_per_iter)
        self._show("rollout: matches", 0, len(pairings))
        episodes = self._play(pairings, greedy=False, policy=policy, seed=cfg.seed * 100_003 + it,
                              concurrency=cfg.concurrency)
        self._show("rollout: matches", len(pairings), len(pairings))
        self._pending += self._played(episodes, LEARNER_NAME)
        t_roll = time.perf_counter() - t0
        samples = self._samples(episodes)
        t_up = time.perf_counter()
        if samples:
            self._show("update: epochs", 0, cfg.learner.epochs)
        stats = self.update(samples) if samples else {}
        t_up = time.perf_counter() - t_up
        self.iteration = it
        rets = [e.result.returns[s] for e in episodes for s in e.learner_seats]
        tokens = sum(len(s.response_ids) for s in samples)
        line = {f"train/{k}": v for k, v in stats.items()}
        line.update({
            "train/return": float(np.mean(rets)) if rets else 0.0,
            "train/invalid_rate": sum(e.invalid_moves() for e in episodes) / max(1, sum(e.moves() for e in episodes)),
            "train/selfplay_share": sum(e.opponent == "self" for e in episodes) / len(episodes),
            "train/samples": len(samples), "train/lr": lr, "train/rollout_tokens_per_s": tokens / max(t_roll, 1e-9),
            "time/rollout_s": t_roll, "time/update_s": t_up, "time/iteration_s": time.perf_counter() - t0,
            # the weights pushed into the rollout engine before this batch (0 for transformers: the same
            # model object), and the version the batch was played with
            "time/weight_sync_s": self.actors.sync_seconds, "rollout/weights_version": self.actors.weights_version,
        })
        line.update(self._win_rates(episodes))
        self.metrics.log(it, **line)
        result = line
        if it % cfg.eval.every == 0 or it == last:
            result.update(self.snapshot(it, evaluate=True))
        elif it % cfg.snapshot_every == 0:
            self.snapshot(it)
        return result

    def finish(self, last: int, stopped: bool) -> None:
        if stopped:
            return
        if last == self.cfg.iterations:
            self.confirm_best()
        self.plot_curves()

    def close(self) -> None:
        """Stop the rollout engine and the learner, and close the league if this trainer opened it (the
        base's session). A second call does nothing."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        try:
            self.actors.close()
            self.learner.close()
        finally:
            super().close()


def validate(cfg: SpiralConfig) -> None:
    """Check what the config names exists and fits: the game, every agent spec (opponents,
    evaluation opponents, imitation agents, one per seat), the model folder. A `ConfigError`
    naming the key; nothing is written."""
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.errors import ArenaError, ConfigError

    try:
        core = make_core(cfg.game)
    except ArenaError as e:
        raise ConfigError(f"game: {e}") from None
    if len(core.players) < 2:
        raise ConfigError(f"game: {cfg.game} has {len(core.players)} player; self-play needs two or more")
    for key, specs in (("opponents", cfg.opponents), ("eval.opponents", cfg.eval.opponents),
                       ("il.agents", cfg.il.agents if cfg.il is not None else [])):
        for spec in specs:
            try:
                make_agent(spec, core, 0)
            except ArenaError as e:
                raise ConfigError(f"{key}: {e}") from None
    if cfg.il is not None and not cfg.il.replays and len(cfg.il.agents) != len(core.players):
        raise ConfigError(f"il.agents: {cfg.game} has {len(core.players)} players; give one agent spec per seat, "
                          f"got {len(cfg.il.agents)}")
    if cfg.il is not None and cfg.il.replays and not Path(cfg.il.replays).is_dir():
        raise ConfigError(f"il.replays: no folder {cfg.il.replays}")
    par = cfg.parallel
    if par.mode != "none":
        if cfg.learner.critic != "none":
            raise ConfigError(f"parallel.mode: {par.mode} does not support critic: {cfg.learner.critic} yet; use "
                              "learner.critic: none or train on one process")
        if cfg.learner.train_precision != "fp32":
            raise ConfigError(f"parallel.mode: {par.mode} trains fp32 only for now, got train_precision: "
                              f"{cfg.learner.train_precision}; set learner.train_precision: fp32")
        if par.mode == "odc" and cfg.device != "cpu" and par.transport == "shm":
            raise ConfigError(f"parallel.transport: shm keeps ODC's shards in host shared memory, but device is "
                              f"{cfg.device}: use transport: pg (or auto) on GPUs")
    if cfg.model not in ("tiny", "smollm2") and not Path(cfg.model).is_dir():
        raise ConfigError(f"model: {cfg.model!r} is not tiny, smollm2 or a local Hugging Face model folder")


def train(cfg: SpiralConfig, directory: str | Path, **overrides) -> dict[str, float]:
    trainer = SpiralTrainer(cfg, directory, **overrides)
    try:
        return trainer.run()
    finally:
        trainer.close()
