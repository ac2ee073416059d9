"""ODC and FSDP2 sharded data parallelism: a step leaves the parameters of one process's LLMLearner.step.

One launch of 2 gloo ranks (module fixture, about 15 s on 2 cores) runs every case with
every engine -- ODC over shared memory, ODC over the process group, FSDP2 at its best
settings and FSDP2 with its defaults -- through :func:`sharded.engine.learner_step` (the learner's
loop: the same shuffled minibatches) with a real learning rate, weight decay and, in the
imbalanced case, a gradient clip small enough to act (the learner clips the global norm,
so the shards must agree on it). The reference is ``LLMLearner.step`` in this process on
the same samples. Then the checkpoint round trip: 2 ranks -> Hugging Face folder -> one
process gives the same logits.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from arena.inference.models import DEFAULT_CORPUS, build_tiny_llama, load_model, train_char_tokenizer  # noqa: E402
from arena.trainers.common.losses import TOPK_LOSSES  # noqa: E402
from arena.trainers.llm.learner import Batch, LearnerSettings, LLMLearner  # noqa: E402
from arena.trainers.parallel.launch import launch  # noqa: E402
from arena.trainers.parallel.sharded import ODCError  # noqa: E402
from arena.trainers.parallel.sharded.engine import learner_step  # noqa: E402
from arena.trainers.parallel.sharded.fsdp2 import FSDP2Sharded  # noqa: E402
from arena.trainers.parallel.sharded.layout import make_layout  # noqa: E402
from arena.trainers.parallel.sharded.odc import ODCSharded  # noqa: E402
from arena.trainers.parallel.sharded.plan import plan_minibatch  # noqa: E402
from arena.trainers.parallel.sharded.transports import make_transport  # noqa: E402

# synthetic samples live beside the benchmarks (and the spawned ranks import them too)
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from _sharded_sim import samples_of_lengths  # noqa: E402

SIZES = dict(hidden=32, layers=4, heads=4, intermediate=64)
M = 2  # microbatches per rank
#: Adam's first step is lr * g / (|g| + eps): where a gradient is near eps (1e-8) it amplifies the
#: float rounding of g (summed in another order over microbatches and ranks) by about lr / eps.
#: The gradients agree to ~1e-7; the worst parameter here is 6.4e-6 (balanced, a k_proj element
#: with |g| = 4e-10), the other cases 2e-6 or less.
TOL = 1e-5

BALANCED = [(9, 4)] * 8
#: long and short trajectories, one empty response; 12 samples in minibatches of 8: two updates
IMBALANCED = [(30, 8), (3, 1), (20, 6), (2, 2), (12, 0), (5, 3), (40, 7), (4, 1), (9, 5), (2, 1), (25, 4), (6, 2)]
ONE_STEP = LearnerSettings(lr=1e-3, weight_decay=0.01, grad_clip=1.0, minibatch=64)
TWO_STEPS_CLIPPED = LearnerSettings(lr=1e-3, weight_decay=0.01, grad_clip=0.05, minibatch=8)
TOPK = LearnerSettings(loss="dppo_topk_tv", agg="seq_sum_norm", max_new_tokens=8, entropy_coef=0.01, lr=1e-3,
                       weight_decay=0.01, grad_clip=0.05, minibatch=8)

ENGINES = ("odc-shm", "odc-pg", "fsdp2-best", "fsdp2")
#: (case id, lengths, settings, balance, engines)
CASES = [
    ("balanced", BALANCED, ONE_STEP, "tokens", ENGINES),
    ("imbalanced", IMBALANCED, TWO_STEPS_CLIPPED, "tokens", ENGINES),
    ("imbalanced-arrival-order", IMBALANCED, TWO_STEPS_CLIPPED, "none", ("odc-shm", "fsdp2-best")),
    ("topk-seq_sum_norm-entropy", IMBALANCED, TOPK, "tokens", ("odc-pg", "fsdp2-best")),
]


def _model(seed: int = 0):
    tok = train_char_tokenizer(DEFAULT_CORPUS)
    return build_tiny_llama(tok, seed=seed, **SIZES), tok


def _samples(lengths, settings):
    return samples_of_lengths(lengths, seed=1, topk=3 if settings.loss in TOPK_LOSSES else 0)


def _engine(name, model, settings, balance):
    if name.startswith("odc"):
        return ODCSharded(model, settings=settings, n_microbatches=M, transport=name[4:], balance=balance)
    return FSDP2Sharded(model, settings=settings, n_microbatches=M, balance=balance, best=name == "fsdp2-best")


def _worker(info, cases, folder):
    out = {}
    for case_id, lengths, settings, balance, engines in cases:
        for name in engines:
            model, tok = _model()
            eng = _engine(name, model, settings, balance)
            stats = learner_step(eng, Batch(_samples(lengths, settings), shuffle_seed=3), pad_id=tok.pad_token_id)
            state = eng.full_state_dict()
            out[(case_id, name)] = {"stats": stats, "timing": eng.last.timing, "tokens": eng.last.tokens,
                                    "state": state if info.rank == 0 else None}
            eng.close()

    # checkpoint: ODC (shm) and FSDP2 after the imbalanced updates -> Hugging Face folders
    ids = torch.randint(4, 100, (3, 12), generator=torch.Generator().manual_seed(0))
    for name in ("odc-shm", "fsdp2-best"):
        model, tok = _model(seed=1)
        eng = _engine(name, model, TWO_STEPS_CLIPPED, "tokens")
        learner_step(eng, Batch(_samples(IMBALANCED, TWO_STEPS_CLIPPED)), pad_id=tok.pad_token_id)
        eng.save_pretrained(f"{folder}/{name}", tokenizer=tok)
        out[("ckpt", name)] = {"ids": ids, "logits": eng.logits(ids)}
        eng.close()
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("odc")
    return launch(_worker, 2, (CASES, str(folder)), timeout_s=300), folder


def _reference(lengths, settings):
    model, tok = _model()
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    stats = LLMLearner(model, tok, settings).step(Batch(_samples(lengths, settings), shuffle_seed=3))
    return stats, {k: v.detach().clone() for k, v in model.state_dict().items()}, init


def _worst(a: dict, b: dict) -> float:
    assert set(a) == set(b)
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.mark.parametrize("case_id,lengths,settings,balance,engines", CASES, ids=[c[0] for c in CASES])
def test_step_equals_single_process_learner_and_fsdp2(runs, case_id, lengths, settings, balance, engines):
    results, _ = runs
    stats, ref, init = _reference(lengths, settings)
    if settings.grad_clip < 1.0:
        assert stats["grad_norm"] > 2 * settings.grad_clip  # the clip acts: the shards must agree on the global norm
    assert _worst(ref, init) > 0.5 * settings.lr  # the step moved the weights: a test that can fail
    line = [f"\n{case_id}:"]
    for name in engines:
        r0, r1 = results[0][(case_id, name)], results[1][(case_id, name)]
        assert r0["stats"] == r1["stats"]  # every rank reports the same floats
        for k in ("loss", "grad_norm", "entropy", "mismatch"):
            assert r0["stats"][k] == pytest.approx(stats[k], rel=TOL, abs=TOL), (name, k)
        worst = _worst(r0["state"], ref)
        line.append(f"{name} {worst:.1e}")
        assert worst < TOL, f"{case_id} {name}: parameters differ from LLMLearner.step's by {worst:.2e}"
    fsdp = results[0][(case_id, "fsdp2-best")]["state"]
    for name in engines:
        if name.startswith("odc"):
            assert _worst(results[0][(case_id, name)]["state"], fsdp) < TOL
    print(" | ".join(line))


def test_odc_meets_three_times_per_minibatch_and_balances_tokens(runs):
    results, _ = runs
    for name in ("odc-shm", "odc-pg"):
        for rank in (0, 1):
            t = results[rank][("imbalanced", name)]["timing"]
            assert t["syncs"] == 3  # reduce, norm + stats, publish: none per layer or microbatch
            assert t["step_s"] > 0 and t["compute_s"] > 0 and t["gather_s"] > 0
    tokens = results[0][("balanced", "odc-shm")]["tokens"]
    assert [sum(r) for r in tokens] == [4 * 13, 4 * 13] and all(len(r) == M for r in tokens)
    tokens = results[0][("imbalanced", "odc-shm")]["tokens"]  # the second minibatch: 4 samples
    assert sum(map(sum, tokens)) > 0 and abs(sum(tokens[0]) - sum(tokens[1])) <= 40 + 7


def test_checkpoint_from_two_ranks_loads_in_one_process(runs):
    results, folder = runs
    for name in ("odc-shm", "fsdp2-best"):
        got = results[0][("ckpt", name)]
        torch.testing.assert_close(results[1][("ckpt", name)]["logits"], got["logits"], atol=TOL, rtol=0)
        model, _ = load_model(folder / name)
        with torch.no_grad():
            single = model(input_ids=got["ids"]).logits
        torch.testing.assert_close(got["logits"], single, atol=TOL, rtol=0)
        fresh, _ = _model(seed=1)  # the saved weights are trained, not the seed's
        with torch.no_grad():
            assert (fresh(input_ids=got["ids"]).logits - single).abs().max() > 1e-3
    # and the 1-process learner resumes from the folder
    model, tok = load_model(folder / "odc-shm")
    learner = LLMLearner(build_tiny_llama(tok, seed=5, **SIZES), tok, ONE_STEP)
    learner.load_weights(folder / "odc-shm")
    assert _worst(learner.model.state_dict(), model.state_dict()) == 0


# ---------------------------------------------------------------- in-process pieces


def test_plan_balances_tokens_and_weights_sum_to_the_minibatch():
    samples = samples_of_lengths(IMBALANCED, seed=0)
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    for agg in ("token_mean", "seq_mean", "seq_sum_norm"):
        plan = plan_minibatch(samples, 2, 3, agg=agg)
        got = sorted(j for r in plan.ranks for mb in r for j in mb.samples)
        assert got == list(range(len(samples)))
        per_rank = [sum(r) for r in plan.tokens()]
        assert abs(per_rank[0] - per_rank[1]) <= max(lengths) and sum(per_rank) == sum(lengths)
        w = sum(float(mb.target[0, 0, 4]) for r in plan.ranks for mb in r)
        assert w == pytest.approx(1.0)  # seq_sum_norm too: no padding rows, rows sum to the samples
        for r in plan.ranks:
            for mb in r:
                assert mb.length % 8 == 0 and mb.rows == len(mb.samples)
                assert float(mb.target[0, 0, 5]) == pytest.approx(1 / sum(len(s.response_ids) for s in samples))
    arrival = plan_minibatch(samples, 2, 2, balance="none")
    assert [mb.samples for mb in arrival.ranks[0]] == [[0, 2, 4], [6, 8, 10]]


def test_layout_covers_every_parameter_once():
    model, _ = _model()
    for W in (1, 2, 3):
        lay = make_layout(model, W)
        names = [n for u in lay.units for n in u.params]
        assert sorted(names) == sorted(n for n, _ in model.named_parameters())  # the tied head once
        assert [u.name for u in lay.units][:2] == ["model.embed_tokens", "model.layers.0"]
        for u in lay.units:
            assert u.shard * W >= u.numel > u.shard * (W - 1) - 1
        assert lay.total == sum(W * u.shard for u in lay.units)
        assert lay.units[-1].base + W * lay.units[-1].shard == lay.total


def test_errors_say_what_to_do():
    samples = samples_of_lengths([(3, 2)], seed=0)
    with pytest.raises(ODCError, match="unknown balance 'best'.*tokens, none"):
        plan_minibatch(samples, 2, 1, balance="best")
    with pytest.raises(ODCError, match="top-K"):
        plan_minibatch(samples, 2, 1, topk=True)
    with pytest.raises(ODCError, match="unknown ODC transport 'rdma'.*auto, shm, pg"):
        make_transport("rdma")
    with pytest.raises(ODCError, match="no process group"):
        ODCSharded(_model()[0], n_microbatches=1)
    with pytest.raises(ODCError, match="at least one token"):
        samples_of_lengths([(0, 2)])
    samples[0].prompt_ids = []
    with pytest.raises(ODCError, match="empty prompt"):
        plan_minibatch(samples, 1, 1)


def test_bench_odc_quick_prints_the_tables():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_odc.py"), "--quick"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for pattern in ("balanced", "alternating", "games"):
        for method in ("fsdp2", "fsdp2-best", "odc-pg", "odc-shm"):
            assert f"| {pattern} | {method} |" in proc.stdout
    assert "| ODC (shm) / FSDP2-best | ideal (tokens) | no-communication bound |" in proc.stdout
