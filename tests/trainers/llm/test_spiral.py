"""The SPIRAL trainer end to end on the tiny model: short runs, real parts."""

import json
import math
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")

from arena.league.manager import open_league  # noqa: E402
from arena.match import InvalidMovePolicy  # noqa: E402
from arena.trainers.llm.config import SpiralLearnerSettings  # noqa: E402
from arena.trainers.registry import load_train_config  # noqa: E402
from arena.trainers.llm.spiral import SpiralTrainer  # noqa: E402

CONFIGS = Path(__file__).parents[3] / "configs" / "train"


def small(tmp_path, **changes):
    """The tic-tac-toe config, shrunk; `changes` of the learner's settings go to its ``learner:`` section."""
    data = yaml.safe_load((CONFIGS / "spiral_tictactoe_tiny.yaml").read_text())
    data.update(iterations=2, games_per_iter=16, concurrency=16)
    data["learner"]["minibatch"] = 64
    data["eval"] = {"every": 2, "games": 16, "opponents": ["random"], "concurrency": 16}
    data["il"] = {"agents": ["random", "random"], "matches": 60, "epochs": 1, "lr": 2e-3, "batch_size": 64}
    data["learner"].update({k: changes.pop(k) for k in list(changes) if k in SpiralLearnerSettings.FLAT_KEYS})
    data.update(changes)
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(data))
    return load_train_config(p)


def run(cfg, d, iterations=None):
    t = SpiralTrainer(cfg, d)
    try:
        return t, t.run(iterations)
    finally:
        t.close()


def read_metrics(d):
    return [json.loads(x) for x in (Path(d) / "metrics.jsonl").read_text().splitlines()]


def test_short_run_checkpoints_snapshots_and_resumes(tmp_path):
    d = tmp_path / "run"
    cfg = small(tmp_path)
    t, final = run(cfg, d)
    assert t.iteration == 2
    rows = read_metrics(d)
    keys = set().union(*rows)
    for k in ("il/loss", "train/return", "train/invalid_rate", "train/mask_frac", "train/tv", "train/entropy",
              "train/mismatch", "train/loss", "eval/win_rate/random", "eval/invalid_rate"):
        assert k in keys, k
    assert (d / "latest").resolve().name == "iter-00002"
    assert (d / "curves.png").stat().st_size > 1000
    assert list((d / "tensorboard").glob("events.out.tfevents.*"))
    # snapshots are league players, rated from their evaluation games
    store = open_league(d)
    snaps = [p.name for p in store.players() if p.kind == "historical"]
    assert snaps == ["learner@0", "learner@2"]
    elo = store.elo("openspiel/tic_tac_toe-v0")
    assert "learner@2" in elo and "random" in elo
    evals = [m for m in store.matches() if m.note == "evaluation"]
    assert len(evals) == 2 * 16 and all(store.result_for(m.match_id).replay for m in evals)
    # resume: the same folder continues at iteration 3 with the saved optimizer and RAE baselines
    state = torch.load(d / "latest" / "trainer_state.pt", weights_only=False)
    t2 = SpiralTrainer(small(tmp_path, iterations=3), d)
    try:
        assert t2.iteration == 2 and t2.il_done
        assert t2.rae.state_dict() == state["rae"]
        assert state["optimizer"]["format"] == "arena-named-optimizer/1"  # by name: any parallel setting loads it
        names = t2.learner.optimizer_names()
        live = t2.learner.opt.state_dict()["state"]
        assert {names[i] for i in live} == state["optimizer"]["state"].keys()
        for i, s in live.items():
            saved = state["optimizer"]["state"][names[i]]
            assert torch.equal(s["exp_avg"], saved["exp_avg"]) and float(s["step"]) == float(saved["step"])
        t2.run()
        assert t2.iteration == 3
    finally:
        t2.close()
    steps = [r["step"] for r in read_metrics(d) if "train/return" in r]
    assert steps == [1, 2, 3]  # nothing repeated, nothing skipped
    # `best` links the checkpoint with the highest evaluation win rate (the earliest of equals)
    wr = {r["step"]: r["eval/win_rate/random"] for r in read_metrics(d) if "eval/win_rate/random" in r}
    top = min(s for s in wr if wr[s] == max(wr.values()))
    best = json.loads((d / "best.json").read_text())
    assert (best["iteration"], best["value"], best["metric"]) == (top, wr[top], "eval/win_rate/random")
    assert (d / "best").resolve() == (d / "checkpoints" / f"iter-{top:05d}").resolve()
    assert (d / "best" / "trainer_state.pt").exists()


