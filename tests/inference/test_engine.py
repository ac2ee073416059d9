"""arena.inference.engine (HFEngine, BatchingEngine, VLLMEngine) and arena.trainers.llm.logprobs."""

from __future__ import annotations

import sys
import threading
import types

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from arena.agents.prompts import make_template  # noqa: E402
from arena.errors import ArenaError  # noqa: E402
from arena.match import InvalidMovePolicy  # noqa: E402
from arena.inference import engine as E  # noqa: E402
from arena.trainers.llm.logprobs import sequence_logprobs  # noqa: E402
from arena.inference.models import load_model, make_tiny_model_folder  # noqa: E402
from arena.trainers.llm.rollout import LEARNER, play_episodes  # noqa: E402

torch.set_num_threads(min(2, torch.get_num_threads()))

PROMPTS = [
    "Board:\n X | O | . \n",
    "Your move? \\boxed{",
    "a",
    "Legal moves: [0, 1, 2, 3, 5, 7, 8]. I choose",
    "Kuhn poker: you hold K.",
    "{}",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = make_tiny_model_folder(tmp_path_factory.mktemp("tiny"), seed=0)
    model, tok = load_model(folder)
    return folder, model, tok


@pytest.fixture(scope="module")
def engine(tiny):
    _, model, tok = tiny
    return E.HFEngine(model, tok)


def test_batched_greedy_equals_one_by_one(engine):
    batched = engine.generate(PROMPTS, max_new_tokens=24, greedy=True)
    single = [engine.generate([p], max_new_tokens=24, greedy=True)[0] for p in PROMPTS]
    for b, s in zip(batched, single):
        assert b.token_ids == s.token_ids
        assert b.text == s.text and b.finish_reason == s.finish_reason
        assert b.prompt_ids == s.prompt_ids
        assert max(abs(x - y) for x, y in zip(b.logprobs, s.logprobs)) < 1e-4
    for g, p in zip(batched, PROMPTS):
        assert g.prompt_ids == engine.tokenizer(p)["input_ids"]
        assert g.text == engine.tokenizer.decode(g.token_ids, skip_special_tokens=True)
        assert len(g.logprobs) == len(g.token_ids) and g.topk_ids is None and g.topk_logprobs is None
        assert all(lp <= 0 for lp in g.logprobs)


def test_seeded_sampling_is_reproducible_and_leaves_global_rng_alone(engine):
    state = torch.random.get_rng_state()
    a = engine.generate(PROMPTS, max_new_tokens=20, seed=7)
    b = engine.generate(PROMPTS, max_new_tokens=20, seed=7)
    c = engine.generate(PROMPTS, max_new_tokens=20, seed=8)
    assert torch.equal(state, torch.random.get_rng_state())
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    assert [g.logprobs for g in a] == [g.logprobs for g in b]
    assert [g.token_ids for g in a] != [g.token_ids for g in c]
    # rows of one batch are different samples
    same = engine.generate([PROMPTS[0]] * 4, max_new_tokens=20, seed=7)
    assert len({tuple(g.token_ids) for g in same}) > 1


def test_per_prompt_seeds_do_not_depend_on_the_batch(engine):
    """With `seeds`, a prompt's sample is the same alone, in any batch, at any position."""
    seeds = [11, 12, 13, 14, 15, 16]
    batched = engine.generate(PROMPTS, max_new_tokens=20, seeds=seeds, top_k_logprobs=3)
    reversed_ = engine.generate(PROMPTS[::-1], max_new_tokens=20, seeds=seeds[::-1], top_k_logprobs=3)[::-1]
    for i, p in enumerate(PROMPTS):
        alone = engine.generate([p], max_new_tokens=20, seeds=[seeds[i]], top_k_logprobs=3)[0]
        for other in (batched[i], reversed_[i]):
            assert other.token_ids == alone.token_ids and other.text == alone.text
            assert max(abs(a - b) for a, b in zip(other.logprobs, alone.logprobs)) < 1e-4
            assert other.topk_ids == alone.topk_ids
    # one prompt, different seeds: different samples; the same seed twice in one batch: the same sample
    rows = engine.generate([PROMPTS[0]] * 4, max_new_tokens=20, seeds=[1, 2, 3, 1])
    assert rows[0].token_ids == rows[3].token_ids
    assert len({tuple(g.token_ids) for g in rows}) > 1
    # greedy ignores seeds
    g = engine.generate(PROMPTS, max_new_tokens=8, greedy=True, seeds=seeds)
    assert [x.token_ids for x in g] == [x.token_ids for x in engine.generate(PROMPTS, max_new_tokens=8, greedy=True)]


def test_per_prompt_seeded_samples_follow_the_model_distribution(tiny, engine):
    """The Gumbel-max draws are samples of softmax(logits / T): first-token frequencies over 3,000
    seeds match the model's probabilities, and each reported log-prob is the model's."""
    _, model, tok = tiny
    prompt, T, n = PROMPTS[1], 0.7, 3000
    with torch.no_grad():
        ids = torch.tensor([engine.encode(prompt)])
        probs = torch.softmax(model(ids).logits[0, -1].float() / T, dim=-1)
    gens = engine.generate([prompt] * n, max_new_tokens=1, temperature=T, seeds=list(range(n)))
    counts = torch.bincount(torch.tensor([g.token_ids[0] for g in gens]), minlength=probs.numel()).double()
    for t in torch.topk(probs, 3).indices.tolist():
        p = float(probs[t])
        se = (p * (1 - p) / n) ** 0.5
        assert abs(counts[t] / n - p) < 4 * se + 1e-3, (t, float(counts[t] / n), p)
    for g in gens[:50]:
        assert abs(g.logprobs[0] - float(torch.log(probs[g.token_ids[0]]))) < 1e-4


def test_bad_seeds_are_clear_errors(engine):
    with pytest.raises(ArenaError, match="one seed"):
        engine.generate(PROMPTS[:2], seeds=[1])
    with pytest.raises(ArenaError, match="non-negative"):
        engine.generate(PROMPTS[:2], seeds=[1, -3])
    with pytest.raises(ArenaError, match="non-negative"):
        engine.generate(PROMPTS[:1], seeds=["7"])


def test_temperature_is_applied_when_sampling(engine):
    greedy = engine.generate(PROMPTS, max_new_tokens=16, greedy=True)
    cold = engine.generate(PROMPTS, max_new_tokens=16, temperature=1e-4, seed=0)
    assert [g.token_ids for g in cold] == [g.token_ids for g in greedy]
    hot = engine.generate(PROMPTS, max_new_tokens=16, temperature=1.0, seed=0)
    assert [g.token_ids for g in hot] != [g.token_ids for g in greedy]


@pytest.mark.parametrize("kw", [{"temperature": 1.0}, {"temperature": 0.7}, {"greedy": True}], ids=["T1", "T0.7", "greedy"])
def test_engine_logprobs_match_sequence_logprobs(tiny, engine, kw):
    _, model, tok = tiny
    gens = engine.generate(PROMPTS, max_new_tokens=32, seed=1, top_k_logprobs=4, **kw)
    T = 1.0 if kw.get("greedy") else kw["temperature"]
    out = sequence_logprobs(
        model,
        [g.prompt_ids for g in gens],
        [g.token_ids for g in gens],
        topk_ids=[g.topk_ids for g in gens],
        pad_id=tok.pad_token_id,
        temperature=T,
    )
    B, Tmax = len(gens), max(len(g.token_ids) for g in gens)
    assert out["logp"].shape == out["mask"].shape == out["entropy"].shape == (B, Tmax)
    assert out["topk_logp"].shape == (B, Tmax, 4)
    for i, g in enumerate(gens):
        n = len(g.token_ids)
        assert out["mask"][i, :n].eq(1).all() and out["mask"][i, n:].eq(0).all()
        got = out["logp"][i, :n].detach()
        assert (got - torch.tensor(g.logprobs)).abs().max().item() < 1e-4
        assert (out["topk_logp"][i, :n].detach() - torch.tensor(g.topk_logprobs)).abs().max().item() < 1e-4
        assert out["logp"][i, n:].eq(0).all()
    assert out["logp"].requires_grad and not out["entropy"].requires_grad
    assert (out["entropy"] >= 0).all()
    loss = -(out["logp"].sum() + out["topk_logp"].sum())
    loss.backward()
    assert model.model.embed_tokens.weight.grad is not None
    model.zero_grad(set_to_none=True)


def test_sequence_logprobs_alignment_by_hand(tiny):
    """logits at position i predict token i + 1: check one row against a plain forward pass."""
    _, model, tok = tiny
    prompt = tok("ab")["input_ids"]
    resp = tok("cde", add_special_tokens=False)["input_ids"]
    out = sequence_logprobs(model, [prompt, tok("xyzw")["input_ids"]], [resp, resp[:1]], pad_id=tok.pad_token_id)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + resp])).logits[0]
    ls = torch.log_softmax(logits, -1)
    want = torch.stack([ls[len(prompt) - 1 + t, resp[t]] for t in range(len(resp))])
    assert torch.allclose(out["logp"][0].detach(), want, atol=1e-5)
    assert out["mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    with pytest.raises(ArenaError):
        sequence_logprobs(model, [prompt], [resp, resp])


def test_entropy_with_grad_for_an_entropy_bonus(tiny):
    """entropy_grad=True keeps the graph: ascending the entropy flattens the next-token distribution."""
    _, model, tok = tiny
    prompt, resp = tok("ab")["input_ids"], tok("cd", add_special_tokens=False)["input_ids"]
    detached = sequence_logprobs(model, [prompt], [resp], pad_id=tok.pad_token_id)
    assert not detached["entropy"].requires_grad
    out = sequence_logprobs(model, [prompt], [resp], pad_id=tok.pad_token_id, entropy_grad=True)
    assert out["entropy"].requires_grad
    assert torch.allclose(out["entropy"].detach(), detached["entropy"], atol=1e-6)
    before = float(out["entropy"].detach().sum())
    params = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    (-out["entropy"].sum()).backward()
    opt.step()
    after = float(sequence_logprobs(model, [prompt], [resp], pad_id=tok.pad_token_id)["entropy"].sum())
    with torch.no_grad():  # leave the shared fixture's weights as they were
        for p, p0 in zip(model.parameters(), params):
            p.copy_(p0)
    model.zero_grad(set_to_none=True)
    assert after > before


def test_topk_lists_sorted_and_contain_the_sampled_token(engine):
    K = 2
    gens = engine.generate(PROMPTS, max_new_tokens=32, temperature=2.0, seed=3, top_k_logprobs=K)
    forced = 0
    for g in gens:
        assert len(g.topk_ids) == len(g.topk_logprobs) == len(g.token_ids)
        for tok, lp, ids, lps in zip(g.token_ids, g.logprobs, g.topk_ids, g.topk_logprobs):
            assert len(ids) == len(lps) == K and len(set(ids)) == K
            assert tok in ids
            assert lps[ids.index(tok)] == pytest.approx(lp, abs=1e-6)
            assert all(a >= b for a, b in zip(lps, lps[1:]))
            forced += ids[-1] == tok and lps[-1] < lps[0]
    assert forced > 0  # at T=2 some sampled tokens were outside the top 2 and were forced in


def test_eos_ends_a_row_and_sets_finish_reason(engine):
    gens = engine.generate(PROMPTS * 3, max_new_tokens=48, temperature=1.5, seed=0)
    eos = set(engine.eos_ids)
    reasons = {g.finish_reason for g in gens}
    assert reasons == {"stop", "length"}, reasons  # random model: some rows hit </s>, some don't
    for g in gens:
        if g.finish_reason == "stop":
            assert g.token_ids[-1] in eos and not eos & set(g.token_ids[:-1])
            assert "</s>" not in g.text
        else:
            assert len(g.token_ids) == 48 and not eos & set(g.token_ids)


def test_stop_strings_cut_text_and_tokens(engine):
    free = engine.generate(PROMPTS, max_new_tokens=32, seed=5)
    target = free[0].text[6]  # a character the first row produces
    stopped = engine.generate(PROMPTS, max_new_tokens=32, seed=5, stop=[target, "never-there"])
    decode = engine.decode
    for f, s in zip(free, stopped):
        assert f.token_ids[: len(s.token_ids)] == s.token_ids  # same samples, just cut
        assert f.logprobs[: len(s.logprobs)] == s.logprobs
        if target in decode(f.token_ids):
            assert s.finish_reason == "stop" and s.stop_reason == target
            assert target not in s.text and target in decode(s.token_ids)
            assert target not in decode(s.token_ids[:-1])  # the last token completed the stop string
            assert s.text == decode(s.token_ids)[: decode(s.token_ids).index(target)]
        else:
            assert s.token_ids == f.token_ids and s.text == f.text
    assert stopped[0].finish_reason == "stop" and len(stopped[0].token_ids) < len(free[0].token_ids)
    # only the literal stop strings stop: "}" after "\boxed{" is just text
    again = engine.generate(PROMPTS, max_new_tokens=32, seed=5, stop=["</answer>"])
    assert [g.text for g in again] == [g.text for g in free]


def test_argument_edge_cases(engine):
    assert engine.generate([], max_new_tokens=4) == []
    z = engine.generate(["ab"], max_new_tokens=0, top_k_logprobs=3)[0]
    assert z.token_ids == [] and z.text == "" and z.finish_reason == "length" and z.topk_ids == []
    g = engine.generate([""], max_new_tokens=3, greedy=True)[0]
    assert g.prompt_ids == [engine.tokenizer.bos_token_id] and len(g.token_ids) == 3
    with pytest.raises(ArenaError, match="temperature"):
        engine.generate(["a"], temperature=0.0)
    with pytest.raises(ArenaError, match="stop"):
        engine.generate(["a"], stop="x")
    with pytest.raises(ArenaError, match="list of prompts"):
        engine.generate("a")


class CountingEngine:
    def __init__(self, inner):
        self.inner = inner
        self.calls: list[int] = []
        self.lock = threading.Lock()

    def generate(self, prompts, **kw):
        with self.lock:
            self.calls.append(len(prompts))
        return self.inner.generate(prompts, **kw)


def test_batching_engine_serves_threads_in_batches(engine):
    prompts = [PROMPTS[i % len(PROMPTS)] + str(i) for i in range(16)]
    direct = engine.generate(prompts, max_new_tokens=16, greedy=True)
    counting = CountingEngine(engine)
    results: list = [None] * 16
    barrier = threading.Barrier(16)

    with E.BatchingEngine(counting, max_batch=32, max_wait_s=0.05) as be:

        def worker(i):
            barrier.wait()
            results[i] = be.submit(prompts[i], max_new_tokens=16, greedy=True).result(timeout=60)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert be.requests == 16
    assert [r.token_ids for r in results] == [d.token_ids for d in direct]
    assert [r.text for r in results] == [d.text for d in direct]
    assert sum(counting.calls) == 16 and len(counting.calls) < 16
    with pytest.raises(RuntimeError, match="closed"):
        be.submit("a")


def test_batching_engine_keeps_each_requests_seed(engine):
    """Seeded requests from many threads get the samples they get alone, however they were batched."""
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(24)]
    direct = [engine.generate([p], max_new_tokens=12, seeds=[100 + i])[0] for i, p in enumerate(prompts)]
    counting = CountingEngine(engine)
    results: list = [None] * 24
    with E.BatchingEngine(counting, max_batch=8, max_wait_s=0.02) as be:

        def worker(i):
            results[i] = be.submit(prompts[i], seed=100 + i, max_new_tokens=12).result(timeout=60)

        threads = [threading.Thread(target=worker, args=(i,)) for i in reversed(range(24))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        via_generate = be.generate(prompts[:3], max_new_tokens=12, seeds=[100, 101, 102])
    assert len(counting.calls) < 24  # requests did share calls
    assert [r.token_ids for r in results] == [d.token_ids for d in direct]
    assert [g.token_ids for g in via_generate] == [d.token_ids for d in direct[:3]]


def test_rollouts_draw_the_same_moves_however_they_are_batched(tiny, engine):
    """Concurrent matches on the match engine: each sampled move has its own seed (match seed, seat,
    move number), so 24 games played 12 at a time (one generate call for every waiting move), 3 at a
    time, or through a batching engine draw the same moves."""
    _, _, tok = tiny
    template = make_template("compact", tok)
    pairings = [([LEARNER, "random"] if i % 2 == 0 else ["random", LEARNER], "random") for i in range(24)]
    played = []
    for conc, batching in ((12, False), (3, False), (12, True)):
        counting = CountingEngine(engine)
        with E.BatchingEngine(counting, max_batch=conc, max_wait_s=0.02) as be:
            eps = play_episodes("openspiel/tic_tac_toe-v0", pairings, be if batching else counting, tok, template,
                                seed=5, concurrency=conc, policy=InvalidMovePolicy(allowance=0), max_new_tokens=6)
        played.append([[t.generation.token_ids for s in e.learner_seats for t in e.turns[s]] for e in eps])
        moves = sum(len(e.turns[s]) for e in eps for s in e.learner_seats)
        if not batching:  # the matches in flight share each call: far fewer calls than moves
            assert len(counting.calls) <= moves / (conc / 2), (conc, len(counting.calls), moves)
    assert played[0] == played[1] == played[2]
    assert len({tuple(map(tuple, g)) for g in played[0]}) > 12  # an untrained model: the draws vary


def test_batching_engine_groups_by_kwargs_and_propagates_errors(engine):
    counting = CountingEngine(engine)
    with E.BatchingEngine(counting, max_batch=8, max_wait_s=0.2) as be:
        futs = [be.submit("a", max_new_tokens=4, greedy=True), be.submit("b", max_new_tokens=4, seed=1),
                be.submit("c", max_new_tokens=4, greedy=True)]
        bad = be.submit("d", max_new_tokens=4, temperature=-1.0)
        gens = [f.result(timeout=60) for f in futs]
        with pytest.raises(ArenaError, match="temperature"):
            bad.result(timeout=60)
        assert all(len(g.token_ids) == 4 for g in gens)
        assert sorted(counting.calls) == [1, 1, 2]  # greedy a+c together, sampled b alone, bad d alone
        assert be.generate(["x", "y"], max_new_tokens=2, greedy=True)[1].prompt_ids == engine.encode("y")


def test_vllm_missing_is_a_clear_error(monkeypatch, tiny, tmp_path):
    """No vllm in this process and no vLLM environment: one line naming how to build it."""
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError, installed or not
    monkeypatch.setenv("ARENA_VLLM_PYTHON", str(tmp_path / "no-such-env" / "bin" / "python"))
    with pytest.raises(E.VLLMEngineError, match=r"own environment.*does not exist.*make vllm-env.*ARENA_VLLM_PYTHON") as e:
        E.VLLMEngine(tiny[0])
    assert "\n" not in str(e.value)
    with pytest.raises(E.VLLMEngineError):
        E.make_engine("vllm", tiny[0])


def test_vllm_outputs_become_generations_with_the_sampled_token_forced_into_the_top_k():
    """`vllm_worker.generation_fields` on vLLM's output records (the real engine's agreement with
    transformers is tests/inference/test_vllm.py; this is the mapping's corner: a sampled token outside the
    top K), and `sampling_params`' per-prompt settings."""
    from arena.inference import vllm_worker as W

    LP = types.SimpleNamespace
    # token 7 sampled outside the top-2 at step 1; EOS (2) at the end
    steps = [{5: LP(logprob=-0.1), 6: LP(logprob=-2.5)},
             {5: LP(logprob=-0.5), 6: LP(logprob=-1.5), 7: LP(logprob=-3.0)},
             {2: LP(logprob=-0.2), 9: LP(logprob=-1.9)}]
    out = LP(text="ab", token_ids=[5, 7, 2], logprobs=steps, finish_reason="stop", stop_reason=None)
    (g1,) = W.generation_fields([LP(prompt_token_ids=[1, 4], outputs=[out])], 2)
    assert g1["text"] == "ab" and g1["prompt_ids"] == [1, 4] and g1["token_ids"] == [5, 7, 2]
    assert g1["logprobs"] == [-0.1, -3.0, -0.2] and g1["finish_reason"] == "stop"
    assert g1["topk_ids"] == [[5, 6], [5, 7], [2, 9]]
    assert g1["topk_logprobs"] == [[-0.1, -2.5], [-0.5, -3.0], [-0.2, -1.9]]
    params = W.sampling_params(2, max_new_tokens=3, temperature=0.8, greedy=False, top_k=2, seeds=[10, 11], stop=["\n"])
    assert [p["seed"] for p in params] == [10, 11]
    assert params[0]["temperature"] == 0.8 and params[0]["logprobs"] == 2
    assert params[0]["max_tokens"] == 3 and params[0]["stop"] == ["\n"]
    greedy = W.sampling_params(1, max_new_tokens=3, temperature=0.8, greedy=True, top_k=0, seeds=[None], stop=None)
    assert greedy[0]["temperature"] == 0.0 and greedy[0]["logprobs"] == 1


def test_an_unknown_llm_engine_is_one_line(tmp_path):
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.errors import AgentSpecError

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    with pytest.raises(AgentSpecError, match="engine must be one of hf, transformers, vllm"):
        make_agent(f"llm:{folder},engine=tgi", make_core("openspiel/tic_tac_toe-v0"), 0)


def test_make_engine(tiny):
    eng = E.make_engine("hf", tiny[0])
    assert isinstance(eng, E.HFEngine)
    assert eng.generate(["ab"], max_new_tokens=3, greedy=True)[0].token_ids
    with pytest.raises(ArenaError, match="unknown engine kind"):
        E.make_engine("tgi", tiny[0])
    with pytest.raises(ArenaError, match="does not exist"):
        E.make_engine("hf", tiny[0] / "missing")


def test_llm_agent_with_the_compact_template_stops_at_the_answer(engine):
    """The compact template stops generation at the answer's closing brace: nothing after it is sampled."""
    from arena.agents.llm import LLMAgent, MalformedMove
    from arena.envs.registry import make_core
    from arena.envs.observation import Observation

    core = make_core("openspiel/tic_tac_toe-v0")
    core.reset(seed=0)
    obs = Observation(core, 0, 0)
    agent = LLMAgent(engine, engine.tokenizer, template="compact", max_new_tokens=48, temperature=3.0,
                     record=True, seed=11)
    moves = [agent.act(obs) for _ in range(40)]
    stopped = [t for t in agent.turns if t.generation.stop_reason == "}"]
    assert stopped, "an untrained model at temperature 3 writes a '}' within 48 tokens now and then"
    for t in stopped:
        g = t.generation
        assert "}" not in g.text and engine.decode(g.token_ids).endswith("}")
        assert len(g.token_ids) == len(g.logprobs) < 48
    for t, m in zip(agent.turns, moves):  # the move is what the text (closed at the stop) says, or malformed
        assert (t.error is None) == (not isinstance(m, MalformedMove))
        if t.error is None:
            assert m in obs.legal_actions and t.generation.stop_reason == "}"


def test_critic_values_do_not_depend_on_the_batch(tiny):
    """The value head reads the last token; left padding in a batch must not shift positions."""
    from arena.trainers.llm.critic import ValueHead

    _, model, tok = tiny
    head = ValueHead(model.config.hidden_size)
    torch.nn.init.normal_(head.proj.weight, std=0.5, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        alone = head.values(model, tok, ["x:012/345/678="])
        batch = head.values(model, tok, ["x:012/345/678=", "a much longer prompt than the first one, padded"])
    assert torch.allclose(alone[0], batch[0], atol=1e-5)
    assert float(batch.min()) >= head.low and float(batch.max()) <= head.high and float(batch.std()) > 0


@pytest.mark.timeout(120)
def test_worker_processes_play_llm_matches_after_the_parent_ran_torch(tiny):
    """Forked match workers once hung on their first parallel torch op when the parent had already run
    parallel ops (its OpenMP thread pool does not survive the fork), e.g. evaluating a checkpoint
    with ``workers=2`` in the process that trained it; the results equal one process's."""
    from arena.match.batch import play_matches

    folder = tiny[0]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        a = torch.randn(512, 512)
        for _ in range(20):  # parallel regions in the parent before the fork
            a = torch.tanh(a @ a.T / 512)
        spec = f"llm:{folder},greedy=True,max_new_tokens=4,template=compact"
        two = play_matches("openspiel/tic_tac_toe-v0", [spec, "random"], 6, seed=5, workers=2)
        one = play_matches("openspiel/tic_tac_toe-v0", [spec, "random"], 6, seed=5, workers=1)
    finally:
        torch.set_num_threads(threads)
    assert len(two) == 6
    assert [(r.match_id, r.returns, r.moves, r.invalid) for r in two] == \
        [(r.match_id, r.returns, r.moves, r.invalid) for r in one]
