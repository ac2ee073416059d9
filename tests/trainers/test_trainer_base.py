"""One trainer lifecycle: every registered trainer is a `Trainer` with one ``run`` signature, its config a
`TrainerConfig`; the base's loop saves a stopped iteration and keeps ``best``; trainers reach the league
only through `LeagueClient`; moved config keys are one-line errors naming the new place."""

import inspect
import json
import re
from pathlib import Path

import numpy as np
import pytest

from arena.errors import ConfigError
from arena.trainers.common.base import Trainer, TrainerConfig
from arena.trainers.llm.config import SpiralLearnerSettings
from arena.trainers.registry import get_trainer, read_train_config, trainer_names

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", trainer_names())
def test_every_registered_trainer_is_a_trainer_with_one_run_signature(name):
    entry = get_trainer(name)
    cls = entry.builder()
    assert issubclass(cls, Trainer), cls
    assert issubclass(entry.config_class(), TrainerConfig), entry.config_class()
    params = list(inspect.signature(cls.run).parameters)
    assert params == ["self", "iterations", "progress", "phase"], (name, params)


def test_the_cli_calls_run_without_inspecting_it():
    import arena.trainers.run as run
    import arena.ui.training as training  # `arena train` runs its trainer here

    for fn in (training.train_with_progress, run._train):
        src = inspect.getsource(fn)
        assert "inspect" not in src and "getattr(trainer" not in src, fn.__name__
        assert "trainer.run(progress=show, phase=phase)" in src or "trainer.run(progress=show)" in src


def test_a_registered_trainer_that_is_no_trainer_is_one_line(tmp_path, monkeypatch):
    from arena.trainers import registry

    class Loose:
        closed = False

        def __init__(self, cfg, directory):
            pass

        def close(self):
            Loose.closed = True

    entry = registry.TrainerEntry("loose", TrainerConfig, Loose)
    with pytest.raises(ConfigError) as e:
        entry.make(TrainerConfig(), tmp_path)
    assert "not an arena.trainers.common.base.Trainer" in str(e.value) and "\n" not in str(e.value)
    assert Loose.closed


def test_no_trainer_module_reaches_into_the_league_store_or_its_generator():
    """A trainer's session is its only way in (`arena.league.session`): no trainer imports any other league
    module (the manager, its config, roles, storage), builds a league, or reaches into its store."""
    import ast

    allowed = {"arena.league.session", "arena.league.protocols"}
    bad = []
    for path in sorted((ROOT / "arena" / "trainers").rglob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if (name == "arena.league" or name.startswith("arena.league.")) and name not in allowed:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {name}")
        for i, line in enumerate(text.splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"\.store\b|league\.rng\b|\bopen_league\b|\bLeague\(", code):
                bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not bad, "\n".join(bad)


# -- the base's loop, on a trainer of a few lines -------------------------------------------------------
class Counting(Trainer):
    """Iterations that only count; its state is a JSON file."""

    state_file = "state.json"

    def __init__(self, cfg, directory):
        super().__init__(cfg, directory)
        self.saved = []
        state = self.latest_state()
        if state is not None:
            self.iteration = state["iteration"]

    def latest_state(self, map_location=None):
        return json.loads((self.latest.resolve() / self.state_file).read_text()) if self.latest.exists() else None

    def save(self, folder, it):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / self.state_file).write_text(json.dumps({"iteration": it}))
        self.saved.append(it)

    def start(self, last):
        self.checkpoint(0)
        return {"eval/score": 0.0}

    def iterate(self, it, last):
        self.iteration = it
        self._show("work", 1, 1)
        out = {"train/it": float(it)}
        if it % 2 == 0:  # checkpoints every other iteration only, as SPIRAL and RLlib may
            self.checkpoint(it)
        self.metrics.log(it, **out)
        return out


