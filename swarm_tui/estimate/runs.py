"""Per-task tokens measured in a real run (`--from-run`, the TUI's `$` on a live run): billed
tokens per finished task, retries and failures included, from the run's journal (read-only) or
its summary.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from swarm_tui.core.errors import InputError
from swarm_tui.core.usage import Usage
from swarm_tui.estimate.scenario import SOURCE, Scenario
from swarm_tui.records import RunMeta, Summary


@dataclass(frozen=True)
class RunMeasurement:
    run_dir: str
    finished_tasks: int
    input_tokens: float
    output_tokens: float
    cached_share: float
    model: str | None
    provider: str | None
    simulated: bool


def measure_run(run_dir: str | Path) -> RunMeasurement:
    """Per-task tokens of a run: billed tokens / finished tasks, from its journal (read-only) or,
    without one, its summary.json."""
    run_dir = Path(run_dir)
    from swarm_tui.journal import JOURNAL_NAME, Journal

    model: str | None
    provider: str | None
    if (run_dir / JOURNAL_NAME).exists():
        journal = Journal.open(run_dir, readonly=True)
        try:
            totals = journal.queries.attempt_totals()
            counts = journal.queries.counts()
            plan = RunMeta.read(journal).plan
        finally:
            journal.close()
        finished = counts.get("succeeded", 0) + counts.get("failed", 0)
        prompt, completion, cached = totals["prompt"], totals["completion"], totals["cached"]
        model, provider, simulated = plan.model, plan.profile.name, plan.profile.is_simulator
    elif (run_dir / "summary.json").exists():
        try:
            summary = Summary.from_json(json.loads((run_dir / "summary.json").read_text(encoding="utf-8")))
            finished = int(summary.succeeded) + int(summary.failed)
            tokens = summary.tokens
            prompt, completion, cached = int(tokens.prompt), int(tokens.completion), int(tokens.cached)
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError.single(run_dir / "summary.json", "tokens", f"unreadable summary: {exc}") from None
        model, provider, simulated = summary.model, summary.provider or None, bool(summary.simulated)
    else:
        raise InputError.single(run_dir, "--from-run", "not a run directory (no journal.sqlite or summary.json)")
    if finished <= 0:
        raise InputError.single(run_dir, "--from-run", "the run has no finished task to measure tokens from")
    return RunMeasurement(
        str(run_dir),
        finished,
        prompt / finished,
        completion / finished,
        cached / prompt if prompt else 0.0,
        model,
        provider,
        simulated,
    )


def scenario_from_usage(
    usage: Usage, finished_tasks: int, base: Scenario | None = None, measured_from: str = "this run"
) -> Scenario:
    """`base` with the per-task tokens of `usage` billed over `finished_tasks` tasks: what the TUI
    uses to project a live run (`RunStats.usage`, `RunStats.done`)."""
    if finished_tasks <= 0:
        raise InputError.single(SOURCE, "tasks", "no finished task to measure tokens from yet")
    return replace(
        base or Scenario(),
        input_tokens=usage.prompt / finished_tasks,
        output_tokens=usage.completion / finished_tasks,
        cached_share=usage.cached / usage.prompt if usage.prompt else 0.0,
        measured_from=measured_from,
    )


def scenario_from_run(measured: RunMeasurement, base: Scenario | None = None, **explicit: Any) -> Scenario:
    """`base` (agents, tasks a day, days) with the run's per-task tokens, unless given in `explicit`."""
    base = base or Scenario()
    values: dict[str, Any] = {
        "input_tokens": measured.input_tokens,
        "output_tokens": measured.output_tokens,
        "cached_share": measured.cached_share,
    }
    values.update({k: v for k, v in explicit.items() if v is not None})
    return replace(base, measured_from=measured.run_dir, **values)
