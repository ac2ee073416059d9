"""Micro-benchmark: the LLM learner and rollouts on CPU (tiny model and SmolLM2-135M).

Why: the SPIRAL trainer's learner step must not get slower when a PPO clip is
swapped for a DPPO trust-region mask, and its rollouts only pay off if many
concurrent matches share one batched generation call.  One process, side by
side, printed as ratios:

a. ``step``: learner step time and peak step memory of ``dppo_binary_tv`` and
   ``dppo_topk_kl`` against ``ppo_clip`` on the SAME batch (goal: <= 1.05x for
   both).  The tiny char-level Llama (``make_tiny_model_folder``, default sizes)
   and a fixed synthetic batch (default 256 rows): prompts of ~20 tokens
   (compact tic-tac-toe views), responses of <= 12 tokens sampled by the model
   with ``HFEngine.generate`` (a no-grad forward), with the rollout log-probs
   plus N(0, 0.1) noise as the behaviour log-probs (so ratios are not all 1 and
   the masks have something to do), the K=8 top-K ids / log-probs of the same
   generation (same noise), and advantages +-1.  One step is what
   ``SpiralTrainer.update`` does for one minibatch: ``sequence_logprobs`` (with
   the top-K ids for the top-K loss), building the behaviour tensors from the
   stored lists, the loss, ``backward``, gradient clipping and an AdamW step.
   Each loss has its own copy of the same initial weights and its own AdamW,
   with learning rate 0: AdamW does all of its arithmetic, but the policy stays
   put, so every timed step sees the same ratios and masks (with a real
   learning rate, repeated steps on one fixed batch drift far from the
   behaviour policy within a few steps, which no real minibatch sees).  The
   losses are interleaved (the order rotates every repeat) and the median of
   ``--repeats`` steps is kept (wall clock, which the goal is about; the
   process's CPU time per step is shown too: it is less disturbed by other jobs
   on a shared machine).

   Peak memory, one method: the torch profiler with ``profile_memory=True``
   records every CPU tensor allocation and free (its ``[memory]`` events, with
   a signed byte count); replaying them in time order over one step gives the
   peak of live tensor bytes above what was live when the step started (model,
   AdamW state and the previous step's gradients are already there and are not
   counted).  This counts exactly what the step allocates, independent of the
   malloc arena, of pages the allocator keeps after ``free`` and of other
   threads -- which is why peak RSS (``getrusage``/``VmHWM``) was not used: on
   a model this small the differences between losses are a few MB and RSS
   noise from glibc's heap trimming is of the same order.  The profiler does
   not see frees of blocks allocated before it started (it warns about this
   once), so the previous step's gradients, freed and allocated again during
   the step, count once too often: the same ~3 MB for every loss.  The
   profiled step is not one of the timed ones.

b. ``rollout``: rollout tokens/s of 32 concurrent tic-tac-toe matches
   (``openspiel/tic_tac_toe-v0``, the tiny model against ``random``, seats
   alternating) played by ``play_episodes`` on the match engine with
   concurrency 32 (one ``generate`` call a round for every waiting move),
   against the same 32 matches (same seeds) played one after another
   (concurrency 1), and against the driver the trainer used before: one
   thread a match running ``play_match``, the prompts gathered by a shared
   ``BatchingEngine`` within a 20 ms window.
   Compact template, ``max_new_tokens`` 12, sampled at temperature 1, top-K
   8 log-probs kept (as in training), SPIRAL's training invalid-move policy (an
   invalid move ends the match).  Tokens/s = generated tokens / wall time of the
   whole ``play_episodes`` call; median of ``--rollout-repeats`` interleaved
   runs.  Goal: batched / sequential >= 5x.  (The tiny model has random weights,
   so most matches end at its first, invalid, move: this measures generation
   throughput, not play.)

c. ``smollm``: SmolLM2-135M-Instruct generation tokens/s with ``HFEngine`` on
   this machine's threads (``--threads``, default 2), batch 1 and batch 8: the
   SPIRAL prompt (inside the chat template) on Kuhn Poker first-move
   observations (``arena/KuhnPoker-v1``, 8 deals), ``max_new_tokens`` 64,
   sampled at temperature 1.  Tokens/s counts generated tokens (rows that hit
   EOS early count only their own tokens); best of ``--smollm-repeats``.

d. ``vllm`` (only with ``--vllm``): vLLM against transformers tokens/s on
   SmolLM2 (bf16 on the GPU, batch 8 and 64); needs a CUDA GPU and the
   ``vllm`` package, otherwise a note says so.

Run:  .venv/bin/python benchmarks/bench_llm.py [--quick] [--only step|rollout|smollm|vllm ...] [--vllm]
      (the full run takes ~3-5 minutes on 2 cores; --quick well under a minute)
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions as _versions  # noqa: E402

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # several torch processes on 2 cores: no busy-waiting
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import argparse  # noqa: E402
import copy  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402

_perf = time.perf_counter

TTT = "openspiel/tic_tac_toe-v0"
KUHN = "arena/KuhnPoker-v1"
STEP_LOSSES = ("ppo_clip", "dppo_binary_tv", "dppo_topk_kl")
SECTIONS = ("step", "rollout", "smollm", "vllm")


# -- helpers ----------------------------------------------------------------------------------
def _torch():
    import torch

    return torch




def versions() -> str:
    return _versions(("torch", "transformers"))


@dataclass
class Section:
    """One benchmark section's results: a table of measurements and its ratios against goals."""

    title: str
    head: list[str]
    rows: list[list[str]] = field(default_factory=list)
    # (label, ratio, goal text, ok: True / False / None for no goal)
    ratios: list[tuple[str, float, str, bool | None]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# -- a. learner step ----------------------------------------------------------------------------
def _tiny(folder: str, seed: int = 0):
    from arena.inference.models import load_model, make_tiny_model_folder

    path = make_tiny_model_folder(folder, seed=seed)
    model, tok = load_model(path, dtype="fp32")
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model, tok


def _ttt_prompts(n: int, rng: random.Random) -> list[str]:
    """Compact tic-tac-toe views of random positions, ~20 characters (= tokens) each with BOS."""
    out = []
    for _ in range(n):
        cells = [str(i) for i in range(9)]
        for i in rng.sample(range(9), rng.randint(0, 6)):
            cells[i] = rng.choice("xo")
        b = "".join(cells)
        prefix = rng.choice(["ttt ", "move ", "tictac ", "game: "])
        out.append(f"{prefix}{rng.choice('xo')}:{b[0:3]}/{b[3:6]}/{b[6:9]}=")
    return out


def make_step_batch(model, tok, n: int, seed: int, k: int = 8, max_new_tokens: int = 12,
                    noise: float = 0.1) -> dict[str, Any]:
    """The fixed synthetic learner batch (see the module docstring, section a)."""
    from arena.inference.engine import HFEngine

    rng = random.Random(seed)
    nrng = random.Random(seed + 1)
    prompts = _ttt_prompts(n, rng)
    gens = HFEngine(model, tok).generate(prompts, max_new_tokens=max_new_tokens, temperature=1.0,
                                         top_k_logprobs=k, seed=seed)

    def jitter(x: float) -> float:
        return min(x + nrng.gauss(0.0, noise), -1e-6)

    rows = []
    for g in gens:
        if not g.token_ids:
            continue
        tk_lp = [[jitter(v) for v in row] for row in g.topk_logprobs]
        old = []
        for t, tok_id in enumerate(g.token_ids):
            # the sampled token's behaviour log-prob agrees with its top-K slot (as in a real rollout)
            j = g.topk_ids[t].index(tok_id)
            old.append(tk_lp[t][j])
        rows.append(dict(prompt_ids=list(g.prompt_ids), response_ids=list(g.token_ids), old_logp=old,
                         topk_ids=g.topk_ids, topk_logp=tk_lp, adv=rng.choice((-1.0, 1.0))))
    return {"rows": rows, "k": k, "max_len": max_new_tokens, "pad": tok.pad_token_id or 0,
            "prompt_tokens": statistics.mean(len(r["prompt_ids"]) for r in rows),
            "response_tokens": statistics.mean(len(r["response_ids"]) for r in rows)}


def needs_topk(loss_name: str) -> bool:
    from arena.trainers.common.losses import TOPK_LOSSES

    return loss_name in TOPK_LOSSES


def learner_step(model, opt, loss_name: str, batch: dict[str, Any], grad_clip: float = 1.0) -> dict[str, float]:
    """One minibatch of ``SpiralTrainer.update`` (fp32, token_mean): forward, loss, backward, clip, AdamW."""
    torch = _torch()
    from arena.trainers.llm.logprobs import sequence_logprobs
    from arena.trainers.common.losses import get_loss

    loss_fn = get_loss(loss_name)
    topk = needs_topk(loss_name)
    mb = batch["rows"]
    out = sequence_logprobs(model, [s["prompt_ids"] for s in mb], [s["response_ids"] for s in mb],
                            topk_ids=[s["topk_ids"] for s in mb] if topk else None, pad_id=batch["pad"])
    logp, mask = out["logp"].float(), out["mask"].float()
    T = logp.shape[1]
    old = torch.zeros_like(logp)
    for b, s in enumerate(mb):
        old[b, : len(s["old_logp"])] = torch.tensor(s["old_logp"][:T])
    adv = torch.tensor([s["adv"] for s in mb], dtype=torch.float32)
    kwargs: dict[str, Any] = {}
    if topk:
        K = batch["k"]
        told = torch.full((len(mb), T, K), -1e4)
        for b, s in enumerate(mb):
            n = min(len(s["topk_logp"]), T)
            told[b, :n] = torch.tensor(s["topk_logp"][:n])
        kwargs.update(topk_old_logp=told, topk_logp=out["topk_logp"].float())
    loss, stats = loss_fn(logp, old, adv, mask, agg="token_mean", max_len=batch["max_len"], **kwargs)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(model.parameters()), grad_clip)
    opt.step()
    stats["loss"] = float(loss.detach())
    return stats


