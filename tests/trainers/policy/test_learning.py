"""Learning checks of the neural-policy learner (tests that can fail).

* about a minute (15 s here): tic-tac-toe, RL from scratch against the league (self-play, PFSP) and
  random: the greedy policy beats the random agent by a margin on 400 seat-swapped games;
* a recipe (`make recipes`): Connect Four, SCC's two stages on one shipped config (imitation of a strong
  MCTS's visit shares, then league RL): greedy win rate against random >= 0.95 on 1,000 seat-swapped
  games, the final main's Elo in the run's league above the imitation snapshot's, its greedy evaluation
  player's fitted rating above the C++ MCTS-400 it was evaluated against, and against Python
  MCTS-400 (never met in training) greedy >= 0.5 and imitation >= 0.4, `policy_mcts` at 100 simulations
  >= 0.6;
* a recipe: Leduc poker, imitation of CFR then RL held by a magnet: NashConv <= 0.1 at imitation and
  after RL.
"""

import json
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")

from arena.league.manager import open_league  # noqa: E402
from arena.trainers.registry import make_trainer  # noqa: E402

CONFIGS = Path(__file__).parents[3] / "configs" / "train"


def _train(config: Path, folder: Path, **changes):
    data = yaml.safe_load(config.read_text())
    data.update(changes)
    return _train_dict(data, folder)


def _train_dict(cfg: dict, folder: Path):
    """Train the config `cfg` (a dict) into `folder`; its YAML beside the folder."""
    p = folder.parent / f"{folder.name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    t = make_trainer(p, folder)
    try:
        t.run()
    finally:
        t.close()
    return t


def greedy_games(folder, game, opponent, games, seed=123):
    """(win rate, results) of seat-swapped greedy games of the policy in `folder` against `opponent`
    (lock step, batched)."""
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.match.pool import play_lockstep

    spec = f"policy:{folder},greedy=true"
    me = make_agent(spec, make_core(game), 0)
    seats = [[spec, opponent] if i % 2 == 0 else [opponent, spec] for i in range(games)]
    results = play_lockstep(game, seats, [seed + i for i in range(games)], shared={spec: me})
    return sum(r.winner == (0 if i % 2 == 0 else 1) for i, r in enumerate(results)) / games, results


def greedy_win_rate(folder, game, opponent, games, seed=123):
    return greedy_games(folder, game, opponent, games, seed)[0]


def test_tictactoe_beats_random_within_a_minute(tmp_path):
    # seeds 0, 1, 2 reach 0.76, 0.83, 0.78 here (the curve is noisy: the threshold leaves room for it)
    cfg = {"trainer": "scc", "game": "openspiel/tic_tac_toe-v0", "seed": 0, "threads": 1, "il": None, "arch": "mlp",
           "learners": [{"name": "main", "role": "main"}], "fixed_share": 0.5, "iterations": 120,
           "games_per_iter": 64, "lr": 1.0e-3, "kl_coef": 0.0, "eval": {"every": 120, "games": 100}}
    _train_dict(cfg, tmp_path / "run")
    before = greedy_win_rate(tmp_path / "run" / "checkpoints" / "iter-00000", "openspiel/tic_tac_toe-v0", "random", 400)
    after = greedy_win_rate(tmp_path / "run" / "latest", "openspiel/tic_tac_toe-v0", "random", 400)
    # random against random wins about 0.43 of seat-swapped games (the rest are draws and losses)
    assert after >= 0.65, (before, after)
    assert after >= before + 0.15, (before, after)


def score(folder, game, opponent, games, seed=123):
    """Seat-swapped score (a win 1, a draw 1/2) of the greedy policy in `folder` against `opponent`."""
    _, results = greedy_games(folder, game, opponent, games, seed)
    wins = sum(r.winner == (0 if i % 2 == 0 else 1) for i, r in enumerate(results))
    losses = sum(r.winner == (1 if i % 2 == 0 else 0) for i, r in enumerate(results))
    return (wins + 0.5 * (games - wins - losses)) / games


def test_tictactoe_rl_surpasses_its_imitation_and_teacher(tmp_path):
    """Imitation of the one-ply tactics player, then league RL (self-play and the teacher): scored against
    MCTS with 100 simulations, which it never met. Measured on seeds 0, 1, 2 (400 games each): the
    teacher 0.359 (it samples), imitation (greedy) 0.194 / 0.193 / 0.076, after RL 0.453 / 0.485 / 0.441
    (the run 20 s here); docs/learning.md "A gain over the teacher"."""
    game, judge = "openspiel/tic_tac_toe-v0", "mcts:simulations=100"
    cfg = {"trainer": "scc", "game": game, "seed": 0, "threads": 1, "arch": "mlp",
           "il": {"teachers": ["tactics", "tactics"], "matches": 400, "workers": 1, "epochs": 20, "patience": 4},
           "learners": [{"name": "main", "role": "main"}], "opponents": ["tactics"], "fixed_share": 0.5,
           "iterations": 120, "games_per_iter": 64, "lr": 1.0e-3, "kl_coef": 0.0, "kl_end": 0.0,
           "eval": {"every": 120, "games": 50, "opponents": ["tactics"]}}
    _train_dict(cfg, tmp_path / "run")
    imitation = score(tmp_path / "run" / "checkpoints" / "il", game, judge, 400)
    after = score(tmp_path / "run" / "latest", game, judge, 400)
    # 400 games: a score's 95% interval is about +-0.045; the teacher's own is 0.359 [0.31, 0.41]
    assert after >= 0.40, (imitation, after)
    assert after >= imitation + 0.2, (imitation, after)


