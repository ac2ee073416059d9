"""The SCC trainer end to end on tic-tac-toe: imitation, league roles, snapshots, exactly-once commits,
exact resume, process actors with their lag, and one-line config errors."""

import io
import json

import pytest

torch = pytest.importorskip("torch")

from arena.config import from_dict  # noqa: E402
from arena.errors import ConfigError  # noqa: E402
from arena.league.manager import open_league  # noqa: E402
from arena.trainers.policy.config import SCCConfig  # noqa: E402
from arena.trainers.policy.scc import SCCTrainer  # noqa: E402

GAME = "openspiel/tic_tac_toe-v0"


def config(**kw) -> SCCConfig:
    base = {"game": GAME, "seed": 3, "threads": 1, "sizes": {"hidden": [32], "channels": 8},
            "il": {"teachers": ["first", "random"], "matches": 30, "workers": 1, "epochs": 3, "players": ["first"]},
            "learners": [{"name": "main", "role": "main"}, {"name": "main_exploiter", "role": "main_exploiter"},
                         {"name": "league_exploiter", "role": "league_exploiter"}],
            "iterations": 3, "games_per_iter": 12, "snapshot_every": 1,
            "roles": {"snapshot_steps": 10_000, "snapshot_min_steps": 10_000, "league_exploiter_reset_p": 1.0},
            "eval": {"every": 2, "games": 20}}
    base.update(kw)
    return from_dict(SCCConfig, base)


def train(cfg, folder, iterations=None):
    t = SCCTrainer(cfg, folder)
    try:
        t.run(iterations)
    finally:
        t.close()
    return t


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scc") / "run"
    return train(config(), folder), folder


def test_imitation_clones_the_chosen_player(run):
    t, folder = run
    # "first" always plays the first legal move: a policy that imitates it is right on most positions
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    il = [x for x in lines if "il/val_acc" in x]
    assert il and il[-1]["il/val_acc"] > il[0]["il/val_acc"] - 1e-9
    assert t.il_report["train_moves"] > 0 and t.il_report["val_moves"] > 0
    assert (folder / "checkpoints" / "il" / "policy.pt").exists()


def test_roles_snapshots_and_branching_are_in_the_league(run):
    t, folder = run
    store = open_league(t.league_dir)
    players = {p.name: p for p in store.players()}
    for name in ("main", "main_exploiter", "league_exploiter", "random", "main@il"):
        assert name in players, name
    # a snapshot of every learner each iteration (snapshot_every: 1), frozen, with its parent
    snaps = [p for p in players.values() if p.kind == "historical" and p.name != "main@il"]
    assert {p.parent for p in snaps} == {"main", "main_exploiter", "league_exploiter"}
    assert len(snaps) == 3 * 3
    assert all(p.spec.startswith("policy:") for p in snaps)
    # exploiters reset after each snapshot, branched from the current main (SCC)
    resets = store.events("reset")
    assert resets and {e["player"] for e in resets} == {"main_exploiter", "league_exploiter"}
    assert all(e["branched_from"] == "main" for e in resets)
    # the learners' specs point at their latest weights, which play
    assert players["main"].spec.endswith("checkpoints/iter-00003") and players["main"].version == 3
    elo = store.elo(GAME)
    assert {"main", "main_exploiter", "main@il", "random"} <= set(elo)


def test_every_training_match_is_committed_once_with_a_replay(run):
    t, folder = run
    store = open_league(t.league_dir)
    results = store.results()
    training = [m for m in store.matches(source="external") if m.note == "training"]
    # 3 iterations x 3 learners x 12 games
    assert len(training) == 3 * 3 * 12
    assert len({r.match_id for r in results}) == len(results)
    from arena.replays.format import read_replay

    rep = read_replay(results[-1].replay)
    assert rep.result["returns"] == results[-1].returns


