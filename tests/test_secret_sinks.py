"""Secrets in every spelling, out of every sink (a key, a secret header, a secret query value).

* **Every spelling**: a key echoed as other encoders write it (urllib's `quote`, which keeps a `/`;
  that upper-cased; URL-encoded twice; PHP's `\\/` and .NET's `\\u002B` JSON escapes, which any
  JSON reader turns back into the key; HTML entities) never reaches the journal, results.jsonl or
  errors.jsonl.
* **Every secret**: the value of a header read from `headers_env`, and of a query parameter read
  from `query_env`, is masked as the key is (it was masked in a classified error only: an answer
  echoing it was journaled as received).
* **A secret in the config**: a query parameter whose value looks like a secret (an Azure
  Functions `?code=`, a long hex token) is refused before anything is sent, naming the profile and
  field, never the value; `query_env` carries it instead, read from the environment, masked.
* **Every sink**: the traces (`--otel-content` put a prompt's key on the spans raw), a tool's
  result (only the journal's connection masks it: this test fails without that layer), the
  console's detail of a live agent.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path
from urllib.parse import quote

import pytest
from swarm_tui.util import secrets

from tests.conftest import read_jsonl, run_cli, write_batch
from tests.hostile_answers import ByteHostileServer
from tests.servers import clear_proxy_env

KEY = "sk-Sink-0123456789abcdefGHIJ/klmn+4567"
"""A key with characters URL-encoding, JSON escapes and base64 change (`/`, `+`) and both cases."""


def spellings(secret: str) -> list[bytes]:
    """What must never appear: the secret in each spelling a provider, a tool or a file may hold it."""
    texts = {
        secret,
        secret.lower(),
        secret.upper(),
        quote(secret, safe=""),
        quote(secret),  # urllib's default keeps `/`
        quote(secret).upper(),
        quote(quote(secret, safe=""), safe=""),
        secret.replace("/", "\\/"),  # PHP's json_encode
        secret.replace("+", "\\u002B"),  # .NET's System.Text.Json
        secret.replace("/", "&#x2F;"),
        base64.b64encode(secret.encode()).decode(),
    }
    return [t.encode() for t in texts]


def assert_nowhere(data: bytes, where: str, secret: str = KEY) -> None:
    for spelling in spellings(secret):
        assert spelling not in data, f"{spelling!r} in {where}"


def assert_no_file_holds(run_dir: Path, secret: str = KEY) -> None:
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"journal.sqlite", "summary.json"}
    for path in files:
        assert_nowhere(path.read_bytes(), str(path), secret)


@pytest.fixture
def echoing(monkeypatch):
    clear_proxy_env(monkeypatch)
    servers: list[ByteHostileServer] = []

    def start(**kwargs) -> ByteHostileServer:
        server = ByteHostileServer(**kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


# --------------------------------------------------------------------------- every spelling


def test_every_spelling_an_encoder_may_give_a_key_is_masked():
    secrets.register(KEY)
    for spelling in spellings(KEY):
        text = spelling.decode()
        masked = secrets.mask(f"before {text} after")
        assert masked == "before *** after" or (masked.startswith("before ") and "***" in masked), text
        assert_nowhere(masked.encode(), f"the mask of {text!r}")
    assert secrets.found_in(quote(KEY).encode()) and secrets.found_in(KEY.replace("/", "\\/").encode())
    assert secrets.mask("sk-Sink-0123456789 and /klmn+4567 apart") == "sk-Sink-0123456789 and /klmn+4567 apart"
    choppy = "ab12/Cd34/ef56/gh78+ij90"  # runs of letters and digits shorter than a key's usual
    secrets.register(choppy)
    for spelling in spellings(choppy):
        assert secrets.mask(f"x {spelling.decode()} y") == "x *** y", spelling


def test_a_key_echoed_as_other_encoders_spell_it_never_reaches_a_file(tmp_path, echoing):
    server = echoing()
    job = write_batch(tmp_path / "job.jsonl", ["t0 [[hostile:keyquote]]", "t1 [[hostile:keyescaped]]"])
    run_dir = tmp_path / "run"
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        server.base_url,
        "--api-key-env",
        "RELAY_KEY",
        "--out",
        str(run_dir),
        env={"RELAY_KEY": KEY},
    )
    assert result.returncode == 1, result.stderr
    assert_no_file_holds(run_dir)
    assert_nowhere((result.stdout + result.stderr).encode(), "the CLI's output")
    [answer] = read_jsonl(run_dir / "results.jsonl")
    assert answer["response"]["body"]["choices"][0]["message"]["content"].endswith("(you sent ***)")
    [error] = read_jsonl(run_dir / "errors.jsonl")
    assert error["error"]["message"] == "bad key *** / *** / *** / ***", error


# --------------------------------------------------------------------------- every secret

HEADER_SECRET = "0123456789abcdef0123456789abcdef"
"""An Azure-style `api-key` header value (32 hex characters)."""
QUERY_SECRET = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFla/+ab=="
"""An Azure Functions `code` (base64, with the characters URL-encoding changes)."""


def write_config(tmp_path: Path, table: str) -> Path:
    config = tmp_path / "config" / "config.toml"  # SWARM_TUI_CONFIG (conftest)
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(table)
    return config


def test_a_secret_header_and_a_secret_query_value_are_masked_as_the_key_is(tmp_path, echoing):
    server = echoing()
    write_config(
        tmp_path,
        f'[providers.azfunc]\nbase_url = "{server.base_url}"\nmodel = "m"\n'
        'headers_env = { "api-key" = "AZ_KEY" }\nquery_env = { code = "AZ_CODE" }\n',
    )
    job = write_batch(tmp_path / "job.jsonl", ["t0 [[hostile:echoall]]", "t1"])
    run_dir = tmp_path / "run"
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--provider",
        "azfunc",
        "--out",
        str(run_dir),
        env={"AZ_KEY": HEADER_SECRET, "AZ_CODE": QUERY_SECRET},
    )
    assert result.returncode == 0, result.stderr
    answers = {line["custom_id"]: line for line in read_jsonl(run_dir / "results.jsonl")}
    echoed = answers["task-0000"]["response"]["body"]["choices"][0]["message"]["content"]
    assert echoed.endswith("(you sent api-key *** query code=***)"), echoed  # both were sent, both masked
    assert answers["task-0000"]["response"]["request_id"] == "req-***"
    for secret in (HEADER_SECRET, QUERY_SECRET):
        assert_no_file_holds(run_dir, secret)
        assert_nowhere((result.stdout + result.stderr).encode(), "the CLI's output", secret)


@pytest.mark.parametrize(
    "table, field",
    [
        (f'query = {{ code = "{QUERY_SECRET}" }}', "providers.azfunc.query.code"),
        ('query = { access = "9f86d081884c7d659a2feaa0c55ad015" }', "providers.azfunc.query.access"),
        ('base_url = "https://x.azurewebsites.net/api?access=9f86d081884c7d659a2feaa0c55ad015"', "base_url"),
    ],
    ids=["base64", "hex", "in-base-url"],
)
def test_a_query_value_that_looks_like_a_secret_is_refused_naming_its_field_never_its_value(tmp_path, table, field):
    base_url = "" if table.startswith("base_url") else 'base_url = "https://x.azurewebsites.net/api"\n'
    write_config(tmp_path, f'[providers.azfunc]\n{base_url}{table}\nmodel = "m"\n')
    job = write_batch(tmp_path / "job.jsonl", ["t0"])
    result = run_cli("run", str(job), "--headless", "--provider", "azfunc", "--out", str(tmp_path / "run"))
    assert result.returncode == 2, result.stderr
    assert field in result.stderr and "query_env" in result.stderr, result.stderr
    assert QUERY_SECRET not in result.stderr and "9f86d081884c7d659a2feaa0c55ad015" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_query_values_that_are_no_secret_are_kept(tmp_path):
    from swarm_tui.providers.profile import ProviderProfile

    for value in (
        "2024-10-21",
        "preview",
        "gpt-4.1-mini-2025-04-14",
        "c5b4d6e2-1f3a-4b8c-9d0e-7a6b5c4d3e2f",
        "eastus2",
    ):
        assert ProviderProfile("p", base_url="https://x.example/v1", query={"v": value}).problem() is None, value


# --------------------------------------------------------------------------- every sink


def test_the_traces_never_carry_a_key_written_in_a_prompt(tmp_path, echoing):
    from tests.otlp_receiver import OtlpReceiver

    receiver = OtlpReceiver().start()
    server = echoing()
    try:
        job = write_batch(tmp_path / "job.jsonl", [f"t0 use {KEY} then {quote(KEY)}", "t1 [[hostile:keyok]]"])
        run_dir = tmp_path / "run"
        result = run_cli(
            "run",
            str(job),
            "--headless",
            "--base-url",
            server.base_url,
            "--api-key-env",
            "RELAY_KEY",
            "--otel-content",
            "--out",
            str(run_dir),
            env={"RELAY_KEY": KEY, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url},
        )
        assert result.returncode == 0, result.stderr
        spans = list(receiver.spans)
    finally:
        receiver.stop()
    inputs = [s.attributes["gen_ai.input.messages"] for s in spans if "gen_ai.input.messages" in s.attributes]
    assert any("t0 use *** then ***" in text for text in inputs), inputs  # the content is there, masked
    assert_nowhere(repr(spans).encode(), "the spans the collector got")


async def test_a_tool_result_holding_the_key_is_masked_in_the_journal_and_transcripts(
    tmp_path, sim_factory, monkeypatch
):
    """Only the journal's connection masks a tool's result (the model is given the result as the
    tool answered it): this fails without that layer."""
    from dataclasses import replace

    from swarm_tui.engine import EngineSettings
    from swarm_tui.jobs import load_job
    from swarm_tui.providers.profile import ProviderProfile
    from swarm_tui.run.session import RunPlan, SwarmSession
    from swarm_tui.tools.spec import PythonToolSpec, ToolsSpec

    monkeypatch.setenv("RELAY_KEY", KEY)
    sim = sim_factory(latency_ms=1)
    job = load_job(
        write_batch(tmp_path / "job.jsonl", [f"agent {i} [[sim:tools=1]]" for i in range(3)], max_tokens=512)
    )
    tools = ToolsSpec(python=(PythonToolSpec("tests.agent_tools:reveal", where="tools.python[0]"),), max_steps=3)
    job = replace(job, tools=tools)
    profile = ProviderProfile("custom", base_url=sim.base_url, api_key_env="RELAY_KEY")
    session = SwarmSession.open_new(job, RunPlan(profile, EngineSettings.of(concurrency=3)), tmp_path / "run")
    try:
        await session.run()
    finally:
        await session.aclose()
    transcripts = read_jsonl(tmp_path / "run" / "transcripts.jsonl")
    results = [call["result"] for line in transcripts for call in line["tool_calls"]]
    assert len(results) >= 3 and all(r.startswith("the key is ***") for r in results), results
    assert_no_file_holds(tmp_path / "run")
    with sqlite3.connect(tmp_path / "run" / "journal.sqlite") as db:
        rows = db.execute("SELECT * FROM tool_calls").fetchall()
    assert rows and KEY not in json.dumps(rows, default=str)


def test_the_detail_of_a_live_agent_shows_no_key():
    from swarm_tui.ui.screens.detail import messages_text

    secrets.register(KEY)
    body = {
        "messages": [
            {"role": "user", "content": f"use {KEY}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": json.dumps({"k": KEY})}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": f"the key is {quote(KEY)}"},
        ]
    }
    shown = messages_text(body).plain
    assert "use ***" in shown and "the key is ***" in shown, shown
    assert_nowhere(shown.encode(), "the detail")
