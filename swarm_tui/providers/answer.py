"""An answer as results.jsonl keeps it: strict JSON (RFC 8259) in UTF-8, on one line.

A provider's 200 is kept as the bytes received (the journal stores them, results.jsonl splices
them in), so whatever a reader of results.jsonl meets is what the provider sent. Python's `json`
tolerates more than JSON: a byte-order mark, UTF-16, `NaN` and `Infinity`, raw control characters
(`strict=False`), duplicate keys, numbers no double holds; jq, Go, Rust's serde_json or a JSON
Lines tool refuse some of these, and Python's own `str.splitlines` breaks a line at a raw U+2028.
So each answer is checked when it arrives (`strict_answer`), read in the charset its content-type
declares (`providers.body`; UTF-8 when none: an answer in another is written again in UTF-8):

* the common case (UTF-8, strict JSON, one line) is verified by one parse, the one the client
  needs anyway, with hooks that refuse what is not strict, and a few substring checks: its bytes
  are kept as they came;
* an answer that can be made strict is written again canonically: the BOM dropped, UTF-16/32
  decoded, raw control characters escaped, the last of duplicate keys kept (as Python, JavaScript
  and jq read them), `NaN`, `Infinity` and numbers past a double's range written `null` (as
  JavaScript's `JSON.stringify` writes them), a lone surrogate (half of an emoji) written U+FFFD
  (as every UTF-8 encoder does), line breaks escaped;
* one that cannot (bytes that are not text in its charset, nesting no reader follows, more than
  `--max-answer-bytes`) fails the attempt with an error of its own class, never a corrupt line:
  `malformed_answer` is retried like `bad_response` (a corrupt transfer is as likely to be
  transient as a truncated body), `answer_too_large` is not (the same request asks for as many
  tokens again, and each try is paid), nor is a charset no decoder knows (`bad_response` that
  says so: the same request gets the same answer).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.providers.body import ASCII_SAFE, OTHER, UNKNOWN, charset_reading, unknown_charset
from swarm_tui.util import secrets
from swarm_tui.util.strict_json import (
    LINE_BREAKS,
    dumped,
    encodable,
    encoded,
    escape_line_breaks,
    repaired,
    storable_text,
)

MAX_ANSWER_BYTES = 8 * 1024 * 1024
"""Default cap on one answer's body (`--max-answer-bytes`): a chat completion of 100k tokens is
under 1 MiB; past this a body is a server's fault, not an answer."""

NOT_PARSED: Any = object()
"""`strict_answer`'s value when the body is not JSON at all (the caller says what it is instead)."""

_BOM = b"\xef\xbb\xbf"


class AnswerRefused(Exception):
    """A 200 whose body cannot be kept as strict JSON; `error` is the attempt's classified failure."""

    def __init__(self, error: CallError) -> None:
        super().__init__(error.message)
        self.error = error


def strict_answer(
    content: bytes, status: int, request_id: str | None, max_bytes: int, charset: str | None = None
) -> tuple[bytes, Any]:
    """(the body as strict one-line UTF-8 JSON, its parsed value) of a successful status's body.

    `charset`: the one its content-type declares (`providers.body.declared_charset`); None, UTF-8.
    The value is `NOT_PARSED` (the bytes returned as they came) when the body is not JSON at all;
    `AnswerRefused` when it is JSON that cannot be kept strictly, or larger than `max_bytes`, or in
    a charset no decoder knows. A key of this process that the body echoes is masked
    (`swarm_tui.util.secrets`)."""
    if len(content) > max_bytes:
        raise too_large(status, request_id, max_bytes, len(content))
    if charset is not None:
        reading = charset_reading(charset)
        if reading == UNKNOWN:
            raise unreadable_charset(charset, status, request_id)
        if reading == OTHER or (reading == ASCII_SAFE and not content.isascii()):
            return _declared(content, charset, status, request_id)
    try:
        text = content.decode("utf-8")  # strict: a byte that is not UTF-8, or an encoded surrogate, fails
        value = _STRICT.decode(text)  # NaN, Infinity, raw control characters, duplicate keys fail
    except (ValueError, RecursionError):
        return _rewritten(content, status, request_id)
    if (_LONE_SURROGATE_HINT in text or _LONE_SURROGATE_HINT_UPPER in text) and _SURROGATE_ESCAPE.search(text):
        if not encodable(value):  # a \ud800 escape with no partner
            return _rewritten(content, status, request_id)
    if "\n" in text or "\r" in text:  # pretty-printed: outside strings (inside, the parse failed)
        content = content.replace(b"\r", b" ").replace(b"\n", b" ")
    if "\u2028" in text or "\u2029" in text or "\x85" in text:  # only inside strings: escaped there
        content = escape_line_breaks(content.decode("utf-8")).encode("utf-8")
    if secrets.found_in(content):  # a key of ours echoed back
        return encoded(value)
    return content, value


def too_large(status: int | None, request_id: str | None, max_bytes: int, size: int | None = None) -> AnswerRefused:
    """The refusal of an answer over the cap; `size`: its size when it was read whole, None when
    reading stopped at the cap (the rest never read: an answer without end costs the cap)."""
    if size is not None:
        what = f"an answer of {size:,} bytes, over the cap of {max_bytes:,} (--max-answer-bytes)"
    else:
        what = f"an answer past the cap of {max_bytes:,} bytes (--max-answer-bytes), cut there"
    return AnswerRefused(
        CallError(
            ErrorClass.ANSWER_TOO_LARGE, f"HTTP {status} with {what}", status, "answer_too_large", request_id=request_id
        )
    )


