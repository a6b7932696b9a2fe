"""Errors a user can act on.

`InputError` is bad input or configuration: the CLI prints it and exits 2, and nothing has
been sent. Its text always names where the problem is (`file:line: field: problem`) so the
user can fix it without guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file."""

    source: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: {self.field}: {self.message}"


@dataclass
class InputError(Exception):
    """Bad input or configuration; carries every problem found, not just the first."""

    problems: list[Problem] = field(default_factory=list)
    more: int = 0
    """Problems found past those listed (a loader keeps the first few dozen and counts the rest),
    so that the message says how many there are in all."""

    @classmethod
    def single(cls, source: str | Path, field_name: str, message: str, line: int | None = None) -> InputError:
        return cls([Problem(str(source), line, field_name, message)])

    def __str__(self) -> str:
        shown = self.problems[:20]
        lines = [str(p) for p in shown]
        hidden = len(self.problems) - len(shown) + self.more
        if hidden:
            lines.append(f"... and {hidden:,} more problem{'s' if hidden > 1 else ''}")
        return "\n".join(lines)


class JournalWriteError(Exception):
    """The run's journal could not be written (disk full, permission, the directory deleted):
    the run must stop sending, since an answer that cannot be kept would be paid for and then
    lost. `cause` says why in a user's words."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause
