"""`swarm-tui sim`: the OpenAI-compatible simulator, served in the foreground."""

from __future__ import annotations

import argparse

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.run.exit_codes import EXIT_OK
from swarm_tui.sim import add_arguments as add_sim_arguments
from swarm_tui.sim.args import SIM_DESCRIPTION, SIM_EPILOG


def add_parser(commands) -> None:
    sim = commands.add_parser(
        "sim",
        help="serve the OpenAI-compatible simulator in the foreground",
        description=SIM_DESCRIPTION,
        epilog=SIM_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    add_sim_arguments(sim)
    sim.set_defaults(handler=cmd_sim)


def cmd_sim(args: argparse.Namespace) -> int:
    from swarm_tui.sim import config_from_args, serve_forever

    serve_forever(config_from_args(args), args.host, args.port, quiet=args.sim_quiet)
    return EXIT_OK