def unreadable_charset(charset: str, status: int | None, request_id: str | None) -> AnswerRefused:
    """The refusal of an answer in a charset no decoder knows: a bad response the same request
    would get again (each paid), so not retried."""
    return AnswerRefused(
        CallError(
            ErrorClass.BAD_RESPONSE,
            f"HTTP {status} but the answer cannot be read: {unknown_charset(charset)}",
            status,
            "bad_response",
            request_id=request_id,
            should_retry=False,
        )
    )


def strict_body(body: dict[str, Any], max_bytes: int) -> tuple[dict[str, Any], bytes]:
    """(body, its strict JSON bytes) of an answer assembled from parts (a stream's chunks): the
    same rules as `strict_answer`, applied to a value instead of bytes."""
    content, value = dumped(body)
    if len(content) > max_bytes:
        raise too_large(200, None, max_bytes, len(content))
    return value, content


def repaired_text(text: str) -> str:
    """An answer's journaled text, made strict if it is not (a journal written before answers were
    checked): cheap screens first, the whole rewrite only when one of them hits."""
    if text.startswith("\ufeff") or "NaN" in text or "Infinity" in text or any(c in text for c in LINE_BREAKS):
        try:
            return _rewritten(text.encode("utf-8", "surrogatepass"), 200, None)[0].decode("utf-8")
        except AnswerRefused:
            return "null"
    if "\n" in text or "\r" in text:
        return text.replace("\r", " ").replace("\n", " ")
    return text


# --------------------------------------------------------------------------- the strict parse


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("duplicate key")
    return value


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is past a double's range")
    return number


_STRICT = json.JSONDecoder(
    object_pairs_hook=_unique_keys,
    parse_constant=_reject_constant,
    parse_float=_finite_float,  # called for numbers with a fraction or an exponent only: rare in an answer
)
"""What a strict reader accepts (a leading BOM fails too: it is not JSON whitespace). Integers are
kept as written (exact in Python, jq 1.7 and JavaScript's BigInt-aware readers); one of more digits
than Python reads (4,300) is rewritten as null."""

_LONE_SURROGATE_HINT = "\\ud"
_LONE_SURROGATE_HINT_UPPER = "\\uD"
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
"""`\\uD800`-`\\uDFFF` (an escaped Hangul syllable, `\\uD000`-`\\uD7FF`, is no surrogate)."""
"""A surrogate reaches a parsed string only through a `\\uD800`-`\\uDFFF` escape (UTF-8 cannot
encode one): without such an escape in the text, no string needs checking."""


# --------------------------------------------------------------------------- the rewrite


def _tolerant_number(text: str) -> float | int | None:
    """A number a double holds, else None (as `JSON.stringify` writes a non-finite one)."""
    number = float(text)
    if not math.isfinite(number):
        return None
    return int(text) if text.lstrip("-").isdigit() else number


_TOLERANT = json.JSONDecoder(
    strict=False,  # raw control characters inside strings: escaped when written again
    parse_constant=lambda name: None,  # NaN, Infinity, -Infinity -> null
    parse_float=_tolerant_number,
    parse_int=_tolerant_number,  # an integer of 5,000 digits is past a double (and past int())
)


def _rewritten(content: bytes, status: int, request_id: str | None) -> tuple[bytes, Any]:
    """The body read as tolerantly as Python can, written again strictly."""
    encoding = json.detect_encoding(content)  # UTF-8 (its BOM dropped), UTF-16 or UTF-32, as Python reads it
    try:
        text = content.decode(encoding)
    except UnicodeDecodeError as exc:
        what = "UTF-8" if encoding.startswith("utf-8") else encoding.upper()
        problem = f"not {what} text (byte 0x{content[exc.start]:02x} at offset {exc.start}: {exc.reason})"
        raise malformed(problem, status, request_id) from None
    try:
        value = _TOLERANT.decode(text.lstrip("\ufeff"))
    except RecursionError:
        raise malformed("nested deeper than a JSON reader follows", status, request_id) from None
    except ValueError:
        return content, NOT_PARSED  # not JSON: the caller says what it is instead
    return encoded(repaired(value))


def _declared(content: bytes, charset: str, status: int, request_id: str | None) -> tuple[bytes, Any]:
    """A body in the charset its content-type declares (not UTF-8), read in it and written again
    as strict UTF-8 JSON."""
    try:
        text = content.decode(charset)
    except UnicodeDecodeError as exc:
        problem = (
            f"not {charset} text as its content-type declares "
            f"(byte 0x{content[exc.start]:02x} at offset {exc.start}: {exc.reason})"
        )
        raise malformed(problem, status, request_id) from None
    try:
        value = _TOLERANT.decode(text.lstrip("\ufeff"))
    except RecursionError:
        raise malformed("nested deeper than a JSON reader follows", status, request_id) from None
    except ValueError:
        return text.encode("utf-8", "replace"), NOT_PARSED  # not JSON: the caller says what it is instead
    return encoded(repaired(value))


def malformed(problem: str, status: int | None, request_id: str | None) -> AnswerRefused:
    """The refusal of an answer that cannot be kept as JSON (`problem`: why, in words)."""
    return AnswerRefused(
        CallError(
            ErrorClass.MALFORMED_ANSWER,
            f"HTTP {status} but the answer cannot be kept as JSON: {problem}",
            status,
            "malformed_answer",
            request_id=request_id,
        )
    )


def storable_error(error: CallError) -> CallError:
    """`error` with its provider texts (message, code, request id) encodable as UTF-8: an error
    body's `\ud800` escape must not fail the journal's write, nor the screen's."""
    changes: dict[str, Any] = {}
    for name in ("message", "code", "request_id"):
        value = getattr(error, name)
        if isinstance(value, str) and (safe := storable_text(value)) is not value:
            changes[name] = safe
    return dataclasses.replace(error, **changes) if changes else error
