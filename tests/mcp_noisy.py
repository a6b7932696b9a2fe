"""An MCP server for tests (stdio) that prints lines that are not JSON-RPC on its stdout: a banner
when it starts and a line of chatter before each answer (a `print` left in a tool, a library's
progress output), as many real servers do."""

from __future__ import annotations

import sys


def echo(text: str) -> str:
    """Say it back (after printing a line of chatter on stdout)."""
    print(f"echo called with {text!r} (a stray print)", flush=True)
    return f"echo({text})"


if __name__ == "__main__":
    from mcp.server.mcpserver import MCPServer

    print("noisy MCP server v0 starting... not JSON", flush=True)
    print("{this is not json either", flush=True)
    sys.stdout.flush()
    server = MCPServer("noisy", log_level="WARNING")
    server.add_tool(echo, description=echo.__doc__ or "", structured_output=False)
    server.run()
