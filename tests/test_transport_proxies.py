"""Proxies and the pool, on both backends: every call of a run takes the one route the SDK's own
client would take (`providers.transport`), and the pool never holds back a call the engine sent.

The proxy here is real (tests/forward_proxy.py) and the target's base URL names a port nobody
listens on, which only the proxy maps to the simulator: a run that succeeds sent every call
through the proxy, since any call that went around it was refused.
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from aiohttp import web
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.profile import ProviderProfile

from tests.conftest import read_jsonl, run_cli, write_batch
from tests.forward_proxy import ForwardProxy
from tests.servers import ThreadedApp, clear_proxy_env, dead_port
from tests.tls import make_ca

BODY = {"model": "sim-1", "max_tokens": 8, "messages": [{"role": "user", "content": "hello"}]}
LANES = {
    "live": [],
    "stream": ["--stream"],
    "batch": ["--lane", "batch", "--batch-poll", "0.05"],
}


@pytest.fixture
def proxies():
    started: list[ForwardProxy] = []

    def start(**options) -> ForwardProxy:
        proxy = ForwardProxy(**options).start()
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


async def call(profile: ProviderProfile, base_url: str, *, stream: bool = False):
    client = ProviderClient(profile, base_url, attempt_timeout_s=20)
    try:
        return await client.complete(BODY, stream=stream)
    finally:
        await client.aclose()


@pytest.mark.parametrize("lane", LANES)
def test_with_only_all_proxy_set_every_call_of_a_run_goes_through_the_proxy(
    tmp_path, sim_factory, proxies, monkeypatch, backend, lane
):
    sim = sim_factory(batch_seconds=0.1)
    port = dead_port()
    proxy = proxies(routes={port: sim.port})
    clear_proxy_env(monkeypatch)
    job = write_batch(tmp_path / "job.jsonl", [f"proxied task {i}" for i in range(5)])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
        "--backend",
        backend,
        "--out",
        str(tmp_path / "run"),
        "--max-attempts",
        "2",
        *LANES[lane],
        env={"ALL_PROXY": proxy.url},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(read_jsonl(tmp_path / "run" / "results.jsonl")) == 5
    hits = proxy.paths()
    if lane == "batch":
        assert hits["POST /v1/files"] == 1 and hits["POST /v1/batches"] == 1, hits
        assert any(path.startswith("GET /v1/batches/") for path in hits), hits
        assert any(path.startswith("GET /v1/files/") and path.endswith("/content") for path in hits), hits
        assert sim.stats()["batch"]["lines_submitted"] == 5
    else:
        assert hits == {"POST /v1/chat/completions": 5}, hits
        assert sim.stats()["successes"] == 5


async def test_an_https_proxy_is_spoken_to_over_tls(sim, proxies, monkeypatch, tmp_path, backend):
    """aiohttp 3.14 speaks TLS to an https:// proxy: it is used, not dropped with a warning."""
    ca = make_ca(tmp_path / "ca")
    port = dead_port()
    proxy = proxies(ssl_context=ca.server_context(), routes={port: sim.port})
    clear_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_pem))  # the proxy's certificate is the test CA's
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    assert proxy.url.startswith("https://")
    profile = ProviderProfile("custom", base_url=f"http://127.0.0.1:{port}/v1", backend=backend)
    plain = await call(profile, profile.base_url)
    streamed = await call(profile, profile.base_url, stream=True)
    assert plain.content and streamed.content
    assert proxy.hits["POST /v1/chat/completions"] == 2


async def test_an_https_target_is_tunnelled_through_the_proxy(proxies, monkeypatch, tmp_path, backend):
    from tests.servers import simulator_app

    ca = make_ca(tmp_path / "ca")
    server = ThreadedApp(simulator_app(), ssl_context=ca.server_context()).start()
    try:
        port = dead_port()
        proxy = proxies(routes={port: server.port})
        clear_proxy_env(monkeypatch)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        base_url = f"https://127.0.0.1:{port}/v1"
        profile = ProviderProfile("custom", base_url=base_url, backend=backend, ca_bundle=str(ca.ca_pem))
        assert (await call(profile, base_url)).content and (await call(profile, base_url, stream=True)).content
        assert proxy.hits[f"CONNECT 127.0.0.1:{port}"] == 2
    finally:
        server.stop()


async def test_no_proxy_sends_the_call_direct(sim, proxies, monkeypatch, backend):
    proxy = proxies()
    clear_proxy_env(monkeypatch)
    monkeypatch.setenv("ALL_PROXY", proxy.url)
    monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")
    profile = ProviderProfile("custom", base_url=sim.base_url, backend=backend)
    await call(profile, sim.base_url)
    await call(profile, sim.base_url, stream=True)
    assert sim.stats()["requests"] == 2 and not proxy.hits


