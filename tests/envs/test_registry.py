import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo import ParallelEnv
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

from arena.envs import list_game_ids, load_plugin, make, make_core, register_game
from arena.envs.registry import CURATED_TEXT_GAMES, OPENSPIEL_GAMES, describe_games
from arena.errors import DuplicateGameId, GameNotFound

# StarCraft II ids need the game (a reset launches it): tests/sc2 runs the checkers over the test game.
BUILTIN = [g for g in list_game_ids() if not g.startswith("sc2/")]
#: Built-in single-agent Gymnasium envs (the OpenSim task): Gymnasium's checker, not PettingZoo's.
SINGLE = [g for g in BUILTIN if g.startswith("arena/Prosthetics")]
MULTI = [g for g in BUILTIN if g not in SINGLE]


def test_builtin_ids_registered_in_gymnasium_registry():
    ids = set(BUILTIN)
    for name in OPENSPIEL_GAMES:
        assert f"openspiel/{name}-v0" in ids
    for gid in CURATED_TEXT_GAMES:
        assert gid in ids
        assert gid in gymnasium.envs.registry
    spec = gymnasium.spec("arena/KuhnPoker-v1")
    assert isinstance(spec.entry_point, str) and ":" in spec.entry_point


@pytest.mark.parametrize("game_id", MULTI)
def test_pettingzoo_api_test(game_id):
    env = make(game_id)
    if isinstance(env, ParallelEnv):  # a simultaneous-move game (Skirmish): PettingZoo's parallel checker
        parallel_api_test(env, num_cycles=50)
    else:
        api_test(env, num_cycles=50)


@pytest.mark.parametrize("game_id", SINGLE)
def test_gymnasium_check_env(game_id):
    pytest.importorskip("opensim")
    env = make(game_id)
    assert isinstance(env, gymnasium.Env)
    check_env(env.unwrapped)  # spaces, reset/step signatures, seeded determinism, render modes


@pytest.mark.parametrize("game_id", MULTI)
def test_pettingzoo_seed_test(game_id):
    if isinstance(make(game_id), ParallelEnv):
        parallel_seed_test(lambda: make(game_id), num_cycles=50)
    else:
        seed_test(lambda: make(game_id), num_cycles=50)


def test_plugin_games_pass_their_checkers(sample_plugin):
    assert set(sample_plugin) == {"plugin/TicTacToePZ-v3", "plugin/RockPaperScissors-v2", "plugin/Pendulum-v1"}
    assert set(sample_plugin) <= set(list_game_ids())
    api_test(make("plugin/TicTacToePZ-v3"), num_cycles=20)
    env = make("plugin/Pendulum-v1")
    check_env(env.unwrapped)
    assert isinstance(env, gymnasium.Env)


def test_any_pyspiel_name_works_without_registration():
    core = make_core("openspiel/othello-v0")
    core.reset(0)
    assert core.players == ["player_0", "player_1"]
    assert len(core.legal_actions(core.current_player())) == 4


def test_any_textarena_id_works_without_registration():
    core = make_core("textarena/ConnectFour-v0")
    core.reset(1)
    assert core.action_kind == "text"
    assert "ConnectFour" in core.game_id


def test_unknown_id_names_a_close_match():
    with pytest.raises(GameNotFound, match="arena/TicTacToe-v0"):
        make("arena/TicTacToe-v9")
    with pytest.raises(GameNotFound, match="arena envs list"):
        make("nothing/like-this-v0")


def test_duplicate_id_is_an_error():
    with pytest.raises(DuplicateGameId, match="already registered"):
        register_game("arena/TicTacToe-v0", "arena.envs.registry:textarena_env", {"env_id": "TicTacToe-v0"})
    with pytest.raises(DuplicateGameId, match="already exists"):
        load_plugin("plugins.duplicate_games")
    # the original registration is untouched
    assert "arena.envs.registry" in gymnasium.spec("openspiel/tic_tac_toe-v0").entry_point


def test_missing_plugin_module_is_a_clear_error():
    with pytest.raises(GameNotFound, match="could not be imported"):
        load_plugin("no_such_module_xyz")


def test_describe_lists_players_action_and_source(sample_plugin):
    rows = {r["id"]: r for r in describe_games()}
    assert rows["openspiel/kuhn_poker-v0"]["players"] == 2
    assert rows["openspiel/kuhn_poker-v0"]["info"] == "imperfect"
    assert rows["arena/SimpleNegotiation-v1"]["action"] == "text"
    assert rows["arena/SimpleNegotiation-v1"]["source"] == "textarena"
    assert rows["plugin/Pendulum-v1"]["action"] == "continuous"
    assert rows["plugin/RockPaperScissors-v2"]["source"] == "pettingzoo"


def test_kuhn_v1_is_spirals_setting():
    core = make_core("arena/KuhnPoker-v1")
    assert core.base.max_rounds == 5 and core.base.ante == 1
    neg = make_core("arena/SimpleNegotiation-v1")
    assert neg.base.max_turns == 10


def test_entry_point_group_plugins(tmp_path, monkeypatch):
    """An installed package registers games through the `arena.envs` entry-point group."""
    import sys

    from arena.envs.registry import load_entry_point_plugins

    pkg = tmp_path / "entry_games.py"
    pkg.write_text('import gymnasium\ngymnasium.register(id="ep/Pendulum-v1", '
                   'entry_point="gymnasium.envs.classic_control.pendulum:PendulumEnv", max_episode_steps=20)\n')
    dist = tmp_path / "entry_games-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: entry-games\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[arena.envs.test]\nentry_games = entry_games\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    added = load_entry_point_plugins("arena.envs.test")
    assert added == ["ep/Pendulum-v1"]
    assert "ep/Pendulum-v1" in list_game_ids()
    sys.modules.pop("entry_games", None)


def test_which_seat_moves_first_is_the_games_own_rule():
    """No seat number means "first" for every game: TextArena's Kuhn poker opens with seat 1, OpenSpiel's
    with seat 0; in Skirmish both sides move at once."""
    from arena.envs.registry import first_mover
    from arena.match import play_match
    from arena.ui.web.replays import replay_json

    assert first_mover("arena/KuhnPoker-v1") == 1 and first_mover("arena/KuhnPoker-v2") == 1
    assert first_mover("openspiel/kuhn_poker-v0") == 0 and first_mover("openspiel/tic_tac_toe-v0") == 0
    assert first_mover("arena/Skirmish-3m-v0") is None
    replay = play_match(make_core("arena/KuhnPoker-v1"), ["random", "random"], seed=5).replay
    first = replay.steps[0]["player"]
    assert first == 1 and replay_json(replay, "m1")["first"] == 1  # the replay page marks seat 1
