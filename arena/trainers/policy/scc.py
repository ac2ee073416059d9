"""SCC-style training of neural policies: imitation on league replays, then RL inside the league.

StarCraft Commander (Wang et al. 2021, arXiv 2012.13169) trains in two stages, both here:

1. **Imitation.** Teacher matches (MCTS, CFR, people: any agent specs) are played into the run's
   league, or another league's replays are read; the moves of the chosen players are cloned
   (`arena.trainers.policy.imitation`). The result is the imitation policy: every learner starts
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
checkpoint write, ``best``, the metrics and stopping). The coordinator talks to the league only
through `LeagueClient` methods (`next_pairing` with its own generator, `begin`, `commit_many`,
`add_snapshot`, the player rows); its role rules are the league's (`arena.league.roles.after_update`).

Exactly once, exactly resumed: an iteration's effects on the league (its matches, snapshots,
new weights, evaluation games) are written in one transaction *after* the iteration's checkpoint,
which holds them too. A run killed before the transaction resumes from the previous checkpoint
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

from arena.match.loop import MatchResult
from arena.trainers.common.base import Trainer
from arena.trainers.common.checkpoints import checkpoint_path
from arena.trainers.common.stopping import owner_name
from arena.trainers.policy.actors import Pairing, PolicyActors, Seat, order_shares, play_pairings, to_batch
from arena.trainers.policy.config import SCCConfig
from arena.trainers.policy.learner import PolicyLearner, UniformMagnet
from arena.trainers.policy.make import make_policy_learner

IL_NAME = "main@il"
#: The league player of the main's greedy evaluation games: ``<main>`` and this (its spec plays greedily,
#: so a person who plays it, ``arena play GAME --vs RUN:main.greedy``, meets what the evaluations measured).
GREEDY_SUFFIX = ".greedy"


def _torch():
    from arena.errors import require

    return require("torch", "training neural policies", "llm")


def _slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in spec)[:40]


def league_config(cfg: SCCConfig, name: str) -> Any:
    """The league an SCC run plays in: its game, its opponents (fixed players), its role rules."""
    from arena.league.config import GameEntry, LeagueConfig, PlayerEntry

    specs = list(dict.fromkeys(cfg.opponents + cfg.eval.opponents))
    return LeagueConfig(games=[GameEntry(cfg.game, kwargs=dict(cfg.game_kwargs))], name=name, seed=cfg.seed,
                        players=[PlayerEntry(_slug(s), s, [cfg.game]) for s in specs], matches=0, roles=cfg.roles,
                        record="actions")


class SCCTrainer(Trainer):
    """The coordinator: league, imitation, iterations, role rules, evaluation, checkpoints.

    `league`: a league shared with other trainers (`arena.trainers.mixed`), else the trainer opens
    its own in its run folder."""

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
        #: The league this trainer's learners play in: its own in the run folder, or one shared with others.
        self.league_dir = Path(league.dir) if league is not None else self.dir
        #: Whether this trainer opened its league (and so closes it): a league handed in is the caller's to close.
        self.owns_league = league is None
        #: The owner of the players this trainer adds to the league (learners, teachers, snapshots): the
        #: league's config sync never retires them. Named by where the run folder sits in the league's
        #: folder ("scc" when they are one), which stays the same when the league's folder moves.
        self.owner = owner_name("scc", self.dir, self.league_dir)
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
        from arena.league.manager import League

        cfg = self.cfg
        lcfg = league_config(cfg, f"train-{self.dir.name}")
        if league is None:  # its own league, whose config's players are this trainer's opponents
            league = League(lcfg, self.league_dir, backend="inline", config_owner=f"{self.owner}/config")
        self.league = league
        self.fixed = [_slug(s) for s in dict.fromkeys(cfg.opponents)]
        with league.transaction():
            for e in cfg.learners:
                if league.player(e.name) is None:
                    league.add_player(e.name, "learner", self._weights_spec(e.name, 0), [cfg.game], role=e.role,
                                      state={"snapshots": 0, "steps_at_snapshot": 0, "external": True},
                                      owner=self.owner)
            if league.player(self.evaluator) is None:
                league.add_player(self.evaluator, "evaluation", self._greedy_spec(0), [cfg.game], owner=self.owner)
        self._claim_players({p.name for p in lcfg.players})

    def _claim_players(self, configured: set[str]) -> None:
        """Own the players this trainer added to a league written before players had owners: its
        learners, their snapshots and its imitation teachers (which that league's config sync retired
        on each restart: they are active again, as in a run that never stopped)."""
        cfg, league = self.cfg, self.league
        teachers = set() if cfg.il is None or not cfg.il.matches else {_slug(s) for s in cfg.il.teachers} - configured
        with league.transaction():
            for p in league.players():
                if p.owner is not None:
                    continue
                if (p.kind == "learner" and p.name in self.learners) or (p.kind == "historical"
                                                                         and p.parent in self.learners):
                    league.update_player(p.name, owner=self.owner)
                elif p.kind == "fixed" and p.name in teachers:
                    league.update_player(p.name, owner=self.owner, active=1)


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
        return Seat(spec=self.league.player(opp).spec)

    def _pairings(self) -> list[Pairing]:
        """Every learner's matches of the next iteration, by its role's rule (and `fixed_share`)."""
        cfg, out = self.cfg, []
        for e in cfg.learners:
            for i in range(cfg.games_per_iter):
                if self.fixed and self.rng.random() < cfg.fixed_share:
                    opp, why = self.fixed[int(self.rng.integers(len(self.fixed)))], "fixed"
                else:
                    p = self.league.next_pairing(e.name, self.rng)
                    opp = next((x for x in p.players if x != e.name), e.name)
                    why = p.why
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
        from arena.inference.policy_nets import save_policy
        from arena.trainers.policy.imitation import behaviour_cloning, demonstrations, split

        cfg, il = self.cfg, self.cfg.il
        items: list[tuple[Any, list[str]]] = []
        league = self.league
        if il.league:
            from arena.league.manager import League

            other = League.open(il.league)  # a passive client: it reads, and changes nothing
            try:
                for r in other.results(game=cfg.game):
                    if r.replay and (il.players is None or set(il.players) & set(r.players)):
                        items.append((other.read_replay(r.match_id), r.players))
            finally:
                other.close()
        if il.matches:
            teachers = [_slug(s) for s in il.teachers]
            for name, spec in zip(teachers, il.teachers):
                if league.player(name) is None:
                    league.add_player(name, "fixed", spec, [cfg.game], owner=self.owner)
            items += self._league_matches(il.teachers, dict(zip(il.teachers, teachers)), il.matches,
                                          self._teacher_seed_base(), "imitation", "imitation: teacher matches", phase)
            wanted = set(il.players) if il.players else set(teachers)
        else:
            wanted = set(il.players) if il.players else None
        if phase is not None:
            phase("imitation: re-simulating replays", 0, len(items))
        demos = demonstrations(items, wanted, self.spec, cfg.reward_scale, targets=il.targets, label=il.label,
                               workers=il.workers, progress=None if phase is None else
                               (lambda k: phase("imitation: re-simulating replays", k, len(items))))
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
                                   seed=cfg.seed, log=log)
        report["replays"] = len(items)
        for r in range(1, il.dagger.rounds + 1):
            train, val, report = self._dagger_round(r, net, train, val, report, phase)
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
        from arena.trainers.policy.imitation import behaviour_cloning, demonstrations, joined, split

        cfg, il = self.cfg, self.cfg.il
        dg = il.dagger
        name = f"{self.main}@dagger{r}"
        if self.league.player(name) is None:
            folder = save_policy(self.dir / "checkpoints" / f"dagger{r}", net, {"stage": "imitation",
                                                                                 "dagger_round": r})
            self.league.add_player(name, "fixed", f"policy:{folder}", [cfg.game], owner=self.owner)
        spec, opponent = self.league.player(name).spec, dg.opponent or il.teachers[1]
        rival = _slug(opponent)
        if self.league.player(rival) is None:
            self.league.add_player(rival, "fixed", opponent, [cfg.game], owner=self.owner)
        base = self._teacher_seed_base() + il.matches + (r - 1) * dg.matches
        items = self._league_matches([spec, opponent], {spec: name, opponent: rival}, dg.matches, base,
                                     f"imitation/dagger{r}", f"imitation: round {r} of {dg.rounds}, matches", phase)
        demos = demonstrations(items, {name}, self.spec, cfg.reward_scale, targets=il.targets, label=il.label,
                               workers=il.workers, progress=None if phase is None else
                               (lambda k: phase(f"imitation: round {r}, labelling", k, len(items))))
        t2, v2 = split(demos, il.val_fraction, cfg.seed + r)
        t2 = self._mirrored(t2)
        train, val = joined([train, t2]), joined([val, v2])
        done = report.get("epochs_total", report["epochs_run"])

        def log(epoch: int, line: dict) -> None:
            self.metrics.log(0, **{**line, "il/epoch": done + epoch, "il/dagger_round": r})
            if phase is not None:
                phase(f"imitation: round {r}, epoch {epoch}, val loss {line['il/val_loss']:.3f}, "
                      f"val acc {line['il/val_acc']:.3f}", epoch, dg.epochs)

        out = behaviour_cloning(net, train, val, epochs=dg.epochs, batch_size=il.batch_size, lr=il.lr,
                                weight_decay=il.weight_decay, patience=il.patience, value_coef=il.value_coef,
                                seed=cfg.seed + r, log=log)
        out.update(replays=report["replays"] + len(items), dagger_rounds=r, epochs_total=done + out["epochs_run"],
                   dagger_moves=report.get("dagger_moves", 0) + len(demos))
        return train, val, out

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
                        phase: Callable[[str, int, int], None] | None) -> list[tuple[Any, list[str]]]:
        """`n` seat-swapped matches of `specs` (seeds ``base + i``) played into the league, with their
        replays, by match index. Each is committed (rated, its replay kept) as soon as it and every match
        before it are played: a run stopped part-way keeps them, and the next start reads them back (by
        `note` and seed) and plays only the rest, each with the seed and seats it has among all `n`, so the
        league and the demonstrations are those of a run that never stopped."""
        from arena.match.batch import play_matches

        cfg, league = self.cfg, self.league
        kept: dict[int, tuple[Any, list[str]]] = {}
        for m in league.matches(source="external"):
            r = league.result_for(m.match_id) if m.note == note else None
            if r is not None and r.replay and 0 <= m.seed - base < n:
                kept[m.seed - base] = (league.read_replay(r.match_id), r.players)
        todo = [i for i in range(n) if i not in kept]
        waiting: dict[int, MatchResult] = {}
        order = iter(todo)
        nxt = [next(order, None)]

        def played(res: MatchResult) -> None:
            waiting[res.seed - base] = res
            ready = []
            while nxt[0] is not None and nxt[0] in waiting:
                ready.append(waiting.pop(nxt[0]))
                nxt[0] = next(order, None)
            if ready:
                self._commit_matches(ready, names, note, base, kept)
            if phase is not None and (len(kept) % 20 == 0 or len(kept) == n):
                phase(label, len(kept), n)

        if phase is not None:
            phase(label, len(kept), n)
        play_matches(cfg.game, specs, n, seed=base, workers=cfg.il.workers, record="actions",
                     game_kwargs=cfg.game_kwargs, on_result=played, only=todo)
        return [kept[i] for i in sorted(kept)]

    def _commit_matches(self, results: list[MatchResult], names: dict[str, str], note: str, base: int,
                        kept: dict[int, tuple[Any, list[str]]]) -> None:
        """Imitation matches into the league, in one transaction, as rated matches with their replays
        (the league's replays are the imitation data); each goes into `kept` by its index."""
        from arena.league.protocols import Pairing as LeaguePairing

        commits, seated = [], []
        with self.league.transaction():
            for res in results:
                seats = [names.get(a) or _slug(a) for a in res.agents]
                row = self.league.begin(LeaguePairing(self.cfg.game, seats, list(res.agents), note),
                                        status="running", source="external", seed=res.seed or 0, note=note)
                commits.append((row.match_id, self.league.attach_replay(row.match_id, res)))
                seated.append(seats)
            self.league.commit_many(commits)
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

    def _roles(self, it: int) -> tuple[list[dict], list[dict]]:
        """Snapshots and resets the role rules call for after iteration `it`'s updates (applied to the
        learners now; recorded in the league after the checkpoint)."""
        from arena.inference.policy_nets import save_policy
        from arena.league.roles import Member, after_update

        cfg = self.cfg
        snaps, events = [], []
        members = self.league.members()
        wr = self.league.win_rates(cfg.game)
        for e in cfg.learners:
            prow = self.league.player(e.name)
            state = prow.state or {}
            me = Member(e.name, "learner", e.role, None)
            steps_since = prow.steps - int(state.get("steps_at_snapshot", 0))
            due = bool(cfg.snapshot_every and it % cfg.snapshot_every == 0)
            step = after_update(me, steps_since, members, wr, cfg.roles, self.rng, due=due)
            if not step.snapshot:
                continue

            n = int(state.get("snapshots", 0)) + len([s for s in snaps if s["parent"] == e.name]) + 1
            folder = self.dir / "players" / "frozen" / f"{e.name}-it{it:05d}"
            save_policy(folder, self.learners[e.name].net, {"learner": e.name, "iteration": it, "role": e.role})
            snaps.append({"parent": e.name, "spec": f"policy:{folder}", "name": f"{e.name}@{n}", "iteration": it})
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

    def _apply(self, bundle: dict) -> None:
        """Write an iteration's effects into the league in ONE transaction (see the module docstring)."""
        from arena.league.protocols import Pairing as LeaguePairing

        league, it = self.league, bundle["iteration"]
        if int(league.meta("scc_applied", -1)) >= it:
            return
        with league.transaction():
            commits = []
            for names, specs, why, note, res in bundle["matches"]:
                row = self.league.begin(LeaguePairing(self.cfg.game, names, specs, why), status="running",
                                        source="external", seed=res.seed or 0, note=note)
                commits.append((row.match_id, self.league.attach_replay(row.match_id, res)))
            self.league.commit_many(commits)
            for name in self.learners:
                league.update_player(name, spec=self._weights_spec(name, it), version=it)
            if bundle["evaluated"]:
                league.update_player(self.evaluator, spec=self._greedy_spec(it), version=it)
            for s in bundle["snapshots"]:
                league.add_snapshot(s["parent"], s["spec"], name=s["name"])
            for ev in bundle["events"]:
                league.add_event(ev["kind"], ev["player"], **{k: v for k, v in ev.items() if k not in ("kind", "player")})
            league.set_meta("scc_applied", it)

    def _match_records(self, pairings: list[Pairing], results: list[MatchResult], note: str,
                       specs_of: Callable[[Pairing], list[str]]) -> list:
        return [(p.names, specs_of(p), p.why, note, r) for p, r in zip(pairings, results)]

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
        game = getattr(core, "settings", {}).get("game")
        return nash_conv_of(game, net_policy_fn(self.learners[name].net), core.settings.get("params") or None)

    # -- checkpoints ---------------------------------------------------------------------------------
    def save(self, folder: Path, it: int, bundle: dict | None = None) -> None:
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
            "bundle": bundle, "inflight": self._inflight,
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
        bundle = state.get("bundle")
        if bundle is not None:
            self._apply(bundle)  # killed between the checkpoint and the league's transaction: applied now
            if state.get("metrics_size") is not None and "metrics" in bundle:
                # Killed before (or while) its metrics line was written: written again, once.
                self.metrics.rewind(state["metrics_size"])
                self._report(bundle)

    def _report(self, bundle: dict) -> None:
        """An iteration's metrics line and `best`, after its league transaction (and again on resume,
        over what a killed run wrote after its checkpoint)."""
        if bundle["evaluated"]:
            key = f"eval/win_rate/{_slug(self.cfg.eval.opponents[0])}"
            self.track_best(bundle["iteration"], key, bundle["metrics"][key])
        self.metrics.log(bundle["iteration"], **bundle["metrics"])

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
        snaps = [] if cfg.il is None else [{"parent": self.main, "spec": f"policy:{self.dir / 'checkpoints' / 'il'}",
                                             "name": IL_NAME, "iteration": 0}]
        bundle = {"iteration": 0, "matches": records, "snapshots": snaps, "events": [], "metrics": out,
                  "evaluated": True}
        self.checkpoint(0, bundle=bundle)
        self._apply(bundle)
        self._report(bundle)

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
        bundle = {"iteration": it, "matches": records, "snapshots": snaps, "events": events, "metrics": line,
                  "evaluated": evaluated}
        self.checkpoint(it, bundle=bundle)
        self._apply(bundle)
        line["time/iteration_s"] = time.perf_counter() - t0
        self._report(bundle)
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
        """Stop the actors and learners, and close the league if this trainer opened it. A second call does nothing."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        try:
            self.actors.close()
            for lrn in self.learners.values():
                lrn.close()
        finally:
            if self.owns_league:
                self.league.close()
            super().close()


def validate(cfg: SCCConfig) -> None:
    """Check the game, the agent specs and the policy sizes before anything is written."""
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.errors import ArenaError, ConfigError, IncompatibleAgent
    from arena.inference.policy_nets import build_policy, spec_from_core
    from arena.replays.format import LEAGUE_DB
    from arena.trainers.policy.make import check_parallel

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
    for key, specs in keys:
        for s in specs:
            try:
                make_agent(s, core, 0)
            except ArenaError as e:
                raise ConfigError(f"{key}: {e}") from None
    if cfg.magnet.kind == "uniform" and (spec.action_kind != "discrete" or spec.action is not None):
        kind = "structured" if spec.action is not None else spec.action_kind
        raise ConfigError(f"magnet.kind: uniform needs one discrete action per move; {cfg.game} has {kind} moves "
                          "(use imitation or copy)")
    if cfg.eval.tactics and (core.source != "openspiel" or not getattr(core, "perfect_information", False)
                             or len(core.players) != 2):
        raise ConfigError(f"eval.tactics: the tactics probe is for two-player perfect-information OpenSpiel games; "
                          f"{cfg.game} is not (remove eval.tactics)")
    if cfg.eval.nash_conv and (core.source != "openspiel" or getattr(core, "perfect_information", True)):
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
        if not cfg.il.matches and not cfg.il.league:
            raise ConfigError("il: give il.matches > 0 (teacher matches) or il.league (a league folder to imitate)")
