"""Structured positions read from the games' text views, for the browser's renderers.

Every game shows its players a text view (what replays keep and what language models read);
the page draws a board from it where the text has a known shape. A parser returns plain
JSON data (a grid of marks, a chess position, cards and pot, a negotiation's resources) or
None where the text is not of that shape: the page then shows the text alone.

Kinds:

* ``grid``: ``rows`` x ``cols`` ``cells`` (row-major; "x", "o" or ""), ``style`` "ttt",
  "connect4" or "go" (how the page draws it); go also has ``col_labels`` and ``row_labels``.
* ``chess``: ``squares``, 8 rows from rank 8 down, each 8 piece letters (FEN's) or "".
* ``cards``: ``hand`` (the viewer's cards), ``public``, ``pot``, ``money``, ``history`` (the engine's
  action names), ``moves`` (each move in words: ``{"player", "round", "text"}``, e.g. ``{"player": 1,
  "round": 1, "text": "bet 1"}``: the page puts the player's name before it), ``round``.
* ``negotiation``: ``resources`` [[name, quantity, value]], ``total``, ``offer`` (the open one).
"""

from __future__ import annotations

import re
from typing import Any, Callable

from arena.envs.openspiel_core import LEDUC_BET_SIZES, betting_in_words

_BRACKET_FIELD = re.compile(r"\[([A-Za-z][A-Za-z0-9 ]*?): ?([^\]]*)\]")
_KUHN_RANKS = "JQK"


def _marks(text: str, width: int, height: int) -> list[str] | None:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) != height or any(len(ln) != width or set(ln) - set("xo.") for ln in lines):
        return None
    return ["" if ch == "." else ch for ln in lines for ch in ln]


def openspiel_tic_tac_toe(text: str) -> dict | None:
    cells = _marks(text, 3, 3)
    return None if cells is None else {"kind": "grid", "style": "ttt", "rows": 3, "cols": 3, "cells": cells}


def openspiel_connect_four(text: str) -> dict | None:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    cells = _marks(text, len(lines[0]), len(lines))
    if cells is None:
        return None
    return {"kind": "grid", "style": "connect4", "rows": len(lines), "cols": len(lines[0]), "cells": cells}


_TA_ROW = re.compile(r"^\s*(\S+)\s*\|\s*(\S+)\s*\|\s*(\S+)\s*$")


def textarena_tic_tac_toe(text: str) -> dict | None:
    """The last "Current Board:" of a TextArena tic-tac-toe view (free squares show their number)."""
    at = text.rfind("Current Board:")
    if at < 0:
        return None
    cells = []
    for line in text[at:].splitlines()[1:]:
        m = _TA_ROW.match(line)
        if m:
            cells += ["" if c.isdigit() else c.lower() for c in m.groups()]
        if len(cells) == 9:
            break
    if len(cells) != 9:
        return None
    return {"kind": "grid", "style": "ttt", "rows": 3, "cols": 3, "cells": cells}


_GO_ROW = re.compile(r"^\s*(\d+) ([+XO.]+)\s*$")


def openspiel_go(text: str) -> dict | None:
    rows, labels = [], []
    for line in text.splitlines():
        m = _GO_ROW.match(line)
        if m:
            labels.append(m.group(1))
            rows.append(m.group(2))
    if not rows or any(len(r) != len(rows) for r in rows):
        return None
    cols = [ln.strip() for ln in text.splitlines() if re.fullmatch(r"\s*[A-Z]+\s*", ln)]
    cells = [{"X": "x", "O": "o"}.get(ch, "") for r in rows for ch in r]
    return {"kind": "grid", "style": "go", "rows": len(rows), "cols": len(rows), "cells": cells,
            "row_labels": labels, "col_labels": list(cols[-1]) if cols else []}


def chess_fen(text: str) -> dict | None:
    """The placement field of a FEN (OpenSpiel's chess view)."""
    words = text.strip().split()
    if not words:
        return None
    ranks = words[0].split("/")
    if len(ranks) != 8:
        return None
    squares = []
    for rank in ranks:
        row: list[str] = []
        for ch in rank:
            if ch.isdigit():
                row += [""] * int(ch)
            elif ch in "prnbqkPRNBQK":
                row.append(ch)
            else:
                return None
        if len(row) != 8:
            return None
        squares.append(row)
    return {"kind": "chess", "squares": squares, "to_move": words[1] if len(words) > 1 else None}


