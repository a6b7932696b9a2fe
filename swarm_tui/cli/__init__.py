"""The `swarm-tui` command line: `main` runs it (the console script calls it through `__main__.entry`)."""

from .main import build_parser, main
from .options import resolve_profile, resolve_settings

__all__ = ["build_parser", "main", "resolve_profile", "resolve_settings"]
