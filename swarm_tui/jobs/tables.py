"""A job made of a table: each row a task, its prompt (and system prompt, and id) rendered from a
template over the row's columns (`swarm-tui run tickets.csv --prompt "Classify: {text}"`, or a
TOML job's `[tasks] from = "tickets.parquet"`).

As a Batch JSONL job, a table is checked whole before anything is sent, holding a hash of each id
(`id_hashes`): a template naming a column the table does not have, a prompt or an id that renders
empty, an id given twice, a row that cannot be read; each problem named with its file, row and
column (`core.errors.Problem`: the row is the line, the column the field). Then nothing of it
is held: `TableTasks` renders the tasks from the file each time they are gone through, and
`TableRows` gives each row's own values (JSON text) beside them, for the journal to keep, so an
export gives the answers back on the user's rows (`run.export_table`).
"""

from __future__ import annotations

import datetime
import json
import math
import re
import string
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swarm_tui.core.errors import InputError, Problem
from swarm_tui.core.task import Task
from swarm_tui.jobs.id_hashes import IdHashes
from swarm_tui.jobs.job import MAX_PROBLEMS, MAX_TASKS, TaskTemplate
from swarm_tui.jobs.on_demand import OnDemand
from swarm_tui.jobs.table_files import Column, Row, TableFile, open_table

__all__ = ["CLI_LABELS", "TOML_LABELS", "TableRows", "TableSpec", "TableTasks", "load_table"]

MAX_FIELD_WIDTH = 1_000
"""The widest a placeholder may be formatted (`{score:>8}` is 8)."""
CLI_LABELS = ("--prompt", "--system", "--id")
TOML_LABELS = ("tasks.prompt", "system", "tasks.id")


@dataclass(frozen=True)
class TableSpec:
    """What each row is turned into: the user message (`prompt`), an optional system message and
    the task's id, each a template over the columns (`{text}`; `{{`/`}}` for braces). Without an
    id template a task's id is `row-N`, N its row number."""

    prompt: str
    system: str = ""
    id: str | None = None
    labels: tuple[str, str, str] = CLI_LABELS
    """How the three templates are named in a problem (the CLI's flags, or the TOML keys)."""


class _Template:
    """One template, parsed once: the columns it names, and a row rendered by it."""

    def __init__(self, text: str, label: str) -> None:
        self.text = text
        self.label = label
        self.columns: list[str] = []
        self.problem: str | None = None
        try:
            parsed = [(name, spec) for _, name, spec, _ in string.Formatter().parse(text) if name is not None]
        except ValueError as exc:
            self.problem = f"malformed placeholder ({exc}); write {{{{ and }}}} for braces"
            return
        for name, spec in parsed:
            if not name or re.search(r"[.\[]", name) or name.isdigit():
                self.problem = f"{{{name}}} is not a column name (write a column as {{name}}; {{{{ }}}} for braces)"
                return
            if spec and "{" in spec:
                self.problem = f"the format of {{{name}}} holds a placeholder of its own"
                return
            if any(len(digits) > 7 or int(digits) > MAX_FIELD_WIDTH for digits in re.findall(r"\d+", spec or "")):
                self.problem = f"the format of {{{name}}} is wider than {MAX_FIELD_WIDTH:,} characters"
                return
            if name not in self.columns:
                self.columns.append(name)

    @property
    def field(self) -> str:
        """What a problem with the rendered text names: the column(s) it was made of."""
        return ", ".join(self.columns) if self.columns else self.label

    def render(self, values: dict[str, Any]) -> str:
        return self.text.format_map(values)

    def blank_in(self, values: dict[str, Any]) -> bool:
        """Every column it names is empty in this row (`Classify: {text}` of an empty text asks nothing)."""
        return bool(self.columns) and all(str(values[name]).strip() == "" for name in self.columns)


