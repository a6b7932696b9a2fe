"""The `swarm-tui` command line: `main` runs it (the console script calls it through `__main__.entry`)."""

from swarm_tui.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