def peak_step_bytes(fn) -> tuple[int, int]:
    """(peak, net) live CPU tensor bytes above the starting point while ``fn()`` runs (torch profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    cum = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        cum += e.nbytes()
        peak = max(peak, cum)
    return peak, cum


def bench_step(args, console: Console) -> Section:
    torch = _torch()
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-llm-") as tmp:
        model, tok = _tiny(tmp, seed=args.seed)
    batch = make_step_batch(model, tok, args.batch, args.seed)
    n_tok = sum(len(r["response_ids"]) for r in batch["rows"])
    console.print(f"[bold]a. learner step[/bold]: tiny Llama ({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M "
                  f"params), batch {len(batch['rows'])} rows, prompt {batch['prompt_tokens']:.1f} / response "
                  f"{batch['response_tokens']:.1f} tokens on average ({n_tok} response tokens), "
                  f"{args.repeats} timed steps per loss (+{args.warmup} warm-up), interleaved")
    learners = {}
    for name in STEP_LOSSES:
        m = copy.deepcopy(model)
        m.train()
        learners[name] = (m, torch.optim.AdamW(m.parameters(), lr=0.0, weight_decay=0.0))
    stats: dict[str, list[dict]] = {n: [] for n in STEP_LOSSES}
    for _ in range(args.warmup):
        for name in STEP_LOSSES:
            learner_step(*learners[name], name, batch)
    mem = {}
    for name in STEP_LOSSES:  # after warm-up: AdamW state exists, the step allocates only its working set
        peak, _net = peak_step_bytes(lambda: learner_step(*learners[name], name, batch))
        mem[name] = peak
    times: dict[str, list[float]] = {n: [] for n in STEP_LOSSES}
    cpu: dict[str, list[float]] = {n: [] for n in STEP_LOSSES}
    order = list(STEP_LOSSES)
    for r in range(args.repeats):
        rot = order[r % len(order):] + order[: r % len(order)]
        for name in rot:
            c0, t0 = time.process_time(), _perf()
            st = learner_step(*learners[name], name, batch)
            times[name].append(_perf() - t0)
            cpu[name].append(time.process_time() - c0)
            stats[name].append(st)

    sec = Section("a. Learner step (tiny model, same batch)",
                  ["loss", "step ms (median)", "IQR ms", "min ms", "x ppo_clip", "CPU ms (median)", "x ppo_clip",
                   "peak step MB", "x ppo_clip", "mask/clip frac"])
    base_t = statistics.median(times["ppo_clip"])
    base_c = statistics.median(cpu["ppo_clip"])
    base_m = mem["ppo_clip"]
    for name in STEP_LOSSES:
        ts = sorted(times[name])
        med = statistics.median(ts)
        q = statistics.quantiles(ts, n=4) if len(ts) >= 2 else [med, med, med]
        key = "clip_frac" if name == "ppo_clip" else "mask_frac"
        frac = statistics.mean(s.get(key, float("nan")) for s in stats[name])
        sec.rows.append([name, f"{med * 1e3:.1f}", f"{q[0] * 1e3:.1f}-{q[2] * 1e3:.1f}", f"{ts[0] * 1e3:.1f}",
                         f"{med / base_t:.3f}x", f"{statistics.median(cpu[name]) * 1e3:.1f}",
                         f"{statistics.median(cpu[name]) / base_c:.3f}x", f"{mem[name] / 2**20:.1f}", f"{mem[name] / base_m:.3f}x", f"{frac:.3f} ({key.split('_')[0]})"])
    for name in STEP_LOSSES[1:]:
        rt = statistics.median(times[name]) / base_t
        rm = mem[name] / base_m
        rc = statistics.median(cpu[name]) / base_c
        sec.ratios.append((f"a. step time {name} / ppo_clip", rt, "<= 1.05x", rt <= 1.05))
        sec.ratios.append((f"a. step CPU time {name} / ppo_clip (info)", rc, "-", None))
        sec.ratios.append((f"a. peak step memory {name} / ppo_clip", rm, "<= 1.05x", rm <= 1.05))
    sec.notes.append(f"step = sequence_logprobs + behaviour tensors + loss + backward + grad clip + AdamW, fp32, "
                     f"{args.threads} threads; step ms = wall clock (the goal); CPU ms = this process's CPU time "
                     f"(all its threads), less sensitive to other jobs on the machine; peak step memory = torch profiler allocation timeline, live tensor "
                     f"bytes above the step's start")
    return sec


# -- b. batched vs sequential rollouts ---------------------------------------------------------------
class _Counting:
    """An engine that counts its generate calls and prompts."""

    def __init__(self, inner):
        self.inner, self.calls, self.requests = inner, 0, 0

    def generate(self, prompts, **kw):
        self.calls += 1
        self.requests += len(prompts)
        return self.inner.generate(prompts, **kw)


def _pairings(n: int):
    from arena.trainers.llm.rollout import LEARNER

    return [([LEARNER, "random"] if i % 2 == 0 else ["random", LEARNER], "random") for i in range(n)]


def _rollout(engine, tok, template, n: int, concurrency: int, seed: int) -> tuple[float, int, int]:
    """(wall seconds, generated tokens, generations) of one play_episodes call."""
    from arena.match import InvalidMovePolicy
    from arena.trainers.llm.rollout import play_episodes

    policy = InvalidMovePolicy(allowance=0, loss=-1.5, win=0.5)  # SPIRAL's training values
    t0 = _perf()
    eps = play_episodes(TTT, _pairings(n), engine, tok, template, seed=seed, concurrency=concurrency, policy=policy,
                        max_new_tokens=12, temperature=1.0, greedy=False, top_k_logprobs=8)
    wall = _perf() - t0
    turns = [t for ep in eps for ts in ep.turns.values() for t in ts]
    return wall, sum(len(t.generation.token_ids) for t in turns), len(turns)


def _rollout_threads(batching, tok, template, n: int, seed: int) -> tuple[float, int, int]:
    """The same matches on the driver the trainer used before the match engine batched them: one
    thread a match, each running `play_match` with its own LLM agent, whose prompts a shared
    `BatchingEngine` gathers into calls within its window. A reference, kept here only."""
    from concurrent.futures import ThreadPoolExecutor

    from arena.agents.base import derive_seed
    from arena.agents.llm import LLMAgent
    from arena.match import InvalidMovePolicy, play_match
    from arena.trainers.llm.rollout import LEARNER

    policy = InvalidMovePolicy(allowance=0, loss=-1.5, win=0.5)

    def one(i_seats):
        i, (seats, _) = i_seats
        agents = [LLMAgent(batching, tok, template, max_new_tokens=12, temperature=1.0, top_k_logprobs=8, record=True)
                  if s == LEARNER else s for s in seats]
        play_match(TTT, agents, seed=derive_seed(seed, i), policy=policy, record=False)
        return [t for a in agents if isinstance(a, LLMAgent) for t in a.turns]

    t0 = _perf()
    with ThreadPoolExecutor(max_workers=n) as pool:
        turns = [t for ts in pool.map(one, enumerate(_pairings(n))) for t in ts]
    wall = _perf() - t0
    return wall, sum(len(t.generation.token_ids) for t in turns), len(turns)


def bench_rollout(args, console: Console) -> Section:
    from arena.agents.prompts import make_template
    from arena.inference.engine import BatchingEngine, HFEngine

    torch = _torch()
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-llm-") as tmp:
        model, tok = _tiny(tmp, seed=args.seed)
    hf = HFEngine(model, tok)
    template = make_template("compact")
    n = args.matches
    console.print(f"[bold]b. rollouts[/bold]: {n} tic-tac-toe matches, tiny model vs random, max_new_tokens 12, "
                  f"T=1; the match engine (concurrency {n}: one generate call a round) vs sequential "
                  f"(concurrency 1) and vs threads on a BatchingEngine (the previous driver); median of "
                  f"{args.rollout_repeats}")
    labels = {
        "engine": f"match engine: play_episodes, concurrency {n} (as the trainer)",
        "threads": f"reference: {n} threads of play_match on a BatchingEngine (20 ms window, the previous driver)",
        "sequential": "sequential: play_episodes, concurrency 1",
    }
    res: dict[str, list[tuple[float, int, int]]] = {k: [] for k in labels}
    calls = {k: [0, 0] for k in labels}  # generate calls, prompts
    counting = _Counting(hf)
    with BatchingEngine(_Counting(hf), max_batch=n, max_wait_s=0.02) as batching:
        runs = {"engine": lambda seed: _rollout(counting, tok, template, n, n, seed),
                "threads": lambda seed: _rollout_threads(batching, tok, template, n, seed),
                "sequential": lambda seed: _rollout(counting, tok, template, n, 1, seed)}
        counters = {"engine": counting, "threads": batching.engine, "sequential": counting}
        for kind, run in runs.items():  # warm-up (threads, first generate)
            run(args.seed)
        kinds = list(labels)
        for r in range(args.rollout_repeats):
            seed = args.seed + 1 + r
            for kind in kinds[r % 3:] + kinds[: r % 3]:  # rotate the order: load drift hits every variant
                c = counters[kind]
                c0, q0 = c.calls, c.requests
                res[kind].append(runs[kind](seed))
                calls[kind][0] += c.calls - c0
                calls[kind][1] += c.requests - q0

    def summary(kind: str) -> tuple[float, float, int, int, float]:
        rates = [tok_ / wall for wall, tok_, _ in res[kind]]
        i = sorted(range(len(rates)), key=rates.__getitem__)[len(rates) // 2]  # the median run
        wall, toks, gens = res[kind][i]
        return rates[i], wall, toks, gens, max(rates)

    sec = Section(f"b. Rollout tokens/s ({n} tic-tac-toe matches, tiny model)",
                  ["rollout", "tokens/s (median)", "best", "wall s", "tokens", "generations", "prompts/call",
                   "x sequential"])
    summ = {k: summary(k) for k in labels}
    seq = summ["sequential"]
    for kind, s in summ.items():
        per_call = f"{calls[kind][1] / calls[kind][0]:.1f}" if calls[kind][0] else "1.0"
        sec.rows.append([labels[kind], f"{s[0]:,.0f}", f"{s[4]:,.0f}", f"{s[1]:.2f}", f"{s[2]:,}", f"{s[3]:,}",
                         per_call, f"{s[0] / seq[0]:.2f}x"])
    ratio = summ["engine"][0] / seq[0]
    sec.ratios.append((f"b. rollout tokens/s, match engine ({n} concurrent) / sequential", ratio, ">= 5x",
                       ratio >= 5.0))
    ratio_t = summ["engine"][0] / summ["threads"][0]
    sec.ratios.append(("b. match engine / threads on a BatchingEngine (the previous driver)", ratio_t, ">= 1.0x",
                       ratio_t >= 1.0))
    sec.notes.append("rollouts: wall s / tokens / generations are those of the median run; ratios are of medians")
    sec.notes.append("rollouts: every variant samples each move with its own seed (match seed, seat, move number), "
                     "so the three play the same moves; they differ only in how the moves share generate calls")
    return sec


# -- c. SmolLM2 -------------------------------------------------------------------------------------
def kuhn_prompts(template, n: int) -> list[str]:
    from arena.envs.observation import Observation
    from arena.envs.registry import make_core

    out = []
    for seed in range(n):
        core = make_core(KUHN)
        core.reset(seed=seed)
        p = core.current_player()
        obs = Observation(core, p, 0)
        out.append(template.render(KUHN, obs.text, p))
        core.close()
    return out


def bench_smollm(args, console: Console) -> Section:
    from arena.agents.prompts import make_template
    from arena.inference.engine import HFEngine
    from arena.inference.models import load_model, smollm2_folder

    t0 = _perf()
    model, tok = load_model(smollm2_folder(), dtype="fp32")
    load_s = _perf() - t0
    engine = HFEngine(model, tok)
    prompts = kuhn_prompts(make_template("spiral", tok), 8)
    plen = [len(engine.encode(p)) for p in prompts]
    mnt = args.smollm_tokens
    console.print(f"[bold]c. SmolLM2-135M[/bold]: HFEngine, {args.threads} threads, SPIRAL prompt on Kuhn Poker "
                  f"({min(plen)}-{max(plen)} prompt tokens), max_new_tokens {mnt}, T=1, best of "
                  f"{args.smollm_repeats} (model load {load_s:.1f} s)")
    engine.generate(prompts[:1], max_new_tokens=4, seed=0)  # warm-up
    sec = Section(f"c. SmolLM2-135M generation ({args.threads} CPU threads)",
                  ["batch", "tokens/s (best)", "wall s", "generated tokens", "s per sequence", "x batch 1",
                   "prefill s", "decode tokens/s"])
    rates = {}
    for bs in (1, 8):
        t0 = _perf()
        engine.generate(prompts[:bs], max_new_tokens=1, temperature=1.0, seed=args.seed)
        prefill = _perf() - t0  # the prompt forward plus one sampled token
        best = None
        for r in range(args.smollm_repeats):
            t0 = _perf()
            gens = engine.generate(prompts[:bs], max_new_tokens=mnt, temperature=1.0, seed=args.seed + r)
            wall = _perf() - t0
            toks = sum(g.num_tokens for g in gens)
            if best is None or toks / wall > best[0]:
                best = (toks / wall, wall, toks, prefill)
        rates[bs] = best
    for bs, (rate, wall, toks, prefill) in rates.items():
        decode = (toks - bs) / max(wall - prefill, 1e-9)
        sec.rows.append([str(bs), f"{rate:,.1f}", f"{wall:.2f}", f"{toks}", f"{wall / bs:.2f}",
                         f"{rate / rates[1][0]:.2f}x", f"{prefill:.2f}", f"{decode:,.1f}"])
    sec.notes.append("SmolLM2: prefill s = a max_new_tokens=1 call (prompt forward + one token); decode tokens/s = "
                     "(generated tokens - batch) / (wall - prefill)")
    sec.ratios.append(("c. SmolLM2 tokens/s, batch 8 / batch 1", rates[8][0] / rates[1][0], "-", None))
    return sec


# -- d. vLLM ------------------------------------------------------------------------------------------
def bench_vllm(args, console: Console) -> Section:
    sec = Section("d. vLLM vs transformers (SmolLM2-135M)", ["engine", "batch", "tokens/s", "wall s", "x transformers"])
    try:
        import vllm  # noqa: F401
    except ImportError:
        vllm = None
    torch = _torch()
    if not args.vllm or vllm is None or not torch.cuda.is_available():
        why = ("not requested" if not args.vllm else
               "vllm is not installed" if vllm is None else "no CUDA GPU")
        sec.notes.append(f"vLLM skipped ({why}): the vLLM comparison needs a CUDA GPU and the vllm package "
                         "(pip install vllm; pyproject.toml has no 'vllm' extra), then --vllm")
        console.print(f"[bold]d. vLLM[/bold]: {escape(sec.notes[-1])}")
        return sec
    from arena.agents.prompts import make_template
    from arena.inference.engine import HFEngine, VLLMEngine
    from arena.inference.models import load_model, smollm2_folder

    folder = smollm2_folder()
    model, tok = load_model(folder, dtype="bf16", device="cuda")
    engines = {"transformers (HFEngine, cuda, bf16)": HFEngine(model, tok, device="cuda"),
               "vLLM (VLLMEngine, bf16)": VLLMEngine(folder, dtype="bf16", gpu_memory_utilization=0.3)}
    base = make_template("spiral", tok)
    prompts = kuhn_prompts(base, 8)
    rates: dict[tuple[str, int], tuple[float, float]] = {}
    for bs in (8, 64):
        batch = [prompts[i % len(prompts)] for i in range(bs)]
        for name, eng in engines.items():
            eng.generate(batch[:2], max_new_tokens=4, seed=0)
            t0 = _perf()
            gens = eng.generate(batch, max_new_tokens=args.smollm_tokens, temperature=1.0, seed=args.seed)
            wall = _perf() - t0
            rates[(name, bs)] = (sum(g.num_tokens for g in gens) / wall, wall)
    hf_name = next(iter(engines))
    for (name, bs), (rate, wall) in rates.items():
        sec.rows.append([name, str(bs), f"{rate:,.0f}", f"{wall:.2f}", f"{rate / rates[(hf_name, bs)][0]:.2f}x"])
    for bs in (8, 64):
        v = rates[("vLLM (VLLMEngine, bf16)", bs)][0] / rates[(hf_name, bs)][0]
        sec.ratios.append((f"d. vLLM / transformers tokens/s, batch {bs}", v, "-", None))
    return sec


# -- report --------------------------------------------------------------------------------------------
def report(sections: list[Section], args, console: Console) -> None:
    for sec in sections:
        if not sec.rows:
            continue
        t = Table(title=sec.title)
        for i, h in enumerate(sec.head):
            t.add_column(h, justify="right" if i else "left")
        for r in sec.rows:
            t.add_row(*r)
        console.print(t)
    rhead = ["comparison", "ratio", "goal", "status"]
    rrows: list[tuple[list[str], bool | None]] = []
    for sec in sections:
        for label, ratio, goal, ok in sec.ratios:
            rrows.append(([label, f"{ratio:.3f}x" if ratio < 2 else f"{ratio:.2f}x", goal,
                           "-" if ok is None else ("PASS" if ok else "below goal")], ok))
    if rrows:
        t = Table(title="Ratios")
        for i, h in enumerate(rhead):
            t.add_column(h, justify="left" if i in (0, 3) else "right")
        for r, ok in rrows:
            t.add_row(*r, style=None if ok is None else ("green" if ok else "red"))
        console.print(t)
    notes = [n for sec in sections for n in sec.notes]
    for n in notes:
        console.print(f"[dim]{escape(n)}[/dim]")

    load = getattr(args, "load", None)
    load_txt = f", 1-min load average {load:.2f} at start" if load is not None else ""
    note = (f"_{versions()}; {platform.machine()}, {os.cpu_count()} CPUs, {args.threads} torch threads{load_txt}; "
            f"seed {args.seed}{'; --quick' if args.quick else ''}._")
    parts = [f"**{sec.title}**\n\n" + markdown_table(sec.head, sec.rows, set(range(1, len(sec.head))))
             for sec in sections if sec.rows]
    if rrows:
        parts.append(markdown_table(rhead, [r for r, _ in rrows], {1, 2}))
    if notes:
        parts.append("\n".join(f"- {n}" for n in notes))
    parts.append(note)
    console.print("\n[bold]Markdown (for the README):[/bold]\n")
    print("\n\n".join(parts))  # plain print: no rich markup or wrapping in the pasteable text


# -- main ------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(description=doc.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    p.add_argument("--only", choices=SECTIONS, action="append",
                   help="run only these sections (repeatable; default: all; vllm measures only with --vllm)")
    p.add_argument("--vllm", action="store_true", help="also compare vLLM with transformers (GPU + vllm extra)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=None, help="a. rows in the learner batch (default 256; quick 64)")
    p.add_argument("--repeats", type=int, default=None, help="a. timed steps per loss (default 21; quick 5)")
    p.add_argument("--warmup", type=int, default=2, help="a. warm-up steps per loss (default 2)")
    p.add_argument("--matches", type=int, default=32, help="b. concurrent matches (default 32)")
    p.add_argument("--rollout-repeats", type=int, default=None, help="b. runs per variant (default 7; quick 1)")
    p.add_argument("--smollm-tokens", type=int, default=None, help="c. max_new_tokens (default 64; quick 16)")
    p.add_argument("--smollm-repeats", type=int, default=None, help="c. runs per batch size (default 2; quick 1)")
    args = p.parse_args(argv)
    q = args.quick
    args.batch = args.batch or (64 if q else 256)
    args.repeats = args.repeats or (5 if q else 21)
    args.rollout_repeats = args.rollout_repeats or (1 if q else 7)
    args.smollm_tokens = args.smollm_tokens or (16 if q else 64)
    args.smollm_repeats = args.smollm_repeats or (1 if q else 2)
    only = list(dict.fromkeys(args.only or SECTIONS))  # vllm without --vllm: a note only
    try:
        args.load = os.getloadavg()[0]
    except OSError:
        args.load = None

    torch = _torch()
    torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    console = Console(width=max(Console().width, 170))
    console.print(f"[bold]bench_llm[/bold]: {versions()}; {args.threads} torch threads; sections: {', '.join(only)}")
    t_all = _perf()
    sections = []
    runners = {"step": bench_step, "rollout": bench_rollout, "smollm": bench_smollm, "vllm": bench_vllm}
    for name in only:
        t0 = _perf()
        sections.append(runners[name](args, console))
        console.print(f"[dim]  {name}: {_perf() - t0:.1f} s[/dim]")
    report(sections, args, console)
    console.print(f"[dim]total {_perf() - t_all:.1f} s[/dim]")


if __name__ == "__main__":
    main()
