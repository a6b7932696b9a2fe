"""Serving an aiohttp application on loopback in a thread of its own, over TLS if asked: the
simulator behind a test CA, or a small scripted server."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading

from aiohttp import web
from swarm_tui.sim import SimConfig
from swarm_tui.sim.server import create_app

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


def clear_proxy_env(monkeypatch) -> None:
    """No proxy variable in either case: each test sets only the ones it is about."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def dead_port() -> int:
    """A loopback port nobody listens on (any more): a direct call to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ThreadedApp:
    """An aiohttp application served on 127.0.0.1 from a daemon thread with its own loop."""

    def __init__(self, app: web.Application, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.app = app
        self.ssl_context = ssl_context
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}/v1"

    def start(self) -> ThreadedApp:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the server did not start")
        return self

    def stop(self) -> None:
        async def cleanup() -> None:
            await self._runner.cleanup()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=0.5)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.ssl_context, backlog=2048)
        self._loop.run_until_complete(site.start())
        self.port = self._runner.addresses[0][1]
        self._started.set()
        self._loop.run_forever()


def simulator_app(**config) -> web.Application:
    """The project's simulator as an application (to serve over TLS, which `SimServer` does not)."""
    return create_app(SimConfig(**{"latency_ms": 1.0, "latency_sigma": 0.3, **config}))
