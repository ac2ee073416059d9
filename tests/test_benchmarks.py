"""Smoke tests of the benchmarks: bench_llm.py's learner-step section, a one-run ablation, the tactics probe,
bench_prosthetics.py with tiny sizes, the wired parallel learner step and the rollout-precision mismatch; and
the analysis helpers beside them (the pipeline's schedule simulation, ODC's ideal speed-ups)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1", COLUMNS="200")
    proc = subprocess.run([sys.executable, *args], cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    return proc


def test_bench_llm_quick_step_prints_ratio_table():
    proc = _run([str(BENCH / "bench_llm.py"), "--quick", "--only", "step", "--threads", "1", "--batch", "32",
                 "--repeats", "3", "--warmup", "1"], timeout=120)
    out = proc.stdout
    assert "Ratios" in out and "Markdown" in out
    for loss in ("ppo_clip", "dppo_binary_tv", "dppo_topk_kl"):
        assert f"| {loss} |" in out  # a markdown row per loss
    md_ratio_rows = [line for line in out.splitlines() if line.startswith("| a. ")]
    labels = " ".join(md_ratio_rows)
    assert "step time dppo_binary_tv / ppo_clip" in labels and "step time dppo_topk_kl / ppo_clip" in labels
    assert "peak step memory dppo_topk_kl / ppo_clip" in labels
    for line in md_ratio_rows:  # | label | 1.012x | <= 1.05x | PASS |  (info rows: | ... | - | - |)
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1].endswith("x") and float(cells[1][:-1]) > 0
        if cells[2] == "-":
            assert cells[3] == "-" and "(info)" in cells[0]
        else:
            assert cells[2] == "<= 1.05x" and cells[3] in ("PASS", "below goal")


def test_ablation_one_tiny_run_writes_table_and_plot(tmp_path):
    out = tmp_path / "ablation"
    args = [str(BENCH / "ablation.py"), "--variants", "base", "--iterations", "1", "--seeds", "1",
            "--games-per-iter", "4", "--eval-games", "4", "--il-matches", "10", "--il-epochs", "1",
            "--threads", "1", "--out", str(out)]
    proc = _run(args, timeout=300)
    md = (out / "ablation.md").read_text()
    png = out / "ablation.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = [line for line in md.splitlines() if line.startswith("| base |")]
    assert len(rows) == 1, md
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[2] == "1"  # one seed finished
    assert "±" in cells[3]  # final win rate mean ± std
    assert 0.0 <= float(cells[4]) <= 1.0  # best
    assert (out / "base" / "seed-0" / "ablation_done.json").is_file()
    assert "| base |" in proc.stdout

    # --reuse: the finished run is skipped, the report is rebuilt
    proc2 = _run(args + ["--reuse"], timeout=120)
    assert "reused" in proc2.stdout
    assert (out / "ablation.md").read_text().count("| base |") == 1


def test_ttt_tactics_rules_positions_and_a_checkpoint(tmp_path):
    """The tactics probe: rule win rates in the right order, every position, and a real model's greedy moves."""
    sys.path.insert(0, str(BENCH))
    try:
        import ttt_tactics as T
    finally:
        sys.path.remove(str(BENCH))
    assert T.winning_cells("xx.oo....", "x") == [2] and T.winning_cells("xx.oo....", "o") == [5]
    pos = T.positions()
    assert len(pos) == 4520 and ("." * 9, 0) in pos  # non-terminal positions with the mover
    wr = T.heuristics(games=4000)
    assert 0.40 < wr["random"] < 0.47 and wr["wins+block+centre"] > 0.85
    assert wr["random"] < wr["centre"] < wr["wins"] < wr["wins+centre"] < wr["wins+block+centre"]
    from arena.inference.models import load_model, make_tiny_model_folder

    model, tok = load_model(make_tiny_model_folder(tmp_path / "m", seed=0))
    t = T.tactics(T.GreedyPlayer(model, tok))
    assert t["positions"] == 4520 and t["win_positions"] + t["threat_positions"] <= 4520
    assert t["invalid"] > 0.5  # an untrained model does not answer with a legal cell


