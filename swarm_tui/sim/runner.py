"""Running the simulator: in a daemon thread, in a child process, or in the foreground.

Never in the caller's event loop: the TUI and the engine must not share a loop with the
server they measure, or the server's work would show up as their latency. Thread mode
(the default) gives the server its own loop in a daemon thread; it still shares the GIL,
so benchmarks use process mode, which runs ``python -m swarm_tui.sim`` and reads the
child's single ``swarm-tui sim listening on http://HOST:PORT/v1`` line.

``SimServer.stop()`` is quick even with hung requests in flight: hangs and stalls wake on
shutdown, and aiohttp gets half a second to finish the rest before it cancels them.

The admin helpers (``stats``, ``reset``, ``update_config``) talk HTTP to the server, so
they work the same in both modes and never touch the server's state from another thread.
"""

from __future__ import annotations

import asyncio
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from typing import Any

import httpx

from swarm_tui.sim.args import DEFAULT_PORT, REQUIRE_KEY_ENV, config_to_argv
from swarm_tui.sim.config import SimConfig
from swarm_tui.sim.server import start_site

__all__ = ["SimServer", "serve_forever", "listening_line"]

_LISTENING = re.compile(r"swarm-tui sim listening on (http://\S+?)/v1\s*$")


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def listening_line(host: str, port: int) -> str:
    """The one line a serving simulator prints on stdout once it accepts connections."""
    return f"swarm-tui sim listening on http://{_url_host(host)}:{port}/v1"


class SimServer:
    """A simulator on loopback for the TUI, tests and benchmarks.

    >>> with SimServer(SimConfig(latency_ms=0)).start() as sim:
    ...     client = openai.OpenAI(base_url=sim.base_url, api_key="sk-sim")
    """

    def __init__(self, config: SimConfig | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.config = config or SimConfig()
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        self.mode: str | None = None
        # thread mode
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        # process mode
        self._proc: subprocess.Popen[str] | None = None
        self._http: httpx.Client | None = None

    # -- addresses ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the simulator is not running")
        return self._port

    @property
    def url(self) -> str:
        """The server's root, e.g. ``http://127.0.0.1:PORT``."""
        return f"http://{_url_host(self.host)}:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as ``base_url``: ``http://127.0.0.1:PORT/v1``."""
        return self.url + "/v1"

    @property
    def running(self) -> bool:
        return self._port is not None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, mode: str = "thread", timeout: float = 15.0) -> SimServer:
        """Start serving ("thread" or "process") and return self once it accepts requests."""
        if self._port is not None:
            raise RuntimeError("the simulator is already running")
        if mode == "thread":
            self._start_thread(timeout)
        elif mode == "process":
            self._start_process(timeout)
        else:
            raise ValueError(f"mode must be 'thread' or 'process', not {mode!r}")
        self.mode = mode
        return self

    def _start_thread(self, timeout: float) -> None:
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(target=self._thread_main, name="swarm-tui-sim", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the simulator thread did not start in time")
        if self._error is not None:
            self._thread.join(1.0)
            self._thread = None
            raise RuntimeError(f"the simulator could not start: {self._error}") from self._error

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            try:
                runner, port = loop.run_until_complete(start_site(self.config, self.host, self._requested_port))
            except BaseException as e:  # report to start(), which raises
                self._error = e
                self._ready.set()
                return
            self._port = port
            self._ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            self._loop = None
            loop.close()

    def _start_process(self, timeout: float) -> None:
        argv = [
            sys.executable,
            "-m",
            "swarm_tui.sim",
            "--host",
            self.host,
            "--port",
            str(self._requested_port),
            "--quiet",
            *config_to_argv(self.config),
        ]
        env = dict(os.environ)
        env.pop(REQUIRE_KEY_ENV, None)
        if self.config.require_key is not None:
            env[REQUIRE_KEY_ENV] = self.config.require_key
        env["PYTHONUNBUFFERED"] = "1"
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, env=env)
        lines: queue.Queue[str | None] = queue.Queue()

        def read_first_line() -> None:
            assert proc.stdout is not None
            lines.put(proc.stdout.readline() or None)

        threading.Thread(target=read_first_line, daemon=True).start()
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            line = None
        m = _LISTENING.search(line or "")
        if m is None:
            proc.kill()
            proc.wait(5)
            raise RuntimeError(
                f"the simulator process did not start (exit code {proc.returncode}, first line {line!r})"
            )
        self._proc = proc
        self._port = int(m.group(1).rsplit(":", 1)[1])

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving; quick even with hung requests in flight. Idempotent."""
        if self._http is not None:
            self._http.close()
            self._http = None
        if self._thread is not None:
            loop = self._loop
            if loop is not None:
                try:
                    loop.call_soon_threadsafe(loop.stop)
                except RuntimeError:  # the loop already closed
                    pass
            self._thread.join(timeout)
            self._thread = None
        if self._proc is not None:
            proc = self._proc
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout)
            if proc.stdout is not None:
                proc.stdout.close()
            self._proc = None
        self._port = None
        self.mode = None

    def __enter__(self) -> SimServer:
        if self._port is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:  # a forgotten child process must not outlive us
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()

    # -- admin helpers (HTTP, so both modes behave alike) --------------------------------

    def _client(self) -> httpx.Client:
        if self._http is None:
            # trust_env=False: a proxy from the environment must never see loopback calls.
            self._http = httpx.Client(base_url=self.url, timeout=10.0, trust_env=False)
        return self._http

    def stats(self) -> dict[str, Any]:
        """The ``GET /sim/stats`` counters."""
        r = self._client().get("/sim/stats")
        r.raise_for_status()
        return r.json()

    def reset(self) -> None:
        """Zero the counters and forget seen bodies, cached prefixes and bucket levels."""
        self._client().post("/sim/reset").raise_for_status()

    def update_config(self, **fields: Any) -> dict[str, Any]:
        """Patch ``SimConfig`` fields at runtime (e.g. ``down=True``); returns the new config."""
        r = self._client().post("/sim/config", json=fields)
        if r.status_code == 400:
            raise ValueError(r.json()["error"]["message"])
        r.raise_for_status()
        return r.json()["config"]


async def _serve(config: SimConfig, host: str, port: int, quiet: bool) -> None:
    runner, bound = await start_site(config, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # Windows, or not the main thread
            pass
    print(listening_line(host, bound), flush=True)
    if not quiet:
        limits = ", ".join(f"{k} {v}" for k, v in (("rpm", config.rpm), ("tpm", config.tpm)) if v)
        print(
            f"SIMULATED endpoint: latency {config.latency_ms:g} ms (sigma "
            f"{config.latency_sigma:g}), errors {config.error_rate:g}, hangs "
            f"{config.hang_rate:g}, seed {config.seed}" + (f", {limits}" if limits else "") + ". Ctrl-C stops it.",
            file=sys.stderr,
            flush=True,
        )
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def serve_forever(
    config: SimConfig | None = None, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, quiet: bool = False
) -> None:
    """Serve in the foreground until Ctrl-C / SIGTERM (``swarm-tui sim``)."""
    try:
        asyncio.run(_serve(config or SimConfig(), host, port, quiet))
    except KeyboardInterrupt:
        pass
