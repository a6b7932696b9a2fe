"""The aiohttp hot path (the default backend) sends what the SDK would: its headers and bearer
auth, through the environment's proxy (as the httpx backend does: both are run), never following
a redirect."""

from __future__ import annotations

import pytest
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.profile import ProviderProfile

from tests.hostile import HostileServer

BODY = {"model": "sim-1", "max_tokens": 8, "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture
def proxy():
    server = HostileServer().start()
    yield server
    server.stop()


async def test_the_environments_proxy_carries_the_call(sim, proxy, monkeypatch, backend):
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = ProviderClient(ProviderProfile("custom", base_url=sim.base_url, backend=backend), sim.base_url)
    try:
        result = await client.complete(BODY)
    finally:
        await client.aclose()
    assert proxy.requests["POST /v1/chat/completions"] == 1  # the proxy was asked ...
    assert sim.stats()["requests"] == 0  # ... and answered itself (it is no real proxy)
    assert result.body["choices"]


async def test_no_proxy_is_honoured(sim, proxy, monkeypatch, backend):
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    client = ProviderClient(ProviderProfile("custom", base_url=sim.base_url, backend=backend), sim.base_url)
    try:
        await client.complete(BODY)
    finally:
        await client.aclose()
    assert sim.stats()["requests"] == 1 and not proxy.requests


async def test_the_sdks_headers_and_auth_are_sent(sim_factory, monkeypatch):
    sim = sim_factory(require_key="sk-right")
    monkeypatch.setenv("RIGHT_KEY", "sk-right")
    profile = ProviderProfile("custom", base_url=sim.base_url, api_key_env="RIGHT_KEY")
    assert profile.backend == "aiohttp"
    client = ProviderClient(profile, sim.base_url)
    try:
        result = await client.complete(BODY)
        headers = client._direct._headers  # type: ignore[union-attr]
    finally:
        await client.aclose()
    assert result.request_id and headers["User-Agent"].startswith("AsyncOpenAI/Python")
    assert repr(client).count("sk-right") == 0


def test_an_answer_is_kept_as_received_and_spliced_into_results_jsonl(tmp_path, proxy):
    """The journal keeps each answer's bytes; results.jsonl splices them in: a pretty-printed
    answer still makes exactly one line, and its body reads back as the server sent it."""
    import json

    from tests.conftest import read_jsonl, run_cli, write_batch

    server = proxy  # the hostile server, here as the endpoint itself
    job = write_batch(tmp_path / "job.jsonl", ["[[hostile:pretty]] one", "plain two"])
    result = run_cli("run", str(job), "--headless", "--base-url", server.base_url, "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "run" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    rows = {row["custom_id"]: row for row in read_jsonl(tmp_path / "run" / "results.jsonl")}
    pretty = rows["task-0000"]["response"]["body"]
    assert pretty["choices"][0]["message"]["content"].endswith("café")
    assert set(rows["task-0000"]) == {"id", "custom_id", "response", "error"} and rows["task-0000"]["error"] is None
    assert "caf\\u00e9" in lines[0]  # the server's own bytes (encoding it again would have written é)
    assert json.loads(lines[1])["response"]["status_code"] == 200
