"""Job files: what a swarm is asked to do.

Two formats, chosen by extension:

* ``.jsonl`` — the OpenAI Batch API input format, one request a line.
* ``.toml``  — a swarm job: a system template, optional shared context sent first and
  identical for every agent (so provider prefix caches hit), and tasks given as a list or as
  ``count`` + a prompt template.

A job is validated whole before anything is sent: every problem is collected with its file,
line and field, and a job with any problem raises `InputError` (the CLI exits 2).
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import InputError, Problem
from .swarm.spec import SwarmSpec, parse_swarm_spec

CHAT_COMPLETIONS_URLS = ("/v1/chat/completions", "/chat/completions")
VALID_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
MAX_PROBLEMS = 50


@dataclass(frozen=True, slots=True)
class Task:
    """One sub-agent call: its position in the swarm, its id, and the request body."""

    index: int
    custom_id: str
    body: dict[str, Any]

    @property
    def agent(self) -> int:
        """The 1-based agent number people see in the grid."""
        return self.index + 1

    @property
    def prompt(self) -> str:
        """The last user message: what this agent was asked."""
        for message in reversed(self.body.get("messages", [])):
            if message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        return ""


@dataclass(frozen=True)
class TaskTemplate:
    """How a TOML job turns a prompt into a request: shared context first, then the agent's system
    prompt, then the task. Kept so that later rounds and planned sub-tasks are built the same way."""

    model: str
    context: str = ""
    system: str = ""
    request: dict[str, Any] = field(default_factory=dict)

    def body(self, prompt: str, *, agent: int, total: int, memory: str = "") -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if self.context:
            messages.append({"role": "system", "content": self.context})
        if memory:
            messages.append({"role": "system", "content": memory})
        if self.system:
            messages.append({"role": "system", "content": self.system.format(agent=agent, index=agent - 1,
                                                                              total=total)})
        messages.append({"role": "user", "content": prompt})
        return {"model": self.model, "messages": messages, **self.request}


@dataclass(frozen=True)
class Job:
    name: str
    source: str
    tasks: list[Task]
    model: str | None = None
    """The model the job names (TOML); None when each body names its own (JSONL)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Other top-level tables of a TOML job, kept as written."""
    template: TaskTemplate | None = None
    swarm: SwarmSpec | None = None
    """Plan → fan-out → aggregate and memory, for TOML jobs that ask for them."""


def load_job(path: str | Path, *, model_override: str | None = None) -> Job:
    """Load and validate a job file; raise `InputError` listing every problem found."""
    path = Path(path)
    if not path.exists():
        raise InputError.single(path, "job", "file not found")
    if path.suffix == ".jsonl":
        return load_batch_jsonl(path, model_override=model_override)
    if path.suffix == ".toml":
        return load_swarm_toml(path, model_override=model_override)
    raise InputError.single(path, "job", f"unknown job format {path.suffix!r}: use .jsonl (OpenAI Batch) or .toml (swarm job)")


# --------------------------------------------------------------------------- Batch JSONL


def load_batch_jsonl(path: Path, *, model_override: str | None = None) -> Job:
    problems: list[Problem] = []
    tasks: list[Task] = []
    first_line_of: dict[str, int] = {}
    src = str(path)

    def problem(line: int, field_name: str, message: str) -> None:
        problems.append(Problem(src, line, field_name, message))

    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError.single(path, "file", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None

    for lineno, raw in enumerate(text.splitlines(), start=1):
        if len(problems) >= MAX_PROBLEMS:
            break
        if not raw.strip():
            continue
        try:
            request = json.loads(raw)
        except json.JSONDecodeError as exc:
            problem(lineno, "json", f"{exc.msg} (column {exc.colno})")
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
        before = len(problems)
        for field_name, message in _body_problems(body, model_required=model_override is None):
            problem(lineno, f"body.{field_name}", message)
        if len(problems) > before:
            continue
        if model_override:
            body = {**body, "model": model_override}
        tasks.append(Task(index=len(tasks), custom_id=custom_id, body=body))

    if not tasks and not problems:
        problems.append(Problem(src, None, "job", "no requests in file"))
    if problems:
        raise InputError(problems)
    return Job(name=path.stem, source=src, tasks=tasks, model=model_override)


def _body_problems(body: dict[str, Any], *, model_required: bool) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    model = body.get("model")
    if model is None:
        if model_required:
            found.append(("model", "missing (name it in the body, or pass --model)"))
    elif not isinstance(model, str) or not model:
        found.append(("model", "must be a non-empty string"))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        found.append(("messages", "missing or empty list"))
        return found
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            found.append((f"messages[{i}]", "expected an object"))
            continue
        role = message.get("role")
        if role not in VALID_ROLES:
            found.append((f"messages[{i}].role", f"unknown role {role!r}"))
        if "content" not in message and "tool_calls" not in message:
            found.append((f"messages[{i}].content", "missing"))
    for int_field in ("max_tokens", "max_completion_tokens", "n"):
        value = body.get(int_field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            found.append((int_field, f"must be a positive integer, not {value!r}"))
    if body.get("stream"):
        found.append(("stream", "set streaming with --stream, not in the body"))
    return found


# --------------------------------------------------------------------------- TOML swarm job

REQUEST_KEYS = {
    "max_tokens", "max_completion_tokens", "temperature", "top_p", "presence_penalty",
    "frequency_penalty", "seed", "stop", "response_format", "reasoning_effort", "extra_body",
}


class _TomlChecker:
    """Collects problems in a TOML job, locating each field's line in the source text."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.problems: list[Problem] = []

    def line_of(self, dotted: str) -> int | None:
        """Best-effort line of a dotted key: the `[table]` header, then `key =` within it."""
        *tables, key = dotted.split(".")
        start = 0
        if tables:
            header = re.compile(r"^\s*\[\[?\s*" + re.escape(".".join(tables)) + r"\s*\]\]?\s*$")
            for i, line in enumerate(self.lines):
                if header.match(line):
                    start = i
                    break
        assignment = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
        for i in range(start, len(self.lines)):
            if assignment.match(self.lines[i]):
                return i + 1
        return start + 1 if tables else None

    def add(self, dotted: str, message: str, line: int | None = None) -> None:
        self.problems.append(Problem(str(self.path), line or self.line_of(dotted), dotted, message))

    def string(self, table: dict[str, Any], key: str, dotted: str, *, required: bool = False) -> str | None:
        value = table.get(key)
        if value is None:
            if required:
                self.add(dotted, "missing")
            return None
        if not isinstance(value, str):
            self.add(dotted, f"must be a string, not {type(value).__name__}")
            return None
        return value


