"""Micro-benchmark: random-vs-random matches per second, arena vs the bare engines.

Why: `play_match` is the one match loop of the arena (league, evaluation,
batch play, trainers); the neural-policy learner plays millions of moves through
it, so its overhead over the engine it drives is the learner's speed.  This
script plays random-vs-random games, one process, side by side:

1. ``openspiel/tic_tac_toe-v0`` through ``play_match`` with each record mode
   (``record="actions"``: the actions, seeds and results, what re-simulation
   needs; ``record="text"``: each player's observation text too; ``record=False``:
   no replay), the replay kept in memory, against a bare pyspiel loop
   (``new_initial_state`` / ``apply_action(rng.choice(legal_actions()))``).
   Goals: arena (actions) / bare >= 0.5, arena (text) / bare >= 0.3.
   Two reference rows say what limits that ratio: the bare loop re-seeding two
   ``random.Random`` a game, as the arena's ``random`` agents are re-seeded for
   every match (the Mersenne Twister's seeding, about 4 us each, is what makes a
   seed's match reproducible, and every draw of the match depends on all of it),
   and the arena loop with agents that draw from one generator seeded once, as
   the bare loop does (the loop's own cost). The first is a ceiling for the
   arena's ratio as long as its agents draw today's streams: the arena cannot
   do less than the bare loop and those two seedings.
2. The same arena loop against PettingZoo's ``tictactoe_v3.env()`` (default
   wrappers) driven by the standard ``agent_iter`` / ``last`` / ``step`` loop
   with the action mask.  Goal: arena / PettingZoo >= 3.  PettingZoo's
   ``raw_env()`` (no wrappers) is reported for reference.
3. ``arena/TicTacToe-v0`` (TextArena-backed) through ``play_match`` against a
   bare TextArena loop on ``ta.make("TicTacToe-v0-train")``.  Goal: >= 0.95
   with ``record="actions"`` (what leagues and ``arena play`` record); with
   ``record="text"`` for reference (the observation text is then built every
   move, as the bare loop's ``get_observation`` does).
4. Bytes per move of the replay files, both record modes, raw and gzipped (as
   ``write_replay`` writes them), over ``--bytes-games`` matches of each game.

Method: every variant gets a short warm-up, then runs for a fixed wall time
(``--seconds``, default 3 s) in each of ``--rounds`` rounds (default 3); the
variants are interleaved within a round and the best round is kept, which
filters out scheduler noise better than the mean.  Every round replays the same
seeds (game ``i`` uses seed ``--seed + i``), and every random choice comes from
a seeded generator, so the workload is identical from run to run.

TextArena note: TextArena 0.7.4's ``-train`` observation wrapper
(``GameMessagesAndCurrentBoardObservationWrapper``) keeps its message history
across ``reset()``, so a reused env gets slower with every game (each
observation re-joins the whole history) and its text shows earlier games.  Both
TextArena loops therefore clear that history before each game (the same cheap
call on both sides) and get a fresh env every round; ``--textarena-keep-history``
turns the clearing off to show the effect.

Run:  .venv/bin/python benchmarks/bench_match.py [--seconds S] [--rounds R] [--seed N]
      .venv/bin/python benchmarks/bench_match.py --profile [--profile-game textarena] [--profile-record text]
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions as _versions  # noqa: E402

import argparse
import cProfile
import gc
import gzip
import platform
import pstats
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from rich.console import Console
from rich.table import Table

from arena.agents import make_agent
from arena.envs import make_core
from arena.match import play_match

_perf = time.perf_counter

OPENSPIEL_ID = "openspiel/tic_tac_toe-v0"
TEXT_ID = "arena/TicTacToe-v0"
TA_ID = "TicTacToe-v0-train"

#: One game: play(i) plays the game with seed `i` and returns the number of moves.
PlayFn = Callable[[int], int]


# -- the variants -----------------------------------------------------------------------
class SeededOnce:
    """A random agent drawing from one generator that is never re-seeded, as the bare loop's is: with
    it the arena's figure is the loop's own cost (no per-match `random.Random.seed`). It plays through
    the same fast path as the ``random`` agent (`act_legal(legal)`, no Observation)."""

    spec = "random-seeded-once"

    def __init__(self, rng: random.Random):
        self._below = rng._randbelow  # what randrange(n) calls

    def act_legal(self, legal):
        return legal[self._below(len(legal))]

    def act(self, observation):
        legal = observation.legal_actions
        return legal[self._below(len(legal))]


def arena_openspiel(seed: int, record: bool | str, seeded_once: bool = False) -> Callable[[], PlayFn]:
    core = make_core(OPENSPIEL_ID)  # built once
    if seeded_once:
        rng = random.Random(seed)
        agents = [SeededOnce(rng), SeededOnce(rng)]
    else:
        agents = [make_agent("random", core, seed), make_agent("random", core, seed + 1)]

    def play(i: int) -> int:
        return play_match(core, agents, seed=i, match_id="bench", record=record).moves

    return lambda: play


def bare_pyspiel(seed: int, reseed: bool = False) -> Callable[[], PlayFn]:
    """`reseed`: also re-seed two generators a game, as the arena re-seeds its two random agents."""
    import pyspiel

    game = pyspiel.load_game("tic_tac_toe")
    rng = random.Random(seed)
    other = random.Random(seed + 1)

    def play(i: int) -> int:
        if reseed:
            rng.seed(i)
            other.seed(i + 1)
        state = game.new_initial_state()
        moves = 0
        while not state.is_terminal():
            state.apply_action(rng.choice(state.legal_actions()))
            moves += 1
        state.returns()
        return moves

    return lambda: play


def pettingzoo_ttt(seed: int, raw: bool) -> Callable[[], PlayFn]:
    from pettingzoo.classic import tictactoe_v3

    env = tictactoe_v3.raw_env() if raw else tictactoe_v3.env()
    rng = np.random.default_rng(seed)

    def play(i: int) -> int:
        env.reset(seed=i)
        moves = 0
        for _agent in env.agent_iter():
            obs, rew, term, trunc, info = env.last()
            if term or trunc:
                action = None
            else:
                legal = np.flatnonzero(obs["action_mask"])
                action = int(legal[rng.integers(len(legal))])
                moves += 1
            env.step(action)
        return moves

    return lambda: play


def _unwrap(env):
    while hasattr(env, "env"):
        env = env.env
    return env


def _history_clearer(env, keep_history: bool) -> Callable[[], None]:
    """Clears the TextArena observation wrappers' cross-game history (see the module notes)."""
    stores = []
    w = env
    while w is not None:
        store = w.__dict__.get("full_observations") if hasattr(w, "__dict__") else None
        if isinstance(store, dict):
            stores.append(store)
        w = w.__dict__.get("env") if hasattr(w, "__dict__") else None
    if keep_history or not stores:
        return lambda: None
    if len(stores) == 1:
        return stores[0].clear
    return lambda: [s.clear() for s in stores]


