"""The neural-policy learner data parallel on 2 ranks (``parallel: {mode: odc | fsdp}``) equals one process.

SCC runs on Leduc poker with two learners (the main agent and a league exploiter, both data
parallel on one group of ranks), after an imitation warm start (the KL anchor), with PPO (an odd
minibatch of 17 moves, so the shares are unequal) and with V-trace (whole trajectories per
share, the KL to the uniform magnet, which has no weights to send); a single-agent PPO run with a
Gaussian head and an observation normaliser (buffers that move with the step) and ``target_kl``
(the early stop must agree on every rank); and a checkpoint of one process resumed on 2 ranks.
Every learner's weights and version equal one process's within 1e-6 (about 1e-8 measured); a lost
optimizer state moves them by about lr.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")

from arena.errors import ConfigError  # noqa: E402
from arena.trainers.registry import make_trainer  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
TOL = 1e-6


def _scc(tmp: Path, name: str, algo: str, magnet: str = "imitation", **parallel) -> Path:
    cfg = yaml.safe_load((ROOT / "configs" / "train" / "scc_leduc.yaml").read_text())
    cfg.update(iterations=2, games_per_iter=8, threads=1, magnet={"kind": magnet})
    cfg["learners"] = [{"name": "main", "role": "main"}, {"name": "league_exploiter", "role": "league_exploiter"}]
    cfg["learner"].update(algo=algo, minibatch=17, epochs=2)
    cfg["eval"] = {"every": 2, "games": 8, "opponents": ["random"]}
    cfg["il"].update(matches=20, epochs=1, workers=1)
    cfg["parallel"] = parallel
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def _ppo(tmp: Path, name: str, **parallel) -> Path:
    cfg = {"trainer": "ppo", "game": "Pendulum-v1", "seed": 0, "envs": 2, "processes": False, "steps_per_env": 48,
           "iterations": 2, "sizes": {"hidden": [16], "obs_norm": True, "continuous": "gaussian"},
           "learner": {"epochs": 4, "minibatch": 20, "target_kl": 0.001}, "eval": {"every": 2, "seeds": [0]}, "parallel": parallel}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def _train(cfg: Path, run: Path, iterations: int | None = None) -> dict:
    t = make_trainer(cfg, run, iterations=iterations)
    try:
        return t.run(iterations)
    finally:
        t.close()


def _learners(run: Path) -> dict[str, dict]:
    state = torch.load(run / "latest" / "trainer_state.pt", weights_only=False)
    return state["learners"] if "learners" in state else {"ppo": state["learner"]}


def _diff(a: Path, b: Path) -> float:
    la, lb = _learners(a), _learners(b)
    assert la.keys() == lb.keys()
    out = 0.0
    for name in la:
        assert la[name]["version"] == lb[name]["version"], name
        na, nb = la[name]["net"], lb[name]["net"]
        out = max(out, max(float((na[k].float() - nb[k].float()).abs().max()) for k in na))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("policy-parallel")
    for name, cfg in {"scc-ppo-none": _scc(tmp, "a", "ppo"), "scc-ppo-odc": _scc(tmp, "b", "ppo", mode="odc"),
                      "scc-vtrace-none": _scc(tmp, "c", "vtrace", "uniform"),
                      "scc-vtrace-fsdp": _scc(tmp, "d", "vtrace", "uniform", mode="fsdp"),
                      "ppo-none": _ppo(tmp, "e"), "ppo-fsdp": _ppo(tmp, "f", mode="fsdp"),
                      "ppo-odc": _ppo(tmp, "g", mode="odc")}.items():
        _train(cfg, tmp / name)
    # one process for iteration 1, then 2 ranks (odc) for iteration 2, against one process resumed. (A run
    # that goes on plays iteration 2 while iteration 1 learns, with the older weights -- SCC's overlap --
    # and a run that ends at 1 does not, so a continued run is compared with a continued run.)
    _train(_scc(tmp, "h", "ppo"), tmp / "scc-ppo-none1", iterations=1)
    for name, cfg in (("scc-ppo-none-none", _scc(tmp, "h", "ppo")), ("scc-ppo-none-odc", _scc(tmp, "b2", "ppo",
                                                                                            mode="odc"))):
        shutil.copytree(tmp / "scc-ppo-none1", tmp / name, symlinks=True)
        _train(cfg, tmp / name)
    return tmp


@pytest.mark.parametrize("ref, run", [("scc-ppo-none", "scc-ppo-odc"), ("scc-vtrace-none", "scc-vtrace-fsdp"),
                                      ("ppo-none", "ppo-fsdp"), ("ppo-none", "ppo-odc"),
                                      ("scc-ppo-none-none", "scc-ppo-none-odc")])
def test_the_data_parallel_policy_learner_equals_one_process(runs, ref, run):
    assert (runs / run / "latest").resolve().name == "iter-00002"
    assert _diff(runs / ref, runs / run) < TOL


def test_both_scc_learners_and_the_anchor_took_part(runs):
    learners = _learners(runs / "scc-ppo-odc")
    assert set(learners) == {"main", "league_exploiter"}
    assert all(s["version"] == 2 for s in learners.values())
    state = torch.load(runs / "scc-ppo-odc" / "latest" / "trainer_state.pt", weights_only=False)
    assert state["anchor"] is not None  # the imitation policy: the KL term was computed against it
    opt = learners["main"]["opt"]
    assert opt["format"] == "arena-named-optimizer/1" and opt["state"]  # by name, assembled from the shards


def test_the_optimizer_state_matters_for_the_check(runs, tmp_path):
    d = tmp_path / "fresh"
    shutil.copytree(runs / "scc-ppo-none1", d, symlinks=True)
    f = (d / "latest").resolve() / "trainer_state.pt"
    state = torch.load(f, weights_only=False)
    for s in state["learners"].values():
        s["opt"]["state"] = {}
    torch.save(state, f)
    _train(_scc(tmp_path, "x", "ppo", mode="odc"), d)
    assert _diff(runs / "scc-ppo-none-none", d) > 100 * TOL


def test_a_pipeline_is_for_the_language_model_learner(tmp_path):
    with pytest.raises(ConfigError, match="is for the language-model learner"):
        make_trainer(_scc(tmp_path, "p", "ppo", mode="pipeline"), tmp_path / "run")
    with pytest.raises(ConfigError, match="is for the language-model learner"):
        make_trainer(_ppo(tmp_path, "q", mode="pipeline"), tmp_path / "run2")
    assert not (tmp_path / "run").exists()