async def test_a_profiles_proxy_wins_over_the_environments(sim, proxies, monkeypatch, backend):
    port = dead_port()
    chosen = proxies(routes={port: sim.port})
    clear_proxy_env(monkeypatch)
    monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.1:{dead_port()}")  # would refuse every call
    profile = ProviderProfile("custom", base_url=f"http://127.0.0.1:{port}/v1", backend=backend, proxy=chosen.url)
    assert profile.problem() is None
    await call(profile, profile.base_url)
    await call(profile, profile.base_url, stream=True)
    assert chosen.hits["POST /v1/chat/completions"] == 2


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_a_proxys_credentials_are_sent_to_it_and_never_kept(sim, proxies, monkeypatch, backend, tmp_path, scheme):
    """In the request of an http target, in the CONNECT of an https one."""
    from tests.servers import simulator_app

    ca = make_ca(tmp_path / "ca")
    target = ThreadedApp(simulator_app(), ssl_context=ca.server_context()).start() if scheme == "https" else sim
    try:
        port = dead_port()
        proxy = proxies(routes={port: target.port})
        clear_proxy_env(monkeypatch)
        monkeypatch.setenv("ALL_PROXY", f"http://corp:pw-{'9' * 12}@127.0.0.1:{proxy.port}")
        profile = ProviderProfile(
            "custom", base_url=f"{scheme}://127.0.0.1:{port}/v1", backend=backend, ca_bundle=str(ca.ca_pem)
        )
        await call(profile, profile.base_url)
        await call(profile, profile.base_url, stream=True)
        client = ProviderClient(profile, profile.base_url)
        try:
            assert "9" * 12 not in client.route.describe() + repr(client)
        finally:
            await client.aclose()
    finally:
        if scheme == "https":
            target.stop()
    expected = "Basic " + base64.b64encode(f"corp:pw-{'9' * 12}".encode()).decode()
    assert len(proxy.seen) == 2, proxy.hits
    assert [seen.headers.get("proxy-authorization") for seen in proxy.seen] == [expected, expected]
    assert all(seen.method == ("CONNECT" if scheme == "https" else "POST") for seen in proxy.seen)


@pytest.mark.parametrize("variable", ["ALL_PROXY", "https_proxy"])
def test_a_socks_proxy_the_backend_cannot_speak_is_refused_before_anything_is_sent(
    tmp_path, sim, monkeypatch, backend, variable
):
    clear_proxy_env(monkeypatch)
    job = write_batch(tmp_path / "job.jsonl", ["never sent"])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url.replace("http:", "https:"),
        "--backend",
        backend,
        "--out",
        str(tmp_path / "run"),
        env={variable: "socks5://127.0.0.1:1080"},
    )
    assert result.returncode == 2, result.stderr
    assert "SOCKS" in result.stderr and "Traceback" not in result.stderr
    assert ("--backend httpx" in result.stderr) == (backend == "aiohttp")
    assert "socksio" in result.stderr
    assert not (tmp_path / "run").exists() and sim.stats()["requests"] == 0


# --------------------------------------------------------------------------- the pool

IN_FLIGHT = 1010
"""More calls at once than the pool's old cap (1,000, the SDK's default): each must reach the server."""


@pytest.fixture
def gathering_server():
    """Answers nothing until IN_FLIGHT requests are in at once (or 60 s have passed: then a 503)."""
    arrived = 0
    everyone = asyncio.Event()

    async def chat(request: web.Request) -> web.StreamResponse:
        nonlocal arrived
        body = await request.json()
        arrived += 1
        if arrived >= IN_FLIGHT:
            everyone.set()
        try:
            await asyncio.wait_for(everyone.wait(), 60)
        except TimeoutError:
            return web.json_response(
                {"error": {"message": f"only {arrived} arrived", "type": "server_error"}}, status=503
            )
        answer = {
            "id": "x",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "together"}, "finish_reason": "stop"}],
        }
        if body.get("stream"):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            chunk = {
                **answer,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": "together"}, "finish_reason": "stop"}],
            }
            await response.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
            return response
        return web.json_response(answer)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    server = ThreadedApp(app).start()
    yield server
    server.stop()


@pytest.mark.parametrize("stream", [False, True], ids=["chat", "stream"])
async def test_the_pool_never_queues_a_call_the_engine_sent(gathering_server, monkeypatch, backend, stream):
    clear_proxy_env(monkeypatch)
    profile = ProviderProfile("custom", base_url=gathering_server.base_url, backend=backend)
    client = ProviderClient(profile, gathering_server.base_url, attempt_timeout_s=90)
    try:
        results = await asyncio.gather(
            *(client.complete(BODY, stream=stream) for _ in range(IN_FLIGHT)), return_exceptions=True
        )
    finally:
        await client.aclose()
    failures = [client.classify(r) for r in results if isinstance(r, BaseException)]
    assert not failures, f"{len(failures)} failed, e.g. {failures[0]}"
    assert all(r.content == "together" for r in results)


def test_an_unreadable_ca_bundle_is_refused_at_start(tmp_path, sim):
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir()
    config.write_text(f'[providers.corp]\nbase_url = "{sim.base_url}"\nca_bundle = "{tmp_path}/missing.pem"\n')
    job = write_batch(tmp_path / "job.jsonl", ["never sent"])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--provider",
        "corp",
        "--out",
        str(tmp_path / "run"),
        env={"SWARM_TUI_CONFIG": str(config)},
    )
    assert result.returncode == 2, result.stderr
    assert "ca_bundle" in result.stderr and "missing.pem" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists() and sim.stats()["requests"] == 0
