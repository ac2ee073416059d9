"""MCTS's two backends and its readable policy (root visit shares); `policy_mcts:`, PUCT over a policy's
priors and value head."""

import pytest

torch = pytest.importorskip("torch")

from arena.agents.specs import make_agent  # noqa: E402
from arena.envs.observation import ShownLegal  # noqa: E402
from arena.envs.registry import make_core  # noqa: E402
from arena.errors import AgentSpecError, IncompatibleAgent  # noqa: E402
from arena.inference.policy_nets import build_policy, save_policy, spec_from_core  # noqa: E402
from arena.match.batch import play_matches, summarize  # noqa: E402
from arena.match.loop import play_match  # noqa: E402

C4 = "openspiel/connect_four-v0"


def _position(game: str, moves: list[int]):
    core = make_core(game)
    core.reset(0)
    for a in moves:
        core.apply(core.current_player(), a)
    p = core.current_player()
    return core, ShownLegal(core, p, len(moves), core.legal_actions(p))


def test_cpp_mcts_plays_the_python_one_and_finds_the_win():
    """The C++ backend is the same search: it takes a win in one at once, its visit shares put most of the
    root's visits on the winning move, and its seeded matches repeat."""
    # X (player 0) has three in column 0 with O on column 1: column 0 wins at once
    core, obs = _position(C4, [0, 1, 0, 1, 0, 1])
    for backend in ("python", "cpp"):
        agent = make_agent(f"mcts:simulations=200,backend={backend}", core, 3)
        assert agent.act(obs) == 0
        shares = agent.search_policy(obs)
        assert len(shares) == len(obs.legal_actions) and sum(shares) == pytest.approx(1.0)
        assert shares[obs.legal_actions.index(0)] > 0.5, (backend, shares)
    a = play_match(C4, ["mcts:simulations=50,backend=cpp", "random"], seed=7, record="actions").replay.steps
    b = play_match(C4, ["mcts:simulations=50,backend=cpp", "random"], seed=7, record="actions").replay.steps
    assert [s["action"] for s in a] == [s["action"] for s in b]
    from arena.agents.search import MCTSAgent

    assert MCTSAgent(core, simulations=50, uct_c=1.5, backend="cpp").spec == \
        "mcts:simulations=50,rollouts=1,uct_c=1.5,backend=cpp"  # what rebuilds it
    with pytest.raises(AgentSpecError, match="backend must be python or cpp"):
        make_agent("mcts:backend=java", core, 0)
    # epsilon: a uniformly random legal move with that probability (teacher matches with blunders in them)
    noisy = make_agent("mcts:simulations=50,backend=cpp,epsilon=1", core, 0)
    assert len({noisy.act(obs) for _ in range(60)}) == len(obs.legal_actions)
    assert {make_agent("mcts:simulations=50,backend=cpp,epsilon=0", core, i).act(obs) for i in range(5)} == {0}


@pytest.fixture(scope="module")
def c4_policy(tmp_path_factory):
    torch.manual_seed(0)
    net = build_policy(spec_from_core(make_core(C4)), channels=8, hidden=[32])
    return save_policy(tmp_path_factory.mktemp("pol") / "c4", net)


def test_policy_mcts_searches_with_the_networks_priors_and_value(c4_policy):
    """With two simulations (the least: the first evaluates the root, the second expands it) the search sees
    one child: its move is the prior's argmax among the
    legal moves. With more, it finds a win in one that an untrained prior does not favour, and blocks
    the opponent's; it plays whole matches without an invalid move."""
    from arena.agents.policy_search import PolicyMCTSAgent

    core, obs = _position(C4, [0, 1, 0, 1, 0, 1])
    one = make_agent(f"policy_mcts:{c4_policy},simulations=2", core, 0)
    assert isinstance(one, PolicyMCTSAgent)
    raw = obs.raw
    from arena.inference.policy_nets import policy_inputs

    x = policy_inputs(raw, obs.player, one.net.spec)
    with torch.no_grad():
        dist, _ = one.net({k: torch.as_tensor(v)[None] for k, v in x.items()})
    probs = dist.probs[0].numpy()
    assert one.act(obs) == int(max(obs.legal_actions, key=lambda a: probs[a]))
    deep = make_agent(f"policy_mcts:{c4_policy},simulations=100", core, 0)
    assert deep.act(obs) == 0  # the win
    assert deep.search_policy(obs)[obs.legal_actions.index(0)] > 0.5
    # O to move after X's three in column 0 (O elsewhere): O must block column 0
    core, obs = _position(C4, [0, 1, 0, 2, 0])
    assert make_agent(f"policy_mcts:{c4_policy},simulations=100", core, 0).act(obs) == 0
    for seed in range(2):
        r = play_match(C4, [f"policy_mcts:{c4_policy},simulations=20", "random"], seed=seed)
        assert r.outcome == "normal" and r.invalid == [0, 0]


