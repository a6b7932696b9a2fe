"""`swarm-tui export-traces RUN`: any run's journal sent to an OpenTelemetry collector as its trace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.run.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

TRACES_EPILOG = """\
Needs the otel extra: pip install 'swarm-tui[otel]'. Exit codes: 0 every span delivered;
1 some were not (the collector down or refusing); 2 no run in RUN, or the extra missing.

examples:
  swarm-tui export-traces runs/first --endpoint http://localhost:6006     Arize Phoenix
  OTEL_EXPORTER_OTLP_ENDPOINT=https://cloud.langfuse.com/api/public/otel \\
  OTEL_EXPORTER_OTLP_HEADERS="Authorization=Basic ..." swarm-tui export-traces runs/first
  swarm-tui export-traces runs/first --otel-content       prompts and answers on the spans too
"""


def add_parser(commands) -> None:
    export = commands.add_parser(
        "export-traces",
        help="send a run's journal (any version) to an OpenTelemetry collector as GenAI spans",
        description="Send the run in RUN (its journal, of any swarm-tui version) to an OTLP/HTTP collector as\n"
        "OpenTelemetry GenAI spans: the same spans and ids as a live --otel export, so a second\n"
        "export is the same trace, not a copy. The standard OTEL_EXPORTER_OTLP_* variables apply\n"
        "(headers, timeout...).\n",
        epilog=TRACES_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    export.add_argument("run_dir", type=Path, metavar="RUN", help="the run directory (its journal.sqlite)")
    export.add_argument(
        "--endpoint",
        metavar="URL",
        help="the collector's OTLP/HTTP base URL (/v1/traces added), e.g. http://127.0.0.1:6006 for Phoenix; "
        "default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, http://localhost:4318",
    )
    export.add_argument(
        "--otel-content", action="store_true", help="the prompts, answers and tool arguments and results too"
    )
    export.set_defaults(handler=cmd_export_traces)


def cmd_export_traces(args: argparse.Namespace) -> int:
    """0: every span delivered; 1: some were not (the collector down or refusing); 2: no run there,
    or the otel extra missing (nothing sent)."""
    from swarm_tui.journal import Journal
    from swarm_tui.otel.export import export_run
    from swarm_tui.otel.sdk import require_sdk

    require_sdk("export-traces")
    if args.endpoint and not args.endpoint.startswith(("http://", "https://")):
        print(f"swarm-tui: --endpoint: not an http(s) URL: {args.endpoint!r}", file=sys.stderr)
        return EXIT_BAD_INPUT
    Journal.open(args.run_dir, readonly=True).close()  # no (whole) journal: exit 2 with its path
    report = export_run(args.run_dir, args.endpoint, content=args.otel_content)
    print(f"swarm-tui: {report.describe()}", file=sys.stdout if not report.dropped else sys.stderr)
    return EXIT_OK if not report.dropped else EXIT_FAILED
