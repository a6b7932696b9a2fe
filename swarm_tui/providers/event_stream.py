"""A streamed answer's bytes read as server-sent events, bounded and in their declared charset.

The SDK's own stream reader decodes every line as UTF-8 whatever the answer declares, and holds
a line or an event of any length: a provider that streams one line without end, or chunks
without end, fills memory until `--timeout` cuts the attempt, which is then sent again. Here the
bytes are decoded as they arrive in the charset the content-type declares (UTF-8 when none),
lines split where the SSE spec splits them (CR, LF or CRLF, across chunks too), and a line or an
event past the cap (`--max-answer-bytes`, in characters) ends the read as `BodyTooLarge`; the
caller bounds what the events add up to (`providers.streamed.StreamedAnswer.size`).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncGenerator, AsyncIterable

from swarm_tui.providers.answer import AnswerRefused, malformed, unreadable_charset
from swarm_tui.providers.body import UNKNOWN, BodyTooLarge, charset_reading

__all__ = ["event_data"]

_LINE_END = re.compile("\r\n|\r|\n")


async def event_data(
    chunks: AsyncIterable[bytes],
    charset: str | None,
    cap: int,
    *,
    status: int | None = None,
    request_id: str | None = None,
) -> AsyncGenerator[str, None]:
    """The `data` of each event of an SSE body, in order (an event's data lines joined by a line
    feed, as the spec joins them); comments and other fields skipped, an event without data too.

    `BodyTooLarge` (with `status` and `request_id`) for a line or an event over `cap` characters;
    `AnswerRefused` for bytes that are not `charset` text (`malformed_answer`) or a charset no
    decoder knows (`bad_response`)."""
    if charset is not None and charset_reading(charset) == UNKNOWN:
        raise unreadable_charset(charset, status, request_id)
    decoder = codecs.getincrementaldecoder(charset or "utf-8")("strict")
    partial: list[str] = []
    """The pieces of a line not ended yet."""
    partial_size = 0
    data: list[str] = []
    data_size = 0
    skip_lf = False
    """The last text ended with a CR: a LF that begins the next one is the same line end."""

    def too_large(size: int) -> BodyTooLarge:
        refused = BodyTooLarge(size, cap)
        refused.status, refused.request_id = status, request_id
        return refused

    def lines_of(text: str) -> list[str]:
        """The lines `text` ends (joined to what came before), keeping what it leaves unended."""
        nonlocal partial_size
        parts = _LINE_END.split(text)
        if len(parts) == 1:
            partial.append(text)
            partial_size += len(text)
            if partial_size > cap:
                raise too_large(partial_size)
            return []
        first = "".join(partial) + parts[0] if partial else parts[0]
        if len(first) > cap:
            raise too_large(len(first))
        rest = parts[-1]
        partial[:] = [rest] if rest else []
        partial_size = len(rest)
        return [first, *parts[1:-1]]

    async for chunk in chunks:
        try:
            text = decoder.decode(chunk)
        except UnicodeDecodeError as exc:
            raise _not_text(exc, charset, status, request_id) from None
        if not text:
            continue
        if skip_lf and text[0] == "\n":
            text = text[1:]
        skip_lf = text.endswith("\r")
        for line in lines_of(text):
            if not line:  # an empty line ends the event
                if data:
                    yield "\n".join(data)
                data, data_size = [], 0
                continue
            if line[0] == ":":  # a comment (a keep-alive)
                continue
            name, _, value = line.partition(":")
            if name == "data":
                value = value[1:] if value.startswith(" ") else value
                data.append(value)
                data_size += len(value)
                if data_size > cap:
                    raise too_large(data_size)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise _not_text(exc, charset, status, request_id) from None


def _not_text(
    exc: UnicodeDecodeError, charset: str | None, status: int | None, request_id: str | None
) -> AnswerRefused:
    what = "UTF-8" if charset is None else f"{charset} text as its content-type declares"
    where = f"byte 0x{exc.object[exc.start]:02x} in the stream" if exc.start < len(exc.object) else "its end"
    return malformed(f"not {what} ({where}: {exc.reason})", status, request_id)