def _initial_weights(d):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(d / "model-init").state_dict()


def _changed(t, before) -> float:
    """The largest absolute change of any parameter since `before`."""
    return max(float((v.float() - before[k].float()).abs().max()) for k, v in t.model.state_dict().items())


@pytest.mark.parametrize("loss", ["ppo_clip", "dppo_topk_kl", "drpo", "predictive_mask"])
def test_every_loss_trains(tmp_path, loss):
    cfg = small(tmp_path, iterations=1, loss=loss, il=None, opponent_mode="selfplay")
    cfg.eval.every = 100
    t, final = run(cfg, tmp_path / loss)
    assert final["train/samples"] > 0 and math.isfinite(final["train/loss"])
    assert final["train/selfplay_share"] == 1.0
    assert _changed(t, _initial_weights(tmp_path / loss)) > 1e-6  # the step moved the policy


def test_a_step_on_a_fixed_batch_raises_the_likelihood_of_advantaged_responses(tmp_path):
    """Positive advantages on a fixed batch: each learner step lowers the loss's surrogate, i.e. the
    negative log-likelihood of those responses falls step after step."""
    from arena.trainers.llm.learner import Batch
    from arena.trainers.llm.logprobs import sequence_logprobs

    cfg = small(tmp_path, iterations=0, il=None, opponent_mode="selfplay", epochs=1, lr=1e-3)
    t = SpiralTrainer(cfg, tmp_path / "fixed")
    try:
        eps = t._play(t._pairings(16), greedy=False, policy=InvalidMovePolicy(allowance=0), seed=5, concurrency=16)
        samples = t._samples(eps)
        for s in samples:
            s.adv = 1.0
        assert len(samples) > 10

        def nll() -> float:
            with torch.no_grad():
                out = sequence_logprobs(t.model, [s.prompt_ids for s in samples], [s.response_ids for s in samples],
                                        pad_id=t.tok.pad_token_id or 0)
            return float(-(out["logp"] * out["mask"]).sum() / out["mask"].sum())

        curve = [nll()]
        for i in range(4):
            t.learner.step(Batch(samples, shuffle_seed=i))
            curve.append(nll())
        assert all(b < a for a, b in zip(curve, curve[1:])), curve
        assert curve[-1] < curve[0] - 0.01, curve
    finally:
        t.close()


def test_a_resumed_run_plays_the_same_next_batch_with_the_same_losses(tmp_path):
    """Stop after iteration 2 and resume: iteration 3 equals iteration 3 of a run that never stopped."""
    def cfg(n):
        c = small(tmp_path, iterations=n, il=None, opponent_mode="league", fixed_share=0.5, snapshot_every=1)
        c.eval.every = 100
        return c

    straight, _ = run(cfg(3), tmp_path / "straight")
    run(cfg(3), tmp_path / "resumed", iterations=2)  # stopped after iteration 2 of the same 3-iteration run
    run(cfg(3), tmp_path / "resumed")

    def third(d):
        return next(r for r in read_metrics(d) if r["step"] == 3 and "train/return" in r)

    a, b = third(tmp_path / "straight"), third(tmp_path / "resumed")
    for k in ("train/return", "train/samples", "train/selfplay_share", "train/win_rate/random"):
        assert a.get(k) == b.get(k), (k, a.get(k), b.get(k))
    for k in ("train/loss", "train/tv", "train/entropy", "train/grad_norm"):
        assert b[k] == pytest.approx(a[k], rel=1e-5, abs=1e-7), k
    sa = [m.players for m in open_league(tmp_path / "straight").matches() if m.note == "training"]
    sb = [m.players for m in open_league(tmp_path / "resumed").matches() if m.note == "training"]
    assert len(sa) == 3 * 16 and sa == sb  # the same opponents, in the same order


