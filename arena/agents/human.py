"""A person at the terminal, as just another agent.

Shows what the player sees and the legal moves, numbered, reads a move (its number or
its text), re-asks with the reason on bad input, and shows the final position and the
result after each game. ``resign`` forfeits the game; ``quit``, Ctrl-C and the end of input
forfeit it and end a run of several matches (`stop_requested`): the match is recorded as a
forfeit once, nothing half-written.

What is shown is the game's view for people (`Observation.human_view`): cards by name and
betting in words where the engine's view is terse (OpenSpiel's Kuhn ``"1pb"``), and the rules,
which TextArena repeats in every view, once at the start of each game. The final screen is the
position after the last move, with the result.

Move numbers: a discrete game's action ids. A text game's listed moves are numbered
0, 1, ... in the order listed (``legal moves: 0=[check], 1=[bet]``), except where the moves
are numbers themselves (TextArena TicTacToe's ``[4]``): there a number is that move, as it
reads. The text of a move is accepted too, case-insensitive, with or without its brackets.
"""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

from arena.agents.base import BaseAgent, Forfeit
from arena.envs.observation import Observation

_NUMBER = re.compile(r"-?[0-9]+")


def text_move_numbers(legal: list[str]) -> dict[int, str] | None:
    """Number -> text move: the list index, or the move's own number where every move is one.

    None where some moves are numbers and some are not (a number would read two ways): then
    only the text is accepted.
    """
    bare = [str(m).strip().strip("[]").strip() for m in legal]
    is_number = [_NUMBER.fullmatch(b) is not None for b in bare]
    if all(is_number) and len({int(b) for b in bare}) == len(bare):
        return {int(b): m for b, m in zip(bare, legal)}
    if not any(is_number):
        return dict(enumerate(legal))
    return None


class HumanAgent(BaseAgent):
    spec = "human"

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None, max_tries: int = 20):
        #: Set when the person quits (``quit``, Ctrl-C, end of input): batch play stops after this match.
        self.stop_requested = False
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.max_tries = max_tries
        self._core = None  # the game being played (its final position is shown at the end)
        self._rules_shown = False

    def reset(self, seed: int | None = None) -> None:
        self._core = None
        self._rules_shown = False

    def _print(self, *lines: str) -> None:
        for line in lines:
            self.stdout.write(line + "\n")
        self.stdout.flush()

    def _show(self, obs: Observation) -> list | None:
        self._core = obs.core
        if not self._rules_shown:
            self._rules_shown = True
            rules = obs.rules
            if rules:
                self._print("", f"=== {obs.game_id}: the rules ===", rules)
        self._print("", f"=== {obs.game_id} — you are {obs.player_name} (move {obs.step}) ===", obs.human_view)
        if obs.feedback:
            self._print(f"! previous move refused: {obs.feedback}")
        legal = obs.legal_actions
        if legal:
            numbers = text_move_numbers(legal) if obs.action_kind == "text" else None
            if obs.action_kind == "discrete":
                moves = ", ".join(f"{a}={obs.action_to_text(a)}" for a in legal)
            elif numbers is not None:
                moves = ", ".join(f"{n}={m}" for n, m in numbers.items())
            else:
                moves = ", ".join(str(a) for a in legal)
            self._print(f"legal moves: {moves}")
        return legal

    def parse(self, obs: Observation, line: str, legal: list | None) -> tuple[Any, str | None]:
        """Turn what was typed into a move, or say why it is not one."""
        text = line.strip()
        if not text:
            return None, "empty input"
        if obs.action_kind == "discrete":
            if _NUMBER.fullmatch(text):
                a = int(text)
                if legal is not None and a not in legal:
                    return None, f"{a} is not a legal move"
                return a, None
            for a in legal or []:
                if obs.action_to_text(a).lower() == text.lower():
                    return a, None
            try:
                return obs.parse_action(text), None
            except (ValueError, KeyError) as e:
                return None, str(e)
        if obs.action_kind == "text":
            if legal:
                numbers = text_move_numbers(legal)
                if numbers is not None and _NUMBER.fullmatch(text):
                    if int(text) in numbers:
                        return numbers[int(text)], None
                    return None, f"{text} is not one of the move numbers ({', '.join(map(str, numbers))})"
                for cand in (text, f"[{text}]"):
                    for a in legal:
                        if a.lower() == cand.lower():
                            return a, None
                return None, f"{text!r} is not one of the legal moves"
            return text, None
        try:
            return [float(x) for x in text.replace(",", " ").split()], None
        except ValueError:
            return None, "type numbers separated by spaces"

    def match_over(self, view: str, result: Any, seat: int) -> None:
        """The final position (the position after the last move, `view`, as people read it) and the
        result line, after every game."""
        core, self._core = self._core, None
        if core is not None:
            try:
                view = core.human_view(seat)
            except Exception:  # the view the match loop gave
                pass
        if result.draw:
            how = "draw"
        elif result.winner is None:
            how = "no winner"
        else:
            how = "you win" if result.winner == seat else f"{result.agents[result.winner]} wins"
        returns = ", ".join(f"{float(x):.4g}" for x in result.returns)
        self._print("", f"=== {result.game_id}: game over ===", view,
                    f"result: {how}; returns {returns}" + (f" ({result.reason})" if result.reason else ""))

    def act(self, observation: Observation) -> Any:
        legal = self._show(observation)
        for _ in range(self.max_tries):
            self.stdout.write("your move> ")
            self.stdout.flush()
            try:
                line = self.stdin.readline()
            except KeyboardInterrupt:
                self.stop_requested = True
                raise Forfeit("the human player pressed Ctrl-C") from None
            if line == "":
                self.stop_requested = True
                raise Forfeit("the human player closed the input (EOF)")
            word = line.strip().lower()
            if word in ("quit", "exit"):
                self.stop_requested = True  # ends the run of matches after this one
                raise Forfeit("the human player quit")
            if word == "resign":
                raise Forfeit("the human player resigned")
            move, why = self.parse(observation, line, legal)
            if why is None:
                return move
            self._print(f"! {why}; try again (or 'quit')")
        raise Forfeit(f"no valid move after {self.max_tries} tries")