def arena_textarena(seed: int, record: bool | str, keep_history: bool) -> Callable[[], PlayFn]:
    # Arena agents are built once; the core (and its TextArena env) fresh each round.
    probe = make_core(TEXT_ID)
    agents = [make_agent("random", probe, seed), make_agent("random", probe, seed + 1)]
    probe.close()

    def setup() -> PlayFn:
        core = make_core(TEXT_ID)
        clear = _history_clearer(core.env, keep_history)

        def play(i: int) -> int:
            clear()
            return play_match(core, agents, seed=i, match_id="bench", record=record).moves

        return play

    return setup


def bare_textarena(seed: int, keep_history: bool) -> Callable[[], PlayFn]:
    import textarena as ta

    rng = random.Random(seed)

    def setup() -> PlayFn:
        env = ta.make(TA_ID)
        base = _unwrap(env)  # TicTacToeEnv; its .state is rebuilt by every reset
        clear = _history_clearer(env, keep_history)

        def play(i: int) -> int:
            clear()
            env.reset(num_players=2, seed=i)
            done = False
            moves = 0
            while not done:
                pid, obs = env.get_observation()
                board = base.state.game_state["board"]
                cells = [r * 3 + c for r in range(3) for c in range(3) if board[r][c] == ""]
                done, info = env.step(action=f"[{rng.choice(cells)}]")
                moves += 1
            env.close()
            return moves

        return play

    return setup


