"""An answer's bytes as they come off the wire: bounded by the cap, read in their declared charset.

Every way a chat call's answer arrives reads its body here: the aiohttp hot path
(`providers.wire`), the SDK's raw responses (the `httpx` backend, and streams on both backends:
`providers.client`) and the SSE lines of a stream (`providers.event_stream`).

* **The cap** (`--max-answer-bytes`): a successful answer is read up to the cap and no further;
  one past it is `BodyTooLarge` (the caller names it `answer_too_large`), never read to its end:
  a server that sends without end costs the cap, not the memory it can fill before `--timeout`.
  An error body is only the provider's words: past the cap it is cut (`capped_error_bodies`),
  and the error is classified by its status as usual.
* **The charset**: the `charset` a `Content-Type` declares (`application/json; charset=latin-1`),
  else UTF-8 (what RFC 8259 and the SSE spec make the default). A charset no decoder knows is
  the provider's fault, said in words (`unknown_charset`).
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable

import httpx2

__all__ = [
    "BodyTooLarge",
    "capped_error_bodies",
    "charset_reading",
    "declared_charset",
    "read_capped",
    "unknown_charset",
]


class BodyTooLarge(Exception):
    """A body past its cap: reading stopped at `read` bytes (more than `cap`). Its reader adds the
    answer's status and request id when it knows them."""

    def __init__(self, read: int, cap: int) -> None:
        super().__init__(f"more than {cap:,} bytes")
        self.read = read
        self.cap = cap
        self.status: int | None = None
        self.request_id: str | None = None


async def read_capped(chunks: AsyncIterable[bytes], cap: int, *, cut: bool = False) -> bytes:
    """The bytes of `chunks` (a body as it arrives), `BodyTooLarge` as soon as they pass `cap`;
    with `cut`, the first `cap` bytes instead (an error body: its start says what went wrong)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > cap:
            if cut:
                parts.append(chunk[: len(chunk) - (size - cap)])
                break
            raise BodyTooLarge(size, cap)
        parts.append(chunk)
    return b"".join(parts)


def capped_error_bodies(cap: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    """An httpx2 response hook that cuts an error answer's body at `cap` bytes.

    The SDK reads an error body whole before it raises its `APIStatusError` (and the status is
    what classifies the error: the body only says it in words); a successful answer is left to
    its reader (`read_capped`), which refuses it past the cap."""

    async def cut(response: httpx2.Response) -> None:
        if response.status_code >= 300 and isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _CutStream(response.stream, cap)

    return cut


class _CutStream(httpx2.AsyncByteStream):
    """A response's raw stream that ends after `cap` bytes (and closes what it reads from)."""

    def __init__(self, stream: httpx2.AsyncByteStream, cap: int) -> None:
        self._stream = stream
        self._cap = cap

    async def __aiter__(self) -> AsyncIterator[bytes]:
        left = self._cap
        async for chunk in self._stream:
            if len(chunk) >= left:
                if left:
                    yield chunk[:left]
                break
            left -= len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


# --------------------------------------------------------------------------- the charset


def declared_charset(content_type: str | None) -> str | None:
    """The `charset` parameter of a `Content-Type` value, lower-cased and unquoted; None when it
    declares none."""
    if not content_type or "charset" not in content_type.lower():
        return None
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'").strip().lower() or None
    return None


UTF8 = "utf-8"
"""`charset_reading`: UTF-8, or none declared (UTF-8 by default): the bytes are read as they are."""
ASCII_SAFE = "ascii-safe"
"""`charset_reading`: a charset whose ASCII bytes are ASCII (Latin-1, Windows-1252, Shift JIS): an
answer that is all ASCII reads as it would in UTF-8, and is kept as it came."""
OTHER = "other"
"""`charset_reading`: a charset read through its decoder (UTF-16, EBCDIC...)."""
UNKNOWN = "unknown"
"""`charset_reading`: a charset no text decoder knows (`klingon`, `hex`)."""


@functools.lru_cache(maxsize=64)
def charset_reading(charset: str | None) -> str:
    """How a body in `charset` is read: `UTF8`, `ASCII_SAFE`, `OTHER` or `UNKNOWN`."""
    if charset is None:
        return UTF8
    try:
        name = codecs.lookup(charset).name
        sample = b'{"a": [1, "b"]}\r\n'.decode(charset)  # LookupError for a codec that is not a text encoding
    except (LookupError, ValueError):
        return UNKNOWN
    if name in ("utf-8", "utf-8-sig"):
        return UTF8
    return ASCII_SAFE if sample == '{"a": [1, "b"]}\r\n' else OTHER


def unknown_charset(charset: str) -> str:
    """What is wrong with a body in a charset no decoder knows, in words."""
    return f"its content-type declares charset {charset!r}, which no decoder knows"
