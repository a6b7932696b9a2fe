"""A profile's `headers`, `headers_env` and `query`, and a `base_url` with a query string, on
every call of that profile (chat on both backends, streaming, files, batches, the probe of
`providers test`), seen by a tap in front of the simulator; and never a secret where it is kept.
"""

from __future__ import annotations

import pytest
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.profile import ProviderProfile

from tests.conftest import read_jsonl, run_cli, write_batch
from tests.forward_proxy import ForwardProxy
from tests.servers import clear_proxy_env

AZURE_KEY = "azk-0123456789abcdefSECRET"
LANES = {
    "live": [],
    "stream": ["--stream"],
    "batch": ["--lane", "batch", "--batch-poll", "0.05"],
}


@pytest.fixture
def tap(sim_factory):
    """A recording hop in front of a simulator: base URLs on its port reach the simulator."""
    sim = sim_factory(batch_seconds=0.1)
    proxy = ForwardProxy(upstream_port=sim.port).start()
    proxy.sim = sim  # type: ignore[attr-defined]
    yield proxy
    proxy.stop()


def write_config(tmp_path, table: str):
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(table, encoding="utf-8")
    return config


def azure_profile(tap_port: int, backend: str) -> str:
    return (
        f'[providers.azure]\nbase_url = "http://127.0.0.1:{tap_port}/openai/v1"\nbackend = "{backend}"\n'
        'api_key_env = "AZURE_KEY"\n'
        'headers = { "X-Title" = "swarm test", "HTTP-Referer" = "https://example.org/app" }\n'
        'headers_env = { "api-key" = "AZURE_KEY" }\n'
        'query = { "api-version" = "2024-10-21" }\n'
    )