# -- measurement ------------------------------------------------------------------------
@dataclass
class Variant:
    key: str
    label: str
    factory: Callable[[], Callable[[], PlayFn]]
    setup: Callable[[], PlayFn] | None = None
    rounds: list[tuple[int, int, float]] = field(default_factory=list)  # (games, moves, seconds)

    def best(self) -> tuple[float, float]:
        """(games/s, moves/s) of the round with the most games per second."""
        g, m, s = max(self.rounds, key=lambda r: r[0] / r[2])
        return g / s, m / s

    def spread(self) -> float:
        rates = [g / s for g, _, s in self.rounds]
        return (max(rates) - min(rates)) / max(rates) if rates else 0.0


def run_for(play: PlayFn, seconds: float, first_seed: int) -> tuple[int, int, float]:
    """Play games with seeds first_seed, first_seed + 1, ... for `seconds` of wall time."""
    games = moves = 0
    i = first_seed
    t0 = _perf()
    deadline = t0 + seconds
    while True:
        moves += play(i)
        games += 1
        i += 1
        t = _perf()
        if t >= deadline:
            return games, moves, t - t0


def sanity_check(variants: dict[str, Variant], seed: int) -> None:
    """The arena loops must play real games: no forfeits, no invalid moves, in every record mode."""
    for key, gid in (("os_actions", OPENSPIEL_ID), ("ta_actions", TEXT_ID)):
        if key not in variants:
            continue
        core = make_core(gid)
        clear = _history_clearer(getattr(core, "env", None), False)
        agents = [make_agent("random", core, seed), make_agent("random", core, seed + 1)]
        for mode in ("actions", "text", False):
            for i in range(seed, seed + 20):
                clear()
                r = play_match(core, agents, seed=i, match_id="bench", record=mode)
                if r.outcome != "normal" or any(r.invalid) or r.moves < 5:
                    raise SystemExit(f"sanity check failed on {gid} seed {i} record={mode}: {r.outcome} {r.reason} "
                                     f"invalid={r.invalid}")
        core.close()


@dataclass
class ReplaySize:
    game: str
    mode: str
    moves: int = 0
    raw: int = 0
    gz: int = 0
    matches: int = 0


def replay_sizes(games: list[str], n: int, seed: int) -> list[ReplaySize]:
    """Bytes of the replay files (as `write_replay` writes them: JSONL, gzip level 6) per move."""
    out = []
    for gid in games:
        core = make_core(gid)
        clear = _history_clearer(getattr(core, "env", None), False)
        agents = [make_agent("random", core, seed), make_agent("random", core, seed + 1)]
        for mode in ("actions", "text"):
            size = ReplaySize(gid, mode)
            for i in range(seed, seed + n):
                clear()
                r = play_match(core, agents, seed=i, match_id=f"{gid.replace('/', '_')}-s{i:08d}", record=mode)
                data = r.replay.to_text().encode("utf-8")
                size.raw += len(data)
                size.gz += len(gzip.compress(data, compresslevel=6, mtime=0))
                size.moves += r.moves
                size.matches += 1
            out.append(size)
        core.close()
    return out


def measure(variants: list[Variant], seconds: float, rounds: int, warmup: float, seed: int,
            console: Console) -> None:
    for v in variants:
        v.setup = v.factory()
        run_for(v.setup(), warmup, seed)
    for r in range(rounds):
        order = variants if r % 2 == 0 else list(reversed(variants))  # interleaved, alternating order
        for v in order:
            play = v.setup()
            gc.collect()
            v.rounds.append(run_for(play, seconds, seed))
        console.print(f"[dim]round {r + 1}/{rounds} done[/dim]")


# -- output ------------------------------------------------------------------------------
def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def results_rows(variants: dict[str, Variant]) -> list[list[str]]:
    rows = []
    for v in variants.values():
        gps, mps = v.best()
        rows.append([v.label, fmt_rate(gps), fmt_rate(mps), f"{1e6 / mps:.1f}", f"{v.spread() * 100:.1f}%"])
    return rows


RATIOS = [
    # (label, numerator, denominator, goal or None)
    ("1. arena (record=actions) / bare pyspiel", "os_actions", "pyspiel", 0.5),
    ("1. arena (record=text) / bare pyspiel", "os_text", "pyspiel", 0.3),
    ("   arena (record=False) / bare pyspiel", "os_off", "pyspiel", None),
    ("   ref.: bare pyspiel re-seeding 2 generators a game / bare pyspiel", "pyspiel_reseed", "pyspiel", None),
    ("   ref.: arena loop alone (agents seeded once, record=actions) / bare pyspiel", "os_loop", "pyspiel", None),
    ("2. arena (record=actions) / PettingZoo env()", "os_actions", "pz_env", 3.0),
    ("   arena (record=actions) / PettingZoo raw_env() (reference)", "os_actions", "pz_raw", None),
    ("3. arena/TicTacToe-v0 (record=actions) / bare TextArena", "ta_actions", "ta", 0.95),
    ("   arena/TicTacToe-v0 (record=text) / bare TextArena", "ta_text", "ta", None),
]


