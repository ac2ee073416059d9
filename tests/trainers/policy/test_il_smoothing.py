"""`il.smoothing`: label smoothing keeps the choices a teacher never makes in play, each at about
``smoothing / n_legal``, where plain imitation drives them to nothing (the head RL then cannot move)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from arena.config import from_dict  # noqa: E402
from arena.envs.registry import make_core  # noqa: E402
from arena.inference.policy_nets import build_policy, policy_input, spec_from_core  # noqa: E402
from arena.trainers.policy.config import ImitationConfig  # noqa: E402
from arena.trainers.policy.imitation import Demonstrations, behaviour_cloning  # noqa: E402


def _probs_after_cloning(smoothing: float) -> np.ndarray:
    """The policy's move probabilities at tic-tac-toe's first position after cloning a teacher that
    always takes the centre there (48 positions to train on, 16 to validate on, all that one)."""
    torch.manual_seed(0)
    core = make_core("openspiel/tic_tac_toe-v0")
    spec = spec_from_core(core)
    core.reset(seed=0)
    x0, m0 = policy_input(core.observation(0), 0, spec)
    n = 64
    demos = Demonstrations({"obs": np.repeat(x0[None], n, 0), "mask": np.repeat(m0[None], n, 0)},
                           np.full(n, 4), np.zeros(n, np.float32), np.arange(n) % 8)
    train, val = demos.take(np.arange(48)), demos.take(np.arange(48, n))
    net = build_policy(spec, hidden=[32])
    behaviour_cloning(net, train, val, epochs=60, batch_size=16, lr=1e-2, weight_decay=0.0, patience=60,
                      value_coef=0.0, seed=0, smoothing=smoothing)
    with torch.no_grad():
        dist, _ = net({"obs": torch.from_numpy(x0[None]), "mask": torch.from_numpy(m0[None])})
    return dist.probs[0].numpy()


def test_smoothing_keeps_each_untaught_move_near_its_share():
    plain, smooth = _probs_after_cloning(0.0), _probs_after_cloning(0.2)
    others = [a for a in range(9) if a != 4]
    # the optimum of the smoothed loss: 0.2 / 9 = 0.022 on each of the 8 moves the teacher never makes
    assert plain[others].max() < 0.003 and plain[4] > 0.98
    assert 0.012 < smooth[others].min() and smooth[others].max() < 0.035
    assert smooth.argmax() == 4 and abs(smooth[4] - (0.8 + 0.2 / 9)) < 0.06


def test_smoothing_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match=r"il.smoothing must be in \[0, 1\)"):
        from_dict(ImitationConfig, {"smoothing": 1.0})
    assert from_dict(ImitationConfig, {"smoothing": 0.1}).smoothing == 0.1