def test_killed_anywhere_no_game_is_lost_or_counted_twice(tmp_path, monkeypatch):
    """The training games between checkpoints enter the league with the next checkpoint: killed before it
    (iteration 2's games played, not checkpointed), or between it and the league's transaction, the
    resumed run's league holds exactly the games of a run that never stopped."""
    from arena.league.session import LeagueSession

    def cfg():
        c = small(tmp_path, iterations=3, il=None, snapshot_every=2)
        c.eval.every = 100
        return c

    run(cfg(), tmp_path / "straight")
    real_apply, real_update = LeagueSession.apply, SpiralTrainer.update

    def dies_at_update(self, samples):  # iteration 2, after its games were played and before any checkpoint
        if self.iteration == 1:
            raise KeyboardInterrupt
        return real_update(self, samples)

    def dies_at_apply(self, it, bundle):  # iteration 2's checkpoint written, its transaction not
        if it == 2:
            raise KeyboardInterrupt
        return real_apply(self, it, bundle)

    for name, target, hook in (("update", SpiralTrainer, dies_at_update), ("apply", LeagueSession, dies_at_apply)):
        monkeypatch.setattr(target, name, hook)
        with pytest.raises(KeyboardInterrupt):
            run(cfg(), tmp_path / "cut")
        monkeypatch.undo()
    run(cfg(), tmp_path / "cut")

    def games(d):
        return sorted((m.note, m.seed, tuple(m.players)) for m in open_league(d).matches())

    a, b = games(tmp_path / "straight"), games(tmp_path / "cut")
    assert len([g for g in a if g[0] == "training"]) == 3 * 16 and a == b
    assert len(open_league(tmp_path / "cut").results()) == len(a)


@pytest.mark.parametrize("rollout, train", [("bf16", "fp32"), ("fp16", "fp16"), ("fp32", "bf16")])
def test_low_precision_rollout_and_training(tmp_path, rollout, train):
    cfg = small(tmp_path, iterations=1, il=None, train_precision=train, rollout_precision=rollout)
    cfg.eval.every = 100
    t, final = run(cfg, tmp_path / f"{rollout}-{train}")
    assert final["train/samples"] > 0 and math.isfinite(final["train/loss"])
    assert _changed(t, _initial_weights(tmp_path / f"{rollout}-{train}")) > 1e-6
    if rollout != train:
        # the FP16 paper's diagnostic: rollout and trainer log-probs of the same tokens differ
        assert final["train/mismatch"] > 1e-4
    if train == "fp16":
        assert t.learner.scaler.is_enabled() and t.learner.scaler.get_scale() > 0


def test_bpco_critic_with_privileged_input_on_kuhn(tmp_path):
    cfg = small(tmp_path, game="openspiel/kuhn_poker-v0", iterations=2, il=None, critic="bpco",
                opponents=["random"])
    cfg.eval.every = 100
    t, final = run(cfg, tmp_path / "kuhn")
    assert "train/value_loss" in final and final["train/value_loss"] >= 0
    head = t.learner.critic.proj.weight
    assert float(head.abs().sum()) > 0  # the value head learned something


def test_grpo_and_no_baseline_variants(tmp_path):
    for adv in ("grpo", "dr_grpo", "none"):
        cfg = small(tmp_path, iterations=1, il=None, advantage=adv)
        cfg.eval.every = 100
        t, final = run(cfg, tmp_path / adv)
        assert final["train/samples"] > 0 and math.isfinite(final["train/loss"])
        assert _changed(t, _initial_weights(tmp_path / adv)) > 1e-6


def test_rae_keyed_by_opponent_turn_discount_and_entropy_bonus(tmp_path):
    from arena.match import InvalidMovePolicy

    cfg = small(tmp_path, iterations=1, il=None, rae_key="role_opponent", entropy_coef=0.05, fixed_share=0.5,
                turn_discount=1.0)
    cfg.eval.every = 100
    t = SpiralTrainer(cfg, tmp_path / "opp")
    try:
        final = t.run()
        keys = set(t.rae.state_dict()["baselines"])
        game = "openspiel/tic_tac_toe-v0"
        # one baseline per (seat, opponent): the fixed opponent and self-play never share one
        assert {f"{game}|0@random", f"{game}|1@random"} <= keys
        assert all("@" in k.split("|", 1)[1] for k in keys)
        assert final["train/samples"] > 0 and final["train/entropy"] > 0
        assert 0.0 <= final["train/win_rate/random"] <= 1.0  # training win rate per opponent
        # turn_discount: a turn k turns before the seat's last gets gamma^k times the trajectory's advantage
        eps = t._play(t._pairings(8), greedy=False, policy=InvalidMovePolicy(allowance=0), seed=1, concurrency=8)
        for e in eps:  # an untrained model's games are short: give every seat three turns
            e.turns = {s: (ts * 3)[:3] for s, ts in e.turns.items() if ts}
        state = t.rae.state_dict()
        plain = t._samples(eps)
        t.rae.load_state_dict(state)
        t.cfg.learner.turn_discount = 0.5
        discounted = t._samples(eps)
    finally:
        t.close()
    assert len(plain) == len(discounted) > 0
    ratios = [round(d.adv / p.adv, 6) for p, d in zip(plain, discounted) if p.adv]
    assert set(ratios) <= {0.5 ** k for k in range(5)} and 0.25 in ratios
    seats = sum(1 for e in eps for s in e.learner_seats if e.turns.get(s))
    assert ratios.count(1.0) == seats  # each seat's last turn keeps the full advantage