def ratio_rows(variants: dict[str, Variant]) -> list[tuple[list[str], bool | None]]:
    rows = []
    for label, num, den, goal in RATIOS:
        if num not in variants or den not in variants:
            continue
        ratio = variants[num].best()[0] / variants[den].best()[0]
        ok = None if goal is None else ratio >= goal
        mark = "-" if ok is None else ("PASS" if ok else "below goal")
        rows.append(([label, f"{ratio:.2f}x", "-" if goal is None else f">= {goal:g}x", mark], ok))
    return rows




def versions() -> str:
    return _versions(("arena", "open_spiel", "pettingzoo", "textarena"))


def size_rows(sizes: list[ReplaySize]) -> list[list[str]]:
    return [[f"{z.game}, record={z.mode}", f"{z.raw / z.moves:,.0f}", f"{z.gz / z.moves:,.0f}",
             f"{z.raw / z.matches:,.0f}", f"{z.gz / z.matches:,.0f}"] for z in sizes]


def report(variants: dict[str, Variant], sizes: list[ReplaySize], args, console: Console) -> None:
    head = ["variant (random vs random, tic-tac-toe)", "games/s", "moves/s", "us/move", "spread"]
    res_rows = results_rows(variants)
    t = Table(title=f"Matches per second (best of {args.rounds} x {args.seconds:g} s)")
    for i, h in enumerate(head):
        t.add_column(h, justify="right" if i else "left")
    for r in res_rows:
        t.add_row(*r)
    console.print(t)

    rhead = ["comparison (games/s ratio)", "ratio", "goal", "status"]
    rrows = ratio_rows(variants)
    t = Table(title="Ratios")
    for i, h in enumerate(rhead):
        t.add_column(h, justify="left" if i in (0, 3) else "right")
    for r, ok in rrows:
        style = None if ok is None else ("green" if ok else "red")
        t.add_row(*r, style=style)
    console.print(t)

    shead = ["replay file (random vs random)", "bytes/move", "gzipped bytes/move", "bytes/match", "gzipped bytes/match"]
    srows = size_rows(sizes)
    if srows:
        t = Table(title=f"Replay bytes (header included; {args.bytes_games} matches each)")
        for i, h in enumerate(shead):
            t.add_column(h, justify="right" if i else "left")
        for r in srows:
            t.add_row(*r)
        console.print(t)

    note = f"_{versions()}; {platform.machine()}; seed {args.seed}; best of {args.rounds} rounds x {args.seconds:g} s._"
    parts = [markdown_table(head, res_rows, {1, 2, 3, 4}), markdown_table(rhead, [r for r, _ in rrows], {1, 2})]
    if srows:
        parts.append(markdown_table(shead, srows, {1, 2, 3, 4}))
    md = "\n\n".join(parts + [note])
    console.print("\n[bold]Markdown (for the README):[/bold]\n")
    print(md)  # plain print: no rich markup or wrapping in the pasteable text