def test_evaluation_games_are_the_greedy_player_s_and_no_one_trains_against_it(run):
    t, folder = run
    store = open_league(t.league_dir)
    greedy = store.player("main.greedy")
    assert greedy.kind == "evaluation" and greedy.version == 3
    assert greedy.spec.endswith("checkpoints/iter-00003,greedy=true")
    evals = [m for m in store.matches(source="external") if m.note == "evaluation"]
    assert len(evals) == 3 * 20  # evaluations at iterations 0, 2 and 3 (the last), 20 games each
    assert all(sorted(m.players) == ["main.greedy", "random"] for m in evals)
    assert all(m.specs[m.players.index("main.greedy")].endswith(",greedy=true") for m in evals)
    assert not [m for m in store.matches(source="external") if m.note != "evaluation" and "main.greedy" in m.players]
    # its league record is the evaluations' win rates, game for game
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    rates = [x["eval/win_rate/random"] for x in lines if "eval/win_rate/random" in x]
    won = {r.match_id for r in store.results() if r.winner is not None and r.players[r.winner] == "main.greedy"}
    assert len(rates) == 3 and len(won) == round(sum(rates) * 20)
    assert "main.greedy" in store.elo(GAME)
    # a person plays it by its name, and meets the greedy policy (the same first move whatever the seed)
    from arena.league.play import play_against
    from arena.replays.format import read_replay

    firsts = set()
    for seed in (1, 2):
        out = play_against(t.league_dir, "main.greedy", GAME, seat=1, seed=seed, name="ada",
                           stdin=io.StringIO("".join(f"{c}\n" for c in range(9))), stdout=io.StringIO())
        assert out["players"] == ["main.greedy", "human:ada"]
        firsts.add(read_replay(out["replay"]).steps[0]["action"])
    assert len(firsts) == 1


def test_the_best_checkpoint_plays_as_a_policy_agent(run):
    t, folder = run
    from arena.match.loop import play_match

    r = play_match(GAME, [f"policy:{folder / 'best'}", "random"], seed=1)
    assert r.invalid == [0, 0] and r.outcome == "normal"
    best = json.loads((folder / "best.json").read_text())
    assert best["metric"] == "eval/win_rate/random"


def test_a_killed_run_resumes_exactly(tmp_path):
    cfg = config(il=None, learners=[{"name": "main", "role": "main"}], iterations=3, snapshot_every=0)
    whole = train(cfg, tmp_path / "whole")
    cut = tmp_path / "cut"
    train(config(il=None, learners=[{"name": "main", "role": "main"}], iterations=3, snapshot_every=0), cut, 2)
    again = train(config(il=None, learners=[{"name": "main", "role": "main"}], iterations=3, snapshot_every=0), cut)
    assert again.iteration == 3

    def last(folder):
        rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
        return [r for r in rows if r["step"] == 3 and "train/loss" in r][-1]

    a, b = last(tmp_path / "whole"), last(cut)
    for k in ("train/loss", "train/pg_loss", "train/value_loss", "train/entropy", "train/env_steps"):
        assert a[k] == pytest.approx(b[k], abs=1e-6), k
    for k, v in whole.learners["main"].net.state_dict().items():
        assert torch.allclose(v, again.learners["main"].net.state_dict()[k], atol=1e-6), k
    assert len(open_league(whole.league_dir).results()) == len(open_league(again.league_dir).results())


def test_killed_between_checkpoint_and_commit_counts_nothing_twice(tmp_path, monkeypatch):
    from arena.league.session import LeagueSession

    cfg = dict(il=None, learners=[{"name": "main", "role": "main"}], iterations=2, snapshot_every=0)
    whole = train(config(**cfg), tmp_path / "whole")
    real = LeagueSession.apply

    def dies(self, iteration, bundle):
        if iteration == 2:
            raise KeyboardInterrupt  # kill -9 after the checkpoint, before the league's transaction
        return real(self, iteration, bundle)

    monkeypatch.setattr(LeagueSession, "apply", dies)
    with pytest.raises(KeyboardInterrupt):
        train(config(**cfg), tmp_path / "cut")
    monkeypatch.setattr(LeagueSession, "apply", real)
    again = train(config(**cfg), tmp_path / "cut")  # applies the checkpoint's pending effects, plays nothing
    assert again.iteration == 2
    assert len(open_league(again.league_dir).results()) == len(open_league(whole.league_dir).results())
    assert open_league(again.league_dir).player("main").version == 2


