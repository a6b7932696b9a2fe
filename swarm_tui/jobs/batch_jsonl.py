"""Loading a Batch JSONL job: the OpenAI Batch API input format, one request a line.

Every line is checked (``chat_checks``) and every problem found, the first `MAX_PROBLEMS` kept with
its line and field and the rest counted, before any task is built (the file is read again, streaming, each time its
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
    the first `MAX_PROBLEMS` problems, naming line and field, and the count of the rest (every line
    is checked: a message saying "and 30 more" of a file with 5,000 would be a lie). Holds a hash
    of each id (`id_hashes`): ids seen twice are named by a second read (`_with_duplicates`)."""
    problems: list[Problem] = []
    more = 0
    """Problems found past `MAX_PROBLEMS`: counted, not kept."""
    cut_line = 0
    """The first line whose problems were not all kept (0: every problem was kept)."""
    ids = IdHashes()
    src = str(path)
    for lineno, raw in read_job_lines(path):
        if not raw.strip():
            continue
        found, custom_id = _line_problems(src, lineno, raw, model_required)
        if custom_id is not None:
            ids.add(custom_id)
            if ids.count > MAX_TASKS:
                found = [
                    Problem(src, lineno, "job", f"more than {MAX_TASKS:,} requests: over the limit of a job (split it)")
                ]
        if found:
            room = MAX_PROBLEMS - len(problems)
            problems.extend(found[:room])
            if len(found) > room:
                more += len(found) - room
                cut_line = cut_line or lineno
        if ids.count > MAX_TASKS:
            break

    repeated = ids.repeated()
    if repeated:
        problems, more = _with_duplicates(path, problems, more, cut_line, repeated, model_required)
    if not ids.count and not problems:
        problems.append(Problem(src, None, "job", "no requests in file"))
    if problems:
        raise InputError(problems, more)
    return ids.count


def _line_problems(src: str, lineno: int, raw: str, model_required: bool) -> tuple[list[Problem], str | None]:
    """(the problems of one line, its custom_id when it has one: the rest is checked only then)."""
    try:
        request = _parse_json_line(raw)
    except json.JSONDecodeError as exc:
        return [Problem(src, lineno, "json", f"{exc.msg} (column {exc.colno})")], None
    except ValueError as exc:
        return [Problem(src, lineno, "json", str(exc))], None
    if not isinstance(request, dict):
        return [Problem(src, lineno, "line", "expected a JSON object")], None
    custom_id = request.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return [Problem(src, lineno, "custom_id", "missing or not a non-empty string")], None
    found: list[Problem] = []
    method = request.get("method", "POST")
    if method != "POST":
        found.append(Problem(src, lineno, "method", f"must be POST, not {method!r}"))
    url = request.get("url", "/v1/chat/completions")
    if url not in CHAT_COMPLETIONS_URLS:
        found.append(Problem(src, lineno, "url", f"only /v1/chat/completions is supported, not {url!r}"))
    body = request.get("body")
    if not isinstance(body, dict):
        found.append(Problem(src, lineno, "body", "missing or not an object"))
        return found, custom_id
    for field_name, message in body_problems(body, model_required=model_required):
        found.append(Problem(src, lineno, f"body.{field_name}", message))
    return found, custom_id


def _with_duplicates(
    path: Path, problems: list[Problem], more: int, cut_line: int, repeated: set[int], model_required: bool
) -> tuple[list[Problem], int]:
    """(`problems` with each line whose id an earlier line has: "duplicate" instead of that line's
    other problems (its request is not checked further), in line order, the first `MAX_PROBLEMS`;
    the count of the rest). A duplicate line past `cut_line` had its problems counted in `more`:
    they are taken back out, and the line counts once."""
    src = str(path)
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
            duplicates[lineno] = Problem(src, lineno, "custom_id", message)
            if cut_line and lineno >= cut_line:  # its problems were counted, not kept
                kept_here = sum(1 for p in problems if p.line == lineno)
                more -= len(_line_problems(src, lineno, raw, model_required)[0]) - kept_here
        else:
            first_line_of[custom_id] = lineno
    kept = [p for p in problems if p.line not in duplicates]
    merged = sorted([*kept, *duplicates.values()], key=lambda p: p.line or 0)
    return merged[:MAX_PROBLEMS], more + max(0, len(merged) - MAX_PROBLEMS)


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
