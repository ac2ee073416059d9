"""Activation offload: the same gradients, the bytes accounted on the device and the host, copies back in time.

One process first (plain autograd through the hooks), then a launch of 2 gloo ranks (about
5 s) that runs 1F1B (full), ZB-V (full, selective) and V-Min (selective) beside no offload: every gradient equals
the plain pipeline's bit for bit, no backward waits for a copy back, nothing is left anywhere
after a step, and what stays on the device is less where the order leaves something to offload.
Training with an offload, resumed from one process, is in ``test_parallel_train.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from arena.trainers.parallel.config import ParallelConfig  # noqa: E402
from arena.trainers.parallel.launch import launch  # noqa: E402
from arena.trainers.parallel.pipeline.memory import ActivationMeter, ActivationOffload, rank_passes  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _chain(meter, x, w1, w2):
    """Two 'stages' of one microbatch each through the meter's hooks; returns the loss."""
    with meter.counting(0, 0):
        h = torch.tanh(x @ w1)
    meter.after_forward(0, 0, last=False)
    with meter.counting(1, 0):
        y = (h @ w2).exp().mean()
    meter.after_forward(1, 0, last=False)
    return y


def test_offload_in_one_process_moves_bytes_and_keeps_gradients():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 32, generator=g)
    w1 = torch.randn(32, 32, generator=g, requires_grad=True)
    w2 = torch.randn(32, 8, generator=g, requires_grad=True)
    ref = ActivationMeter()
    ref.skip_parameters([w1, w2])
    _chain(ref, x, w1, w2).backward()
    g_ref = (w1.grad.clone(), w2.grad.clone())
    w1.grad = w2.grad = None

    off = ActivationOffload("full")
    off.skip_parameters([w1, w2])
    off.plan([("F", 0, 0), ("F", 1, 0), ("B", 1, 0), ("B", 0, 0)])  # stage 0 has a pass between: offloaded
    assert off.eligible == {(0, 0)}
    y = _chain(off, x, w1, w2)
    stage0 = 2 * 64 * 32 * 4  # tanh's output and x (mm saves x for w1's gradient)
    assert off.host == stage0 and off.current_by_stage[0] == 0 and off.current_by_stage[1] > 0
    y.backward()  # stage 0's tensors come back when autograd unpacks them
    assert off.late == off.reloads == off.offloads == 2  # two storages, brought back by the unpack itself
    assert torch.equal(w1.grad, g_ref[0]) and torch.equal(w2.grad, g_ref[1])
    del y
    assert off.current == 0 and off.host == 0 and off.live == {}


def test_a_budget_offloads_what_selective_would_keep():
    x = torch.randn(16, 16)
    w1 = torch.randn(16, 16, requires_grad=True)
    w2 = torch.randn(16, 4, requires_grad=True)
    off = ActivationOffload("selective", budget=0)
    off.skip_parameters([w1, w2])
    off.plan([("F", 0, 0), ("B", 0, 0), ("F", 1, 0), ("B", 1, 0)])  # no pass between: nothing eligible
    assert off.eligible == set()
    y = _chain(off, x, w1, w2)
    assert off.current == 0 and off.host > 0  # over a budget of 0 bytes everything leaves
    off.fetch((1, 0))
    off.fetch((0, 0))
    assert off.late == 0 and off.host == 0 and off.current > 0
    y.backward()
    del y
    assert off.current == 0


def test_modes_and_config_errors():
    with pytest.raises(ValueError, match="offload mode 'half' is not one of full, selective"):
        ActivationOffload("half")
    with pytest.raises(ValueError, match="offload 'some' is not one of none, full, selective"):
        ParallelConfig(mode="pipeline", offload="some")
    with pytest.raises(ValueError, match="it needs mode: pipeline, got odc"):
        ParallelConfig(mode="odc", offload="full")
    assert ParallelConfig(mode="pipeline", offload="selective").offload == "selective"


def _rank(info):
    import argparse

    from bench_pipeline import _model, _samples

    from arena.trainers.parallel.pipeline.runtime import LMPipeline
    from arena.trainers.parallel.pipeline.step import pipeline_step
    from arena.trainers.parallel.pipeline.whole_model import gather_named

    args = argparse.Namespace(hidden=32, layers=4, samples=8, prompt=12, response=6, microbatches=4, seed=0)
    out = {}
    for sched, modes in (("1f1b", ("none", "full")), ("zbv", ("none", "full", "selective")),
                         ("vmin", ("none", "selective"))):
        for mode in modes:
            model, tok = _model(args)
            meter = ActivationMeter() if mode == "none" else ActivationOffload(mode)
            pipe = LMPipeline(model, sched, n_microbatches=4, meter=meter)
            pipeline_step(pipe, _samples(args), pad_id=tok.pad_token_id)
            meter.reset()
            step = pipeline_step(pipe, _samples(args), pad_id=tok.pad_token_id)
            sched_obj = next(iter(pipe._schedules.values()))
            out[(sched, mode)] = {
                "loss": step.loss, "grads": gather_named(pipe, "grad"), "peak": meter.peak,
                "left": meter.current + getattr(meter, "host", 0), "host_peak": getattr(meter, "host_peak", 0),
                "late": getattr(meter, "late", 0), "passes": rank_passes(sched_obj, info.rank, 2, 4)}
    return out


@pytest.fixture(scope="module")
def runs():
    return launch(_rank, 2, (), timeout_s=300)


@pytest.mark.parametrize("sched,mode", [("1f1b", "full"), ("zbv", "full"), ("zbv", "selective"), ("vmin", "selective")])
def test_pipeline_offload_equals_no_offload(runs, sched, mode):
    for r in (0, 1):
        base, got = runs[r][(sched, "none")], runs[r][(sched, mode)]
        assert got["loss"] == base["loss"]
        if r == 0:  # rank 0 gathers every rank's gradients by full name
            assert len(base["grads"]) > 10
            for name, g in base["grads"].items():
                assert torch.equal(got["grads"][name], g), name
        assert got["left"] == 0 and base["left"] == 0  # nothing on the device or the host after the step
        assert got["late"] == 0  # every copy back had started a pass before its backward
        assert got["peak"] <= base["peak"] * 1.05
    if sched == "zbv":  # rank 0's first stage lives across the whole V: half of it stays on the host
        assert runs[0][(sched, mode)]["peak"] < 0.7 * runs[0][(sched, "none")]["peak"]
        assert runs[0][(sched, mode)]["host_peak"] > 0


def test_rank_passes_are_each_schedules_order(runs):
    assert runs[0][("1f1b", "none")]["passes"] == [("F", 0, 0), ("F", 0, 1), ("B", 0, 0), ("F", 0, 2), ("B", 0, 1),
                                                    ("F", 0, 3), ("B", 0, 2), ("B", 0, 3)]
    assert runs[1][("1f1b", "none")]["passes"][:3] == [("F", 1, 0), ("B", 1, 0), ("F", 1, 1)]
    for r in (0, 1):
        passes = runs[r][("vmin", "none")]["passes"]
        assert len(passes) == 3 * 2 * 4 and {p[0] for p in passes} == {"F", "I", "W"}
