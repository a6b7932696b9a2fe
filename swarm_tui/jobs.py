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

import difflib
import functools
import json
import math
import re
import string
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .core.lanes import LANES
from .core.task import Task
from .errors import InputError, Problem
from .judge.spec import JudgeSpec, parse_judge_spec
from .swarm.spec import SwarmSpec, parse_swarm_spec
from .textfile import TomlLines, read_job_lines, read_text_file, split_lines
from .tools.spec import ToolsSpec, parse_tools_spec

CHAT_COMPLETIONS_URLS = ("/v1/chat/completions", "/chat/completions")
VALID_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
MAX_PROBLEMS = 50
SHARED_MESSAGES_MAX = 1024
"""How many distinct leading messages a Batch job's tasks share (see `_share_prefix`)."""
MAX_TASKS = 1_000_000
"""What one job may hold. A task keeps about 1.1 KB in memory (its body), so a million is about a
gigabyte: a larger job is refused, naming this limit (a TOML `count` of 10**11 would otherwise
grow memory until the machine gives out); split it into several runs."""
MAX_FIELD_WIDTH = 1_000
"""The widest a placeholder may be formatted (`{agent:06}` is 6): `{agent:999999999}` would
build a gigabyte-long string for every task."""
PLACEHOLDERS = ("agent", "index", "total")


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
            messages.append(self._context_message)
        if memory:
            messages.append({"role": "system", "content": memory})
        if self.system:
            messages.append(
                self._static_system_message
                or {"role": "system", "content": self.system.format(agent=agent, index=agent - 1, total=total)}
            )
        messages.append({"role": "user", "content": prompt})
        return {"model": self.model, "messages": messages, **self.request}

    # Messages identical for every agent are one object shared by every task's body (bodies are
    # never changed in place: a later step or a trim builds a new body), not one copy per task.

    @cached_property
    def _context_message(self) -> dict[str, str]:
        return {"role": "system", "content": self.context}

    @cached_property
    def _static_system_message(self) -> dict[str, str] | None:
        """The system message when it has no placeholder (else each agent's is rendered)."""
        if "{" in self.system or "}" in self.system:
            return None
        return {"role": "system", "content": self.system}


@dataclass(frozen=True)
class Job:
    name: str
    source: str
    tasks: list[Task]
    model: str | None = None
    """The model the job names (TOML); None when each body names its own (JSONL)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Kept for the run's metadata; always empty now that an unknown top-level key of a TOML job is
    an error (a typo such as `modle` must not be ignored while the job is sent)."""
    template: TaskTemplate | None = None
    swarm: SwarmSpec | None = None
    """Plan → fan-out → aggregate and memory, for TOML jobs that ask for them."""
    tools: ToolsSpec | None = None
    """Tools for multi-step agents (`[[tools.mcp]]`, `[[tools.python]]`, `[agents]`), if any."""
    lane: str | None = None
    """`lane = "live" | "batch" | "auto"` (TOML): how the tasks are carried; `--lane` wins."""
    judge: JudgeSpec | None = None
    """`[judge]` (TOML): a sampled LLM-as-a-judge score of the answers, and what drift does."""


def load_job(path: str | Path, *, model_override: str | None = None) -> Job:
    """Load and validate a job file; raise `InputError` listing every problem found."""
    path = Path(path)
    if not path.exists():
        raise InputError.single(path, "job", "file not found")
    if path.is_dir():
        raise InputError.single(path, "job", "is a directory, not a job file")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return load_batch_jsonl(path, model_override=model_override)
    if suffix == ".toml":
        return load_swarm_toml(path, model_override=model_override)
    raise InputError.single(
        path, "job", f"unknown job format {path.suffix!r}: use .jsonl (OpenAI Batch) or .toml (swarm job)"
    )


# --------------------------------------------------------------------------- Batch JSONL