def test_policy_mcts_beats_random_and_refuses_what_it_cannot_search(c4_policy, tmp_path):
    res = play_matches(C4, [f"policy_mcts:{c4_policy},simulations=50", "random"], 6, seed=0)
    me, _ = summarize(res, ["policy_mcts", "random"])  # labels of the two specs, in order
    assert me.wins >= 5  # search with a value head of noise still sees wins and blocks
    with pytest.raises(AgentSpecError, match="need a checkpoint"):
        make_agent("policy_mcts", make_core(C4), 0)
    with pytest.raises(AgentSpecError, match="simulations must be an integer >= 2"):
        make_agent(f"policy_mcts:{c4_policy},simulations=1", make_core(C4), 0)
    with pytest.raises(AgentSpecError, match="unknown option 'greedy'"):
        make_agent(f"policy_mcts:{c4_policy},greedy=true", make_core(C4), 0)
    leduc = make_core("openspiel/leduc_poker-v0")
    net = build_policy(spec_from_core(leduc), hidden=[16])
    folder = save_policy(tmp_path / "leduc", net)
    with pytest.raises(IncompatibleAgent, match="two-player zero-sum perfect-information"):
        make_agent(f"policy_mcts:{folder}", leduc, 0)


def test_policy_mcts_explores_its_openings_and_labels_its_own_moves(c4_policy):
    """``explore=K``: the first K moves are drawn from the root's visits (self-play games differ), the rest
    greedy; without it every seed plays the same game. Asked ``"played"``, each observed move carries the
    visit shares of the very search that chose it (a greedy move is their argmax), and the match is the
    same move for move as one nobody asked; a player that would have to search again is refused."""
    from arena.errors import ArenaError
    from arena.match.loop import Match

    greedy = f"policy_mcts:{c4_policy},simulations=16"
    games = {tuple(s["action"] for s in play_match(C4, [greedy, greedy], seed=s, record="actions").replay.steps)
             for s in range(3)}
    assert len(games) == 1
    spec = f"policy_mcts:{c4_policy},simulations=16,explore=4"
    asked = play_matches(C4, [spec, spec], 4, seed=0, record="actions", observe=[0, 1], ask="played")
    plain = play_matches(C4, [spec, spec], 4, seed=0, record="actions")
    moves = [tuple(s["action"] for s in r.replay.steps) for r in asked]
    assert moves == [tuple(s["action"] for s in r.replay.steps) for r in plain]
    assert len({m[:4] for m in moves}) > 1 and len(set(moves)) > 1
    for r in asked:
        assert len(r.observed) == len(r.replay.steps)
        for k, (_seat, _raw, action, (legal, shares)) in enumerate(r.observed):
            assert sum(shares) == pytest.approx(1.0) and shares[legal.index(action)] > 0
            if k >= 4:  # past the openings: the most visited move (or a proven win) was played
                assert shares[legal.index(action)] == max(shares)
    assert make_agent(spec, make_core(C4), 0).spec == spec
    with pytest.raises(AgentSpecError, match="explore"):
        make_agent(f"policy_mcts:{c4_policy},explore=-1", make_core(C4), 0)
    with pytest.raises(ArenaError, match="cannot label its own moves"):
        Match(C4, ["mcts:simulations=8", "random"], 0, observe=[0], ask={0: "played"})
