"""The game contract is declared once: every hook on `GameCore`, with its default and a docstring, and
read as a plain attribute or call everywhere (never through getattr/hasattr with a default of the
reader's own). A plug-in core with only the required parts plays, replays and is stepped through
PettingZoo on the defaults; and the PettingZoo facades play by the match engine's invalid-move rule."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest
from pettingzoo.test import api_test, seed_test

import arena
from arena.envs import load_plugin, make, make_core
from arena.envs.core import GameCore, InvalidMovePolicy
from arena.envs.observation import Observation
from arena.match import play_match
from arena.match.verify import replay_views, verify_replay

ARENA = Path(arena.__file__).parent
CORE_SOURCE = Path(inspect.getfile(GameCore))

#: getattr/hasattr calls under arena/ that name a `GameCore` member but read another object:
#: (file, the object read, the name).
OTHER_OBJECTS = {
    ("arena/envs/farama.py", "getattr(env, 'unwrapped', env)", "engine"),  # an env that names its engine
    ("arena/envs/textarena_core.py", "env", "env"),  # TextArena's wrapper chain
}
#: Names the agent and engine protocols share with the core; those objects are read by them.
SHARED = {"reset", "close"}


def declared() -> dict[str, str]:
    """Every public member `GameCore` declares, with how it is documented ("" where it is not)."""
    tree = ast.parse(CORE_SOURCE.read_text())
    lines = CORE_SOURCE.read_text().splitlines()
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GameCore")
    out: dict[str, str] = {}
    for node in cls.body:
        if isinstance(node, (ast.AnnAssign, ast.Assign)):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            comment = lines[node.lineno - 2].strip()
            for t in targets:
                if isinstance(t, ast.Name) and not t.id.startswith("_"):
                    out[t.id] = comment[2:].strip() if comment.startswith("#:") else ""
        elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            out[node.name] = ast.get_docstring(node) or ""
    return out


def test_game_core_declares_every_hook_with_a_docstring():
    hooks = declared()
    undocumented = sorted(name for name, doc in hooks.items() if not doc)
    assert not undocumented, f"GameCore members without a docstring (or a #: comment): {undocumented}"
    # the optional hooks the arena reads: each declared with its default on the class itself
    for name in ("perfect_information", "resimulates", "privileged_dim", "outcome_reason", "truncated", "info",
                 "env", "apply_fast", "scoring", "action_kind", "source", "game_id", "max_action_chars",
                 "shaped_rewards", "seat_agents", "end_match", "attachments", "human_view", "rules",
                 "information_state", "all_observations", "battle", "mirror", "privileged", "watch_hint",
                 "not_resimulated", "check_replay"):
        assert name in hooks and name in vars(GameCore), name
    # what every core sets itself: declared, with no default to fall back on
    for name in ("players", "engine", "settings"):
        assert name in hooks and name in GameCore.__annotations__ and name not in vars(GameCore)


def test_no_module_reads_a_declared_hook_through_getattr():
    names = set(declared()) - SHARED
    found = []
    for path in sorted(ARENA.rglob("*.py")):
        rel = path.relative_to(ARENA.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value in names):
                key = (rel, ast.unparse(node.args[0]), node.args[1].value)
                if key not in OTHER_OBJECTS:
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "read the declared GameCore attribute instead:\n" + "\n".join(found)


# -- a plug-in core with only the required parts ---------------------------------------------------
@pytest.fixture(scope="module")
def take():
    load_plugin("plugins.minimal_games")
    return "test/Take-v0"


def test_a_minimal_core_has_the_declared_defaults(take):
    core = make_core(take)
    core.reset(3)
    assert (core.perfect_information, core.resimulates, core.privileged_dim) == (False, True, 0)
    assert (core.outcome_reason, core.truncated, dict(core.info), core.env, core.apply_fast) == ("", False, {}, None, None)
    assert core.scoring is None and core.action_kind == "discrete" and core.lists_legal_moves
    assert core.shaped_rewards() is None and core.attachments() is None and core.battle() is None
    assert core.mirror() is None and core.privileged(0) is None and core.rules(0) is None
    assert core.human_view(0) == core.text(0) and core.step_rewards() == [0.0, 0.0]
    assert core.seat_agents([object(), object()]) is None and core.end_match() is None
    with pytest.raises(NotImplementedError, match="test/Take-v0 has no information-state view"):
        core.information_state(0)
    with pytest.raises(NotImplementedError, match="privileged_dim"):
        core.all_observations()
    obs = Observation(core, 0, 0)
    assert obs.rules is None and obs.human_view == obs.text and obs.legal_actions == [0, 1]
    with pytest.raises(NotImplementedError):
        obs.information_state()
    assert core.validate(0, 1) == (1, None) and core.validate(0, 5)[1] == "action 5 is not legal here (legal: [0, 1])"


def test_a_minimal_core_plays_replays_and_shows(take):
    res = play_match(take, ["random", "random"], seed=7, record="text")
    assert res.outcome == "normal" and res.reason == "" and sorted(res.returns) == [-1.0, 1.0]
    assert res.attachments is None and res.replay.header["game_settings"] == {}
    assert res.replay.header["engine"] == {"take": "1"} and res.replay.header["plugin"] == "plugins.minimal_games"
    report = verify_replay(res.replay)
    assert report.ok and report.resimulated, report.differences
    views = replay_views(res.replay)
    assert views.steps == [s["obs"] for s in res.replay.steps]
    core = make_core(take)
    assert core.watch_hint(res.replay) == []
    assert core.check_replay(res.replay)["differences"] == []


def test_a_minimal_core_passes_pettingzoos_checkers(take):
    api_test(make(take), num_cycles=20)
    seed_test(lambda: make(take), num_cycles=20)


# -- one invalid-move policy ----------------------------------------------------------------------
def _always(move):
    class Always:
        def act(self, obs):
            return move
    return Always()


@pytest.mark.parametrize("allowance", [0, 1, 3])
def test_the_aec_facade_forfeits_as_the_match_engine_does(take, allowance):
    """An agent that always gives an illegal move: the engine and the facade (as RLlib steps it) end
    the match after the same number of attempts, with the same returns."""
    res = play_match(take, [_always(7), "random"], seed=1, policy=InvalidMovePolicy(allowance=allowance))
    assert res.outcome == "forfeit" and res.forfeiter == 0 and res.invalid == [allowance + 1, 0]

    env = make(take, invalid_move_limit=allowance)
    assert env.policy == InvalidMovePolicy(allowance=allowance)
    env.reset(seed=1)
    attempts = 0
    while not all(env.terminations.values()):
        assert env.agent_selection == "first"
        env.step(7)
        attempts += 1
        assert "invalid_move" in env.infos["first"]
    assert attempts == allowance + 1
    assert [env._cumulative_rewards[a] for a in env.possible_agents] == res.returns == [-1.0, 1.0]


def test_a_facade_without_a_limit_never_forfeits(take):
    env = make(take, invalid_move_limit=None)
    assert env.policy is None
    env.reset(seed=1)
    for _ in range(20):
        env.step(7)
    assert not any(env.terminations.values()) and env.agent_selection == "first"


def test_the_policy_ends_a_one_player_game_with_what_it_earned():
    policy = InvalidMovePolicy(allowance=2, loss=-5.0, win=2.0)
    assert [policy.forfeits(k) for k in (1, 2, 3)] == [False, False, True]
    assert policy.forfeit_returns(1, [0.5, 0.0, 0.0]) == [2.0, -5.0, 2.0]
    assert policy.forfeit_returns(0, [np.float32(3.5)]) == [3.5]
    with pytest.raises(ValueError, match="allowance must be >= 0"):
        InvalidMovePolicy(allowance=-1)
