"""Learning checks of the SCC learner on Skirmish 3m (`configs/train/scc_skirmish.yaml`): the entity
policy with pointer heads, imitation of the focus_fire bot, then league RL with a main agent and
exploiters.

* about a minute (`make test`): a short run of the shipped config; the greedy policy beats
  `skirmish:idle` and `skirmish:attack_nearest` by a margin on seat-swapped games it never trained
  on, its replays verify, and it plays as ``policy:``;
* a recipe (`make recipes`): the shipped config's whole run: greedy win rate >= 0.75 against
  `attack_nearest` on 200 seat-swapped games, its greedy player `main.greedy` rated above that bot in
  the run's league and the main not below its imitation snapshot; the goals, >= 0.8 against
  `attack_nearest` and >= 0.5 against `focus_fire`, are expected failures carrying the measured
  figures until a run shows them;
* recipes of `scc_skirmish_il_selfplay.yaml` (imitation with label smoothing, then self-play with no
  KL): the greedy policy gains >= 0.15 over its own imitation checkpoint against `focus_fire` and
  reaches the goal there (>= 0.65), >= 0.8 against `attack_nearest`, with move orders; the goal
  >= 0.9 against `attack_nearest` as an expected failure with the figures.
"""

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from arena.league.manager import open_league  # noqa: E402

from .test_learning import _train as _train_config, greedy_games  # noqa: E402

CONFIG = Path(__file__).parents[3] / "configs" / "train" / "scc_skirmish.yaml"
SELFPLAY = Path(__file__).parents[3] / "configs" / "train" / "scc_skirmish_selfplay.yaml"
IL_SELFPLAY = Path(__file__).parents[3] / "configs" / "train" / "scc_skirmish_il_selfplay.yaml"
GAME = "arena/Skirmish-3m-v0"

#: The short run of `make test`: fewer teacher matches and epochs, four RL iterations of one learner.
SHORT = {"il": {"teachers": ["skirmish:focus_fire", "skirmish:attack_nearest"], "players": ["skirmish:focus_fire"],
                "matches": 60, "workers": 1, "epochs": 15, "batch_size": 64, "patience": 4},
         "learners": [{"name": "main", "role": "main"}], "threads": 1, "iterations": 4, "games_per_iter": 32,
         "eval": {"every": 4, "games": 20, "opponents": ["skirmish:attack_nearest"]}}


def _train(folder: Path, **changes):
    return _train_config(CONFIG, folder, **changes)


def scores(folder, opponent: str, games: int, seed: int = 500) -> tuple[float, list]:
    """(win rate, results) of the greedy policy against `opponent`, seats swapped, on seeds the run
    never played."""
    return greedy_games(folder, GAME, opponent, games, seed)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("skirmish") / "run"
    return _train(folder, **SHORT), folder


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("skirmish_full") / "run"
    return _train(folder), folder


def test_trajectories_carry_the_shaped_reward_of_each_move_and_to_batch_weighs_it(monkeypatch):
    # damage dealt minus damage taken after each move, as a fraction of the enemy's total: over a
    # 3m match (equal totals) they add up to the final health-fraction difference
    from arena.envs.registry import make_core
    from arena.inference.policy_nets import build_policy, spec_from_core
    from arena.trainers.policy import actors

    cores = []
    monkeypatch.setattr(actors, "make_core", lambda *a, **k: cores.append(make_core(*a, **k)) or cores[-1])
    torch.manual_seed(0)
    net = build_policy(spec_from_core(make_core(GAME)), "auto", hidden=[16], d_model=16, layers=1, heads=2,
                       channels=4)
    pairs = [actors.Pairing([actors.Seat("main", trained=True), actors.Seat(spec="skirmish:attack_nearest")],
                            ["main", "bot"]) for _ in range(3)]
    pairs.append(actors.Pairing([actors.Seat(spec="skirmish:focus_fire"), actors.Seat("main", trained=True)],
                                ["bot", "main"]))
    results, trajs = actors.play_pairings(GAME, pairs, {"main": net}, seed=3)
    assert len(trajs) == 4
    for t in trajs:
        frac = cores[t.match].batch.fractions()[0]
        assert t.shaped.shape == t.logp.shape and np.isfinite(t.shaped).all()
        assert t.shaped.sum() == pytest.approx(frac[t.seat] - frac[1 - t.seat], abs=1e-5)
        assert np.abs(t.shaped).sum() > 0  # the bots fight back
    plain, shaped = actors.to_batch(trajs, gamma=1.0), actors.to_batch(trajs, gamma=1.0, shaping=0.5)
    for b, t in enumerate(trajs):
        n = len(t.logp)
        assert plain.rewards[:n, b].tolist() == [0.0] * (n - 1) + [t.ret]
        assert shaped.rewards[:n, b].numpy() == pytest.approx(0.5 * t.shaped + np.eye(n)[n - 1] * t.ret, abs=1e-6)
        assert (shaped.rewards[n:, b] == 0).all()


