"""Vocabulary parallelism: the step equals the one-process learner's, checkpoints cross it, the shards balance.

One launch of 2 gloo ranks (about 10 s) runs the cases; the reference is ``LLMLearner.step`` on
the same samples, as in ``test_pipeline.py``. With 2 ranks each holds three stages: its embedding
shard, half the decoder layers, its output shard; the tied embedding and head are one shard
parameter per rank, and their gathered gradient is the unsplit model's.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pipeline import BASE, M, TOL, _model, _reference, _samples  # noqa: E402

from arena.inference.models import load_model  # noqa: E402
from arena.trainers.llm.learner import LearnerSettings  # noqa: E402
from arena.trainers.parallel.config import ParallelConfig  # noqa: E402
from arena.trainers.parallel.launch import launch  # noqa: E402
from arena.trainers.parallel.pipeline import PipelineError  # noqa: E402
from arena.trainers.parallel.pipeline.runtime import LMPipeline  # noqa: E402
from arena.trainers.parallel.pipeline.step import clip_grad_norm_, pipeline_step  # noqa: E402
from arena.trainers.parallel.pipeline.vocab import boundary_width, vocab_ranges, vp_stage_indices  # noqa: E402
from arena.trainers.parallel.pipeline.whole_model import (  # noqa: E402
    full_state_dict,
    gather_named,
    load_pretrained,
    save_pretrained,
)

CASES = [
    ("interleaved_1f1b", "interleaved_1f1b", BASE),
    ("zb1p", "zb1p", BASE),
    ("zb1p-ppo-seq_mean-entropy-temperature", "zb1p",
     LearnerSettings(loss="ppo_clip", agg="seq_mean", entropy_coef=0.01, temperature=0.7)),
]


def _worker(info, folder):
    out = {}
    for case_id, schedule, settings in CASES:
        model, tok = _model()
        pipe = LMPipeline(model, schedule, n_microbatches=M, settings=settings, vocab_parallel=True)
        step = pipeline_step(pipe, _samples(False), pad_id=tok.pad_token_id)
        out[case_id] = {"loss": step.loss, "stats": step.stats, "grads": gather_named(pipe, "grad"),
                        "grad_norm": clip_grad_norm_(pipe, 1e9),
                        "params": sum(p.numel() for p in pipe.parameters()), "stages": pipe.stage_ids}
    # checkpoint: one update, save as a Hugging Face folder, and load it back into a fresh vocabulary split
    model, tok = _model(seed=1)
    pipe = LMPipeline(model, "interleaved_1f1b", n_microbatches=M, settings=BASE, vocab_parallel=True)
    pipeline_step(pipe, _samples(False), pad_id=tok.pad_token_id)
    with torch.no_grad():
        for p in pipe.parameters():
            p -= 0.5 * p.grad
    save_pretrained(pipe, folder, tokenizer=tok)
    other = LMPipeline(_model(seed=2)[0], "zb1p", n_microbatches=M, settings=BASE, vocab_parallel=True)
    load_pretrained(other, folder)
    out["roundtrip"] = {"saved": full_state_dict(pipe), "loaded": full_state_dict(other)}
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vp") / "ckpt"
    return launch(_worker, 2, (str(folder),), timeout_s=300), folder


@pytest.mark.parametrize("case_id,schedule,settings", CASES, ids=[c[0] for c in CASES])
def test_step_equals_single_process_learner(runs, case_id, schedule, settings):
    results, _ = runs
    r0, r1 = results[0][case_id], results[1][case_id]
    stats, ref = _reference(settings)
    assert r0["loss"] == r1["loss"] == pytest.approx(stats["loss"], abs=TOL, rel=TOL)
    for k in ("entropy", "mismatch", "ratio_mean"):
        assert r0["stats"][k] == pytest.approx(stats[k], abs=TOL, rel=TOL), k
    assert r0["grad_norm"] == pytest.approx(stats["grad_norm"], rel=TOL)
    grads = r0["grads"]
    worst = max(float((grads[n] - ref[n]).abs().max()) for n in ref)
    assert worst < TOL, f"{case_id}: largest gradient difference {worst:.2e}"
    # the tied embedding's gradient, gathered from both ranks' shards, is the unsplit model's (both uses summed)
    assert grads["model.embed_tokens.weight"].shape == ref["model.embed_tokens.weight"].shape
    assert r0["stages"] == [0, 2, 4] and r1["stages"] == [1, 3, 5]


def test_checkpoint_from_vocabulary_shards_loads_in_one_process_and_another_split(runs):
    results, folder = runs
    saved, loaded = results[0]["roundtrip"]["saved"], results[0]["roundtrip"]["loaded"]
    model, _ = load_model(folder)
    one = model.state_dict()
    assert set(saved) == set(one)
    for k, v in one.items():
        torch.testing.assert_close(saved[k], v, atol=0, rtol=0)
        torch.testing.assert_close(loaded[k], v, atol=0, rtol=0)
    assert results[1]["roundtrip"]["saved"] is None


def test_the_shards_balance_parameters(runs):
    results, _ = runs
    a, b = (results[r]["interleaved_1f1b"]["params"] for r in (0, 1))
    assert abs(a - b) <= 32 * 2  # one vocabulary row at most (hidden 32), the layers halved exactly
    model, _ = _model()
    total = sum(p.numel() for p in model.parameters())  # the tied weight once
    assert a + b == total


def test_layout_and_errors():
    assert vocab_ranges(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert vp_stage_indices(1, 4) == [1, 5, 9]
    assert [boundary_width(s, 2, 32) for s in range(6)] == [33, 33, 33, 33, 37, 4]
    with pytest.raises(PipelineError, match="cannot be split over 4 ranks"):
        vocab_ranges(3, 4)
    with pytest.raises(ValueError, match="vocab_parallel runs on interleaved_1f1b or zb1p"):
        ParallelConfig(mode="pipeline", schedule="1f1b", vocab_parallel=True)
    with pytest.raises(ValueError, match="it needs mode: pipeline, got odc"):
        ParallelConfig(mode="odc", vocab_parallel=True)
    assert ParallelConfig(mode="pipeline", schedule="zb1p", vocab_parallel=True).vocab_parallel


def test_what_vocabulary_parallelism_refuses_is_one_line():
    """Checked before the pipeline needs its process group."""
    model, _ = _model()
    with pytest.raises(PipelineError, match=r"loop stages over the ranks \(interleaved_1f1b, zb1p\), not zbv"):
        LMPipeline(model, "zbv", n_microbatches=M, settings=BASE, vocab_parallel=True)
    with pytest.raises(PipelineError, match="top-K tokens") as e:
        LMPipeline(model, "zb1p", n_microbatches=M, settings=replace(BASE, loss="dppo_topk_tv"), vocab_parallel=True)
    assert "\n" not in str(e.value)


def test_bench_pipeline_vocab_quick_prints_the_table(capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    import bench_pipeline_vocab

    bench_pipeline_vocab.main(["--quick"])  # in this process; its ranks are spawned as in a run of the script
    out = capsys.readouterr().out
    rows = {r.split("|")[1].strip(): r.split("|") for r in out.splitlines() if r.startswith("| ") and "x |" in r}
    assert set(rows) == {"1f1b", "interleaved_1f1b", "interleaved_1f1b + vocab parallel", "zb1p + vocab parallel"}
    mib = [float(v) for v in rows["interleaved_1f1b + vocab parallel"][3].split("/")]
    ends = [float(v) for v in rows["1f1b"][3].split("/")]
    assert max(mib) < max(ends)  # each rank holds a shard of the table instead of an end holding all of it
