"""Reading a user's text files (a job, the config): UTF-8 or a clear error naming the line, and
where each key of a TOML text stands, so that a problem found in the parsed document names its
line (`file:line: field: problem`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from swarm_tui.core.errors import InputError


def read_text_file(path: Path, kind: str = "job") -> str:
    """The file's text, or `InputError` naming the line of the first byte that is not UTF-8, or
    saying why it cannot be read (a directory, permission, an I/O error); `kind` names the file
    (`job`, `config`) in the message and is its field.

    A leading byte-order mark is dropped (editors on Windows write one)."""
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise InputError.single(path, kind, f"is a directory, not a {kind} file") from None
    except OSError as exc:
        raise InputError.single(path, kind, f"cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise not_utf8(path, data, exc, line, data.rfind(b"\n", 0, exc.start) + 1) from None
    return text[1:] if text.startswith("\ufeff") else text


def not_utf8(path: Path, data: bytes, exc: UnicodeDecodeError, line: int, line_start: int) -> InputError:
    column = exc.start - line_start + 1
    return InputError.single(
        path,
        "encoding",
        f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column} ({exc.reason}); save the file as UTF-8",
        line=line,
    )


def read_job_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line, read one at a time: what `split_lines(read_text_file(path))`
    gives, with the same errors (the first byte that is not UTF-8 is reported however many
    lines come before it), without holding the file's bytes, its text and its lines at once."""
    try:
        with path.open("rb") as file:
            for lineno, data in enumerate(file, start=1):
                try:
                    line = data.decode("utf-8")  # with its "\n": a sequence cut by it fails as in the whole file
                except UnicodeDecodeError as exc:
                    raise not_utf8(path, data, exc, lineno, 0) from None
                if lineno == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                if line.endswith("\n"):
                    line = line[:-1]
                yield lineno, line[:-1] if line.endswith("\r") else line
    except IsADirectoryError:
        raise InputError.single(path, "job", "is a directory, not a job file") from None
    except OSError as exc:
        raise InputError.single(path, "job", f"cannot read: {exc.strerror or exc}") from None


def split_lines(text: str) -> list[str]:
    """Lines as a JSONL reader and a person count them: split on "\\n" only (a "\\r" before it is
    dropped). `str.splitlines` also splits on U+2028, U+0085 and form feeds, which are legal
    inside JSON and TOML strings: it would break a valid line in two and shift every later number."""
    lines = text.split("\n")
    return [line[:-1] if line.endswith("\r") else line for line in lines]


_KEY_PART = r"""(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""
_DOTTED_KEY = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_HEADER = re.compile(rf"^\s*\[\[?\s*({_DOTTED_KEY})\s*\]\]?\s*(?:#.*)?$")
_ASSIGNMENT = re.compile(rf"^\s*({_DOTTED_KEY})\s*=")
_FIELD_PART = re.compile(r"([^.\[\]]+)(?:\[(\d+)\])?")


def _normal_key(written: str) -> str:
    """`"a" . b` -> `a.b`: a dotted key as the parsed document names it."""
    return ".".join(part.strip().strip("\"'") for part in re.findall(_KEY_PART, written))


class TomlLines:
    """Where each table header and `key =` of a TOML text stands, found in one pass.

    A field is then located with a couple of dict lookups, so validating a job stays linear in
    its size (rescanning the text per field made a 2,000-task job take seconds). Lines inside a
    multi-line string are skipped: a `[x]` or `k = v` in a shared context is text, not TOML.
    """

    def __init__(self, lines: list[str]) -> None:
        self.root: dict[str, int] = {}
        self.tables: dict[str, list[tuple[int, dict[str, int]]]] = {}
        keys = self.root
        open_string: str | None = None
        for lineno, line in enumerate(lines, start=1):
            if open_string is not None:
                if line.count(open_string) % 2:
                    open_string = None
                continue
            header = _HEADER.match(line)
            if header:
                keys = {}
                self.tables.setdefault(_normal_key(header.group(1)), []).append((lineno, keys))
                continue
            assignment = _ASSIGNMENT.match(line)
            if assignment:
                keys.setdefault(_normal_key(assignment.group(1)), lineno)
                value = line[assignment.end() :]
                for quotes in ('"""', "'''"):
                    if value.count(quotes) % 2:
                        open_string = quotes
                        break

    def line_of(self, dotted: str) -> int | None:
        """Line of a problem field such as `request.max_tokens`, `task[3].prompt` or `modle`: the
        key's own line when written, else its table's header, else None."""
        parts = _FIELD_PART.findall(dotted)
        for cut in range(len(parts), 0, -1):
            entries = self.tables.get(".".join(name for name, _ in parts[:cut]))
            position = int(parts[cut - 1][1] or 0)
            if entries and position < len(entries):
                header_line, keys = entries[position]
                return self._key_line(keys, [name for name, _ in parts[cut:]]) or header_line
        return self._key_line(self.root, [name for name, _ in parts])

    @staticmethod
    def _key_line(keys: dict[str, int], names: list[str]) -> int | None:
        for cut in range(len(names), 0, -1):
            line = keys.get(".".join(names[:cut]))
            if line is not None:
                return line
        return None
