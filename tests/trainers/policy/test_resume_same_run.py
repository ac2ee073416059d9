"""A resumed SCC run is the same run: killed at any point (during imitation, mid-iteration, between
the checkpoint and the league's transaction, between the transaction and the metrics line, between
the checkpoint and its ``latest`` link) and resumed, it ends with the same pairings, results,
ratings, snapshots, metrics lines (timing fields aside) and final weights as a run that never
stopped. Kills are simulated in this process: a patched hook raises at the named point, after which
nothing more of the killed run is written (the trainer is closed as a killed process's would be
gone). Also: players a trainer adds are its own (the league's config sync never retires them, old
databases included), and imitation from another league's folder."""

import json
import sqlite3

import pytest

torch = pytest.importorskip("torch")

from arena.config import from_dict  # noqa: E402
from arena.league.manager import open_league  # noqa: E402
from arena.league.session import LeagueSession  # noqa: E402
from arena.trainers.common import base as trainer_base  # noqa: E402
from arena.trainers.common import metrics as metrics_mod  # noqa: E402
from arena.trainers.common.metrics import read_metrics  # noqa: E402
from arena.trainers.policy.config import SCCConfig  # noqa: E402
from arena.trainers.policy.scc import SCCTrainer  # noqa: E402

GAME = "openspiel/tic_tac_toe-v0"


class Killed(BaseException):
    """A simulated kill -9 (a BaseException: no `except Exception` in the trainer may swallow it)."""


def config(**kw) -> SCCConfig:
    base = {"game": GAME, "seed": 5, "threads": 1, "sizes": {"hidden": [32], "channels": 8},
            "il": {"teachers": ["first", "random"], "matches": 24, "workers": 1, "epochs": 3, "players": ["first"]},
            "learners": [{"name": "main", "role": "main"}, {"name": "main_exploiter", "role": "main_exploiter"},
                         {"name": "league_exploiter", "role": "league_exploiter"}],
            "iterations": 4, "games_per_iter": 8, "snapshot_every": 1, "fixed_share": 0.0,
            "roles": {"snapshot_steps": 10_000, "snapshot_min_steps": 10_000, "league_exploiter_reset_p": 0.5},
            "eval": {"every": 2, "games": 8}}
    base.update(kw)
    return from_dict(SCCConfig, base)


def train(cfg, folder, iterations=None) -> SCCTrainer:
    t = SCCTrainer(cfg, folder)
    try:
        t.run(iterations)
    finally:
        t.close()
    return t


def killed(cfg, folder, monkeypatch, target, name, when) -> None:
    """Run until `when(*args)` is true at the call of `target.name`, where the run dies."""
    real = getattr(target, name)

    def hook(*args, **kw):
        if when(*args, **kw):
            raise Killed(name)
        return real(*args, **kw)

    with monkeypatch.context() as m:
        m.setattr(target, name, hook)
        with pytest.raises(Killed):
            train(cfg, folder)


TIMING = ("time", "time/", "train/env_steps_per_s")


def fingerprint(t: SCCTrainer, folder) -> dict:
    """Everything a run leaves that must not depend on whether it stopped (paths made relative)."""
    store = open_league(t.league_dir)

    def rel(s):
        return None if s is None else s.replace(str(folder), "RUN")

    metrics = [{k: v for k, v in line.items() if not k.startswith(TIMING)} for line in
               read_metrics(folder / "metrics.jsonl")]
    best = json.loads((folder / "best.json").read_text())
    return {
        "matches": [(m.match_id, m.game, m.players, [rel(s) for s in m.specs], m.seed, m.status, m.note)
                    for m in store.matches()],
        "results": [(r.match_id, r.players, r.returns, r.winner, r.draw, r.moves, r.outcome) for r in store.results()],
        "players": [(p.name, p.kind, p.role, rel(p.spec), p.games, p.parent, p.version, p.steps, p.active, p.owner)
                    for p in store.players()],
        "events": [(e["kind"], e["player"], {k: v for k, v in e.items() if k not in ("t", "kind", "player")})
                   for e in store.events()],
        "elo": {p: round(v, 6) for p, v in store.elo(GAME).items()},
        "metrics": metrics,
        "best": (best["iteration"], best["value"],
                 (folder / "best").resolve() == (folder / best["checkpoint"]).resolve()),
        "frozen": sorted(p.name for p in (folder / "players" / "frozen").iterdir()),
    }


