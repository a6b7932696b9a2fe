"""`swarm-tui export RUN --format csv|parquet|jsonl`: the run's tasks as a table, in task order,
each the job's own row (a table job's input row, kept in the journal beside its task) with its
answer joined on: the answer's text, its parsed fields when the job checked its answers (`[workers]
json = true`), the task's status, error class and message, tokens, cost, latency, endpoint and
attempts.

Read from the journal alone (never the job file, which may be gone or changed since), a window of
tasks at a time, so a million rows are written in flat memory. An answer column never takes the
place of an input column of the same name: it gets a suffix (`status_swarm`). A job that was not a
table (a Batch JSONL or TOML job, or a table run from before rows were kept) gives `custom_id` and
`prompt` from its bodies as its input columns.

pyarrow writes the CSV and Parquet files (the `data` extra); JSON Lines needs nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from swarm_tui.core.errors import InputError
from swarm_tui.core.task import Task
from swarm_tui.jobs.table_files import Column, kind_of_value, require_pyarrow, wider_kind
from swarm_tui.journal import Journal
from swarm_tui.journal.queries import ExportRow
from swarm_tui.util.files import open_private, temp_name
from swarm_tui.util.json_repair import JsonExtractionError, extract_json

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["FORMATS", "TableExport", "export_table", "default_export_path"]

FORMATS = ("csv", "parquet", "jsonl")
WINDOW = 5_000
"""Tasks read and written at a time."""
MAX_PARSED_FIELDS = 64
"""The most parsed-answer fields that become columns (the first met, in order)."""
SUFFIX = "_swarm"
"""What an answer column's name takes when an input column already has it."""

ANSWER_COLUMNS: tuple[Column, ...] = (
    Column("custom_id"),
    Column("answer"),
    Column("status"),
    Column("error_class"),
    Column("error_message"),
    Column("prompt_tokens", "integer"),
    Column("completion_tokens", "integer"),
    Column("cached_tokens", "integer"),
    Column("cost_usd", "float"),
    Column("latency_ms", "float"),
    Column("endpoint"),
    Column("attempts", "integer"),
)
"""The columns every export adds to the input's (the parsed fields go after `answer`)."""


@dataclass(frozen=True)
class TableExport:
    """What an export wrote: where, how many rows, and its columns (input first)."""

    path: Path
    rows: int
    columns: list[str]
    input_columns: int


def default_export_path(run_dir: Path, fmt: str) -> Path:
    """`RUN/answers.csv` (and .parquet, .jsonl: results.jsonl is the Batch output's name)."""
    return run_dir / f"answers.{fmt}"