@pytest.fixture(scope="module")
def c4_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("c4") / "run"
    return _train(CONFIGS / "scc_connect_four.yaml", folder), folder


@pytest.mark.recipe
def test_connect_four_greedy_beats_random(c4_run):
    _, folder = c4_run
    assert greedy_win_rate(folder / "latest", "openspiel/connect_four-v0", "random", 1000) >= 0.95


@pytest.mark.recipe
def test_connect_four_rl_improves_on_imitation_in_the_league(c4_run):
    t, folder = c4_run
    elo = open_league(t.league_dir).elo("openspiel/connect_four-v0")
    assert elo["main"] > elo["main@il"], elo


@pytest.mark.recipe
def test_connect_four_greedy_player_is_rated_above_mcts_400_in_the_league(c4_run):
    """The run's fitted table (`arena ratings`): the main played greedily (its evaluation games, the league
    player ``main.greedy``) above the C++ MCTS-400 it was evaluated against (measured 2039 [1917, 2141]
    against 1924 [1794, 2032] by `arena ratings`; the main, whose training games sample their moves, 1602)."""
    from arena.league.leaderboard import leaderboard

    t, _ = c4_run
    rows = {r.player: r for r in leaderboard(open_league(t.league_dir), "openspiel/connect_four-v0", resamples=200).rows}
    greedy, mcts = rows["main.greedy"], rows["mcts_simulations_400_backend_cpp"]
    print(f"fitted: main.greedy {greedy.rating:.0f} [{greedy.lo:.0f}, {greedy.hi:.0f}], "
          f"mcts-400 {mcts.rating:.0f} [{mcts.lo:.0f}, {mcts.hi:.0f}], main {rows['main'].rating:.0f}")
    assert greedy.rating > mcts.rating


@pytest.mark.recipe
def test_connect_four_against_search_it_never_met(c4_run):
    """OpenSpiel's Python MCTS, which the run never played: the greedy policy wins 0.675 [0.61, 0.74] of 200
    against 400 simulations (docs/policy.md: the goal is 0.5), its imitation policy 0.540 [0.47, 0.61].
    This test's measurements (its own match seeds) on the fresh run docs/policy.md quotes: greedy 0.720,
    imitation 0.505, policy_mcts 0.940 of 100, probe 0.887.
    The tactics probe of every evaluation is logged."""
    from arena.match.batch import play_matches, summarize

    _, folder = c4_run
    game = "openspiel/connect_four-v0"
    greedy = greedy_win_rate(folder / "latest", game, "mcts:simulations=400", 200)
    imitation = greedy_win_rate(folder / "checkpoints" / "il", game, "mcts:simulations=400", 200)
    spec = f"policy_mcts:{folder / 'best'},simulations=100,threads=1"
    me, _ = summarize(play_matches(game, [spec, "mcts:simulations=400"], 100, seed=77, workers=2, record=False),
                      [spec, "mcts"])
    print(f"connect four vs mcts:simulations=400: greedy {greedy:.3f}, imitation {imitation:.3f}, "
          f"policy_mcts 100 {me.wins / me.games:.3f}")
    assert greedy >= 0.5 and imitation >= 0.4 and me.wins / me.games >= 0.6
    rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    probe = [r["eval/tactics/win_taken"] for r in rows if "eval/tactics/win_taken" in r]
    assert probe and probe[-1] >= 0.7


