"""summary.json is a typed record (`run.records.Summary`) whose keys are a contract: the schema page
(docs/reference/summary.md) documents exactly the record's keys, table by table, and a real run's
summary.json reads into the record and writes back the same file, key for key and in order."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import fields
from pathlib import Path

from swarm_tui import records
from swarm_tui.records import JsonRecord, Summary

from tests.conftest import run_cli, write_batch

PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference" / "summary.md"
FIXTURES = Path(__file__).parent / "fixtures"

SECTIONS: dict[str, type[JsonRecord]] = {
    "The top level": Summary,
    "`latency_ms`": records.LatencyMs,
    "`tokens`": records.TokenCounts,
    "`requests`": records.RequestCounts,
    "`failovers[]`": records.Failover,
    "`plans[]`": records.AutopilotPlan,
    "`deadline`": records.DeadlineOutcome,
    "`endpoints.NAME`": records.EndpointFigures,
    "`deadlines`": records.Deadlines,
    "`deadlines.by_model.NAME`": records.ModelPace,
    "`budget`": records.BudgetFigures,
    "`agents`": records.AgentTotals,
    "`orchestrator`": records.Orchestration,
    "`quality`": records.Quality,
    "`quality.by_round.ROUND`": records.RoundQuality,
    "`quality.drifts[]`": records.Drift,
    "`cache`": records.CacheTotals,
    "`answers`": records.AnswerTotals,
    "`traces`": records.Traces,
    "`batches[]`": records.Batch,
    "`stopped`": records.Stopped,
    "`suspensions[]`": records.Suspension,
    "`streaming.NAME`": records.StreamFigures,
    "`streaming.NAME.FIGURE`": records.Percentiles,
    "`cost_breakdown`": records.CostBreakdown,
    "`cost_breakdown.by_endpoint.NAME`": records.EndpointCost,
    "`cost_breakdown.currency`": records.CurrencyAmount,
}
"""Each table of the page, by its heading, and the record it documents."""
FLATTENED = {records.Autopilot, records.SpendFigures, records.TailDeadlines}
"""Records whose keys stand in another's table (a group of top-level keys, the tail deadlines)."""


def page_tables() -> dict[str, list[str]]:
    """The page's tables by heading: the key of each row, in order."""
    tables: dict[str, list[str]] = {}
    heading = None
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
        elif heading is not None and (row := re.match(r"\| `([a-z0-9_]+)` \|", line)):
            tables.setdefault(heading, []).append(row.group(1))
    return tables


def test_the_schema_page_documents_exactly_the_records_keys_in_order():
    tables = page_tables()
    assert set(tables) == set(SECTIONS), "a table of the page without its record, or a record without its table"
    for heading, record in SECTIONS.items():
        assert tables[heading] == list(record.json_keys()), f"{heading}: the page's keys are not the record's"


def test_every_record_of_summary_json_has_its_table():
    defined = {
        value
        for value in vars(records).values()
        if isinstance(value, type) and issubclass(value, JsonRecord) and value is not JsonRecord
    }
    assert defined == set(SECTIONS.values()) | FLATTENED
    for record in defined:  # every field is typed: what a key holds is said in the code as on the page
        assert all(f.type for f in fields(record))  # type: ignore[arg-type]


def assert_round_trips(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    summary = Summary.from_json(data)
    again = json.dumps(summary.to_json(), indent=2, ensure_ascii=False) + "\n"
    assert again == text, f"{path}: not the same file once read and written"


def test_a_run_s_summary_reads_into_the_record_and_writes_back_the_same_file(tmp_path):
    job = write_batch(tmp_path / "job.jsonl", ["a", "b", "c [[sim:500]]"], model="gpt-4.1-mini")
    flags = ["--headless", "--sim-latency-ms", "5", "--budget", "1", "--cache", "--cache-dir", str(tmp_path / "c")]
    first = run_cli("run", str(job), *flags, "--out", str(tmp_path / "first"), "--max-attempts", "1")
    assert first.returncode == 1, first.stderr
    again = run_cli("run", str(job), *flags, "--out", str(tmp_path / "again"), "--judge", "self", "--judge-rate", "1")
    assert again.returncode == 1, again.stderr  # the scripted 500 fails again: a failure is never cached
    for run in ("first", "again"):
        assert_round_trips(tmp_path / run / "summary.json")
    data = json.loads((tmp_path / "again" / "summary.json").read_text(encoding="utf-8"))
    assert {"budget", "cache", "quality", "cost_breakdown"} <= set(data), "the sections the test means to read"


def test_the_summary_of_an_older_journal_exported_reads_back_the_same(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copyfile(FIXTURES / "journal-v2" / "journal.sqlite", run_dir / "journal.sqlite")  # a failover in it
    assert run_cli("export", str(run_dir)).returncode == 0
    assert_round_trips(run_dir / "summary.json")
    assert json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["failovers"]