def load_batch_jsonl(path: Path, *, model_override: str | None = None) -> Job:
    problems: list[Problem] = []
    tasks: list[Task] = []
    first_line_of: dict[str, int] = {}
    src = str(path)

    def problem(line: int, field_name: str, message: str) -> None:
        problems.append(Problem(src, line, field_name, message))

    shared: dict[tuple[str, str], dict[str, Any]] = {}
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
        before = len(problems)
        for field_name, message in _body_problems(body, model_required=model_override is None):
            problem(lineno, f"body.{field_name}", message)
        if len(problems) > before:
            continue
        _share_prefix(body["messages"], shared)
        if model_override:
            body = {**body, "model": model_override}
        tasks.append(Task(index=len(tasks), custom_id=custom_id, body=body))

    if not tasks and not problems:
        problems.append(Problem(src, None, "job", "no requests in file"))
    if problems:
        raise InputError(problems)
    return Job(name=path.stem, source=src, tasks=tasks, model=model_override)


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
    else:
        for i, message in enumerate(messages):
            if not _plain_message(message):
                found.extend(_message_problems(f"messages[{i}]", message))
    found.extend(_param_problems(body))
    return found


_PLAIN_ROLES = VALID_ROLES - {"tool"}


def _plain_message(message: Any) -> bool:
    """`{"role": ..., "content": "..."}` with a known role (not "tool", which needs its call's id):
    the shape of nearly every message, valid without the detailed checks of `_message_problems`."""
    return (
        type(message) is dict
        and len(message) == 2
        and type(message.get("content")) is str
        and type(role := message.get("role")) is str
        and role in _PLAIN_ROLES
    )


def _message_problems(where: str, message: Any) -> list[tuple[str, str]]:
    """What the chat-completions API would refuse in one message before any token is billed."""
    if not isinstance(message, dict):
        return [(where, "expected an object")]
    found: list[tuple[str, str]] = []
    role = message.get("role")
    if not isinstance(role, str) or role not in VALID_ROLES:  # a list or object as role is no crash
        found.append((f"{where}.role", f"unknown role {_shown(role)}"))
    tool_calls = message.get("tool_calls")
    if tool_calls is not None and not isinstance(tool_calls, list):
        found.append((f"{where}.tool_calls", f"must be a list, not {_shown(tool_calls)}"))
    content = message.get("content")
    if content is None:
        if not (role == "assistant" and (tool_calls or message.get("function_call"))):
            found.append(
                (
                    f"{where}.content",
                    "missing"
                    if "content" not in message
                    else "may be null only in an assistant message with tool_calls",
                )
            )
    elif isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                found.append(
                    (f"{where}.content[{j}]", f"must be a content part object with a string type, not {_shown(part)}")
                )
            elif part["type"] == "text" and not isinstance(part.get("text"), str):
                found.append((f"{where}.content[{j}].text", f"must be a string, not {_shown(part.get('text'))}"))
    elif not isinstance(content, str):
        found.append((f"{where}.content", f"must be a string or a list of content parts, not {_shown(content)}"))
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        found.append((f"{where}.name", f"must be a string, not {_shown(name)}"))
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        found.append((f"{where}.tool_call_id", "a tool message needs the string id of the call it answers"))
    return found


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return _is_int(value)


def _int_at_least(low: int) -> tuple[Any, str]:
    return (lambda v: _is_int(v) and v >= low), ("a positive integer" if low == 1 else f"an integer >= {low}")


def _int_between(low: int, high: int) -> tuple[Any, str]:
    return (lambda v: _is_int(v) and low <= v <= high), f"an integer from {low} to {high}"


def _number_between(low: float, high: float) -> tuple[Any, str]:
    return (lambda v: _is_number(v) and low <= v <= high), f"a number from {low:g} to {high:g}"


def _of_type(kind: type | tuple[type, ...], what: str) -> tuple[Any, str]:
    return (lambda v: isinstance(v, kind)), what


