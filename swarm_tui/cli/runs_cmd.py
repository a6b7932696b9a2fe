"""`swarm-tui runs [ROOT]`: the run directories under ROOT, each with its state (running, paused,
stopped, finished, dead writer...), its driver's pid and its progress; what the MCP server's
`list_runs` and the API's `list_runs` give too (`run.remote.list_runs`)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.run.exit_codes import EXIT_OK

RUNS_EPILOG = """\
states: running, paused (driven live); starting, suspended (SIGSTOP), silent (a process holds
  it); finished (every task final), stopped (work left: resumable), dead (its writer died
  mid-run: resumable)

examples:
  swarm-tui runs                         the runs under ./runs
  swarm-tui runs /srv/swarms --json      one JSON object: {"runs": [status, ...]}
  swarm-tui ctl runs/NAME status         one run in full
"""


def add_parser(commands) -> None:
    runs = commands.add_parser(
        "runs",
        help="list the runs under a directory: state, pid, progress",
        description="List the run directories under ROOT (default ./runs; ROOT itself when it is one): each\n"
        "run's state, who drives it (pid), its progress, failures and cost, oldest first. Read-only.\n",
        epilog=RUNS_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    runs.add_argument("root", nargs="?", type=Path, default=Path("runs"), metavar="ROOT", help="default: runs")
    runs.add_argument("--json", action="store_true", help='one JSON object: {"runs": [each run\'s status]}')
    runs.set_defaults(handler=cmd_runs)


def cmd_runs(args: argparse.Namespace) -> int:
    from swarm_tui.api import list_runs
    from swarm_tui.core.errors import InputError

    root: Path = args.root
    if not root.is_dir():
        raise InputError.single(root, "runs", "no such directory")
    statuses = list_runs(root)
    if args.json:
        print(json.dumps({"root": str(root), "runs": [s.to_json() for s in statuses]}, ensure_ascii=False))
        return EXIT_OK
    if not statuses:
        print(f"no runs under {root}")
        return EXIT_OK
    rows = [("RUN", "STATE", "PID", "DONE", "FAILED", "COST", "CREATED", "JOB")]
    for status in statuses:
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(status.created_at)) if status.created_at else "-"
        rows.append(
            (
                status.run_dir.name if status.run_dir != root else str(root),
                status.state.value,
                str(status.pid or "-"),
                f"{status.done:,}/{status.total:,}",
                f"{status.counts.get('failed', 0):,}",
                f"${status.cost_usd:.4f}" if status.cost_usd is not None else "?",
                created,
                status.job,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1])
    return EXIT_OK
