"""PPO learns the OpenSim prosthetics task (slow, in CI): one run of the shipped config, about ten
minutes of CPU on two simulator processes, shared by every check below.

* the trained policy's mean return on the evaluation seeds beats the random agent's and the first
  (untrained) policy's, each by a margin;
* the checkpoint plays as `policy:` through the match loop and gets the return the trainer measured
  (same actions, same episode);
* a league over the task ranks it above the random agent on common seeds;
* its episode, re-simulated from the replay, gives the same return to 1e-9 and draws a GIF.
"""

from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("opensim")
torch = pytest.importorskip("torch")

from arena.trainers.common.metrics import read_metrics  # noqa: E402
from arena.trainers.registry import make_trainer  # noqa: E402

pytestmark = pytest.mark.slow

CONFIG = Path(__file__).parents[3] / "configs" / "train" / "prosthetics_ppo.yaml"
GAME = "arena/Prosthetics-v0"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pros") / "run"
    t = make_trainer(CONFIG, folder)
    try:
        t.run()
    finally:
        t.close()
    return folder, yaml.safe_load(CONFIG.read_text())


def random_return(seeds) -> float:
    from arena.match.loop import play_match

    return float(np.mean([play_match(GAME, ["random"], seed=s).returns[0] for s in seeds]))


def initial_policy_return(folder: Path, seeds) -> float:
    """The untrained policy (iteration 0's checkpoint) played through the match loop, sampled."""
    from arena.match.loop import play_match

    spec = f"policy:{folder / 'checkpoints' / 'iter-00000'}"
    return float(np.mean([play_match(GAME, [spec], seed=s).returns[0] for s in seeds]))


def test_ppo_beats_random_and_the_first_policy(run):
    folder, cfg = run
    rows = read_metrics(folder / "metrics.jsonl")
    seeds = cfg["eval"]["seeds"]
    first = rows[0]["eval/return"]
    evals = [r["eval/return"] for r in rows if "eval/return" in r]
    final = rows[-1]["eval/return"]
    rand = random_return(seeds)
    untrained = initial_policy_return(folder, seeds)
    print(f"random {rand:.1f}, first policy {first:.1f} (match loop: {untrained:.1f}), final {final:.1f}, "
          f"best {max(evals):.1f}")
    assert rows[-1]["step"] == cfg["iterations"]
    # measured: random -560, first policy -562, final -291 (iteration 50, seed 0)
    assert final > rand + 150 and final > first + 150 and final > untrained + 150


def test_the_checkpoint_plays_what_the_trainer_measured(run):
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.match.loop import play_match

    folder, cfg = run
    core = make_core(GAME)
    agent = make_agent(f"policy:{folder / 'latest'},greedy=true", core, 0)
    res = play_match(core, [agent], seed=0)
    # the trainer's greedy evaluation of the same weights, on the same seed
    t = make_trainer(CONFIG, folder)
    try:
        again = t.evaluate(seeds=[0], greedy=True)
    finally:
        t.close()
    assert res.returns[0] == pytest.approx(again["eval/return"], abs=1e-6)
    assert res.moves == again["eval/episode_len"]


def test_a_league_ranks_the_policy_above_random(run, tmp_path):
    import json

    from arena.config import from_dict
    from arena.league.config import LeagueConfig
    from arena.league.manager import League
    from arena.league.queries import return_rows
    from arena.match.verify import resimulate_steps
    from arena.replays.format import read_replay
    from arena.ui.video import render_replay

    folder, _ = run
    data = {"name": "pros", "seed": 0, "games": [{"id": GAME}], "seeds": 2, "matches": 6, "workers": 2,
            "players": [{"name": "random", "agent": "random"}, {"name": "relaxed", "agent": "constant:value=0"},
                        {"name": "ppo", "agent": f"policy:{folder / 'best'}"}]}
    league = League(from_dict(LeagueConfig, json.loads(json.dumps(data))), tmp_path / "league")
    league.run()
    rows = return_rows(league.store, GAME)
    print([(r.player, r.mean) for r in rows])
    order = [r.player for r in rows]
    assert order.index("ppo") < order.index("random")
    assert all(r.episodes == 2 and r.common_seeds == 2 for r in rows)
    mine = [r for r in league.store.results() if r.players == ["ppo"]][0]
    replay = read_replay(mine.replay)
    again = resimulate_steps(replay)
    assert again.moves == mine.moves and abs(again.returns[0] - mine.returns[0]) <= 1e-9
    video, resim = render_replay(replay, tmp_path / "ppo.gif")
    assert (tmp_path / "ppo.gif").stat().st_size > 10_000 and resim.matches()