def openspiel_kuhn(text: str) -> dict | None:
    """OpenSpiel's Kuhn view: the viewer's card (0-2: J, Q, K) then the moves (p: pass, b: bet).

    Two players take turns from player 0; a pass is a check, or a fold when a bet is to be
    answered; a bet is a bet of 1, or a call when one is. The pot is the two antes and every bet."""
    t = text.strip()
    if not t or t[0] not in "012" or set(t[1:]) - set("pb"):
        return None
    history = ["pass" if c == "p" else "bet" for c in t[1:]]
    moves, _, _ = betting_in_words("kuhn_poker", [[int(c == "b") for c in t[1:]]])
    return {"kind": "cards", "hand": [_KUHN_RANKS[int(t[0])]], "public": [], "pot": 2 + t.count("b"),
            "money": None, "history": history, "moves": moves, "round": None}


def _leduc_card(x: str) -> str | None:
    x = x.strip()
    return _KUHN_RANKS[int(x) // 2] if x.isdigit() and 0 <= int(x) < 6 else None


def openspiel_leduc(text: str) -> dict | None:
    """OpenSpiel's Leduc view. Its pot is paid out when the hand ends (0 in the final view): the pot
    shown is the chips the moves put in, which is the engine's pot until then."""
    fields = dict(_BRACKET_FIELD.findall(text))
    if "Private" not in fields or "Pot" not in fields:
        return None
    names = {"0": "fold", "1": "call", "2": "raise"}
    rounds = [fields.get(key, "").split() for key in ("Round1", "Round2")]
    history = [names.get(a, a) for r in rounds for a in r]
    hand = [c for c in [_leduc_card(fields["Private"])] if c]
    public = [c for c in [_leduc_card(fields.get("Public", ""))] if c]
    money = [int(x) for x in fields.get("Money", "").split() if x.lstrip("-").isdigit()]
    moves, stake, _ = betting_in_words("leduc_poker", [[int(a) if a.isdigit() else a for a in r] for r in rounds],
                                       max(2, len(money)))
    pot = sum(stake)
    return {"kind": "cards", "hand": hand, "public": public, "pot": pot, "money": money or None,
            "history": history, "moves": moves, "round": _int(fields.get("Round", fields.get("Round ", "")))}


_TA_CARD = re.compile(r"Your card is: '([JQKA])'")
_TA_ROUND = re.compile(r"Starting round (\d+) out of (\d+)")
_TA_SCORES = re.compile(r"Current scores: (.*)")
_TA_MOVE = re.compile(r"Player (\d+), submitted move: '\[(\w+)\]'")


def textarena_kuhn(text: str) -> dict | None:
    cards = _TA_CARD.findall(text)
    if not cards:
        return None
    rounds = list(_TA_ROUND.finditer(text))
    last = rounds[-1].start() if rounds else 0
    played = _TA_MOVE.findall(text[last:])
    history = [f"player {p}: {m}" for p, m in played]
    pot = 2 + sum(1 for h in history if h.endswith(("bet", "call")))
    past = {"check": "checked", "bet": "bet 1", "call": "called", "fold": "folded"}
    moves = [{"player": int(p), "round": 1, "text": past.get(m.lower(), m)} for p, m in played]
    scores = _TA_SCORES.findall(text)
    return {"kind": "cards", "hand": [cards[-1]], "public": [], "pot": pot, "money": None, "history": history,
            "moves": moves, "round": int(rounds[-1].group(1)) if rounds else None,
            "scores": scores[-1] if scores else None}


_RESOURCE = re.compile(r"^\s+([A-Z][a-z]+)\s+(\d+) x\s+(\d+) =\s+(\d+)\s*$", re.M)
_TOTAL = re.compile(r"Total value: (\d+)")
_OFFER = re.compile(r"^(Offer for you from .*)$", re.M)


def negotiation(text: str) -> dict | None:
    res = _RESOURCE.findall(text)
    if not res:
        return None
    total = _TOTAL.search(text)
    offer = _OFFER.search(text)
    return {"kind": "negotiation", "resources": [[n, int(q), int(v)] for n, q, v, _ in res],
            "total": int(total.group(1)) if total else None, "offer": offer.group(1) if offer else None}


def _int(x: str) -> int | None:
    x = x.strip()
    return int(x) if x.lstrip("-").isdigit() else None


def parser_for(game_id: str) -> Callable[[str], dict | None] | None:
    """The parser of `game_id`'s text view (None: the page shows the text only)."""
    g = game_id.lower()
    if g.startswith("openspiel/"):
        name = g.split("/", 1)[1].rsplit("-v", 1)[0]
        return {"tic_tac_toe": openspiel_tic_tac_toe, "connect_four": openspiel_connect_four, "go": openspiel_go,
                "chess": chess_fen, "kuhn_poker": openspiel_kuhn, "leduc_poker": openspiel_leduc}.get(name)
    if "tictactoe" in g:
        return textarena_tic_tac_toe
    if "kuhnpoker" in g:
        return textarena_kuhn
    if "negotiation" in g:
        return negotiation
    if "chess" in g:
        return chess_fen
    return None


def seat_mark(game_id: str, seat: int) -> str | None:
    """What a seat plays with on the board, as the page says it ("x" for tic-tac-toe's and Connect Four's
    first seat, "o" for the second; black and white in go, chess); None for a game without marks."""
    fn = parser_for(game_id)
    if fn in (openspiel_tic_tac_toe, openspiel_connect_four, textarena_tic_tac_toe):
        marks = ("x", "o")
    elif fn is openspiel_go:
        marks = ("black (x)", "white (o)")
    elif fn is chess_fen:
        marks = ("white", "black")
    else:
        return None
    return marks[seat] if 0 <= seat < 2 else None


def board_of(game_id: str, text: str | None) -> dict | None:
    """The structured position in `text` (None where there is none or the text is not of its shape)."""
    if not text:
        return None
    fn = parser_for(game_id)
    if fn is None:
        return None
    try:
        return fn(text)
    except (ValueError, IndexError):
        return None


def move_cell(game_id: str, board: dict | None, action: Any, label: str) -> int | None:
    """The board cell a click plays `action` on (None: a button only). Tic-tac-toe: the square;
    connect four: every cell of the column (the top one is returned; the page maps columns)."""
    if not board or board.get("kind") != "grid":
        return None
    style = board.get("style")
    if style == "ttt":
        if isinstance(action, int) and not isinstance(action, bool) and 0 <= action < 9:
            return action
        digits = str(label).strip().strip("[]").strip()
        return int(digits) if digits.isdigit() and int(digits) < 9 else None
    if style == "connect4" and isinstance(action, int) and 0 <= action < board["cols"]:
        return action
    return None


def move_label(game_id: str, board: dict | None, action: Any, label: str) -> str:
    """A legal move's button text. Poker's engine names a move the same whatever came before
    (Kuhn's "Pass" is a check or a fold; Leduc's "Call" may be a check, its "Raise" a first bet):
    here it is named as the betting stands. Other games keep the engine's label."""
    g = game_id.lower()
    if not board or board.get("kind") != "cards" or not g.startswith("openspiel/") or isinstance(action, bool) \
            or not isinstance(action, int):
        return label
    moves = board.get("moves") or []
    if "kuhn_poker" in g:
        to_answer = any(m["text"] == "bet 1" for m in moves)
        return {0: "fold" if to_answer else "check", 1: "call" if to_answer else "bet 1"}.get(action, label)
    if "leduc_poker" in g:
        rnd = max([m["round"] for m in moves] + [1])
        if board.get("public") and rnd == 1 and moves:
            rnd = 2  # the board card is out: the second round, before its first move
        here = [m for m in moves if m["round"] == rnd]
        bet = any(m["text"].startswith(("bet", "raised")) for m in here)
        size = LEDUC_BET_SIZES[min(rnd, len(LEDUC_BET_SIZES)) - 1]
        return {0: "fold", 1: "call" if bet else "check", 2: f"raise {size}" if bet else f"bet {size}"}.get(action, label)
    return label


def transcript_kind(game_id: str) -> bool:
    """Games whose replay reads best as a transcript of what each player wrote (negotiation)."""
    return "negotiation" in game_id.lower()
