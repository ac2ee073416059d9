"""One league, two learner families: the language-model learner and the neural-policy learner train in
the same league on tic-tac-toe and both families' snapshots are rated in one table."""

from pathlib import Path

import pytest
import yaml

pytest.importorskip("torch")
pytest.importorskip("transformers")

from arena.league.manager import open_league  # noqa: E402
from arena.trainers.registry import make_trainer  # noqa: E402

CONFIG = Path(__file__).parents[2] / "configs" / "train" / "mixed_tictactoe.yaml"


def test_mixed_league_rates_both_families(tmp_path):
    data = yaml.safe_load(CONFIG.read_text())
    data["iterations"] = 2
    llm, pol = data["llm"], data["policy"]
    llm["learner"]["epochs"] = 1
    llm.update(games_per_iter=8, concurrency=8, snapshot_every=1,
               il={"agents": ["random", "random"], "matches": 20, "epochs": 1, "lr": 2e-3, "batch_size": 32},
               eval={"every": 2, "games": 8, "opponents": ["random"], "concurrency": 8},
               tiny_sizes={"hidden": 32, "layers": 1, "heads": 2, "intermediate": 64})
    pol.update(games_per_iter=8, snapshot_every=1, threads=1, sizes={"hidden": [16], "channels": 4},
               il={"teachers": ["first", "random"], "matches": 20, "workers": 1, "epochs": 2},
               eval={"every": 2, "games": 8, "opponents": ["random"]})
    cfg = tmp_path / "mixed.yaml"
    cfg.write_text(yaml.safe_dump(data))
    t = make_trainer(cfg, tmp_path / "run")
    try:
        t.run()
    finally:
        t.close()
    store = open_league(t.policy.league_dir)
    players = {p.name: p for p in store.players()}
    llm_snaps = [n for n, p in players.items() if p.kind == "historical" and p.parent == "learner"]
    pol_snaps = [n for n, p in players.items() if p.kind == "historical" and p.parent == "policy_main"]
    assert llm_snaps and pol_snaps
    assert players[llm_snaps[0]].spec.startswith("llm:") and players[pol_snaps[-1]].spec.startswith("policy:")
    elo = store.elo("openspiel/tic_tac_toe-v0")
    rated = {n for n, r in elo.items()}
    # both learners and at least one snapshot of each family have played rated games
    assert {"learner", "policy_main", "random"} <= rated
    games = {p.name: p.steps for p in players.values()}
    assert any(games[n] > 0 for n in llm_snaps) and any(games[n] > 0 for n in pol_snaps)
    assert (tmp_path / "run" / "llm" / "latest").exists() and (tmp_path / "run" / "policy" / "latest").exists()
    cross = [r for r in store.results() if any(n.startswith("learner") for n in r.players)
             and any(n.startswith("policy") for n in r.players)]
    assert cross, "the two families never met"


def test_mixed_trainer_opens_one_league(tmp_path, monkeypatch):
    """Both learners reach the run folder's league through the one client the mixed trainer opened, which
    the mixed trainer closes once (the learners leave it to its opener), however often it is closed."""
    from arena.league import manager

    data = yaml.safe_load(CONFIG.read_text())
    data["llm"].update(il=None, tiny_sizes={"hidden": 32, "layers": 1, "heads": 2, "intermediate": 64})
    data["policy"].update(il=None, threads=1, sizes={"hidden": [16], "channels": 4})
    cfg = tmp_path / "mixed.yaml"
    cfg.write_text(yaml.safe_dump(data))
    opened = []
    real = manager.League.__init__

    def counting(self, *a, **kw):
        opened.append(self)
        real(self, *a, **kw)

    monkeypatch.setattr(manager.League, "__init__", counting)
    closed = []
    real_close = manager.League.close

    def counting_close(self):
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(manager.League, "close", counting_close)
    t = make_trainer(cfg, tmp_path / "run")
    try:
        assert len(opened) == 1 and t.policy.session._league is t.llm.session._league is opened[0]
        players = {p.name: p for p in t.league.players()}
        assert {"learner", "policy_main", "policy_exploiter", "random"} <= set(players)
        assert players["learner"].owner is not None or players["learner"].state.get("external")
        t.policy.close()
        t.llm.close()
        assert closed == [] and t.league.player("learner") is not None  # still open: the mixed trainer's
    finally:
        t.close()
    t.close()
    assert closed == [opened[0]] and opened[0].lock is None
    assert "learner" in {p.name for p in open_league(tmp_path / "run").players()}