@dataclass(frozen=True)
class _Templates:
    prompt: _Template
    system: _Template | None
    id: _Template | None

    @classmethod
    def of(cls, spec: TableSpec) -> _Templates:
        prompt_label, system_label, id_label = spec.labels
        return cls(
            _Template(spec.prompt, prompt_label),
            _Template(spec.system, system_label) if spec.system else None,
            _Template(spec.id, id_label) if spec.id is not None else None,
        )

    def each(self) -> list[_Template]:
        return [t for t in (self.prompt, self.system, self.id) if t is not None]

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column the templates name (what a row is read for), once each."""
        return tuple(dict.fromkeys(name for template in self.each() for name in template.columns))

    def custom_id(self, number: int, values: dict[str, Any]) -> str:
        return self.id.render(values) if self.id is not None else f"row-{number}"


class _Bodies:
    """Request bodies of a table's rows: the shared context first, the system message (one
    object while it repeats: a million rows of one system prompt hold one copy), the prompt."""

    def __init__(self, template: TaskTemplate) -> None:
        self.template = template
        self.context = {"role": "system", "content": template.context} if template.context else None
        self.last_system: dict[str, str] | None = None

    def body(self, prompt: str, system: str | None) -> dict[str, Any]:
        messages: list[dict[str, str]] = [self.context] if self.context else []
        if system:
            if self.last_system is None or self.last_system["content"] != system:
                self.last_system = {"role": "system", "content": system}
            messages.append(self.last_system)
        messages.append({"role": "user", "content": prompt})
        return {"model": self.template.model, "messages": messages, **self.template.request}


class TableTasks(OnDemand[Task]):
    """The tasks of a table `load_table` found valid, rendered from the file as they are gone
    through; `InputError` when the file changed since."""

    def __init__(self, table: TableFile, spec: TableSpec, template: TaskTemplate, count: int) -> None:
        self._table = table
        self._templates = _Templates.of(spec)
        self._template = template
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Task]:
        for task, _ in self.read():
            yield task

    def read(self) -> Iterator[tuple[Task, Row]]:
        """Each task with the row it was made of, from one read of the file."""
        bodies = _Bodies(self._template)
        templates = self._templates
        used = templates.columns
        prompt, system, custom_id = templates.prompt.render, templates.system, templates.custom_id
        index = 0
        try:
            for number, row in self._table.rows():
                if index == self._count:
                    raise _changed(self._table.path)
                values = template_values(row, used)
                body = bodies.body(prompt(values), system.render(values) if system is not None else None)
                yield Task(index, custom_id(number, values), body), row
                index += 1
        except (KeyError, ValueError, TypeError, IndexError):  # a template no longer fits the file
            raise _changed(self._table.path) from None
        if index != self._count:
            raise _changed(self._table.path)

    def _item(self, position: int) -> Task:
        for task in self:
            if task.index == position:
                return task
        raise _changed(self._table.path)


class TableRows:
    """A table's rows as the journal keeps them beside the tasks (one JSON object a row, in
    order, read from the file with the tasks: `beside_tasks`), and its columns, as the run's meta
    keeps them (`to_meta`) for the export to give them back in order."""

    def __init__(self, table: TableFile, count: int, tasks: TableTasks) -> None:
        self._table = table
        self._count = count
        self._tasks = tasks
        self.columns: list[Column] = list(table.columns)

    def __len__(self) -> int:
        return self._count

    def beside_tasks(self) -> tuple[Iterator[Task], Iterator[str]]:
        """The tasks and their rows from one read of the file (a million rows are not read twice
        for a new run's journal), for `zip(tasks, rows)`: each row is there once its task is."""
        waiting: deque[str] = deque()

        def tasks() -> Iterator[Task]:
            for task, row in self._tasks.read():
                waiting.append(row_text(row))
                yield task

        return tasks(), _Rows(waiting)

    def to_meta(self) -> dict[str, Any]:
        return {"kind": self._table.kind, "columns": [column.to_meta() for column in self.columns]}


class _Rows(Iterator[str]):
    """The rows side of `beside_tasks`: asked for a row after its task (as `zip` asks), it has
    it; asked when no task is waiting (the tasks ended), it ends."""

    def __init__(self, waiting: deque[str]) -> None:
        self._waiting = waiting

    def __next__(self) -> str:
        if not self._waiting:
            raise StopIteration
        return self._waiting.popleft()


def load_table(path: Path, spec: TableSpec, template: TaskTemplate) -> tuple[TableTasks, TableRows]:
    """The tasks and rows of the table at `path`, every row checked (see the module); `InputError`
    listing every problem found, up to `MAX_PROBLEMS`, each with its row and column."""
    table = open_table(path)
    count = _check(table, spec)
    tasks = TableTasks(table, spec, template, count)
    return tasks, TableRows(table, count, tasks)


def _check(table: TableFile, spec: TableSpec) -> int:
    """How many rows the table has, every one rendered by the templates and checked."""
    src = str(table.path)
    problems: list[Problem] = []
    templates = _Templates.of(spec)
    for template in templates.each():
        if template.problem is not None:
            problems.append(Problem(src, None, template.label, f"bad template {template.text!r}: {template.problem}"))
    if not problems and table.kind != "jsonl":  # a JSONL file's columns are its records' keys, read below
        header = 1 if table.kind == "csv" else None
        for template in templates.each():
            for name in template.columns:
                if name not in table.names:
                    problems.append(Problem(src, header, name, _no_column(name, template, table.names)))
    if problems:
        raise InputError(problems)
    ids = IdHashes()
    count = 0
    check_row = _RowCheck(src, templates, ids, records=table.kind == "jsonl")
    for number, row in table.rows():
        count += 1
        if count > MAX_TASKS:
            problems.append(Problem(src, number, "job", f"more than {MAX_TASKS:,} rows: over the limit of a job"))
            break
        found = check_row(number, row)
        if found:
            problems.extend(found)
            if len(problems) >= MAX_PROBLEMS:
                break
    if not count and not problems:
        problems.append(Problem(src, None, "job", "no rows in the table"))
    repeated = ids.repeated() if len(problems) < MAX_PROBLEMS else set()
    if repeated:
        problems = _with_duplicates(table, templates, problems, repeated)
    if problems:
        raise InputError(problems[:MAX_PROBLEMS])
    return count


class _RowCheck:
    """One row rendered by the templates and checked (the id's hash kept): its problems, if any.
    Called a million times: what can be worked out once is, here."""

    def __init__(self, src: str, templates: _Templates, ids: IdHashes, *, records: bool) -> None:
        self.src = src
        self.templates = templates
        self.ids = ids
        self.used = templates.columns
        self.records = records
        """A record JSONL's rows may lack a column the templates name (a table's cannot)."""
        self.each = templates.each()

    def __call__(self, number: int, row: Row) -> list[Problem] | None:
        templates, src = self.templates, self.src
        if self.records and any(name not in row for name in self.used):
            return [self._missing(number, row)]
        values = template_values(row, self.used)
        try:
            prompt = templates.prompt.render(values)
            if templates.system is not None:
                templates.system.render(values)
            custom_id = templates.custom_id(number, values)
        except (ValueError, TypeError, KeyError, IndexError):
            return self._unrenderable(number, values)
        problems = None
        if not prompt.strip() or templates.prompt.blank_in(values):
            what = f"{templates.prompt.label} {templates.prompt.text!r} renders nothing of this row"
            problems = [Problem(src, number, templates.prompt.field, f"empty prompt: {what}")]
        if custom_id:
            self.ids.add(custom_id)
        elif templates.id is not None:
            said = f"empty id ({templates.id.label} {templates.id.text!r})"
            problems = [*(problems or []), Problem(src, number, templates.id.field, said)]
        return problems

    def _missing(self, number: int, row: Row) -> Problem:
        for template in self.each:
            for name in template.columns:
                if name not in row:
                    return Problem(self.src, number, name, f"this record has no {name!r} ({template.label} names it)")
        raise AssertionError("a column is missing")

    def _unrenderable(self, number: int, values: dict[str, Any]) -> list[Problem]:
        """Which template cannot render this row, and why (a format such as `{score:.2f}` of text)."""
        for template in self.each:
            try:
                template.render(values)
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                return [Problem(self.src, number, template.field, f"{template.label} cannot be rendered: {exc}")]
        return []


def _with_duplicates(
    table: TableFile, templates: _Templates, problems: list[Problem], repeated: set[int]
) -> list[Problem]:
    """`problems` with each row whose id an earlier row has, in row order (a second read)."""
    first_row_of: dict[str, int] = {}
    duplicates: list[Problem] = []
    field = templates.id.field if templates.id is not None else "id"
    for number, row in table.rows():
        try:
            custom_id = templates.custom_id(number, template_values(row, templates.columns))
        except (ValueError, TypeError, KeyError, IndexError):
            continue
        if hash(custom_id) not in repeated:
            continue
        if custom_id in first_row_of:
            message = f"duplicate id {custom_id!r} (first in row {first_row_of[custom_id]})"
            duplicates.append(Problem(str(table.path), number, field, message))
        else:
            first_row_of[custom_id] = number
    return sorted([*problems, *duplicates], key=lambda p: p.line or 0)


def _no_column(name: str, template: _Template, names: list[str]) -> str:
    shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
    return f"no such column ({template.label} {template.text!r} names it; the table has: {shown})"


def _changed(path: Path) -> InputError:
    return InputError.single(path, "job", "changed while it was read: run the job again")


# ----------------------------------------------------------------- a row's values


def template_values(row: Row, columns: Sequence[str]) -> dict[str, Any]:
    """The row's values of `columns` as a template renders them: text, numbers and booleans as
    they are (so a format such as `{score:.2f}` applies), nothing (null) as empty text, anything
    else as JSON text."""
    values = {}
    for name in columns:
        value = row[name]
        values[name] = value if type(value) is str else _template_value(value)
    return values


def _template_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str | int | float | bool):
        return value
    return json.dumps(_jsonable(value), ensure_ascii=False)


_ROW_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
"""One encoder for every row (`json.dumps` with options makes a new one per call)."""


def row_text(row: Row) -> str:
    """A row as the journal keeps it: one JSON object, every value JSON can hold (a date as its
    ISO text, bytes as text, a NaN as null)."""
    try:
        return _ROW_JSON.encode(row)
    except (TypeError, ValueError):  # a value JSON cannot hold as it is
        return _ROW_JSON.encode({key: _jsonable(value) for key, value in row.items()})


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, datetime.date | datetime.time):  # a datetime is a date
        return value.isoformat()
    return str(value)  # a Decimal, a timedelta...
