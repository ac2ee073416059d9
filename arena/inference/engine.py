"""Rollout engines: batched generation that also reports per-token log-probs.

Every engine has the same ``generate`` method::

    engine.generate(prompts, *, max_new_tokens=64, temperature=1.0, greedy=False,
                    top_k_logprobs=0, seed=None, stop=None, seeds=None) -> list[Generation]

``seeds`` (one per prompt) makes each prompt's sampled tokens depend on its own
seed and nothing else: not on the other prompts of the batch, the batch size or
the order in which concurrent requests arrived.  Seeded rollouts of many
concurrent matches draw the same tokens however they were batched; their
log-probs agree up to float rounding (a matrix product's last bits depend on
the batch size).

* :class:`HFEngine`       transformers ``model.generate`` over left-padded
                          prompts with a KV cache (runs on the CPU).
* :class:`VLLMEngine`     ``vllm.LLM``, in this process where vllm imports, else in a rollout
                          worker of the vLLM environment (`arena.inference.vllm_worker`).
* :class:`BatchingEngine` wraps any engine for many concurrent callers
                          (threads): ``submit(prompt, seed=None, **kw) -> Future``;
                          requests are grouped into one ``generate`` call, each
                          keeping its own seed.

Log-prob conventions (what the learner relies on):

* ``Generation.logprobs[t]`` is ``log softmax(logits_t / T)[token_t]``: the
  log-prob of the sampled token under the distribution it was *sampled from*
  (no top-k / top-p / penalties are ever applied, so that distribution is the
  plain temperature-scaled softmax).  Greedy decoding reports ``T = 1``.
* ``topk_ids[t]`` / ``topk_logprobs[t]`` are the K most likely ids under that
  same distribution, most likely first; when the sampled id is not among
  them it replaces the K-th entry (its log-prob is <= the K-th's, so the list
  stays sorted).  ``None`` when ``top_k_logprobs == 0``.
* ``token_ids`` ends with the EOS token when the model produced one
  (``finish_reason == "stop"``); ``text`` never contains special tokens.
* ``stop`` strings are literal: the first occurrence of any of them ends the
  completion.  ``text`` is cut *before* the stop string (like vLLM's default)
  and ``token_ids`` / ``logprobs`` keep the shortest prefix of tokens whose
  text contains it (the token that completed the stop string is the last
  one), ``finish_reason == "stop"`` and ``stop_reason`` is the stop string
  that matched (None when the completion ended at EOS or at the length cap,
  as vLLM's ``CompletionOutput.stop_reason`` for stop strings).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from arena.errors import ArenaError, MissingExtra

__all__ = [
    "Generation",
    "Engine",
    "HFEngine",
    "BatchingEngine",
    "VLLMEngine",
    "VLLMEngineError",
    "make_engine",
    "vllm_python",
]


@dataclass
class Generation:
    text: str  # decoded completion (no special tokens)
    prompt_ids: list[int]
    token_ids: list[int]  # generated ids (including EOS if produced)
    logprobs: list[float]  # log-prob of each generated token under the sampling distribution
    topk_ids: list[list[int]] | None = None  # per token: K most likely ids, sampled id forced in
    topk_logprobs: list[list[float]] | None = None
    finish_reason: str = "length"  # "stop" or "length"
    meta: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None  # the stop string that ended the completion (None: EOS or length)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)


class Engine(Protocol):
    def generate(
        self,
        prompts: list[str],
        *,
        max_new_tokens: int = 64,
        temperature: float = 1.0,
        greedy: bool = False,
        top_k_logprobs: int = 0,
        seed: int | None = None,
        stop: list[str] | None = None,
        seeds: Sequence[int | None] | None = None,
    ) -> list[Generation]: ...


def _check_args(max_new_tokens: int, temperature: float, greedy: bool, top_k_logprobs: int, stop) -> None:
    if max_new_tokens < 0:
        raise ArenaError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if not greedy and not temperature > 0:
        raise ArenaError(f"temperature must be > 0 when sampling (use greedy=True for argmax), got {temperature}")
    if top_k_logprobs < 0:
        raise ArenaError(f"top_k_logprobs must be >= 0, got {top_k_logprobs}")
    if stop is not None and (isinstance(stop, str) or any(not isinstance(s, str) or not s for s in stop)):
        raise ArenaError(f"stop must be a list of non-empty strings, got {stop!r}")


def _check_seeds(seeds, prompts) -> None:
    if seeds is None:
        return
    if isinstance(seeds, (str, bytes)) or len(seeds) != len(prompts):
        raise ArenaError(f"seeds must hold one seed (or None) per prompt: {len(prompts)} prompts, got {seeds!r}")
    if any(s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 0) for s in seeds):
        raise ArenaError(f"seeds must be non-negative integers or None, got {list(seeds)!r}")


class _RowSeededSampler:
    """A logits processor that samples every row from its own ``torch.Generator``.

    ``argmax(logits / T + g)`` with ``g`` i.i.d. standard Gumbel noise is a draw from
    ``softmax(logits / T)`` (the Gumbel-max trick), so ``generate`` runs without sampling
    over the noised scores.  Row ``i`` uses one block of noise per decoding step from the
    generator seeded with ``seeds[i]``: its tokens depend on its prompt and seed only.
    ``generate`` reports log-probs from the raw logits, so they are unaffected.
    """

    def __init__(self, seeds: Sequence[int], temperature: float):
        import torch

        self.torch = torch
        self.temperature = temperature
        self.generators = [torch.Generator().manual_seed(s) for s in seeds]

    def __call__(self, input_ids, scores):
        torch = self.torch
        vocab = scores.shape[-1]
        u = torch.stack([torch.rand(vocab, generator=g, dtype=torch.float64) for g in self.generators])
        gumbel = -torch.log(-torch.log(u.clamp(1e-300, 1.0 - 1e-16)))
        return scores.float() / self.temperature + gumbel.to(device=scores.device, dtype=torch.float32)


def _cut_at_stop(decode, ids: list[int], stop: Sequence[str]) -> tuple[int, str, str] | None:
    """Shortest prefix ``ids[:n]`` whose text contains a stop string -> (n, text before it, the stop string).

    None when the decoded completion contains none of them.  Binary search:
    "the text of ids[:n] contains a stop string" is monotone in n.
    """

    def first_stop(text: str) -> tuple[int, str]:
        hits = [(i, s) for s in stop if (i := text.find(s)) >= 0]
        return min(hits) if hits else (-1, "")

    if first_stop(decode(ids))[0] < 0:
        return None
    lo, hi = 1, len(ids)  # smallest n in [lo, hi] with a hit; hi is known to hit
    while lo < hi:
        mid = (lo + hi) // 2
        if first_stop(decode(ids[:mid]))[0] >= 0:
            hi = mid
        else:
            lo = mid + 1
    text = decode(ids[:lo])
    at, which = first_stop(text)
    return lo, text[:at], which


def _force_in(ids: list[int], lps: list[float], tok: int, lp: float) -> None:
    if tok not in ids:
        ids[-1] = tok
        lps[-1] = lp


# --------------------------------------------------------------------------- transformers


def _encode(tokenizer: Any, prompt: str) -> list[int]:
    """A prompt's token ids, special tokens added; an empty prompt is the BOS token alone."""
    ids = list(tokenizer(prompt, add_special_tokens=True)["input_ids"])
    if not ids:
        if tokenizer.bos_token_id is None:
            raise ArenaError("empty prompt and the tokenizer has no BOS token to start from")
        ids = [tokenizer.bos_token_id]
    return ids


