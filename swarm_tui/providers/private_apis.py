"""The private parts of the openai SDK and httpx2 this project leans on, in one place.

Each has no public equivalent, and each is what makes a call behave exactly as the SDK's:

* `post_raw`: a request sent through the SDK's own request path (auth, headers, timeouts, error
  types) that hands back the raw answer (`RAW_RESPONSE_HEADER`, a `LegacyAPIResponse`) instead
  of building the SDK's models from it, for a body that is plain JSON already; its body read as
  it arrives (`stream=True`), so that the cap on an answer holds (`providers.body`).
* `body_chunks`: a response's body as it arrives, with httpx2's errors raised as the SDK's own
  (`APITimeoutError`, `APIConnectionError`: what the SDK's streams raise, and what the
  classification knows), for a body the SDK hands back unread.
* `environment_proxy`: the proxy the environment names for a URL, read by httpx2's own code
  (`get_environment_proxies`, `URLPattern`), so the aiohttp hot path goes where the SDK would.

`tests/test_private_apis.py` exercises each against the installed versions: an upgrade that
changes one fails there, not in a run.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import anyio
import httpx2
import openai
from httpx2._utils import URLPattern, get_environment_proxies
from openai._constants import RAW_RESPONSE_HEADER
from openai._legacy_response import LegacyAPIResponse

from swarm_tui.providers.body import BodyTooLarge, read_capped

_RAW_REQUEST: Any = {"headers": {RAW_RESPONSE_HEADER: "true"}, "security": {"bearer_auth": True}}
"""Request options of a call sent as is: the raw response back, the key as bearer auth."""


async def post_raw(
    client: openai.AsyncOpenAI, path: str, body: dict[str, Any], max_bytes: int | None = None
) -> tuple[int, Mapping[str, str], bytes]:
    """POST `body` to `path` through the SDK's request path; (status, headers, content) of a 2xx
    answer (the SDK raises its `APIStatusError` for any other). `max_bytes`: `BodyTooLarge` (with
    the status and request id) as soon as the body passes it, the rest never read."""
    raw = cast(
        LegacyAPIResponse[object],
        await client.post(path, cast_to=object, body=body, options=_RAW_REQUEST, stream=True),
    )
    response = raw.http_response
    try:
        length = response.headers.get("content-length")
        whole = max_bytes is None or (
            length is not None
            and length.isdigit()
            and int(length) <= max_bytes
            and "content-encoding" not in response.headers  # a compressed body is larger than its length says
        )
        try:
            content = (
                b"".join([chunk async for chunk in body_chunks(response)])
                if whole
                else (await read_capped(body_chunks(response), cast(int, max_bytes)))
            )
        except BodyTooLarge as exc:
            exc.status, exc.request_id = response.status_code, response.headers.get("x-request-id")
            raise
    finally:
        await response.aclose()
    return response.status_code, response.headers, content


async def body_chunks(response: httpx2.Response) -> AsyncIterator[bytes]:
    """`response`'s body (decoded of its content-encoding) as it arrives; a read that times out or
    fails raised as the SDK's `APITimeoutError` or `APIConnectionError`, as its own streams do."""
    try:
        async for chunk in response.aiter_bytes():
            yield chunk
    except httpx2.TimeoutException as exc:
        raise openai.APITimeoutError(request=response.request) from exc
    except (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream) as exc:
        raise openai.APIConnectionError(request=response.request) from exc


def environment_proxy(url: str) -> str | None:
    """The proxy URL the environment names for `url` (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY in either
    case, NO_PROXY), exactly as an httpx2 client with `trust_env` picks it; None: direct."""
    target = httpx2.URL(url)
    mounts = sorted(((URLPattern(key), proxy) for key, proxy in get_environment_proxies().items()), key=_first)
    for pattern, proxy in mounts:  # most specific first, as the client's own mounts are ordered
        if pattern.matches(target):
            return proxy
    return None


def _first(item: tuple[URLPattern, str | None]) -> URLPattern:
    return item[0]
