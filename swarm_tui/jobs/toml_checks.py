"""Collecting a TOML file's problems, each located at the line of its field.

Every problem of a job is reported at once (file, line, field, what is wrong), so a user fixes
a job in one round; locating a field costs an index of the file's lines, built only when the
first problem needs it.
"""

from __future__ import annotations

import difflib
from functools import cached_property
from pathlib import Path
from typing import Any

from swarm_tui.core.errors import Problem
from swarm_tui.util.textfile import TomlLines, split_lines

__all__ = ["TomlChecker"]


class TomlChecker:
    """Collects problems in a TOML job, locating each field's line in the source text."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self.problems: list[Problem] = []

    @cached_property
    def index(self) -> TomlLines:
        """Built on the first problem only: a valid job never pays for locating fields."""
        return TomlLines(split_lines(self.text))

    def line_of(self, dotted: str) -> int | None:
        return self.index.line_of(dotted)

    def add(self, dotted: str, message: str, line: int | None = None) -> None:
        self.problems.append(Problem(str(self.path), line or self.line_of(dotted), dotted, message))

    def unknown_keys(self, table: dict[str, Any], known: frozenset[str], prefix: str = "", what: str = "key") -> None:
        for key in table:
            if key not in known:
                self.add(f"{prefix}{key}", _unknown(key, known, what))

    def string(self, table: dict[str, Any], key: str, dotted: str, *, required: bool = False) -> str | None:
        value = table.get(key)
        if value is None:
            if required:
                self.add(dotted, "missing")
            return None
        if not isinstance(value, str):
            self.add(dotted, f"must be a string, not {type(value).__name__}")
            return None
        return value


def _unknown(key: str, known: set[str] | frozenset[str], what: str = "key") -> str:
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return f"unknown {what}, did you mean {close[0]!r}?"
    return f"unknown {what} (known: {', '.join(sorted(known))})"