class HFEngine:
    """Batched generation with a transformers causal LM (KV cache, left padding).

    ``generate`` is serialised by a lock: one batch at a time per engine.  Use
    :class:`BatchingEngine` to serve many threads.  Sampling with ``seed``
    runs inside ``torch.random.fork_rng``: reproducible, and the global RNG
    state is left untouched; ``seed=None`` draws from the global RNG.  With
    ``seeds`` (one per prompt) every row draws from its own generator through
    the Gumbel-max trick (:class:`_RowSeededSampler`), so a row's sample does
    not depend on the rest of the batch.
    """

    def __init__(self, model, tokenizer, device: str = "cpu"):
        import torch

        self.torch = torch
        self.model = model
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        if next(model.parameters()).device != self.device:
            model.to(self.device)
        model.eval()
        eos: set[int] = set()
        for src in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
            if src is None:
                continue
            eos.update([src] if isinstance(src, int) else list(src))
        if not eos:
            raise ArenaError("the tokenizer / model has no EOS token: generation could never stop")
        self.eos_ids = sorted(eos)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]
        self.bos_id = tokenizer.bos_token_id
        self._lock = threading.Lock()

    # -- helpers -----------------------------------------------------------

    def encode(self, prompt: str) -> list[int]:
        return _encode(self.tokenizer, prompt)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def _rng_devices(self) -> list:
        if self.device.type == "cuda":
            return [self.device.index if self.device.index is not None else self.torch.cuda.current_device()]
        return []

    @contextlib.contextmanager
    def _neutral_generation_config(self):
        """generate() fills unset options from model.generation_config; use a neutral one meanwhile."""
        from transformers import GenerationConfig

        saved = self.model.generation_config
        self.model.generation_config = GenerationConfig(
            bos_token_id=self.bos_id, eos_token_id=self.eos_ids, pad_token_id=self.pad_id
        )
        try:
            yield
        finally:
            self.model.generation_config = saved

    # -- generate ----------------------------------------------------------

    def generate(
        self,
        prompts: list[str],
        *,
        max_new_tokens: int = 64,
        temperature: float = 1.0,
        greedy: bool = False,
        top_k_logprobs: int = 0,
        seed: int | None = None,
        stop: list[str] | None = None,
        seeds: Sequence[int | None] | None = None,
    ) -> list[Generation]:
        torch = self.torch
        from transformers import GenerationConfig, LogitsProcessorList

        _check_args(max_new_tokens, temperature, greedy, top_k_logprobs, stop)
        if isinstance(prompts, str):
            raise ArenaError("generate takes a list of prompts, not one string")
        _check_seeds(seeds, prompts)
        if not prompts:
            return []
        enc = [self.encode(p) for p in prompts]
        K = top_k_logprobs
        if max_new_tokens == 0:
            return [Generation("", ids, [], [], [] if K else None, [] if K else None, "length") for ids in enc]

        B, P = len(enc), max(len(e) for e in enc)
        input_ids = torch.full((B, P), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((B, P), dtype=torch.long)
        for i, ids in enumerate(enc):
            input_ids[i, P - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention_mask[i, P - len(ids):] = 1

        row_seeded = seeds is not None and not greedy
        gc = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=not (greedy or row_seeded),  # row-seeded sampling is an argmax over noised logits
            temperature=1.0 if greedy or row_seeded else float(temperature),
            top_k=None if greedy or row_seeded else 0,  # 0 = off (None is filled with 50, unused without sampling)
            top_p=1.0,
            typical_p=1.0,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            min_length=0,
            num_beams=1,
            num_return_sequences=1,
            use_cache=True,
            output_logits=True,
            return_dict_in_generate=True,
            bos_token_id=self.bos_id,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            stop_strings=list(stop) if stop else None,
        )
        gen_kwargs: dict[str, Any] = {"tokenizer": self.tokenizer} if stop else {}

        with self._lock, self._neutral_generation_config():
            if row_seeded:
                row = [int(torch.randint(0, 2**62, ())) if r is None else int(r) for r in seeds]
                gen_kwargs["logits_processor"] = LogitsProcessorList([_RowSeededSampler(row, float(temperature))])
            rng = torch.random.fork_rng(devices=self._rng_devices()) if seed is not None else contextlib.nullcontext()
            with rng, torch.no_grad():
                if seed is not None:
                    torch.manual_seed(seed)
                out = self.model.generate(
                    input_ids=input_ids.to(self.device),
                    attention_mask=attention_mask.to(self.device),
                    generation_config=gc,
                    **gen_kwargs,
                )

            seqs = out.sequences[:, P:]
            n = seqs.shape[1]
            T = 1.0 if greedy else float(temperature)
            lp = torch.empty((B, n), dtype=torch.float32)
            tk_ids = torch.empty((B, n, K), dtype=torch.long) if K else None
            tk_lp = torch.empty((B, n, K), dtype=torch.float32) if K else None
            for t, logits in enumerate(out.logits):
                ls = torch.log_softmax(logits.float() / T, dim=-1)
                lp[:, t] = ls.gather(1, seqs[:, t : t + 1]).squeeze(1).cpu()
                if K:
                    v, ix = ls.topk(min(K, ls.shape[-1]), dim=-1)  # sorted, most likely first
                    tk_ids[:, t] = ix.cpu()
                    tk_lp[:, t] = v.float().cpu()
            del out

        seqs_l = seqs.cpu().tolist()
        lp_l = lp.tolist()
        tk_ids_l = tk_ids.tolist() if K else None
        tk_lp_l = tk_lp.tolist() if K else None
        eos = set(self.eos_ids)
        gens = []
        for i in range(B):
            ids = seqs_l[i]
            cut = next((j + 1 for j, tok in enumerate(ids) if tok in eos), None)
            finish = "stop" if cut is not None else "length"
            cut = n if cut is None else cut
            ids = ids[:cut]
            text = stop_reason = None
            if stop:
                hit = _cut_at_stop(self.decode, ids, stop)
                if hit is not None:
                    cut, text, stop_reason = hit
                    ids = ids[:cut]
                    finish = "stop"
            if text is None:
                text = self.decode(ids)
            tids = tlps = None
            if K:
                tids, tlps = tk_ids_l[i][:cut], tk_lp_l[i][:cut]
                for t in range(cut):
                    _force_in(tids[t], tlps[t], ids[t], lp_l[i][t])
            gens.append(Generation(text, enc[i], ids, lp_l[i][:cut], tids, tlps, finish, stop_reason=stop_reason))
        return gens


# --------------------------------------------------------------------------- batching


_STOP = object()


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


class BatchingEngine:
    """Serve many threads with one engine: requests are grouped into batched ``generate`` calls.

    A background thread takes the first waiting request, then keeps collecting
    for up to ``max_wait_s`` seconds or until ``max_batch`` requests, and calls
    the wrapped engine's ``generate`` once per group of requests with identical
    generation kwargs (so requests with different seeds / temperatures never
    share a call).  ``submit`` returns a ``concurrent.futures.Future``; an
    exception raised by the engine is set on every future of that call.

    A request's ``seed`` is its own: the call passes ``seeds`` (one per request),
    so a seeded request gets the same sample whichever requests shared its batch.
    """

    def __init__(self, engine: Engine, max_batch: int = 32, max_wait_s: float = 0.005):
        if max_batch < 1:
            raise ArenaError(f"max_batch must be >= 1, got {max_batch}")
        self.engine = engine
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.calls = 0  # generate calls made on the wrapped engine
        self.requests = 0  # requests served
        self._q: queue.Queue = queue.Queue()
        self._closed = False
        self._submit_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="arena-batching-engine", daemon=True)
        self._thread.start()

    @property
    def tokenizer(self):
        return getattr(self.engine, "tokenizer", None)

    def submit(self, prompt: str, *, seed: int | None = None, **gen_kwargs: Any) -> "Future[Generation]":
        if not isinstance(prompt, str):
            raise ArenaError(f"submit takes one prompt string, got {type(prompt).__name__}")
        fut: Future = Future()
        key = _freeze(gen_kwargs)
        with self._submit_lock:
            if self._closed:
                raise RuntimeError("BatchingEngine is closed")
            self._q.put((prompt, key, gen_kwargs, fut, seed))
        return fut

    def generate(self, prompts: list[str], *, seed: int | None = None, seeds=None,
                 **gen_kwargs: Any) -> list[Generation]:
        """Same interface as the wrapped engine (the prompts may be merged with other callers')."""
        _check_seeds(seeds, prompts)
        if seeds is None:
            seeds = [None if seed is None else seed + i for i in range(len(prompts))]
        futs = [self.submit(p, seed=s, **gen_kwargs) for p, s in zip(prompts, seeds)]
        return [f.result() for f in futs]

    def close(self, timeout: float | None = None) -> None:
        """Finish every request already submitted, then stop the background thread."""
        with self._submit_lock:
            if self._closed:
                return
            self._closed = True
            self._q.put(_STOP)
        self._thread.join(timeout)

    def __enter__(self) -> "BatchingEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _loop(self) -> None:
        stopping = False
        while not stopping:
            item = self._q.get()
            if item is _STOP:
                return
            batch = [item]
            deadline = time.monotonic() + self.max_wait_s
            while len(batch) < self.max_batch:
                remaining = deadline - time.monotonic()
                try:
                    nxt = self._q.get(timeout=remaining) if remaining > 0 else self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stopping = True
                    break
                batch.append(nxt)
            groups: dict[Any, list] = {}
            for it in batch:
                groups.setdefault(it[1], []).append(it)
            for items in groups.values():
                self._run(items)

    def _run(self, items: list) -> None:
        live = [it for it in items if it[3].set_running_or_notify_cancel()]
        if not live:
            return
        kwargs = live[0][2]
        if any(it[4] is not None for it in live):
            kwargs = {**kwargs, "seeds": [it[4] for it in live]}
        try:
            gens = self.engine.generate([it[0] for it in live], **kwargs)
            if len(gens) != len(live):
                raise ArenaError(f"engine returned {len(gens)} generations for {len(live)} prompts")
        except BaseException as e:  # noqa: BLE001 - handed to the callers
            for it in live:
                it[3].set_exception(e)
        else:
            for it, g in zip(live, gens):
                it[3].set_result(g)
        finally:
            self.calls += 1
            self.requests += len(live)