def test_bench_prosthetics_tiny_env_and_procs_print_ratios_and_json(tmp_path):
    """The arena / raw OpenSim comparison on one episode and 1 vs 2 simulator processes on 20 steps."""
    pytest.importorskip("opensim")
    out = tmp_path / "pros.json"
    proc = _run([str(BENCH / "bench_prosthetics.py"), "--only", "env", "--only", "procs", "--episodes", "1",
                 "--steps", "20", "--rounds", "1", "--json", str(out)], timeout=120)
    figures = json.loads(out.read_text())
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == figures  # the JSON line is the file's
    env, procs = figures["env"], figures["procs"]
    assert env["episodes"] == 1 and env["steps"] > 0 and env["arena_steps_per_s"] > 0 and env["raw_steps_per_s"] > 0
    assert env["ratio"] == pytest.approx(env["arena_steps_per_s"] / env["raw_steps_per_s"])
    # the raw loop replayed the arena's actions: the same trajectory, to the bit, falling at the same step
    assert env["same_fall_step"] == 1 and env["max_dq"] == 0.0 and env["max_du"] == 0.0
    assert env["per_episode"][0]["fall_arena"] == env["per_episode"][0]["fall_raw"]
    parts = env["breakdown"]["parts_us"]
    assert parts["integrate"] > 0.5 * env["breakdown"]["us_per_step"]  # the simulator is most of a step
    assert set(procs["steps_per_s"]) == {"n1", "n2", "inproc"} and procs["ratio"] > 0 and procs["pool_ratio"] > 0
    for label in ("raw opensim", "| arena part |", "2 workers / 1 worker", ">= 0.95x", ">= 1.8x"):
        assert label in proc.stdout


def test_bench_prosthetics_without_opensim_says_so_and_exits_2(monkeypatch, capsys):
    import importlib.util

    monkeypatch.syspath_prepend(str(BENCH))  # sys.path comes back whole afterwards (the script adds its folder too)
    import bench_prosthetics as B

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "opensim" else real(name, *a))
    assert B.main(["--only", "env"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "opensim is not installed" in err[0] and "arena[opensim]" in err[0]


def test_bench_parallel_learner_quick_prints_every_mode_equal_to_one_process():
    proc = _run([str(BENCH / "bench_parallel_learner.py"), "--quick"], timeout=600)
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in proc.stdout.splitlines() if line.startswith("| ") and "learner step" not in line}
    assert set(rows) == {"one process", "one process, every core", "odc", "fsdp (FSDP2)", "pipeline 1f1b",
                         "pipeline zbv"}
    assert rows["one process"][1] == "1.00x"
    for label, cols in rows.items():
        assert float(cols[3]) < 1e-5, label  # every mode computes the one-process update


def test_precision_mismatch_quick_orders_the_precisions():
    proc = _run([str(BENCH / "precision_mismatch.py"), "--quick"], timeout=600)
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in proc.stdout.splitlines() if line.startswith("| rollout ") and "precision" not in line}
    first = {k.split()[1]: float(v[0]) for k, v in rows.items()}
    assert set(first) == {"fp32", "fp16", "bf16"}
    assert first["fp32"] < 1e-6 < first["fp16"] < first["bf16"]  # fp16 keeps more mantissa than bf16


def test_bench_web_smoke_prints_latency_table():
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    proc = _run([str(BENCH / "bench_web.py"), "--players", "6", "--matches", "40", "--clients", "3",
                 "--requests", "12"], timeout=300)
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and not line.startswith("| endpoint")]
    assert [r.split("|")[1].strip() for r in rows] == ["leaderboard", "match page (newest)", "match page (middle)",
                                                       "match page (a player)", "one match"]
    for r in rows:
        cells = [c.strip() for c in r.strip("|").split("|")]
        assert cells[1] == "12" and cells[2] == "0"  # every request answered
        assert float(cells[4]) > 0 and float(cells[5]) >= float(cells[4])
    assert "fastapi" in proc.stdout