@pytest.mark.recipe
def test_connect_four_expert_iteration_improves_on_its_teacher_with_its_own_search(tmp_path):
    """Expert iteration after imitation (configs/train/scc_connect_four_expert.yaml): greedy against OpenSpiel's
    Python MCTS-1600 (never met), 200 seat-swapped games on the benchmark's seeds (benchmarks/c4_strength.py):
    0.655 [0.59, 0.72] after the rounds, 0.330 [0.27, 0.40] for the imitation policy they started from
    (docs/policy.md). The goal: >= 0.5, and the gain outside both intervals."""
    from arena.agents.probe import wilson
    from arena.match.batch import play_matches, summarize

    folder = tmp_path / "run"
    _train(CONFIGS / "scc_connect_four_expert.yaml", folder)
    game, opponent = "openspiel/connect_four-v0", "mcts:simulations=1600"

    def rate(ck: Path) -> tuple[float, float, float]:
        spec = f"policy:{ck},greedy=true,threads=1"
        me, _ = summarize(play_matches(game, [spec, opponent], 200, seed=2024, workers=2, record=False),
                          [spec, opponent])
        lo, hi = wilson(me.wins / me.games, me.games)
        return me.wins / me.games, lo, hi

    before, after = rate(folder / "checkpoints" / "expert1"), rate(folder / "checkpoints" / "il")
    print(f"connect four vs {opponent}: imitation {before}, after expert iteration {after}")
    assert after[0] >= 0.5 and after[1] > before[2], (before, after)


@pytest.fixture(scope="module")
def leduc_selfplay_curve(tmp_path_factory):
    folder = tmp_path_factory.mktemp("leduc_selfplay") / "run"
    t = _train(CONFIGS / "scc_leduc_selfplay.yaml", folder)
    assert t.iteration == t.cfg.iterations
    rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["eval/nash_conv"]) for r in rows if "eval/nash_conv" in r]


@pytest.mark.recipe
def test_leduc_selfplay_alone_lowers_nash_conv(leduc_selfplay_curve):
    curve = leduc_selfplay_curve
    print(f"leduc self-play NashConv: {curve}")
    # no teacher: from the untrained network's 4.74 to 0.62 at iteration 450 (0.54-0.62 over the last
    # 150 iterations, seed 0, about 12 minutes on 2 cores): docs/policy.md "Self-play alone"
    assert curve[0][1] > 4.0, curve
    assert max(nc for _, nc in curve[-4:]) <= 0.8, curve


@pytest.mark.recipe
@pytest.mark.xfail(reason="goal not met yet: NashConv 0.62 after the shipped self-play run (seed 0; 0.54 at best); "
                          "the regularised fixed point itself is 0.450 at kl_coef 0.05, solved exactly "
                          "(docs/learning.md, 'Leduc by self-play alone')", strict=False)
def test_leduc_selfplay_alone_reaches_the_goal(leduc_selfplay_curve):
    assert leduc_selfplay_curve[-1][1] <= 0.3, leduc_selfplay_curve


@pytest.mark.recipe
def test_leduc_nash_conv_below_random(tmp_path):
    from arena.trainers.policy.nashconv import uniform_nash_conv

    t = _train(CONFIGS / "scc_leduc.yaml", tmp_path / "leduc")
    rows = [json.loads(x) for x in (tmp_path / "leduc" / "metrics.jsonl").read_text().splitlines()]
    curve = [(r["step"], r["eval/nash_conv"]) for r in rows if "eval/nash_conv" in r]
    random_nc = uniform_nash_conv("leduc_poker")  # 4.747
    at_il, after = curve[0][1], curve[-1][1]
    print(f"leduc NashConv: random {random_nc:.3f}, imitation {at_il:.3f}, after RL {after:.3f}; curve {curve}")
    # imitation of CFR+'s probabilities meets the goal (measured 0.062); self-play under the imitation
    # magnet keeps it (measured 0.098 at iteration 60, 0.062-0.098 on the way): docs/policy.md
    assert at_il <= 0.1 and after <= 0.1 and random_nc > 4.7, curve
    assert t.iteration == t.cfg.iterations


@pytest.mark.recipe
@pytest.mark.xfail(reason="goal not met yet: over seeds 0, 1, 2 the shipped config's RL ends at 0.098 / 0.089 / 0.155 "
                          "from its imitation's 0.062 / 0.111 / 0.109; with the imitation as the magnet no "
                          "fixed point from 30 chips down to 0.5 is below the imitation's NashConv (docs/learning.md, "
                          "'Leduc with the CFR+ imitation')", strict=False)
def test_leduc_rl_lowers_nash_conv_below_its_imitation_over_three_seeds(tmp_path):
    """The goal: RL ends below its own imitation checkpoint's NashConv on every seed, by more than the
    seeds' spread at imitation."""
    ends = []
    for seed in (0, 1, 2):
        _train(CONFIGS / "scc_leduc.yaml", tmp_path / f"s{seed}", seed=seed)
        rows = [json.loads(x) for x in (tmp_path / f"s{seed}" / "metrics.jsonl").read_text().splitlines()]
        curve = [r["eval/nash_conv"] for r in rows if "eval/nash_conv" in r]
        ends.append((curve[0], curve[-1]))
    print(f"leduc NashConv (imitation, after RL) by seed: {ends}")
    spread = max(a for a, _ in ends) - min(a for a, _ in ends)
    assert all(after < at_il - spread for at_il, after in ends), ends
