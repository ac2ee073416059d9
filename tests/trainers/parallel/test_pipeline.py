"""Pipeline parallelism: every schedule's step equals LLMLearner's, checkpoints cross parallel settings.

One launch of 2 gloo ranks (module fixture, about 10 s on 2 cores) runs every case; the
tests read its results. The reference is ``LLMLearner.step`` itself on the same samples in
one minibatch (one forward and backward over all of them) with learning rate 0 and no
effective clipping, so its loss stat is the minibatch loss and the parameters' ``.grad``
after the step are its gradients. The pipeline splits the same samples into 4 packed
microbatches and scales each microbatch's loss by its share of the aggregation's
denominator (tokens, sequences or rows), so the sum over microbatches is that same loss.
"""

from __future__ import annotations

import math
import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from arena.inference.models import DEFAULT_CORPUS, build_tiny_llama, load_model, train_char_tokenizer  # noqa: E402
from arena.trainers.common.losses import TOPK_LOSSES  # noqa: E402
from arena.trainers.llm.learner import Batch, LearnerSettings, LLMLearner, Sample  # noqa: E402
from arena.trainers.parallel.launch import ParallelError, in_torchrun, launch  # noqa: E402
from arena.trainers.parallel.pipeline import PipelineError  # noqa: E402
from arena.trainers.parallel.pipeline.loss import token_logprobs  # noqa: E402
from arena.trainers.parallel.pipeline.packing import pack_samples  # noqa: E402
from arena.trainers.parallel.pipeline.runtime import LMPipeline  # noqa: E402
from arena.trainers.parallel.pipeline.schedules import (  # noqa: E402
    SCHEDULES,
    ScheduleSpec,
    available_schedules,
    num_stages,
    schedule_class,
    schedule_spec,
    stage_indices,
    stage_owner,
)
from arena.trainers.parallel.pipeline.stages import balanced_layers, split_llama  # noqa: E402
from arena.trainers.parallel.pipeline.step import clip_grad_norm_, pipeline_step  # noqa: E402
from arena.trainers.parallel.pipeline.whole_model import (  # noqa: E402
    full_state_dict,
    gather_named,
    load_pretrained,
    pipeline_logits,
    save_pretrained,
)

# the bubble's measurement and simulation live beside the benchmarks (and the spawned ranks import them too)
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import _pipeline_sim as S  # noqa: E402

SIZES = dict(hidden=32, layers=4, heads=4, intermediate=64)
M = 4  # microbatches
TOL = 1e-5

BASE = LearnerSettings()  # dppo_binary_tv, token_mean
CASES = [(name, name, BASE) for name in SCHEDULES] + [
    ("1f1b-ppo-seq_sum_norm-entropy", "1f1b",
     LearnerSettings(loss="ppo_clip", agg="seq_sum_norm", max_new_tokens=8, entropy_coef=0.01)),
    ("zbv-topk_tv-seq_mean", "zbv", LearnerSettings(loss="dppo_topk_tv", agg="seq_mean")),
    ("zb1p-drpo-temperature", "zb1p", LearnerSettings(loss="drpo", temperature=0.7)),
]


def _model(seed: int = 0):
    tok = train_char_tokenizer(DEFAULT_CORPUS)
    return build_tiny_llama(tok, seed=seed, **SIZES), tok