def test_bad_train_config_is_a_clear_error(tmp_path):
    from arena.errors import ConfigError

    with pytest.raises(ConfigError, match="loss 'dppo' is not one of"):
        small(tmp_path, loss="dppo")
    with pytest.raises(ConfigError, match="dppo_exact_kl reads each move's whole distribution"):
        small(tmp_path, loss="dppo_exact_kl")
    with pytest.raises(ConfigError, match="unknown key"):
        small(tmp_path, learning_rate=1)
    with pytest.raises(ConfigError, match="turn_discount"):
        small(tmp_path, turn_discount=0)
    with pytest.raises(ConfigError, match="entropy_coef"):
        small(tmp_path, entropy_coef=-0.1)
    with pytest.raises(ConfigError, match="rae_key"):
        small(tmp_path, rae_key="opponent")
    with pytest.raises(ConfigError, match="lr_end"):
        small(tmp_path, lr_end=1.0)
    with pytest.raises(ConfigError, match="lr_schedule"):
        small(tmp_path, lr_schedule="step")


def test_confirmation_round_moves_best_to_the_winner_of_fresh_games(tmp_path):
    d = tmp_path / "run"
    cfg = small(tmp_path, iterations=3)
    cfg.eval.every, cfg.eval.confirm_top, cfg.eval.confirm_games = 1, 2, 24
    t = SpiralTrainer(cfg, d)
    played, eval_games = {}, t._eval_games

    def spy(spec, games, seed, record=False):  # which weights play each confirmation game set
        played[seed] = [p.detach().clone() for p in t.model.parameters()]
        return eval_games(spec, games, seed, record)

    t._eval_games = spy
    try:
        t.run()
        final = {k: v.clone() for k, v in t.model.state_dict().items()}
        wr = {r["step"]: r["eval/win_rate/random"] for r in read_metrics(d) if "eval/win_rate/random" in r}
        assert sorted(wr) == [0, 1, 2, 3]
        best = json.loads((d / "best.json").read_text())
        cands = best["confirm"]["candidates"]
        # the candidates are the two best in-run evaluations (the earlier of equals first)
        assert [c["iteration"] for c in cands] == sorted(wr, key=lambda s: (-wr[s], s))[:2]
        assert [c["in_run"] for c in cands] == [wr[c["iteration"]] for c in cands]
        win = max(cands, key=lambda c: (c["confirm"], c["in_run"], -c["iteration"]))
        assert (best["iteration"], best["value"], best["confirm"]["win_rate"]) == (
            win["iteration"], wr[win["iteration"]], win["confirm"])
        assert best["confirm"]["games"] == 24
        assert (d / "best").resolve() == (d / "checkpoints" / f"iter-{win['iteration']:05d}").resolve()
        rows = [r for r in read_metrics(d) if "confirm/best_iteration" in r]
        assert [(r["step"], r["confirm/best_iteration"], r["confirm/win_rate/random"]) for r in rows] == [
            (3, win["iteration"], win["confirm"])]
        # the live model is the last iteration's again, not the last candidate's
        assert all(torch.equal(final[k], v) for k, v in t.model.state_dict().items())
        # each candidate's figure is its own checkpoint's (at most one of them is the live model):
        # load it and play the same seeded games
        assert len({c["iteration"] for c in cands} - {3}) >= 1
        for c in cands:
            saved = type(t.model).from_pretrained(d / c["checkpoint"])
            assert all(torch.equal(a, b) for a, b in zip(played[30_000_001 + c["iteration"]], saved.parameters()))
            t.model.load_state_dict(saved.state_dict())
            eps = eval_games("random", 24, 30_000_001 + c["iteration"])
            assert sum(e.result.winner in e.learner_seats for e in eps) / 24 == c["confirm"], c
        t.model.load_state_dict(final)
        # idempotent: the round on record is not played again (a resumed, finished run)
        t._eval_games = None  # calling it would raise
        assert t.confirm_best() == best
    finally:
        t.close()
    assert small(tmp_path).eval.confirm_top == 0  # off unless asked for
    data = yaml.safe_load((tmp_path / "cfg.yaml").read_text())
    data["eval"]["confirm_top"] = -1
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(data))
    from arena.errors import ConfigError

    with pytest.raises(ConfigError, match="confirm_top"):
        load_train_config(tmp_path / "bad.yaml")


