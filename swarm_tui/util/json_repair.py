"""Getting JSON out of what a model actually wrote.

Models wrap JSON in code fences, put prose before and after it, and run out of tokens in the
middle of it (the article's error 4). `extract_json` tries, in order: the text as it is; the
inside of a ```json fence; the first balanced `{...}` or `[...]` in the text; and finally a
repair of a truncated ending (close the open string, drop a dangling key or comma, close the
open brackets). When all fail it raises `JsonExtractionError`, which keeps the raw text so
nothing the model wrote is lost.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)(?:```|$)", re.DOTALL)


class JsonExtractionError(ValueError):
    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


def extract_json(text: str) -> Any:
    """The JSON value in `text`; raises `JsonExtractionError` (with `.raw`) when there is none."""
    if text is None:
        raise JsonExtractionError("no text", "")
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    first_error = None
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return json.loads(candidate)
        except json.JSONDecodeError as exc:
            first_error = first_error or exc
        start = _first_bracket(candidate)
        if start is None:
            continue
        balanced = _balanced_span(candidate, start)
        if balanced is not None:
            try:
                return json.loads(_strip_trailing_commas(balanced))
            except json.JSONDecodeError:
                pass
        repaired = repair_truncated(candidate[start:])
        if repaired is not None:
            try:
                return json.loads(repaired)
            except json.JSONDecodeError:
                pass
    where = f" ({first_error.msg} at line {first_error.lineno} column {first_error.colno})" if first_error else ""
    raise JsonExtractionError(f"no JSON value could be read from the answer{where}", text)


def json_answer(text: str) -> Any:
    """The JSON value of an answer that *is* JSON (it starts with `{` / `[`, or holds a code fence),
    read as robustly as `extract_json`; prose that merely contains a bracket is not JSON."""
    if not (text.strip()[:1] in ("[", "{") or _FENCE.search(text)):
        raise JsonExtractionError("the answer is prose, not JSON", text)
    return extract_json(text)


def _first_bracket(text: str) -> int | None:
    positions = [p for p in (text.find("{"), text.find("[")) if p >= 0]
    return min(positions) if positions else None


def _scan(text: str, start: int = 0) -> tuple[int | None, list[str], bool]:
    """Walk JSON-ish text from `start`, honouring strings: (index of the bracket that closes the
    first one, or None), the closers still owed, and whether it ends inside a string."""
    owed: list[str] = []
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            owed.append("]" if ch == "[" else "}")
        elif ch in "]}" and owed:
            owed.pop()
            if not owed:
                return i, owed, False
    return None, owed, in_string


def _balanced_span(text: str, start: int) -> str | None:
    """The text from `start` to its matching closing bracket, honouring strings."""
    end, _, _ = _scan(text, start)
    return None if end is None else text[start : end + 1]


def _strip_trailing_commas(text: str) -> str:
    return re.sub(r",(\s*[}\]])", r"\1", text)


def repair_truncated(text: str) -> str | None:
    """Close what a cut-off JSON text left open; None when it does not start like JSON."""
    text = text.rstrip()
    if not text or text[0] not in "[{":
        return None
    _, stack, in_string = _scan(text)
    if in_string:
        text += '"'
    text = text.rstrip()
    # a dangling separator or a key waiting for its value cannot be completed: drop it
    for _ in range(3):
        stripped = re.sub(r'(,\s*|,?\s*"[^"\\]*"\s*:\s*)$', "", text)
        if stripped == text:
            break
        text = stripped.rstrip()
    if text.endswith(":"):
        text += " null"
    return _strip_trailing_commas(text + "".join(reversed(stack)))
