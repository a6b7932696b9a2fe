"""`swarm-tui export RUN`: a run's results.jsonl, errors.jsonl and summary.json written from its
journal, sending nothing: what a stop of a big run leaves for later (`run.outputs.end_outputs`), or
a fresh copy of any run's outputs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.run.exit_codes import EXIT_FAILED, EXIT_OK

EXPORT_EPILOG = """\
exit codes: 0 the outputs written; 1 they could not be (the reason said); 2 no run in RUN,
  or another process drives it

examples:
  swarm-tui export runs/big        after a stop of a run with more than 20,000 answers
  swarm-tui export runs/first && jq -c '.custom_id' runs/first/results.jsonl
"""


def add_parser(commands) -> None:
    export = commands.add_parser(
        "export",
        help="write a run's results.jsonl, errors.jsonl and summary.json from its journal (sends nothing)",
        description="Write RUN's results.jsonl, errors.jsonl (and transcripts.jsonl for agents) and summary.json\n"
        "from its journal, sending nothing: the outputs a stop of a big run leaves for later. The run\n"
        "directory must not be driven by another process (its lock is taken while writing).\n",
        epilog=EXPORT_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    export.add_argument("run_dir", type=Path, metavar="RUN", help="the run directory (its journal.sqlite)")
    export.set_defaults(handler=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    """0: the outputs written; 1: they could not be (the reason said); 2: no run there, or another
    process drives it."""
    from swarm_tui.journal import Journal
    from swarm_tui.run.directory import RunDirLock
    from swarm_tui.run.outputs import end_outputs, facts_from_meta

    run_dir: Path = args.run_dir
    Journal.open(run_dir, readonly=True).close()  # no (whole) journal: exit 2 with its path
    lock = RunDirLock(run_dir).acquire()  # a live run writes its own at its end: RunDirBusy, exit 2
    try:
        journal = Journal.open(run_dir, readonly=True)
        try:
            ended = end_outputs(run_dir, journal, facts_from_meta(journal))
        finally:
            journal.close()
    finally:
        lock.release()
    if ended.error is not None:
        print(f"swarm-tui: results.jsonl and summary.json not written: {ended.error}", file=sys.stderr)
        return EXIT_FAILED
    summary = ended.summary
    print(
        f"{summary.succeeded:,} succeeded, {summary.failed:,} failed, {summary.unfinished:,} unfinished\n"
        f"results: {run_dir}/results.jsonl  errors: {run_dir}/errors.jsonl  summary: {run_dir}/summary.json"
    )
    return EXIT_OK
