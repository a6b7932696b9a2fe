"""Loading a Batch JSONL job: the OpenAI Batch API input format, one request a line.

Every line is checked (``chat_checks``) and every problem collected, up to `MAX_PROBLEMS`, with
its line and field, before any task is built (the file is read twice, streaming: a bad job is
refused holding only its ids); a file of 100,000 lines that repeat one system prompt holds it once.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

from ..core.task import Task
from ..errors import InputError, Problem
from ..textfile import read_job_lines
from .chat_checks import body_problems
from .job import MAX_PROBLEMS, MAX_TASKS, Job

__all__ = ["load_batch_jsonl", "CHAT_COMPLETIONS_URLS", "SHARED_MESSAGES_MAX"]

CHAT_COMPLETIONS_URLS = ("/v1/chat/completions", "/chat/completions")
SHARED_MESSAGES_MAX = 1024
"""How many distinct leading messages a Batch job's tasks share (see `_share_prefix`)."""


def load_batch_jsonl(path: Path, *, model_override: str | None = None) -> Job:
    """The job of a Batch JSONL file; `InputError` listing its problems (`model_override`: `--model`).

    Read twice, streaming: every line is checked first, holding only the ids (a 1 GB job whose
    last line is bad is refused in the memory of its ids, not of its bodies: 5.4 GB before),
    then the tasks are built from a file known to be valid."""
    count = _check_lines(path, model_required=model_override is None)
    tasks = _build_tasks(path, model_override)
    if len(tasks) != count:  # the file changed between the two reads
        raise InputError.single(path, "job", "changed while it was read: run the job again")
    return Job(name=path.stem, source=str(path), tasks=tasks, model=model_override)


def _check_lines(path: Path, *, model_required: bool) -> int:
    """How many requests the file holds, every line checked (`chat_checks`); `InputError` with
    each problem found, up to `MAX_PROBLEMS`, naming its line and field. Holds the ids alone."""
    problems: list[Problem] = []
    first_line_of: dict[str, int] = {}
    src = str(path)

    def problem(line: int, field_name: str, message: str) -> None:
        problems.append(Problem(src, line, field_name, message))

    lines = read_job_lines(path)
    for lineno, raw in lines:
        if len(problems) >= MAX_PROBLEMS:
            for _ in lines:  # a byte that is not UTF-8 further down is still the one error reported
                pass
            break
        if not raw.strip():
            continue
        try:
            request = _parse_json_line(raw)
        except json.JSONDecodeError as exc:
            problem(lineno, "json", f"{exc.msg} (column {exc.colno})")
            continue
        except ValueError as exc:
            problem(lineno, "json", str(exc))
            continue
        if not isinstance(request, dict):
            problem(lineno, "line", "expected a JSON object")
            continue
        custom_id = request.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id:
            problem(lineno, "custom_id", "missing or not a non-empty string")
            continue
        if custom_id in first_line_of:
            problem(lineno, "custom_id", f"duplicate {custom_id!r} (first on line {first_line_of[custom_id]})")
            continue
        first_line_of[custom_id] = lineno
        if len(first_line_of) > MAX_TASKS:
            problem(lineno, "job", f"more than {MAX_TASKS:,} requests: over the limit of a job (split it)")
            break
        method = request.get("method", "POST")
        if method != "POST":
            problem(lineno, "method", f"must be POST, not {method!r}")
        url = request.get("url", "/v1/chat/completions")
        if url not in CHAT_COMPLETIONS_URLS:
            problem(lineno, "url", f"only /v1/chat/completions is supported, not {url!r}")
        body = request.get("body")
        if not isinstance(body, dict):
            problem(lineno, "body", "missing or not an object")
            continue
        for field_name, message in body_problems(body, model_required=model_required):
            problem(lineno, f"body.{field_name}", message)

    if not first_line_of and not problems:
        problems.append(Problem(src, None, "job", "no requests in file"))
    if problems:
        raise InputError(problems)
    return len(first_line_of)


def _build_tasks(path: Path, model_override: str | None) -> list[Task]:
    """The tasks of a file `_check_lines` found valid. The cyclic collector is paused meanwhile:
    a million bodies (dicts without cycles) made it rescan the growing heap again and again
    (a quarter of the load's time at 200,000 tasks)."""
    tasks: list[Task] = []
    shared: dict[tuple[str, str], dict[str, Any]] = {}
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _, raw in read_job_lines(path):
            if not raw.strip():
                continue
            try:
                request = _parse_json_line(raw)
                custom_id, body = request["custom_id"], request["body"]
                messages = body["messages"]
            except (ValueError, TypeError, KeyError):  # the file changed between the two reads
                raise InputError.single(path, "job", "changed while it was read: run the job again") from None
            _share_prefix(messages, shared)
            if model_override:
                body = {**body, "model": model_override}
            tasks.append(Task(index=len(tasks), custom_id=custom_id, body=body))
    finally:
        if collecting:
            gc.enable()
    return tasks


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (write a number)")


_JSON_LINE = json.JSONDecoder(parse_constant=_reject_constant)
"""One decoder for every line: `json.loads(raw, parse_constant=...)` builds a new one per call."""


def _parse_json_line(raw: str) -> Any:
    """`json.loads(raw, parse_constant=_reject_constant)`, with its BOM message, on the one decoder."""
    if raw.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", raw, 0)
    return _JSON_LINE.decode(raw)


def _share_prefix(messages: list[Any], shared: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Replace each leading `{"role", "content"}` message (every message but the last) by the
    first equal one seen: a Batch file repeats its shared system prompt on every line, and 100,000
    tasks then hold one copy of it, not 100,000. Safe because bodies are never changed in place.
    At most `SHARED_MESSAGES_MAX` distinct messages are remembered (a job whose every system
    prompt differs keeps its own copies, not a second index of them)."""
    for i in range(len(messages) - 1):
        message = messages[i]
        if len(message) != 2 or not isinstance(content := message.get("content"), str) or "role" not in message:
            continue
        key = (message["role"], content)
        known = shared.get(key)
        if known is not None:
            messages[i] = known
        elif len(shared) < SHARED_MESSAGES_MAX:
            shared[key] = message
