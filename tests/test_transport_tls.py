"""TLS trust and content encoding, on both backends: an HTTPS simulator whose certificate only a
CA made by the test vouches for is trusted through `SSL_CERT_FILE` or a profile's `ca_bundle`
(and through nothing else), and a gzipped answer or error reads as it would uncompressed."""

from __future__ import annotations

import gzip
import json

import pytest
from aiohttp import web
from swarm_tui.core.call_errors import ErrorClass
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.profile import ProviderProfile

from tests.conftest import read_jsonl, run_cli, write_batch
from tests.servers import ThreadedApp, clear_proxy_env, simulator_app
from tests.tls import make_ca

BODY = {"model": "sim-1", "max_tokens": 8, "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture
def https_sim(tmp_path, monkeypatch):
    clear_proxy_env(monkeypatch)
    ca = make_ca(tmp_path / "ca")
    server = ThreadedApp(simulator_app(batch_seconds=0.1), ssl_context=ca.server_context()).start()
    server.ca = ca  # type: ignore[attr-defined]
    yield server
    server.stop()


def no_trust_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


async def every_kind_of_call(profile: ProviderProfile, base_url: str) -> None:
    """A chat call, a streamed one and a Batch file upload: the three ways a client's calls leave."""
    client = ProviderClient(profile, base_url, attempt_timeout_s=20)
    try:
        assert (await client.complete(BODY)).content
        assert (await client.complete(BODY, stream=True)).content
        line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": BODY}
        assert await client.upload_batch_file("in.jsonl", json.dumps(line).encode() + b"\n")
    finally:
        await client.aclose()


async def test_an_https_simulator_is_trusted_through_ssl_cert_file(https_sim, monkeypatch, backend):
    no_trust_from_the_environment(monkeypatch)
    monkeypatch.setenv("SSL_CERT_FILE", str(https_sim.ca.ca_pem))
    await every_kind_of_call(ProviderProfile("tls", base_url=https_sim.base_url, backend=backend), https_sim.base_url)


async def test_an_https_simulator_is_trusted_through_a_profiles_ca_bundle(https_sim, monkeypatch, backend):
    no_trust_from_the_environment(monkeypatch)
    profile = ProviderProfile("tls", base_url=https_sim.base_url, backend=backend, ca_bundle=str(https_sim.ca.ca_pem))
    assert profile.problem() is None
    await every_kind_of_call(profile, https_sim.base_url)


@pytest.mark.parametrize("stream", [False, True], ids=["chat", "stream"])
async def test_a_certificate_nothing_vouches_for_fails_as_a_connection_error(https_sim, monkeypatch, backend, stream):
    """The control: without the test CA the same calls fail the handshake (so the two above can fail)."""
    no_trust_from_the_environment(monkeypatch)
    client = ProviderClient(ProviderProfile("tls", base_url=https_sim.base_url, backend=backend), https_sim.base_url)
    try:
        with pytest.raises(Exception) as caught:
            await client.complete(BODY, stream=stream)
        error = client.classify(caught.value)
    finally:
        await client.aclose()
    assert error.kind is ErrorClass.CONNECTION, error
    assert "certificate is not trusted" in error.message and "ca_bundle" in error.message, error
    assert not error.retryable, "a certificate nobody vouches for is not trusted the next time either"


def test_a_run_on_an_https_simulator_with_its_ca_bundle_in_the_profile(tmp_path, https_sim, monkeypatch, backend):
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        f'[providers.tls]\nbase_url = "{https_sim.base_url}"\nbackend = "{backend}"\n'
        f'ca_bundle = "{https_sim.ca.ca_pem}"\n'
    )
    job = write_batch(tmp_path / "job.jsonl", [f"secure {i}" for i in range(3)])
    for lane in ([], ["--stream"], ["--lane", "batch", "--batch-poll", "0.05"]):
        out = tmp_path / f"run{len(lane)}"
        result = run_cli(
            "run",
            str(job),
            "--headless",
            "--provider",
            "tls",
            "--out",
            str(out),
            *lane,
            env={"SWARM_TUI_CONFIG": str(config), "SSL_CERT_FILE": "", "SSL_CERT_DIR": ""},
        )
        assert result.returncode == 0, (lane, result.stderr[-3000:])
        assert len(read_jsonl(out / "results.jsonl")) == 3


# --------------------------------------------------------------------------- gzip


@pytest.fixture
def gzipping_server():
    """Every answer gzipped (Content-Encoding: gzip): a chat completion, or a 429 with Retry-After."""

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        if "limit me" in body["messages"][-1]["content"]:
            status, payload = (
                429,
                {
                    "error": {
                        "message": "Rate limit reached, gzipped",
                        "type": "requests",
                        "code": "rate_limit_exceeded",
                    }
                },
            )
        else:
            status, payload = (
                200,
                {
                    "id": "gz-1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "unzipped café"},
                        }
                    ],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
                },
            )
        return web.Response(
            status=status,
            body=gzip.compress(json.dumps(payload).encode()),
            headers={
                "Content-Encoding": "gzip",
                "Content-Type": "application/json",
                "retry-after": "2",
                "x-request-id": "req-gz",
            },
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    server = ThreadedApp(app).start()
    yield server
    server.stop()


async def test_a_gzipped_answer_and_a_gzipped_error_read_as_uncompressed(gzipping_server, monkeypatch, backend):
    clear_proxy_env(monkeypatch)
    profile = ProviderProfile("gz", base_url=gzipping_server.base_url, backend=backend)
    client = ProviderClient(profile, gzipping_server.base_url)
    try:
        result = await client.complete(BODY)
        with pytest.raises(Exception) as caught:
            await client.complete({**BODY, "messages": [{"role": "user", "content": "limit me"}]})
        error = client.classify(caught.value)
    finally:
        await client.aclose()
    assert result.content == "unzipped café" and result.usage.total == 5
    assert json.loads(result.raw)["id"] == "gz-1", "the journal keeps the answer's bytes, uncompressed"
    assert (error.kind, error.retry_after_s, error.request_id) == (ErrorClass.RATE_LIMIT, 2.0, "req-gz")
    assert error.message == "Rate limit reached, gzipped"
