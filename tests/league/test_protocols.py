"""The league's seams: League is the client every caller uses; the tabular learner and the
language-model learner are learning players with the same four methods."""

import inspect

import pytest

from arena.league.learners import TabularLearner
from arena.league.manager import League
from arena.league.protocols import LeagueClient, LearningPlayer


def _signature_matches(impl, proto, name):
    want = [p for p in inspect.signature(getattr(proto, name)).parameters if p != "self"]
    got = [p for p in inspect.signature(getattr(impl, name)).parameters if p != "self"]
    return got[: len(want)] == want


@pytest.mark.parametrize("name", ["next_pairing", "begin", "commit", "add_snapshot"])
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
