"""The private parts of the openai SDK and httpx2 this project leans on, in one place.

Each has no public equivalent, and each is what makes a call behave exactly as the SDK's:

* `post_raw`: a request sent through the SDK's own request path (auth, headers, timeouts, error
  types) that hands back the raw answer (`RAW_RESPONSE_HEADER`, a `LegacyAPIResponse`) instead
  of building the SDK's models from it, for a body that is plain JSON already.
* `environment_proxy`: the proxy the environment names for a URL, read by httpx2's own code
  (`get_environment_proxies`, `URLPattern`), so the aiohttp hot path goes where the SDK would.

`tests/test_private_apis.py` exercises each against the installed versions: an upgrade that
changes one fails there, not in a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import httpx2
import openai
from httpx2._utils import URLPattern, get_environment_proxies
from openai._constants import RAW_RESPONSE_HEADER
from openai._legacy_response import LegacyAPIResponse

_RAW_REQUEST: Any = {"headers": {RAW_RESPONSE_HEADER: "true"}, "security": {"bearer_auth": True}}
"""Request options of a call sent as is: the raw response back, the key as bearer auth."""


async def post_raw(client: openai.AsyncOpenAI, path: str, body: dict[str, Any]) -> tuple[int, Mapping[str, str], bytes]:
    """POST `body` to `path` through the SDK's request path; (status, headers, content) of a 2xx
    answer (the SDK raises its `APIStatusError` for any other)."""
    raw = cast(LegacyAPIResponse[object], await client.post(path, cast_to=object, body=body, options=_RAW_REQUEST))
    return raw.status_code, raw.headers, raw.content


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
