"""A TOML job's tasks: `[tasks]` (a count and a prompt template) or `[[task]]` entries, rendered.

Templates know `{agent}` (1-based), `{index}` (0-based) and `{total}`; anything else (an attribute,
a positional field, a format wider than `MAX_FIELD_WIDTH` or holding a placeholder of its own) is
a problem named with its field, never a crash nor a gigabyte-long string.
"""

from __future__ import annotations

import functools
import re
import string
from typing import Any

from .chat_checks import shown
from .job import MAX_TASKS
from .toml_checks import TomlChecker

__all__ = ["TASKS_KEYS", "TASK_ENTRY_KEYS", "MAX_FIELD_WIDTH", "PLACEHOLDERS", "task_prompts", "render"]

TASKS_KEYS = frozenset({"count", "prompt", "id"})
TASK_ENTRY_KEYS = frozenset({"id", "prompt"})
MAX_FIELD_WIDTH = 1_000
"""The widest a placeholder may be formatted (`{agent:06}` is 6): `{agent:999999999}` would
build a gigabyte-long string for every task."""
PLACEHOLDERS = ("agent", "index", "total")


def task_prompts(doc: dict[str, Any], check: TomlChecker) -> list[tuple[str, str, str]]:
    """(custom_id, prompt template, field) for each task, from `[tasks]` count + template or `[[task]]`."""
    tasks_table = doc.get("tasks")
    task_list = doc.get("task")
    if tasks_table is None and task_list is None:
        check.add("tasks", "missing: add [tasks] with count and prompt, [[task]] entries, or a goal and [plan]", line=1)
        return []
    prompts: list[tuple[str, str, str]] = []
    if tasks_table is not None:
        counted = _counted_prompts(tasks_table, check)
        if counted is None:
            return []
        prompts = counted
    if task_list is not None:
        _add_listed_prompts(task_list, prompts, check)
    return prompts


def _counted_prompts(tasks_table: Any, check: TomlChecker) -> list[tuple[str, str, str]] | None:
    """`[tasks]`: `count` tasks of one prompt template, their ids from the `id` template (None
    when the table has a problem: then no task of it is made)."""
    if not isinstance(tasks_table, dict):
        check.add("tasks", "must be a table with count and prompt")
        return None
    check.unknown_keys(tasks_table, TASKS_KEYS, "tasks.")
    count = tasks_table.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        check.add("tasks.count", f"must be a positive integer, not {shown(count)}")
        return None
    if count > MAX_TASKS:
        check.add("tasks.count", f"{count:,} tasks is over the limit of {MAX_TASKS:,} a job (split it)")
        return None
    prompt = check.string(tasks_table, "prompt", "tasks.prompt", required=True)
    id_template = check.string(tasks_table, "id", "tasks.id") or f"agent-{{agent:0{len(str(count))}}}"
    if prompt is None:
        return None
    prompts: list[tuple[str, str, str]] = []
    agent_of: dict[str, int] = {}
    for index in range(count):
        values = {"agent": index + 1, "index": index, "total": count}
        custom_id = render(id_template, values, check, "tasks.id")
        if custom_id is None:
            return None
        if custom_id in agent_of:  # e.g. an id without {agent}: every task would be one
            check.add(
                "tasks.id",
                f"gives agents {agent_of[custom_id]} and {index + 1} the same id {shown(custom_id)}: "
                f"put {{agent}} (or {{index}}) in it",
            )
            return None
        agent_of[custom_id] = index + 1
        prompts.append((custom_id, prompt, "tasks.prompt"))
    return prompts


def _add_listed_prompts(task_list: Any, prompts: list[tuple[str, str, str]], check: TomlChecker) -> None:
    """`[[task]]`: one task an entry, added to `prompts` (an entry with a problem is left out)."""
    if not isinstance(task_list, list):
        check.add("task", "must be an array of tables ([[task]])")
        return
    seen = {custom_id for custom_id, *_ in prompts}
    if len(prompts) + len(task_list) > MAX_TASKS:
        check.add("task", f"{len(prompts) + len(task_list):,} tasks is over the limit of {MAX_TASKS:,} a job")
        return
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


def render(template: str, values: dict[str, int], check: TomlChecker, dotted: str) -> str | None:
    """`template` with `values`, or None when it is unsafe or malformed (the problem added)."""
    problem = _template_problem(template)
    if problem is None:
        try:
            return template.format(**values)
        except (KeyError, IndexError, ValueError, TypeError, AttributeError, OverflowError) as exc:
            problem = f"unknown or malformed placeholder {exc!s}"
    check.add(
        dotted,
        f"bad template {shown(template)}: {problem} "
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
