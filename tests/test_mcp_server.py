"""`swarm-tui mcp` as a real subprocess, reached with the `mcp` client library: a coding agent fans
out 100 sub-agents on the simulator, polls, retries the failed ones and pauses; its MCP process
exits and the run goes on; a second client sees and resumes the same run; a third pages its 100
answers. Paths outside the root are refused, keys never come back, and over HTTP only a request
bearing the token is answered."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from swarm_tui.api import RemoteRun

from tests.conftest import write_batch

TOOLS = {
    "start_swarm",
    "swarm_status",
    "swarm_results",
    "retry_failed",
    "pause_swarm",
    "resume_swarm",
    "abort_swarm",
    "list_runs",
    "estimate_cost",
}


def server_of(root: Path) -> StdioServerParameters:
    """`swarm-tui mcp --root ROOT` as a client's config starts it (this test's environment: its config)."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "swarm_tui", "mcp", "--root", str(root)], env=dict(os.environ)
    )


@asynccontextmanager
async def connected(root: Path):
    async with stdio_client(server_of(root)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


def data_of(result) -> dict:
    assert not result.is_error, result.content
    return json.loads("".join(block.text for block in result.content if block.type == "text"))


async def call(session: ClientSession, tool: str, **arguments) -> dict:
    return data_of(await session.call_tool(tool, arguments))


def mcp_servers(root: Path) -> set[int]:
    """The pids of the `swarm-tui mcp --root ROOT` processes running now."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mcp" in argv and str(root).encode() in argv:
            found.add(int(entry.name))
    return found


async def poll(what: str, check, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        await asyncio.sleep(0.2)


async def test_a_coding_agent_fans_out_100_sub_agents_and_collects_their_answers(tmp_path):
    root = tmp_path / "swarms"
    prompts = [f"Sub-task {i}: name a city." + (" [[sim:500x2]]" if i < 5 else "") for i in range(100)]

    async with connected(root) as first:
        listed = (await first.list_tools()).tools
        assert {t.name for t in listed} == TOOLS
        for tool in listed:
            assert tool.description and "\n" not in tool.description
            assert all(p.get("description") for p in tool.input_schema["properties"].values()), tool.name
        start = next(t for t in listed if t.name == "start_swarm").input_schema["properties"]
        assert {"job", "prompts", "template", "provider", "base_url", "model", "budget_usd", "lane"} <= set(start)

        started = await call(
            first,
            "start_swarm",
            prompts=prompts,
            max_attempts=2,
            concurrency=4,
            sim_latency_ms=150,
            sim_error_rate=0,
        )
        run = started["run"]
        assert (root / run / "journal.sqlite").is_file() and started["live"]

        async def five_failed():
            status = await call(first, "swarm_status", run=run)
            return status if status["counts"]["failed"] == 5 else None

        status = await poll("the five failures", five_failed)
        assert status["state"] == "running" and status["failed_by_class"] == {"server_error": 5}
        assert status["total"] == 100 and status["provider"] == "sim"
        retried = await call(first, "retry_failed", run=run)
        assert retried["taken"] and retried["result"] == {"queued": 5}
        paused = await call(first, "pause_swarm", run=run)
        assert paused["result"]["paused"] is True
        servers = mcp_servers(root)
        assert len(servers) == 1

    deadline = time.monotonic() + 30
    while mcp_servers(root) & servers:
        assert time.monotonic() < deadline, "the MCP server did not exit with its client"
        await asyncio.sleep(0.1)
    with RemoteRun(root / run) as remote:
        left = remote.status()
    assert left.state.value == "paused" and left.pid == started["pid"], "the run outlived its MCP session"

    async with connected(root) as second:
        runs = (await call(second, "list_runs"))["runs"]
        assert [(r["run"], r["state"], r["total"]) for r in runs] == [(run, "paused", 100)]
        resumed = await call(second, "resume_swarm", run=run)
        assert resumed["taken"] and resumed["result"]["paused"] is False

    with RemoteRun(root / run) as remote:  # no MCP server runs now: the run goes on to its end
        assert not mcp_servers(root)
        ended = await asyncio.to_thread(remote.wait, 120)
    assert ended.state.value == "finished" and ended.counts["succeeded"] == 100, ended.describe()

    async with connected(root) as third:
        answers: list[dict] = []
        offset: int | None = 0
        while offset is not None:
            page = await call(third, "swarm_results", run=run, offset=offset, limit=30)
            assert page["total"] == 100
            answers += page["results"]
            offset = page["next_offset"]
        assert len(answers) == 100 and all(a["ok"] and a["answer"] for a in answers)
        assert [a["custom_id"] for a in answers] == [f"prompt-{i:03}" for i in range(1, 101)]
        assert "city" in answers[42]["answer"].lower() or answers[42]["answer"]
        summary = await third.read_resource(f"swarm://runs/{run}/summary")
        assert json.loads(summary.contents[0].text)["succeeded"] == 100
        lines = (await third.read_resource(f"swarm://runs/{run}/results")).contents[0].text.splitlines()
        assert len(lines) == 100 and json.loads(lines[0])["custom_id"] == "prompt-001"
        final = await call(third, "swarm_status", run=run)
        assert final["state"] == "finished" and final["run"] == run


async def test_paths_outside_the_root_are_refused_and_keys_never_come_back(tmp_path, sim, monkeypatch):
    root = tmp_path / "swarms"
    root.mkdir()
    secret = "sk-mcp-test-0123456789abcdefXYZ"
    monkeypatch.setenv("SWARM_MCP_TEST_KEY", secret)
    config = Path(os.environ["SWARM_TUI_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f'[providers.local]\nbase_url = "{sim.base_url}"\nmodel = "sim-1"\napi_key_env = "SWARM_MCP_TEST_KEY"\n',
        encoding="utf-8",
    )
    outside = write_batch(tmp_path / "outside.jsonl", ["hello"])
    write_batch(root / "job.jsonl", [f"repeat after me: {secret} ({i})" for i in range(6)])
    said: list[str] = []

    async with connected(root) as session:

        async def refused(tool: str, **arguments) -> str:
            result = await session.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments)
            text = "".join(block.text for block in result.content if block.type == "text")
            said.append(text)
            return text

        assert "outside the server's root" in await refused("start_swarm", job=str(outside))
        assert "outside the server's root" in await refused("start_swarm", job="../outside.jsonl")
        assert "outside the server's root" in await refused("swarm_status", run="/etc")
        assert "outside the server's root" in await refused("swarm_results", run="../..")
        assert "one directory name" in await refused("start_swarm", prompts=["a"], name="../escape")
        assert "job file or a list of prompts" in await refused("start_swarm")
        assert "no run there" in await refused("swarm_status", run="nothing-here")
        assert not (tmp_path / "escape").exists() and not any(root.glob("*/prompts.toml"))

        started = await call(session, "start_swarm", job="job.jsonl", provider="local", name="keyed")
        said.append(json.dumps(started))
        assert started["run"] == "keyed"
        with RemoteRun(root / "keyed") as remote:
            await asyncio.to_thread(remote.wait, 60)
        for tool, arguments in (
            ("swarm_status", {"run": "keyed"}),
            ("swarm_results", {"run": "keyed"}),
            ("list_runs", {}),
        ):
            said.append(json.dumps(await call(session, tool, **arguments)))
        page = json.loads(said[-2])
        assert len(page["results"]) == 6 and all("***" in r["answer"] for r in page["results"]), page
        said.append((await session.read_resource("swarm://runs/keyed/results")).contents[0].text)
        said.append((await session.read_resource("swarm://runs/keyed/summary")).contents[0].text)
    assert not any(secret in text for text in said), "a key came back"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_over_http_only_a_request_bearing_the_token_is_answered(tmp_path):
    port, token = _free_port(), "tok-" + "7" * 32
    proc = subprocess.Popen(
        [sys.executable, "-m", "swarm_tui", "mcp", "--root", str(tmp_path / "swarms"), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "SWARM_TUI_MCP_TOKEN": token},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP server never listened"
                await asyncio.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient(trust_env=False) as plain:
            hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            assert (await plain.post(url, json=hello)).status_code == 401
            wrong = {"Authorization": "Bearer nope"}
            assert (await plain.post(url, json=hello, headers=wrong)).status_code == 401
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30, trust_env=False) as client:
            async with streamable_http_client(url, http_client=client) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    assert {t.name for t in (await session.list_tools()).tools} == TOOLS
                    assert (await call(session, "list_runs"))["runs"] == []
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.stderr:
            proc.stderr.close()
    assert token not in err, "the token given is never printed"
    assert f"http://127.0.0.1:{port}/mcp" in err
