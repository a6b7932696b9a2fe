"""The chat hot path on aiohttp: one POST of the body as JSON bytes, the raw answer back.

The openai SDK builds each request through its options, URL and header machinery and httpx2's
models (about 0.9 ms of CPU a call on a 2-core machine: more than the rest of the engine
together). This path sends the same request — the URL with the profile's query, the SDK's own
headers, its bearer auth and the profile's headers, built once — on one aiohttp session, and
hands back status, headers and bytes; the caller reads them exactly as it reads the SDK's raw
response. Streaming, the Batch API and the httpx backend stay on the SDK.

It goes by the client's `Route` (`providers.transport`: the proxy, TLS trust and pool the SDK's
client of the same endpoint uses), never follows a redirect (a POST turned into a GET, prompts
sent elsewhere), and bounds the connect time; the whole call is bounded by its caller's deadline
(the engine's is stall-aware, `swarm_tui.core.stalls`: time the process was stopped is not a call's
time, which an aiohttp total timeout would count). Nothing is resolved per call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp
from yarl import URL

from swarm_tui.providers.body import BodyTooLarge, declared_charset, read_capped
from swarm_tui.providers.transport import Route
from swarm_tui.providers.words import answer_body


class HttpStatusError(Exception):
    """A non-2xx answer on the direct path: classified like the SDK's `APIStatusError`."""

    def __init__(self, status: int, body: Any, headers: Mapping[str, str]) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body
        self.headers = headers

    @property
    def request_id(self) -> str | None:
        return self.headers.get("x-request-id")


class AiohttpChat:
    """POST /chat/completions of one endpoint, with the URL, headers and route built once."""

    def __init__(
        self,
        url: URL,
        headers: Mapping[str, str],
        route: Route,
        *,
        connect_timeout_s: float,
        max_body_bytes: int,
    ) -> None:
        self.url = url
        """The full URL, the profile's query included."""
        self._headers = {**headers, "Content-Type": "application/json", "Accept": "application/json"}
        self._connect_timeout_s = connect_timeout_s
        self._max_body_bytes = max_body_bytes
        """An answer is read up to this (`--max-answer-bytes`): past it, `BodyTooLarge`; an error
        body is cut there."""
        self._session: aiohttp.ClientSession | None = None
        self._route = route
        self._proxy = route.aiohttp_proxy
        self._proxy_headers: dict[str, str] | None = None
        """Sent to the proxy in the CONNECT of an https target; an http target's request carries them."""
        authorization = route.proxy_authorization
        if authorization is not None and url.scheme == "https":
            self._proxy_headers = {"Proxy-Authorization": authorization}
        elif authorization is not None:
            self._headers["Proxy-Authorization"] = authorization

    async def post(self, body: dict[str, Any]) -> tuple[int, Mapping[str, str], bytes]:
        """(status, headers, content) of a 2xx answer; `HttpStatusError` for any other status
        (a redirect included, its body cut at the cap); `BodyTooLarge` for an answer past the cap
        (the rest never read); aiohttp's own errors for a connection that failed."""
        session = self._session or self._open()
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        async with session.post(
            self.url,
            data=data,
            headers=self._headers,
            allow_redirects=False,
            proxy=self._proxy,
            proxy_headers=self._proxy_headers,
        ) as response:
            cap = self._max_body_bytes
            headers = response.headers
            if not 200 <= response.status < 300:
                content = await read_capped(response.content.iter_any(), cap, cut=True)
                raise HttpStatusError(
                    response.status, answer_body(content, declared_charset(headers.get("content-type"))), headers
                )
            length = response.content_length
            if length is not None and length <= cap and "content-encoding" not in headers:
                content = await response.read()  # the common case: its length known, and bounded by it
            else:  # sent in chunks, or compressed (a body larger than its length says)
                try:
                    content = await read_capped(response.content.iter_any(), cap)
                except BodyTooLarge as exc:
                    exc.status, exc.request_id = response.status, headers.get("x-request-id")
                    raise
            return response.status, headers, content

    def _open(self) -> aiohttp.ClientSession:
        self._session = aiohttp.ClientSession(
            connector=self._route.aiohttp_connector(),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout_s),
            trust_env=False,  # the route was resolved once (`transport.route_for`), not in a thread per call
            auto_decompress=True,
        )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
