"""`policy:<checkpoint>` plays anywhere an agent plays; batched and single moves agree."""

import pytest

torch = pytest.importorskip("torch")

from arena.agents.specs import make_agent  # noqa: E402
from arena.envs.observation import ShownLegal  # noqa: E402
from arena.envs.registry import make_core  # noqa: E402
from arena.errors import AgentSpecError  # noqa: E402
from arena.inference.policy_nets import build_policy, save_policy, spec_from_core  # noqa: E402
from arena.match.loop import play_match  # noqa: E402


@pytest.fixture(scope="module")
def c4_policy(tmp_path_factory):
    torch.manual_seed(0)
    net = build_policy(spec_from_core(make_core("openspiel/connect_four-v0")), channels=8, hidden=[32])
    return save_policy(tmp_path_factory.mktemp("pol") / "c4", net)


def test_policy_spec_plays_whole_matches_without_an_invalid_move(c4_policy):
    for seed in range(5):
        r = play_match("openspiel/connect_four-v0", [f"policy:{c4_policy}", "random"], seed=seed)
        assert r.outcome == "normal" and r.invalid == [0, 0] and r.moves >= 7


def test_act_batch_equals_one_move_at_a_time(c4_policy):
    core = make_core("openspiel/connect_four-v0")
    agent = make_agent(f"policy:{c4_policy},greedy=true", core, 0)
    cores, obs = [], []
    for s in range(6):
        c = make_core("openspiel/connect_four-v0")
        c.reset(s)
        for a in [s % 7, (s + 3) % 7]:
            c.apply(c.current_player(), a)
        cores.append(c)
        obs.append(ShownLegal(c, c.current_player(), 2, c.legal_actions(c.current_player())))
    assert agent.act_batch(obs) == [agent.act(o) for o in obs]


def test_seeded_sampling_is_reproducible(c4_policy):
    def moves(seed):
        return play_match("openspiel/connect_four-v0", [f"policy:{c4_policy}", f"policy:{c4_policy}"], seed=seed,
                          record="actions").replay.steps

    assert [s["action"] for s in moves(4)] == [s["action"] for s in moves(4)]


def test_missing_or_mismatched_checkpoint_is_one_line(c4_policy, tmp_path):
    ttt = make_core("openspiel/tic_tac_toe-v0")
    with pytest.raises(AgentSpecError) as e:
        make_agent(f"policy:{tmp_path}/none", ttt, 0)
    assert "no policy checkpoint at" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(AgentSpecError) as e:
        make_agent(f"policy:{c4_policy}", ttt, 0)
    assert "trained for openspiel/connect_four-v0" in str(e.value) and "tic_tac_toe" in str(e.value)
    with pytest.raises(AgentSpecError, match="need a checkpoint"):
        make_agent("policy", ttt, 0)
    with pytest.raises(AgentSpecError, match="temperature must be > 0"):
        make_agent(f"policy:{c4_policy},temperature=0", make_core("openspiel/connect_four-v0"), 0)
