"""JSON text every reader takes: strict (RFC 8259), UTF-8, one line, no key of ours in it.

The rules an answer is kept under (`providers.answer` checks the bytes a provider sent against
them) and the journal writes an answer given as a value under (a batch line's body): every
string encodable as UTF-8, every float finite, the line breaks `str.splitlines` and JSON Lines
readers break at escaped, a key this process registered (`swarm_tui.util.secrets`) masked. Here, not
in `providers`, because the journal and its connection (`masked_db`) use them too and import
nothing of the providers.
"""

from __future__ import annotations

import json
import math
from typing import Any

from swarm_tui.util import secrets

LINE_BREAKS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"}
LINE_BREAK_BYTES = tuple(c.encode("utf-8") for c in LINE_BREAKS)
"""Characters `str.splitlines` (and some JSON Lines readers) break a line at: legal raw inside a JSON
string, escaped so that a line of results.jsonl is a line to every reader."""


def strict_text(value: Any) -> str:
    """`value` as strict one-line JSON text (what the journal stores of an answer given as a value)."""
    return dumped(value)[0].decode("utf-8")


def repaired(value: Any) -> Any:
    """`value` with every string encodable as UTF-8 (surrogate pairs joined, a lone one U+FFFD) and
    every float finite (else None). Unchanged parts are returned as they are."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {repaired(k): repaired(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [repaired(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumped(value: Any) -> tuple[bytes, Any]:
    """`encoded(repaired(value))`, with the common case (nothing to repair) encoded once."""
    try:
        content = json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (ValueError, UnicodeEncodeError):  # a NaN, a lone surrogate: repaired
        return encoded(repaired(value))
    if any(c in content for c in LINE_BREAK_BYTES) or secrets.found_in(content):
        return encoded(value)
    return content, value


def encoded(value: Any) -> tuple[bytes, Any]:
    """(strict one-line JSON bytes, value) of a repaired value; a key of ours in it masked."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    if secrets.found_in_text(text):
        value = secrets.mask_value(value)
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    if any(c in text for c in LINE_BREAKS):
        text = escape_line_breaks(text)
    return text.encode("utf-8"), value


def escape_line_breaks(text: str) -> str:
    for char, escape in LINE_BREAKS.items():
        text = text.replace(char, escape)
    return text


def encodable(value: Any) -> bool:
    """Every string in `value` (keys included) is encodable as UTF-8."""
    if isinstance(value, str):
        return encodable_text(value)
    if isinstance(value, dict):
        return all(encodable_text(k) and encodable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(encodable(v) for v in value)
    return True


def encodable_text(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable_text(text: str) -> str:
    """`text` encodable as UTF-8: surrogate pairs joined into their character, a lone surrogate
    replaced by U+FFFD (as a UTF-8 encoder writes it). The same object when it is already."""
    if encodable_text(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
