"""The provider's words: what an error body that is not an OpenAI error says, on one line.

An HTML 502 page from a proxy, FastAPI's `{"detail": ...}` (vLLM, many local servers), a bare
`{"message": ...}` or `{"error": "..."}`, plain text: the error a user reads in errors.jsonl and
the error log says what the provider said (`HTTP 502: relay.example | 502: Bad gateway`,
`HTTP 400: Unsupported parameter ...`), not a bare "HTTP 502".
"""

from __future__ import annotations

import html
import http
import json
import re
from typing import Any

PROVIDER_WORDS_CHARS = 300
"""How much of a body that is not an OpenAI error is kept as the error's message."""

_TAG = re.compile(r"<[^>]*>")
_INVISIBLE = re.compile(r"<(script|style|head)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_HEADING = re.compile(r"<h1[^>]*>(.*?)</h1\s*>", re.IGNORECASE | re.DOTALL)


def answer_body(content: bytes, charset: str | None = None) -> Any:
    """An error answer's body: its JSON when it is JSON, else its text (an HTML page, a proxy's
    words); read in `charset` (the one its content-type declares) when it names one a decoder
    knows, else as UTF-8 (a byte that is not, replaced)."""
    text: str | bytes = content
    if charset is not None:
        try:
            text = content.decode(charset, "replace")
        except LookupError:  # a charset no decoder knows: read as UTF-8
            pass
    try:
        return json.loads(text)
    except ValueError:
        return text if isinstance(text, str) else content.decode("utf-8", "replace")


def provider_words(body: Any) -> str | None:
    """What an error body that is not an OpenAI error says: an HTML page's title (or first heading,
    or first line of text), FastAPI's and vLLM's `detail` (a string, or a list of `{loc, msg}`), a
    bare `message` or `error` string, a text's first line; None when it says nothing. Whitespace
    collapsed; the caller masks secrets, then cuts it (`one_line`), in that order, so that a cut
    never leaves a piece of a key the mask would not know."""
    if isinstance(body, dict):
        text = _field_words(body)
    elif isinstance(body, str):
        text = _page_words(body) if "<" in body and ">" in body else _first_line(body)
    elif body is None:
        text = None
    else:  # a JSON array or scalar
        text = json.dumps(body, ensure_ascii=False)
    if not text:
        return None
    return " ".join(text.split()) or None


def one_line(text: str) -> str:
    """`text` cut to `PROVIDER_WORDS_CHARS`, its whitespace collapsed."""
    text = " ".join(text.split())
    return text if len(text) <= PROVIDER_WORDS_CHARS else text[: PROVIDER_WORDS_CHARS - 1] + "…"


def status_line(status: int, words: str | None) -> str:
    """`HTTP 400: <words>`; `HTTP 502 Bad Gateway` when the words are the status line already (nginx's
    title) or when there are none."""
    if words and words.startswith(str(status)):
        return f"HTTP {words}"
    if words:
        return f"HTTP {status}: {words}"
    try:
        return f"HTTP {status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def _field_words(body: dict[str, Any]) -> str | None:
    for key in ("detail", "message", "error", "msg", "title"):
        value = body.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if key == "detail" and isinstance(value, list) and value:  # FastAPI's validation errors
            return "; ".join(_detail_item(item) for item in value[:5])
        if isinstance(value, dict):  # {"error": {"detail": ...}} and the like
            inner = _field_words(value)
            if inner:
                return inner
    return json.dumps(body, ensure_ascii=False) if body else None


def _detail_item(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    where = ".".join(str(part) for part in item.get("loc") or ())
    what = str(item.get("msg") or item.get("message") or item.get("type") or "")
    return f"{where}: {what}" if where else what


def _page_words(page: str) -> str | None:
    for pattern in (_TITLE, _HEADING):
        found = pattern.search(page)
        if found and _TAG.sub(" ", found.group(1)).strip():
            return html.unescape(_TAG.sub(" ", found.group(1)))
    return _first_line(html.unescape(_TAG.sub("\n", _INVISIBLE.sub(" ", page))))


def _first_line(text: str) -> str | None:
    return next((line for line in text.splitlines() if line.strip()), None)
