"""`swarm-tui attach RUN_DIR`: the console on a run another process drives, read from its journal."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.cli.options import add_console_options
from swarm_tui.run.exit_codes import EXIT_BAD_INPUT

ATTACH_EPILOG = """\
examples:
  nohup swarm-tui run job.jsonl --headless --out runs/big > runs/big.log 2>&1 &
  swarm-tui attach runs/big                 the same screen, from the journal (q: detach)
  swarm-tui attach runs/big --bell          ring the terminal's bell when it finishes or stops
"""


def add_parser(commands) -> None:
    attach = commands.add_parser(
        "attach",
        help="watch (and steer) a run another process drives, e.g. over SSH",
        description="Watch a run another process drives (a --headless run under nohup, on a server over SSH) in\n"
        "the same console, read from its journal while it is written. r, p, a and +/- reach the\n"
        "running engine through the journal's control queue; q detaches and leaves the run going. A\n"
        "run nobody drives any more can be resumed from here (p, or r to retry its failures too).\n"
        "Needs a terminal.\n",
        epilog=ATTACH_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    attach.add_argument("run_dir", type=Path, help="the run directory to watch")
    attach.add_argument("--theme", help="TUI theme name or a theme file")
    add_console_options(attach, logs=False)
    attach.set_defaults(handler=cmd_attach)


def cmd_attach(args: argparse.Namespace) -> int:
    from swarm_tui.cli.drive import tui_available
    from swarm_tui.journal import Journal

    Journal.open(args.run_dir, readonly=True).close()  # no journal there: exit 2 with its path
    if not tui_available():
        print("swarm-tui: attach needs a terminal (stdout is not a tty)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.theme:
        from swarm_tui.ui.themes import check_theme

        check_theme(args.theme)
    from swarm_tui.ui.launch import run_attached

    return run_attached(args.run_dir, theme=args.theme, bell=args.bell)