PARAM_CHECKS: dict[str, tuple[Any, str]] = {
    "max_tokens": _int_at_least(1),
    "max_completion_tokens": _int_at_least(1),
    "n": _int_at_least(1),
    "temperature": _number_between(0, 2),
    "top_p": _number_between(0, 1),
    "presence_penalty": _number_between(-2, 2),
    "frequency_penalty": _number_between(-2, 2),
    "seed": (_is_int, "an integer"),
    "stop": (
        (lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(s, str) for s in v))),
        "a string or a list of strings",
    ),
    "logprobs": _of_type(bool, "true or false"),
    "top_logprobs": _int_between(0, 20),
    "logit_bias": (
        (lambda v: isinstance(v, dict) and all(_is_number(b) for b in v.values())),
        "an object of token ids to numbers",
    ),
    "response_format": (
        (lambda v: isinstance(v, dict) and isinstance(v.get("type"), str)),
        "an object with a string type (text, json_object or json_schema)",
    ),
    "reasoning_effort": _of_type(str, "a string"),
    "user": _of_type(str, "a string"),
    "service_tier": _of_type(str, "a string"),
    "tools": ((lambda v: isinstance(v, list) and all(isinstance(t, dict) for t in v)), "a list of tool objects"),
    "tool_choice": _of_type((str, dict), "a string or an object"),
    "parallel_tool_calls": _of_type(bool, "true or false"),
    "store": _of_type(bool, "true or false"),
    "metadata": _of_type(dict, "an object"),
    "extra_body": _of_type(dict, "an object"),
}
"""Request parameters whose type the chat-completions API checks before any token is billed:
(is the value acceptable, what it must be). A null means the provider's default, as in the API."""


