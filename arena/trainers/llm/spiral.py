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
5. Every ``eval.every`` iterations: a checkpoint, a frozen snapshot in the league,
   and greedy evaluation games against fixed opponents, committed to the league
   (so snapshots are rated); ``best`` links the checkpoint with the highest
   evaluation win rate against the first evaluation opponent (``best.json``).
6. At the end, with ``eval.confirm_top`` > 0, the top checkpoints of those
   evaluations play a second round on fresh games and ``best`` moves to its
   winner (a maximum over noisy evaluations overrates the checkpoint it picks).

Checkpoints hold the model, the optimizer, the loss scaler, the RAE baselines
and RNG states; ``arena train`` on an existing run folder resumes from the latest.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arena.agents.prompts import make_template
from arena.fsio import atomic_write_bytes
from arena.match import InvalidMovePolicy
from arena.trainers.llm.config import TrainConfig, lr_at
from arena.trainers.common.metrics import MetricsLogger, plot_curves, read_metrics
from arena.trainers.llm.rollout import LEARNER, Episode, play_episodes

LEARNER_NAME = "learner"


@dataclass
class Sample:
    prompt_ids: list[int]
    response_ids: list[int]
    old_logp: list[float]
    topk_ids: list[list[int]] | None
    topk_logp: list[list[float]] | None
    adv: float
    ret: float
    critic_text: str | None = None


def _torch():
    from arena.errors import require

    return require("torch", "training", "llm")


class AutocastEngine:
    """Runs an engine's generate under CPU autocast (bf16/fp16 rollouts), in whichever thread calls it."""

    def __init__(self, engine: Any, dtype: str):
        self.engine, self.dtype = engine, dtype
        self.tokenizer = getattr(engine, "tokenizer", None)

    def generate(self, prompts, **kw):
        torch = _torch()
        if self.dtype == "fp32":
            return self.engine.generate(prompts, **kw)
        with torch.autocast("cpu", dtype=torch.bfloat16 if self.dtype == "bf16" else torch.float16):
            return self.engine.generate(prompts, **kw)


def _slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in spec)[:40]


def _win_rate(episodes: list[Episode]) -> float:
    """The share of ``episodes`` a learner seat won."""
    return sum(1 for e in episodes if e.result.winner in e.learner_seats) / len(episodes)