def _samples(topk: bool, n: int = 8, seed: int = 0, vocab: int = 100) -> list[Sample]:
    """Variable-length trajectories; sample 5 has an empty response (with top-K too: an empty
    response's empty top-K list is part of what the learner and the pipeline must handle)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        P_, R = rng.randint(2, 11), (0 if i == 5 else rng.randint(1, 7))
        resp = [rng.randint(4, vocab - 1) for _ in range(R)]
        tk = [[r] + [rng.randint(4, vocab - 1) for _ in range(2)] for r in resp] if topk else None
        tl = [[math.log(rng.uniform(0.005, 0.02)) for _ in range(3)] for _ in resp] if topk else None
        out.append(Sample(prompt_ids=[1] + [rng.randint(4, vocab - 1) for _ in range(P_ - 1)], response_ids=resp,
                          old_logp=[math.log(rng.uniform(0.005, 0.03)) for _ in resp], topk_ids=tk, topk_logp=tl,
                          adv=rng.choice([-1.0, -0.5, 0.5, 1.0]), ret=0.0))
    return out


def _reference(settings: LearnerSettings):
    model, tok = _model()
    learner = LLMLearner(model, tok, replace(settings, lr=0.0, grad_clip=1e9, minibatch=64))
    stats = learner.step(Batch(_samples(settings.loss in TOPK_LOSSES)))
    return stats, {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def _worker(info, cases, folder):
    """Each case on this rank; then the checkpoint round trip. Returns plain data (CPU tensors)."""
    model, tok = _model()
    available = available_schedules()
    out = {}
    for case_id, schedule, settings in cases:
        if schedule not in available:
            out[case_id] = {"skipped": f"torch lacks torch.distributed.pipelining.{SCHEDULES[schedule].torch_class}"}
            continue
        pipe = LMPipeline(model, schedule, n_microbatches=M, settings=settings,
                          timeline=S.ActionTimeline.for_device("cpu"))
        step = pipeline_step(pipe, _samples(settings.loss in TOPK_LOSSES), pad_id=tok.pad_token_id)
        bubble = S.bubble_of(pipe, step)
        grads = gather_named(pipe, "grad")
        out[case_id] = {"loss": step.loss, "stats": step.stats, "grads": grads, "bubble": bubble,
                        "packed": step.packed, "grad_norm": clip_grad_norm_(pipe, 1e9)}

    # checkpoint: train a little on 2 ranks (1f1b: 2 stages), save, then load into a 4-stage zbv split
    pipe = LMPipeline(_model(seed=1)[0], "1f1b", n_microbatches=M, settings=BASE)
    pipeline_step(pipe, _samples(False), pad_id=tok.pad_token_id)
    clip_grad_norm_(pipe, 1.0)
    with torch.no_grad():
        for p in pipe.parameters():
            p -= 0.5 * p.grad
    save_pretrained(pipe, folder, tokenizer=tok)
    ids = torch.randint(4, 100, (3, 12), generator=torch.Generator().manual_seed(0))
    full = full_state_dict(pipe)
    logits = pipeline_logits(pipe, ids)
    other = LMPipeline(_model(seed=2)[0], "zbv", n_microbatches=M, settings=BASE)
    load_pretrained(other, folder)
    logits_v = pipeline_logits(other, ids)
    vmin = LMPipeline(_model(seed=4)[0], "vmin", n_microbatches=M, settings=BASE)
    load_pretrained(vmin, folder)
    out["roundtrip"] = {"ids": ids, "logits_1f1b": logits, "logits_zbv": logits_v, "logits_vmin": pipeline_logits(vmin, ids),
                        "keys": sorted(full) if full is not None else None}

    # resume on 1 rank: a one-rank group inside this launch, both stages of zbv on rank 0
    import torch.distributed as dist

    solo = dist.new_group(ranks=[0])  # every rank takes part in making a group
    if info.rank == 0:
        one = LMPipeline(_model(seed=3)[0], "zbv", n_microbatches=M, settings=BASE, group=solo)
        load_pretrained(one, folder)
        out["roundtrip"]["logits_1rank"] = pipeline_logits(one, ids)
        step = pipeline_step(one, _samples(False), pad_id=tok.pad_token_id)
        out["solo"] = {"loss": step.loss, "grads": gather_named(one, "grad")}
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pp") / "ckpt"
    results = launch(_worker, 2, (CASES, str(folder)), timeout_s=300)
    return results, folder


@pytest.mark.parametrize("case_id,schedule,settings", CASES, ids=[c[0] for c in CASES])
def test_step_equals_single_process_learner(runs, case_id, schedule, settings):
    results, _ = runs
    r0, r1 = results[0][case_id], results[1][case_id]
    if "skipped" in r0:
        pytest.skip(r0["skipped"])
    stats, ref = _reference(settings)
    assert r0["loss"] == r1["loss"]  # broadcast from the last stage
    assert r0["loss"] == pytest.approx(stats["loss"], abs=TOL, rel=TOL)
    for k in ("entropy", "mismatch", "ratio_mean"):
        assert r0["stats"][k] == pytest.approx(stats[k], abs=TOL, rel=TOL), k
    assert r0["grad_norm"] == pytest.approx(stats["grad_norm"], rel=TOL)
    grads = r0["grads"]
    assert set(ref) <= set(grads)
    worst = max(float((grads[n] - ref[n]).abs().max()) for n in ref)
    print(f"\n{case_id}: loss {r0['loss']:.7f} vs {stats['loss']:.7f}, largest gradient difference {worst:.1e}")
    assert worst < TOL, f"{case_id}: largest gradient difference {worst:.2e}"
    # the tied head's copy (on another rank for 1f1b/interleaved) got the tied gradient too
    torch.testing.assert_close(grads["lm_head.weight"], ref["model.embed_tokens.weight"], atol=TOL, rtol=0)
    packed = r0["packed"]
    assert sorted(j for g in packed["groups"] for j in g) == list(range(8)) and len(packed["groups"]) == M


@pytest.mark.parametrize("case_id", [c[0] for c in CASES[:len(SCHEDULES)]])
def test_bubble_is_measured_next_to_theory(runs, case_id):
    results, _ = runs
    bubbles = [results[r][case_id].get("bubble") for r in (0, 1)]
    if bubbles[0] is None:
        pytest.skip(results[0][case_id]["skipped"])
    print("\n" + S.bubble_report(bubbles))
    spec = schedule_spec(case_id)
    for b in bubbles:
        assert b["step_s"] > 0 and 0 < b["busy_s"] <= b["step_s"]
        assert 0 <= b["bubble"] < 1 and b["idle_s"] == pytest.approx(b["step_s"] - b["busy_s"])
        assert b["theory"] == pytest.approx(S.theory(case_id, 2, M)) and b["theory_formula"] == S.FORMULAS[case_id]
        assert 0 <= b["theory_fraction"] < 1
        assert b["count"]["F"] == M * spec.stages_per_rank  # every stage ran every microbatch forward
        n_bwd = b["count"].get("B", 0) + b["count"].get("W", 0)
        assert n_bwd == M * spec.stages_per_rank
        assert b["sim_unit_bubble"] is not None and 0 <= b["sim_unit_bubble"] < 1
    if case_id in ("gpipe", "1f1b"):
        assert bubbles[0]["sim_unit_bubble"] == pytest.approx(1 / (M + 1))  # (p-1)/(m+p-1)


def test_checkpoint_from_two_ranks_loads_in_one_process_and_other_splits(runs):
    """2 ranks (1f1b) -> Hugging Face folder -> one process, a 4-stage zbv split, and a 1-rank pipeline."""
    results, folder = runs
    rt0, rt1 = results[0]["roundtrip"], results[1]["roundtrip"]
    logits_1f1b = rt1["logits_1f1b"]  # 1f1b: the last stage is on rank 1
    logits_zbv = rt0["logits_zbv"]  # zbv: stage 3 is on rank 0
    assert rt0["logits_1f1b"] is None and rt1["logits_zbv"] is None
    model, _ = load_model(folder)
    assert set(rt0["keys"]) == set(model.state_dict())
    with torch.no_grad():
        single = model(input_ids=rt0["ids"]).logits
    torch.testing.assert_close(logits_1f1b, single, atol=TOL, rtol=0)
    torch.testing.assert_close(logits_zbv, single, atol=TOL, rtol=0)
    torch.testing.assert_close(rt0["logits_vmin"], single, atol=TOL, rtol=0)  # vmin: the last stage on rank 0 too
    torch.testing.assert_close(rt0["logits_1rank"], single, atol=TOL, rtol=0)
    # ... and the resumed 1-rank pipeline's step is the 1-process learner's step on the loaded weights
    learner = LLMLearner(model, load_model(folder)[1], replace(BASE, lr=0.0, grad_clip=1e9, minibatch=64))
    stats = learner.step(Batch(_samples(False)))
    solo = results[0]["solo"]
    assert solo["loss"] == pytest.approx(stats["loss"], abs=TOL, rel=TOL)
    worst = max(float((solo["grads"][n] - p.grad).abs().max()) for n, p in model.named_parameters())
    assert worst < TOL
    fresh, _ = _model(seed=1)  # the saved weights are trained, not the seed's
    with torch.no_grad():
        assert (fresh(input_ids=rt0["ids"]).logits - single).abs().max() > 1e-3


# ---------------------------------------------------------------- in-process pieces


def test_stages_chained_in_one_process_equal_the_model():
    model, _ = _model()
    ids = torch.randint(4, 100, (2, 9), generator=torch.Generator().manual_seed(1))
    for n in (1, 2, 4):
        stages = split_llama(model, n)
        x = ids
        with torch.no_grad():
            for i in range(n):
                x = stages[i](x)
            ref = model(input_ids=ids).logits
        torch.testing.assert_close(x, ref, atol=1e-6, rtol=0)
        assert [s.layer_stop - s.layer_start for s in stages.values()] == [4 // n] * n


def test_token_logprobs_is_sequence_logprobs_arithmetic():
    from arena.trainers.llm.logprobs import sequence_logprobs

    model, _ = _model()
    s = _samples(True)[0]
    seq = torch.tensor([s.prompt_ids + s.response_ids])
    P_, R = len(s.prompt_ids), len(s.response_ids)
    with torch.no_grad():
        ref = sequence_logprobs(model, [s.prompt_ids], [s.response_ids], topk_ids=[s.topk_ids], temperature=0.8)
        logits = model(input_ids=seq).logits[:, P_ - 1:P_ - 1 + R]
        got = token_logprobs(logits, torch.tensor([s.response_ids]), torch.ones(1, R), 0.8,
                               topk_ids=torch.tensor([s.topk_ids]))
    for k in ("logp", "entropy", "topk_logp"):
        torch.testing.assert_close(got[k], ref[k], atol=1e-6, rtol=0)


def test_balanced_layers_and_placement():
    assert balanced_layers(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert balanced_layers(7, 3) == [(0, 2), (2, 5), (5, 7)]  # the extra layer goes inside first
    assert balanced_layers(5, 2) == [(0, 3), (3, 5)]
    with pytest.raises(PipelineError, match="cannot fill 4 stages"):
        balanced_layers(3, 4)
    assert stage_indices("zbv", 0, 2) == [0, 3] and stage_indices("zbv", 1, 2) == [1, 2]
    assert stage_indices("interleaved_1f1b", 1, 4) == [1, 5] and stage_indices("1f1b", 3, 4) == [3]
    for name in SCHEDULES:
        for p in (1, 2, 4):
            held = [s for r in range(p) for s in stage_indices(name, r, p)]
            assert sorted(held) == list(range(num_stages(name, p)))
            assert all(stage_owner(name, s, p) == r for r in range(p) for s in stage_indices(name, r, p))


def test_schedule_names_and_missing_classes(monkeypatch):
    with pytest.raises(PipelineError, match="unknown pipeline schedule 'zb2'.*gpipe, 1f1b"):
        schedule_spec("zb2")
    monkeypatch.setitem(SCHEDULES, "future", ScheduleSpec("future", "ScheduleFromTheFuture", 2, "v"))
    with pytest.raises(PipelineError, match="ScheduleFromTheFuture, which torch .* lacks"):
        schedule_class("future")
    assert "future" not in available_schedules()


def test_pack_samples_balances_tokens_and_weights_sum_to_one():
    samples = _samples(False, n=11)
    for agg in ("token_mean", "seq_mean", "seq_sum_norm"):
        pk = pack_samples(samples, 4, agg=agg, pad_to=8)
        assert pk.ids.shape == (4 * pk.rows, pk.length) and pk.length % 8 == 0 and pk.rows == 3
        assert sorted(j for g in pk.groups for j in g) == list(range(11))
        w = pk.target[::pk.rows, 0, 4]
        expect = 4 * 3 / 11 if agg == "seq_sum_norm" else 1.0  # seq_sum_norm counts padding rows
        assert float(w.sum()) == pytest.approx(expect)
        assert max(pk.tokens) - min(pk.tokens) <= max(len(s.prompt_ids) + len(s.response_ids) for s in samples)
        assert int(pk.target[..., 1].sum()) == sum(len(s.response_ids) for s in samples)
    with pytest.raises(PipelineError, match="top-K"):
        pack_samples(samples, 4, topk=True)


def _fail_on_rank_1(info):
    if info.rank == 1:
        raise ValueError("boom on purpose")
    import torch.distributed as dist

    dist.barrier()  # rank 0 would wait forever: launch must stop it
    return info.rank


def test_launch_reports_the_failing_rank_and_torchrun_env():
    with pytest.raises(ParallelError, match=r"rank 1 of 2 failed(.|\n)*boom on purpose"):
        launch(_fail_on_rank_1, 2, timeout_s=60)
    assert in_torchrun({"RANK": "0", "WORLD_SIZE": "2"}) and not in_torchrun({})


def test_bench_pipeline_quick_prints_the_table():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")
    some = ["1f1b", "zb1p", "zbv", "vmin"]  # every schedule's step is tested above; the script's table here
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_pipeline.py"), "--quick", "--schedules",
                           *some], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in some:
        assert f"| {name} |" in proc.stdout
    assert "step time ZB1P / 1F1B:" in proc.stdout and "step time ZBV / 1F1B:" in proc.stdout
