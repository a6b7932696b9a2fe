"""The process's secrets, and masking them out of whatever is written or shown.

A key is registered when it is read from its environment variable
(`providers.profile.resolve_api_key`); from then on `mask` replaces it, in every spelling a
provider or a proxy may echo it back in, wherever it passes through:

* the journal (every string a write binds, `Journal`), hence the event log, results.jsonl,
  errors.jsonl and transcripts.jsonl, which are exported from it;
* a classified error (message, code, request id, headers: `ProviderClient.classify`), hence the
  screen, which shows the engine's events;
* an answer (`providers.answer`), `providers test`'s line, and every log record (`install_log_masking`).

Spellings: in any letter case, each character that is not a letter or a digit as it is or as any
encoder may write it (URL-encoded once or twice, whichever characters the encoder keeps: urllib's
`quote` keeps a `/`, `quote_plus` does not; JSON-escaped, PHP's `\\/` and .NET's `\\u002B`
included; an HTML entity), and base64 (at each of the three alignments it can take inside a longer
base64 text, as in `Basic` auth or an encoded `Bearer KEY`). A `Bearer ` prefix needs nothing of
its own: the key after it is masked.

The quick check (`found_in`) looks for the key's longest run of letters and digits (which no
encoder above changes), and for its base64 spellings; only a text that holds one of them is
searched with the pattern of every spelling.

No Textual, no provider code here: anything may import this module.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import html
import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "***"
MIN_SECRET_CHARS = 8
"""Shorter values are not masked: a key of a few letters (`EMPTY` for a local server) would mask
ordinary words everywhere, and no provider issues one."""

_secrets: list[str] = []
_byte_spellings: tuple[bytes, ...] = ()
"""Every spelling of every registered secret, lower-cased, in UTF-8 (for the quick check)."""
_pattern: re.Pattern[str] | None = None


def register(secret: str) -> None:
    """Mask `secret` from now on (a value too short to be a key is ignored)."""
    global _byte_spellings, _pattern
    if len(secret) < MIN_SECRET_CHARS or secret in _secrets:
        return
    _secrets.append(secret)
    _byte_spellings, _pattern = _compiled(tuple(_secrets))


def registered() -> bool:
    return bool(_secrets)


def found_in(data: bytes, spellings: tuple[bytes, ...] | None = None) -> bool:
    """Whether `data` may hold a registered secret: cheap (the bytes lower-cased, which only touches
    ASCII letters and a key is ASCII, then a substring search a spelling), so every answer and every
    journal write can afford it; `mask` does the work only when it says yes."""
    spellings = _byte_spellings if spellings is None else spellings
    if spellings:
        lowered = data.lower()
        for spelling in spellings:
            if spelling in lowered:
                return True
    return False


def found_in_text(text: str) -> bool:
    """`found_in` for a text (its UTF-8 bytes: lower-casing a text is 10x slower than its bytes)."""
    return bool(_byte_spellings) and found_in(text.encode("utf-8", "surrogatepass"))


def mask(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with every spelling of every registered secret (and of `extra`) replaced by `***`."""
    spellings, pattern = _byte_spellings, _pattern
    if extra:
        others = tuple(s for s in extra if s and len(s) >= MIN_SECRET_CHARS and s not in _secrets)
        if others:
            spellings, pattern = _compiled(tuple(_secrets) + others)
    if pattern is None or not found_in(text.encode("utf-8", "surrogatepass"), spellings):
        return text
    return pattern.sub(MASK, text)


