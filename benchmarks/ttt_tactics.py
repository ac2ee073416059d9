"""What a tic-tac-toe language-model player knows: openings or tactics?

Three measurements behind the README's learning section:

* ``--checkpoint DIR`` (repeatable): the greedy move of a checkpoint (any
  ``llm:`` folder, compact template) on every position a player can face;
  reports how often it takes an available win, and, when it has none, how often
  it blocks the opponent's immediate win.
* ``--heuristics``: win rates against random (seat-averaged, simulated) of
  simple rules: random, centre, take wins, take wins + centre, take wins +
  block, take wins + block + centre.
* ``--probe N``: can the tiny model represent those tactics? A fresh tiny Llama
  is fine-tuned on N moves of the win/block/centre rule (against random) and
  its greedy win rate against random is measured (400 seat-swapped games).

Run: .venv/bin/python benchmarks/ttt_tactics.py --heuristics --checkpoint runs/spiral/latest [--probe 12000]
     [--probe-epochs 10] [--probe-sizes layers=8,hidden=96,intermediate=256]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import random  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

GAME = "openspiel/tic_tac_toe-v0"
LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def winner(b: str) -> str | None:
    for i, j, k in LINES:
        if b[i] != "." and b[i] == b[j] == b[k]:
            return b[i]
    return None


def winning_cells(b: str, mark: str) -> list[int]:
    return [i for i in range(9) if b[i] == "." and winner(b[:i] + mark + b[i + 1:]) == mark]


def rule_move(b: str, me: str, rules: str, rng: random.Random) -> int:
    """'w' take a win, 'b' block, 'c' take the centre, else a random empty cell."""
    op = "o" if me == "x" else "x"
    if "w" in rules and winning_cells(b, me):
        return winning_cells(b, me)[0]
    if "b" in rules and winning_cells(b, op):
        return winning_cells(b, op)[0]
    if "c" in rules and b[4] == ".":
        return 4
    return rng.choice([i for i in range(9) if b[i] == "."])


def play_vs_random(choose, seat: int, rng: random.Random) -> int:
    """+1 / 0 / -1 for the player in `seat`; `choose(board, mark)` returns a cell or None (invalid: a loss)."""
    b, turn = "." * 9, 0
    while winner(b) is None and "." in b:
        mark = "xo"[turn]
        m = choose(b, mark) if turn == seat else rng.choice([i for i in range(9) if b[i] == "."])
        if m is None or not 0 <= m < 9 or b[m] != ".":
            return -1
        b = b[:m] + mark + b[m + 1:]
        turn = 1 - turn
    w = winner(b)
    return 0 if w is None else (1 if w == "xo"[seat] else -1)


def heuristics(games: int = 20000, seed: int = 0) -> dict[str, float]:
    rng = random.Random(seed)
    out = {}
    for rules, name in [("", "random"), ("c", "centre"), ("w", "wins"), ("wc", "wins+centre"),
                        ("wb", "wins+block"), ("wbc", "wins+block+centre")]:
        res = [play_vs_random(lambda b, m: rule_move(b, m, rules, rng), g % 2, rng) for g in range(games)]
        out[name] = sum(r == 1 for r in res) / len(res)
    return out


def positions() -> list[tuple[str, int]]:
    """Every non-terminal position with the player to move (x moves first)."""
    seen: set[tuple[str, int]] = set()

    def rec(b: str, turn: int) -> None:
        if winner(b) or "." not in b or (b, turn) in seen:
            return
        seen.add((b, turn))
        for i in range(9):
            if b[i] == ".":
                rec(b[:i] + "xo"[turn] + b[i + 1:], 1 - turn)

    rec("." * 9, 0)
    return sorted(seen)


def board_text(b: str) -> str:
    return "\n".join([b[0:3], b[3:6], b[6:9]])


class GreedyPlayer:
    def __init__(self, model, tok):
        from arena.agents.prompts import make_template
        from arena.inference.engine import HFEngine

        self.engine, self.template = HFEngine(model, tok), make_template("compact")

    def moves(self, boards: list[tuple[str, int]], chunk: int = 512) -> list[int | None]:
        out: list[int | None] = []
        for i in range(0, len(boards), chunk):
            prompts = [self.template.render(GAME, board_text(b), t) for b, t in boards[i:i + chunk]]
            gens = self.engine.generate(prompts, max_new_tokens=4, greedy=True, stop=list(self.template.stop))
            for g in gens:
                ans = self.template.parse_generation(g.text, g.stop_reason)
                out.append(int(ans) if ans is not None and ans.isdigit() else None)
        return out


def tactics(player: GreedyPlayer) -> dict[str, float]:
    pos = positions()
    moves = player.moves(pos)
    wins = took = threats = blocked = invalid = 0
    for (b, t), m in zip(pos, moves):
        if m is None or not 0 <= m < 9 or b[m] != ".":
            invalid += 1
            continue
        mine, theirs = winning_cells(b, "xo"[t]), winning_cells(b, "xo"[1 - t])
        if mine:
            wins += 1
            took += m in mine
        elif theirs:
            threats += 1
            blocked += m in theirs
    return {"positions": len(pos), "invalid": invalid / len(pos), "takes_win": took / max(wins, 1),
            "blocks": blocked / max(threats, 1), "win_positions": wins, "threat_positions": threats}


def greedy_win_rate(player: GreedyPlayer, games: int = 400, seed: int = 1) -> float:
    rng = random.Random(seed)
    res = [play_vs_random(lambda b, m: player.moves([(b, "xo".index(m))])[0], g % 2, rng) for g in range(games)]
    return sum(r == 1 for r in res) / len(res)


def probe(n: int, epochs: int = 3, seed: int = 0, sizes: dict[str, int] | None = None) -> dict[str, float]:
    from arena.agents.prompts import make_template
    from arena.inference.models import load_model, make_tiny_model_folder
    from arena.trainers.llm.sft import supervised_finetune

    rng = random.Random(seed)
    template = make_template("compact")
    examples: list[tuple[str, str]] = []
    while len(examples) < n:  # the rule's moves in its games against random
        b, turn, seat = "." * 9, 0, rng.randrange(2)
        while winner(b) is None and "." in b:
            mark = "xo"[turn]
            if turn == seat:
                m = rule_move(b, mark, "wbc", rng)
                examples.append((template.render(GAME, board_text(b), turn), template.answer(str(m))))
            else:
                m = rng.choice([i for i in range(9) if b[i] == "."])
            b, turn = b[:m] + mark + b[m + 1:], 1 - turn
    with tempfile.TemporaryDirectory() as d:
        model, tok = load_model(make_tiny_model_folder(d, seed=seed, **(sizes or {})))
    player = GreedyPlayer(model, tok)
    pairs = [(player.engine.encode(p), tok(a, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
             for p, a in examples[:n]]
    t0 = time.perf_counter()
    losses = supervised_finetune(model, tok, pairs, epochs=epochs, lr=2e-3, batch_size=128, seed=seed)
    model.eval()
    return {"examples": len(pairs), "sft_s": time.perf_counter() - t0, "final_loss": losses[-1],
            "win_rate": greedy_win_rate(player), **{f"tactics/{k}": v for k, v in tactics(player).items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--checkpoint", action="append", default=[], help="an llm: model folder (repeatable)")
    p.add_argument("--heuristics", action="store_true", help="simulated win rates of simple rules vs random")
    p.add_argument("--probe", type=int, default=0, help="fine-tune a fresh tiny model on N rule moves")
    p.add_argument("--probe-epochs", type=int, default=3, help="passes over the probe's rule moves")
    p.add_argument("--probe-sizes", default="", help="tiny model sizes for the probe, e.g. layers=8,hidden=96,intermediate=256")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    if args.heuristics:
        for name, wr in heuristics().items():
            print(f"heuristic {name:>18}: win rate vs random {wr:.3f}")
    if args.checkpoint or args.probe:
        import torch

        torch.set_num_threads(args.threads)
    for ck in args.checkpoint:
        from arena.inference.models import load_model

        model, tok = load_model(ck)
        t = tactics(GreedyPlayer(model, tok))
        print(f"{ck}: takes an available win {t['takes_win']:.3f} ({t['win_positions']} positions), blocks "
              f"{t['blocks']:.3f} ({t['threat_positions']}), invalid {t['invalid']:.3f} of {t['positions']}")
    if args.probe:
        sizes = {k: int(v) for k, v in (kv.split("=") for kv in args.probe_sizes.split(",") if kv)}
        r = probe(args.probe, epochs=args.probe_epochs, sizes=sizes)
        print(f"probe: {r['examples']} rule moves, SFT {r['sft_s']:.0f} s (loss {r['final_loss']:.3f}): greedy win "
              f"rate vs random {r['win_rate']:.3f}; takes wins {r['tactics/takes_win']:.3f}, blocks "
              f"{r['tactics/blocks']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
