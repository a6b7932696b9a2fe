"""A run's outputs at its end: written, or left for later when the user asked to stop.

The outputs (`outputs.write_outputs`) are written from the journal in one pass over its results:
about 30 us an answer, so a stop of a run holding hundreds of thousands of answers would spend
minutes exporting after the user asked to leave. A stop the user asked for (Ctrl-C, SIGTERM,
the console's abort or quit) with work left and more than `STOP_EXPORT_MAX_RESULTS` answers in
the journal writes none of them: the journal keeps every answer, the summary on screen comes
from its cheap aggregates, and the note says how to get the files (`swarm-tui export RUN`, which
sends nothing, or the `resume` that finishes the run). A run that ends by itself, or a stop with
fewer answers, writes its outputs as always.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import configured_currency
from .currency import USD, DisplayCurrency
from .engine.ledger import BudgetReport
from .journal import Journal
from .outputs import summarize, write_outputs
from .run_plan import plan_from_meta
from .rundir import describe_write_failure

__all__ = ["STOP_EXPORT_MAX_RESULTS", "OutputFacts", "RunOutputs", "deferred_note", "end_outputs", "facts_from_meta"]

STOP_EXPORT_MAX_RESULTS = 20_000
"""At a stop the user asked for, the most answers whose export is still written before exiting
(about 0.6 s of work on a 2-core machine); above it the outputs are left for `swarm-tui export`."""


@dataclass(frozen=True)
class OutputFacts:
    """What summary.json says beyond the journal: the run's model and endpoint, its display
    currency (chosen when it opened), and the engine's budget ledger and tail deadlines."""

    model: str | None
    provider: str
    simulated: bool
    currency: DisplayCurrency = USD
    budget: dict[str, Any] | None = None
    deadlines: dict[str, Any] | None = None
    traces: dict[str, Any] | None = None


@dataclass(frozen=True)
class RunOutputs:
    """How the end went: the summary (written or not), why the files could not be written
    (`error`), or why they were left for later and how to get them (`deferred`)."""

    summary: dict[str, Any]
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
        answers = journal.result_count()
        if answers > STOP_EXPORT_MAX_RESULTS:
            return RunOutputs(_summary(journal, facts, breakdown=False), deferred=deferred_note(run_dir, answers))
    try:
        return RunOutputs(_write(run_dir, journal, facts))
    except OSError as exc:
        error = describe_write_failure(exc, Path(exc.filename or run_dir))
        return RunOutputs(_summary(journal, facts), error=error)


def _write(run_dir: Path, journal: Journal, facts: OutputFacts) -> dict[str, Any]:
    return write_outputs(
        run_dir,
        journal,
        facts.model,
        facts.provider,
        facts.simulated,
        deadlines=facts.deadlines,
        currency=facts.currency,
        budget=facts.budget,
        traces=facts.traces,
    )


def _summary(journal: Journal, facts: OutputFacts, *, breakdown: bool = True) -> dict[str, Any]:
    return summarize(
        journal,
        model=facts.model,
        provider=facts.provider,
        simulated=facts.simulated,
        deadlines=facts.deadlines,
        currency=facts.currency,
        budget=facts.budget,
        traces=facts.traces,
        breakdown=breakdown,
    )


def facts_from_meta(journal: Journal) -> OutputFacts:
    """The facts of a run no process drives (`swarm-tui export`), from what its journal recorded:
    its plan's endpoint and model, its prices' currency, its budget against what it spent."""
    meta = journal.meta()
    plan = plan_from_meta(meta["plan"])
    template = meta.get("template") or {}
    model = plan.profile.model or journal.first_model() or template.get("model")
    budget = plan.settings.budget_usd
    return OutputFacts(
        model=model,
        provider=plan.profile.name,
        simulated=plan.profile.is_simulator,
        currency=configured_currency(provider=plan.profile.name, prices=plan.prices),
        budget=None if budget is None else BudgetReport(budget, journal.spent_usd(), 0.0, False).to_dict(),
    )