@pytest.mark.slow
def test_the_entity_policy_beats_the_weak_bots_within_a_minute(short_run):
    from arena.match.verify import verify_replay

    _, folder = short_run
    idle, _ = scores(folder / "latest", "skirmish:idle", 40)
    nearest, results = scores(folder / "latest", "skirmish:attack_nearest", 100)
    # measured (seeds 0, 1, 2): 0.975, 0.95, 0.975 against idle; 0.79, 0.77, 0.79 against attack_nearest
    # (the imitation checkpoint alone: 0.75, 0.77, 0.79); focus_fire, the bot imitated, wins 0.78 of them
    # (docs/skirmish.md)
    assert idle >= 0.9 and nearest >= 0.6, (idle, nearest)
    assert all(verify_replay(r.replay).ok for r in results[:6])


@pytest.mark.recipe
def test_league_rl_beats_attack_nearest_and_holds_its_imitation_s_rating(full_run):
    from arena.league.leaderboard import leaderboard

    t, folder = full_run
    nearest, _ = scores(folder / "latest", "skirmish:attack_nearest", 200)
    rows = {r.player: r for r in leaderboard(open_league(t.league_dir), GAME, resamples=200).rows}
    print(f"skirmish 3m: greedy win rate vs attack_nearest {nearest:.3f} (200 seat-swapped games); fitted: "
          + ", ".join(f"{n} {rows[n].rating:.0f} [{rows[n].lo:.0f}, {rows[n].hi:.0f}]"
                      for n in ("main.greedy", "main", "main@il", "skirmish_attack_nearest")))
    # measured (seed 0): 0.795 [0.73, 0.85] (the imitation checkpoint: 0.785); fitted main.greedy 1105,
    # main 1067 [1050, 1081], main@il 1059 [1032, 1082], attack_nearest 803 (docs/skirmish.md)
    assert nearest >= 0.75, nearest
    assert rows["main.greedy"].rating > rows["skirmish_attack_nearest"].hi
    assert rows["main"].rating >= rows["main@il"].lo  # RL keeps what imitation learnt (it adds nothing yet)


@pytest.mark.recipe
@pytest.mark.xfail(reason="goal not shown: 0.795 [0.73, 0.85] of 200 games against attack_nearest after the shipped "
                          "run (seed 0; 0.815 [0.76, 0.86] before the evaluation games had their own player), the "
                          "goal inside the interval (docs/skirmish.md)", strict=False)
def test_league_rl_reaches_the_attack_nearest_goal(full_run):
    _, folder = full_run
    nearest, _ = scores(folder / "latest", "skirmish:attack_nearest", 200)
    assert nearest >= 0.8, nearest


@pytest.mark.recipe
@pytest.mark.xfail(reason="goal not met yet: 0.425 [0.36, 0.49] of 200 games against focus_fire after the "
                          "shipped run (seed 0), the same as the imitation checkpoint's (docs/skirmish.md)",
                   strict=False)