class SpiralTrainer:
    def __init__(self, cfg: TrainConfig, directory: str | Path, *, model: str | None = None, loss: str | None = None):
        torch = _torch()
        from arena.inference.engine import BatchingEngine, HFEngine
        from arena.inference.models import load_model, make_tiny_model_folder, smollm2_folder

        self.cfg = cfg
        if model is not None:
            cfg.model = model
        if loss is not None:
            cfg.loss = loss
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        torch.set_num_threads(cfg.threads)
        self.latest = self.dir / "latest"
        state = None
        if self.latest.exists():
            path = self.latest.resolve()
            state = torch.load(path / "trainer_state.pt", weights_only=False)
        elif cfg.model == "tiny":
            path = make_tiny_model_folder(self.dir / "model-init", seed=cfg.seed, **cfg.tiny_sizes)
        elif cfg.model == "smollm2":
            path = smollm2_folder()
        else:
            path = Path(cfg.model)
        self.model, self.tok = load_model(path, dtype="fp32")
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token
        self.template = make_template(cfg.template if cfg.template != "auto" else
                                      ("compact" if cfg.model == "tiny" else "spiral"), self.tok)
        self.engine = HFEngine(self.model, self.tok)
        # A 20 ms window: long enough for the first moves of all concurrent matches to share a call.
        self.rollout_engine = BatchingEngine(AutocastEngine(self.engine, cfg.rollout_precision),
                                             max_batch=max(cfg.concurrency, cfg.eval.concurrency), max_wait_s=0.02)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.scaler = torch.amp.GradScaler("cpu", enabled=cfg.train_precision == "fp16")
        from arena.trainers.common.advantages import RAEBaseline

        self.rae = RAEBaseline(cfg.rae_decay)
        self.critic = None
        if cfg.critic == "bpco":
            from arena.trainers.llm.critic import ValueHead

            self.critic = ValueHead(self.model.config.hidden_size)
            self.opt.add_param_group({"params": self.critic.parameters()})
        self.iteration = 0
        self.il_done = False
        if state is not None:
            self._load_state(state)
        self.metrics = MetricsLogger(self.dir)
        self._setup_league()

    # -- league ------------------------------------------------------------------------
    def _setup_league(self) -> None:
        from arena.league.config import GameEntry, LeagueConfig, PlayerEntry
        from arena.league.manager import League

        cfg = self.cfg
        opponents = list(dict.fromkeys(cfg.opponents + cfg.eval.opponents))
        lcfg = LeagueConfig(games=[GameEntry(cfg.game)], name=f"train-{self.dir.name}", seed=cfg.seed,
                            players=[PlayerEntry(_slug(s), s, [cfg.game]) for s in opponents], matches=0)
        self.league = League(lcfg, self.dir, backend="inline")
        self.names = {_slug(s): s for s in opponents}
        store = self.league.store
        if store.player(LEARNER_NAME) is None:
            store.add_player(LEARNER_NAME, "learner", f"llm:{self.latest}", [cfg.game], role="main",
                             state={"snapshots": 0, "external": True})
        self.train_opponents = {_slug(s) for s in cfg.opponents}

    def _pairings(self, n: int) -> list[tuple[list[str], str]]:
        cfg, rng = self.cfg, self.league.rng
        out = []
        for i in range(n):
            if cfg.opponent_mode == "selfplay":
                opp = LEARNER_NAME
            elif cfg.opponent_mode == "fixed" or rng.random() < cfg.fixed_share:
                names = sorted(self.train_opponents)
                opp = names[int(rng.integers(len(names)))]
            else:
                p = self.league.next_pairing(LEARNER_NAME)
                opp = next((x for x in p.players if x != LEARNER_NAME), LEARNER_NAME)
            if opp == LEARNER_NAME:
                out.append(([LEARNER, LEARNER], "self"))
                continue
            row = self.league.store.player(opp)
            spec = row.spec if row is not None else opp
            seats = [LEARNER, spec] if i % 2 == 0 else [spec, LEARNER]
            out.append((seats, opp))
        return out

    def _report(self, episodes: list[Episode], learner_name: str, source: str = "external",
                replay_dir: Path | None = None) -> None:
        from arena.replays.format import replay_path, write_replay

        store = self.league.store
        for ep in episodes:
            names = [learner_name if s == LEARNER else ep.opponent for s in ep.seats]
            if ep.opponent == "self":
                names = [learner_name, learner_name]
            row = store.enqueue(self.cfg.game, names, [f"llm:{self.latest}" if s == LEARNER else s for s in ep.seats],
                                seed=ep.result.seed or 0, status="running", note="training" if source == "external"
                                else "evaluation", source="external")
            path = None
            if replay_dir is not None and ep.result.replay is not None:
                ep.result.replay.header["match_id"] = row.match_id
                path = str(write_replay(ep.result.replay, replay_path(replay_dir, row.match_id)))
            r = ep.result
            store.commit_result(row.match_id, r.returns, r.winner, r.draw, r.outcome, r.moves, r.reason, r.invalid,
                                r.duration, path)

    # -- rollouts and updates ------------------------------------------------------------
    def _play(self, pairings, *, greedy: bool, policy: InvalidMovePolicy, seed: int, concurrency: int,
              record: bool = False) -> list[Episode]:
        cfg = self.cfg
        return play_episodes(cfg.game, pairings, self.rollout_engine, self.tok, self.template, seed=seed,
                             concurrency=concurrency, policy=policy, max_new_tokens=cfg.max_new_tokens,
                             temperature=cfg.temperature, greedy=greedy,
                             top_k_logprobs=0 if greedy else cfg.top_k, keep_privileged=self.critic is not None,
                             record_replays=record)

    def _samples(self, episodes: list[Episode]) -> list[Sample]:
        import torch

        from arena.trainers.common.advantages import dr_grpo_advantages, grpo_advantages

        cfg = self.cfg
        trajs = [(ep, seat) for ep in episodes for seat in ep.learner_seats]
        rets = [float(ep.result.returns[seat]) for ep, seat in trajs]
        if cfg.advantage == "rae":
            def key(ep: Episode, seat: int) -> tuple[str, str]:
                return (cfg.game, f"{seat}" if cfg.rae_key == "role" else f"{seat}@{ep.opponent}")

            advs = [self.rae.advantage(key(ep, seat), r) for (ep, seat), r in zip(trajs, rets)]
        elif cfg.advantage in ("grpo", "dr_grpo"):
            advs = [0.0] * len(trajs)
            for seat in {s for _, s in trajs}:
                idx = [i for i, (_, s) in enumerate(trajs) if s == seat]
                t = torch.tensor([rets[i] for i in idx])
                a = grpo_advantages(t) if cfg.advantage == "grpo" else dr_grpo_advantages(t)
                for i, v in zip(idx, a.tolist()):
                    advs[i] = v
        else:
            advs = list(rets)
        turns_of = [ep.turns.get(seat, []) for ep, seat in trajs]
        priv_of = [ep.privileged.get(seat) or [None] * len(ts) for (ep, seat), ts in zip(trajs, turns_of)]
        values: list[float] = []
        if self.critic is not None:  # every turn's V(s) in a few batched forward passes
            values = self.critic.batched_values(self, [self.critic.text(t.prompt, p) for ts, ps in
                                                       zip(turns_of, priv_of) for t, p in zip(ts, ps)])
        samples = []
        at = 0
        for turns, priv, ret, adv in zip(turns_of, priv_of, rets, advs):
            turn_advs = [adv * cfg.turn_discount ** (len(turns) - 1 - k) for k in range(len(turns))]
            if self.critic is not None and turns:
                turn_advs = self.critic.turn_advantages(self, turns, priv, ret, cfg.critic_alpha,
                                                        values=values[at:at + len(turns)])
            at += len(turns)
            for t, a, pv in zip(turns, turn_advs, priv):
                g = t.generation
                if not g.token_ids:
                    continue
                samples.append(Sample(list(g.prompt_ids), list(g.token_ids), list(g.logprobs), g.topk_ids,
                                      g.topk_logprobs, float(a), ret,
                                      self.critic.text(t.prompt, pv) if self.critic is not None else None))
        return samples

    def _autocast(self):
        torch = _torch()
        p = self.cfg.train_precision
        if p == "fp32":
            return contextlib.nullcontext()
        return torch.autocast("cpu", dtype=torch.bfloat16 if p == "bf16" else torch.float16)

    def update(self, samples: list[Sample]) -> dict[str, float]:
        torch = _torch()
        from arena.trainers.llm.logprobs import sequence_logprobs
        from arena.trainers.common.losses import get_loss

        cfg = self.cfg
        loss_fn = get_loss(cfg.loss)
        needs_topk = "topk_old_logp" in inspect.signature(loss_fn).parameters
        if needs_topk and (not samples or samples[0].topk_ids is None):
            raise ValueError(f"loss {cfg.loss} needs top-K rollout log-probs: set top_k > 0")
        pad = self.tok.pad_token_id or 0
        rng = random.Random(cfg.seed * 1000 + self.iteration)
        order = list(range(len(samples)))
        agg_stats: dict[str, list[float]] = {}
        self.model.train()
        first = True
        for _ in range(cfg.epochs):
            rng.shuffle(order)
            for i in range(0, len(order), cfg.minibatch):
                mb = [samples[j] for j in order[i:i + cfg.minibatch]]
                with self._autocast():
                    out = sequence_logprobs(self.model, [s.prompt_ids for s in mb], [s.response_ids for s in mb],
                                            topk_ids=[s.topk_ids for s in mb] if needs_topk else None, pad_id=pad,
                                            temperature=cfg.temperature, entropy_grad=cfg.entropy_coef > 0)
                logp, mask = out["logp"].float(), out["mask"].float()
                T = logp.shape[1]
                old = torch.zeros_like(logp)
                for b, s in enumerate(mb):
                    old[b, : len(s.old_logp)] = torch.tensor(s.old_logp[:T])
                adv = torch.tensor([s.adv for s in mb], dtype=torch.float32)
                kwargs: dict[str, Any] = dict(cfg.loss_kwargs)
                if needs_topk:
                    K = len(mb[0].topk_ids[0])
                    told = torch.full((len(mb), T, K), -1e4)
                    for b, s in enumerate(mb):
                        n = min(len(s.topk_logp), T)
                        told[b, :n] = torch.tensor(s.topk_logp[:n])
                    kwargs.update(topk_old_logp=told, topk_logp=out["topk_logp"].float())
                loss, stats = loss_fn(logp, old, adv, mask, agg=cfg.agg, max_len=cfg.max_new_tokens, **kwargs)
                if first:  # rollout/trainer log-prob mismatch, measured before any update this iteration
                    with torch.no_grad():
                        stats["mismatch"] = float(((logp - old).abs() * mask).sum() / mask.sum().clamp_min(1))
                    first = False
                if self.critic is not None:
                    vloss = self.critic.value_loss(self, mb)
                    loss = loss + cfg.critic_coef * vloss
                    stats["value_loss"] = float(vloss)
                entropy = (out["entropy"].float() * mask).sum() / mask.sum().clamp_min(1)
                if cfg.entropy_coef > 0:
                    loss = loss - cfg.entropy_coef * entropy
                stats["entropy"] = float(entropy.detach())
                self.opt.zero_grad(set_to_none=True)
                self.scaler.scale(loss).backward()
                self.scaler.unscale_(self.opt)
                params = [p for g in self.opt.param_groups for p in g["params"]]
                stats["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip))
                self.scaler.step(self.opt)
                self.scaler.update()
                stats["loss"] = float(loss.detach())
                for k, v in stats.items():
                    agg_stats.setdefault(k, []).append(float(v))
        self.model.eval()
        return {k: float(np.mean(v)) for k, v in agg_stats.items()}

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
        return self.engine.encode(prompt)

    def imitation(self) -> list[float]:
        from arena.match.batch import play_matches
        from arena.envs.registry import make_core
        from arena.replays.format import list_replays, read_replay
        from arena.trainers.llm.sft import encode_examples, examples_from_replays, supervised_finetune

        il = self.cfg.il
        if il.replays:
            replays = [read_replay(p) for p in list_replays(il.replays)]
        else:
            res = play_matches(self.cfg.game, il.agents, il.matches, seed=self.cfg.seed + 17, record=True)
            replays = [r.replay for r in res]
        kind = make_core(self.cfg.game).action_kind
        examples = examples_from_replays(replays, self.template, kind, il.seats)
        pairs = encode_examples(self.tok, examples, self.encode_prompt)
        losses = supervised_finetune(self.model, self.tok, pairs, epochs=il.epochs, lr=il.lr,
                                     batch_size=il.batch_size, seed=self.cfg.seed, autocast=self._autocast,
                                     log=lambda e, l: self.metrics.log(0, **{"il/epoch": e, "il/loss": l}))
        self.il_done = True
        return losses

    def _eval_games(self, spec: str, games: int, seed: int, record: bool = False) -> list[Episode]:
        """``games`` greedy seat-swapped games of the current model against ``spec``; an invalid move
        loses at once (-1/+1), as in the evaluation SPIRAL reports."""
        pairings = [([LEARNER, spec] if i % 2 == 0 else [spec, LEARNER], _slug(spec)) for i in range(games)]
        return self._play(pairings, greedy=True, policy=InvalidMovePolicy(allowance=0), seed=seed,
                          concurrency=self.cfg.eval.concurrency, record=record)

    def evaluate(self, it: int, snapshot: str | None = None) -> dict[str, float]:
        cfg = self.cfg
        out: dict[str, float] = {}
        invalid = moves = 0
        for spec in cfg.eval.opponents:
            name = _slug(spec)
            eps = self._eval_games(spec, cfg.eval.games, 10_000_019 + it, record=snapshot is not None)
            draws = sum(1 for e in eps if e.result.draw)
            out[f"eval/win_rate/{name}"] = _win_rate(eps)
            out[f"eval/draw_rate/{name}"] = draws / len(eps)
            out[f"eval/return/{name}"] = float(np.mean([e.result.returns[e.learner_seats[0]] for e in eps]))
            invalid += sum(e.invalid_moves() for e in eps)
            moves += sum(e.moves() for e in eps)
            if snapshot is not None:
                self._report(eps, snapshot, source="evaluation", replay_dir=self.dir / "replays")
        out["eval/invalid_rate"] = invalid / max(moves, 1)
        self.metrics.log(it, **out)
        if snapshot is not None:
            self._track_best(it, out)
        return out

    def _track_best(self, it: int, out: dict[str, float]) -> None:
        """Point ``best`` at the checkpoint with the highest evaluation win rate against the first
        evaluation opponent (ties keep the earlier one); ``best.json`` says which and why. Selecting
        on these games biases their figure upwards: evaluate ``best`` again on fresh games to report it."""
        key = f"eval/win_rate/{_slug(self.cfg.eval.opponents[0])}"
        path = self.dir / "best.json"
        prev = json.loads(path.read_text()) if path.exists() else None
        if prev is not None and prev["metric"] == key and out[key] <= prev["value"]:
            return
        ckpt = self._checkpoint_path(it)
        record = {"iteration": it, "metric": key, "value": out[key], "invalid_rate": out["eval/invalid_rate"],
                  "checkpoint": str(ckpt)}
        atomic_write_bytes(path, json.dumps(record, indent=1).encode())
        self._link("best", ckpt)

    def confirm_best(self) -> dict | None:
        """The second evaluation round: the ``eval.confirm_top`` checkpoints with the highest in-run
        evaluation play ``eval.confirm_games`` fresh games each (seeds no in-run evaluation used) and
        ``best`` moves to the one that wins most there (ties: the higher in-run figure, then the
        earlier iteration). ``best.json`` keeps every candidate's two figures. Idempotent: a resumed
        run whose round is on record does not play it again. Returns the new record (None: no round)."""
        ev = self.cfg.eval
        path = self.dir / "best.json"
        key = f"eval/win_rate/{_slug(ev.opponents[0])}"
        evals: dict[int, dict] = {}
        for r in read_metrics(self.metrics.path):
            if key in r and (self.dir / self._checkpoint_path(r["step"])).is_dir():
                evals[r["step"]] = r  # a re-run iteration (after a resume) keeps its last evaluation
        if ev.confirm_top < 1 or not evals:
            return None
        top = sorted(evals, key=lambda it: (-evals[it][key], it))[: ev.confirm_top]
        prev = json.loads(path.read_text()) if path.exists() else {}
        done = prev.get("confirm", {})
        if done.get("games") == ev.confirm_games and [c["iteration"] for c in done.get("candidates", [])] == top:
            return prev
        current = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        cls = type(self.model)
        cands = []
        try:
            for it in top:
                ckpt = self._checkpoint_path(it)
                saved = cls.from_pretrained(self.dir / ckpt)  # load_state_dict casts to the live dtype
                self.model.load_state_dict(saved.state_dict())
                del saved
                eps = self._eval_games(ev.opponents[0], ev.confirm_games, 30_000_001 + it)
                invalid = sum(e.invalid_moves() for e in eps) / max(1, sum(e.moves() for e in eps))
                cands.append({"iteration": it, "in_run": evals[it][key], "confirm": _win_rate(eps),
                              "invalid_rate": invalid, "checkpoint": str(ckpt)})
        finally:
            self.model.load_state_dict(current)
        win = max(cands, key=lambda c: (c["confirm"], c["in_run"], -c["iteration"]))
        record = {"iteration": win["iteration"], "metric": key, "value": win["in_run"],
                  "invalid_rate": win["invalid_rate"], "checkpoint": win["checkpoint"],
                  "confirm": {"games": ev.confirm_games, "win_rate": win["confirm"], "candidates": cands}}
        atomic_write_bytes(path, json.dumps(record, indent=1).encode())
        self._link("best", Path(win["checkpoint"]))
        self.metrics.log(self.iteration, **{"confirm/best_iteration": win["iteration"],
                                            f"confirm/{key.removeprefix('eval/')}": win["confirm"]})
        return record

    def _link(self, name: str, target: Path) -> None:
        """Atomically (re)point the symlink ``dir/name`` at ``target`` (relative to the run folder)."""
        tmp = self.dir / f".{name}.tmp"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(target)
        os.replace(tmp, self.dir / name)

    @staticmethod
    def _checkpoint_path(it: int) -> Path:
        """Iteration ``it``'s checkpoint folder, relative to the run folder."""
        return Path("checkpoints") / f"iter-{it:05d}"

    def checkpoint(self, it: int) -> Path:
        torch = _torch()
        ckpt = self.dir / self._checkpoint_path(it)
        ckpt.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(ckpt)
        self.tok.save_pretrained(ckpt)
        state = {
            "iteration": it, "il_done": self.il_done, "optimizer": self.opt.state_dict(),
            "scaler": self.scaler.state_dict(), "rae": self.rae.state_dict(), "torch_rng": torch.get_rng_state(),
            "py_random": random.getstate(), "config": asdict(self.cfg),
            "critic": self.critic.state_dict() if self.critic is not None else None,
        }
        torch.save(state, ckpt / "trainer_state.pt.tmp")
        os.replace(ckpt / "trainer_state.pt.tmp", ckpt / "trainer_state.pt")
        self._link("latest", self._checkpoint_path(it))
        return ckpt

    def _load_state(self, state: dict) -> None:
        torch = _torch()
        self.iteration = int(state["iteration"])
        self.il_done = bool(state.get("il_done"))
        self.opt.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        self.rae.load_state_dict(state["rae"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["py_random"])
        if self.critic is not None and state.get("critic") is not None:
            self.critic.load_state_dict(state["critic"])

    def snapshot(self, it: int) -> str:
        ckpt = self.checkpoint(it)
        spec = f"llm:{ckpt},greedy=True,max_new_tokens={self.cfg.max_new_tokens},template={self.template.name}"
        return self.league.add_snapshot(LEARNER_NAME, spec, name=f"{LEARNER_NAME}@{it}")

    # -- the loop -----------------------------------------------------------------------------
    def run(self, iterations: int | None = None, progress=None) -> dict[str, float]:
        cfg = self.cfg
        torch = _torch()
        last = cfg.iterations if iterations is None else iterations
        if self.iteration == 0 and self.league.store.player(f"{LEARNER_NAME}@0") is None:
            # Start of a run (a run resumed from its iteration-0 checkpoint has done this already).
            torch.manual_seed(cfg.seed)
            if cfg.il is not None and not self.il_done:
                self.imitation()
            snap = self.snapshot(0)
            self.evaluate(0, snapshot=snap)
        policy = InvalidMovePolicy(allowance=0, loss=cfg.invalid_penalty, win=cfg.invalid_reward_other)
        result: dict[str, float] = {}
        for it in range(self.iteration + 1, last + 1):
            t0 = time.perf_counter()
            lr = lr_at(cfg, it)
            for group in self.opt.param_groups:
                group["lr"] = lr
            pairings = self._pairings(cfg.games_per_iter)
            episodes = self._play(pairings, greedy=False, policy=policy, seed=cfg.seed * 100_003 + it,
                                  concurrency=cfg.concurrency)
            self._report(episodes, LEARNER_NAME)
            t_roll = time.perf_counter() - t0
            samples = self._samples(episodes)
            stats = self.update(samples) if samples else {}
            self.iteration = it
            rets = [e.result.returns[s] for e in episodes for s in e.learner_seats]
            tokens = sum(len(s.response_ids) for s in samples)
            line = {f"train/{k}": v for k, v in stats.items()}
            line.update({
                "train/return": float(np.mean(rets)) if rets else 0.0,
                "train/invalid_rate": sum(e.invalid_moves() for e in episodes) / max(1, sum(e.moves() for e in episodes)),
                "train/selfplay_share": sum(e.opponent == "self" for e in episodes) / len(episodes),
                "train/samples": len(samples), "train/lr": lr, "train/rollout_tokens_per_s": tokens / max(t_roll, 1e-9),
                "time/rollout_s": t_roll, "time/iteration_s": time.perf_counter() - t0,
            })
            line.update(self._win_rates(episodes))
            self.metrics.log(it, **line)
            result = line
            if it % cfg.eval.every == 0 or it == last:
                result.update(self.evaluate(it, snapshot=self.snapshot(it)))
            elif it % cfg.snapshot_every == 0:
                self.snapshot(it)
            if progress is not None:
                progress(it, last, result)
        if last == cfg.iterations:
            self.confirm_best()
        plot_curves(self.metrics.path, self.dir / "curves.png")
        return result

    def close(self) -> None:
        self.rollout_engine.close()
        self.metrics.close()


def train(cfg: TrainConfig, directory: str | Path, **overrides) -> dict[str, float]:
    trainer = SpiralTrainer(cfg, directory, **overrides)
    try:
        return trainer.run()
    finally:
        trainer.close()
