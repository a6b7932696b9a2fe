"""An MCP server for tests (stdio) that does not exit when its stdin closes: it lingers a minute
after its session ends, as a careless server would. Only a client that stops it (its stdin
closed, then SIGTERM after the grace) leaves no process behind; one that merely exits orphans it."""

from __future__ import annotations

import time


def echo(text: str) -> str:
    """Say it back."""
    return f"echo({text})"


if __name__ == "__main__":
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("lingering", log_level="WARNING")
    server.add_tool(echo, description=echo.__doc__ or "", structured_output=False)
    server.run()
    time.sleep(60)