def test_lr_schedules(tmp_path):

    lin = small(tmp_path, iterations=5, lr=1e-3, lr_end=1e-4, lr_schedule="linear")
    assert [round(lin.lr_at(i), 9) for i in range(1, 6)] == [1e-3, 7.75e-4, 5.5e-4, 3.25e-4, 1e-4]
    cos = small(tmp_path, iterations=3, lr=1e-3, lr_end=0.0, lr_schedule="cosine")
    assert [round(cos.lr_at(i), 9) for i in (1, 2, 3)] == [1e-3, 5e-4, 0.0]
    assert small(tmp_path, iterations=3, lr=1e-3, lr_schedule="constant").lr_at(3) == 1e-3
    # the trainer sets it on the optimizer each iteration and logs it
    cfg = small(tmp_path, iterations=2, il=None, lr=2e-4, lr_end=1e-4, lr_schedule="linear")
    cfg.eval.every = 100
    t, _ = run(cfg, tmp_path / "lr")
    assert [r["train/lr"] for r in read_metrics(tmp_path / "lr") if "train/lr" in r] == [2e-4, 1e-4]
    assert t.learner.opt.param_groups[0]["lr"] == 1e-4


def test_resume_from_the_iteration_zero_checkpoint(tmp_path):
    d = tmp_path / "run"
    cfg = small(tmp_path, iterations=0, il=None)
    run(cfg, d)
    assert (d / "latest").resolve().name == "iter-00000"
    # a checkpoint written before the learner's settings moved under `learner:` (its state's copy of the
    # config flat) resumes too: the state's config is a record, never read back
    path = d / "latest" / "trainer_state.pt"
    state = torch.load(path, weights_only=False)
    state["config"].update(state["config"].pop("learner"))
    torch.save(state, path)
    t, _ = run(small(tmp_path, iterations=1, il=None), d)  # no second learner@0, no crash
    assert t.iteration == 1
    assert [p.name for p in open_league(d).players() if p.kind == "historical"] == ["learner@0", "learner@1"]


def test_imitation_on_a_text_game_with_the_spiral_template(tmp_path):
    """The warm start on TextArena Kuhn Poker: free-text moves rendered as \\boxed{[call]} answers."""
    from arena.match.batch import play_matches
    from arena.trainers.llm.sft import examples_from_replays

    cfg = small(tmp_path, game="arena/KuhnPoker-v1", template="spiral", iterations=0, max_new_tokens=16,
                il={"agents": ["random", "random"], "matches": 4, "epochs": 1, "lr": 1e-3, "batch_size": 8})
    cfg.eval.games = 2
    cfg.eval.concurrency = 2
    t, _ = run(cfg, tmp_path / "kuhn-il")
    assert t.il_done
    losses = [r["il/loss"] for r in read_metrics(tmp_path / "kuhn-il") if "il/loss" in r]
    assert len(losses) == 1 and losses[0] > 0
    replays = [r.replay for r in play_matches("arena/KuhnPoker-v1", ["random", "random"], 2, seed=3, record=True)]
    ex = examples_from_replays(replays, t.template, "text", None)
    assert ex and all(e.answer.startswith("\\boxed{[") and e.answer.endswith("]}") for e in ex)
    assert all("You are playing a two-player zero-sum game" in e.prompt for e in ex)
