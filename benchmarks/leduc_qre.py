"""Where a KL-regularised self-play learner settles, and how exploitable that point is: the agent
logit quantal response equilibrium (`arena.trainers.policy.nashconv.logit_qre`) at each temperature,
solved exactly, with its NashConv.

    python benchmarks/leduc_qre.py                                  # Leduc, temperatures 0.5 down to 0.2
    python benchmarks/leduc_qre.py --temperatures 0.5 0.3 --reward-scale 0.1
    python benchmarks/leduc_qre.py --game kuhn_poker --temperatures 1 0.3 0.1
    python benchmarks/leduc_qre.py --magnet RUN/checkpoints/iter-00000 --temperatures 30 3 1 0.5

A learner whose loss at each state is the policy gradient plus `kl_coef * KL(pi || uniform)`, on
rewards scaled by `reward_scale`, has its fixed point at temperature `kl_coef / reward_scale` chips
(`configs/train/scc_leduc_selfplay.yaml`: 0.05 / 0.1 = 0.5). Its NashConv there is the floor that
regularisation puts under the learner, whatever its sampling and network add on top. The
magnet is uniform unless `--magnet` names a policy checkpoint of the game (or `cfr:N`, CFR+'s
average policy after N iterations): then the point is the one `magnet: {kind: imitation}` with
`learner.kl_direction: policy_to_anchor` settles at, the imitation policy pulled towards its best
responses as far as the temperature lets it. The temperatures are solved from the highest down,
each warm-started from the last converged one; a row whose last change is above the tolerance did
not converge at that step (its step is too large for the temperature: the exact iteration
oscillates, as a sampled learner does).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--game", default="leduc_poker", help="a two-player zero-sum OpenSpiel game")
    ap.add_argument("--temperatures", type=float, nargs="+", default=[0.5, 0.4, 0.35, 0.3, 0.25, 0.2])
    ap.add_argument("--reward-scale", type=float, default=0.1,
                    help="the config's reward_scale (for the kl_coef column)")
    ap.add_argument("--step", type=float, default=0.05, help="the mirror-descent step, in 1 / payoff units")
    ap.add_argument("--iterations", type=int, default=4000, help="at most, per temperature")
    ap.add_argument("--tol", type=float, default=1e-7)
    ap.add_argument("--magnet", help="a policy checkpoint folder of the game, or cfr:N (default: uniform)")
    args = ap.parse_args(argv)
    if any(t <= 0 for t in args.temperatures) or args.reward_scale <= 0:
        ap.error("temperatures and --reward-scale must be > 0")

    import pyspiel
    from open_spiel.python.algorithms import exploitability

    from arena.trainers.policy.nashconv import logit_qre, policy_table, uniform_nash_conv

    magnet, table = None, None
    if args.magnet:
        magnet = policy_table(args.game, args.magnet)
        table = magnet  # the hottest temperature starts at the magnet
        nc = exploitability.nash_conv(pyspiel.load_game(args.game), magnet)
        print(f"{args.game}: magnet {args.magnet}, NashConv {nc:.4f}; step {args.step}, tol {args.tol}")
    else:
        print(f"{args.game}: uniform magnet, NashConv {uniform_nash_conv(args.game):.4f}; step {args.step}, "
              f"tol {args.tol}")
    print()
    print(f"| temperature | kl_coef at reward_scale {args.reward_scale:g} | NashConv "
          "| entropy (nats, mean over states) | iterations | last change | converged | seconds |")
    print("|---:|---:|---:|---:|---:|---:|---|---:|")
    for t in sorted(args.temperatures, reverse=True):
        t0 = time.perf_counter()
        solved, r = logit_qre(args.game, t, step=args.step, iterations=args.iterations, tol=args.tol, start=table,
                              magnet=magnet)
        ok = r["change"] <= args.tol
        if ok:
            table = solved  # the next temperature starts from a converged point only
        print(f"| {t:g} | {t * args.reward_scale:.4g} | {r['nash_conv']:.4f} | {r['entropy']:.3f} | {r['iterations']} "
              f"| {r['change']:.1e} | {'yes' if ok else 'no'} | {time.perf_counter() - t0:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
