"""Loading a TOML swarm job, and a `--tools` file.

A swarm job: a system template, optional shared context sent first and identical for every
agent (so provider prefix caches hit), request parameters, tasks (``toml_tasks``), and the
tables of the swarm pipeline, the tools and the judge (each parsed by its own package's spec).
An unknown key anywhere is a problem, with a "did you mean" when one is close.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from swarm_tui.core.errors import InputError, Problem
from swarm_tui.core.lanes import LANES
from swarm_tui.core.task import Task
from swarm_tui.jobs.answer_spec import parse_answer_spec
from swarm_tui.jobs.chat_checks import param_problems
from swarm_tui.jobs.job import CacheChoice, Job, TaskTemplate
from swarm_tui.jobs.judge_spec import parse_judge_spec
from swarm_tui.jobs.orchestrated import ORCHESTRATOR_ID, literal
from swarm_tui.jobs.swarm_spec import SwarmSpec, parse_swarm_spec
from swarm_tui.jobs.tables import TOML_LABELS, TableSpec, load_table
from swarm_tui.jobs.toml_checks import TomlChecker
from swarm_tui.jobs.toml_tasks import TASKS_KEYS, TemplatedTasks, render, task_prompts, values_of
from swarm_tui.tools.orchestrator_spec import OrchestratorSpec, parse_orchestrator_spec
from swarm_tui.tools.spec import ToolsSpec, parse_tools_spec
from swarm_tui.util.argtypes import duration
from swarm_tui.util.textfile import read_text_file

__all__ = ["load_swarm_toml", "load_tools_file", "REQUEST_KEYS", "TOP_LEVEL_KEYS", "CONTEXT_KEYS"]

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
        "cache",
        "orchestrator",
        "answer",
    }
)
CONTEXT_KEYS = frozenset({"text", "file"})


def load_swarm_toml(path: Path, *, model_override: str | None = None) -> Job:
    """The job of a TOML file, its tasks rendered; `InputError` listing every problem found."""
    text = read_text_file(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line = int(match.group(1)) if match else None
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise InputError([Problem(str(path), line, "toml", message)]) from None

    check = TomlChecker(path, text)
    check.unknown_keys(doc, TOP_LEVEL_KEYS)
    name = check.string(doc, "name", "name") or path.stem
    lane = check.string(doc, "lane", "lane")
    if lane is not None and lane not in LANES:
        check.add("lane", f"unknown lane {lane!r} (known: {', '.join(LANES)})")
    cache = _cache_choice(doc, check, path.parent)
    model = model_override or check.string(doc, "model", "model")
    if not model:
        check.add("model", "missing (name it in the job, or pass --model)", line=1)
    system = check.string(doc, "system", "system") or ""
    context = _shared_context(doc, path, check)
    request = _request_params(doc, check)

    swarm = parse_swarm_spec(doc, lambda dotted, message: check.add(dotted, message))
    tools = parse_tools_spec(doc, str(path), lambda dotted, message: check.add(dotted, message))
    judge = parse_judge_spec(doc, path.parent, lambda dotted, message: check.add(dotted, message))
    orchestrator = parse_orchestrator_spec(doc, str(path), lambda dotted, message: check.add(dotted, message))
    if orchestrator is not None:
        _check_orchestrator(doc, orchestrator, swarm, check)
    answer = parse_answer_spec(doc, path.parent, str(path), lambda dotted, message: check.add(dotted, message))
    planned = swarm is not None and swarm.plan is not None
    if planned and ("tasks" in doc or "task" in doc):
        check.add("plan", "a planned job gets its tasks from the planner: remove [tasks] / [[task]]")
    table_spec = None if planned else _table_spec(doc, path.parent, system, swarm, check)
    if orchestrator is not None and orchestrator.goal:
        prompts: Sequence[tuple[str, str, str]] = [(ORCHESTRATOR_ID, literal(orchestrator.goal), "orchestrator.goal")]
    else:
        prompts = [] if planned or table_spec is not None else task_prompts(doc, check)
    if swarm is not None and swarm.workers.json:
        request = {**request, "response_format": {"type": "json_object"}}  # checked as any body's format
    if orchestrator is not None:
        system = literal(orchestrator.system_prompt())
    template = TaskTemplate(model=model or "", context=context, system=system, request=request)
    if system and table_spec is None:  # a table's system prompt names its columns: rendered for each row
        render(system, {"agent": 1, "index": 0, "total": 1}, check, "system")
    for index, (_, prompt, where) in enumerate(prompts):  # every prompt rendered once, to check it
        if render(prompt, values_of(index, len(prompts)), check, where) is None or check.problems:
            break
    tasks: Sequence[Task] = TemplatedTasks(prompts, template)

    if check.problems:
        raise InputError(check.problems)
    table = None
    if table_spec is not None:
        source, spec = table_spec
        tasks, table = load_table(path.parent / source, spec, template)
        if "{" in system:  # a later step (a warm-up) builds its body from the template: no row to render
            template = replace(template, system="")
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
        cache=cache,
        answer=answer,
        table=table,
        orchestrator=orchestrator,
    )


def _check_orchestrator(
    doc: dict[str, Any], spec: OrchestratorSpec, swarm: SwarmSpec | None, check: TomlChecker
) -> None:
    """An orchestrator job's tasks are its goal (or its [tasks]: each an orchestrator); the model
    decides the rest, so a planner's or a table's tasks do not mix with it."""
    listed = "tasks" in doc or "task" in doc
    if spec.goal and listed:
        check.add("orchestrator.goal", "give the orchestrator a goal or [tasks] (each an orchestrator), not both")
    elif not spec.goal and not listed:
        check.add("orchestrator.goal", "missing: the orchestrator's task (or [tasks], each an orchestrator)")
    if isinstance(doc.get("tasks"), dict) and "from" in doc["tasks"]:
        check.add("tasks.from", "a table's rows are not orchestrators: remove [orchestrator] (or from)")
    if "system" in doc:
        check.add("system", "an orchestrator's system prompt is [orchestrator] system (its sub-agents': child_system)")
    if swarm is not None and swarm.is_pipeline:
        check.add("orchestrator", "an orchestrator plans its own sub-agents: remove [plan], [aggregate] and [memory]")


def _table_spec(
    doc: dict[str, Any], base: Path, system: str, swarm: SwarmSpec | None, check: TomlChecker
) -> tuple[str, TableSpec] | None:
    """`[tasks] from = "data.parquet"`: the table (relative to the job file) and the templates
    over its columns (`prompt`, `id`, the job's `system`); None for a job of other tasks."""
    tasks_table = doc.get("tasks")
    if not isinstance(tasks_table, dict) or "from" not in tasks_table:
        return None
    source = check.string(tasks_table, "from", "tasks.from", required=True)
    check.unknown_keys(tasks_table, TASKS_KEYS, "tasks.")
    if "count" in tasks_table:
        check.add("tasks.count", "a table's rows are the tasks: remove count (or from)")
    if "task" in doc:
        check.add("task", "the tasks are the rows of [tasks] from: remove the [[task]] entries (or from)")
    if swarm is not None and swarm.memory.rounds > 1:
        check.add("memory.rounds", "a table's rows are asked once: remove [memory] rounds (or [tasks] from)")
    prompt = check.string(tasks_table, "prompt", "tasks.prompt", required=True)
    id_template = check.string(tasks_table, "id", "tasks.id")
    if source and not (base / source).exists():
        check.add("tasks.from", f"{base / source}: file not found")
    if not source or prompt is None:
        return None
    return source, TableSpec(prompt, system, id_template, labels=TOML_LABELS)


CACHE_KEYS = frozenset({"mode", "ttl", "dir"})
CACHE_MODES = ("readwrite", "read", "write", "off")


def _cache_choice(doc: dict[str, Any], check: TomlChecker, base: Path) -> CacheChoice | None:
    """`[cache]`: `mode` (readwrite, read, write, off; default readwrite), `ttl` ("14d", "12h", or a
    number of days), `dir` (relative to the job file)."""
    table = doc.get("cache")
    if table is None:
        return None
    if not isinstance(table, dict):
        check.add("cache", f"must be a table ([cache]), not {type(table).__name__}")
        return None
    check.unknown_keys(table, CACHE_KEYS, "cache.")
    mode = check.string(table, "mode", "cache.mode") or "readwrite"
    if mode not in CACHE_MODES:
        check.add("cache.mode", f"unknown mode {mode!r} (known: {', '.join(CACHE_MODES)})")
    ttl_s = None
    ttl = table.get("ttl")
    if ttl is not None:
        try:
            ttl_s = duration(str(ttl)) if isinstance(ttl, str | int | float) and not isinstance(ttl, bool) else None
        except argparse.ArgumentTypeError as exc:
            check.add("cache.ttl", str(exc))
        else:
            if ttl_s is None:
                check.add("cache.ttl", f'must be a duration ("14d", "12h") or days, not {type(ttl).__name__}')
    directory = check.string(table, "dir", "cache.dir")
    return CacheChoice(mode, ttl_s, str(base / directory) if directory else None)


def load_tools_file(path: str | Path) -> ToolsSpec:
    """`--tools FILE.toml`: the `[[tools.mcp]]`, `[[tools.python]]` and `[agents]` tables of a
    TOML file, for a job (e.g. a Batch JSONL) that does not declare its own."""
    path = Path(path)
    text = read_text_file(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError([Problem(str(path), None, "toml", str(exc))]) from None
    check = TomlChecker(path, text)
    check.unknown_keys(doc, frozenset({"tools", "agents"}))
    tools = parse_tools_spec(doc, str(path), lambda dotted, message: check.add(dotted, message))
    if tools is None or not tools.any:
        check.add("tools", "declares no tools ([[tools.mcp]] or [[tools.python]])", line=1)
    if check.problems:
        raise InputError(check.problems)
    assert tools is not None
    return tools


def _shared_context(doc: dict[str, Any], path: Path, check: TomlChecker) -> str:
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


def _request_params(doc: dict[str, Any], check: TomlChecker) -> dict[str, Any]:
    request = doc.get("request", {})
    if not isinstance(request, dict):
        check.add("request", "must be a table")
        return {}
    check.unknown_keys(request, REQUEST_KEYS, "request.", "request parameter")
    known = {key: value for key, value in request.items() if key in REQUEST_KEYS}
    for field_name, message in param_problems(known):
        check.add(f"request.{field_name}", message)
    return dict(request)