def load_swarm_toml(path: Path, *, model_override: str | None = None) -> Job:
    text = path.read_text(encoding="utf-8")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line = int(match.group(1)) if match else None
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise InputError([Problem(str(path), line, "toml", message)]) from None

    check = _TomlChecker(path, text)
    name = check.string(doc, "name", "name") or path.stem
    model = model_override or check.string(doc, "model", "model")
    if not model:
        check.add("model", "missing (name it in the job, or pass --model)", line=1)
    system = check.string(doc, "system", "system") or ""
    context = _shared_context(doc, path, check)
    request = _request_params(doc, check)

    swarm = parse_swarm_spec(doc, lambda dotted, message: check.add(dotted, message))
    planned = swarm is not None and swarm.plan is not None
    if planned and ("tasks" in doc or "task" in doc):
        check.add("plan", "a planned job gets its tasks from the planner: remove [tasks] / [[task]]")
    prompts = [] if planned else _task_prompts(doc, check)
    tasks: list[Task] = []
    if swarm is not None and swarm.workers.json:
        request = {**request, "response_format": {"type": "json_object"}}
    template = TaskTemplate(model=model or "", context=context, system=system, request=request)
    if system:
        _render(system, {"agent": 1, "index": 0, "total": 1}, check, "system")
    if prompts:
        total = len(prompts)
        for index, (custom_id, prompt, where, line) in enumerate(prompts):
            values = {"agent": index + 1, "index": index, "total": total}
            rendered_prompt = _render(prompt, values, check, where, line)
            if rendered_prompt is None or check.problems:
                break
            tasks.append(Task(index, custom_id, template.body(rendered_prompt, agent=index + 1, total=total)))

    if check.problems:
        raise InputError(check.problems)
    known = {"name", "model", "system", "context", "request", "tasks", "task", "goal", "plan", "workers",
             "aggregate", "memory"}
    options = {k: v for k, v in doc.items() if k not in known}
    return Job(name=name, source=str(path), tasks=tasks, model=model, options=options, template=template,
               swarm=swarm)


