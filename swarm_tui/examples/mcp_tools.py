"""An example MCP server with harmless tools, for tool-using jobs that run offline.

    python -m swarm_tui.examples.mcp_tools                       # stdio (the default)
    python -m swarm_tui.examples.mcp_tools --http 127.0.0.1:8765  # streamable HTTP, path /mcp

Tools (each result starts with the call and its inputs, e.g. ``lookup(t-3fa2b1c9 retries): ...``,
so a final answer quoting it shows which agent's call produced it):

    lookup(term: str) -> str            a fact from a small bundled corpus about the topics of
                                        running agent swarms (rate limits, retries, prefix
                                        caching, failover, ...); a term that names a topic
                                        anywhere in it matches, else "no entry for <term>"
    add(a: float, b: float) -> str      a + b
    multiply(a: float, b: float) -> str a * b
    note(agent: str, text: str) -> str  keep a note for ``agent`` (in memory, per server process)
    notes(agent: str) -> str            the notes kept for ``agent``, in order

The plain functions are importable too (``swarm_tui.examples.mcp_tools:lookup`` as a Python
tool). Nothing here touches files, the network or a shell.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

if TYPE_CHECKING:  # the mcp package is needed only to serve, so it is imported there
    from mcp.server.mcpserver import MCPServer

__all__ = ["CORPUS", "lookup", "add", "multiply", "note", "notes", "build_server", "main"]

#: the bundled corpus: topic -> one short fact
CORPUS: dict[str, str] = {
    "rate limits": "Providers cap requests and tokens per minute (RPM/TPM); a request beyond them gets 429.",
    "429": "HTTP 429 means rate limited (retry after retry-after) or out of quota (do not retry).",
    "retry-after": "retry-after (seconds) and retry-after-ms tell a client how long to wait before retrying.",
    "retries": "Retry 429s, 408, 409, 5xx and timeouts with full-jitter exponential backoff; never 400/401/403/404.",
    "backoff": "Full jitter: sleep a uniform random time in [0, min(cap, base * 2^attempt)].",
    "token bucket": "A token bucket refills at a steady rate and holds a burst; each request takes its cost.",
    "prefix caching": "A repeated prompt prefix is served from cache: cached_tokens are cheaper and faster.",
    "cached tokens": "usage.prompt_tokens_details.cached_tokens counts prompt tokens read from the prefix cache.",
    "failover": "When an endpoint keeps failing, send its traffic to the next endpoint of the same model.",
    "hedging": "A hedged request sends a second copy after a delay and keeps whichever answers first.",
    "timeouts": "Layer timeouts: connect, per attempt, and a deadline for the whole task.",
    "streaming": "With stream=true the answer arrives as SSE chunks; usage comes last with include_usage.",
    "tool calls": "A model asks for tools with finish_reason tool_calls; each result goes back as a tool message.",
    "agent swarm": "An agent swarm runs many sub-agents in parallel, each with its own context and tools.",
    "critical path": "The critical path of a swarm is the most steps any one agent needed.",
    "context window": "Prompt plus max_tokens must fit the context window, else 400 context_length_exceeded.",
    "max tokens": "max_tokens caps the answer; an answer cut there ends with finish_reason length.",
    "budget": "A budget stops new requests once the spend so far plus what is in flight would exceed it.",
    "journal": "A journal commits each completed step so a resumed run never re-sends it.",
    "mcp": "The Model Context Protocol lets a client list and call a server's tools over stdio or HTTP.",
}

# longest topics first, so "cached tokens" wins over a shorter topic inside it
_TOPICS = sorted(CORPUS, key=len, reverse=True)

_NOTES: defaultdict[str, list[str]] = defaultdict(list)


def _num(x: float) -> str:
    """A number as a person writes it: 3 rather than 3.0, 0.5 as is."""
    if isinstance(x, float) and math.isfinite(x) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def lookup(term: Annotated[str, Field(description='a topic such as "rate limits", "retries", "failover"')]) -> str:
    """Look a term up in a small corpus about running LLM agent swarms (rate limits, retries,
    backoff, prefix caching, failover, hedging, timeouts, streaming, tool calls, ...). A term
    that contains a known topic matches it; the answer starts with the term looked up."""
    low = term.lower()
    for topic in _TOPICS:
        if topic in low:
            return f"lookup({term}): {topic}: {CORPUS[topic]}"
    return f"lookup({term}): no entry for {term}"


def add(
    a: Annotated[float, Field(description="the first number")],
    b: Annotated[float, Field(description="the second number")],
) -> str:
    """Add two numbers; the answer repeats them, e.g. "add(2, 3) = 5"."""
    return f"add({_num(a)}, {_num(b)}) = {_num(a + b)}"


def multiply(
    a: Annotated[float, Field(description="the first number")],
    b: Annotated[float, Field(description="the second number")],
) -> str:
    """Multiply two numbers; the answer repeats them, e.g. "multiply(2, 3) = 6"."""
    return f"multiply({_num(a)}, {_num(b)}) = {_num(a * b)}"


def note(
    agent: Annotated[str, Field(description="the agent the note belongs to; each agent has its own notes")],
    text: Annotated[str, Field(description="the note")],
) -> str:
    """Keep a note for an agent, in memory, for as long as this server runs."""
    kept = _NOTES[agent]
    kept.append(text)
    return f"note({agent}): kept note {len(kept)}: {text}"


def notes(agent: Annotated[str, Field(description="the agent whose notes to read")]) -> str:
    """The notes kept for an agent, oldest first."""
    kept = _NOTES.get(agent)
    if not kept:
        return f"notes({agent}): no notes"
    return f"notes({agent}): {len(kept)} note(s): " + "; ".join(f"{i}. {t}" for i, t in enumerate(kept, 1))


def build_server() -> MCPServer:
    """The MCP server with the five tools registered (plain-text results)."""
    from mcp.server.mcpserver import MCPServer

    server: MCPServer = MCPServer(
        "swarm-tui-example-tools",
        instructions="Harmless example tools: lookup over a small corpus, arithmetic, per-agent notes.",
        log_level="WARNING",
    )
    for fn in (lookup, add, multiply, note, notes):
        # one line each: a docstring's line breaks and indentation are noise in a tool list
        server.add_tool(fn, description=" ".join((fn.__doc__ or "").split()), structured_output=False)
    return server


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be HOST:PORT or PORT, not {text!r}") from None
    if not 0 < number < 65536:
        raise argparse.ArgumentTypeError(f"the port must be 1 to 65535, not {port}")
    return host.strip("[]") or "127.0.0.1", number


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m swarm_tui.examples.mcp_tools",
        description="An example MCP server with harmless tools (lookup, add, multiply, note, notes).",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--http",
        type=_host_port,
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio",
    )
    args = parser.parse_args(argv)
    server = build_server()
    if args.http is None:
        server.run("stdio")
    else:
        host, port = args.http
        print(f"mcp_tools: serving http://{host}:{port}/mcp", file=sys.stderr, flush=True)
        server.run("streamable-http", host=host, port=port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
