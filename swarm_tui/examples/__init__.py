"""Bundled examples that let tool-using jobs run offline, with no key.

    mcp_tools.py  an MCP server (stdio, or streamable HTTP at /mcp) with harmless tools:
                  lookup over a small bundled corpus, add / multiply, per-agent notes.
                  ``python -m swarm_tui.examples.mcp_tools [--http HOST:PORT]``

Every tool's result echoes its inputs, so the simulator's final answer, which quotes the tool
results it got, shows which agent's calls produced it.
"""
