"""The league's seams: League is the client every caller uses; the tabular learner and the
language-model learner are learning players with the same four methods."""

import inspect

import numpy as np
import pytest

from arena.league.learners import TabularLearner
from arena.league.manager import League
from arena.league.protocols import LeagueClient, LearningPlayer


def _signature_matches(impl, proto, name):
    want = [p for p in inspect.signature(getattr(proto, name)).parameters if p != "self"]
    got = [p for p in inspect.signature(getattr(impl, name)).parameters if p != "self"]
    return got[: len(want)] == want


@pytest.mark.parametrize("name", ["next_pairing", "begin", "commit", "commit_many", "attach_replay", "add_snapshot",
                                  "win_rates", "members", "player", "players", "add_player", "update_player",
                                  "transaction", "matches", "result_for", "results", "read_replay", "meta",
                                  "set_meta", "add_event"])
def test_league_implements_the_client(name):
    assert _signature_matches(League, LeagueClient, name), name


@pytest.mark.parametrize("name", ["weights", "load", "reset_to", "freeze"])
def test_learners_implement_the_learning_player(name):
    pytest.importorskip("torch")
    from arena.trainers.llm.spiral import SpiralTrainer

    for cls in (TabularLearner, SpiralTrainer):
        assert callable(getattr(cls, name, None)) and _signature_matches(cls, LearningPlayer, name), (cls, name)


def test_tabular_learner_is_a_learning_player_and_reset_to_none_starts_over(tmp_path):
    t = TabularLearner("t", tmp_path)
    assert isinstance(t, LearningPlayer)
    t.q = {"s": {"0": [1.0, 1]}}
    spec = t.update(tmp_path / "v1.json")
    assert spec == t.weights() and spec.startswith("tabular:")
    frozen = t.freeze(tmp_path / "frozen.json")
    assert frozen.startswith("tabular:") and (tmp_path / "frozen.json").exists()
    t.reset_to(None)
    assert t.q == {}
    t.reset_to(tmp_path / "v1.json")
    assert t.q == {"s": {"0": [1.0, 1]}}


def test_the_league_is_a_client(tmp_path):
    from arena.league.config import GameEntry, LeagueConfig, PlayerEntry

    cfg = LeagueConfig(name="p", games=[GameEntry("openspiel/tic_tac_toe-v0")],
                       players=[PlayerEntry("a", "random"), PlayerEntry("b", "first")], matches=0)
    league = League(cfg, tmp_path, backend="inline")
    assert isinstance(league, LeagueClient)
    assert isinstance(League.open(tmp_path), LeagueClient)


def _league(tmp_path):
    from arena.league.config import GameEntry, LeagueConfig, PlayerEntry

    cfg = LeagueConfig(name="p", games=[GameEntry("openspiel/tic_tac_toe-v0")],
                       players=[PlayerEntry("a", "random"), PlayerEntry("b", "first")], matches=0)
    return League(cfg, tmp_path, backend="inline")


def test_a_snapshot_is_one_transaction(tmp_path, monkeypatch):
    league = _league(tmp_path)
    league.store.add_player("l", "learner", "random", ["openspiel/tic_tac_toe-v0"], role="main", owner="t")

    def fail(*a, **kw):
        raise RuntimeError("killed")

    monkeypatch.setattr(league.store, "add_event", fail)
    with pytest.raises(RuntimeError):
        league.add_snapshot("l", "random")
    store = league.store
    assert store.player("l@1") is None and (store.player("l").state or {}).get("snapshots", 0) == 0
    monkeypatch.undo()
    assert league.add_snapshot("l", "random") == "l@1" and store.player("l@1").owner == "t"


def test_a_trainer_pairs_with_its_own_generator(tmp_path):
    """`next_pairing(learner, rng)` draws from the caller's generator only: the league's stays where it was,
    and the same generator state gives the same pairing."""
    league = _league(tmp_path)
    league.add_player("l", "learner", "random", ["openspiel/tic_tac_toe-v0"], role="main")
    before = league.rng.bit_generator.state
    a = [league.next_pairing("l", np.random.default_rng(7)) for _ in range(3)]
    assert league.rng.bit_generator.state == before
    assert [p.players for p in a] == [league.next_pairing("l", np.random.default_rng(7)).players for _ in range(3)]
