"""`arena replay verify` at the terminal: each replay re-simulated (`arena.match.verify`), a line for
each one that fails or could only be checked (for every one with ``each``; a verified one also where
it has a warning), and the count of each outcome.

Every file is checked, whatever the others do: a file that cannot be read, a header that names more
than its game's settings, a game that is not loaded or one that breaks while it re-simulates is a
line and a count, never the end of the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from rich.text import Text

from arena.errors import ReplayError, ReplayRefused

#: Checked as far as it can be, not re-simulated: a game whose rules live in its own process (StarCraft II).
CHECKED = "checked (not re-simulated)"
#: The outcomes, in the order the count names them.
OUTCOMES = ("verified", CHECKED, "mismatched", "unreadable", "refused", "not checked")


@dataclass
class Verification:
    """The replays at `paths`, verified one by one as `lines()` is read; `counts` keeps the tally."""

    paths: Sequence[Path]
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    #: A line for every file, the verified ones too; else for those that fail or are only checked.
    each: bool = False

    def lines(self) -> Iterator[Text]:
        """Verify each replay in turn: its line (and, for a mismatch of a lone replay, every difference;
        then any warnings), yielded as soon as it is checked."""
        for p in self.paths:
            yield from self._check(p)

    def _check(self, p: Path) -> Iterator[Text]:
        from arena.match.verify import verify_replay
        from arena.replays import read_replay

        try:
            r = read_replay(p)
        except ReplayRefused as e:  # over the size cap
            yield self._count("refused", Text.assemble(("REFUSED ", "red"), str(e)))
            return
        except ReplayError as e:
            yield self._count("unreadable", Text.assemble(("UNREADABLE ", "red"), str(e)))
            return
        try:
            rep = verify_replay(r)
        except ReplayRefused as e:  # a header naming what is not a game setting: nothing was made
            yield self._count("refused", Text.assemble(("REFUSED ", "red"), f"{p}: {e}"))
            return
        except ReplayError as e:
            yield self._count("not checked", Text.assemble(("NOT CHECKED ", "red"), f"{p}: {e}"))
            return
        except Exception as e:  # a broken game must not hide the other files
            yield self._count("not checked", Text.assemble(
                ("NOT CHECKED ", "red"), f"{p}: re-simulation failed: {type(e).__name__}: {e}"))
            return
        yield from self._report(p, rep)

    def _report(self, p: Path, rep) -> Iterator[Text]:
        if rep.ok and not rep.resimulated:  # a game whose rules live in its own process (StarCraft II)
            yield self._count(CHECKED, Text.assemble(("CHECKED ", "yellow"), f"{p} ({rep.steps} steps), not "
                                                     "re-simulated: " + "; ".join(rep.checks)))
        elif rep.ok:
            line = self._count("verified", Text.assemble(("OK ", "green"), f"{p} ({rep.steps} steps)"))
            if self.each or rep.warnings:  # a warning is never shown without its file
                yield line
        else:
            lone = len(self.paths) == 1
            more = f" (and {len(rep.differences) - 1} more)" if len(rep.differences) > 1 and not lone else ""
            yield self._count("mismatched", Text.assemble(("MISMATCH ", "red"),
                                                          f"{p} ({rep.steps} steps): {rep.differences[0]}{more}"))
            if lone:
                for d in rep.differences[1:]:
                    yield Text(f"   {d}")
        for w in rep.warnings:
            yield Text.assemble("   ", ("warning", "yellow"), f": {w}")

    def _count(self, outcome: str, line: Text) -> Text:
        self.counts[outcome] += 1
        return line

    @property
    def ok(self) -> bool:
        """Whether every replay was verified (or checked, where it cannot be re-simulated)."""
        return len(self.paths) == self.counts["verified"] + self.counts[CHECKED]

    def summary(self) -> str:
        """The count of each outcome (the not-re-simulated one only when it occurs)."""
        shown = {k: v for k, v in self.counts.items() if v or k != CHECKED}
        return f"{len(self.paths)} replays: " + ", ".join(f"{v} {k}" for k, v in shown.items())