def assert_same_run(whole: SCCTrainer, wfolder, again: SCCTrainer, cfolder) -> None:
    a, b = fingerprint(whole, wfolder), fingerprint(again, cfolder)
    for key in a:
        if key == "metrics":
            assert len(a[key]) == len(b[key]), [(x["step"], sorted(x)[:3]) for x in b[key]]
            for la, lb in zip(a[key], b[key]):
                assert la.keys() == lb.keys(), (la["step"], set(la) ^ set(lb))
                for k in la:
                    assert la[k] == pytest.approx(lb[k], abs=1e-6), (la["step"], k)
        else:
            assert a[key] == b[key], key
    assert whole.iteration == again.iteration
    for name, lrn in whole.learners.items():
        other = again.learners[name].net.state_dict()
        for k, v in lrn.net.state_dict().items():
            assert torch.allclose(v, other[k], atol=1e-6), (name, k)
    # the last checkpoint on disk too (what a third start would resume from)
    sa = torch.load(wfolder / "latest" / "trainer_state.pt", weights_only=False)
    sb = torch.load(cfolder / "latest" / "trainer_state.pt", weights_only=False)
    for name in sa["learners"]:
        for k, v in sa["learners"][name]["net"].items():
            assert torch.allclose(v, sb["learners"][name]["net"][k], atol=1e-6), (name, k)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    folder = tmp_path_factory.mktemp("whole") / "run"
    return train(config(), folder), folder


def test_killed_at_every_point_and_resumed_is_the_same_run(whole, tmp_path, monkeypatch):
    cut = tmp_path / "cut"
    cfg = config()
    # 0. while the teachers play: nothing of their matches is committed yet
    from arena.match import batch

    killed(cfg, cut, monkeypatch, batch, "play_matches", lambda *a, **kw: True)
    # 1. during imitation: the teacher matches are committed, two epochs' metrics lines are written
    real_log = metrics_mod.MetricsLogger.log

    def log_then_die(self, step, **scalars):
        real_log(self, step, **scalars)
        if scalars.get("il/epoch") == 2:
            raise Killed("imitation")

    with monkeypatch.context() as m:
        m.setattr(metrics_mod.MetricsLogger, "log", log_then_die)
        with pytest.raises(Killed):
            train(cfg, cut)
    # 2. mid-iteration 2: its matches played and learned from, nothing of it checkpointed
    killed(cfg, cut, monkeypatch, SCCTrainer, "_roles", lambda self, it: it == 2)
    # 3. between iteration 2's checkpoint and the league's transaction
    killed(cfg, cut, monkeypatch, LeagueSession, "apply", lambda self, it, bundle: it == 2)
    # 4. after iteration 3's league transaction, half-way through writing its metrics line
    def half_a_line(self, step, **scalars):
        if step == 3 and "train/loss" in scalars:
            with open(self.path, "a") as f:
                f.write('{"step": 3, "train/lo')
            return True
        return False

    killed(cfg, cut, monkeypatch, metrics_mod.MetricsLogger, "log", half_a_line)
    # 5. between iteration 4's state file and the `latest` link that points at it
    killed(cfg, cut, monkeypatch, trainer_base, "link", lambda d, name, target: name == "latest" and "00004" in str(target))
    again = train(cfg, cut)
    assert again.iteration == 4
    # the imitation teachers are the trainer's: still in the league, active, after six starts
    first = open_league(again.league_dir).player("first")
    assert first is not None and first.active and first.owner is not None
    assert_same_run(whole[0], whole[1], again, cut)


def test_resume_keeps_the_teachers_in_the_historical_pool(whole, tmp_path):
    """The reported divergence: a resumed run's league retired the imitation teachers (its config
    lists only the opponents), so the pool, the pairings and the snapshots changed."""
    t, folder = whole
    cut = tmp_path / "cut"
    train(config(), cut, 2)
    again = train(config(), cut)
    assert open_league(again.league_dir).player("first").active
    assert_same_run(t, folder, again, cut)