def export_table(run_dir: Path, fmt: str, out: Path | None = None) -> TableExport:
    """Write the run's table (see the module) to `out` (default `default_export_path`), atomically;
    `InputError` for an unknown format, or CSV/Parquet without pyarrow."""
    if fmt not in FORMATS:
        raise InputError.single(run_dir, "--format", f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    if fmt != "jsonl":
        require_pyarrow(run_dir, f"--format {fmt}")
    out = out or default_export_path(run_dir, fmt)
    journal = Journal.open(run_dir, readonly=True, up_to_date=True)
    try:
        plan = _plan(journal)
        tmp = out.with_name(temp_name(out.name))
        try:
            count = _WRITERS[fmt](tmp, plan, _rows(journal, plan))
            os.replace(tmp, out)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    finally:
        journal.close()
    return TableExport(out, count, plan.names, len(plan.inputs))


# ----------------------------------------------------------------- the columns


@dataclass(frozen=True)
class _Plan:
    """The export's columns: the input's, then the answer's (each named as written)."""

    inputs: list[Column]
    from_rows: bool
    """The inputs are the job's rows (else `custom_id` and `prompt` from the bodies)."""
    parsed: list[Column]
    answer: list[Column]
    names: list[str]

    @property
    def columns(self) -> list[Column]:
        return [*self.inputs, *self.answer]


def _plan(journal: Journal) -> _Plan:
    meta = journal.queries.meta()
    table = (meta.get("job") or {}).get("table")
    from_rows = table is not None and _has_rows(journal)
    if table is not None and from_rows:
        inputs = [Column(c["name"], c.get("kind", "string")) for c in table["columns"]]
    else:
        inputs = [Column("custom_id"), Column("prompt")]
    workers = ((meta.get("swarm") or {}).get("workers")) or {}
    parsed = _parsed_fields(journal) if workers.get("json") or journal.queries.has_parsed() else []
    taken = {column.name for column in inputs}
    answer: list[Column] = []
    own = [c for c in ANSWER_COLUMNS if from_rows or c.name != "custom_id"]
    after_answer = [c.name for c in own].index("answer") + 1  # the parsed fields go right after it
    for column in [*own[:after_answer], *parsed, *own[after_answer:]]:
        name = column.name
        while name in taken:
            name += SUFFIX
        taken.add(name)
        answer.append(Column(name, column.kind))
    return _Plan(inputs, from_rows, parsed, answer, [c.name for c in [*inputs, *answer]])


def _has_rows(journal: Journal) -> bool:
    """The journal kept the first task's input row (a table run from before rows were kept did not)."""
    low, end = journal.queries.task_index_bounds()
    rows = journal.queries.export_rows(low, min(end, low + 1))
    return bool(rows) and rows[0].row is not None


def _parsed_fields(journal: Journal) -> list[Column]:
    """The fields of the answers' JSON objects, in the order first met (up to `MAX_PARSED_FIELDS`),
    each with the kind of its values: a first read of the answers."""
    kinds: dict[str, str | None] = {}  # None: only nulls so far
    for rows in _windows(journal):
        for row in rows:
            parsed = _parsed(row)
            for key, value in parsed.items() if isinstance(parsed, dict) else ():
                kind = kind_of_value(value)
                if key not in kinds:
                    if len(kinds) < MAX_PARSED_FIELDS:
                        kinds[key] = kind
                elif kind is not None and kind != kinds[key]:
                    known = kinds[key]
                    kinds[key] = kind if known is None else wider_kind(known, kind)
    return [Column(key, kind or "string") for key, kind in kinds.items()]


# ----------------------------------------------------------------- the rows


def _windows(journal: Journal) -> Iterator[list[ExportRow]]:
    low, end = journal.queries.task_index_bounds()
    for first in range(low, end, WINDOW):
        yield journal.queries.export_rows(first, min(end, first + WINDOW))


def _rows(journal: Journal, plan: _Plan) -> Iterator[list[list[Any]]]:
    """Each window's rows as lists of values, in the plan's column order."""
    for rows in _windows(journal):
        yield [_values(row, plan) for row in rows]


def _values(row: ExportRow, plan: _Plan) -> list[Any]:
    if plan.from_rows:
        values = json.loads(row.row) if row.row else {}
        inputs = [_typed(values.get(column.name), column.kind) for column in plan.inputs]
    else:
        inputs = [row.custom_id, Task(row.index, row.custom_id, json.loads(row.body)).prompt]
    error = json.loads(row.error) if row.error else {}
    parsed = _parsed(row) if plan.parsed else None
    fields = [
        _typed(parsed.get(column.name), column.kind) if isinstance(parsed, dict) else None for column in plan.parsed
    ]
    error_class = (error.get("type") or row.error_class) if row.ok is False else None
    own = [
        _answer(row),
        row.state,
        error_class,
        error.get("message") if row.ok is False else None,
        row.prompt_tokens,
        row.completion_tokens,
        row.cached_tokens,
        None if row.unpriced or row.cost_usd is None else round(row.cost_usd, 8),
        None if row.latency_ms is None else round(row.latency_ms, 1),
        row.endpoint,
        row.attempts,
    ]
    return [*inputs, *([row.custom_id] if plan.from_rows else []), own[0], *fields, *own[1:]]


def _answer(row: ExportRow) -> str | None:
    """The answer's text (the first choice's message content)."""
    if not row.ok or not row.response:
        return None
    try:
        choices = json.loads(row.response).get("choices") or [{}]
        content = (choices[0].get("message") or {}).get("content")
    except (ValueError, AttributeError, IndexError):
        return None
    return content if isinstance(content, str) else None


def _parsed(row: ExportRow) -> Any:
    """The answer's JSON value: as its checks read it, else (a journal from before they kept it)
    read from its text."""
    if row.parsed is not None:
        return json.loads(row.parsed)
    content = _answer(row)
    if content is None:
        return None
    try:
        return extract_json(content)
    except JsonExtractionError:
        return None


def _typed(value: Any, kind: str) -> Any:
    """A value as its column holds it: a number as a number, anything else not text as JSON text."""
    if value is None:
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "integer":
        return value if number and isinstance(value, int) else None
    if kind == "float":
        return float(value) if number else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# ----------------------------------------------------------------- the writers


def _arrow_schema(plan: _Plan) -> pa.Schema:
    import pyarrow as pa

    types = {"integer": pa.int64(), "float": pa.float64(), "boolean": pa.bool_()}
    fields = zip(plan.names, plan.columns, strict=True)
    return pa.schema([pa.field(name, types.get(column.kind, pa.string())) for name, column in fields])


def _batch(schema: pa.Schema, rows: list[list[Any]]) -> pa.RecordBatch:
    import pyarrow as pa

    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    arrays = [pa.array(list(values), type=field.type) for values, field in zip(columns, schema, strict=True)]
    return pa.record_batch(arrays, schema=schema)


def _write_arrow(path: Path, plan: _Plan, windows: Iterator[list[list[Any]]], fmt: str) -> int:
    """CSV or Parquet through pyarrow's writer of that format, a window a batch."""
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    schema = _arrow_schema(plan)
    count = 0
    with (
        open_private(path, "wb") as sink,
        (pq.ParquetWriter if fmt == "parquet" else csv.CSVWriter)(sink, schema) as writer,
    ):
        for rows in windows:
            writer.write_batch(_batch(schema, rows))
            count += len(rows)
    return count


def _write_jsonl(path: Path, plan: _Plan, windows: Iterator[list[list[Any]]]) -> int:
    count = 0
    with open_private(path) as sink:
        for rows in windows:
            for values in rows:
                sink.write(json.dumps(dict(zip(plan.names, values, strict=True)), ensure_ascii=False) + "\n")
            count += len(rows)
    return count


_WRITERS: dict[str, Callable[[Path, _Plan, Iterator[list[list[Any]]]], int]] = {
    "csv": lambda path, plan, windows: _write_arrow(path, plan, windows, "csv"),
    "parquet": lambda path, plan, windows: _write_arrow(path, plan, windows, "parquet"),
    "jsonl": _write_jsonl,
}
