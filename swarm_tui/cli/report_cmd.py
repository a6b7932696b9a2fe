"""`swarm-tui report RUN [-o report.html] [--open]`: one self-contained HTML file of a run, for
someone who was not watching (`swarm_tui.report`): read-only, of a finished run or as a snapshot
of a running one."""

from __future__ import annotations

import argparse
import sys
import webbrowser
from pathlib import Path

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.core.errors import InputError
from swarm_tui.run.exit_codes import EXIT_FAILED, EXIT_OK

REPORT_EPILOG = """\
what it shows: answers and requests over time with the 429s and errors, the concurrency limit
  and the learned RPM, latency (p50/p95/p99, per endpoint when routed), cost over time against
  the budget and by lane/endpoint/tier, errors by class with examples, the judge's scores by
  round, the slowest and the failed agents with their attempts, the settings, how to resume.
  The file has its charts inline (SVG) and fetches nothing: mail it, attach it to a ticket.

exit codes: 0 written; 1 it could not be (the reason said); 2 no run in RUN, or the report
  extra is not installed (pip install 'swarm-tui[report]')

examples:
  swarm-tui report runs/first                  runs/first/report.html
  swarm-tui report runs/big -o big.html --open a running run's snapshot, opened in the browser
"""


def add_parser(commands) -> None:
    report = commands.add_parser(
        "report",
        help="write a run's report: one self-contained HTML file (charts, errors, settings; sends nothing)",
        description="Write RUN's report, one HTML file with everything inline: what the run did over time, its\n"
        "latency, cost and errors, its slowest and failed agents, its settings and how to resume it. Read\n"
        "from the journal alone: a finished run, or a snapshot of one that is running.\n",
        epilog=REPORT_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    report.add_argument("run_dir", type=Path, metavar="RUN", help="the run directory (its journal.sqlite)")
    report.add_argument("-o", dest="output", type=Path, metavar="FILE", help="where (default RUN/report.html)")
    report.add_argument("--open", action="store_true", help="open it in the web browser once written")
    report.set_defaults(handler=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    """0: written; 1: it could not be; 2: no run there, or the extra is missing."""
    from swarm_tui.journal import Journal
    from swarm_tui.report import write_report
    from swarm_tui.util.files import describe_write_failure

    run_dir: Path = args.run_dir
    Journal.open(run_dir, readonly=True, up_to_date=True).close()  # no (whole) journal: exit 2 with its path
    try:
        written = write_report(run_dir, args.output)
    except ImportError as exc:
        raise InputError.single(run_dir, "report", str(exc)) from None
    except OSError as exc:
        where = Path(exc.filename or args.output or run_dir)
        print(f"swarm-tui: the report was not written: {describe_write_failure(exc, where)}", file=sys.stderr)
        return EXIT_FAILED
    snapshot = " (a snapshot: the run is going on)" if written.status == "running" else ""
    print(f"report: {written.path} ({written.bytes / 1024:,.0f} KB, {written.seconds:.1f} s){snapshot}")
    if args.open:
        webbrowser.open(written.path.resolve().as_uri())
    return EXIT_OK