def test_overlapped_actors_resume_the_same_run(tmp_path, monkeypatch):
    """With `overlap`, the in-flight iteration (played with the weights from before the update) is in
    the checkpoint and replayed with those weights: a killed run stays the same run."""
    cfg = config(il=None, learners=[{"name": "main", "role": "main"}], iterations=3, actors=1, overlap=True)
    base = train(cfg, tmp_path / "whole")
    cut = tmp_path / "cut"
    killed(cfg, cut, monkeypatch, SCCTrainer, "_roles", lambda self, it: it == 2)
    killed(cfg, cut, monkeypatch, LeagueSession, "apply", lambda self, it, bundle: it == 2)
    again = train(cfg, cut)
    lags = [r["train/lag"] for r in read_metrics(cut / "metrics.jsonl") if "train/lag" in r]
    assert lags == [0.0, 1.0, 1.0]
    assert_same_run(base, tmp_path / "whole", again, cut)


def test_config_sync_never_retires_players_a_trainer_owns(tmp_path):
    from arena.league.config import GameEntry, LeagueConfig, PlayerEntry
    from arena.league.manager import League

    def league(players):
        lcfg = LeagueConfig(games=[GameEntry(GAME)], players=[PlayerEntry(n, n, [GAME]) for n in players], matches=0)
        return League(lcfg, tmp_path / "lg", backend="inline")

    lg = league(["random", "first"])
    lg.store.add_player("teacher", "fixed", "random", [GAME], owner="scc")
    lg.store.close()
    lg = league(["random"])  # "first" left the config; "teacher" was never the config's
    players = {p.name: p for p in lg.store.players()}
    assert not players["first"].active and players["first"].owner is None
    assert players["teacher"].active and players["teacher"].owner == "scc"


def test_an_old_league_database_gains_owners_and_keeps_its_trainers_players(tmp_path):
    """A league written before players had owners: the column is added (schema 2), learners an
    external trainer added are its, and a resumed trainer claims its imitation teachers."""
    cut = tmp_path / "run"
    cfg = config(iterations=2)
    train(cfg, cut, 1)
    db = cut / "league.db"
    with sqlite3.connect(db) as c:  # back to schema 1 (no owner column), the teacher retired by its sync
        c.execute("ALTER TABLE players DROP COLUMN owner")
        c.execute("UPDATE meta SET value='1' WHERE key='schema'")
        c.execute("UPDATE players SET active=0 WHERE name='first'")
    c.close()
    again = train(cfg, cut)
    store = open_league(again.league_dir)
    assert store.get_meta("schema") == 2
    assert store.player("main").owner == store.player("first").owner == again.owner
    assert store.player("first").active and store.player("random").owner == f"{again.owner}/config"  # its opponent
    assert again.iteration == 2
    assert {p.name for p in store.players() if p.owner == again.owner} >= {"main", "main@il", "main@2", "first"}


def test_il_league_names_a_missing_league_in_one_line(tmp_path):
    from arena.errors import ConfigError

    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError) as e:
        SCCTrainer(config(il={"league": str(tmp_path / "empty"), "matches": 0}), tmp_path / "run")
    assert "il.league: no league in" in str(e.value) and "league.db" in str(e.value) and "\n" not in str(e.value)


def test_imitation_from_another_leagues_replays(tmp_path):
    """`il.league`: a league folder (its replays in its database) is read, and the chosen player's
    moves are learned."""
    from arena.league.config import GameEntry, LeagueConfig, PlayerEntry
    from arena.league.manager import League

    lcfg = LeagueConfig(games=[GameEntry(GAME)], players=[PlayerEntry("firsty", "first"), PlayerEntry("rnd", "random")],
                        matches=40, record="actions", replays="database", seed=1)
    lg = League(lcfg, tmp_path / "teachers", backend="inline")
    lg.run()
    assert lg.store.result_count() == 40 and (tmp_path / "teachers" / "league.db").exists()
    lg.store.close()
    cfg = config(il={"league": str(tmp_path / "teachers"), "matches": 0, "players": ["firsty"], "epochs": 30,
                     "patience": 30, "lr": 3e-3}, learners=[{"name": "main", "role": "main"}], iterations=0)
    t = train(cfg, tmp_path / "run")
    report = t.il_report
    assert report["replays"] == 40 and report["train_moves"] > 0
    assert open_league(t.league_dir).player("main@il") is not None  # the imitation policy enters the run's league
    # "first" always plays the first legal move: the clone does too, on held-out games' positions
    assert report["val_acc"] > 0.9
