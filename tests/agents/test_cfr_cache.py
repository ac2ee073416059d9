"""CFR+ solutions are solved once per machine and read back bit for bit: Leduc takes 90-110 s to
solve, and every worker process of a league used to solve it again, silently."""

import pytest

from arena.agents import search
from arena.agents.specs import make_agent
from arena.envs.registry import make_core
from arena.match import play_match


def test_a_solved_policy_is_cached_said_once_and_plays_the_same(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ARENA_CACHE", str(tmp_path))
    monkeypatch.setattr(search, "_CFR_CACHE", {})
    spec = "cfr:iterations=50"
    first = play_match("openspiel/kuhn_poker-v0", [spec, "random"], seed=3, record="actions", match_id="k")
    err = capsys.readouterr().err
    assert "solving CFR+ for kuhn_poker() (50 iterations, once; kept in" in err
    files = list((tmp_path / "cfr").glob("kuhn_poker*-50-open_spiel*.json"))
    assert len(files) == 1
    solved = search._CFR_CACHE[("kuhn_poker()", 50)]

    # a new process (an empty in-process cache) reads the file and never solves
    monkeypatch.setattr(search, "_CFR_CACHE", {})
    monkeypatch.setattr(search, "_solve", lambda *a: pytest.fail("solved again instead of reading the cache"))
    again = play_match("openspiel/kuhn_poker-v0", [spec, "random"], seed=3, record="actions", match_id="k")
    assert capsys.readouterr().err == ""
    assert again.replay.without_timing() == first.replay.without_timing()
    read = search._CFR_CACHE[("kuhn_poker()", 50)]
    core = make_core("openspiel/kuhn_poker-v0")
    agent = make_agent(spec, core, 0)
    for key in ("0", "1pb", "2p"):
        assert read.policy_for_key(key) == [float(x) for x in solved.policy_for_key(key)]
    assert agent.policy is read


def test_a_damaged_cache_file_is_solved_again(tmp_path, monkeypatch):
    monkeypatch.setenv("ARENA_CACHE", str(tmp_path))
    monkeypatch.setattr(search, "_CFR_CACHE", {})
    search.cfr_average_policy(make_core("openspiel/kuhn_poker-v0").game, 20)
    (path,) = (tmp_path / "cfr").glob("*.json")
    path.write_text("{not json")
    monkeypatch.setattr(search, "_CFR_CACHE", {})
    pol = search.cfr_average_policy(make_core("openspiel/kuhn_poker-v0").game, 20)
    assert len(pol.policy_for_key("0")) == 2 and path.read_text().startswith("{\"")
