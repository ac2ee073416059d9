"""Benchmark: ODC against FSDP2 -- tokens/s of sharded data parallelism on variable-length trajectories.

Why: FSDP2's per-layer collectives make every rank wait for the slowest one at every
microbatch, so variable-length trajectories leave ranks idle; ODC (on-demand gathers,
three meetings per minibatch, :mod:`arena.trainers.parallel.sharded`) should lose only the
per-minibatch imbalance. One launch of ``--ranks`` gloo processes (1 torch thread each)
builds the same Llama (``build_tiny_llama``: ``--hidden``, ``--layers``) for each method
and runs minibatch updates (the learner's policy loss, ``dppo_binary_tv``, token mean,
AdamW, global-norm clipping) of ``--samples`` trajectories, ``--microbatches`` per rank:

* ``fsdp2``: ``fully_shard`` per decoder layer and root, FSDP2's defaults (reshard after
  forward, gradient reduce-scatter every microbatch);
* ``fsdp2-best``: FSDP2 at its least communication (``reshard_after_forward=False``,
  gradient sync and resharding after backward only on the last microbatch);
* ``odc-pg``: ODC's schedule with the process-group transport (the gradients'
  reduce-scatter and the shards' all-gather batched at the minibatch's meetings, gloo);
* ``odc-shm``: ODC with the shared-memory transport (one-sided reads of the owners' shards).

Length patterns (every method gets the same minibatches):

* ``balanced``: every trajectory ``--length`` tokens (3/4 prompt), split by token count;
* ``alternating``: in arrival order (``balance="none"``), rank r's microbatch i holds long
  trajectories (``--ratio`` x ``--short`` tokens) when i + r is even, short ones otherwise:
  every microbatch pairs a long rank with a short one, every rank has the same total;
* ``games``: this project's own trajectories -- random play of ``arena/TicTacToe-v0`` and
  ``arena/KuhnPoker-v1`` rendered with the SPIRAL prompt template
  (``arena.agents.prompts``), the answer ``\\boxed{move}`` plus EOS as the response, both
  encoded with the tiny model's char tokenizer (as ``arena.trainers.llm.sft`` does). The
  TextArena observations carry the game's history, so prompts grow over a game
  (about 500-2000 tokens); ``--length-scale`` keeps the last fraction of each prompt
  (0.25 by default) so a step fits 2 cores; a new draw of ``--samples`` turns each step,
  split by token count (the load balancing).

Columns: tokens/s of real (unpadded) prompt + response tokens; the ratio to
``fsdp2-best``; next to ODC's ratio the *ideal* one from token counts alone (a
microbatch costs its tokens, a third of it forward): against FSDP2-best, which waits for
the slowest rank only in its first forward and last backward,
:func:`_sharded_sim.fsdp2_best_ratio`; against FSDP2's defaults, in
lockstep at every microbatch, :func:`_sharded_sim.lockstep_ratio`
``sum_i max_r t[r][i] / max_r sum_i t[r][i]``. The *no-communication bound* is
FSDP2-best's step time over ODC's slowest rank's own compute (forward, backward and
optimizer; no gather, no wait): what ODC would reach with free transfers and meetings.
Transport and schedule are separated: ``odc-pg / fsdp2-best`` is the schedule alone (both
over gloo), ``odc-shm / odc-pg`` the transport alone (the same schedule).

Run:  .venv/bin/python benchmarks/bench_odc.py
      (8 layers, hidden 256, 16 samples, 4 microbatches per rank: a few minutes on 2 cores;
      ``--quick`` is a smoke run of a few seconds)
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
_sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))
from _common import markdown_table, versions  # noqa: E402

import os  # noqa: E402

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402

METHODS = ("fsdp2", "fsdp2-best", "odc-pg", "odc-shm")
PATTERNS = ("balanced", "alternating", "games")
GAMES = ("arena/TicTacToe-v0", "arena/KuhnPoker-v1")


def _tokenizer():
    from arena.inference.models import DEFAULT_CORPUS, train_char_tokenizer

    return train_char_tokenizer(DEFAULT_CORPUS)


def game_turns(tok, matches: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, response ids) of every turn of random play of :data:`GAMES` (SPIRAL template)."""
    from arena.agents.prompts import make_template
    from arena.match.loop import play_match
    from arena.trainers.llm.sft import encode_examples, examples_from_replays

    template = make_template("spiral", tok)
    out = []
    for g, game in enumerate(GAMES):
        reps = [play_match(game, ["random", "random"], seed=seed + 1000 * g + k).replay for k in range(matches)]
        examples = examples_from_replays(reps, template, "text")
        out += encode_examples(tok, examples, lambda text: tok(text)["input_ids"])
    return out


