"""Benchmark: vLLM (the CPU build, in its rollout worker) against transformers, side by side in one run.

a. ``generate``: SmolLM2-135M-Instruct, fp32, ``--prompts`` prompts (tic-tac-toe views in SPIRAL's
   template) x ``--new-tokens`` sampled tokens at temperature 1 with the top-8 log-probs kept (as in
   training), one ``generate`` call: `VLLMEngine` (worker process) against `HFEngine`, interleaved,
   median of ``--repeats``. Tokens/s = generated tokens / wall time of the call. The worker's own
   vLLM time is shown too: the difference is the local channel (pickled prompts and rows).
b. ``spiral``: one SPIRAL iteration on tic-tac-toe with SmolLM2 (``--games`` games against random, all
   in flight at once as in the shipped SPIRAL configs' 32, ``--max-new-tokens``, no imitation, no
   evaluation), ``engine: transformers`` against ``engine:
   vllm``, the same seed and so the same opening pairings: rollout tokens/s, rollout, update and
   whole-iteration seconds, and the weight push into vLLM (written to memory, reloaded, prefix cache
   reset) as a share of the iteration.

Goal (docs/benchmarks.md): vLLM >= 2x transformers' rollout tokens/s on the CPU.

    python benchmarks/bench_vllm.py                  # both parts, about 5 minutes on 2 cores
    python benchmarks/bench_vllm.py --only generate
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def bench_generate(args) -> dict:
    import torch

    from arena.inference.engine import HFEngine, VLLMEngine
    from arena.inference.models import load_model, smollm2_folder
    from arena.envs.registry import make_core
    from arena.agents.prompts import make_template

    torch.set_num_threads(args.threads)
    folder = smollm2_folder()
    model, tok = load_model(folder)
    template = make_template("spiral", tok)
    core = make_core("openspiel/tic_tac_toe-v0")
    prompts = []
    for i in range(args.prompts):
        core.reset(i)
        for k in range(i % 4):
            core.apply(core.current_player(), core.legal_actions(core.current_player())[k % 3])
        p = core.current_player()
        prompts.append(template.render(core.game_id, core.text(p), p))
    engines = {"transformers": HFEngine(model, tok)}
    t0 = time.perf_counter()
    engines["vllm"] = VLLMEngine(folder, dtype="fp32", threads=args.threads, max_model_len=1024)
    start_s = time.perf_counter() - t0
    engines["vllm_bf16"] = VLLMEngine(folder, dtype="bf16", threads=args.threads, max_model_len=1024)
    kw = dict(max_new_tokens=args.new_tokens, temperature=1.0, top_k_logprobs=8)
    rows: dict[str, list[float]] = {k: [] for k in (*engines, "vllm_worker")}
    try:
        for r in range(args.repeats + 1):  # the first round warms every engine up, not counted
            for name, eng in engines.items():
                t = time.perf_counter()
                gens = eng.generate(prompts, seeds=[1000 * r + i for i in range(len(prompts))], **kw)
                dt = time.perf_counter() - t
                n = sum(len(g.token_ids) for g in gens)
                print(f"  round {r} {name}: {n / dt:.0f} tokens/s", file=sys.stderr, flush=True)
                if r:
                    rows[name].append(n / dt)
                    if name == "vllm":
                        rows["vllm_worker"].append(n / eng.last_generate_s)
    finally:
        engines["vllm"].close()
        engines["vllm_bf16"].close()
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"\n## a. generate: SmolLM2-135M fp32, {args.prompts} prompts x {args.new_tokens} new tokens, "
          f"T=1, top-8 log-probs; median of {args.repeats}")
    print("| engine | tokens/s | vs transformers |")
    print("|---|---:|---:|")
    for k, label in (("transformers", "transformers `generate`, fp32"),
                     ("vllm", "vLLM worker, fp32, as the trainer sees it"),
                     ("vllm_worker", "vLLM worker, fp32, its own time"), ("vllm_bf16", "vLLM worker, bf16")):
        print(f"| {label} | {med[k]:.0f} | {med[k] / med['transformers']:.2f}x |")
    print(f"(vLLM worker start: {start_s:.1f} s, once a run)")
    return {"tokens_s": med, "start_s": start_s}


def bench_spiral(args) -> dict:
    import yaml

    from arena.trainers.llm.spiral import SpiralTrainer
    from arena.trainers.registry import load_train_config

    out = {}
    for engine, precision in (("transformers", "fp32"), ("vllm", "fp32"), ("vllm", "bf16")):
        data = yaml.safe_load((ROOT / "configs" / "train" / "spiral_kuhn.yaml").read_text())
        data.update(game="openspiel/tic_tac_toe-v0", model="smollm2", iterations=1, games_per_iter=args.games,
                    concurrency=args.games, max_new_tokens=args.max_new_tokens, engine=engine, il=None,
                    opponents=["random"], opponent_mode="fixed", threads=args.threads, seed=3,
                    rollout_precision=precision)
        data["learner"]["minibatch"] = 8
        data["eval"] = {"every": 100, "games": 2, "opponents": ["random"], "concurrency": 2}
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "cfg.yaml"
            p.write_text(yaml.safe_dump(data))
            t = SpiralTrainer(load_train_config(p), Path(d) / "run")
            try:
                t.evaluate = lambda it, snapshot=None: {}  # the iteration alone: no evaluation games
                t.run()
                row = next(json.loads(x) for x in (Path(d) / "run" / "metrics.jsonl").read_text().splitlines()
                           if "train/loss" in x)
            finally:
                t.close()
        out[f"{engine} {precision}"] = row
    print(f"\n## b. one SPIRAL iteration: tic-tac-toe, SmolLM2-135M fp32, {args.games} games against random, "
          f"max_new_tokens {args.max_new_tokens}")
    print("| engine, rollouts in | rollout tokens/s | rollout s | update s | weight push s | iteration s | push share |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for engine, r in out.items():
        it = r["time/iteration_s"]  # (the push happens inside the iteration, before its rollouts)
        print(f"| {engine} | {r['train/rollout_tokens_per_s']:.0f} | {r['time/rollout_s']:.1f} | "
              f"{r['time/update_s']:.1f} | {r['time/weight_sync_s']:.2f} | {it:.1f} | "
              f"{r['time/weight_sync_s'] / it:.1%} |")
    h = out["transformers fp32"]
    for k in ("vllm fp32", "vllm bf16"):
        v = out[k]
        print(f"{k}: rollout tokens/s {v['train/rollout_tokens_per_s'] / h['train/rollout_tokens_per_s']:.2f}x "
              f"transformers'; iteration {v['time/iteration_s'] / h['time/iteration_s']:.2f}x; mismatch (rollout vs "
              f"learner log-probs, mean a token) {v['train/mismatch']:.2e} (transformers fp32: {h['train/mismatch']:.2e})")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["generate", "spiral"])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--games", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.only in (None, "generate"):
        bench_generate(args)
    if args.only in (None, "spiral"):
        bench_spiral(args)


if __name__ == "__main__":
    main()
