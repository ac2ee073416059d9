"""Benchmark: SCC imitation's teacher matches, demonstrations kept as played vs re-simulated.

Why: imitation used to play its teacher matches, then re-simulate every replay
(`arena.match.verify.observed_moves`) to recover what each chosen player saw, asking the
labeller at each position on the way; now the engine keeps the views (and the labeller's
answers) as the matches are played (`play_matches(observe=..., ask=...)`,
`arena.trainers.policy.imitation.from_observed`). Both ways, on the same matches:

* **as played**: the matches played observing both seats (labeller asked as they play),
  then `from_observed`;
* **re-simulated**: the same matches played with nothing observed, then `demonstrations`
  on their replays (re-simulation, labeller asked there).

The settings are ``configs/train/scc_connect_four.yaml``'s teachers and labeller, scaled
down (``--matches``, one process); the two ways take turns, ``--chunk`` matches each, so that
a busy machine slows both alike. The demonstrations' inputs, masks and moves are checked
equal (the labeller's answers are seeded differently by the two ways: per match seed vs
per replay index). Output: a markdown table of seconds and the ratio.

    python benchmarks/bench_imitation.py --matches 400
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _common import markdown_table

GAME = "openspiel/connect_four-v0"
TEACHER = "mcts:simulations=400,backend=cpp,epsilon=0.15"
LABEL = "mcts:simulations=1000,backend=cpp"


def main() -> None:
    from arena.envs.registry import make_core
    from arena.inference.policy_nets import spec_from_core
    from arena.match.batch import play_matches
    from arena.trainers.policy.imitation import asks, demonstrations, from_observed, joined

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--matches", type=int, default=400)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--chunk", type=int, default=20, help="matches a turn (the two ways take turns)")
    ap.add_argument("--label", default=LABEL, help="the labeller's spec ('none': the moves alone)")
    args = ap.parse_args()
    label = None if args.label == "none" else args.label
    spec = spec_from_core(make_core(GAME))
    ask = asks(spec, "auto" if label else "moves", label)
    specs = [TEACHER, TEACHER]

    # The two ways alternate, a chunk of the same matches each, so that both see the same load.
    t_play_obs = t_convert = t_play = t_resim = 0.0
    news, olds = [], []
    for c in range(0, args.matches, args.chunk):
        only = range(c, min(args.matches, c + args.chunk))
        t0 = time.perf_counter()
        played = play_matches(GAME, specs, args.matches, seed=args.seed, record="actions", observe=[0, 1], ask=ask,
                              only=only)
        t_play_obs += time.perf_counter() - t0
        t0 = time.perf_counter()
        news.append(from_observed(((i, r.returns, r.observed) for i, r in zip(only, played)), spec))
        t_convert += time.perf_counter() - t0

        t0 = time.perf_counter()
        plain = play_matches(GAME, specs, args.matches, seed=args.seed, record="actions", only=only)
        t_play += time.perf_counter() - t0
        t0 = time.perf_counter()
        olds.append(demonstrations([(r.replay, ["teacher", "teacher"]) for r in plain], None, spec, label=label,
                                   targets="auto" if label else "moves", first=c))
        t_resim += time.perf_counter() - t0
    new, old = joined(news), joined(olds)

    assert sorted(new.obs) == sorted(old.obs) and all(np.array_equal(new.obs[k], old.obs[k]) for k in new.obs)
    assert np.array_equal(new.actions, old.actions) and np.array_equal(new.match, old.match)
    assert (new.probs is None) == (old.probs is None)
    after, before = t_play_obs + t_convert, t_play + t_resim
    rows = [["as played (observe + ask)", f"{t_play_obs:.1f}", f"{t_convert:.2f}", f"{after:.1f}"],
            ["re-simulated (play, then demonstrations)", f"{t_play:.1f}", f"{t_resim:.1f}", f"{before:.1f}"]]
    print(f"{args.matches} matches of {GAME}, teachers {TEACHER}, label {label}, one process, "
          f"{len(new)} positions")
    print(markdown_table(["path", "play s", "demonstrations s", "total s"], rows, {1, 2, 3}))
    print(f"re-simulated / as played: {before / after:.2f}")


if __name__ == "__main__":
    main()
