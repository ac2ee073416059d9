"""Imitation learns from what the teachers saw as they played (`MatchResult.observed`): nothing
re-simulates the run's own teacher matches, and a run killed while they are played resumes with the
very demonstrations of a run that never stopped (each committed group's are written to the run
folder before its commit; a kept match without them, from an older run folder, is re-simulated)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from arena.config import from_dict  # noqa: E402
from arena.errors import ArenaError  # noqa: E402
from arena.match import verify  # noqa: E402
from arena.trainers.policy import imitation  # noqa: E402
from arena.trainers.policy.config import SCCConfig  # noqa: E402
from arena.trainers.policy.scc import SCCTrainer  # noqa: E402

GAME = "openspiel/tic_tac_toe-v0"


class Killed(BaseException):
    pass


def config(**il) -> SCCConfig:
    return from_dict(SCCConfig, {
        "game": GAME, "seed": 3, "threads": 1, "sizes": {"hidden": [16], "channels": 4},
        "il": {"teachers": ["first", "random"], "label": "mcts:simulations=8", "matches": 12, "workers": 1,
               "epochs": 1, **il},
        "learners": [{"name": "main", "role": "main"}], "iterations": 0, "eval": {"every": 1, "games": 2}})


def demonstrations_of(cfg, folder, monkeypatch) -> imitation.Demonstrations:
    """The demonstrations the run's imitation stage splits (the run is played to its end)."""
    seen = []
    real = imitation.split

    def split(demos, *a, **kw):
        seen.append(demos)
        return real(demos, *a, **kw)

    with monkeypatch.context() as m:
        m.setattr(imitation, "split", split)
        t = SCCTrainer(cfg, folder)
        try:
            t.run()
        finally:
            t.close()
    return seen[0]


def assert_same(a, b):
    assert sorted(a.obs) == sorted(b.obs)
    pairs = [(f"obs:{k}", a.obs[k], b.obs[k]) for k in a.obs]
    pairs += [(name, getattr(a, name), getattr(b, name)) for name in ("actions", "outcome", "match", "probs")]
    for name, x, y in pairs:
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and np.array_equal(x, y), name


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    try:
        return demonstrations_of(config(), tmp_path_factory.mktemp("whole") / "run", mp)
    finally:
        mp.undo()


def test_teacher_matches_are_never_resimulated(whole, tmp_path, monkeypatch):
    def no(*a, **kw):
        raise AssertionError("observed_moves called")

    monkeypatch.setattr(verify, "observed_moves", no)
    demos = demonstrations_of(config(), tmp_path / "run", monkeypatch)
    assert_same(demos, whole)
    assert demos.probs is not None and len(np.unique(demos.match)) == 12  # the labeller answered every move
    # the 12 matches are one commit group: one file
    assert sorted(p.name for p in (tmp_path / "run" / "demonstrations" / "imitation").glob("*.npz")) == \
        ["00000-00011.npz"]


def killed_after(cfg, folder, monkeypatch, k: int) -> None:
    """Run until `k` teacher matches are committed, one a group, and die there (a kill -9)."""
    from arena.trainers.policy import scc

    real = SCCTrainer._commit_matches

    def commit_then_die(self, results, names, note, base, kept):
        real(self, results, names, note, base, kept)
        if len(kept) >= k:
            raise Killed()

    with monkeypatch.context() as m:
        m.setattr(SCCTrainer, "_commit_matches", commit_then_die)
        m.setattr(scc, "COMMIT_GROUP", 1)  # the resumed run commits in the default groups: the same demonstrations
        t = SCCTrainer(cfg, folder)
        try:
            with pytest.raises(Killed):
                t.run()
        finally:
            t.close()


def test_killed_while_the_teachers_play_resumes_with_the_same_demonstrations(whole, tmp_path, monkeypatch):
    folder = tmp_path / "run"
    killed_after(config(), folder, monkeypatch, 5)
    # a file a killed run wrote before its commit reached the league is not read back
    files = folder / "demonstrations" / "imitation"
    demos, _ = imitation.load_demonstrations(files / "00004-00004.npz")
    imitation.save_demonstrations(files / "00005-00005.npz", demos, [5])

    def no(*a, **kw):
        raise AssertionError("observed_moves called")

    monkeypatch.setattr(verify, "observed_moves", no)
    assert_same(demonstrations_of(config(), folder, monkeypatch), whole)


def test_kept_matches_without_their_files_are_resimulated(tmp_path, monkeypatch):
    cfg = config(label=None)  # moves alone: a re-simulation gives exactly what was seen
    whole = demonstrations_of(cfg, tmp_path / "whole", monkeypatch)
    folder = tmp_path / "run"
    killed_after(cfg, folder, monkeypatch, 5)
    for path in (folder / "demonstrations" / "imitation").glob("*.npz"):  # a run folder of an older version
        path.unlink()
    calls = []
    real = verify.observed_moves
    monkeypatch.setattr(verify, "observed_moves", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    assert_same(demonstrations_of(cfg, folder, monkeypatch), whole)
    assert len(calls) == 5


def test_a_game_that_cannot_be_resimulated_says_what_to_do(tmp_path, monkeypatch):
    from arena.envs.registry import make_core

    cfg = config(label=None)
    folder = tmp_path / "run"
    killed_after(cfg, folder, monkeypatch, 3)
    for path in (folder / "demonstrations" / "imitation").glob("*.npz"):
        path.unlink()
    monkeypatch.setattr(type(make_core(GAME)), "resimulates", False)
    t = SCCTrainer(cfg, folder)
    try:
        with pytest.raises(ArenaError, match="cannot be re-simulated.*new folder"):
            t.run()
    finally:
        t.close()


def test_demonstrations_written_before_inputs_were_one_dict_load_as_the_dict(tmp_path):
    """A run folder's demonstrations from before every input was a dict (a one-tensor game's tensor and
    mask as two arrays) read back as ``{"obs", "mask"}``, so such a run resumes."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    mask = np.array([[True, False, True], [True, True, False]])
    np.savez(tmp_path / "old.npz", indices=np.array([4, 5]), obs=x, mask=mask, actions=np.array([0, 1]),
             outcome=np.array([1.0, -1.0], np.float32), match=np.array([4, 5]))
    demos, indices = imitation.load_demonstrations(tmp_path / "old.npz")
    assert indices.tolist() == [4, 5] and sorted(demos.obs) == ["mask", "obs"]
    assert np.array_equal(demos.obs["obs"], x) and np.array_equal(demos.obs["mask"], mask)
    imitation.save_demonstrations(tmp_path / "new.npz", demos, indices)
    again, _ = imitation.load_demonstrations(tmp_path / "new.npz")
    assert np.array_equal(again.obs["mask"], mask) and again.actions.tolist() == [0, 1]
