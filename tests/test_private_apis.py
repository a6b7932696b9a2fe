"""The private APIs of openai and httpx2 that `swarm_tui.providers.private_apis` leans on, checked
against the installed versions: an upgrade that renames, moves or changes one fails here.

Also: no module of the project but that one imports a private name of openai, httpx2 or aiohttp.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import httpx2
import openai
import pytest
from swarm_tui.providers import private_apis

from tests.servers import clear_proxy_env

PACKAGE = Path(private_apis.__file__).resolve().parent.parent


def test_the_raw_response_header_and_type_are_what_post_raw_relies_on():
    from openai._constants import RAW_RESPONSE_HEADER
    from openai._legacy_response import LegacyAPIResponse

    assert RAW_RESPONSE_HEADER == "X-Stainless-Raw-Response"
    for name in ("status_code", "headers", "content"):
        assert isinstance(inspect.getattr_static(LegacyAPIResponse, name), property), name
    assert {"path", "cast_to", "body", "options"} <= set(inspect.signature(openai.AsyncOpenAI.post).parameters)


async def test_post_raw_hands_back_the_answer_as_received(sim):
    client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="sk-sim", max_retries=0)
    try:
        body = {"model": "sim-1", "max_tokens": 4, "messages": [{"role": "user", "content": "raw"}]}
        status, headers, content = await private_apis.post_raw(client, "/chat/completions", body)
    finally:
        await client.close()
    assert status == 200 and headers.get("content-type", "").startswith("application/json")
    assert isinstance(content, bytes) and b'"choices"' in content


@pytest.mark.parametrize(
    "env, url, expected",
    [
        ({"ALL_PROXY": "http://p:1"}, "http://api.example.com/v1", "http://p:1"),
        ({"all_proxy": "p:2"}, "https://api.example.com/v1", "http://p:2"),  # no scheme: http://, as httpx2 says
        ({"HTTPS_PROXY": "https://p:3", "HTTP_PROXY": "http://p:4"}, "https://api.example.com/v1", "https://p:3"),
        ({"HTTPS_PROXY": "https://p:3", "HTTP_PROXY": "http://p:4"}, "http://api.example.com/v1", "http://p:4"),
        ({"ALL_PROXY": "http://p:1", "NO_PROXY": "example.com"}, "https://api.example.com/v1", None),
        ({"ALL_PROXY": "http://p:1", "NO_PROXY": "other.com"}, "https://api.example.com/v1", "http://p:1"),
        ({"ALL_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8"}, "http://10.1.2.3:8000/v1", None),
        ({"ALL_PROXY": "http://p:1", "NO_PROXY": "*"}, "http://api.example.com/v1", None),
        ({}, "http://api.example.com/v1", None),
    ],
)
def test_the_environments_proxy_is_picked_as_an_httpx2_client_picks_it(monkeypatch, env, url, expected):
    clear_proxy_env(monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert private_apis.environment_proxy(url) == expected
    # the same answer as the client itself, through its own (private) lookup
    client = httpx2.AsyncClient()
    transport = client._transport_for_url(httpx2.URL(url))
    pool = getattr(transport, "_pool", None)
    proxy_url = getattr(pool, "_proxy_url", None)
    shown = None if proxy_url is None else f"{proxy_url.scheme.decode()}://{proxy_url.host.decode()}:{proxy_url.port}"
    assert shown == expected


def test_no_other_module_imports_a_private_name_of_the_http_stack():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "private_apis.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                top, *rest = name.split(".")
                if top in ("openai", "httpx2", "httpx", "aiohttp") and any(part.startswith("_") for part in rest):
                    offenders.append(f"{path.relative_to(PACKAGE)}: {name}")
    assert offenders == []


def test_the_sdk_client_takes_the_profiles_headers_and_query_as_its_defaults():
    """client.py hands them over so; the hot path reads the merged headers back (`default_headers`)."""
    client = openai.AsyncOpenAI(
        base_url="http://127.0.0.1:9/v1",
        api_key="sk-x",
        default_headers={"X-Title": "t"},
        default_query={"api-version": "1"},
    )
    assert client.default_headers["X-Title"] == "t" and client.default_query == {"api-version": "1"}
    assert client.auth_headers == {"Authorization": "Bearer sk-x"}
