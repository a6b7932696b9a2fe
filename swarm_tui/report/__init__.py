"""A run's report: one self-contained HTML file to hand to someone who was not watching.

`swarm-tui report RUN` (and the console's key) writes it from the run's journal alone, read-only,
for a finished run or as a snapshot of a running one:

    facts.py   what it shows, gathered from the journal (the figures are summary.json's)
    charts.py  the charts: matplotlib figures as inline SVG, their labels text (the `report` extra)
    page.py    the HTML page: its own styles, nothing fetched from a network
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from swarm_tui.util.files import open_private, temp_name

__all__ = ["REPORT_NAME", "ReportWritten", "write_report"]

REPORT_NAME = "report.html"
"""The report's file in its run directory, unless told otherwise."""


@dataclass(frozen=True)
class ReportWritten:
    path: Path
    bytes: int
    seconds: float
    status: str


def write_report(run_dir: Path, out: Path | None = None) -> ReportWritten:
    """Write the report of the run in `run_dir` to `out` (default `RUN/report.html`), atomically.
    `ImportError` naming the extra when matplotlib is missing (before the journal is read)."""
    from swarm_tui import __version__
    from swarm_tui.report.charts import Charts, require_matplotlib
    from swarm_tui.report.facts import collect
    from swarm_tui.report.page import render_page

    require_matplotlib()
    started = time.perf_counter()
    report = collect(run_dir)
    html = render_page(report, Charts(report).all(), __version__)
    out = out or run_dir / REPORT_NAME
    tmp = out.with_name(temp_name(out.name))
    try:
        with open_private(tmp) as fh:
            fh.write(html)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return ReportWritten(out, len(html.encode("utf-8")), time.perf_counter() - started, report.status)