@pytest.mark.parametrize("lane", LANES)
def test_a_profiles_headers_and_query_reach_every_call_of_a_run(tmp_path, tap, monkeypatch, backend, lane):
    clear_proxy_env(monkeypatch)
    config = write_config(tmp_path, azure_profile(tap.port, backend).replace("/openai/v1", "/v1"))
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(4)])
    env = {"SWARM_TUI_CONFIG": str(config), "AZURE_KEY": AZURE_KEY}
    result = run_cli(
        "run", str(job), "--headless", "--provider", "azure", "--out", str(tmp_path / "run"), *LANES[lane], env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(read_jsonl(tmp_path / "run" / "results.jsonl")) == 4
    paths = {seen.path for seen in tap.seen}
    if lane == "batch":  # the file, the batch, its polls, its output
        assert {"/v1/files", "/v1/batches"} <= paths and any(p.endswith("/content") for p in paths), paths
    else:
        assert paths == {"/v1/chat/completions"} and len(tap.seen) == 4, tap.hits
    for seen in tap.seen:
        assert seen.headers.get("x-title") == "swarm test", seen
        assert seen.headers.get("http-referer") == "https://example.org/app", seen
        assert seen.headers.get("api-key") == AZURE_KEY, seen
        assert seen.headers.get("authorization") == f"Bearer {AZURE_KEY}", seen
        assert seen.query.get("api-version") == "2024-10-21", seen
    for path in (tmp_path / "run").rglob("*"):  # the journal keeps the profile: names, never the key
        if path.is_file():
            assert AZURE_KEY.encode() not in path.read_bytes(), path
    assert AZURE_KEY not in result.stderr + result.stdout

    probe = run_cli("providers", "test", "azure", env=env)
    assert probe.returncode == 0, probe.stderr + probe.stdout
    last = tap.seen[-1]
    assert last.path == "/v1/chat/completions" and last.query == {"api-version": "2024-10-21"}
    assert (last.headers["x-title"], last.headers["api-key"]) == ("swarm test", AZURE_KEY)


async def test_a_base_url_with_a_query_sends_it_on_every_request(tap, monkeypatch, backend):
    """`.../v1?api-version=...` is split: the query goes on every URL, never glued before a path."""
    clear_proxy_env(monkeypatch)
    base_url = f"http://127.0.0.1:{tap.port}/v1?api-version=2024-10-21&deployment=gpt"
    profile = ProviderProfile("azure", base_url=base_url, backend=backend, query={"deployment": "mini"})
    assert profile.problem() is None
    client = ProviderClient(profile, base_url)
    body = {"model": "sim-1", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    try:
        assert (await client.complete(body)).content
        assert (await client.complete(body, stream=True)).content
        line = (
            b'{"custom_id": "t-1", "method": "POST", "url": "/v1/chat/completions", "body": '
            + b'{"model": "sim-1", "messages": [{"role": "user", "content": "hi"}]}}\n'
        )
        file_id = await client.upload_batch_file("in.jsonl", line)
        batch = await client.create_batch(file_id, {"run": "test"})
        assert (await client.retrieve_batch(batch["id"]))["id"] == batch["id"]
        assert (await client.find_batch(file_id))["id"] == batch["id"]
        await client.file_content(file_id)
    finally:
        await client.aclose()
    assert {seen.path for seen in tap.seen} >= {
        "/v1/chat/completions",
        "/v1/files",
        "/v1/batches",
        f"/v1/batches/{batch['id']}",
        f"/v1/files/{file_id}/content",
    }
    for seen in tap.seen:
        assert seen.query.get("api-version") == "2024-10-21", seen
        assert seen.query.get("deployment") == "mini", "the profile's query wins over the base URL's"
        assert "?" not in seen.path


def test_a_secret_header_in_the_config_is_refused_without_showing_it(tmp_path):
    secret = "sk-proj-abcDEF0123456789ghiJKL0123456789"
    for table, field in [
        (f'headers = {{ "api-key" = "{secret}" }}', "providers.relay.headers.api-key"),
        (f'headers = {{ "X-Relay" = "Bearer {secret}" }}', "providers.relay.headers.X-Relay"),
        (f'query = {{ "key" = "{secret}" }}', "providers.relay.query.key"),
        ('headers_env = { "api-key" = "' + secret + '" }', "providers.relay.headers_env.api-key"),
        ('proxy = "http://me:' + secret + '@proxy.example:3128"', "providers.relay.proxy"),
    ]:
        config = write_config(tmp_path, f'[providers.relay]\nbase_url = "https://api.example.com/v1"\n{table}\n')
        result = run_cli("providers", "list", env={"SWARM_TUI_CONFIG": str(config)})
        assert result.returncode == 2, (table, result.stderr)
        assert field in result.stderr and "not shown" in result.stderr, result.stderr
        assert secret not in result.stderr + result.stdout


def test_a_base_url_carrying_a_key_in_its_query_is_refused(tmp_path):
    config = write_config(
        tmp_path, '[providers.relay]\nbase_url = "https://api.example.com/v1?key=AIzaSyA0123456789"\n'
    )
    result = run_cli("providers", "list", env={"SWARM_TUI_CONFIG": str(config)})
    assert result.returncode == 2 and "providers.relay.base_url" in result.stderr, result.stderr
    assert "AIzaSyA0123456789" not in result.stderr


def test_providers_list_shows_headers_query_and_route_with_secrets_masked(tmp_path, monkeypatch):
    clear_proxy_env(monkeypatch)
    config = write_config(tmp_path, azure_profile(9, "httpx") + 'proxy = "http://proxy.example:3128"\n')
    result = run_cli("providers", "list", env={"SWARM_TUI_CONFIG": str(config), "AZURE_KEY": AZURE_KEY})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "headers: X-Title: swarm test, HTTP-Referer: https://example.org/app" in out
    assert "headers from the environment: api-key: $AZURE_KEY (set)" in out
    assert "query: api-version=2024-10-21" in out
    assert "route: via proxy http://proxy.example:3128 (the profile)" in out
    assert "backend: httpx" in out and AZURE_KEY not in out


def test_a_header_env_var_that_is_not_set_stops_the_run_before_anything_is_sent(tmp_path, tap, monkeypatch):
    clear_proxy_env(monkeypatch)
    config = write_config(tmp_path, azure_profile(tap.port, "aiohttp"))
    job = write_batch(tmp_path / "job.jsonl", ["never sent"])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--provider",
        "azure",
        "--out",
        str(tmp_path / "run"),
        env={"SWARM_TUI_CONFIG": str(config), "AZURE_KEY": ""},
    )
    assert result.returncode == 2, result.stderr
    assert "AZURE_KEY" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists() and not tap.seen


def test_a_profiles_route_settings_round_trip_through_the_config_and_the_journal(tmp_path):
    from swarm_tui.config import Config, load_config
    from swarm_tui.engine import EngineSettings
    from swarm_tui.records import RunPlan

    profile = ProviderProfile(
        "azure",
        base_url="https://r.example/openai/v1",
        headers={"X-Title": "t"},
        headers_env={"api-key": "AZURE_KEY"},
        query={"api-version": "2024-10-21"},
        proxy="http://proxy.example:3128",
        ca_bundle="/etc/corp.pem",
    )
    path = tmp_path / "config.toml"
    Config(path=path).save_profile(profile)
    assert load_config(path).profile("azure") == profile
    assert RunPlan.from_meta(RunPlan(profile, EngineSettings()).to_meta()).profile == profile
    fallback = ProviderProfile(
        "p",
        base_url="https://a.example/v1",
        fallback_base_url="https://b.example/v1",
        headers_env={"api-key": "AZURE_KEY"},
        proxy="http://proxy.example:3128",
    ).fallback()
    assert fallback is not None and fallback.proxy == "http://proxy.example:3128" and not fallback.headers_env


async def test_a_profile_made_in_code_with_a_secret_header_is_refused_before_a_call(sim):
    from swarm_tui.core.errors import InputError

    profile = ProviderProfile("custom", base_url=sim.base_url, headers={"Authorization": "Bearer sk-live-0123456789"})
    with pytest.raises(InputError) as caught:
        ProviderClient(profile, sim.base_url)
    assert "headers.Authorization" in str(caught.value) and "sk-live" not in str(caught.value)
    assert sim.stats()["requests"] == 0