def _shared_context(doc: dict[str, Any], path: Path, check: _TomlChecker) -> str:
    context = doc.get("context")
    if context is None:
        return ""
    if isinstance(context, str):
        return context
    if not isinstance(context, dict):
        check.add("context", "must be a string or a table with `text` or `file`")
        return ""
    text = check.string(context, "text", "context.text")
    file_name = check.string(context, "file", "context.file")
    if text and file_name:
        check.add("context", "give `text` or `file`, not both")
    if file_name:
        context_path = (path.parent / file_name).resolve()
        try:
            return context_path.read_text(encoding="utf-8")
        except OSError as exc:
            check.add("context.file", f"cannot read {context_path}: {exc.strerror}")
            return ""
    return text or ""


def _request_params(doc: dict[str, Any], check: _TomlChecker) -> dict[str, Any]:
    request = doc.get("request", {})
    if not isinstance(request, dict):
        check.add("request", "must be a table")
        return {}
    for key, value in request.items():
        if key not in REQUEST_KEYS:
            check.add(f"request.{key}", f"unknown request parameter (known: {', '.join(sorted(REQUEST_KEYS))})")
        elif key in ("max_tokens", "max_completion_tokens") and (not isinstance(value, int) or value < 1):
            check.add(f"request.{key}", f"must be a positive integer, not {value!r}")
        elif key == "extra_body" and not isinstance(value, dict):
            check.add("request.extra_body", "must be a table")
    return dict(request)


def _task_prompts(doc: dict[str, Any], check: _TomlChecker) -> list[tuple[str, str, str, int | None]]:
    """(custom_id, prompt template, field, line) for each task, from `[tasks]` count + template or `[[task]]`."""
    tasks_table = doc.get("tasks")
    task_list = doc.get("task")
    if tasks_table is None and task_list is None:
        check.add("tasks", "missing: add [tasks] with count and prompt, [[task]] entries, or a goal and [plan]",
                  line=1)
        return []
    prompts: list[tuple[str, str, str, int | None]] = []
    if tasks_table is not None:
        if not isinstance(tasks_table, dict):
            check.add("tasks", "must be a table with count and prompt")
            return []
        count = tasks_table.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            check.add("tasks.count", f"must be a positive integer, not {count!r}")
            return []
        prompt = check.string(tasks_table, "prompt", "tasks.prompt", required=True)
        id_template = check.string(tasks_table, "id", "tasks.id") or "agent-{agent:0%d}" % len(str(count))
        if prompt is None:
            return []
        for index in range(count):
            values = {"agent": index + 1, "index": index, "total": count}
            custom_id = _render(id_template, values, check, "tasks.id")
            if custom_id is None:
                return []
            prompts.append((custom_id, prompt, "tasks.prompt", check.line_of("tasks.prompt")))
    if task_list is not None:
        if not isinstance(task_list, list):
            check.add("task", "must be an array of tables ([[task]])")
            return prompts
        seen = {custom_id for custom_id, *_ in prompts}
        for i, entry in enumerate(task_list):
            where = f"task[{i}]"
            if not isinstance(entry, dict):
                check.add(where, "must be a table")
                continue
            prompt = check.string(entry, "prompt", f"{where}.prompt")
            if prompt is None:
                check.add(f"{where}.prompt", "missing", line=_nth_array_table_line(check, "task", i))
                continue
            custom_id = entry.get("id", f"task-{len(prompts) + 1}")
            if not isinstance(custom_id, str) or not custom_id or custom_id in seen:
                check.add(f"{where}.id", f"missing, empty or duplicate: {custom_id!r}",
                          line=_nth_array_table_line(check, "task", i))
                continue
            seen.add(custom_id)
            prompts.append((custom_id, prompt, f"{where}.prompt", _nth_array_table_line(check, "task", i)))
    return prompts


def _nth_array_table_line(check: _TomlChecker, name: str, n: int) -> int | None:
    header = re.compile(r"^\s*\[\[\s*" + re.escape(name) + r"\s*\]\]\s*$")
    hits = [i + 1 for i, line in enumerate(check.lines) if header.match(line)]
    return hits[n] if n < len(hits) else None


def _render(template: str, values: dict[str, int], check: _TomlChecker, dotted: str,
            line: int | None = None) -> str | None:
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        check.add(dotted, f"bad template {template!r}: unknown or malformed placeholder {exc!s} "
                          f"(known: {{agent}}, {{index}}, {{total}}; write {{{{ }}}} for braces)", line)
        return None
