"""The bundled example MCP server (swarm_tui.examples.mcp_tools), as a real subprocess: over
stdio with the `mcp` client, once over streamable HTTP on a free loopback port, and once as
the tools of simulated agents, whose final answers quote their own MCP results."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import subprocess
import sys
import time

import httpx
import pytest
from mcp import Client, StdioServerParameters
from swarm_tui.sim import SimConfig, SimServer
from swarm_tui.sim.tools import quote_results

SERVER = StdioServerParameters(command=sys.executable, args=["-m", "swarm_tui.examples.mcp_tools"])

SIGNATURES = {
    "lookup": {"term": "string"},
    "add": {"a": "number", "b": "number"},
    "multiply": {"a": "number", "b": "number"},
    "note": {"agent": "string", "text": "string"},
    "notes": {"agent": "string"},
}


def text_of(result) -> str:
    assert not result.is_error, result
    return "".join(block.text for block in result.content if block.type == "text")


async def exercise(client: Client) -> None:
    listed = (await client.list_tools()).tools
    assert {t.name for t in listed} == set(SIGNATURES)
    for tool in listed:
        schema = tool.input_schema
        props = {name: p["type"] for name, p in schema["properties"].items()}
        assert props == SIGNATURES[tool.name] and sorted(schema["required"]) == sorted(props)
        assert tool.description and "\n" not in tool.description
        assert all(p.get("description") for p in schema["properties"].values())

    hit = text_of(await client.call_tool("lookup", {"term": "t-1a2b3c4d retries"}))
    assert hit.startswith("lookup(t-1a2b3c4d retries): retries: ") and "backoff" in hit
    assert text_of(await client.call_tool("lookup", {"term": "Prefix Caching"})).startswith(
        "lookup(Prefix Caching): prefix caching: "
    )
    assert (
        text_of(await client.call_tool("lookup", {"term": "t-0000 zebras"}))
        == "lookup(t-0000 zebras): no entry for t-0000 zebras"
    )
    assert text_of(await client.call_tool("add", {"a": 2, "b": 3.5})) == "add(2, 3.5) = 5.5"
    assert text_of(await client.call_tool("multiply", {"a": 4, "b": 2.5})) == "multiply(4, 2.5) = 10"
    assert text_of(await client.call_tool("notes", {"agent": "t-a"})) == "notes(t-a): no notes"
    assert text_of(await client.call_tool("note", {"agent": "t-a", "text": "first"})) == "note(t-a): kept note 1: first"
    await client.call_tool("note", {"agent": "t-b", "text": "other agent"})
    await client.call_tool("note", {"agent": "t-a", "text": "second"})
    assert text_of(await client.call_tool("notes", {"agent": "t-a"})) == "notes(t-a): 2 note(s): 1. first; 2. second"
    bad = await client.call_tool("add", {"a": "x", "b": 1})
    assert bad.is_error  # a wrong argument is the tool's error, not the server's death
    assert text_of(await client.call_tool("add", {"a": 1, "b": 1})) == "add(1, 1) = 2"


async def test_stdio_lists_and_calls_every_tool():
    async with Client(SERVER) as client:
        await exercise(client)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_streamable_http_on_a_free_port():
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "swarm_tui.examples.mcp_tools", "--http", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP server never listened"
                await asyncio.sleep(0.05)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            await exercise(client)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stderr:
            proc.stderr.close()


def test_bad_http_address_is_refused():
    r = subprocess.run(
        [sys.executable, "-m", "swarm_tui.examples.mcp_tools", "--http", "127.0.0.1:http"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "HOST:PORT" in r.stderr


@pytest.fixture
def sim():
    server = SimServer(SimConfig(latency_ms=2.0, latency_sigma=0.3, tool_rounds=(2, 4))).start()
    yield server
    server.stop()


async def test_simulated_agents_use_the_example_tools(sim):
    """Agents on the simulator, tools from the MCP server: each final answer quotes its own results."""
    async with Client(SERVER) as mcp:
        listed = (await mcp.list_tools()).tools
        tools = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in listed
        ]

        async def run_agent(task: str) -> tuple[str, list[str]]:
            messages: list[dict] = [{"role": "user", "content": task}]
            async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
                for _ in range(8):
                    r = await http.post(
                        sim.base_url + "/chat/completions", json={"model": "m", "messages": messages, "tools": tools}
                    )
                    assert r.status_code == 200, r.text
                    msg = r.json()["choices"][0]["message"]
                    if not msg.get("tool_calls"):
                        return msg["content"], [m["content"] for m in messages if m["role"] == "tool"]
                    messages.append({"role": "assistant", "content": msg["content"], "tool_calls": msg["tool_calls"]})
                    outs = await asyncio.gather(
                        *(
                            mcp.call_tool(c["function"]["name"], json.loads(c["function"]["arguments"]))
                            for c in msg["tool_calls"]
                        )
                    )
                    for call, out in zip(msg["tool_calls"], outs, strict=True):
                        messages.append({"role": "tool", "tool_call_id": call["id"], "content": text_of(out)})
            raise AssertionError("no final answer")

        tasks = [f"agent {i}: how should a swarm survive rate limits?" for i in range(6)]
        runs = await asyncio.gather(*(run_agent(t) for t in tasks))
    for task, (final, results) in zip(tasks, runs, strict=True):
        token = "t-" + hashlib.sha256(task.encode()).hexdigest()[:8]
        assert len(results) >= 2 and quote_results(results) in final.splitlines()
        # every result that names an agent or a term names this agent's token, and no other's
        assert all(token in r for r in results if not r.startswith(("add(", "multiply(")))
        others = {"t-" + hashlib.sha256(t.encode()).hexdigest()[:8] for t in tasks} - {token}
        assert not any(o in final for o in others)
