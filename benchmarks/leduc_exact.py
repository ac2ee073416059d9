"""Exact figures of an SCC run on Leduc poker, checkpoint by checkpoint: NashConv and the expected
return a game (chips, each seat half the games, over every deal: no sampling error) against the
uniform random policy and against the CFR+ player the run evaluates with, beside CFR+'s own.

    python benchmarks/leduc_exact.py runs/leduc                 # the run's evaluated iterations
    python benchmarks/leduc_exact.py runs/leduc --every 20
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--every", type=int, default=0, help="checkpoints every N iterations (default: the evaluated ones)")
    ap.add_argument("--cfr-iterations", type=int, default=100)
    args = ap.parse_args()

    import pyspiel
    from open_spiel.python.algorithms import exploitability

    from arena.inference.policy_nets import load_policy
    from arena.trainers.policy.nashconv import cfr_table, expected_payoff, nash_conv_of, net_policy_fn

    game = "leduc_poker"
    cfr = cfr_table(game, args.cfr_iterations)
    folders = sorted((args.run / "checkpoints").glob("iter-*"))
    rows = [json.loads(x) for x in (args.run / "metrics.jsonl").read_text().splitlines()]
    evaluated = {int(r["step"]) for r in rows if "eval/nash_conv" in r}
    its = [int(f.name.removeprefix("iter-")) for f in folders]
    keep = [i for i in its if (i % args.every == 0 if args.every else i in evaluated)]
    print(f"| checkpoint | NashConv | return vs random | return vs `cfr:iterations={args.cfr_iterations}` |")
    print("|---|---:|---:|---:|")
    print(f"| CFR+ {args.cfr_iterations} iterations (the teacher) | "
          f"{exploitability.nash_conv(pyspiel.load_game(game), cfr):.3f} | | |")
    for i in keep:
        label, folder = f"iteration {i}" + (" (imitation)" if i == 0 else ""), args.run / "checkpoints" / f"iter-{i:05d}"
        fn = net_policy_fn(load_policy(folder)[0])
        print(f"| {label} | {nash_conv_of(game, fn):.3f} | {expected_payoff(game, fn):+.3f} | "
              f"{expected_payoff(game, fn, cfr):+.3f} |", flush=True)


if __name__ == "__main__":
    main()
