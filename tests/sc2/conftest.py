"""Fixtures shared by the StarCraft II tests: the sc2 extra (skip without it) and a fake
``$SC2PATH`` (`fake_sc2.make_sc2path`) after which no fake game process may still run."""

from __future__ import annotations

import pytest

try:
    from arena.envs.sc2 import stand_in as fake_sc2
except ImportError:  # it needs s2clientprotocol, which comes with the sc2 extra; the tests skip
    fake_sc2 = None

SKIP_REASON = 'pysc2-evolved (the sc2 extra) is not installed: pip install "arena[sc2]"'
FAKE_SWITCHES = ("FAKE_SC2_DIE_AT_LOOP", "FAKE_SC2_REJECT_ABILITY", "FAKE_SC2_EPISODE_LOOPS", "FAKE_SC2_LISTEN_DELAY",
                 "FAKE_SC2_BOT_PASSIVE", "FAKE_SC2_TRACE")


@pytest.fixture
def pysc2():
    return pytest.importorskip("pysc2_evolved", reason=SKIP_REASON)


@pytest.fixture
def sc2path(pysc2, tmp_path, monkeypatch):
    """A fake StarCraft II install as ``$SC2PATH``; afterwards, no fake game may still run."""
    root = fake_sc2.make_sc2path(tmp_path / "StarCraftII")
    monkeypatch.setenv("SC2PATH", str(root))
    for name in FAKE_SWITCHES:
        monkeypatch.delenv(name, raising=False)
    yield root
    alive = [r["pid"] for r in fake_sc2.launches(root) if fake_sc2.alive(r["pid"])]
    assert not alive, f"fake game processes still running after the test: {alive}"

