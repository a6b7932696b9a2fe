"""A small HTTP forward proxy on loopback, in its own thread, that counts what it carries.

It takes requests in absolute form (`POST http://127.0.0.1:PORT/v1/... HTTP/1.1`, what a client
sends to an `http://` proxy for an `http://` target) and `CONNECT host:port` tunnels (an
`https://` target); with `ssl_context` it is itself spoken to over TLS (an `https://` proxy).
With `upstream_port` it also takes origin-form requests and sends them there: a tap in front
of one server, recording every request's path, query and headers.

`routes` maps a port a request names to the port it is sent to: a run whose base URL names a
port nobody listens on can only succeed through the proxy, so every call it made went through.
Each request goes to its target on a connection of its own (`Connection: close`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections import Counter
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

HOP_BY_HOP = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    """Names in lower case."""


class ForwardProxy:
    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        upstream_port: int | None = None,
        routes: dict[int, int] | None = None,
    ) -> None:
        self.ssl_context = ssl_context
        self.upstream_port = upstream_port
        self.routes = dict(routes or {})
        self.hits: Counter[str] = Counter()
        """`METHOD /path` (or `CONNECT host:port`) -> how many went through."""
        self.seen: list[Seen] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> ForwardProxy:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the proxy did not start")
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def paths(self) -> Counter[str]:
        """Hits by `METHOD /path`, the query left out (batch ids and file ids vary)."""
        return Counter(f"{s.method} {s.path}" for s in self.seen)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.ssl_context))
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()
        server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ssl.SSLError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = [
            (name.strip(), value.strip()) for name, _, value in (line.partition(":") for line in lines[1:] if line)
        ]
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            self._record(method, target, "", headers)
            upstream = await asyncio.open_connection("127.0.0.1", self.routes.get(int(port), int(port)))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await self._relay(reader, writer, *upstream)
            return
        if target.startswith("http://"):
            parts = urlsplit(target)
            port, path, query = parts.port or 80, parts.path, parts.query
        elif self.upstream_port is not None:
            parts = urlsplit(target)
            port, path, query = self.upstream_port, parts.path, parts.query
        else:
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            writer.close()
            return
        self._record(method, path, query, headers)
        kept = [(n, v) for n, v in headers if n.lower() not in HOP_BY_HOP]
        request = f"{method} {path}{'?' + query if query else ''} HTTP/1.1\r\n"
        request += "".join(f"{n}: {v}\r\n" for n, v in kept) + "Connection: close\r\n\r\n"
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.routes.get(port, port))
        up_writer.write(request.encode("latin-1"))
        await self._relay(reader, writer, up_reader, up_writer)

    def _record(self, method: str, path: str, query: str, headers: list[tuple[str, str]]) -> None:
        self.hits[f"{method} {path}"] += 1
        self.seen.append(
            Seen(method, path, dict(parse_qsl(query, keep_blank_values=True)), {n.lower(): v for n, v in headers})
        )

    @staticmethod
    async def _relay(reader, writer, up_reader, up_writer) -> None:
        """Bytes both ways until the target closes (it answers one request, then closes)."""

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, ssl.SSLError, asyncio.IncompleteReadError):
                while chunk := await source.read(65536):
                    sink.write(chunk)
                    await sink.drain()

        async def send() -> None:
            await pipe(reader, up_writer)
            up_writer.close()  # the client is done (a tunnel it closed): so is the target

        upload = asyncio.ensure_future(send())
        await pipe(up_reader, writer)
        upload.cancel()
        with contextlib.suppress(BaseException):
            await upload
        for w in (writer, up_writer):
            with contextlib.suppress(Exception):
                w.close()