# --------------------------------------------------------------------------- vLLM


class VLLMEngineError(ArenaError):
    """The vLLM engine cannot start, or its worker died twice in one call (one line: what and the fix)."""


def vllm_python() -> Path | None:
    """The Python of the vLLM environment: ``$ARENA_VLLM_PYTHON``, else the checkout's ``.venv-vllm``
    (``make`` builds it), else None."""
    env = os.environ.get("ARENA_VLLM_PYTHON")
    if env:
        return Path(env).expanduser()
    here = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"
    return here if here.exists() else None


def _vllm_in_process() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


class VLLMEngine:
    """The same ``generate`` over ``vllm.LLM``, with the learner's weights pushed in after every update.

    Where vllm imports in this process (a GPU machine whose environment is aligned with vLLM's pins)
    the LLM runs here; otherwise in a rollout worker process of the vLLM environment
    (`arena.inference.vllm_worker`, started with `vllm_python`), driven over a Unix socket: prompts
    and sampling settings go in, token ids, log-probs and top-K rows come back. Both paths share the
    worker module's functions, so their outputs are the same fields.

    * Log-probs are vLLM's ``processed_logprobs``: those of the distribution sampled from
      (``log_softmax(logits / T)``), as :class:`HFEngine` reports them. Each prompt gets its own
      request seed (``seeds[i]``, else ``seed + i``).
    * `update_weights` pushes a model's weights (or a state dict) into the running engine without
      restarting it (``reload_weights``, then the prefix cache reset) and records their version;
      `weights_version` is the version every later generation was made with.
    * A worker that dies (killed, out of memory) is started again once within the call, with the last
      weights pushed, and the call is retried: a rollout never sees it. A second death in the same call
      is a `VLLMEngineError` naming the worker's log.
    """

    def __init__(self, model_path, dtype: str = "fp32", device: str = "cpu", max_logprobs: int = 20, *,
                 max_model_len: int = 1024, kv_cache_bytes: int = 1 << 30, seed: int = 0, threads: int | None = None,
                 in_process: bool | None = None, start_timeout_s: float = 600.0, **llm_kwargs: Any):
        self.model_path = str(model_path)
        self.dtype, self.max_logprobs = dtype, int(max_logprobs)
        max_model_len = min(int(max_model_len), _max_positions(self.model_path) or int(max_model_len))
        self.llm_kwargs = dict(model=self.model_path, dtype=dtype, max_model_len=int(max_model_len),
                               kv_cache_bytes=int(kv_cache_bytes), max_logprobs=self.max_logprobs, seed=int(seed),
                               **llm_kwargs)
        self.threads = threads
        self.start_timeout_s = float(start_timeout_s)
        self.weights_version: int | None = None
        self.sync_seconds: list[float] = []  # each update's: writing the file and the worker's reload
        self.restarts = 0
        self.last_generate_s = 0.0
        self._weights_file: Path | None = None
        self._proc = self._conn = None
        self._dir = Path(tempfile.mkdtemp(prefix="arena-vllm-"))
        self.in_process = _vllm_in_process() if in_process is None else bool(in_process)
        if self.in_process:
            from arena.inference import vllm_worker

            try:
                self.llm = vllm_worker.build_llm(**self.llm_kwargs)
            except ImportError as e:
                raise MissingExtra("the vLLM engine", "vllm", e) from e
            self.tokenizer = self.llm.get_tokenizer()
            self.info = vllm_worker.versions()
        else:
            self.llm = None
            from arena.inference.models import load_tokenizer

            self.tokenizer = load_tokenizer(self.model_path)
            self.info = self._start()

    def encode(self, prompt: str) -> list[int]:
        """The prompt's token ids as the engine reads them (the tokenizer's special tokens added)."""
        return _encode(self.tokenizer, prompt)

    # -- the worker process ------------------------------------------------------------------------
    def _start(self) -> dict:
        import secrets
        from multiprocessing.connection import Client

        from arena.inference import vllm_worker

        python = vllm_python()
        if python is None or not python.exists():
            raise VLLMEngineError(
                "the vLLM engine runs in its own environment (vLLM pins its own transformers): "
                + (f"{python} does not exist" if python else "none found") + "; build it with `make vllm-env` "
                "(make test does) or set ARENA_VLLM_PYTHON to a Python that imports vllm")
        address = str(self._dir / f"w{self.restarts}.sock")
        key = secrets.token_bytes(16)
        env = dict(os.environ, ARENA_VLLM_AUTHKEY=key.hex(), VLLM_ENABLE_V1_MULTIPROCESSING="0",
                   VLLM_LOGGING_LEVEL=os.environ.get("VLLM_LOGGING_LEVEL", "WARNING"), TOKENIZERS_PARALLELISM="false")
        threads = self.threads or int(os.environ.get("OMP_NUM_THREADS") or 0) or (os.cpu_count() or 1)
        env["OMP_NUM_THREADS"] = str(threads)  # else vLLM drops to one thread "for serving"
        iomp = python.parent.parent / "lib" / "libiomp5.so"  # vLLM's CPU backend asks for Intel's OpenMP preloaded
        if iomp.exists() and os.environ.get("ARENA_VLLM_IOMP", "1") != "0":
            env["LD_PRELOAD"] = ":".join(x for x in (str(iomp), env.get("LD_PRELOAD", "")) if x)
            # Its threads spin between the many short parallel regions of a decoding step and sleep 20 ms
            # after the last (the learner's update runs on the same cores): sleeping at once (a passive
            # wait policy) made generation 1.2-2x slower; spinning always took a core while idle (docs/benchmarks.md).
            env.pop("OMP_WAIT_POLICY", None)
            env.setdefault("KMP_BLOCKTIME", "20")
        else:
            env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self.log_path = self._dir / "worker.log"
        a = self.llm_kwargs
        cmd = [str(python), vllm_worker.__file__, "--address", address, "--model", a["model"], "--dtype", a["dtype"],
               "--max-model-len", str(a["max_model_len"]), "--kv-cache-bytes", str(a["kv_cache_bytes"]),
               "--max-logprobs", str(a["max_logprobs"]), "--seed", str(a["seed"])]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=env, cwd=str(self._dir), start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while not os.path.exists(address):
            if self._proc.poll() is not None:
                raise VLLMEngineError(f"the vLLM worker exited with code {self._proc.returncode} while starting: "
                                      f"{self._log_tail()} (log: {self.log_path})")
            if time.monotonic() > deadline:
                self._kill()
                raise VLLMEngineError(f"the vLLM worker did not start within {self.start_timeout_s:.0f} s "
                                      f"(log: {self.log_path})")
            time.sleep(0.05)
        self._conn = Client(address, family="AF_UNIX", authkey=key)
        info = self._call("hello", {}, retry=False)
        if self._weights_file is not None:  # a restarted worker gets the weights the last one had
            self._call("load_weights", {"path": str(self._weights_file), "version": self.weights_version}, retry=False)
        return info

    def _log_tail(self) -> str:
        try:
            lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "no log"
        # the exception's own line ("ValueError: ..."), else any line naming an error, else the last line
        raised = [ln for ln in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b.*:", ln.strip())]
        errors = raised or [ln for ln in lines if "Error" in ln or "error" in ln]
        return " ".join((errors or lines or ["no output"])[-1].split())[:300]

    def _exit_code(self, wait_s: float = 5.0) -> int | None:
        """The worker's exit code once its connection broke. The kernel closes a dying process's sockets
        before its parent can reap it, so the broken pipe can come first: wait for the exit a little (None:
        the worker still runs and only the connection broke)."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None

    def _kill(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
        self._conn = None
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            with contextlib.suppress(Exception):
                self._proc.wait(timeout=30)

    def _call(self, op: str, args: dict, retry: bool = True) -> Any:
        try:
            self._conn.send((op, args))
            status, value = self._conn.recv()
        except (EOFError, OSError) as e:
            code = self._exit_code()
            self._kill()
            if not retry:
                raise VLLMEngineError(f"the vLLM worker died during {op!r} (exit code {code}): {self._log_tail()} "
                                      f"(log: {self.log_path})") from e
            self.restarts += 1
            print(f"the vLLM worker died (exit code {code}); starting it again with weights version "
                  f"{self.weights_version}", file=sys.stderr, flush=True)
            self.info = self._start()
            return self._call(op, args, retry=False)
        if status != "ok":
            raise VLLMEngineError(f"the vLLM worker refused {op!r}: {value}")
        return value

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- weights -------------------------------------------------------------------------------------
    def update_weights(self, weights: Any, version: int) -> float:
        """Push `weights` (a torch module or a state dict with Hugging Face names) into the engine; returns
        the seconds it took (written to a file in memory, read and repacked by the engine, prefix cache
        reset). Tied tensors (SmolLM2's embedding and output layer) go once, under their first name."""
        t0 = time.perf_counter()
        sd = weights.state_dict() if hasattr(weights, "state_dict") else dict(weights)
        seen, flat = set(), {}
        for name, t in sd.items():
            ptr = (t.data_ptr(), t.shape)
            if ptr in seen:
                continue
            seen.add(ptr)
            flat[name] = t.detach().to("cpu").contiguous()
        if self.in_process:  # the tensors themselves: no file
            from arena.inference import vllm_worker

            vllm_worker.push_weights(self.llm, flat)
        else:  # through a file in memory, which a restarted worker reads again
            self._push_file(flat, version)
        self.weights_version = int(version)
        seconds = time.perf_counter() - t0
        self.sync_seconds.append(seconds)
        return seconds

    def _push_file(self, flat: dict, version: int) -> None:
        from safetensors.torch import save_file

        path = _shm_dir(self._dir) / f"weights-{os.getpid()}-{id(self)}-{version}.safetensors"
        save_file(flat, str(path))
        try:
            self._call("load_weights", {"path": str(path), "version": int(version)})
        except BaseException:
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        if self._weights_file is not None and self._weights_file != path:
            with contextlib.suppress(OSError):
                self._weights_file.unlink()
        self._weights_file = path

    # -- generation ----------------------------------------------------------------------------------
    def generate(
        self,
        prompts: list[str],
        *,
        max_new_tokens: int = 64,
        temperature: float = 1.0,
        greedy: bool = False,
        top_k_logprobs: int = 0,
        seed: int | None = None,
        stop: list[str] | None = None,
        seeds: Sequence[int | None] | None = None,
    ) -> list[Generation]:
        from arena.inference import vllm_worker

        _check_args(max_new_tokens, temperature, greedy, top_k_logprobs, stop)
        _check_seeds(seeds, prompts)
        if not prompts:
            return []
        if top_k_logprobs > self.max_logprobs:
            raise ArenaError(f"top_k_logprobs={top_k_logprobs} > max_logprobs={self.max_logprobs}: raise it in VLLMEngine(...)")
        row_seeds = [seeds[i] if seeds is not None else (None if seed is None else seed + i) for i in range(len(prompts))]
        params = vllm_worker.sampling_params(len(prompts), max_new_tokens=max_new_tokens, temperature=temperature,
                                             greedy=greedy, top_k=top_k_logprobs, seeds=row_seeds, stop=stop)
        if self.in_process:
            from vllm import SamplingParams

            outs = self.llm.generate(list(prompts), [SamplingParams(**p) for p in params], use_tqdm=False)
            rows = vllm_worker.generation_fields(outs, top_k_logprobs)
        else:
            reply = self._call("generate", {"prompts": list(prompts), "params": params, "top_k": top_k_logprobs})
            rows, self.last_generate_s = reply["rows"], reply["seconds"]  # vLLM's own time, in the worker
        version = self.weights_version
        return [Generation(r["text"], r["prompt_ids"], r["token_ids"], r["logprobs"], r["topk_ids"], r["topk_logprobs"],
                           r["finish_reason"], meta={"weights_version": version}, stop_reason=r["stop_reason"])
                for r in rows]

    def close(self) -> None:
        if self._conn is not None and self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(Exception):
                self._conn.send(("close", {}))
                self._conn.recv()
            with contextlib.suppress(Exception):
                self._proc.wait(timeout=30)
        self._kill()
        if self._weights_file is not None:
            with contextlib.suppress(OSError):
                self._weights_file.unlink()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __del__(self):  # a worker never outlives its engine
        with contextlib.suppress(Exception):
            self._kill()


def _max_positions(folder: str) -> int | None:
    """The longest context a model folder's config allows (vLLM refuses a longer ``max_model_len``)."""
    import json

    try:
        n = json.loads((Path(folder) / "config.json").read_text()).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError):
        return None
    return int(n) if isinstance(n, int) and n > 0 else None


def _shm_dir(fallback: Path) -> Path:
    """Where pushed weights are written: RAM (``/dev/shm``) where there is one, else `fallback`."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else fallback


# --------------------------------------------------------------------------- factory


ENGINE_KINDS = ("hf", "vllm")
#: What configs may call them: ``transformers`` is ``hf``.
ENGINE_NAMES = {"hf": "hf", "transformers": "hf", "vllm": "vllm"}


def make_engine(kind: str, model_path, dtype: str = "fp32", device: str = "cpu", **kwargs: Any):
    """'hf' (or 'transformers') -> :class:`HFEngine` over :func:`arena.inference.models.load_model`;
    'vllm' -> :class:`VLLMEngine`."""
    kind = ENGINE_NAMES.get(kind, kind)
    if kind == "hf":
        from arena.inference.models import load_model

        model, tok = load_model(model_path, dtype=dtype, device=device)
        return HFEngine(model, tok, device=device)
    if kind == "vllm":
        return VLLMEngine(model_path, dtype=dtype, device=device, **kwargs)
    raise ArenaError(f"unknown engine kind {kind!r}: use {' or '.join(map(repr, ENGINE_KINDS))}")
