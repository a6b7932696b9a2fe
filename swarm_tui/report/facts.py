"""What a run's report shows, gathered from its journal alone (read-only): a finished run, or a
running one as it stands (a snapshot).

The figures are the ones summary.json gives (`run.outputs.summarize` on the same journal: the
report and the file agree by construction), spread over time and broken down: the calls sent and
the answers kept per time bin (with the 429s and other errors), the run-wide in-flight limit and
the RPM learned, as the console's reducer keeps them (`view.RunView`, fed the run-wide events of
the log), latencies overall and per endpoint, cost over time against the budget and by lane,
endpoint and tier, errors by class with examples, the judge's scores by round, the slowest and
the failed agents with their attempts, the run's settings and how to go on with it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarm_tui.core.events import (
    ConcurrencyChanged,
    EndpointSwitched,
    RateLimitsLearned,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
)
from swarm_tui.journal import Journal
from swarm_tui.records import RunMeta
from swarm_tui.run.directory import lock_holder
from swarm_tui.run.outputs import facts_from_meta, summarize
from swarm_tui.view.run_view import RunView

__all__ = ["RunReport", "collect", "TIME_BINS"]

TIME_BINS = 120
"""About how many time bins the charts over time have, whatever the run's length."""
ERROR_EXAMPLES = 3
LISTED_AGENTS = 15
NICE_STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400)

RUN_WIDE = (RunStarted, ConcurrencyChanged, RateLimitsLearned, RunFinished, RunPaused, RunResumed, EndpointSwitched)
"""The log's events the report's limit and rate lines are kept from."""


@dataclass
class Timeline:
    """The run cut in `width_s` bins from `start` (epoch seconds): what happened in each."""

    start: float
    width_s: float
    bins: int
    requests: list[int]
    rate_limited: list[int]
    errors: list[int]
    answers: list[int]
    cost_usd: list[float]

    def at(self, index: int) -> float:
        """Seconds from the start to the middle of bin `index`."""
        return (index + 0.5) * self.width_s


@dataclass
class Step:
    """A value that holds from `at_s` (seconds from the timeline's start) until the next step."""

    at_s: float
    value: int | None


@dataclass
class AgentLine:
    """An agent the report lists (slowest, failed), with each of its attempts."""

    index: int
    custom_id: str
    took_s: float | None
    attempts: list[dict[str, Any]]


@dataclass
class RunReport:
    """Everything the page shows (see the module)."""

    run_dir: Path
    name: str
    source: str
    status: str
    """`finished`, `running` (a snapshot of a run some process drives now), or `stopped` (work left)."""
    made_at: float
    summary: dict[str, Any]
    timeline: Timeline | None
    limit: list[Step] = field(default_factory=list)
    ceiling: list[Step] = field(default_factory=list)
    rpm: list[Step] = field(default_factory=list)
    rpm_setting: int | None = None
    door_limits: dict[str, list[Step]] = field(default_factory=dict)
    door_rpm: dict[str, list[Step]] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    """Every answered call's latency (ms), sorted (summary.json's `latency_ms` is of these)."""
    endpoint_latencies: dict[str, list[float]] = field(default_factory=dict)
    endpoint_percentiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each endpoint's p50/p95 (summary.json's `endpoints`) and p99."""
    budget_usd: float | None = None
    errors: list[tuple[str, int, list[dict[str, Any]]]] = field(default_factory=list)
    scores: dict[int, list[float]] = field(default_factory=dict)
    """The judge's scores by round."""
    slowest: list[AgentLine] = field(default_factory=list)
    failed: list[AgentLine] = field(default_factory=list)
    failed_total: int = 0
    settings: list[tuple[str, str]] = field(default_factory=list)
    next_steps: list[tuple[str, str]] = field(default_factory=list)
    table: dict[str, Any] | None = None

    @property
    def routed(self) -> bool:
        return len(self.endpoint_latencies) > 1


def collect(run_dir: Path) -> RunReport:
    """The report of the run in `run_dir`, from its journal opened read-only (a run some process
    drives now is read as it stands: its journal is WAL, readers never block its writer)."""
    journal = Journal.open(run_dir, readonly=True, up_to_date=True)
    try:
        return _collect(journal, run_dir)
    finally:
        journal.close()


def _collect(journal: Journal, run_dir: Path) -> RunReport:
    queries = journal.queries
    record = RunMeta.read(journal)
    facts = facts_from_meta(journal)
    running = lock_holder(run_dir) is not None and not journal.history.run_ended()
    summary = None if running else _written_summary(run_dir)
    if summary is None:  # a running run's, or one whose outputs were left for `swarm-tui export`
        summary = summarize(journal, facts).to_json()
    status = "running" if running else ("finished" if not summary["unfinished"] else "stopped")
    report = RunReport(
        run_dir=run_dir,
        name=record.job.name or run_dir.name,
        source=record.job.source,
        status=status,
        made_at=time.time(),
        summary=summary,
        timeline=_timeline(journal),
        table=record.job.table,
    )
    report.rpm_setting = record.plan.settings.pacing.rpm
    report.budget_usd = record.plan.settings.guards.budget_usd
    _limits(journal, report)
    report.latencies = queries.success_latencies()
    report.endpoint_latencies = queries.endpoint_latencies()
    report.endpoint_percentiles = _endpoint_percentiles(summary, report.endpoint_latencies)
    report.errors = [
        (name, count, queries.error_examples(name, ERROR_EXAMPLES)) for name, count in queries.error_classes()
    ]
    for score, _, round_number in journal.history.judgments().values():
        report.scores.setdefault(round_number, []).append(score)
    report.slowest = [
        AgentLine(index, custom_id, took, queries.attempts_of(index))
        for index, custom_id, took, _ in queries.slowest_tasks(LISTED_AGENTS)
    ]
    report.failed_total, failed = queries.failed_tasks(LISTED_AGENTS)
    report.failed = [AgentLine(index, cid, None, queries.attempts_of(index)) for index, cid in failed]
    report.settings = _settings(record.to_meta(), record.plan.model)
    report.next_steps = _next_steps(run_dir, report)
    return report


