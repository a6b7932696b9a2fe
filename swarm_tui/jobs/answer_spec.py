"""What a job says a usable answer is, as it declares it. No calls here.

Three places declare it, and the checks add up:

* a request body's own `response_format` (`json_schema`: its schema; `json_object`: JSON);
* a TOML job's `[answer]` table:

      [answer]
      schema = "answer.schema.json"   # a file next to the job, or an inline table
      json = true                     # the answer must hold a JSON value (implied by `schema`)
      regex = "^(yes|no)\\b"          # searched in the answer's text
      min_chars = 20                  # at least this many characters (stripped)
      python = "checks:has_source"    # module:function(text[, parsed]) -> None or what is wrong

* `--schema FILE.json` for a JSONL job (every task's answer).

Everything is checked when the job loads (an invalid schema, a regex that does not compile, a
`python` validator that cannot be imported: exit 2 naming the file, line and field), and kept in
the journal's meta so that a resumed run checks its answers the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from swarm_tui.core.checks import AnswerSpec, Validator, resolve_python, takes_parsed
from swarm_tui.core.errors import InputError, Problem
from swarm_tui.util.json_schema import schema_problem

__all__ = [
    "ANSWER_KEYS",
    "AnswerSpec",
    "Validator",
    "load_schema_file",
    "parse_answer_spec",
    "resolve_python",
    "response_format_problems",
    "takes_parsed",
]

ANSWER_KEYS = frozenset({"schema", "json", "regex", "min_chars", "python"})

Report = Callable[[str, str], None]
"""(dotted field, message): a problem of the job, located by its loader."""


def parse_answer_spec(doc: dict[str, Any], base: Path, source: str, report: Report) -> AnswerSpec | None:
    """A TOML job's `[answer]`, every part checked (problems to `report`); None without one."""
    table = doc.get("answer")
    if table is None:
        return None
    if not isinstance(table, dict):
        report("answer", "must be a table ([answer] schema, json, regex, min_chars, python)")
        return None
    for key in table:
        if key not in ANSWER_KEYS:
            report(f"answer.{key}", f"unknown key (known: {', '.join(sorted(ANSWER_KEYS))})")
    spec = AnswerSpec(base=str(base), source=source)
    changes: dict[str, Any] = {}
    if "schema" in table:
        changes["schema"] = _schema_of(table["schema"], base, report)
    if "json" in table:
        if isinstance(table["json"], bool):
            changes["json"] = table["json"]
        else:
            report("answer.json", f"must be true or false, not {table['json']!r}")
    if "regex" in table:
        changes["regex"] = _regex(table["regex"], report)
    if "min_chars" in table:
        value = table["min_chars"]
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            changes["min_chars"] = value
        else:
            report("answer.min_chars", f"must be a positive integer, not {value!r}")
    if "python" in table:
        value = table["python"]
        problem = _python_problem(value, str(base))
        if problem is None:
            changes["python"] = value
        else:
            report("answer.python", problem)
    return replace(spec, **{k: v for k, v in changes.items() if v is not None})


def _schema_of(value: Any, base: Path, report: Report) -> Any:
    """`schema`: an inline table, or a file next to the job (JSON)."""
    if isinstance(value, str):
        try:
            return load_schema_file(base / value)
        except InputError as exc:
            report("answer.schema", "; ".join(p.message for p in exc.problems))
            return None
    problem = schema_problem(value)
    if problem is not None:
        report("answer.schema", f"not a valid JSON Schema: {problem}")
        return None
    return value


def _regex(value: Any, report: Report) -> str | None:
    if not isinstance(value, str) or not value:
        report("answer.regex", f"must be a non-empty string, not {value!r}")
        return None
    try:
        re.compile(value)
    except re.error as exc:
        report("answer.regex", f"does not compile: {exc}")
        return None
    return value


def load_schema_file(path: Path) -> Any:
    """The JSON Schema in a file (`--schema`, `[answer] schema = "FILE"`); InputError naming the
    file, its line and what is wrong when it cannot be read, is not JSON, or is no valid schema."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError.single(path, "schema", f"cannot read the schema: {why}") from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            [Problem(str(path), exc.lineno, "schema", f"not JSON: {exc.msg} (column {exc.colno})")]
        ) from None
    problem = schema_problem(schema)
    if problem is not None:
        raise InputError.single(path, "schema", f"not a valid JSON Schema: {problem}")
    return schema


def response_format_problems(value: Any) -> list[tuple[str, str]]:
    """(field under `response_format`, message) for a `json_schema` format whose schema is missing
    or invalid: refused before anything is sent, as the provider would refuse it billed or not."""
    if not isinstance(value, dict) or value.get("type") != "json_schema":
        return []
    inner = value.get("json_schema")
    if not isinstance(inner, dict):
        return [("response_format.json_schema", "missing: a json_schema format names its schema there")]
    if "schema" not in inner:
        return [("response_format.json_schema.schema", "missing")]
    problem = schema_problem(inner["schema"])
    return [] if problem is None else [("response_format.json_schema.schema", f"not a valid JSON Schema: {problem}")]


def _python_problem(value: Any, base: str) -> str | None:
    if not isinstance(value, str):
        return f"must be a string module:function, not {value!r}"
    try:
        resolve_python(value, base)
    except Exception as exc:  # noqa: BLE001 - whatever stops the import is the user's to fix
        return f"unknown validator {value!r}: {type(exc).__name__}: {exc}"
    return None
