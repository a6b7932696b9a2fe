"""`swarm-tui mcp`: the MCP server (`swarm_tui.api.mcp_server`) a coding agent fans a swarm out through,
on stdio (its client starts it) or on loopback HTTP with a bearer token."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.run.exit_codes import EXIT_OK

MCP_EPILOG = """\
tools: start_swarm, swarm_status, swarm_results, retry_failed, pause_swarm, resume_swarm,
  abort_swarm, list_runs, estimate_cost; resources swarm://runs/{run}/summary and .../results

examples:
  swarm-tui mcp --root ~/swarms                 stdio: what a client's config starts
  claude mcp add swarm -- swarm-tui mcp --root ~/swarms
  SWARM_TUI_MCP_TOKEN=$(openssl rand -hex 24) swarm-tui mcp --root ~/swarms --http 8765
                                                streamable HTTP at http://127.0.0.1:8765/mcp
"""


def add_parser(commands) -> None:
    mcp = commands.add_parser(
        "mcp",
        help="serve MCP tools a coding agent starts, watches and collects swarms with",
        description="Serve the Model Context Protocol: tools a coding agent (Claude Code, kimi-cli, Codex...) starts\n"
        "a swarm of sub-agents with, watches it and collects its answers by. Each run is a process of\n"
        "its own in a directory under --root: it goes on after the MCP session ends, and any client,\n"
        "`swarm-tui ctl` or `attach` sees it. Paths outside --root are refused; keys are never returned.\n"
        "Over --http it listens on 127.0.0.1 only and answers only requests bearing its token.\n",
        epilog=MCP_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    mcp.add_argument(
        "--root", type=Path, default=Path("runs"), metavar="DIR", help="where runs are made and read (default: runs)"
    )
    mcp.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio"
    )
    mcp.add_argument(
        "--token-env",
        default="SWARM_TUI_MCP_TOKEN",
        metavar="VAR",
        help="with --http: the environment variable holding the bearer token (default SWARM_TUI_MCP_TOKEN; "
        "unset: one is made and printed on stderr)",
    )
    mcp.set_defaults(handler=cmd_mcp)


def cmd_mcp(args: argparse.Namespace) -> int:
    import sys

    from swarm_tui.api.mcp_server import serve
    from swarm_tui.core.errors import InputError

    root: Path = args.root
    root.mkdir(parents=True, exist_ok=True)
    if not root.is_dir():
        raise InputError.single(root, "--root", "not a directory")
    token = None
    if args.http is not None:
        if not 0 < args.http < 65536:
            raise InputError.single("--http", "port", f"a port is 1 to 65535, not {args.http}")
        token = os.environ.get(args.token_env) or None
        if token is None:
            import secrets

            token = secrets.token_urlsafe(24)
            print(f"swarm-tui mcp: no {args.token_env} set; this server's bearer token: {token}", file=sys.stderr)
    serve(root, http_port=args.http, token=token)
    return EXIT_OK
