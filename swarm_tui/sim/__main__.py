"""``python -m swarm_tui.sim``: serve the simulator in the foreground.

The same flags as ``swarm-tui sim`` (see ``args.py``); process mode of ``SimServer``
starts the simulator this way and waits for the listening line on stdout.
"""

from __future__ import annotations

import argparse
import sys

from swarm_tui.sim.args import add_arguments, config_from_args
from swarm_tui.sim.runner import serve_forever


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m swarm_tui.sim",
        description="A simulated OpenAI-compatible chat-completions endpoint on loopback.",
        allow_abbrev=False,
    )
    add_arguments(parser)
    ns = parser.parse_args(argv)
    try:
        config = config_from_args(ns)
    except ValueError as e:
        print(f"swarm-tui sim: {e}", file=sys.stderr)
        return 2
    serve_forever(config, ns.host, ns.port, quiet=ns.sim_quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
