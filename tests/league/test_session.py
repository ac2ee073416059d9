"""A trainer's session with a league (`arena.league.session`): one owner's players, the role rules run by
the league, and an iteration's bundle applied once however often it is handed in."""

import numpy as np
import pytest

from arena.league.manager import open_league
from arena.league.session import Bundle, LeagueSpec, PlayedMatch, SharedLeague, Snapshot, open_session
from arena.match.batch import play_matches

GAME = "openspiel/tic_tac_toe-v0"


def _played(n, seed=0):
    out = []
    play_matches(GAME, ["random", "first"], n, seed=seed, record="actions", on_result=out.append)
    return sorted(out, key=lambda r: r.seed)


def _spec(**kw):
    return LeagueSpec(GAME, seed=3, opponents={"random": "random", "first": "first"}, name="s", **kw)


def test_apply_is_one_transaction_once_per_owner_and_iteration(tmp_path):
    s = open_session(_spec(), tmp_path, "scc")
    try:
        assert s.join("main", "learner", "random", role="main", state={"snapshots": 0})
        assert not s.join("main", "learner", "first")  # joined already: unchanged
        assert s.player("main").spec == "random" and s.player("main").owner == "scc"
        res = _played(3)
        bundle = Bundle([PlayedMatch(["main", "first"], ["random", "first"], r, "pfsp", "training") for r in res],
                        players={"main": {"spec": "first", "version": 1}},
                        snapshots=[Snapshot("main", "random", "main@1")],
                        events=[{"kind": "reset", "player": "main", "branched_from": None}])
        assert s.applied() == -1
        assert s.apply(1, bundle) is True
        assert s.apply(1, bundle) is False and s.apply(0, bundle) is False  # applied: nothing twice
        assert s.applied() == 1
    finally:
        s.close()
    store = open_league(tmp_path)
    assert len(store.results(game=GAME)) == 3
    assert store.player("main").spec == "first" and store.player("main").version == 1
    snap = store.player("main@1")
    assert snap.kind == "historical" and snap.parent == "main" and snap.owner == "scc"
    assert [e["kind"] for e in store.events() if e.get("player") == "main"] == ["snapshot", "reset"]


def test_a_second_owner_has_its_own_mark_and_a_legacy_mark_is_adopted(tmp_path):
    shared = SharedLeague(_spec(), tmp_path, config_owner="mixed/config")
    try:
        a, b = shared.session("scc:policy"), shared.session("spiral:llm")
        a.join("p", "learner", "random", role="main")
        assert a.apply(4, Bundle()) and b.applied() == -1 and b.apply(1, Bundle())
        a._league.set_meta("scc_applied", 9)  # a league written by an older policy trainer
        assert shared.session("scc:other").applied() == 9 and shared.session("spiral:x").applied() == -1
        a.close()  # a shared league is its opener's to close
        assert shared.player("p") is not None
    finally:
        shared.close()


def test_recorded_matches_are_read_back_by_their_note(tmp_path):
    s = open_session(_spec(), tmp_path, "scc")
    try:
        res = _played(4, seed=100)
        s.record([PlayedMatch(["random", "first"], ["random", "first"], r, "imitation", "imitation") for r in res[:3]])
        s.record([PlayedMatch(["random", "first"], ["random", "first"], res[3], "x", "other")])
        kept = sorted(s.kept("imitation"), key=lambda k: k[0])
        assert [k[0] for k in kept] == [r.seed for r in res[:3]]
        assert all(k[2] == ["random", "first"] and k[1].header["seed"] == k[0] for k in kept)
    finally:
        s.close()


def test_the_role_rules_run_inside_the_league(tmp_path):
    """An exploiter's step comes from the league's own rule: a due snapshot, then a reset that branches
    from the main (a main exploiter resets at each snapshot)."""
    s = open_session(_spec(), tmp_path, "scc")
    try:
        s.join("main", "learner", "random", role="main", state={"snapshots": 0})
        s.join("hunter", "learner", "random", role="main_exploiter", state={"snapshots": 0})
        rng = np.random.default_rng(0)
        assert not s.role_step("hunter", rng).snapshot  # no steps yet, not due
        step = s.role_step("hunter", rng, due=True)
        assert step.snapshot and step.reset and step.branch_from == "main"
        main = s.role_step("main", rng, due=True)
        assert main.snapshot and not main.reset
        with pytest.raises(KeyError):
            s.role_step("nobody", rng)
        assert s.opponent("main", np.random.default_rng(1))[0] in {"main", "hunter", "random", "first"}
    finally:
        s.close()


def test_claim_owns_unowned_players_and_reactivates_teachers(tmp_path):
    s = open_session(_spec(), tmp_path, "scc")
    try:
        s._league.add_player("old", "learner", "random", [GAME])
        s._league.add_player("teacher", "fixed", "first", [GAME])
        s._league.update_player("teacher", active=0)
        s.claim({"old", "teacher"}, reactivate={"teacher"})
        assert s.player("old").owner == "scc" and s.player("teacher").owner == "scc" and s.player("teacher").active
        assert s.player("random").owner == "scc/config"  # the config's players: the config owner's
    finally:
        s.close()