def test_league_rl_holds_its_own_against_focus_fire(full_run):
    _, folder = full_run
    focus, _ = scores(folder / "latest", "skirmish:focus_fire", 200)
    assert focus >= 0.5, focus


@pytest.fixture(scope="module")
def selfplay_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("skirmish_selfplay") / "run"
    return _train_config(SELFPLAY, folder), folder


@pytest.mark.recipe
def test_self_play_from_scratch_beats_the_teacher_with_orders_no_bot_gives(selfplay_run):
    import sys

    sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))
    from skirmish_strength import strength

    _, folder = selfplay_run
    nearest = strength(str(folder / "latest"), GAME, "skirmish:attack_nearest", 200, 500)[0]
    focus, _, orders, _, _ = strength(str(folder / "latest"), GAME, "skirmish:focus_fire", 200, 500)
    move = orders[1] / max(1, sum(orders.values()))
    print(f"skirmish 3m from scratch: greedy vs attack_nearest {nearest:.3f}, vs focus_fire {focus:.3f}, "
          f"move orders {move:.3f} (200 seat-swapped games each)")
    # measured (docs/skirmish.md "From scratch"): seed 0 (the config's) 0.835 / 0.635 / 0.170, seed 1 0.865 /
    # 0.625 / 0.097; seed 2 finds no move order in 120 iterations (0.805 / 0.460 / 0.000)
    assert nearest >= 0.8, nearest
    assert focus >= 0.55, focus  # the imitation recipe: 0.425 [0.36, 0.49]
    assert move >= 0.05, move  # no bot and no imitation policy gives one


@pytest.fixture(scope="module")
def il_selfplay_run(tmp_path_factory):
    import sys

    sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))
    from skirmish_strength import strength

    folder = tmp_path_factory.mktemp("skirmish_il_selfplay") / "run"
    _train_config(IL_SELFPLAY, folder)
    return {(name, bot): strength(str(folder / path), GAME, f"skirmish:{bot}", 200, 500)
            for name, path in (("il", "checkpoints/iter-00000"), ("rl", "latest"))
            for bot in ("attack_nearest", "focus_fire")}


@pytest.mark.recipe
def test_imitation_with_smoothing_then_self_play_gains_over_its_imitation(il_selfplay_run):
    won = {k: v[0] for k, v in il_selfplay_run.items()}
    orders = il_selfplay_run["rl", "focus_fire"][2] + il_selfplay_run["rl", "attack_nearest"][2]
    move = orders[1] / max(1, sum(orders.values()))
    print("skirmish 3m, label-smoothed imitation then self-play: " + ", ".join(
        f"{name} vs {bot} {w:.3f}" for (name, bot), w in sorted(won.items())) + f", move orders {move:.3f} "
          "(200 seat-swapped games each)")
    # measured (docs/learning.md "What made RL work"): seed 0 (the config's) imitation 0.790 / 0.420, after
    # RL 0.855 / 0.680 against attack_nearest / focus_fire, move orders 0.149; seed 1 0.800 / 0.420 ->
    # 0.835 / 0.560 (0.108), seed 2 0.800 / 0.420 -> 0.875 / 0.585 (0.094)
    assert won["rl", "focus_fire"] >= won["il", "focus_fire"] + 0.15, won
    assert won["rl", "focus_fire"] >= 0.65, won  # the goal
    assert won["rl", "attack_nearest"] >= 0.8, won
    assert move >= 0.05, move  # focus_fire, the teacher, never gives one


@pytest.mark.recipe
@pytest.mark.xfail(reason="goal not met yet: 0.855 [0.80, 0.90] against attack_nearest after the run (seed 0; seed 1 "
                          "0.835, seed 2 0.875), the goal 0.9 (docs/learning.md)", strict=False)
def test_imitation_with_smoothing_then_self_play_reaches_the_goals(il_selfplay_run):
    assert il_selfplay_run["rl", "attack_nearest"][0] >= 0.9 and il_selfplay_run["rl", "focus_fire"][0] >= 0.65
