"""SCC-style training of neural policies: imitation on league replays, then RL inside the league.

StarCraft Commander (Wang et al. 2021, arXiv 2012.13169) trains in two stages, both here:

1. **Imitation.** Teacher matches (MCTS, CFR, people: any agent specs) are played into the run's
   league, or another league's replays are read; the moves of the chosen players are cloned
   (`arena.trainers.policy.imitation`): from what those players saw as they played (the engine
   observes their seats; nothing re-simulates the run's own matches), or, for another league's
   replays, from views re-simulated through the game. The result is the imitation policy: every learner starts
   from it, it is the KL anchor of the RL loss (the default magnet; ``magnet:`` names another: the
   uniform policy, or a copy of each learner refreshed every N iterations), and it enters the league
   as the frozen ``main@il`` so the ratings show what RL added.
2. **League RL.** The learning players take AlphaStar's roles (``main``, ``main_exploiter``,
   ``league_exploiter``): each iteration every learner plays ``games_per_iter`` matches against the
   opponents its role's rule picks from the league (`arena.league.roles`: self-play, PFSP over the
   frozen players, exploiting the current main), all of them in lock step so each network answers
   every match it plays in one forward pass a tick (`arena.trainers.policy.actors`). Only the
   learner's own seats are trained (both in self-play). After its update a learner is snapshotted
   into a frozen player by its role's rule; an exploiter that resets restarts from the current
   main's weights (SCC's branching) with a fresh optimizer.

**Evaluation** plays the main greedily, seat-swapped, against ``eval.opponents``. Those games enter
the league under their own player, ``main.greedy`` (kind ``evaluation``: rated, never anyone's
training opponent), so the fitted table ranks the policy that plays greedily apart from the main,
whose training games sample their moves and rate it lower.

The trainer is three parts like the language-model trainer's: the **Learners**
(`arena.trainers.policy.learner.PolicyLearner`, one per learning player), the **Actors**
(`arena.trainers.policy.actors.PolicyActors`, in this process or worker processes) and this
**Coordinator**, a `arena.trainers.common.base.Trainer` (whose base owns the run folder, the
checkpoint write, ``best``, the metrics, stopping and the league session). The coordinator talks to
the league only through its session (`arena.league.session.LeagueSession`: the opponent a role's rule
draws with the trainer's own generator, the role step after an update, one bundle per iteration); the
role rules run inside the league.

Exactly once, exactly resumed: an iteration's effects on the league (its matches, snapshots,
new weights, evaluation games) are written in one transaction *after* the iteration's checkpoint,
which holds them too (`Trainer.close_iteration`). A run killed before the transaction resumes from the previous checkpoint
and plays the same iteration again (the same pairings, seeds, moves and losses); one killed after
the checkpoint but before the transaction applies the checkpoint's pending effects on resume. The
iteration's metrics line rides in the checkpoint as well: a resumed run cuts ``metrics.jsonl`` back
to where the checkpoint found it and writes the line again. So nothing is lost or counted twice, and
a resumed run equals one that never stopped. The players this trainer adds to the league (learners,
snapshots, imitation teachers) have it as their owner, so the league's config sync, whose config
lists only the opponents, never retires them on a restart.
"""

from __future__ import annotations

import copy
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import numpy as np

from arena.league.session import Bundle, LeagueSpec, PlayedMatch, Snapshot, replays_of
from arena.match.loop import MatchResult
from arena.trainers.common.base import Trainer
from arena.trainers.common.checkpoints import checkpoint_path
from arena.trainers.policy.actors import Pairing, PolicyActors, Seat, order_shares, play_pairings, to_batch
from arena.trainers.policy.config import SCCConfig
from arena.trainers.policy.learner import PolicyLearner, UniformMagnet
from arena.trainers.policy.make import make_policy_learner

IL_NAME = "main@il"
#: Teacher matches committed to the league (and their demonstrations written) this many at a time.
COMMIT_GROUP = 32
#: The league player of the main's greedy evaluation games: ``<main>`` and this (its spec plays greedily,
#: so a person who plays it, ``arena play GAME --vs RUN:main.greedy``, meets what the evaluations measured).
GREEDY_SUFFIX = ".greedy"


def _torch():
    from arena.errors import require

    return require("torch", "training neural policies", "llm")


def _slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in spec)[:40]


def league_spec(cfg: SCCConfig, name: str) -> LeagueSpec:
    """The league an SCC run plays in: its game, its opponents (fixed players), its role rules."""
    specs = list(dict.fromkeys(cfg.opponents + cfg.eval.opponents))
    return LeagueSpec(cfg.game, cfg.seed, dict(cfg.game_kwargs), {_slug(s): s for s in specs}, cfg.roles, name,
                      record="actions")