def mask_value(value: Any) -> Any:
    """`value` with `mask` applied to every string in it: dicts (keys too), lists, tuples and
    dataclasses are rebuilt only where something changed (the same object otherwise)."""
    if not _byte_spellings:
        return value
    return _masked(value)


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        masked = mask(value)
        return value if masked == value else masked
    if isinstance(value, Mapping):
        items = [(_masked(k), _masked(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, list | tuple):
        masked_items = [_masked(v) for v in value]
        if all(a is b for a, b in zip(masked_items, value, strict=True)):
            return value
        return masked_items if isinstance(value, list) else tuple(masked_items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for field in dataclasses.fields(value):
            current = getattr(value, field.name)
            masked = _masked(current)
            if masked is not current:
                changes[field.name] = masked
        return dataclasses.replace(value, **changes) if changes else value
    return value


# --------------------------------------------------------------------------- spellings


@functools.lru_cache(maxsize=16)
def _compiled(secrets: tuple[str, ...]) -> tuple[tuple[bytes, ...], re.Pattern[str] | None]:
    """(what the quick check looks for, lower-cased in UTF-8; one pattern of every spelling of
    every secret, longest first)."""
    if not secrets:
        return (), None
    needles: set[str] = set()
    alternatives: list[str] = []
    for secret in secrets:
        core = _core(secret)
        needles.add(core)
        if core == secret:  # no long run of letters and digits: look for its usual spellings whole
            needles |= spellings_of(secret)
        alternatives.append(_any_encoding(secret))
        for spelling in _base64_spellings(secret):
            needles.add(spelling)
            alternatives.append(re.escape(spelling))
    alternatives.sort(key=len, reverse=True)
    pattern = re.compile("|".join(alternatives), re.IGNORECASE)
    return tuple(sorted({n.lower().encode("utf-8") for n in needles}, key=len, reverse=True)), pattern


def spellings_of(secret: str) -> set[str]:
    """Texts `secret` may reach a file or a screen as (a sample: `mask` matches every mix of them
    character by character)."""
    found = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret), json.dumps(secret)[1:-1]}
    found |= _base64_spellings(secret)
    return {s for s in found if len(s) >= MIN_SECRET_CHARS}


_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")


CORE_MIN_CHARS = 4
"""The shortest run of letters and digits the quick check looks for (shorter would hit ordinary text)."""


def _core(secret: str) -> str:
    """The part of `secret` every spelling but base64 keeps as it is (in some letter case): its
    longest run of letters and digits, or the whole of it when that run is shorter than
    `CORE_MIN_CHARS` (its usual spellings are then looked for whole)."""
    run = max(_ALNUM_RUN.findall(secret), key=len, default="")
    return run if len(run) >= CORE_MIN_CHARS else secret


def _any_encoding(secret: str) -> str:
    """A pattern of `secret` with each character that is not a letter or a digit in any of the
    ways an encoder writes it (matched without regard to case)."""
    return "".join(re.escape(c) if c.isascii() and c.isalnum() else _character(c) for c in secret)


@functools.lru_cache(maxsize=256)
def _character(char: str) -> str:
    utf8 = char.encode("utf-8")
    percent = "".join(f"%{b:02X}" for b in utf8)
    forms = {
        char,
        percent,
        percent.replace("%", "%25"),  # URL-encoded twice
        json.dumps(char)[1:-1],  # as JSON escapes it (a quote, a backslash, a control character)
        f"\\u{ord(char):04X}" if ord(char) < 0x10000 else json.dumps(char, ensure_ascii=True)[1:-1],
        f"&#x{ord(char):X};",
        f"&#{ord(char)};",
        html.escape(char),
    }
    if char == "/":
        forms.add("\\/")  # PHP's json_encode, and JSON's own optional escape
    if char == " ":
        forms.add("+")
    return "(?:" + "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)) + ")"


def _base64_spellings(secret: str) -> set[str]:
    found: set[str] = set()
    raw = secret.encode("utf-8")
    for offset in range(3):
        total = offset + len(raw)
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * offset + raw).decode("ascii")
            # groups of 4 characters hold 3 bytes: drop the first group (it holds what came before the
            # secret) and a last partial one (it holds what comes after)
            core = encoded[4 if offset else 0 : 4 * (total // 3)]
            if len(core) >= MIN_SECRET_CHARS:
                found.add(core)
    return found


# --------------------------------------------------------------------------- logging

_installed = False


def install_log_masking() -> None:
    """Mask every log record this process makes, whatever its logger or handler (once; later calls
    do nothing). A record factory, not a filter on one logger: a filter on the root logger never
    sees the records of the loggers below it, and handlers come and go."""
    global _installed
    if _installed:
        return
    _installed = True
    make_record = logging.getLogRecordFactory()

    def masked_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        if _byte_spellings:
            MaskingFilter().filter(record)
        return record

    logging.setLogRecordFactory(masked_record)


class MaskingFilter(logging.Filter):
    """A record's message, arguments and exception text masked (for a handler of one's own, too)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _byte_spellings:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it when the record is emitted
            return True
        record.msg, record.args = mask(message), None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = mask(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True
