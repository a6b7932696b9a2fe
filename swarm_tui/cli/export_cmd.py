"""`swarm-tui export RUN`: a run's results.jsonl, errors.jsonl and summary.json written from its
journal, sending nothing: what a stop of a big run leaves for later (`run.outputs.end_outputs`), or
a fresh copy of any run's outputs. With `--format csv|parquet|jsonl`: the run as a table instead,
the job's rows with their answers (`run.export_table`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.core.errors import InputError
from swarm_tui.run.exit_codes import EXIT_FAILED, EXIT_OK

EXPORT_EPILOG = """\
exit codes: 0 the outputs written; 1 they could not be (the reason said); 2 no run in RUN,
  or another process drives it

examples:
  swarm-tui export runs/big        after a stop of a run with more than 20,000 answers
  swarm-tui export runs/first && jq -c '.custom_id' runs/first/results.jsonl
  swarm-tui export runs/tickets --format csv -o tickets-answered.csv
                                   the job's rows, in order, with answer, status, cost...
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
    export.add_argument(
        "--format",
        choices=("csv", "parquet", "jsonl"),
        help="write the run as one table instead: each task's input row (a table job's own columns) with its "
        "answer, status, error, tokens, cost, latency, endpoint and attempts (csv and parquet need swarm-tui[data])",
    )
    export.add_argument(
        "-o", dest="output", type=Path, metavar="FILE", help="with --format: the file (default RUN/answers.FORMAT)"
    )
    export.set_defaults(handler=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    """0: the outputs written; 1: they could not be (the reason said); 2: no run there, or another
    process drives it."""
    from swarm_tui.journal import Journal
    from swarm_tui.run.directory import RunDirLock
    from swarm_tui.run.outputs import end_outputs, facts_from_meta

    run_dir: Path = args.run_dir
    Journal.open(run_dir, readonly=True, up_to_date=True).close()  # no (whole) journal: exit 2 with its path
    if args.format is not None:
        return export_as_table(run_dir, args.format, args.output)
    if args.output is not None:
        raise InputError.single(args.output, "-o", "names the file of --format csv|parquet|jsonl")
    lock = RunDirLock(run_dir).acquire()  # a live run writes its own at its end: RunDirBusy, exit 2
    try:
        journal = Journal.open(run_dir, readonly=True, up_to_date=True)
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


def export_as_table(run_dir: Path, fmt: str, out: Path | None) -> int:
    """`--format`: the run's table, read-only (a running run's too: the rows as they stand)."""
    from swarm_tui.run.export_table import export_table

    try:
        written = export_table(run_dir, fmt, out)
    except OSError as exc:
        from swarm_tui.util.files import describe_write_failure

        print(
            f"swarm-tui: the table was not written: {describe_write_failure(exc, Path(exc.filename or run_dir))}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    added = len(written.columns) - written.input_columns
    print(f"{written.rows:,} rows, {written.input_columns} input columns + {added} answer columns: {written.path}")
    return EXIT_OK
