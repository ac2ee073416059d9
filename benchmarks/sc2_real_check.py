"""A prepared check for a machine with StarCraft II: one match against each of the game's AI levels.

For each difficulty (``--difficulties``, default all ten) it plays one match of ``sc2/<--map>-v0``
(default Simple64), ``sc2:attack`` against ``sc2bot:difficulty=X``, through the arena's job runner
(what a league worker does), with its replay written to ``--out`` and the game's own ``.SC2Replay``
beside it, and reports per level: the result, steps, steps/s (from the agent's first move to its
last), the launch seconds (from the start to the first move: the game's start-up and first
observation), the saved ``.SC2Replay``'s path and size. Then the game's version, base build and data
version from the replays' headers. Prints a markdown table and one JSON line
(``{"check": "sc2_real", ...}``); exits 1 if a match did not end normally or kept no .SC2Replay.

Needs the game under ``$SC2PATH`` (docs/sc2.md) and the sc2 extra. Without the game it runs against
the fake of ``arena/envs/sc2/stand_in.py`` (``SC2PATH`` set to a fake root, or ``--fake``) to show its
output; the fake's AI plays every level the same.

Run:  SC2PATH=~/StarCraftII .venv/bin/python benchmarks/sc2_real_check.py [--difficulties very_easy,hard]
          [--map Simple64] [--max-steps 2000] [--out runs/sc2_check] [--seed 0]
"""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from _common import markdown_table, versions  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class Timed:
    """An agent that notes when it was asked for each move (the launch is the time to its first)."""

    def __init__(self, inner):
        self.inner, self.times = inner, []

    def act(self, observation):
        self.times.append(time.perf_counter())
        return self.inner.act(observation)


def play_one(game: str, difficulty: str, max_steps: int, seed: int, out: Path) -> dict:
    from arena.agents.specs import make_agent
    from arena.envs.registry import make_core
    from arena.match.loop import InvalidMovePolicy
    from arena.match.runner import MatchJob, run_match_job
    from arena.replays.format import read_replay

    kwargs = {"max_steps": max_steps}
    bot = f"sc2bot:difficulty={difficulty}"
    job = MatchJob(match_id=f"{difficulty}", game=game, specs=("sc2:attack", bot), seed=seed, game_kwargs=kwargs,
                   policy=InvalidMovePolicy(allowance=max_steps), record="actions", replay_dir=str(out))
    core = make_core(game, **kwargs)
    me = Timed(make_agent("sc2:attack", core, seed))
    t0 = time.perf_counter()
    try:
        res = run_match_job(job, agents=[me, None], core=core)
    except Exception as e:  # a game that did not start or died: one row that says so
        return {"difficulty": difficulty, "result": f"error: {type(e).__name__}: {str(e).splitlines()[0][:160]}",
                "steps": 0, "steps_per_s": 0.0, "launch_s": round(time.perf_counter() - t0, 2),
                "sc2replay": None, "sc2replay_bytes": 0, "ok": False}
    finally:
        core.close()
    times = me.times
    launch = (times[0] - t0) if times else time.perf_counter() - t0
    playing = times[-1] - times[0] if len(times) > 1 else 0.0
    sc2 = out / f"{job.match_id}.SC2Replay"
    header = read_replay(res.replay_path).header if res.replay_path else {}
    result = {1: "win", -1: "loss", 0: "draw"}.get(int(res.returns[0]), str(res.returns[0])) if res.returns else "?"
    return {"difficulty": difficulty, "result": f"{result} ({res.reason})" if res.outcome == "normal" else
            f"{res.outcome}: {res.reason}", "steps": res.moves,
            "steps_per_s": round((len(times) - 1) / playing, 1) if playing > 0 else 0.0, "launch_s": round(launch, 2),
            "sc2replay": str(sc2) if sc2.is_file() else None, "sc2replay_bytes": sc2.stat().st_size if sc2.is_file() else 0,
            "engine": header.get("engine", {}), "ok": res.outcome == "normal" and sc2.is_file()}


def main() -> int:
    from arena.envs.sc2.game import DIFFICULTIES

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--difficulties", default=",".join(DIFFICULTIES),
                    help=f"comma-separated, of: {', '.join(DIFFICULTIES)}")
    ap.add_argument("--map", default="Simple64")
    ap.add_argument("--max-steps", type=int, default=2000, help="steps of 8 game loops before a draw")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="where replays go (default: a temporary folder, removed)")
    ap.add_argument("--fake", action="store_true", help="play the fake game of arena/envs/sc2/stand_in.py")
    args = ap.parse_args()
    levels = [d.strip() for d in args.difficulties.split(",") if d.strip()]
    bad = [d for d in levels if d not in DIFFICULTIES]
    if bad:
        ap.error(f"--difficulties: {', '.join(bad)} not among {', '.join(DIFFICULTIES)}")
    game = f"sc2/{args.map}-v0"
    with tempfile.TemporaryDirectory(prefix="sc2-check-") as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "replays"
        out.mkdir(parents=True, exist_ok=True)
        if args.fake:
            from arena.envs.sc2 import stand_in as fake_sc2

            _os.environ["SC2PATH"] = str(fake_sc2.make_sc2path(Path(tmp) / "StarCraftII"))
        print(versions(("pysc2-evolved", "protobuf")) + f"; SC2PATH={_os.environ.get('SC2PATH', '~/StarCraftII')}")
        rows = [play_one(game, d, args.max_steps, args.seed, out) for d in levels]
        print(markdown_table(
            ["difficulty", "result", "steps", "steps/s", "launch (s)", ".SC2Replay", "bytes"],
            [[r["difficulty"], r["result"], str(r["steps"]), f"{r['steps_per_s']:,.1f}", f"{r['launch_s']:.2f}",
              r["sc2replay"] or "-", f"{r['sc2replay_bytes']:,}"] for r in rows], {2, 3, 4, 6}))
        engines = {json.dumps(r.get("engine", {}), sort_keys=True) for r in rows if r.get("engine")}
        engine = json.loads(sorted(engines)[0]) if engines else {}
        print(f"game: version {engine.get('sc2_game_version', '?')}, base build {engine.get('sc2_base_build', '?')}, "
              f"data version {engine.get('sc2_data_version', '?')} (from the replays' headers; pysc2-evolved "
              f"{engine.get('pysc2-evolved', '?')})" + ("; differing headers: " + "; ".join(sorted(engines))
                                                          if len(engines) > 1 else ""))
        print(json.dumps({"check": "sc2_real", "map": args.map, "max_steps": args.max_steps, "engine": engine,
                          "levels": [{k: v for k, v in r.items() if k != "engine"} for r in rows]}))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    _sys.exit(main())