def test_bench_replay_store_smoke_compares_the_two_forms():
    proc = _run([str(BENCH / "bench_replay_store.py"), "--matches", "64", "--rounds", "1"], timeout=300)
    rows = {line.split("|")[1].strip(): line.split("|")[2:] for line in proc.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| design")}
    assert len(rows) == 3 and any("league database" in k for k in rows)
    assert all(float(v[0]) > 0 and int(v[2].replace(",", "")) > 500 for v in rows.values())  # ms, bytes a match
    assert "database / files with group commit (time):" in proc.stdout


def test_simulated_1f1b_order_matches_the_closed_form(monkeypatch):
    """The pipeline benchmark's schedule simulation (``_pipeline_sim``) on the textbook 1F1B order."""
    monkeypatch.syspath_prepend(str(BENCH))
    import _pipeline_sim as S

    for p, m in ((2, 4), (4, 8), (3, 3)):
        sim = S.simulate_order(S.one_f_one_b_order(p, m), {"F": 1.0, "B": 2.0}, p)
        assert all(b == pytest.approx((p - 1) / (m + p - 1)) for b in sim["bubble"].values())
        assert sim["makespan"] == pytest.approx(3 * (m + p - 1))


def test_lockstep_ratio_is_the_ideal_speedup(monkeypatch):
    """The ODC benchmark's ideal speed-ups (``_sharded_sim``) on token tables worked by hand."""
    monkeypatch.syspath_prepend(str(BENCH))
    from _sharded_sim import fsdp2_best_ratio, lockstep_ratio

    assert lockstep_ratio([[4, 1], [1, 4]]) == pytest.approx(8 / 5)  # alternating 4:1
    assert lockstep_ratio([[2, 2], [2, 2]]) == 1.0
    assert lockstep_ratio([[3, 1], [2, 2]]) == pytest.approx(5 / 4)
    assert lockstep_ratio([[5], []]) == 1.0
    # FSDP2-best waits only in the first forward and the last backward (forward 1/3, backward 2/3):
    # 4/3 + max(8/3 + 5 + 1/3, 2/3 + 5 + 4/3) + 8/3 = 12 against ODC's 10
    assert fsdp2_best_ratio([[4, 1, 4, 1], [1, 4, 1, 4]]) == pytest.approx(12 / 10)
    assert fsdp2_best_ratio([[2, 2], [2, 2]]) == pytest.approx(1.0)
    assert fsdp2_best_ratio([[3], [1]]) == pytest.approx(1.0)


def test_bench_simultaneous_smoke_prints_its_ratios():
    proc = _run([str(BENCH / "bench_simultaneous.py"), "--games", "8", "--rounds", "1"], timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| lock step")]
    assert len(rows) == 3
    assert all(float(r.split("|")[2].strip().replace(",", "")) > 0 for r in rows)  # a rate in every row


def test_leduc_exploitability_tables_add_up_to_nash_conv(capsys):
    """The split of NashConv by self-play reach: the parts of each table sum to the NashConv it heads."""
    import re

    sys.path.insert(0, str(BENCH))
    import leduc_exploitability

    assert leduc_exploitability.main(["--cfr", "5", "--top", "3"]) == 0
    out = capsys.readouterr().out
    total = float(re.search(r"NashConv ([0-9.]+) over 936 information states", out).group(1))
    parts = [float(m) for m in re.findall(r"^\| (?:>=|\[|<)[^|]*\| \d+ \| [0-9.]+ \| ([0-9.]+) \|", out, re.M)]
    assert len(parts) == 4 and sum(parts) == pytest.approx(total, abs=0.003) and total > 0.1
    assert len(re.findall(r"^\| `P[01] card \d", out, re.M)) == 3


def test_leduc_qre_table_falls_with_the_temperature_and_names_kl_coef(capsys):
    """The regularised fixed point's table, on Kuhn for speed: a row per temperature, highest first, its
    kl_coef at the reward scale, NashConv falling with the temperature, a too-large step marked."""
    import re

    sys.path.insert(0, str(BENCH))
    import leduc_qre

    assert leduc_qre.main(["--game", "kuhn_poker", "--temperatures", "0.3", "1", "--reward-scale", "0.1"]) == 0
    rows = re.findall(r"^\| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| [0-9.]+ \| \d+ \| [0-9.e+-]+ \| (yes|no) \|",
                      capsys.readouterr().out, re.M)
    assert [(t, k, y) for t, k, _, y in rows] == [("1", "0.1", "yes"), ("0.3", "0.03", "yes")]
    assert [float(r[2]) for r in rows] == pytest.approx([0.3396, 0.1379], abs=1e-4)
    assert leduc_qre.main(["--game", "kuhn_poker", "--temperatures", "0.1", "--step", "2", "--iterations", "50"]) == 0
    assert re.search(r"^\| 0.1 \| .* \| no \|", capsys.readouterr().out, re.M)
    assert leduc_qre.main(["--game", "kuhn_poker", "--magnet", "cfr:3", "--temperatures", "100", "0.2"]) == 0
    out = capsys.readouterr().out
    magnet = float(re.search(r"magnet cfr:3, NashConv ([0-9.]+)", out).group(1))
    hot, cold = (float(x) for x in re.findall(r"^\| [0-9.]+ \| [0-9.]+ \| ([0-9.]+) \|", out, re.M))
    assert hot == pytest.approx(magnet, abs=0.01) and cold < magnet - 0.1


def test_bench_ratings_scale_quick_prints_its_parts_and_the_ratio(tmp_path):
    proc = _run([str(BENCH / "bench_ratings_scale.py"), "--players", "60", "--results", "5000", "--repeat", "1",
                 "--dir", str(tmp_path / "lg")], timeout=300)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["results"] == 5000 and out["ratio"] > 0
    s = out["seconds"]
    assert s["lines"] > 60 and s["first read (the tally counted from the results, once)"] > 0
    assert "| arena ratings / bare point fit |" in proc.stdout


def test_skirmish_move_orders_are_told_apart_by_where_they_send_the_units(monkeypatch):
    """Three own marines at x = 8 (health 1, 1, 0.25) and one enemy in sight at x = 16, on a 32 x 32 map:
    the hurt one sent back west is a pull back (its health a third of the squad's mean, 0.75); all
    three sent west a retreat; one sent east an advance; with the enemy out of sight, unseen."""
    import numpy as np

    from arena.envs.skirmish import F_ENEMY, F_HEALTH, F_OWN, F_PRESENT, F_X, F_Y, FEATURES

    monkeypatch.syspath_prepend(str(BENCH))
    import skirmish_strength as S

    ent = np.zeros((6, FEATURES), np.float32)
    for u, hp in enumerate((1.0, 1.0, 0.25)):
        ent[u, [F_OWN, F_PRESENT, F_HEALTH, F_X, F_Y]] = 1, 1, hp, 8 / 32, (14 + 2 * u) / 32
    ent[3, [F_ENEMY, F_PRESENT, F_HEALTH, F_X, F_Y]] = 1, 1, 1, 16 / 32, 16 / 32
    size, west, east = (32.0, 32.0), [4, 0], [4, 5]  # cells [row, col] of the 8 x 8 grid: x = 2 and x = 22
    kind, ratio = S.move_kind({"entities": ent}, {"type": 1, "units": [2], "location": west}, size)
    assert kind == "pull_back" and ratio == pytest.approx(0.25 / 0.75)
    assert S.move_kind({"entities": ent}, {"type": 1, "units": [0, 1, 2], "location": west}, size)[0] == "retreat"
    assert S.move_kind({"entities": ent}, {"type": 1, "units": [0], "location": east}, size)[0] == "advance"
    ent[3, F_PRESENT] = 0  # the enemy out of sight
    assert S.move_kind({"entities": ent}, {"type": 1, "units": [2], "location": west}, size)[0] == "unseen"