def test_a_checkpoint_of_the_older_format_applies_its_pending_effects(tmp_path):
    """A checkpoint written when an iteration's league effects and metrics rode in one ``bundle`` dict
    (matches as tuples, snapshots as dicts) is read into the one bundle type and applied once."""
    cfg = dict(il=None, learners=[{"name": "main", "role": "main"}], iterations=1, snapshot_every=0)
    train(config(**cfg), tmp_path / "run")
    t = SCCTrainer(config(**cfg), tmp_path / "run")  # done: it only opens the run and its league
    try:
        res = t.evaluate(1, games=2)[1]
        old = {"iteration": 5, "matches": [(m.players, m.specs, m.why, m.note, m.result) for m in res],
               "snapshots": [{"parent": "main", "spec": "random", "name": "main@7", "iteration": 5}], "events": [],
               "metrics": {"eval/win_rate/random": 0.5}, "evaluated": False}
        state, report = t._legacy_state({"iteration": 5, "bundle": old})
        assert report == {"iteration": 5, "metrics": old["metrics"], "evaluated": False}
        before = len(open_league(t.league_dir).results())
        assert t.reapply(state) and not t.reapply(state)
        assert len(open_league(t.league_dir).results()) == before + 2
        assert open_league(t.league_dir).player("main@7").parent == "main"
    finally:
        t.close()


def test_killed_after_the_teacher_matches_plays_them_once(tmp_path, monkeypatch):
    real = SCCTrainer.checkpoint

    def dies(self, it, **extra):
        raise KeyboardInterrupt  # kill -9 after the imitation matches were committed, before checkpoint 0

    monkeypatch.setattr(SCCTrainer, "checkpoint", dies)
    cfg = dict(learners=[{"name": "main", "role": "main"}], iterations=1, snapshot_every=0)
    with pytest.raises(KeyboardInterrupt):
        train(config(**cfg), tmp_path / "run")
    monkeypatch.setattr(SCCTrainer, "checkpoint", real)
    t = train(config(**cfg), tmp_path / "run")
    teacher = [m for m in open_league(t.league_dir).matches(source="external") if m.note == "imitation"]
    assert len(teacher) == 30  # il.matches, not twice that
    assert open_league(t.league_dir).player("main@il") is not None and t.iteration == 1


def test_process_actors_overlap_with_one_version_of_lag(tmp_path):
    cfg = config(il=None, learners=[{"name": "main", "role": "main"}], iterations=3, snapshot_every=0, actors=1,
                 overlap=True)
    train(cfg, tmp_path / "p")
    rows = [json.loads(x) for x in (tmp_path / "p" / "metrics.jsonl").read_text().splitlines()]
    lags = [r["train/lag"] for r in rows if "train/lag" in r]
    assert lags == [0.0, 1.0, 1.0]


def test_ray_actors_play_the_same_matches_as_local_ones(tmp_path):
    pytest.importorskip("ray")
    kw = dict(il=None, learners=[{"name": "main", "role": "main"}], iterations=1, snapshot_every=0, actors=2)
    a = train(config(**kw), tmp_path / "local")
    b = train(config(actors_backend="ray", **kw), tmp_path / "ray")
    ra = [(r.players, r.returns, r.moves) for r in open_league(a.league_dir).results()]
    rb = [(r.players, r.returns, r.moves) for r in open_league(b.league_dir).results()]
    assert ra == rb and len(ra) > 12


@pytest.mark.parametrize("change,message", [
    ({"game": "arena/TicTacToe-v0"}, "no observation tensor"),
    ({"opponents": ["mcst"]}, "opponents: unknown agent kind 'mcst'"),
    ({"il": {"teachers": ["random"], "matches": 5}}, "il.teachers: give one agent spec per seat"),
    ({"learners": [{"name": "x", "role": "main_exploiter"}]}, "one of them must have role main"),
    ({"sizes": {"hiden": [3]}}, "unknown policy size 'hiden'"),
])
def test_config_errors_are_one_line(tmp_path, change, message):
    with pytest.raises(ConfigError) as e:
        SCCTrainer(config(**change), tmp_path / "bad")
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "bad" / "league.db").exists()
