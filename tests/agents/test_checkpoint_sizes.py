"""A ``policy.pt`` is refused from the sizes it records before its network is built (a 370 KB file
whose layer sizes asked for 3.8 GB took 46 s to fail): the parameter count of the network those sizes
describe is worked out without allocating it and bounded (`MAX_POLICY_PARAMS`), every recorded size
is checked first, every tensor of the state dict must have the shape the sizes give it, and the
file's unpacked size is bounded. Each refusal is one line; memory is measured in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from arena.agents.specs import make_agent  # noqa: E402
from arena.envs.registry import make_core  # noqa: E402
from arena.errors import AgentSpecError  # noqa: E402
from arena.inference import policy_nets  # noqa: E402
from arena.inference.policy_nets import (FORMAT, MAX_POLICY_PARAMS, VERSION, build_policy, load_policy,  # noqa: E402
                                         save_policy, spec_from_core)

ROOT = Path(__file__).resolve().parents[2]
C4 = "openspiel/connect_four-v0"


def _spec():
    return spec_from_core(make_core(C4))


def _forged(folder: Path, arch: str = "conv", state_dict=None, spec: dict | None = None, **sizes) -> Path:
    """A checkpoint of a small real network whose recorded sizes say `sizes` (the forgery: a small file)."""
    net = build_policy(_spec(), arch, hidden=[16], channels=8)
    blob = {"format": FORMAT, "version": VERSION, "spec": spec or net.spec.to_dict(), "arch": arch,
            "sizes": {**net.sizes, **sizes}, "info": {},
            "state_dict": net.state_dict() if state_dict is None else state_dict}
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(blob, folder / "policy.pt")
    return folder


def _refused(folder: Path) -> str:
    with pytest.raises(AgentSpecError) as e:
        load_policy(folder)
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 600, msg
    return msg


def test_sizes_that_would_allocate_gigabytes_are_refused_from_the_count(tmp_path):
    folder = _forged(tmp_path / "big", hidden=[30000, 30000])
    assert (folder / "policy.pt").stat().st_size < 1_000_000  # a small file ...
    msg = _refused(folder)  # ... asking for 914M parameters (3.7 GB of float32)
    assert msg == (f"{folder / 'policy.pt'}: refused: its recorded sizes make a network of 914,191,800 parameters "
                   f"(at most {MAX_POLICY_PARAMS:,}); arch conv, sizes {{'blocks': 1, 'channels': 8, 'd_model': 64, "
                   "'heads': 4, 'hidden': [30000, 30000], 'layers': 2, 'value_hidden': 128}")
    with pytest.raises(AgentSpecError, match="914,191,800 parameters"):
        make_agent(f"policy:{folder}", make_core(C4), 0)


@pytest.mark.parametrize("sizes, words", [
    ({"blocks": 10 ** 9}, "recorded size blocks = 1000000000, expected a whole number in [0, 64]"),
    ({"hidden": [16] * 10 ** 4}, "recorded size hidden = [16, 16, 16, 16, 16, 16, 16, 16, ...], expected 1 to 32 "
                                 "layers of 1 to 65,536 units"),
    ({"hidden": [10 ** 12]}, "expected 1 to 32 layers of 1 to 65,536 units"),
    ({"channels": -3}, "recorded size channels = -3, expected a whole number in [1, 65,536]"),
    ({"heads": "many"}, "recorded size heads = 'many', expected a whole number in [1, 256]"),
    ({"no_such_size": 1}, "unknown policy size 'no_such_size'"),
])
def test_each_recorded_size_is_checked_before_anything_is_built(tmp_path, sizes, words):
    assert words in _refused(_forged(tmp_path / "c", **sizes))


def test_a_recorded_spec_with_huge_shapes_is_refused(tmp_path):
    spec = _spec().to_dict()
    msg = _refused(_forged(tmp_path / "s", spec={**spec, "obs_shape": [3, 10 ** 6, 10 ** 6]}))
    assert "refused: its observation shape [3, 1000000, 1000000] has 3,000,000,000,000 elements" in msg
    msg = _refused(_forged(tmp_path / "n", spec={**spec, "n_actions": 10 ** 12}))
    assert "refused: its n_actions 1000000000000 is not a whole number in [0, 16,777,216]" in msg


def test_state_dict_shapes_must_agree_with_the_recorded_sizes(tmp_path):
    net = build_policy(_spec(), "conv", hidden=[16], channels=8)
    # sizes say 32 channels, tensors have 8
    msg = _refused(_forged(tmp_path / "a", channels=32))
    assert msg.endswith("refused: tensor 'encoders.of_obs.0.weight' has shape (8, 5, 3, 3), but its recorded sizes give "
                        "(32, 5, 3, 3)")
    sd = dict(net.state_dict())
    sd["heads.to_action.logits.weight"] = torch.zeros(7, 17)
    assert "tensor 'heads.to_action.logits.weight' has shape (7, 17), but its recorded sizes give (7, 16)" in \
        _refused(_forged(tmp_path / "b", state_dict=sd))
    sd = dict(net.state_dict())
    sd.pop("value.0.bias")
    assert "its state dict has no tensor 'value.0.bias'" in _refused(_forged(tmp_path / "c", state_dict=sd))
    sd = {**net.state_dict(), "extra.weight": torch.zeros(2)}
    assert "its state dict has 1 tensor(s) the network has not, e.g. 'extra.weight'" in \
        _refused(_forged(tmp_path / "d", state_dict=sd))


def test_a_checkpoint_that_unpacks_past_the_cap_is_refused_unread(tmp_path, monkeypatch):
    """A zip entry may be compressed: what the archive unpacks to is bounded, not just the file."""
    monkeypatch.setattr(policy_nets, "MAX_CHECKPOINT_BYTES", 1 << 20)
    folder = tmp_path / "bomb"
    folder.mkdir()
    with zipfile.ZipFile(folder / "policy.pt", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data/0", b"\0" * (4 << 20))
    assert (folder / "policy.pt").stat().st_size < 100_000
    msg = _refused(folder)
    assert "refused: the checkpoint unpacks to 4,194,304 bytes in 1 records (at most 1,048,576)" in msg
    big = tmp_path / "big"
    big.mkdir()
    (big / "policy.pt").write_bytes(b"\0" * (2 << 20))
    assert "refused: the file is 2,097,152 bytes (a policy checkpoint is at most 1,048,576)" in _refused(big)


def test_a_real_checkpoint_still_loads_and_plays(tmp_path):
    net = build_policy(_spec(), "conv", hidden=[32], channels=16, blocks=2)
    folder = save_policy(tmp_path / "ok", net, {"iteration": 1})
    back, meta = load_policy(folder, _spec())
    assert meta.sizes["channels"] == 16
    for k, v in net.state_dict().items():
        assert torch.equal(v, back.state_dict()[k])
    agent = make_agent(f"policy:{folder},greedy=true,threads=1", make_core(C4), 0)
    assert agent.greedy is True
    assert make_agent(f"policy:{folder},greedy=false", make_core(C4), 0).greedy is False


def test_a_forged_checkpoint_is_refused_in_bounded_memory(tmp_path):
    folder = _forged(tmp_path / "big", hidden=[30000, 30000])
    prog = textwrap.dedent(f"""
        import json, resource
        import torch
        from arena.errors import AgentSpecError
        from arena.inference.policy_nets import load_policy
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            load_policy({str(folder)!r})
            line = "LOADED"
        except AgentSpecError as e:
            line = str(e)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({{"growth_mb": (after - before) // 1024, "line": line}}))
    """)
    r = subprocess.run([sys.executable, "-c", prog], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert "914,191,800 parameters" in out["line"]
    assert out["growth_mb"] < 200, f"refusing the checkpoint grew the peak RSS by {out['growth_mb']} MB"


def test_the_cli_refuses_a_forged_checkpoint_in_one_line(tmp_path):
    folder = _forged(tmp_path / "big", hidden=[30000, 30000])
    r = subprocess.run([sys.executable, "-m", "arena.cli", "play", C4, "-p", f"policy:{folder}", "-p", "random"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ, COLUMNS="200"))
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 2 and "Traceback" not in out and len(out.splitlines()) == 1, out
    assert "914,191,800 parameters (at most 50,000,000)" in out


@pytest.mark.parametrize("case", ["mlp", "conv", "entity-pointer", "entity", "structured", "beta", "gaussian"])
def test_every_architecture_passes_its_own_checks(tmp_path, case):
    """The checks build each kind of network on the meta device: a real checkpoint of each loads."""
    from arena.inference.policy_nets import PolicySpec

    box = dict(action_shape=(19,), low=(0.0,) * 19, high=(1.0,) * 19)
    spec, arch, sizes = {
        "mlp": (lambda: spec_from_core(make_core("openspiel/kuhn_poker-v0")), "mlp", {}),
        "conv": (_spec, "conv", {"channels": 64, "blocks": 2, "hidden": [256]}),
        "entity-pointer": (lambda: PolicySpec("t/u-v0", (6, 4), "discrete", n_actions=6, entities=True), "entity", {}),
        "entity": (lambda: PolicySpec("t/u-v0", (6, 4), "discrete", n_actions=3, entities=True), "entity", {}),
        "structured": (lambda: spec_from_core(make_core("arena/Skirmish-2s3z-v0")), "auto",
                       {"hidden": [128], "d_model": 64, "channels": 16}),
        "beta": (lambda: PolicySpec("t/c-v0", (160,), "continuous", **box), "mlp",
                 {"continuous": "beta", "obs_norm": True}),
        "gaussian": (lambda: PolicySpec("t/c-v0", (160,), "continuous", privileged_dim=5, **box), "mlp",
                     {"hidden": [256, 256], "obs_norm": True}),
    }[case]
    net = build_policy(spec(), arch, **sizes)
    back, _ = load_policy(save_policy(tmp_path / case, net))
    for k, v in net.state_dict().items():
        assert torch.equal(v, back.state_dict()[k])