# -- profile -----------------------------------------------------------------------------
def profile(args, console: Console) -> None:
    record = False if args.no_record or args.profile_record == "off" else args.profile_record
    if args.profile_game == "textarena":
        setup = arena_textarena(args.seed, record=record, keep_history=args.textarena_keep_history)()
        gid = TEXT_ID
    else:
        setup = arena_openspiel(args.seed, record=record)()
        gid = OPENSPIEL_ID
    play = setup
    run_for(play, args.warmup, args.seed)
    prof = cProfile.Profile()
    prof.enable()
    games, moves, secs = run_for(play, args.seconds, args.seed)
    prof.disable()
    console.print(f"[bold]cProfile[/bold] of play_match on {gid} (record={record!r}): "
                  f"{games} games, {moves} moves in {secs:.2f} s under the profiler "
                  f"({games / secs:,.0f} games/s profiled)")
    stats = pstats.Stats(prof, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(args.profile_top)


# -- main --------------------------------------------------------------------------------
def main() -> None:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(description=doc.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=3.0, help="wall time per variant per round (default 3)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best is kept (default 3)")
    p.add_argument("--warmup", type=float, default=0.3, help="warm-up seconds per variant (default 0.3)")
    p.add_argument("--seed", type=int, default=0, help="first game seed and agent/generator seed (default 0)")
    p.add_argument("--only", choices=["openspiel", "pettingzoo", "textarena"], action="append",
                   help="run only these comparisons (repeatable); the arena openspiel loop comes with 1 and 2")
    p.add_argument("--textarena-keep-history", action="store_true",
                   help="do not clear TextArena's cross-game observation history (shows the slowdown)")
    p.add_argument("--profile", action="store_true",
                   help="instead of the benchmark, cProfile the arena loop and print the top functions by tottime")
    p.add_argument("--profile-game", choices=["openspiel", "textarena"], default="openspiel")
    p.add_argument("--profile-top", type=int, default=20)
    p.add_argument("--profile-record", choices=["actions", "text", "off"], default="actions",
                   help="with --profile: play_match's record mode (default actions)")
    p.add_argument("--no-record", action="store_true", help="with --profile: the same as --profile-record off")
    p.add_argument("--bytes-games", type=int, default=200,
                   help="matches per game and record mode for the replay bytes table (default 200; 0: no table)")
    args = p.parse_args()

    console = Console(width=max(Console().width, 110))
    random.seed(args.seed)
    np.random.seed(args.seed)
    if args.profile:
        profile(args, console)
        return

    only = set(args.only or ["openspiel", "pettingzoo", "textarena"])
    s, keep = args.seed, args.textarena_keep_history
    specs: list[tuple[str, str, Callable[[], Callable[[], PlayFn]]]] = []
    if only & {"openspiel", "pettingzoo"}:
        specs.append(("os_actions", "arena openspiel/tic_tac_toe-v0, record=actions",
                      lambda: arena_openspiel(s, "actions")))
    if "openspiel" in only:
        specs.append(("os_text", "arena openspiel/tic_tac_toe-v0, record=text", lambda: arena_openspiel(s, "text")))
        specs.append(("os_off", "arena openspiel/tic_tac_toe-v0, record=False", lambda: arena_openspiel(s, False)))
        specs.append(("os_loop", "arena loop alone: agents seeded once, record=actions (ref.)",
                      lambda: arena_openspiel(s, "actions", seeded_once=True)))
        specs.append(("pyspiel", "bare pyspiel loop", lambda: bare_pyspiel(s)))
        specs.append(("pyspiel_reseed", "bare pyspiel loop, 2 generators re-seeded a game (ref.)",
                      lambda: bare_pyspiel(s, reseed=True)))
    if "pettingzoo" in only:
        specs.append(("pz_env", "PettingZoo tictactoe_v3.env()", lambda: pettingzoo_ttt(s, False)))
        specs.append(("pz_raw", "PettingZoo tictactoe_v3.raw_env() (ref.)", lambda: pettingzoo_ttt(s, True)))
    if "textarena" in only:
        specs.append(("ta_actions", "arena arena/TicTacToe-v0, record=actions",
                      lambda: arena_textarena(s, "actions", keep)))
        specs.append(("ta_text", "arena arena/TicTacToe-v0, record=text", lambda: arena_textarena(s, "text", keep)))
        specs.append(("ta", "bare TextArena TicTacToe-v0-train loop", lambda: bare_textarena(s, keep)))
    variants = {k: Variant(k, label, factory) for k, label, factory in specs}

    console.print(f"[bold]bench_match[/bold]: {versions()}")
    console.print(f"{len(variants)} variants x {args.rounds} rounds x {args.seconds:g} s "
                  f"(+{args.warmup:g} s warm-up each), seed {args.seed}"
                  + (", TextArena history KEPT" if keep else ""))
    sanity_check(variants, args.seed)
    games = [g for g, on in ((OPENSPIEL_ID, bool(only & {"openspiel", "pettingzoo"})), (TEXT_ID, "textarena" in only))
             if on]
    sizes = replay_sizes(games, args.bytes_games, args.seed) if args.bytes_games > 0 else []
    measure(list(variants.values()), args.seconds, args.rounds, args.warmup, args.seed, console)
    report(variants, sizes, args, console)


if __name__ == "__main__":
    main()