def _pattern_steps(name: str, args, steps: int, tok) -> tuple[str, list[list]]:
    """(balance, one list of samples per step) of a length pattern."""
    from _sharded_sim import samples_of_lengths

    from arena.trainers.llm.learner import Sample

    n, W, m = args.samples, args.ranks, args.microbatches
    if name == "balanced":
        L = args.length
        return "tokens", [samples_of_lengths([(L - L // 4, L // 4)] * n, seed=args.seed)] * steps
    if name == "alternating":
        c = max(1, n // (W * m))
        lengths = []
        for j in range(n):
            r, q = j % W, j // W
            total = args.short * (args.ratio if ((q // c) + r) % 2 == 0 else 1)
            lengths.append((total - total // 4, total // 4))
        return "none", [samples_of_lengths(lengths, seed=args.seed)] * steps
    if name == "games":
        pool = game_turns(tok, args.matches, args.seed)
        rng = random.Random(args.seed)
        out = []
        for _ in range(steps):
            batch = []
            for p, r in rng.sample(pool, n) if n <= len(pool) else rng.choices(pool, k=n):
                keep = max(1, round(len(p) * args.length_scale))
                batch.append(Sample(prompt_ids=p[-keep:], response_ids=r,
                                    old_logp=[math.log(rng.uniform(0.005, 0.03)) for _ in r], topk_ids=None,
                                    topk_logp=None, adv=rng.choice([-1.0, 1.0]), ret=0.0))
            out.append(batch)
        return "tokens", out
    raise SystemExit(f"unknown pattern {name!r}: use some of {', '.join(PATTERNS)}")


def _rank(info, args, methods, patterns):
    """Every method on every pattern on this rank (methods take turns); returns each timed step's timing."""
    from arena.inference.models import build_tiny_llama
    from arena.trainers.llm.learner import LearnerSettings
    from arena.trainers.parallel.sharded.fsdp2 import FSDP2Sharded
    from arena.trainers.parallel.sharded.odc import ODCSharded

    tok = _tokenizer()
    settings = LearnerSettings(lr=1e-5, minibatch=args.samples)
    longest = max(len(s.prompt_ids) + len(s.response_ids) for _, steps in patterns.values() for b in steps for s in b)
    heads = max(1, args.hidden // 32)
    out = {}
    for pname, (balance, steps) in patterns.items():
        engines = {}
        for meth in methods:
            model = build_tiny_llama(tok, hidden=args.hidden, layers=args.layers, heads=heads,
                                     intermediate=int(args.hidden * 2.75), max_positions=max(1024, longest + 8),
                                     seed=args.seed)
            if meth.startswith("odc"):
                engines[meth] = ODCSharded(model, settings=settings, n_microbatches=args.microbatches,
                                           transport=meth[4:], balance=balance)
            else:
                engines[meth] = FSDP2Sharded(model, settings=settings, n_microbatches=args.microbatches,
                                             balance=balance, best=meth == "fsdp2-best")
        rec = {meth: [] for meth in methods}
        for k, batch in enumerate(steps):
            for meth in methods[k % len(methods):] + methods[:k % len(methods)]:
                res = engines[meth].step(batch, pad_id=tok.pad_token_id)
                if k >= args.warmup:
                    rec[meth].append({"timing": res.timing, "tokens": res.tokens, "padded": res.padded})
        for e in engines.values():
            e.close()
        out[pname] = rec
    return out


def main(argv=None) -> None:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(description=doc.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2, help="processes (default 2)")
    p.add_argument("--hidden", type=int, default=256, help="hidden size (default 256; heads = hidden / 32)")
    p.add_argument("--layers", type=int, default=8, help="decoder layers (default 8)")
    p.add_argument("--samples", type=int, default=16, help="trajectories per minibatch (default 16)")
    p.add_argument("--microbatches", type=int, default=4, help="microbatches per rank (default 4)")
    p.add_argument("--length", type=int, default=192, help="balanced: tokens per trajectory (default 192)")
    p.add_argument("--short", type=int, default=64, help="alternating: a short trajectory's tokens (default 64)")
    p.add_argument("--ratio", type=int, default=4, help="alternating: long / short (default 4)")
    p.add_argument("--length-scale", type=float, default=0.25,
                   help="games: fraction of each prompt kept (default 0.25)")
    p.add_argument("--matches", type=int, default=20, help="games: random matches per game for the pool (default 20)")
    p.add_argument("--repeats", type=int, default=4, help="timed steps per method and pattern (default 4)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    p.add_argument("--patterns", nargs="*", default=list(PATTERNS), help=f"subset of {', '.join(PATTERNS)}")
    p.add_argument("--methods", nargs="*", default=list(METHODS), help=f"subset of {', '.join(METHODS)}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.hidden, args.layers, args.samples, args.microbatches = 64, 2, 8, 2
        args.length, args.short, args.length_scale, args.matches = 32, 12, 0.05, 4
        args.repeats, args.warmup = 2, 1
    for m in args.methods:
        if m not in METHODS:
            raise SystemExit(f"unknown method {m!r}: use some of {', '.join(METHODS)}")
    methods = list(args.methods)

    from _sharded_sim import fsdp2_best_ratio

    from arena.trainers.parallel.launch import launch

    tok = _tokenizer()
    steps = args.warmup + args.repeats
    patterns = {name: _pattern_steps(name, args, steps, tok) for name in args.patterns}
    print(f"# ODC vs FSDP2: {args.ranks} ranks (gloo, 1 thread each), hidden {args.hidden}, {args.layers} layers, "
          f"{args.samples} trajectories per minibatch, {args.microbatches} microbatches per rank")
    print(versions(("torch", "transformers")))
    for name, (balance, batches) in patterns.items():
        lens = sorted(len(s.prompt_ids) + len(s.response_ids) for b in batches for s in b)
        print(f"{name}: balance {balance}, trajectory tokens min {lens[0]}, median {lens[len(lens) // 2]}, "
              f"max {lens[-1]}")
    t0 = time.perf_counter()
    results = launch(_rank, args.ranks, (args, methods, patterns), timeout_s=7200)
    print(f"launch {time.perf_counter() - t0:.1f} s")

    rows, ratio_rows = [], []
    for name in patterns:
        step_time, tokens, extra = {}, {}, {}
        for meth in methods:
            per_rank = [results[r][name][meth] for r in range(args.ranks)]
            n = len(per_rank[0])
            t = [max(pr[k]["timing"]["step_s"] for pr in per_rank) for k in range(n)]
            step_time[meth] = sum(t)
            tokens[meth] = sum(sum(map(sum, per_rank[0][k]["tokens"])) for k in range(n))

            def mx(key, pr=per_rank, n=n):
                return sum(max(x[k]["timing"].get(key, 0.0) for x in pr) for k in range(n)) / n

            extra[meth] = {key: mx(key) for key in ("compute_s", "gather_s", "wait_s", "optimizer_s")}
            extra[meth]["nocomm"] = sum(max(x[k]["timing"]["compute_s"] + x[k]["timing"]["optimizer_s"]
                                            for x in per_rank) for k in range(n))
            extra[meth]["table"] = per_rank[0][0]["tokens"]
            extra[meth]["lock"] = sum(sum(max((r[i] if i < len(r) else 0) for r in x["tokens"])
                                          for i in range(max(len(r) for r in x["tokens"]))) for x in per_rank[0])
            extra[meth]["once"] = sum(max(sum(r) for r in x["tokens"]) for x in per_rank[0])
            extra[meth]["best"] = sum(fsdp2_best_ratio(x["tokens"]) * max(sum(r) for r in x["tokens"])
                                      for x in per_rank[0])
        base = step_time.get("fsdp2-best")
        for meth in methods:
            e = extra[meth]
            tps = tokens[meth] / step_time[meth]
            rows.append([name, meth, f"{step_time[meth] / args.repeats * 1e3:.0f}", f"{tps:.0f}",
                         f"{base / step_time[meth]:.2f}x" if base else "-", f"{e['compute_s'] * 1e3:.0f}",
                         f"{e['gather_s'] * 1e3:.1f}" if meth.startswith("odc") else "-",
                         f"{e['wait_s'] * 1e3:.1f}" if meth.startswith("odc") else "-"])
        def ratio(a, b, t=step_time):
            return f"{t[b] / t[a]:.2f}" if a in t and b in t else "-"
        some = extra[methods[0]]
        ideal = some["lock"] / some["once"] if some["once"] else float("nan")
        ideal_best = some["best"] / some["once"] if some["once"] else float("nan")
        bound = (f"{base / extra['odc-shm']['nocomm']:.2f}" if base and "odc-shm" in extra else "-")
        ratio_rows.append([name, ratio("odc-shm", "fsdp2-best"), f"{ideal_best:.2f}", bound,
                           ratio("odc-pg", "fsdp2-best"), ratio("odc-shm", "odc-pg"), ratio("odc-shm", "fsdp2"),
                           f"{ideal:.2f}", ratio("fsdp2-best", "fsdp2")])
        print(f"{name}: tokens per rank and microbatch, first timed step: {some['table']}")
    print()
    print(markdown_table(["pattern", "method", "step ms", "tokens/s", "vs fsdp2-best", "compute ms (slowest rank)",
                          "gather ms", "wait at meeting 1 ms"], rows, right={2, 3, 4, 5, 6, 7}))
    print()
    print(markdown_table(["pattern", "ODC (shm) / FSDP2-best", "ideal (tokens)", "no-communication bound",
                          "schedule only: ODC (pg) / FSDP2-best", "transport only: ODC shm / pg",
                          "ODC (shm) / FSDP2 default", "ideal (tokens, lockstep)", "FSDP2-best / default"],
                         ratio_rows, right=set(range(1, 9))))
    print("\nratios are speed-ups (step time of the second over the first). compute: forward + backward of the "
          "rank's own microbatches (FSDP2's includes its collectives). The no-communication bound is FSDP2-best's "
          "step time over ODC's slowest rank's compute + optimizer time. With 2 cores, gloo's I/O threads compete "
          "with the ranks for the CPU: every figure is stretched and the transfers look dearer than on a network.")


if __name__ == "__main__":
    main()
