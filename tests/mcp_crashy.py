"""An MCP server for tests (stdio) whose `crash` tool kills its own process: the toolbox must
start it again at the next call, and only the call in flight fails."""

from __future__ import annotations

import os


def echo(text: str) -> str:
    """Say it back, with this server's pid (a restarted server has another)."""
    return f"echo({text}) from {os.getpid()}"


def crash() -> str:
    """Die without answering."""
    os._exit(3)


if __name__ == "__main__":
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("crashy", log_level="WARNING")
    for fn in (echo, crash):
        server.add_tool(fn, description=fn.__doc__ or "", structured_output=False)
    server.run()
