"""A run's outputs, written from its journal: results.jsonl, errors.jsonl, transcripts.jsonl and
summary.json (`records.Summary`), the files scripts read after a run: their formats are a contract.

Each is written under a temporary name (0600) and renamed into place, so a reader never sees
half a file; a resume removes the previous session's before it sends anything
(`discard_outputs`), so that outputs which cannot be written at its end are missing, never
stale files that look current.

At a run's end (`end_outputs`) they are written from the journal in one pass over its results
(about 30 us an answer), so a stop of a run holding hundreds of thousands of answers would spend
minutes exporting after the user asked to leave. A stop the user asked for (Ctrl-C, SIGTERM,
the console's abort or quit) with work left and more than `STOP_EXPORT_MAX_RESULTS` answers in
the journal writes none of them: the journal keeps every answer, the summary on screen comes
from its cheap aggregates, and the note says how to get the files (`swarm-tui export RUN`, which
sends nothing, or the `resume` that finishes the run). A run that ends by itself, or a stop with
fewer answers, writes its outputs as always.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swarm_tui.config import configured_currency
from swarm_tui.core.errors import InputError
from swarm_tui.core.events import (
    AgentStepped,
    EndpointSwitched,
    PlanChanged,
    RunStarted,
    RunStopping,
    RunSuspended,
    SuspensionEnded,
    TasksAdded,
    TaskSucceeded,
    ToolCallEnded,
)
from swarm_tui.engine import TaskState
from swarm_tui.engine.answers import ESCALATED_PREFIX
from swarm_tui.engine.ledger import BudgetReport
from swarm_tui.engine.stats import latency_summary
from swarm_tui.journal import Journal
from swarm_tui.judge.judge import quality_summary
from swarm_tui.pricing.currency import USD, DisplayCurrency
from swarm_tui.providers.answer import repaired_text
from swarm_tui.records import (
    AgentTotals,
    AnswerTotals,
    Autopilot,
    AutopilotPlan,
    Batch,
    BudgetFigures,
    CacheTotals,
    DeadlineOutcome,
    Deadlines,
    EndpointFigures,
    Failover,
    LatencyMs,
    Orchestration,
    Percentiles,
    Quality,
    RequestCounts,
    RunMeta,
    RunPlan,
    Stopped,
    StreamFigures,
    Summary,
    Suspension,
    TailDeadlines,
    TokenCounts,
    Traces,
)
from swarm_tui.run.cost import summary_cost_fields
from swarm_tui.util.files import describe_write_failure, open_private, temp_name
from swarm_tui.util.strict_json import strict_text
from swarm_tui.view.family import AgentTree

OUTPUT_NAMES = ("results.jsonl", "errors.jsonl", "transcripts.jsonl", "summary.json")


def discard_outputs(run_dir: Path) -> None:
    """Remove an earlier session's outputs before this one sends anything: if this session cannot
    write its own at the end, none is left to look current (InputError, exit 2, when they cannot
    be removed: nothing has been sent)."""
    for name in OUTPUT_NAMES:
        path = run_dir / name
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise InputError.single(
                path, "run directory", f"cannot remove the previous session's output: {exc.strerror or exc}"
            ) from None


def write_outputs(run_dir: Path, journal: Journal, facts: OutputFacts) -> Summary:
    with _atomic(run_dir / "results.jsonl") as results, _atomic(run_dir / "errors.jsonl") as errors:
        for custom_id, ok, request_id, response, error, parsed in journal.queries.iter_answer_rows():
            if ok:
                results.write(_result_line(custom_id, request_id, response or "null", parsed))
                continue
            failure = error or {}  # a failed task's result always holds its error
            line = {
                "id": f"batch_req_{request_id or custom_id}",
                "custom_id": custom_id,
                "response": {"status_code": failure.get("status"), "request_id": request_id, "body": None},
                "error": {"code": failure.get("code"), "message": failure.get("message")},
            }
            errors.write(strict_text(line) + "\n")  # a key masked, U+2028 escaped: one strict line
    summary = summarize(journal, facts)
    if summary.agents is not None:  # multi-step agents: each one's whole transcript, custom_id first
        with _atomic(run_dir / "transcripts.jsonl") as transcripts:
            for transcript in journal.history.iter_transcripts():
                transcripts.write(strict_text(transcript) + "\n")
    with _atomic(run_dir / "summary.json") as fh:
        json.dump(summary.to_json(), fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    return summary


def _result_line(custom_id: str, request_id: str | None, body: str, parsed: str | None = None) -> str:
    """One results.jsonl line (the OpenAI Batch output format) with the answer spliced in as the
    journal keeps it (strict one-line JSON, `providers.answer`): no answer is read or encoded
    again at export, unless a journal written before answers were checked holds one to repair.
    An answer whose checks read a JSON value has it as a top-level `parsed` (as the journal keeps
    it: compact JSON, re-encoded strictly only when it is not already one safe line)."""
    head = strict_text({"id": f"batch_req_{request_id or custom_id}", "custom_id": custom_id})
    body = repaired_text(body)
    request = strict_text(request_id)
    tail = "" if parsed is None else f', "parsed": {_one_line(parsed)}'
    return (
        f'{head[:-1]}, "response": {{"status_code": 200, "request_id": {request}, "body": {body}}}, '
        f'"error": null{tail}}}\n'
    )


def _one_line(parsed: str) -> str:
    """The kept JSON value as results.jsonl writes every value: strict, one line, keys masked. Most
    are so already (ASCII on one line, without NaN: the journal's connection masked any key) and
    are spliced as kept; the others are read and written again under the strict rules."""
    if (
        parsed.isascii()
        and "\n" not in parsed
        and "\r" not in parsed
        and "NaN" not in parsed
        and "Infinity" not in parsed
    ):
        return parsed
    return strict_text(json.loads(parsed))


def summarize(journal: Journal, facts: OutputFacts, *, breakdown: bool = True) -> Summary:
    """summary.json, from the journal and what it does not hold (`facts`). `breakdown`: the cost
    fields (`run.cost.summary_cost_fields`), which read every attempt in the log: left out of the
    summary shown at a stop whose outputs are left for later (`end_outputs`)."""
    counts = journal.queries.counts()
    totals = journal.queries.attempt_totals()
    total = sum(counts.values())
    succeeded = counts.get(TaskState.SUCCEEDED, 0)
    failed = counts.get(TaskState.FAILED, 0)
    makespan = None
    if totals["first_started"] is not None:
        makespan = round(totals["last_ended"] - totals["first_started"], 3)
    cost = totals["cost_usd"]
    cost_usd = round(cost, 6) if cost is not None and not totals["unpriced"] else None
    unfinished = total - succeeded - failed
    plan = facts.plan
    quality = quality_summary(journal)
    agents = journal.history.agent_totals()
    orchestrated = orchestration(journal, total)
    cache = journal.queries.cache_totals()
    answers = journal.queries.answer_totals(ESCALATED_PREFIX)  # unusable answers: by class, and what followed
    stopped, suspensions, streaming = _liveness_sections(journal, unfinished)
    return Summary(
        total=total,
        succeeded=succeeded,
        failed=failed,
        unfinished=unfinished,
        makespan_s=makespan,
        latency_ms=LatencyMs(**latency_summary(journal.queries.success_latencies())),
        tokens=TokenCounts(totals["prompt"], totals["completion"], totals["cached"], totals["reasoning"]),
        cost_usd=cost_usd,
        cost_estimated_usd=round(totals["estimated_cost_usd"] or 0.0, 6),
        cost_note=_cost_note(totals, plan.model),
        truncated=totals["truncated"],
        requests=RequestCounts(**{k: totals[k] for k in RequestCounts.json_keys()}),
        provider=plan.profile.name,
        model=plan.model,
        simulated=plan.profile.is_simulator,
        failovers=failovers(journal),
        autopilot=autopilot(journal, totals["last_ended"]),
        endpoints={name: EndpointFigures.from_json(row) for name, row in journal.queries.endpoint_totals().items()},
        deadlines=Deadlines(facts.deadlines, journal.queries.abandoned_attempts()),
        budget=facts.budget,
        agents=AgentTotals.from_json(agents) if agents is not None else None,
        orchestrator=orchestrated,
        quality=Quality.from_json(quality) if quality is not None else None,
        cache=CacheTotals.from_json(cache) if cache is not None else None,
        answers=AnswerTotals.from_json({"valid": succeeded, **answers}) if answers is not None else None,
        traces=facts.traces,
        batches=[Batch.from_json(batch) for batch in journal.history.batch_summary()],
        stopped=stopped,
        suspensions=suspensions,
        streaming=streaming,
        spend=summary_cost_fields(
            journal,
            plan,
            cost_usd=cost_usd,
            makespan_s=makespan,
            finished=succeeded + failed,
            unfinished=unfinished,
            currency=facts.currency,
        )
        if breakdown
        else None,
    )


def orchestration(journal: Journal, total: int) -> Orchestration | None:
    """An orchestrator's run (None: no agent spawned one): its agents by level and the critical
    path, worked out from the log by the console's own reducer (`view.family`)."""
    if not journal.queries.spawned():
        return None
    tree = AgentTree()
    for _, event in journal.history.logged(TasksAdded, AgentStepped, ToolCallEnded, TaskSucceeded):
        if isinstance(event, TasksAdded):
            tree.added(event)
        elif isinstance(event, AgentStepped):
            tree.stepped(event)
        elif isinstance(event, ToolCallEnded):
            tree.tool_ended(event)
        elif isinstance(event, TaskSucceeded):
            tree.succeeded(event)
    path = tree.critical_path()
    return Orchestration(
        spawned=len(tree.parent),
        spawns=len({(spawn.parent, spawn.key) for index in tree.parent if (spawn := tree.spawn_of(index))}),
        levels=tree.levels(total),
        critical_path_calls=path.calls if path is not None else 0,
        critical_path_s=round(path.seconds, 3) if path is not None else 0.0,
    )


def _liveness_sections(
    journal: Journal, unfinished: int
) -> tuple[Stopped | None, list[Suspension], dict[str, StreamFigures]]:
    """What kept the run from its end, and how its streams went: `stopped` (why dispatch stopped,
    while tasks are left: a refusal, no connection, a budget, a suspension past its bound; None
    otherwise), `suspensions` (each wait for the provider to serve the account again) and
    `streaming` (per endpoint: time to first token, tokens a second, gap between chunks)."""
    stopped = None
    stops = journal.history.logged(RunStopping)
    if unfinished and stops:
        at, event = stops[-1]
        assert isinstance(event, RunStopping)
        stopped = Stopped(at, event.reason)
    held: list[Suspension] = []
    for at, event in journal.history.logged(RunSuspended, SuspensionEnded):
        if isinstance(event, RunSuspended):
            held.append(Suspension(at, event.kind, event.reason))
        elif held and held[-1].suspended_s is None:
            assert isinstance(event, SuspensionEnded)
            held[-1] = dataclasses.replace(held[-1], suspended_s=event.suspended_s)
    streaming = {
        endpoint: StreamFigures(
            len(figures["ttft_ms"]),
            **{name: _p50_p95(values) for name, values in figures.items()},
        )
        for endpoint, figures in journal.queries.stream_figures().items()
    }
    return stopped, held, streaming


def _p50_p95(values: list[float]) -> Percentiles:
    summary = latency_summary(values)
    return Percentiles(summary["p50"], summary["p95"])


def failovers(journal: Journal) -> list[Failover]:
    """Each switch of endpoints the log holds (to the fallback, or back): when, to where, why, and
    whether it left the primary (said by the event, else worked out from the endpoints: each run
    starts on its primary, `RunStarted.provider`)."""
    switches: list[Failover] = []
    primary = current = None
    for at, event in journal.history.logged(RunStarted, EndpointSwitched):
        if isinstance(event, RunStarted):
            primary = current = event.provider
            continue
        assert isinstance(event, EndpointSwitched)
        left_primary = event.from_primary if event.from_primary is not None else current == primary
        switches.append(Failover(at, event.endpoint, event.reason, left_primary))
        current = event.endpoint
    return switches


def _cost_note(totals: dict[str, Any], model: str | None) -> str | None:
    notes = []
    if totals["unpriced"]:
        notes.append(f"price unknown for model {model!r}")
    if totals["estimated"]:
        notes.append(
            f"{totals['estimated']} attempt{'s' if totals['estimated'] != 1 else ''} billed by estimate "
            f"(${totals['estimated_cost_usd'] or 0:.4f}): no usage reported, or cut after it went out"
        )
    return "; ".join(notes) or None


class _atomic:
    """Write a file (0600) under a temporary name and move it into place: never half-written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(temp_name(path.name))

    def __enter__(self):
        self.fh = open_private(self.tmp)
        return self.fh

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.fh.close()
            if exc_type is None:
                os.replace(self.tmp, self.path)
        except BaseException:
            self.tmp.unlink(missing_ok=True)
            raise
        if exc_type is not None:
            self.tmp.unlink(missing_ok=True)


def autopilot(journal: Journal, ended_at: float | None) -> Autopilot | None:
    """A deadline run's plans as the autopilot made them (`PlanChanged`), and its deadline: kept
    or not, with the predicted finish and cost of each plan beside what happened. None without one."""
    changes = [(at, event) for at, event in journal.history.logged(PlanChanged) if isinstance(event, PlanChanged)]
    if not changes:
        return None
    plans = [
        AutopilotPlan(at, event.live, event.batch, event.finish_at, event.cost_usd, event.feasible, event.reason)
        for at, event in changes
    ]
    deadline = changes[0][1].deadline_at
    met = ended_at is not None and ended_at <= deadline
    return Autopilot(plans, DeadlineOutcome(deadline, ended_at, met))


STOP_EXPORT_MAX_RESULTS = 20_000
"""At a stop the user asked for, the most answers whose export is still written before exiting
(about 0.6 s of work on a 2-core machine); above it the outputs are left for `swarm-tui export`."""


@dataclass(frozen=True)
class OutputFacts:
    """What summary.json says beyond the journal: the run's plan (its endpoint, its model, the
    prices it is billed at), its display currency (chosen when it opened), and the engine's budget
    ledger, tail deadlines and trace export as the session ended."""

    plan: RunPlan
    currency: DisplayCurrency = USD
    budget: BudgetFigures | None = None
    deadlines: TailDeadlines | None = None
    traces: Traces | None = None


@dataclass(frozen=True)
class RunOutputs:
    """How the end went: the summary (written or not), why the files could not be written
    (`error`), or why they were left for later and how to get them (`deferred`)."""

    summary: Summary
    error: str | None = None
    deferred: str | None = None


def deferred_note(run_dir: Path, answers: int) -> str:
    """What the user is told when the outputs were left for later: why, and the command."""
    return (
        f"results.jsonl, errors.jsonl and summary.json not written at the stop ({answers:,} answers: "
        f"the journal keeps every one); write them, sending nothing, with: swarm-tui export {run_dir}"
    )


def end_outputs(run_dir: Path, journal: Journal, facts: OutputFacts, *, user_stop: bool = False) -> RunOutputs:
    """Write the outputs from the journal (atomically), or leave them for later at a stop the user
    asked for with more than `STOP_EXPORT_MAX_RESULTS` answers (`user_stop`: the caller says so,
    and that work is left). When they cannot be written (disk full, the directory gone) the
    summary is still returned and `error` says why: a resume (or `swarm-tui export`) writes them."""
    if user_stop:
        answers = journal.queries.result_count()
        if answers > STOP_EXPORT_MAX_RESULTS:
            return RunOutputs(summarize(journal, facts, breakdown=False), deferred=deferred_note(run_dir, answers))
    try:
        return RunOutputs(write_outputs(run_dir, journal, facts))
    except OSError as exc:
        error = describe_write_failure(exc, Path(exc.filename or run_dir))
        return RunOutputs(summarize(journal, facts), error=error)


def facts_from_meta(journal: Journal) -> OutputFacts:
    """The facts of a run no process drives (`swarm-tui export`), from what its journal recorded:
    its plan (endpoint, model, prices), its prices' currency, its budget against what it spent."""
    plan = RunMeta.read(journal).plan
    budget = plan.settings.guards.budget_usd
    spent = BudgetReport(budget, journal.queries.spent_usd(), 0.0, False) if budget is not None else None
    return OutputFacts(
        plan,
        currency=configured_currency(provider=plan.profile.name, prices=plan.prices),
        budget=BudgetFigures.from_json(spent.to_dict()) if spent is not None else None,
    )