class SCCTrainer(Trainer):
    """The coordinator: league, imitation, iterations, role rules, evaluation, checkpoints.

    `league`: a `SharedLeague` this trainer plays in with others (`arena.trainers.mixed`), else the
    trainer's base opens its own in its run folder."""

    def __init__(self, cfg: SCCConfig, directory: str | Path, *, league: Any = None):
        torch = _torch()
        from arena.envs.registry import make_core
        from arena.inference.policy_nets import build_policy, spec_from_core

        validate(cfg)
        super().__init__(cfg, directory)
        # the learning curves, and beside them what explains a stall (docs/learning.md)
        self.curve_keys = ("eval/win_rate/*", "eval/nash_conv", "train/return", "train/entropy/*", "train/orders/*",
                           "train/kl_anchor", "train/kl_behaviour", "train/explained_variance", "train/value_loss",
                           "train/upgo_loss", "il/val_acc", "il/val_loss", "train/env_steps_per_s")
        torch.set_num_threads(cfg.threads)
        self.spec = spec_from_core(make_core(cfg.game, **cfg.game_kwargs))
        self.main = next(e.name for e in cfg.learners if e.role == "main")
        #: The league player whose games are the main's greedy evaluation games.
        self.evaluator = self.main + GREEDY_SUFFIX
        settings = cfg.learner
        torch.manual_seed(cfg.seed)
        self.learners: dict[str, PolicyLearner] = {}
        for e in cfg.learners:
            self.learners[e.name] = make_policy_learner(build_policy(self.spec, cfg.arch, **cfg.sizes), settings,
                                                        lr=cfg.lr, device=cfg.device, parallel=cfg.parallel,
                                                        key=e.name)
        self.anchor_net = None
        #: magnet.kind copy: each learner's frozen copy (the KL anchor), refreshed every magnet.every iterations.
        self.magnets: dict[str, Any] = {}
        self.il_done = False
        self._mirror: Any = None  # il.mirror's move permutation (`GameCore.mirror`)
        self.il_report: dict = {}
        #: While imitation matches are played: where their demonstrations are written, and those so far.
        self._recording: tuple[Path, dict[int, Any]] | None = None
        #: The trainer's own generator (opponents, resets), checkpointed with its state.
        self.rng = self.pairing_rng()
        self._setup_league(league)
        self.actors = PolicyActors(cfg.game, cfg.actors, cfg.game_kwargs, cfg.actors_backend, cfg.ray_address)
        self._inflight: dict | None = None
        state = self.latest_state()
        if state is not None:
            self._load_state(state)
        else:
            # No checkpoint yet (a new run, or one killed before its first): start over as a new run does,
            # without the metrics lines of a killed attempt (its imitation epochs).
            self.metrics.rewind(0)

    # -- league ---------------------------------------------------------------------------------
    def _setup_league(self, league: Any) -> None:
        cfg = self.cfg
        spec = league_spec(cfg, f"train-{self.dir.name}")
        self.join_league("scc", spec, league)
        self.fixed = [_slug(s) for s in dict.fromkeys(cfg.opponents)]
        for e in cfg.learners:
            self.session.join(e.name, "learner", self._weights_spec(e.name, 0), role=e.role,
                              state={"snapshots": 0, "steps_at_snapshot": 0, "external": True})
        self.session.join(self.evaluator, "evaluation", self._greedy_spec(0))
        self._claim_players(set(spec.opponents))

    def _claim_players(self, configured: set[str]) -> None:
        """Own the players this trainer added to a league written before players had owners: its
        learners, their snapshots and its imitation teachers (which that league's config sync retired
        on each restart: they are active again, as in a run that never stopped)."""
        cfg = self.cfg
        teachers = set() if cfg.il is None or not cfg.il.matches else {_slug(s) for s in cfg.il.teachers} - configured
        rows = self.session.players()
        mine = {p.name for p in rows if (p.kind == "learner" and p.name in self.learners)
                or (p.kind == "historical" and p.parent in self.learners)}
        fixed = {p.name for p in rows if p.kind == "fixed" and p.name in teachers}
        self.session.claim(mine | fixed, reactivate=fixed)


    def _weights_spec(self, name: str, it: int) -> str:
        return f"policy:{self._policy_folder(name, it)}"

    def _greedy_spec(self, it: int) -> str:
        return f"{self._weights_spec(self.main, it)},greedy=true"

    def _policy_folder(self, name: str, it: int) -> Path:
        ckpt = self.dir / checkpoint_path(it)
        return ckpt if name == self.main else ckpt / "players" / name

    def _opponent_seat(self, me: str, opp: str) -> Seat:
        if opp == me:
            return Seat(learner=me, trained=True)
        if opp in self.learners:
            return Seat(learner=opp, trained=False)
        return Seat(spec=self.session.player(opp).spec)

    def _pairings(self) -> list[Pairing]:
        """Every learner's matches of the next iteration, by its role's rule (and `fixed_share`)."""
        cfg, out = self.cfg, []
        for e in cfg.learners:
            for i in range(cfg.games_per_iter):
                if self.fixed and self.rng.random() < cfg.fixed_share:
                    opp, why = self.fixed[int(self.rng.integers(len(self.fixed)))], "fixed"
                else:
                    opp, why = self.session.opponent(e.name, self.rng)
                me = Seat(learner=e.name, trained=True)
                other = self._opponent_seat(e.name, opp)
                seats, names = ([me, other], [e.name, opp]) if i % 2 == 0 else ([other, me], [opp, e.name])
                out.append(Pairing(seats, names, e.name, why))
        return out

    # -- the learning players (arena.league.protocols.LearningPlayer, for the main) ----------------
    @property
    def pending(self) -> int:
        return 0

    def weights(self) -> str:
        return self._weights_spec(self.main, self.iteration)

    def load(self, path: str | Path) -> None:
        from arena.agents.neural import load_cached

        net, _ = load_cached(path, self.spec)
        self.learners[self.main].net.load_state_dict(net.state_dict())

    def reset_to(self, path: str | Path | None) -> None:
        if path is None:
            self.learners[self.main].net.load_state_dict(self.anchor_net.state_dict())
        else:
            self.load(path)
        self.learners[self.main].reset_optimizer()
        self._copy_magnets([self.main])

    def freeze(self, path: str | Path) -> str:
        from arena.inference.policy_nets import save_policy

        save_policy(path, self.learners[self.main].net, {"learner": self.main, "iteration": self.iteration})
        return f"policy:{path}"

    # -- imitation ------------------------------------------------------------------------------
    def imitation(self, phase: Callable[[str, int, int], None] | None = None) -> dict:
        """The imitation stage: the chosen players' moves, from another league's replays (``il.league``,
        re-simulated: this run did not play them) and from the teacher matches this run plays into its
        league (what their players saw as they played: nothing re-simulates those), cloned into the
        main's network; then the DAgger rounds."""
        from arena.inference.policy_nets import save_policy
        from arena.trainers.policy.imitation import behaviour_cloning, collect, joined, split

        cfg, il = self.cfg, self.cfg.il
        items: list[tuple[Any, list[str]]] = []
        teachers = [_slug(s) for s in il.teachers] if il.matches else []
        wanted = set(il.players) if il.players else set(teachers) if il.matches else None
        found = []
        if il.sc2_replays:  # a bad folder is one line before any match is played
            from arena.trainers.policy.imitation import sc2_replay_files

            sc2_replay_files(cfg.game, il.sc2_replays)
        if il.league:  # read passively: that league changes in nothing
            items += replays_of(il.league, cfg.game, None if il.players is None else set(il.players))
            if phase is not None:
                phase("imitation: re-simulating replays", 0, len(items))
            found.append(collect(items, wanted, self.spec, cfg.reward_scale, targets=il.targets, label=il.label,
                                 workers=il.workers, progress=None if phase is None else
                                 (lambda k: phase("imitation: re-simulating replays", k, len(items)))))
        if il.matches:
            for name, spec in zip(teachers, il.teachers):
                self.session.join(name, "fixed", spec)
            played, demos = self._league_matches(il.teachers, dict(zip(il.teachers, teachers)), il.matches,
                                                 self._teacher_seed_base(), "imitation", "imitation: teacher matches",
                                                 phase, wanted, first=len(items))
            items += played
            found.append(demos)
        read = 0
        if il.sc2_replays:  # the game's own replays, played through its replay observer
            from arena.trainers.policy.imitation import sc2_replay_demonstrations

            if phase is not None:
                phase("imitation: reading .SC2Replay files", 0, 1)
            demos, read = sc2_replay_demonstrations(cfg.game, cfg.game_kwargs, il.sc2_replays, il.players, self.spec,
                                                    cfg.reward_scale, first=len(items))
            found.append(demos)
        found = [d for d in found if d is not None]
        if not found:
            raise ValueError(f"no moves of {sorted(wanted) if wanted else 'any player'} in {len(items)} replays")
        demos = joined(found)
        train, val = split(demos, il.val_fraction, cfg.seed)
        train = self._mirrored(train)
        net = self.learners[self.main].net

        def log(epoch: int, line: dict) -> None:
            self.metrics.log(0, **line)
            if phase is not None:
                phase(f"imitation: epoch {epoch}, val loss {line['il/val_loss']:.3f}, "
                      f"val acc {line['il/val_acc']:.3f}", epoch, il.epochs)

        report = behaviour_cloning(net, train, val, epochs=il.epochs, batch_size=il.batch_size, lr=il.lr,
                                   weight_decay=il.weight_decay, patience=il.patience, value_coef=il.value_coef,
                                   seed=cfg.seed, smoothing=il.smoothing, log=log)
        report["replays"] = len(items) + read
        for r in range(1, il.dagger.rounds + 1):
            train, val, report = self._dagger_round(r, net, train, val, report, phase)
        rounds: list[tuple[Any, Any]] = []
        for r in range(1, il.expert.rounds + 1):
            rounds, report = self._expert_round(r, net, rounds, train, report, phase)
        folder = save_policy(self.dir / "checkpoints" / "il", net, {"stage": "imitation", **report})
        self.il_report = report
        self.il_done = True
        return {"folder": str(folder), **report}

    def _dagger_round(self, r: int, net: Any, train: Any, val: Any, report: dict,
                      phase: Callable[[str, int, int], None] | None) -> tuple[Any, Any, dict]:
        """DAgger round `r` (`DaggerConfig`): the policy as it stands plays into the league as
        ``<main>@dagger<r>``, its own positions are labelled, and it trains on everything so far. A
        restarted run finds the round's player (its checkpoint saved before its first match) and its
        committed matches, and plays only the rest with that checkpoint."""
        from arena.inference.policy_nets import save_policy
        from arena.trainers.policy.imitation import joined, split

        cfg, il = self.cfg, self.cfg.il
        dg = il.dagger
        name = f"{self.main}@dagger{r}"
        if self.session.player(name) is None:
            folder = save_policy(self.dir / "checkpoints" / f"dagger{r}", net, {"stage": "imitation",
                                                                                 "dagger_round": r})
            self.session.join(name, "fixed", f"policy:{folder}")
        spec, opponent = self.session.player(name).spec, dg.opponent or il.teachers[1]
        rival = _slug(opponent)
        self.session.join(rival, "fixed", opponent)
        base = self._teacher_seed_base() + il.matches + (r - 1) * dg.matches
        items, demos = self._league_matches([spec, opponent], {spec: name, opponent: rival}, dg.matches, base,
                                            f"imitation/dagger{r}", f"imitation: round {r} of {dg.rounds}, matches",
                                            phase, {name})
        if demos is None:
            raise ValueError(f"no moves of {name} in {len(items)} replays")
        t2, v2 = split(demos, il.val_fraction, cfg.seed + r)
        t2 = self._mirrored(t2)
        train, val = joined([train, t2]), joined([val, v2])
        done = report.get("epochs_total", report["epochs_run"])
        out = self._round_fit(net, train, val, f"round {r}", {"il/dagger_round": r}, done, phase, epochs=dg.epochs,
                              lr=il.lr, value_coef=il.value_coef, seed=cfg.seed + r)
        out.update(replays=report["replays"] + len(items), dagger_rounds=r, epochs_total=done + out["epochs_run"],
                   dagger_moves=report.get("dagger_moves", 0) + len(demos))
        return train, val, out

    def _expert_round(self, r: int, net: Any, rounds: list[tuple[Any, Any]], taught: Any, report: dict,
                      phase: Callable[[str, int, int], None] | None) -> tuple[list[tuple[Any, Any]], dict]:
        """Expert-iteration round `r` (`ExpertConfig`): the policy as it stands, searching with its own
        priors and value (``policy_mcts``), plays itself into the league as ``<main>@expert<r>``; each of
        its moves is labelled by the search that chose it (``"played"``: no second search) and by the
        game's outcome, and the network fits the last ``window`` rounds' positions, with ``mix`` positions
        of the imitation's training set (`taught`) drawn afresh per own position. A restarted run
        finds the round's player (its checkpoint saved before its first match) and its committed
        matches, and plays only the rest with that checkpoint."""
        from arena.inference.policy_nets import save_policy
        from arena.trainers.policy.imitation import joined, split

        cfg, il = self.cfg, self.cfg.il
        ex = il.expert
        name = f"{self.main}@expert{r}"
        if self.session.player(name) is None:
            folder = save_policy(self.dir / "checkpoints" / f"expert{r}", net, {"stage": "imitation",
                                                                                 "expert_round": r})
            spec = f"policy_mcts:{folder},simulations={ex.simulations}" + (
                f",uct_c={ex.uct_c:g}" if ex.uct_c != 2.0 else "") + (f",explore={ex.explore}" if ex.explore else "")
            # rated, never a training opponent (its search costs `simulations` forward passes a move)
            self.session.join(name, "evaluation", spec)
        spec = self.session.player(name).spec
        base = self._teacher_seed_base() + il.matches + il.dagger.rounds * il.dagger.matches + (r - 1) * ex.matches
        items, demos = self._league_matches([spec, spec], {spec: name}, ex.matches, base, f"imitation/expert{r}",
                                            f"imitation: expert round {r} of {ex.rounds}, self-play", phase, {name},
                                            ask="played")
        if demos is None:
            raise ValueError(f"no moves of {name} in {len(items)} replays")
        t2, v2 = split(demos, il.val_fraction, cfg.seed + 1_000 + r)
        rounds = (rounds + [(self._mirrored(t2), v2)])[-ex.window:]
        own = [t for t, _ in rounds]
        k = min(len(taught), int(round(ex.mix * sum(len(t) for t in own))))
        if k:
            pick = np.random.default_rng(cfg.seed + 2_000 + r).choice(len(taught), k, replace=False)
            drawn = taught.take(np.sort(pick))
            if drawn.probs is None:  # moves alone: as one-hot targets, so the searches' shares are kept
                hot = np.zeros((len(drawn), own[0].probs.shape[1]), dtype=own[0].probs.dtype)
                hot[np.arange(len(drawn)), np.asarray(drawn.actions)] = 1.0
                drawn.probs = hot
            own.append(drawn)
        train, val = joined(own), joined([v for _, v in rounds])
        done = report.get("epochs_total", report["epochs_run"])
        out = self._round_fit(net, train, val, f"expert round {r}", {"il/expert_round": r}, done, phase,
                              epochs=ex.epochs, lr=ex.lr or il.lr, value_coef=ex.value_coef, seed=cfg.seed + 1_000 + r)
        out.update(replays=report["replays"] + len(items), expert_rounds=r, epochs_total=done + out["epochs_run"],
                   expert_moves=report.get("expert_moves", 0) + len(demos),
                   **{k: report[k] for k in ("dagger_rounds", "dagger_moves") if k in report})
        return rounds, out

    def _round_fit(self, net: Any, train: Any, val: Any, title: str, tags: dict, done: int,
                   phase: Callable[[str, int, int], None] | None, *, epochs: int, lr: float, value_coef: float,
                   seed: int) -> dict:
        """A round's fit of `net` (`behaviour_cloning`), its epochs logged after the `done` ones before it
        with `tags`, and shown in the progress as `title`."""
        from arena.trainers.policy.imitation import behaviour_cloning

        il = self.cfg.il

        def log(epoch: int, line: dict) -> None:
            self.metrics.log(0, **{**line, "il/epoch": done + epoch, **tags})
            if phase is not None:
                phase(f"imitation: {title}, epoch {epoch}, val loss {line['il/val_loss']:.3f}, "
                      f"val acc {line['il/val_acc']:.3f}", epoch, epochs)

        return behaviour_cloning(net, train, val, epochs=epochs, batch_size=il.batch_size, lr=lr,
                                 weight_decay=il.weight_decay, patience=il.patience, value_coef=value_coef, seed=seed,
                                 smoothing=il.smoothing, log=log)

    def _mirrored(self, train: Any) -> Any:
        """The training positions and, with ``il.mirror``, their mirror images after them."""
        if not self.cfg.il.mirror:
            return train
        from arena.envs.registry import make_core
        from arena.trainers.policy.imitation import with_mirror_images

        if self._mirror is None:  # the game's permutation, found once (validation made sure there is one)
            self._mirror = make_core(self.cfg.game, **self.cfg.game_kwargs).mirror()
        return with_mirror_images(train, self._mirror)

    def _teacher_seed_base(self) -> int:
        """Teacher match i's seed is this + i (`arena.match.batch.schedule`)."""
        return self.cfg.seed + 17

    def _league_matches(self, specs: list[str], names: dict[str, str], n: int, base: int, note: str, label: str,
                        phase: Callable[[str, int, int], None] | None, players: set[str] | None,
                        first: int = 0, ask: str | None = None) -> tuple[list[tuple[Any, list[str]]], Any]:
        """`n` seat-swapped matches of `specs` (seeds ``base + i``) played into the league, with their
        replays, by match index; and the demonstrations of `players` (league names or specs; None: every
        seat) in them, from what those players saw as they played (``MatchResult.observed``), match i's
        numbered ``first + i`` (None: they never moved).

        The matches are committed (rated, their replays kept) in match order, `COMMIT_GROUP` at a time
        once they and every match before them are played, each group's demonstrations written to the
        run folder first (`_commit_matches`; a stop by Ctrl-C commits the group in hand): a run
        stopped part-way keeps them, and the next start reads both back (by `note` and seed; the
        demonstrations from ``demonstrations/<note>/``) and plays only the rest, each with the seed and
        seats it has among all `n`, so the league and the demonstrations are those of a run that never
        stopped. A kept match without its file (a run folder written before the files were) is
        re-simulated from its replay. `ask`: who answers at the observed moves (`arena.match.observe`;
        None: the imitation's own choice, ``il.label`` or each seat's player)."""
        from arena.match.batch import play_matches
        from arena.trainers.policy.imitation import asks, joined

        cfg, il = self.cfg, self.cfg.il
        kept: dict[int, tuple[Any, list[str]]] = {}
        for seed, replay, seated in self.session.kept(note):
            if 0 <= seed - base < n:
                kept[seed - base] = (replay, seated)
        folder = self.dir / "demonstrations" / note
        parts = self._kept_demonstrations(folder, kept, players, played=ask == "played")
        self._recording = (folder, parts)
        todo = [i for i in range(n) if i not in kept]
        waiting: dict[int, MatchResult] = {}
        order = iter(todo)
        nxt = [next(order, None)]

        ready: list[MatchResult] = []

        def played(res: MatchResult) -> None:
            waiting[res.seed - base] = res
            while nxt[0] is not None and nxt[0] in waiting:
                ready.append(waiting.pop(nxt[0]))
                nxt[0] = next(order, None)
            # in groups (one transaction and one demonstrations file each): a kill loses at most a group,
            # which the next start plays again
            if ready and (len(ready) >= COMMIT_GROUP or nxt[0] is None):
                self._commit_matches(list(ready), names, note, base, kept)
                ready.clear()
                if phase is not None:
                    phase(label, len(kept), n)

        if phase is not None:
            phase(label, len(kept), n)
        observe = [k for k, s in enumerate(specs) if players is None or s in players or names.get(s) in players]
        try:
            play_matches(cfg.game, specs, n, seed=base, workers=il.workers, record="actions",
                         game_kwargs=cfg.game_kwargs, on_result=played, only=todo, observe=observe,
                         ask=ask or asks(self.spec, il.targets, il.label))
        except KeyboardInterrupt:  # a person's stop keeps every match played in order so far
            if ready:
                self._commit_matches(list(ready), names, note, base, kept)
            raise
        finally:
            self._recording = None
        found = [parts[i] for i in sorted(parts) if parts[i] is not None]
        demos = joined(found) if found else None
        if demos is not None and first:
            demos.match = demos.match + first
        return [kept[i] for i in sorted(kept)], demos

    def _kept_demonstrations(self, folder: Path, kept: dict[int, tuple[Any, list[str]]],
                             players: set[str] | None, played: bool = False) -> dict[int, Any]:
        """The demonstrations of the `kept` matches (by index), by the first match index of each group
        written: read from `folder`, where a file covers only kept matches (one whose group never reached
        the league is a killed run's, removed); a kept match no file covers is re-simulated from its
        replay (for a game that can be), or an `ArenaError` says what to do."""
        from arena.errors import ArenaError
        from arena.trainers.policy.imitation import collect, load_demonstrations

        cfg, il = self.cfg, self.cfg.il
        parts: dict[int, Any] = {}
        covered: set[int] = set()
        for path in sorted(folder.glob("*.npz")) if folder.is_dir() else []:
            demos, indices = load_demonstrations(path)
            group = {int(i) for i in indices}
            if not group or not group <= kept.keys() or group & covered:
                path.unlink()  # written before a commit that never happened
                continue
            covered |= group
            parts[min(group)] = demos
        missing = sorted(set(kept) - covered)
        if not missing:
            return parts
        from arena.envs.registry import make_core

        core = make_core(cfg.game, **cfg.game_kwargs)
        try:
            if not core.resimulates:
                raise ArenaError(f"{len(missing)} imitation matches kept in the league have no demonstrations in "
                                 f"{folder}, and {cfg.game} cannot be re-simulated from its replays: start the run "
                                 "again in a new folder")
        finally:
            core.close()
        runs: list[list[int]] = []
        for i in missing:  # contiguous runs, each re-simulated in one call (numbered from its first index)
            if runs and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
        for run in runs:
            parts[run[0]] = collect([kept[i] for i in run], players, self.spec, cfg.reward_scale,
                                    targets=il.targets, label=None if played else il.label, workers=il.workers,
                                    first=run[0])
        return parts

    def _commit_matches(self, results: list[MatchResult], names: dict[str, str], note: str, base: int,
                        kept: dict[int, tuple[Any, list[str]]]) -> None:
        """Imitation matches into the league, in one transaction, as rated matches with their replays
        (kept for viewing and verifying); each goes into `kept` by its index. Their demonstrations (what
        the chosen players saw) are written to the run folder first, so a restart that finds these
        matches in the league finds their demonstrations too."""
        from arena.trainers.policy.imitation import from_observed, save_demonstrations

        if not results:
            return
        folder, parts = self._recording
        indices = [res.seed - base for res in results]
        demos = from_observed(((i, res.returns, res.observed or []) for i, res in zip(indices, results)),
                              self.spec, self.cfg.reward_scale)
        save_demonstrations(folder / f"{min(indices):05d}-{max(indices):05d}.npz", demos, indices)
        parts[min(indices)] = demos
        seated = [[names.get(a) or _slug(a) for a in res.agents] for res in results]
        self.session.record([PlayedMatch(seats, list(res.agents), res, note, note)
                             for res, seats in zip(results, seated)])
        for res, seats in zip(results, seated):
            kept[res.seed - base] = (res.replay, seats)

    def _start_from_il(self) -> None:
        """Every learner starts from the imitation weights, which become the KL anchor and ``main@il``."""
        from arena.inference.policy_nets import build_policy

        src = self.learners[self.main].net.state_dict()
        for lrn in self.learners.values():
            lrn.net.load_state_dict(src)
            lrn.reset_optimizer()
        self.anchor_net = build_policy(self.spec, self.cfg.arch, **self.cfg.sizes)
        self.anchor_net.load_state_dict(src)
        self.anchor_net.eval()

    # -- the magnet (the KL's anchor) -------------------------------------------------------------
    def _attach_magnets(self) -> None:
        """Each learner's KL anchor, by ``magnet.kind``: the imitation policy (none without imitation),
        the uniform policy, or the learner's own frozen copy."""
        kind = self.cfg.magnet.kind
        for name, lrn in self.learners.items():
            lrn.anchor = (UniformMagnet() if kind == "uniform" else self.magnets.get(name) if kind == "copy"
                          else self.anchor_net)

    def _copy_magnets(self, names: Any = None) -> None:
        """magnet.kind copy: the named learners' (default: all) magnets become copies of their current weights."""
        if self.cfg.magnet.kind != "copy":
            return
        for name in self.learners if names is None else names:
            if name not in self.magnets:
                self.magnets[name] = self._frozen_net()
            self.magnets[name].load_state_dict(self.learners[name].net.state_dict())
        self._attach_magnets()

    def _frozen_net(self) -> Any:
        """A network of the learners' shape, in eval mode, that no optimiser moves (a copy magnet)."""
        from arena.inference.policy_nets import build_policy

        net = build_policy(self.spec, self.cfg.arch, **self.cfg.sizes).eval()
        for p in net.parameters():
            p.requires_grad_(False)
        return net

    # -- one iteration ---------------------------------------------------------------------------
    def _nets(self) -> dict[str, Any]:
        return {n: lrn.net for n, lrn in self.learners.items()}

    def _submit(self, it: int, pairings: list[Pairing]) -> None:
        version = self.learners[self.main].version
        self.actors.submit(pairings, self._nets(), seed=self.cfg.seed * 100_003 + it, version=version,
                           explore=self.cfg.explore)

    def _roles(self, it: int) -> tuple[list[Snapshot], list[dict]]:
        """Snapshots and resets the league's role rules call for after iteration `it`'s updates (applied to
        the learners now; recorded in the league after the checkpoint)."""
        from arena.inference.policy_nets import save_policy

        cfg = self.cfg
        snaps, events = [], []
        for e in cfg.learners:
            due = bool(cfg.snapshot_every and it % cfg.snapshot_every == 0)
            step = self.session.role_step(e.name, self.rng, due=due)
            if not step.snapshot:
                continue

            n = self.session.snapshots_of(e.name) + 1
            folder = self.dir / "players" / "frozen" / f"{e.name}-it{it:05d}"
            save_policy(folder, self.learners[e.name].net, {"learner": e.name, "iteration": it, "role": e.role})
            snaps.append(Snapshot(e.name, f"policy:{folder}", f"{e.name}@{n}"))
            if step.reset:
                source = step.branch_from
                lrn = self.learners[e.name]
                if source in self.learners and source != e.name:
                    lrn.net.load_state_dict(self.learners[source].net.state_dict())
                elif self.anchor_net is not None:
                    lrn.net.load_state_dict(self.anchor_net.state_dict())
                lrn.reset_optimizer()
                self._copy_magnets([e.name])  # a copy magnet follows the restart (the old one would pull it back)
                events.append({"kind": "reset", "player": e.name, "branched_from": source, "iteration": it})
        return snaps, events

    def _bundle(self, it: int, matches: list[PlayedMatch], snapshots: list[Snapshot], events: list[dict],
                evaluated: bool) -> Bundle:
        """What iteration `it` gives the league: its matches, every learner's new weights (and the greedy
        evaluation player's, after an evaluation), the snapshots and resets."""
        players = {name: {"spec": self._weights_spec(name, it), "version": it} for name in self.learners}
        if evaluated:
            players[self.evaluator] = {"spec": self._greedy_spec(it), "version": it}
        return Bundle(matches, players, snapshots, events)

    def _match_records(self, pairings: list[Pairing], results: list[MatchResult], note: str,
                       specs_of: Callable[[Pairing], list[str]]) -> list[PlayedMatch]:
        return [PlayedMatch(p.names, specs_of(p), r, p.why, note) for p, r in zip(pairings, results)]

    def _seat_specs(self, it: int, greedy: bool = False) -> Callable[[Pairing], list[str]]:
        """The agent specs a match's seats are recorded with (`greedy`: the main's evaluation games)."""
        def learner(name: str) -> str:
            return self._greedy_spec(it) if greedy else self._weights_spec(name, it)

        def specs(p: Pairing) -> list[str]:
            return [learner(s.learner) if s.learner is not None else s.spec for s in p.seats]

        return specs

    # -- evaluation -------------------------------------------------------------------------------
    def evaluate(self, it: int, games: int | None = None, seed_base: int = 10_000_019) -> tuple[dict, list]:
        """Greedy seat-swapped games of the current main against each evaluation opponent."""
        cfg = self.cfg
        n = games or cfg.eval.games
        out: dict[str, float] = {}
        records = []
        total = n * len(cfg.eval.opponents)
        for k, spec in enumerate(cfg.eval.opponents):
            self._show("evaluation: games", k * n, total)
            name, me = _slug(spec), self.evaluator
            mine, other = Seat(learner=self.main), Seat(spec=spec)
            pairings = [Pairing([mine, other] if i % 2 == 0 else [other, mine],
                                [me, name] if i % 2 == 0 else [name, me], self.main, "evaluation")
                        for i in range(n)]
            results, _ = play_pairings(cfg.game, pairings, {self.main: self.learners[self.main].net},
                                       seed=seed_base + it, greedy=True, game_kwargs=cfg.game_kwargs)
            seat = [p.names.index(me) for p in pairings]
            out[f"eval/win_rate/{name}"] = sum(r.winner == s for r, s in zip(results, seat)) / n
            out[f"eval/draw_rate/{name}"] = sum(bool(r.draw) for r in results) / n
            out[f"eval/return/{name}"] = float(np.mean([r.returns[s] for r, s in zip(results, seat)]))
            records += self._match_records(pairings, results, "evaluation", self._seat_specs(it, greedy=True))
        self._show("evaluation: games", total, total)
        if cfg.eval.nash_conv:
            out["eval/nash_conv"] = self.nash_conv(self.main)
        if cfg.eval.tactics:
            out.update(self.tactics(self.main))
        return out, records

    def tactics(self, name: str) -> dict[str, float]:
        """The tactics probe of learner `name`'s greedy policy (`arena.agents.probe`), on the same positions
        at every evaluation."""
        from arena.agents.neural import PolicyAgent
        from arena.agents.probe import agent_chooser, tactics_probe

        agent = PolicyAgent(self.learners[name].net, greedy=True, seed=0)
        return tactics_probe(self.cfg.game, agent_chooser(agent), self.cfg.eval.tactics, seed=self.cfg.seed).row("eval/")

    def nash_conv(self, name: str) -> float:
        """NashConv of learner `name`'s policy (the sum over players of what a best response gains)."""
        from arena.envs.registry import make_core
        from arena.trainers.policy.nashconv import nash_conv_of, net_policy_fn

        core = make_core(self.cfg.game, **self.cfg.game_kwargs)
        game = core.settings.get("game")
        return nash_conv_of(game, net_policy_fn(self.learners[name].net), core.settings.get("params") or None)

    # -- checkpoints ---------------------------------------------------------------------------------
    def save(self, folder: Path, it: int, report: dict | None = None) -> None:
        from arena.inference.policy_nets import save_policy

        torch = _torch()
        for name, lrn in self.learners.items():
            save_policy(self._policy_folder(name, it), lrn.net, {"learner": name, "iteration": it,
                                                                  "run": str(self.dir)})
        self.save_state(folder, {
            "iteration": it, "il_done": self.il_done, "il_report": self.il_report,
            "learners": {n: lrn.state_dict() for n, lrn in self.learners.items()},
            "anchor": None if self.anchor_net is None else self.anchor_net.state_dict(),
            "magnets": {n: m.state_dict() for n, m in self.magnets.items()},
            "torch_rng": torch.get_rng_state(), "py_random": random.getstate(),
            "pairing_rng": self.rng.bit_generator.state, "config": asdict(self.cfg),
            "report": report, "inflight": self._inflight,
            # the metrics file up to this iteration's line, which comes after the league's transaction
            "metrics_size": self.metrics.size(),
        })

    def _load_state(self, state: dict) -> None:
        from arena.inference.policy_nets import build_policy

        torch = _torch()
        self.iteration = int(state["iteration"])
        self.il_done = bool(state["il_done"])
        self.il_report = state.get("il_report") or {}
        for n, s in state["learners"].items():
            if n in self.learners:
                self.learners[n].load_state_dict(s)
        if state.get("anchor") is not None:
            self.anchor_net = build_policy(self.spec, self.cfg.arch, **self.cfg.sizes)
            self.anchor_net.load_state_dict(state["anchor"])
            self.anchor_net.eval()
        magnets = state.get("magnets") or {}
        for n, sd in magnets.items():
            if n in self.learners:
                self.magnets[n] = self._frozen_net()
                self.magnets[n].load_state_dict(sd)
        # a checkpoint written with another magnet: copies of the weights it holds, as a new run starts with
        self._copy_magnets([n for n in self.learners if n not in self.magnets])
        self._attach_magnets()
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["py_random"])
        self.rng.bit_generator.state = state["pairing_rng"]
        self._inflight = state.get("inflight")
        state, report = self._legacy_state(state)
        self.reapply(state)  # killed between the checkpoint and the league's transaction: applied now
        if report is not None and state.get("metrics_size") is not None:
            # Killed before (or while) its metrics line was written: written again, once.
            self.metrics.rewind(state["metrics_size"])
            self._report(report)

    def _legacy_state(self, state: dict) -> tuple[dict, dict | None]:
        """(state, its report) of a checkpoint, also of one written when the iteration's league effects
        and its metrics rode together in one ``bundle`` dict."""
        old = state.get("bundle")
        if old is None or "league_bundle" in state:
            return state, state.get("report")
        bundle = self._bundle(old["iteration"], [PlayedMatch(n, s, r, why, note) for n, s, why, note, r in old["matches"]],
                              [Snapshot(x["parent"], x["spec"], x["name"]) for x in old["snapshots"]], old["events"],
                              old["evaluated"])
        report = {k: old[k] for k in ("iteration", "metrics", "evaluated")} if "metrics" in old else None
        return {**state, "league_bundle": bundle}, report

    def _report(self, report: dict) -> None:
        """An iteration's metrics line and `best`, after its league transaction (and again on resume,
        over what a killed run wrote after its checkpoint)."""
        if report["evaluated"]:
            key = f"eval/win_rate/{_slug(self.cfg.eval.opponents[0])}"
            self.track_best(report["iteration"], key, report["metrics"][key])
        self.metrics.log(report["iteration"], **report["metrics"])

    # -- the loop (`Trainer.run`: train to an iteration, resuming; progress; stop) -----------------------
    def on_phase(self, phase: Callable[[str, int, int], None] | None) -> None:
        """``phase(text, done, total)``: the imitation stage's teacher matches and epochs, then each
        iteration's ``"rollout: matches"``, ``"update: epochs"`` (every learner's passes, one after
        another) and ``"evaluation: games"``."""
        passes = self.cfg.learner.epochs
        for k, lrn in enumerate(self.learners.values()):
            lrn.on_epoch = None if phase is None else (
                lambda done, n, off=k * passes: phase("update: epochs", off + done, passes * len(self.learners)))

    def start(self, last: int) -> None:
        cfg = self.cfg
        if cfg.il is not None and not self.il_done:
            self.imitation(self._phase)
            self._start_from_il()
        self._copy_magnets()
        self._attach_magnets()
        out, records = self.evaluate(0)
        snaps = [] if cfg.il is None else [Snapshot(self.main, f"policy:{self.dir / 'checkpoints' / 'il'}", IL_NAME)]
        report = {"iteration": 0, "metrics": out, "evaluated": True}
        self.close_iteration(0, self._bundle(0, records, snaps, [], True), report=report)
        self._report(report)

    def iterate(self, it: int, last: int) -> dict[str, float]:
        cfg = self.cfg
        torch = _torch()
        passes = cfg.learner.epochs
        overlap = cfg.overlap and cfg.actors > 0
        t0 = time.perf_counter()
        lr = cfg.lr_at(it)
        for lrn in self.learners.values():
            lrn.set_lr(lr)
        if overlap and self._inflight is not None and self._inflight["iteration"] == it:
            pairings = self._inflight["pairings"]
            if not self.actors.busy:  # resumed: play it again with the weights it had
                self._resubmit(self._inflight)
        else:
            pairings = self._pairings()
            self._submit(it, pairings)
        self._show("rollout: matches", 0, len(pairings))
        results, trajs = self.actors.collect()
        self._show("rollout: matches", len(pairings), len(pairings))
        if overlap and it < last:  # the next iteration plays while this one learns (one version of lag)
            nxt = self._pairings()
            self._inflight = {"iteration": it + 1, "pairings": nxt, "seed": cfg.seed * 100_003 + it + 1,
                              "version": self.learners[self.main].version,
                              "weights": {n: copy.deepcopy(l.net.state_dict()) for n, l in self.learners.items()}}
            self._submit(it + 1, nxt)
        else:
            self._inflight = None
        t_roll = time.perf_counter() - t0
        t1 = time.perf_counter()
        line: dict[str, float] = {}
        kl = cfg.kl_at(it) if any(lrn.anchor is not None for lrn in self.learners.values()) else 0.0
        gen = torch.Generator().manual_seed(cfg.seed * 7_919 + it)
        self._show("update: epochs", 0, passes * len(self.learners))
        for name, lrn in self.learners.items():
            mine = [t for t in trajs if t.learner == name]
            if not mine:
                continue
            stats = lrn.step(to_batch(mine, gamma=cfg.learner.gamma, reward_scale=cfg.reward_scale,
                                      shaping=cfg.shaping), kl, gen)
            prefix = "train" if name == self.main else f"train_{name}"
            line.update({f"{prefix}/{k}": v for k, v in stats.items()})
            line.update({f"{prefix}/{k}": v for k, v in order_shares(mine, self.spec.action).items()})
            line[f"{prefix}/return"] = float(np.mean([t.ret for t in mine]))
        t_learn = time.perf_counter() - t1
        line.update(self._win_rates(pairings, results))
        moves = sum(r.moves for r in results)
        line.update({"train/kl_coef": kl, "train/lr": lr, "time/rollout_s": t_roll, "time/learn_s": t_learn,
                     "train/env_steps": moves, "train/env_steps_per_s": moves / max(t_roll, 1e-9)})
        snaps, events = self._roles(it)
        if cfg.magnet.kind == "copy" and it % cfg.magnet.every == 0:
            self._copy_magnets()  # R-NaD's regularisation policy update
            line["train/magnet_refresh"] = 1.0
        records = self._match_records(pairings, results, "training", self._seat_specs(it))
        evaluated = it % cfg.eval.every == 0 or it == last
        if evaluated:
            out, ev_records = self.evaluate(it)
            line.update(out)
            records += ev_records
        self.iteration = it
        # The metrics line rides in the checkpoint: a run killed before it is written writes it on resume
        # (with the time to the checkpoint; a run that goes on counts the league's transaction too).
        line["time/iteration_s"] = time.perf_counter() - t0
        report = {"iteration": it, "metrics": line, "evaluated": evaluated}
        self.close_iteration(it, self._bundle(it, records, snaps, events, evaluated), report=report)
        line["time/iteration_s"] = time.perf_counter() - t0
        self._report(report)
        return line

    def _resubmit(self, inflight: dict) -> None:
        from arena.inference.policy_nets import build_policy

        nets = {}
        for n, sd in inflight["weights"].items():
            net = build_policy(self.spec, self.cfg.arch, **self.cfg.sizes)
            net.load_state_dict(sd)
            nets[n] = net.eval()
        self.actors.submit(inflight["pairings"], nets, seed=inflight["seed"], version=inflight["version"],
                           explore=self.cfg.explore)

    def _win_rates(self, pairings: list[Pairing], results: list[MatchResult]) -> dict[str, float]:
        """The main's training win rate per kind of opponent (fixed by name, learners, snapshots)."""
        games: dict[str, list[int]] = {}
        for p, r in zip(pairings, results):
            if p.owner != self.main:
                continue
            me = p.names.index(self.main)
            opp = p.names[1 - me]
            if opp == self.main:
                continue
            key = opp if opp in self.fixed or opp in self.learners else "historical"
            games.setdefault(key, []).append(int(r.winner == me))
        return {f"train/win_rate/{k}": float(np.mean(v)) for k, v in sorted(games.items())}

    def close(self) -> None:
        """Stop the actors and learners, and close the league if this trainer opened it (the base's
        session). A second call does nothing."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        try:
            self.actors.close()
            for lrn in self.learners.values():
                lrn.close()
        finally:
            super().close()


def validate(cfg: SCCConfig) -> None:
    """Check the game, the agent specs and the policy sizes before anything is written."""
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.errors import ArenaError, ConfigError, IncompatibleAgent
    from arena.inference.policy_nets import build_policy, spec_from_core
    from arena.replays.format import LEAGUE_DB
    from arena.trainers.policy.make import check_learner, check_parallel

    check_parallel(cfg.parallel)
    if cfg.parallel.mode != "none" and cfg.device != "cpu":
        raise ConfigError(f"parallel: the neural-policy learner's parallel step runs on the CPU for now, got "
                          f"device: {cfg.device}")
    try:
        core = make_core(cfg.game, **cfg.game_kwargs)
    except ArenaError as e:
        raise ConfigError(f"game: {e}") from None
    if len(core.players) != 2:
        raise ConfigError(f"game: {cfg.game} has {len(core.players)} players; the SCC trainer plays two-player games")
    try:
        spec = spec_from_core(core)
    except IncompatibleAgent as e:
        raise ConfigError(f"game: {e}") from None
    try:
        build_policy(spec, cfg.arch, **cfg.sizes)
    except ValueError as e:
        raise ConfigError(f"sizes/arch: {e}") from None
    keys = [("opponents", cfg.opponents), ("eval.opponents", cfg.eval.opponents)]
    if cfg.il is not None:
        keys.append(("il.teachers", cfg.il.teachers))
        if cfg.il.mirror and (core.mirror() is None or spec.entities or spec.action is not None):
            raise ConfigError(f"il.mirror: {cfg.game} has no board mirror the arena knows (Connect Four and "
                              "tic-tac-toe do); remove il.mirror")
        if cfg.il.dagger.opponent is not None:
            keys.append(("il.dagger.opponent", [cfg.il.dagger.opponent]))
        if cfg.il.expert.rounds and (core.source != "openspiel" or not core.perfect_information
                                     or spec.action_kind != "discrete" or spec.entities):
            raise ConfigError(f"il.expert: expert iteration searches with policy_mcts, for two-player zero-sum "
                              f"perfect-information OpenSpiel games with discrete moves; {cfg.game} is not one "
                              "(remove il.expert)")
    for key, specs in keys:
        for s in specs:
            try:
                make_agent(s, core, 0)
            except ArenaError as e:
                raise ConfigError(f"{key}: {e}") from None
    check_learner(cfg.learner, spec, cfg.game, cfg.sizes)
    if cfg.magnet.kind == "uniform" and spec.box_moves:
        raise ConfigError(f"magnet.kind: uniform needs moves with a finite set of choices; {cfg.game}'s moves draw "
                          "from a box (use imitation or copy)")
    if cfg.eval.tactics and (core.source != "openspiel" or not core.perfect_information
                             or len(core.players) != 2):
        raise ConfigError(f"eval.tactics: the tactics probe is for two-player perfect-information OpenSpiel games; "
                          f"{cfg.game} is not (remove eval.tactics)")
    if cfg.eval.nash_conv and (core.source != "openspiel" or core.perfect_information):
        raise ConfigError(f"eval.nash_conv: {cfg.game} is not an OpenSpiel game of imperfect information "
                          "(NashConv is computed exactly for small poker games such as kuhn_poker and leduc_poker)")
    if cfg.il is not None and cfg.il.label is not None:
        try:
            labeller = make_agent(cfg.il.label, core, 0)
        except ArenaError as e:
            raise ConfigError(f"il.label: {e}") from None
        from arena.trainers.policy.imitation import strategy_reader

        if not callable(strategy_reader(labeller)):
            raise ConfigError(f"il.label: {cfg.il.label} cannot tell its action probabilities; use a labeller whose "
                              "strategy can be read (mcts, cfr, policy_mcts)")
    if cfg.il is not None:
        if cfg.il.matches and len(cfg.il.teachers) != 2:
            raise ConfigError(f"il.teachers: give one agent spec per seat (2), got {len(cfg.il.teachers)}")
        if cfg.il.league and not (Path(cfg.il.league) / LEAGUE_DB).exists():
            raise ConfigError(f"il.league: no league in {cfg.il.league} (no {LEAGUE_DB}); give the folder of a league "
                              "(`arena league run CONFIG --dir FOLDER`) whose replays are to be imitated")
        if cfg.il.sc2_replays:
            from arena.trainers.policy.imitation import sc2_replay_files

            try:
                sc2_replay_files(cfg.game, cfg.il.sc2_replays)
            except ArenaError as e:
                raise ConfigError(str(e)) from None
        if not cfg.il.matches and not cfg.il.league and not cfg.il.sc2_replays:
            raise ConfigError("il: give il.matches > 0 (teacher matches), il.league (a league folder to imitate) or "
                              "il.sc2_replays (a folder of .SC2Replay files)")
