"""V-Half and V-Min (and V-Min at longer periods): the orders are valid and hold what the building block says;
the activation meter counts.

The gradients of every V schedule against the one-process learner are in ``test_pipeline.py`` (its
cases run every schedule of ``SCHEDULES``); here: the orders themselves (every pass once, in a
feasible order, the peak memory of each), the saved-tensor meter on plain autograd, and the
memory benchmark's quick run (real pipelines on 2 ranks, nothing left after a step).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from arena.trainers.parallel.pipeline.memory import ActivationMeter  # noqa: E402
from arena.trainers.parallel.pipeline.schedules import available_schedules, schedule_class  # noqa: E402
from arena.trainers.parallel.pipeline.vshape import BLOCKS, block_times, order_memory, v_order, v_stages  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _pipeline_sim as S  # noqa: E402


def _sim(order, p):
    acts = {r: [S.SimAction(s, k, mb) for k, s, mb in a] for r, a in order.items()}
    return S.simulate_order(acts, {"F": 1.0, "I": 1.0, "W": 1.0}, 2 * p)


def _check_order(order, p, m):
    """Every stage's F, I and W of every microbatch once, in order, and the ranks' orders run together."""
    for r, acts in order.items():
        stages = v_stages(r, p)
        assert sorted(acts) == sorted((k, s, mb) for k in "FIW" for s in stages for mb in range(m))
        for s in stages:
            for kind in "FIW":  # each kind in microbatch order
                assert [mb for k, st, mb in acts if (k, st) == (kind, s)] == list(range(m))
            for mb in range(m):  # F before I before W on the rank itself
                assert acts.index(("F", s, mb)) < acts.index(("I", s, mb)) < acts.index(("W", s, mb))
    sim = _sim(order, p)
    assert sim is not None  # the ranks' orders together never wait on each other forever
    assert sum(sim["busy"].values()) == 6 * p * m


@pytest.mark.parametrize("name", sorted(BLOCKS))
@pytest.mark.parametrize("p", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("m", [1, 2, 5, 8])
def test_every_pass_once_in_a_feasible_order(name, p, m):
    _check_order(v_order(p, m, *BLOCKS[name]), p, m)


@pytest.mark.parametrize("period", range(6, 13))
@pytest.mark.parametrize("block", [(1, 1), (2, 1)])
def test_every_period_gives_a_feasible_order_or_says_why_not(period, block):
    for p in (1, 2, 3, 4, 5, 8):
        try:
            order = v_order(p, 5, *block, period)
        except ValueError as e:  # some rank's F and I ticks meet modulo the period
            assert "no collision-free gap" in str(e) and p >= 3, (p, e)
            assert block == (2, 1) or period % 2  # V-Min has an order at every even period
            continue
        _check_order(order, p, 5)


def _text(order):
    return {r: " ".join(f"{k}{s}{mb}" for k, s, mb in acts) for r, acts in order.items()}


def test_period_six_is_the_six_tick_block():
    """The default period is the block before periods existed: these orders, pass for pass."""
    assert _text(v_order(2, 2, 1, 1)) == {0: "F00 F30 I30 W30 F01 I00 W00 F31 I31 W31 I01 W01",
                                          1: "F10 F20 I20 I10 F11 F21 W20 W10 I21 I11 W21 W11"}
    assert _text(v_order(2, 2, 2, 1)) == {0: "F00 F30 F01 I30 F31 W30 I00 W00 I31 W31 I01 W01",
                                          1: "F10 F20 F11 F21 I20 I10 W20 W10 I21 I11 W21 W11"}
    # period 8: the same ticks, the next microbatch 8 on; rank 1's Ws now come before its next forwards
    f, i = block_times(2, 1, 1, 0, 8)
    assert [f[s] for s in range(4)] == [0, 1, 2, 3] and [i[s] for s in range(4)] == [7, 6, 5, 4]
    assert _text(v_order(2, 2, 1, 1, 8))[1] == "F10 F20 I20 I10 W20 W10 F11 F21 I21 I11 W21 W11"  # 2 units, not 4

def test_block_offsets_are_the_building_block():
    f, i = block_times(4, 1, 1, 0)  # V-Min: one stage per tick down the V and back
    assert [f[s] for s in range(8)] == list(range(8)) and [i[s] for s in range(8)] == list(range(15, 7, -1))
    assert block_times(4, 2, 1, 0) is None  # V-Half's first free gap on 4 ranks is 4
    f, i = block_times(4, 2, 1, 4)  # V-Half: the first leg at half speed, both ways
    assert [f[s] for s in range(8)] == [0, 2, 4, 6, 7, 8, 9, 10]
    assert [i[s] for s in range(8)] == [25, 24, 23, 22, 21, 19, 17, 15]
    assert block_times(2, 1, 1, 1) is None  # I of stage 2 would share F of stage 1's tick modulo 6


def test_peak_memory_against_one_f_one_b():
    """Chunk-units (one V stage of one microbatch); 1F1B holds p microbatches of a two-unit stage: 2p."""
    def peak(name, p, m=32):
        return max(order_memory(v_order(p, m, *BLOCKS[name])).values())

    assert max(order_memory(S.one_f_one_b_order(4, 8)).values()) * 2 == 8
    assert [peak("vmin", p) for p in (2, 4, 8, 16)] == [4, 4, 8, 12]  # 1.0, 0.5, 0.5, 0.375 of 2p
    assert [peak("vhalf", p) for p in (2, 4, 8, 16)] == [5, 7, 11, 19]
    assert peak("vmin", 16) / 32 < 0.4 and peak("vmin", 16) < peak("vhalf", 16)
    assert [peak("vmin8", p) for p in (2, 4, 8, 16)] == [2, 4, 6, 10]  # 0.5, 0.5, 0.375, 0.31 of 2p
    assert [peak("vmin12", p) for p in (2, 4, 8, 16)] == [2, 2, 4, 6]  # 0.5, 0.25, 0.25, 0.19
    # 12 is the shortest period that takes V-Min under 0.4x of 1F1B's 8 units at 4 ranks (7 and 9: no order there)
    at_4 = {}
    for period in range(6, 13):
        try:
            at_4[period] = max(order_memory(v_order(4, 32, 1, 1, period)).values())
        except ValueError:
            pass
    assert at_4 == {6: 4, 8: 4, 10: 4, 11: 4, 12: 2}
    # rank 0 holds a microbatch's first and last stage at once: 2 units, its floor, which V-Min reaches
    assert order_memory(v_order(2, 32, *BLOCKS["vmin"]))[0] == 2


def test_schedule_classes_and_errors():
    assert {"vhalf", "vmin"} <= set(available_schedules())
    assert schedule_class("vmin").__name__ == "ScheduleVMin" and schedule_class("vhalf").block == (2, 1)
    assert {"vmin8", "vmin12"} <= set(available_schedules())
    cls = schedule_class("vmin12")
    assert cls.__name__ == "ScheduleVMin12" and cls.block == (1, 1) and cls.period == 12
    assert schedule_class("vmin").period == schedule_class("vhalf").period == 6
    with pytest.raises(ValueError, match="at least one rank"):
        v_order(0, 4, 1, 1)
    with pytest.raises(ValueError, match="period must be >= 6"):
        v_order(2, 4, 1, 1, 5)
    with pytest.raises(ValueError, match="no collision-free gap for the block \\(1, 1\\) with period 7 on 4 ranks"):
        v_order(4, 4, 1, 1, 7)


def test_meter_counts_saved_activations_once_and_releases_them():
    meter = ActivationMeter()
    lin = torch.nn.Linear(64, 64)
    meter.skip_parameters(lin.parameters())
    x = torch.randn(32, 64, requires_grad=True)
    with meter.counting(0):
        h = lin(x)  # saves x (and the weight, which does not count)
        y = h.exp()  # exp saves its output: 32 x 64 floats
        z = (y * y).sum()  # y saved twice by one mul: one storage
    assert meter.peak == meter.current == x.nbytes + h.nbytes + 0  # x, exp's output (h's size); y*y shares it
    assert dict(meter.peak_by_stage) == {0: meter.peak}
    z.backward()
    del h, y, z
    assert meter.current == 0 and meter.live == {}  # everything released, nothing kept in a cycle
    meter.reset()
    assert meter.peak == 0


def test_meter_stage_over_many_steps_does_not_grow():
    meter = ActivationMeter()
    w = torch.randn(16, 16, requires_grad=True)
    for _ in range(5):
        with meter.counting(3):
            out = torch.tanh(torch.randn(8, 16) @ w).exp().sum()  # tanh and exp save their outputs
        out.backward()
        del out
    assert meter.current == 0 and meter.peak > 0


def test_memory_benchmark_quick_runs_and_keeps_nothing_after_a_step(capsys):
    import bench_pipeline_memory

    bench_pipeline_memory.main(["--quick"])  # in this process; its ranks are spawned as in a run of the script
    proc = SimpleNamespace(stdout=capsys.readouterr().out)
    rows = {m.group(1): m.group(0).split("|")
            for m in re.finditer(r"^\| 2 \| (\w*[a-z]\w*) \| [\d.]+ / .*$", proc.stdout, re.M)}
    offload = {(m.group(1), m.group(2)): m.group(0).split("|")
               for m in re.finditer(r"^\| 2 \| (\w+) \| (none|full|selective) \|.*$", proc.stdout, re.M)}
    assert set(rows) == {"1f1b", "vhalf", "vmin", "vmin12"}  # --quick's schedules
    largest = {s: max(float(v) for v in r[3].split("/")) for s, r in rows.items()}
    for s, r in rows.items():
        assert r[8].strip() == "0 / 0", s  # every saved activation released by the step's end
        assert largest[s] > 0
    assert rows["1f1b"][4].strip() == "1.00x"
    assert largest["vmin"] < largest["vhalf"]  # the tighter block holds less (model: 4 vs 5 units at p = 2)
    assert largest["vmin12"] < largest["vmin"]  # the longer period holds less (model: 2 vs 4 units at p = 2)
    assert "| 16 | 32 | " in proc.stdout  # the model table for larger rank counts
    assert {s for s, _ in offload} == {"zbv", "vmin"} and len(offload) == 6
    for key, r in offload.items():
        assert r[7].strip() == "0" and r[9].strip() == "0 / 0", key  # no late copy back, nothing left anywhere
    assert float(offload[("zbv", "full")][5].strip()[:-1]) < 0.9  # ZB-V's rank 0 sends its long-lived stage out
