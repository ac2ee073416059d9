"""The vLLM engine's GPU checks, as one script of a few minutes (run it where a CUDA GPU and an environment
with both the arena and the CUDA build of vllm are present; it checks what the CPU suite cannot):

1. ``VLLMEngine`` in process on the GPU (bf16): greedy outputs and top-K log-probs against transformers
   on the same GPU and weights (tolerances of bf16: the same greedy tokens on most prompts, log-prob
   differences printed).
2. A weight push (``update_weights``: ``reload_weights`` and the prefix cache reset) after the
   transformers model's weights are scaled: vLLM's log-probs follow; seconds a push.
3. Sleep and wake between rollout and update, as when the learner shares the device: ``llm.sleep(1)``
   (weights offloaded, KV cache dropped), a learner step's worth of GPU memory used meanwhile,
   ``llm.wake_up()``; the GPU memory freed and the seconds each way; the outputs after waking are
   those before.

Not here: the NCCL weight-transfer backend (vLLM's ``init_weight_transfer_engine`` /
``update_weights`` with a trainer-side engine); the pushes go through a file in memory. Several
``--parallel`` learners feeding one engine are tested on the CPU (tests/inference/test_vllm.py).

    python benchmarks/gpu_vllm_check.py [--model FOLDER]      # default: SmolLM2-135M-Instruct's folder
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPTS = ["What is the capital of France?", "Tic-tac-toe: the centre square is", "Kuhn poker: with the king I"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU here: nothing checked")
        return 2
    from arena.inference.engine import HFEngine, VLLMEngine
    from arena.inference.models import load_model, smollm2_folder

    folder = Path(args.model) if args.model else smollm2_folder()
    model, tok = load_model(folder, dtype="bf16", device="cuda")
    hf = HFEngine(model, tok, device="cuda")
    t0 = time.perf_counter()
    eng = VLLMEngine(folder, dtype="bf16", in_process=True, max_model_len=1024, gpu_memory_utilization=0.3,
                     enable_sleep_mode=True, kv_cache_bytes=0)
    print(f"engine built in {time.perf_counter() - t0:.1f} s: {eng.info}")
    failures = 0

    def compare(tag: str) -> None:
        nonlocal failures
        v = eng.generate(PROMPTS, max_new_tokens=16, greedy=True, top_k_logprobs=5)
        h = hf.generate(PROMPTS, max_new_tokens=16, greedy=True, top_k_logprobs=5)
        same = sum(a.token_ids == b.token_ids for a, b in zip(v, h))
        d = max((abs(x - y) for a, b in zip(v, h) if a.token_ids == b.token_ids for x, y in zip(a.logprobs, b.logprobs)),
                default=float("nan"))
        print(f"{tag}: greedy tokens equal on {same}/{len(PROMPTS)} prompts; largest log-prob difference {d:.3g}")
        failures += same < len(PROMPTS) - 1 or not d < 0.1

    compare("1. vLLM vs transformers (bf16, GPU)")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_tokens" in name or "layers.0." in name:
                p.mul_(1.1)
    s = eng.update_weights(model, 1)
    print(f"2. weights pushed in {s:.2f} s")
    compare("2. after the push")
    before = eng.generate(PROMPTS, max_new_tokens=16, greedy=True)
    free0 = torch.cuda.mem_get_info()[0]
    t = time.perf_counter()
    eng.llm.sleep(level=1)
    slept = time.perf_counter() - t
    free1 = torch.cuda.mem_get_info()[0]
    scratch = torch.empty(int(0.8 * (free1 - free0)) // 2 or 1, dtype=torch.bfloat16, device="cuda")  # the learner's turn
    del scratch
    t = time.perf_counter()
    eng.llm.wake_up()
    woke = time.perf_counter() - t
    after = eng.generate(PROMPTS, max_new_tokens=16, greedy=True)
    same = all(a.token_ids == b.token_ids for a, b in zip(after, before))
    print(f"3. sleep {slept:.2f} s freed {(free1 - free0) / 2**30:.2f} GiB; wake {woke:.2f} s; outputs after waking "
          f"{'the same' if same else 'DIFFERENT'}")
    failures += not same or free1 <= free0
    eng.close()
    print("all checks passed" if not failures else f"{failures} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
