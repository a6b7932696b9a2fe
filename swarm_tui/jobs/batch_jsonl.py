"""Loading a Batch JSONL job: the OpenAI Batch API input format, one request a line.

Every line is checked (``chat_checks``) and every problem collected, up to `MAX_PROBLEMS`, with
its line and field, before any task is built (the file is read again, streaming, each time its
tasks are gone through: a bad job is refused holding a hash of each id, a good one is never held
whole); within one read, lines that repeat one system prompt share one copy of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from swarm_tui.core.errors import InputError, Problem
from swarm_tui.core.task import Task
from swarm_tui.jobs.chat_checks import body_problems
from swarm_tui.jobs.id_hashes import IdHashes
from swarm_tui.jobs.job import MAX_PROBLEMS, MAX_TASKS, Job
from swarm_tui.jobs.on_demand import OnDemand
from swarm_tui.util.textfile import read_job_lines

__all__ = ["load_batch_jsonl", "CHAT_COMPLETIONS_URLS", "SHARED_MESSAGES_MAX"]

CHAT_COMPLETIONS_URLS = ("/v1/chat/completions", "/chat/completions")
SHARED_MESSAGES_MAX = 1024
"""How many distinct leading messages a Batch job's tasks share (see `_share_prefix`)."""


def load_batch_jsonl(path: Path, *, model_override: str | None = None) -> Job:
    """The job of a Batch JSONL file; `InputError` listing its problems (`model_override`: `--model`).

    Every line is checked first, streaming, holding 8 bytes an id (a 1 GB job whose last line is
    bad is refused in a few megabytes: 5.4 GB before). The tasks are not built here: `JsonlTasks`
    reads them from the file, known to be valid, each time they are gone through (the new run's
    journal takes them as they are read, and keeps them)."""
    count = _check_lines(path, model_required=model_override is None)
    return Job(name=path.stem, source=str(path), tasks=JsonlTasks(path, count, model_override), model=model_override)


class JsonlTasks(OnDemand[Task]):
    """The tasks of a Batch JSONL file `_check_lines` found valid, read from it as they are gone
    through; `InputError` when the file changed since. A lookup by position reads the file up to
    it (what a run needs is its first task's model, and the journal's copy of them all)."""

    def __init__(self, path: Path, count: int, model_override: str | None) -> None:
        self._path = path
        self._count = count
        self._model_override = model_override

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Task]:
        built = 0
        for task in _read_tasks(self._path, self._model_override):
            if built == self._count:  # more requests than were checked
                raise _changed(self._path)
            built += 1
            yield task
        if built != self._count:
            raise _changed(self._path)

    def _item(self, position: int) -> Task:
        for task in _read_tasks(self._path, self._model_override):
            if task.index == position:
                return task
        raise _changed(self._path)


def _changed(path: Path) -> InputError:
    return InputError.single(path, "job", "changed while it was read: run the job again")


def _check_lines(path: Path, *, model_required: bool) -> int:
    """How many requests the file holds, every line checked (`chat_checks`); `InputError` with
    each problem found, up to `MAX_PROBLEMS`, naming its line and field. Holds a hash of each id
    (`id_hashes`): ids seen twice are named by a second read (`_with_duplicates`)."""
    problems: list[Problem] = []
    ids = IdHashes()
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
        ids.add(custom_id)
        if ids.count > MAX_TASKS:
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

    repeated = ids.repeated()
    if repeated:
        problems = _with_duplicates(path, problems, repeated)
    if not ids.count and not problems:
        problems.append(Problem(src, None, "job", "no requests in file"))
    if problems:
        raise InputError(problems)
    return ids.count


def _with_duplicates(path: Path, problems: list[Problem], repeated: set[int]) -> list[Problem]:
    """`problems` with each line whose id an earlier line has: "duplicate" instead of that line's
    other problems (its request is not checked further), in line order, up to `MAX_PROBLEMS`."""
    first_line_of: dict[str, int] = {}
    duplicates: dict[int, Problem] = {}
    for lineno, raw in read_job_lines(path):
        try:
            request = _parse_json_line(raw) if raw.strip() else None
        except ValueError:
            continue
        custom_id = request.get("custom_id") if isinstance(request, dict) else None
        if not isinstance(custom_id, str) or hash(custom_id) not in repeated:
            continue
        if custom_id in first_line_of:
            message = f"duplicate {custom_id!r} (first on line {first_line_of[custom_id]})"
            duplicates[lineno] = Problem(str(path), lineno, "custom_id", message)
        else:
            first_line_of[custom_id] = lineno
    kept = [p for p in problems if p.line not in duplicates]
    return sorted([*kept, *duplicates.values()], key=lambda p: p.line or 0)[:MAX_PROBLEMS]


def _read_tasks(path: Path, model_override: str | None) -> Iterator[Task]:
    """The tasks of a file `_check_lines` found valid, one at a time as the file is read."""
    shared: dict[tuple[str, str], dict[str, Any]] = {}
    index = 0
    for _, raw in read_job_lines(path):
        if not raw.strip():
            continue
        try:
            request = _parse_json_line(raw)
            custom_id, body = request["custom_id"], request["body"]
            messages = body["messages"]
        except (ValueError, TypeError, KeyError):  # the file changed between the two reads
            raise _changed(path) from None
        _share_prefix(messages, shared)
        if model_override:
            body = {**body, "model": model_override}
        yield Task(index=index, custom_id=custom_id, body=body)
        index += 1


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
