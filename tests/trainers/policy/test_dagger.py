"""DAgger rounds of the imitation stage (`il.dagger`): the imitation policy plays into the league as
``main@dagger<r>``, the labeller labels the positions where it moved, and it trains on everything so
far; a run killed in the middle of a round and resumed is the same run."""

import pytest

torch = pytest.importorskip("torch")

from arena.errors import ConfigError  # noqa: E402
from arena.league.manager import open_league  # noqa: E402
from arena.trainers.common.metrics import read_metrics  # noqa: E402
from arena.trainers.policy.scc import SCCTrainer  # noqa: E402

from .test_resume_same_run import Killed, assert_same_run, config, train  # noqa: E402

DAGGER = {"teachers": ["first", "random"], "matches": 24, "workers": 1, "epochs": 3, "players": ["first"],
          "label": "mcts:simulations=30", "dagger": {"rounds": 2, "matches": 8, "epochs": 2}}


def dagger_config(**kw):
    return config(il=DAGGER, learners=[{"name": "main", "role": "main"}], iterations=2, **kw)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dagger") / "run"
    return train(dagger_config(), folder), folder


def test_each_round_plays_into_the_league_and_trains_on_its_own_positions(whole):
    t, folder = whole
    store = open_league(t.league_dir)
    for r in (1, 2):
        player = store.player(f"main@dagger{r}")
        assert player is not None and player.kind == "fixed" and player.spec == f"policy:{folder}/checkpoints/dagger{r}"
        rows = [m for m in store.matches() if m.note == f"imitation/dagger{r}"]
        assert len(rows) == 8 and all(set(m.players) == {f"main@dagger{r}", "random"} for m in rows)
        assert sorted(m.players.index(f"main@dagger{r}") for m in rows) == [0] * 4 + [1] * 4  # seats swapped
        assert all(store.result_for(m.match_id).replay for m in rows)
    meta = torch.load(folder / "checkpoints" / "il" / "policy.pt", weights_only=False)["info"]
    first = [m for m in store.matches() if m.note == "imitation"]
    assert meta["dagger_rounds"] == 2 and meta["replays"] == len(first) + 16
    # the moves trained on: the teacher's (seat "first") and every move of the two rounds' players
    theirs = sum(store.result_for(m.match_id).moves for m in store.matches() if m.note.startswith("imitation/"))
    assert 0 < meta["dagger_moves"] <= theirs
    lines = [r for r in read_metrics(folder / "metrics.jsonl") if "il/epoch" in r]
    rounds = [r.get("il/dagger_round", 0) for r in lines]
    assert rounds[:3] == [0, 0, 0] and rounds[3:] == [1, 1, 2, 2]
    assert [r["il/epoch"] for r in lines] == [1, 2, 3, 4, 5, 6, 7]


def test_killed_in_a_round_and_resumed_is_the_same_run(whole, tmp_path, monkeypatch):
    killed_three_into(dagger_config(), tmp_path / "cut", "imitation/dagger2", monkeypatch, whole)


def killed_three_into(cfg, cut, note, monkeypatch, whole) -> None:
    """The run of `cfg` killed three matches into the round of `note` (the rounds before it and those three
    matches committed), then resumed: the same run as `whole`."""
    real = SCCTrainer._commit_matches

    def commit_three_then_die(self, results, names, n, base, kept):
        if n != note:
            return real(self, results, names, n, base, kept)
        real(self, results[:3 - len(kept)], names, n, base, kept)
        if len(kept) >= 3:
            raise Killed(note)

    with monkeypatch.context() as m:
        m.setattr(SCCTrainer, "_commit_matches", commit_three_then_die)
        with pytest.raises(Killed):
            train(cfg, cut)
    assert len([m for m in open_league(cut).matches() if m.note == note]) == 3
    again = train(cfg, cut)
    assert_same_run(whole[0], whole[1], again, cut)


def test_rounds_play_the_named_opponent(tmp_path):
    cfg = config(il={**DAGGER, "dagger": {"rounds": 1, "matches": 4, "epochs": 1, "opponent": "first"}},
                 learners=[{"name": "main", "role": "main"}], iterations=0)
    t = train(cfg, tmp_path / "run")
    rows = [m for m in open_league(t.league_dir).matches() if m.note == "imitation/dagger1"]
    assert len(rows) == 4 and all(set(m.players) == {"main@dagger1", "first"} for m in rows)
    with pytest.raises(ConfigError) as e:
        SCCTrainer(config(il={**DAGGER, "dagger": {"rounds": 1, "opponent": "nosuch:x=1"}}), tmp_path / "bad")
    assert str(e.value).startswith("il.dagger.opponent:") and "\n" not in str(e.value)


def test_dagger_without_a_labeller_is_one_line():
    with pytest.raises(ConfigError) as e:
        config(il={**DAGGER, "label": None})
    assert "set il.label" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        config(il={**DAGGER, "dagger": {"rounds": 1, "matches": 1}})
    assert "matches >= 2" in str(e.value)