def _written_summary(run_dir: Path) -> dict[str, Any] | None:
    """The summary.json a run that no process drives left: what its user was given (every resume
    removes it before it sends anything, and writes it again at its end), read rather than worked
    out again (its cost breakdown reads every attempt of the log: seconds for 100,000 tasks)."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    needed = ("total", "succeeded", "failed", "unfinished", "latency_ms", "requests", "tokens")
    return summary if isinstance(summary, dict) and all(key in summary for key in needed) else None


def _endpoint_percentiles(summary: dict[str, Any], latencies: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Each endpoint's p50 and p95 as summary.json's `endpoints` gives them, and its p99 ranked the
    same way (the summary has none an endpoint)."""
    figures: dict[str, dict[str, Any]] = {}
    for name, values in latencies.items():
        given = (summary.get("endpoints") or {}).get(name) or {}
        p99 = round(values[min(len(values) - 1, int(0.99 * len(values)))], 1) if values else None
        figures[name] = {"p50": given.get("p50_ms"), "p95": given.get("p95_ms"), "p99": p99}
    return figures


def _timeline(journal: Journal) -> Timeline | None:
    span = journal.queries.time_span()
    if span is None:
        return None
    start, end = span
    width = next((step for step in NICE_STEPS if (end - start) / step <= TIME_BINS), NICE_STEPS[-1])
    bins = max(1, int((end - start) / width) + 1)
    requests, limited, errors, answers = [0] * bins, [0] * bins, [0] * bins, [0] * bins
    cost = [0.0] * bins
    for index, sent, rate_limited, failed, usd in journal.queries.attempt_timeline(start, width):
        at = min(max(index, 0), bins - 1)
        requests[at] += sent
        limited[at] += rate_limited
        errors[at] += failed
        cost[at] += usd
    for index, kept in journal.queries.answer_timeline(start, width):
        answers[min(max(index, 0), bins - 1)] += kept
    return Timeline(start, width, bins, requests, limited, errors, answers, cost)


def _limits(journal: Journal, report: RunReport) -> None:
    """The in-flight limit, its ceiling and the RPM learned over time (and each endpoint's, on a
    routed run), as the console's reducer keeps them: sampled after each run-wide event."""
    start = report.timeline.start if report.timeline is not None else None
    view = RunView(screen=False)
    for at, event in journal.history.logged(*RUN_WIDE):
        view.observe(event, at)
        t = at - start if start is not None else 0.0
        figures = view.figures
        _step(report.limit, t, figures.limit)
        _step(report.ceiling, t, figures.ceiling)
        _step(report.rpm, t, figures.rate_limits[0])
        for name, door in view.endpoints.doors.items():
            _step(report.door_limits.setdefault(name, []), t, door.limit)
            _step(report.door_rpm.setdefault(name, []), t, door.rpm_limit)


def _step(steps: list[Step], at_s: float, value: int | None) -> None:
    if not steps or steps[-1].value != value:
        steps.append(Step(at_s, value))


def _settings(meta: dict[str, Any], model: str | None) -> list[tuple[str, str]]:
    """The run's settings, as its journal recorded them, one line a group."""
    plan = meta.get("plan") or {}
    profile = plan.get("profile") or {}
    lines = [
        ("job", str((meta.get("job") or {}).get("source") or "")),
        ("provider", f"{profile.get('name')}" + (f" ({profile['base_url']})" if profile.get("base_url") else "")),
        ("model", str(model or "each request's own")),
    ]
    settings = plan.get("settings") or {}
    for group, values in settings.items():
        if isinstance(values, dict):
            shown = ", ".join(f"{key}={_shown(value)}" for key, value in values.items() if value not in (None, False))
            lines.append((group, shown or "defaults"))
    route = plan.get("route")
    if route:
        lines.append(("route", json.dumps(route, ensure_ascii=False)))
    cache = plan.get("cache") or {}
    if cache.get("mode") and cache.get("mode") != "off":
        lines.append(("cache", ", ".join(f"{k}={_shown(v)}" for k, v in cache.items() if v is not None)))
    if meta.get("swarm"):
        lines.append(("swarm", "plan / rounds / aggregate (see the job)"))
    if meta.get("judge"):
        lines.append(("judge", "on (a sample of the answers scored)"))
    return lines


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _next_steps(run_dir: Path, report: RunReport) -> list[tuple[str, str]]:
    """How to go on with the run: resume it, retry its failures, export it, look at it."""
    summary = report.summary
    steps = []
    if report.status == "running":
        steps.append(("watch and steer it", f"swarm-tui attach {run_dir}"))
    elif summary["unfinished"]:
        steps.append(("finish what it left", f"swarm-tui resume {run_dir}"))
    if summary["failed"] and report.status != "running":
        steps.append(("send its failed tasks again", f"swarm-tui resume {run_dir} --retry-failed"))
    steps.append(("its answers as a table", f"swarm-tui export {run_dir} --format csv"))
    steps.append(("this report again", f"swarm-tui report {run_dir}"))
    return steps