def test_a_stop_saves_the_finished_iteration_and_the_same_command_resumes(tmp_path):
    cfg = TrainerConfig(iterations=6)
    t = Counting(cfg, tmp_path)
    seen, phases = [], []

    def progress(it, last, m):
        seen.append((it, last))
        if it == 3:
            assert t.request_stop() and not t.request_stop()  # asked once; a second ask stops at once

    out = t.run(progress=progress, phase=lambda *a: phases.append(a))
    t.close()
    assert out == {"train/it": 3.0} and t.stop_requested and not t.in_loop
    assert seen == [(1, 6), (2, 6), (3, 6)] and phases == [("work", 1, 1)] * 3
    assert t.saved == [0, 2, 3]  # iteration 3 saved before stopping: not redone on resume
    assert t.stop_line().startswith("stopped at iteration 3:")
    again = Counting(cfg, tmp_path)
    assert again.resume_line().startswith("resuming from iteration 3 of 6") and not again.request_stop()
    assert again.run() == {"train/it": 6.0} and again.saved == [4, 6]
    again.close()
    rows = [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [1, 2, 3, 4, 5, 6]


def test_best_keeps_the_earlier_of_ties_and_follows_a_new_metric(tmp_path):
    t = Counting(TrainerConfig(), tmp_path)
    for it in (0, 1, 2):
        t.checkpoint(it)
    assert t.track_best(0, "eval/a", 0.5, invalid_rate=0.1)
    assert not t.track_best(1, "eval/a", 0.5) and t.track_best(2, "eval/a", 0.6)
    assert t.best_record() == {"iteration": 2, "metric": "eval/a", "value": 0.6, "checkpoint": "checkpoints/iter-00002"}
    assert t.track_best(1, "eval/b", 0.1)  # another metric (the evaluation opponents changed): replaced
    assert (tmp_path / "best").resolve().name == "iter-00001"
    t.close()


def test_the_trainer_generator_is_seeded_by_its_config_alone(tmp_path):
    t = Counting(TrainerConfig(seed=4), tmp_path)
    assert t.pairing_rng().random() == np.random.default_rng([4, 0]).random()
    t.close()


# -- config: the learner's section ------------------------------------------------------------------------
@pytest.mark.parametrize("trainer,key", [("scc", "clip"), ("scc", "epochs"), ("ppo", "target_kl"), ("ppo", "gamma")]
                         + [("spiral", k) for k in SpiralLearnerSettings.FLAT_KEYS])
def test_a_flat_learner_key_is_one_line_naming_the_new_place(tmp_path, trainer, key):
    p = tmp_path / "old.yaml"
    p.write_text(f"trainer: {trainer}\n{key}: 0.3\n")
    with pytest.raises(ConfigError) as e:
        read_train_config(p)
    msg = str(e.value)
    assert f"learner.{key}" in msg and "\n" not in msg, msg


def test_a_flat_learner_key_in_a_mixed_config_names_its_section(tmp_path):
    from arena.trainers.mixed import MixedConfig

    with pytest.raises(ConfigError) as e:
        MixedConfig(policy={"clip": 0.3}).parts()
    assert "policy.learner.clip" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        MixedConfig(llm={"loss": "ppo_clip"}).parts()
    assert "llm.learner.loss" in str(e.value) and "\n" not in str(e.value)


def test_a_flat_spiral_learner_key_says_how_to_write_it_and_where(tmp_path):
    p = tmp_path / "old.yaml"
    p.write_text("trainer: spiral\nloss: grpo\n")
    with pytest.raises(ConfigError) as e:
        read_train_config(p)
    msg = str(e.value)
    assert "loss: this key moved to learner.loss (write it under learner:)" in msg and "\n" not in msg, msg
    assert str(p) in msg  # (every other key: the parametrized test above)


def test_the_spiral_learner_section_loads_and_reaches_the_learner(tmp_path):
    from arena.trainers.llm.config import SpiralLearnerSettings
    from arena.trainers.llm.learner import LearnerSettings as LLMSettings

    p = tmp_path / "new.yaml"
    p.write_text("trainer: spiral\nmax_new_tokens: 12\ndevice: cpu\n"
                 "learner: {loss: ppo_clip, advantage: grpo, epochs: 3, lr: 2.0e-4, train_precision: bf16}\n")
    cfg = read_train_config(p)[1]
    s = cfg.learner
    assert type(s) is SpiralLearnerSettings
    assert (s.loss, s.advantage, s.epochs, s.lr, s.train_precision) == ("ppo_clip", "grpo", 3, 2e-4, "bf16")
    assert (s.minibatch, s.rae_decay, s.critic) == (128, 0.95, "none")  # the defaults for the rest
    assert cfg.lr_at(1) == 2e-4
    step = LLMSettings.of(cfg)  # what the update step reads: the section, and the rollouts' length and device
    assert (step.loss, step.epochs, step.lr, step.precision, step.max_new_tokens, step.device) == (
        "ppo_clip", 3, 2e-4, "bf16", 12, "cpu")
    # --loss on the command line overrides the section's loss, keeping the rest of it
    cfg = read_train_config(p, learner={"loss": "drpo"})[1]
    assert (cfg.learner.loss, cfg.learner.advantage, cfg.learner.epochs) == ("drpo", "grpo", 3)
    # the section's checks name it
    p.write_text("trainer: spiral\nlearner: {turn_discount: 0}\n")
    with pytest.raises(ConfigError, match="learner: turn_discount must be in"):
        read_train_config(p)
    p.write_text("trainer: spiral\ntop_k: 0\nlearner: {loss: dppo_topk_kl}\n")
    with pytest.raises(ConfigError, match="learner.loss dppo_topk_kl needs top-K"):
        read_train_config(p)


def test_the_learner_section_reaches_the_learner_whole(tmp_path):
    from arena.trainers.policy.learner import LearnerSettings

    _, cfg = read_train_config(ROOT / "configs" / "train" / "scc_leduc.yaml")
    assert type(cfg.learner) is LearnerSettings and cfg.learner.algo == "vtrace" and cfg.learner.upgo_coef == 0.2
    _, ppo = read_train_config(ROOT / "configs" / "train" / "prosthetics_ppo.yaml")
    assert ppo.learner.epochs == 10 and ppo.learner.target_kl is None and ppo.learner.upgo_coef == 0.0
    p = tmp_path / "ppo.yaml"
    p.write_text("trainer: ppo\nlearner: {clip: 0.1}\n")
    one = read_train_config(p)[1].learner
    assert one.clip == 0.1 and one.epochs == 8 and one.max_grad_norm == 0.5  # PPO's defaults for the rest
    p.write_text("trainer: ppo\nlearner: {algo: vtrace}\n")
    with pytest.raises(ConfigError, match="the ppo trainer learns by ppo"):
        read_train_config(p)


# -- close: the league a trainer opened, once ---------------------------------------------------------
@pytest.mark.parametrize("kind", ["scc", "spiral"])
def test_close_closes_the_league_the_trainer_opened_and_only_that_one(tmp_path, kind):
    import sqlite3

    pytest.importorskip("torch")
    from arena.league.manager import open_league
    from arena.league.session import SharedLeague

    if kind == "scc":
        from trainers.policy.test_scc import config

        from arena.trainers.policy.scc import SCCTrainer as T
        from arena.trainers.policy.scc import league_spec

        cfg, player = config(il=None, learners=[{"name": "main", "role": "main"}], iterations=0,
                             snapshot_every=0), "main"
    else:
        from trainers.llm.test_spiral import small

        from arena.trainers.llm.spiral import SpiralTrainer as T
        from arena.trainers.llm.spiral import league_spec

        cfg, player = small(tmp_path, iterations=0, il=None), "learner"
    t = T(cfg, tmp_path / "own")
    t.close()
    t.close()  # a second close does nothing
    league = t.session._league
    assert league.lock is None
    with pytest.raises(sqlite3.ProgrammingError):
        league.store.conn.execute("SELECT 1")
    assert open_league(t.league_dir).player(player) is not None
    # a league handed in is its caller's: still open after the trainer closes
    shared = SharedLeague(league_spec(cfg, "shared"), tmp_path / "shared", config_owner="test")
    try:
        t = T(cfg, tmp_path / "shared" / kind, league=shared)
        t.close()
        t.close()
        assert shared.lock is not None and shared.player(player) is not None
    finally:
        shared.close()
    shared.close()


def test_shipped_train_configs_load():
    """Every config under configs/train loads into its trainer's dataclass, names a registered game and
    gives it only the settings it declares (the league configs: tests/league/test_league.py)."""
    from arena.envs.registry import check_settings

    files = sorted((ROOT / "configs" / "train").glob("*.yaml"))
    assert len(files) >= 5
    for f in files:
        entry, cfg = read_train_config(f)
        assert isinstance(cfg, TrainerConfig), f.name
        game = getattr(cfg, "game", None)
        if game is not None:
            check_settings(game, dict(getattr(cfg, "game_kwargs", None) or {}))
