"""`swarm-tui replay RUN [--concurrency N] [--lane L] [--deadline WHEN]`: what a recorded run
would have done at other settings, offline (`swarm_tui.estimate.whatif`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.core.lanes import AUTO, LANES
from swarm_tui.run.exit_codes import EXIT_OK
from swarm_tui.util.argtypes import positive_int

REPLAY_EPILOG = """\
Nothing is sent to the recorded provider and no key is needed; the run directory is read only.

examples:
  swarm-tui replay runs/first                       at its own settings (a check of the fit)
  swarm-tui replay runs/first --concurrency 20      what twice the in-flight ceiling would do
  swarm-tui replay runs/first --deadline 20m        the autopilot's live/batch split, offline
"""


def add_parser(commands) -> None:
    replay = commands.add_parser(
        "replay",
        help="what-if: a recorded run's provider, played at other settings (offline, no key)",
        description="Plays a recorded run's measured provider (its latencies, server errors, RPM and batch\n"
        "turnaround, fitted from the journal) through the engine against an embedded simulator, time\n"
        "compressed, and prints the predicted makespan and cost beside the recorded ones.\n",
        epilog=REPLAY_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    replay.add_argument("run_dir", type=Path, help="a run directory (its journal.sqlite)")
    replay.add_argument("--concurrency", type=positive_int, help="the in-flight ceiling to try")
    replay.add_argument("--lane", choices=LANES, help="the lane to try")
    replay.add_argument("--deadline", metavar="WHEN", help="the autopilot's deadline to try (90s, 20m, 2h, 09:00)")
    replay.add_argument("--no-adaptive", action="store_true", help="a fixed in-flight limit")
    replay.set_defaults(handler=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from swarm_tui.estimate.whatif import replay, report
    from swarm_tui.run.resolve import deadline_option

    changes: dict[str, Any] = {}
    asked: list[str] = []
    if args.concurrency:
        changes["concurrency"] = args.concurrency
        asked.append(f"--concurrency {args.concurrency}")
    if args.lane:
        changes["lane"] = args.lane
        asked.append(f"--lane {args.lane}")
    if args.deadline:
        changes["deadline_at"] = deadline_option(args.deadline)
        changes.setdefault("lane", AUTO)
        asked.append(f"--deadline {args.deadline}")
    if args.no_adaptive:
        changes["adaptive"] = False
        asked.append("--no-adaptive")
    recorded, prediction, k = replay(args.run_dir, changes)
    print(report(args.run_dir, recorded, prediction, k, " ".join(asked) or "its own settings"))
    return EXIT_OK