def _param_problems(params: dict[str, Any]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for key, value in params.items():
        if key in ("stream", "stream_options"):
            if key == "stream_options" or value is not False:
                found.append((key, "set streaming with --stream, not in the job"))
            continue
        check = PARAM_CHECKS.get(key)
        if check is not None and value is not None and not check[0](value):
            found.append((key, f"must be {check[1]}, not {_shown(value)}"))
    return found


def _shown(value: Any, limit: int = 60) -> str:
    """A value in a message: its repr, cut short (a problem line stays one readable line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unknown(key: str, known: set[str] | frozenset[str], what: str = "key") -> str:
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return f"unknown {what}, did you mean {close[0]!r}?"
    return f"unknown {what} (known: {', '.join(sorted(known))})"


# --------------------------------------------------------------------------- TOML swarm job

REQUEST_KEYS = frozenset(
    {
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "stop",
        "response_format",
        "reasoning_effort",
        "extra_body",
    }
)
TOP_LEVEL_KEYS = frozenset(
    {
        "name",
        "model",
        "system",
        "context",
        "request",
        "tasks",
        "task",
        "goal",
        "plan",
        "workers",
        "aggregate",
        "memory",
        "tools",
        "agents",
        "lane",
        "judge",
    }
)
TASKS_KEYS = frozenset({"count", "prompt", "id"})
TASK_ENTRY_KEYS = frozenset({"id", "prompt"})
CONTEXT_KEYS = frozenset({"text", "file"})


class _TomlChecker:
    """Collects problems in a TOML job, locating each field's line in the source text."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self.problems: list[Problem] = []

    @cached_property
    def index(self) -> TomlLines:
        """Built on the first problem only: a valid job never pays for locating fields."""
        return TomlLines(split_lines(self.text))

    def line_of(self, dotted: str) -> int | None:
        return self.index.line_of(dotted)

    def add(self, dotted: str, message: str, line: int | None = None) -> None:
        self.problems.append(Problem(str(self.path), line or self.line_of(dotted), dotted, message))

    def unknown_keys(self, table: dict[str, Any], known: frozenset[str], prefix: str = "", what: str = "key") -> None:
        for key in table:
            if key not in known:
                self.add(f"{prefix}{key}", _unknown(key, known, what))

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
    text = read_text_file(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line = int(match.group(1)) if match else None
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise InputError([Problem(str(path), line, "toml", message)]) from None

    check = _TomlChecker(path, text)
    check.unknown_keys(doc, TOP_LEVEL_KEYS)
    name = check.string(doc, "name", "name") or path.stem
    lane = check.string(doc, "lane", "lane")
    if lane is not None and lane not in LANES:
        check.add("lane", f"unknown lane {lane!r} (known: {', '.join(LANES)})")
    model = model_override or check.string(doc, "model", "model")
    if not model:
        check.add("model", "missing (name it in the job, or pass --model)", line=1)
    system = check.string(doc, "system", "system") or ""
    context = _shared_context(doc, path, check)
    request = _request_params(doc, check)

    swarm = parse_swarm_spec(doc, lambda dotted, message: check.add(dotted, message))
    tools = parse_tools_spec(doc, str(path), lambda dotted, message: check.add(dotted, message))
    judge = parse_judge_spec(doc, path.parent, lambda dotted, message: check.add(dotted, message))
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
        for index, (custom_id, prompt, where) in enumerate(prompts):
            values = {"agent": index + 1, "index": index, "total": total}
            rendered_prompt = _render(prompt, values, check, where)
            if rendered_prompt is None or check.problems:
                break
            tasks.append(Task(index, custom_id, template.body(rendered_prompt, agent=index + 1, total=total)))

    if check.problems:
        raise InputError(check.problems)
    return Job(
        name=name,
        source=str(path),
        tasks=tasks,
        model=model,
        template=template,
        swarm=swarm,
        tools=tools,
        lane=lane,
        judge=judge,
    )


def load_tools_file(path: str | Path) -> ToolsSpec:
    """`--tools FILE.toml`: the `[[tools.mcp]]`, `[[tools.python]]` and `[agents]` tables of a
    TOML file, for a job (e.g. a Batch JSONL) that does not declare its own."""
    path = Path(path)
    text = read_text_file(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError([Problem(str(path), None, "toml", str(exc))]) from None
    check = _TomlChecker(path, text)
    check.unknown_keys(doc, frozenset({"tools", "agents"}))
    tools = parse_tools_spec(doc, str(path), lambda dotted, message: check.add(dotted, message))
    if tools is None or not tools.any:
        check.add("tools", "declares no tools ([[tools.mcp]] or [[tools.python]])", line=1)
    if check.problems:
        raise InputError(check.problems)
    assert tools is not None
    return tools


def _shared_context(doc: dict[str, Any], path: Path, check: _TomlChecker) -> str:
    context = doc.get("context")
    if context is None:
        return ""
    if isinstance(context, str):
        return context
    if not isinstance(context, dict):
        check.add("context", "must be a string or a table with `text` or `file`")
        return ""
    check.unknown_keys(context, CONTEXT_KEYS, "context.")
    text = check.string(context, "text", "context.text")
    file_name = check.string(context, "file", "context.file")
    if text and file_name:
        check.add("context", "give `text` or `file`, not both")
    if file_name:
        context_path = (path.parent / file_name).resolve()
        try:
            return context_path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            check.add("context.file", f"{context_path} is not UTF-8 text ({exc.reason} at byte {exc.start})")
        except OSError as exc:
            check.add("context.file", f"cannot read {context_path}: {exc.strerror or exc}")
        return ""
    return text or ""


def _request_params(doc: dict[str, Any], check: _TomlChecker) -> dict[str, Any]:
    request = doc.get("request", {})
    if not isinstance(request, dict):
        check.add("request", "must be a table")
        return {}
    check.unknown_keys(request, REQUEST_KEYS, "request.", "request parameter")
    known = {key: value for key, value in request.items() if key in REQUEST_KEYS}
    for field_name, message in _param_problems(known):
        check.add(f"request.{field_name}", message)
    return dict(request)


def _task_prompts(doc: dict[str, Any], check: _TomlChecker) -> list[tuple[str, str, str]]:
    """(custom_id, prompt template, field) for each task, from `[tasks]` count + template or `[[task]]`."""
    tasks_table = doc.get("tasks")
    task_list = doc.get("task")
    if tasks_table is None and task_list is None:
        check.add("tasks", "missing: add [tasks] with count and prompt, [[task]] entries, or a goal and [plan]", line=1)
        return []
    prompts: list[tuple[str, str, str]] = []
    if tasks_table is not None:
        if not isinstance(tasks_table, dict):
            check.add("tasks", "must be a table with count and prompt")
            return []
        check.unknown_keys(tasks_table, TASKS_KEYS, "tasks.")
        count = tasks_table.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            check.add("tasks.count", f"must be a positive integer, not {_shown(count)}")
            return []
        if count > MAX_TASKS:
            check.add("tasks.count", f"{count:,} tasks is over the limit of {MAX_TASKS:,} a job (split it)")
            return []
        prompt = check.string(tasks_table, "prompt", "tasks.prompt", required=True)
        id_template = check.string(tasks_table, "id", "tasks.id") or f"agent-{{agent:0{len(str(count))}}}"
        if prompt is None:
            return []
        agent_of: dict[str, int] = {}
        for index in range(count):
            values = {"agent": index + 1, "index": index, "total": count}
            custom_id = _render(id_template, values, check, "tasks.id")
            if custom_id is None:
                return []
            if custom_id in agent_of:  # e.g. an id without {agent}: every task would be one
                check.add(
                    "tasks.id",
                    f"gives agents {agent_of[custom_id]} and {index + 1} the same id {_shown(custom_id)}: "
                    f"put {{agent}} (or {{index}}) in it",
                )
                return []
            agent_of[custom_id] = index + 1
            prompts.append((custom_id, prompt, "tasks.prompt"))
    if task_list is not None:
        if not isinstance(task_list, list):
            check.add("task", "must be an array of tables ([[task]])")
            return prompts
        seen = {custom_id for custom_id, *_ in prompts}
        if len(prompts) + len(task_list) > MAX_TASKS:
            check.add("task", f"{len(prompts) + len(task_list):,} tasks is over the limit of {MAX_TASKS:,} a job")
            return prompts
        for i, entry in enumerate(task_list):
            where = f"task[{i}]"
            if not isinstance(entry, dict):
                check.add(where, "must be a table")
                continue
            check.unknown_keys(entry, TASK_ENTRY_KEYS, f"{where}.")
            prompt = check.string(entry, "prompt", f"{where}.prompt")
            if prompt is None:
                if "prompt" not in entry:
                    check.add(f"{where}.prompt", "missing", line=check.line_of(where))
                continue
            custom_id = entry.get("id", f"task-{len(prompts) + 1}")
            if not isinstance(custom_id, str) or not custom_id or custom_id in seen:
                check.add(f"{where}.id", f"missing, empty or duplicate: {custom_id!r}")
                continue
            seen.add(custom_id)
            prompts.append((custom_id, prompt, f"{where}.prompt"))
    return prompts


def _render(template: str, values: dict[str, int], check: _TomlChecker, dotted: str) -> str | None:
    problem = _template_problem(template)
    if problem is None:
        try:
            return template.format(**values)
        except (KeyError, IndexError, ValueError, TypeError, AttributeError, OverflowError) as exc:
            problem = f"unknown or malformed placeholder {exc!s}"
    check.add(
        dotted,
        f"bad template {_shown(template)}: {problem} "
        f"(known: {{agent}}, {{index}}, {{total}}; write {{{{ }}}} for braces)",
    )
    return None


@functools.lru_cache(maxsize=64)
def _template_problem(template: str) -> str | None:
    """What makes `template` unsafe to render, checked once however many tasks it renders: a
    placeholder that is not one of ours (`{agent.__class__}`, `{0}`), or a format wider than
    `MAX_FIELD_WIDTH` or holding a placeholder of its own (`{agent:{total}}`)."""
    try:
        fields = [(name, spec) for _, name, spec, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        return f"malformed placeholder ({exc})"
    for name, spec in fields:
        if name not in PLACEHOLDERS:
            return f"unknown placeholder {{{name[:30]}}}"
        if spec and "{" in spec:
            return f"the format of {{{name}}} holds a placeholder of its own"
        for digits in re.findall(r"\d+", spec or ""):
            if len(digits) > 7 or int(digits) > MAX_FIELD_WIDTH:
                return f"the format of {{{name}}} is wider than {MAX_FIELD_WIDTH:,} characters"
    return None
