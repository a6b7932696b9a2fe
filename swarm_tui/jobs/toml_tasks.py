"""A TOML job's tasks: `[tasks]` (a count and a prompt template) or `[[task]]` entries, rendered.

Templates know `{agent}` (1-based), `{index}` (0-based) and `{total}`; anything else (an attribute,
a positional field, a format wider than `MAX_FIELD_WIDTH` or holding a placeholder of its own) is
a problem named with its field, never a crash nor a gigabyte-long string.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Sequence
from typing import Any

from swarm_tui.core.task import Task
from swarm_tui.jobs.chat_checks import shown
from swarm_tui.jobs.id_hashes import IdHashes
from swarm_tui.jobs.job import MAX_TASKS, TaskTemplate
from swarm_tui.jobs.on_demand import OnDemand
from swarm_tui.jobs.toml_checks import TomlChecker

__all__ = ["TASKS_KEYS", "TASK_ENTRY_KEYS", "MAX_FIELD_WIDTH", "PLACEHOLDERS", "task_prompts", "render", "values_of"]

TASKS_KEYS = frozenset({"count", "prompt", "id", "from"})
TASK_ENTRY_KEYS = frozenset({"id", "prompt"})
MAX_FIELD_WIDTH = 1_000
"""The widest a placeholder may be formatted (`{agent:06}` is 6): `{agent:999999999}` would
build a gigabyte-long string for every task."""
PLACEHOLDERS = ("agent", "index", "total")
Prompt = tuple[str, str, str]
"""A task's custom_id, its prompt template and the field that template came from."""


def task_prompts(doc: dict[str, Any], check: TomlChecker) -> Sequence[Prompt]:
    """(custom_id, prompt template, field) for each task, from `[tasks]` count + template or `[[task]]`
    (a count's are made when read, `CountedPrompts`: a million are never held at once)."""
    tasks_table = doc.get("tasks")
    task_list = doc.get("task")
    if tasks_table is None and task_list is None:
        check.add("tasks", "missing: add [tasks] with count and prompt, [[task]] entries, or a goal and [plan]", line=1)
        return []
    counted = _counted_prompts(tasks_table, check) if tasks_table is not None else None
    if tasks_table is not None and counted is None:
        return []
    if task_list is None:
        return counted or []
    prompts: list[Prompt] = list(counted or [])
    _add_listed_prompts(task_list, prompts, check)
    return prompts


class CountedPrompts(OnDemand[Prompt]):
    """`[tasks]`'s prompts: task `i`'s id rendered from the id template when it is read."""

    def __init__(self, count: int, prompt: str, id_template: str) -> None:
        self._count = count
        self._prompt = prompt
        self._id_template = id_template

    def __len__(self) -> int:
        return self._count

    def _item(self, position: int) -> Prompt:
        return self._id_template.format(**values_of(position, self._count)), self._prompt, "tasks.prompt"


class TemplatedTasks(OnDemand[Task]):
    """A TOML job's tasks, each built from its prompt and the job's template when it is read (the
    prompts were rendered once, to check them, as the job loaded): a count of a million holds
    none of their bodies; a new run's journal takes them as they are read, and keeps them."""

    def __init__(self, prompts: Sequence[Prompt], template: TaskTemplate) -> None:
        self._prompts = prompts
        self._template = template

    def __len__(self) -> int:
        return len(self._prompts)

    def _item(self, position: int) -> Task:
        total = len(self._prompts)
        custom_id, prompt, _ = self._prompts[position]
        body = self._template.body(prompt.format(**values_of(position, total)), agent=position + 1, total=total)
        return Task(position, custom_id, body)


def values_of(index: int, total: int) -> dict[str, int]:
    """What a template's placeholders stand for in task `index` of `total`."""
    return {"agent": index + 1, "index": index, "total": total}


def _counted_prompts(tasks_table: Any, check: TomlChecker) -> CountedPrompts | None:
    """`[tasks]`: `count` tasks of one prompt template, their ids from the `id` template (None
    when the table has a problem: then no task of it is made). Every id is rendered and checked,
    holding a hash of each (`id_hashes`)."""
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
    ids = IdHashes()
    for index in range(count):
        custom_id = render(id_template, values_of(index, count), check, "tasks.id")
        if custom_id is None:
            return None
        ids.add(custom_id)
    prompts = CountedPrompts(count, prompt, id_template)
    repeated = ids.repeated()
    agent_of: dict[str, int] = {}
    for index in range(count) if repeated else ():  # e.g. an id without {agent}: every task would be one
        custom_id = prompts[index][0]
        if hash(custom_id) not in repeated:
            continue
        if custom_id in agent_of:
            check.add(
                "tasks.id",
                f"gives agents {agent_of[custom_id]} and {index + 1} the same id {shown(custom_id)}: "
                f"put {{agent}} (or {{index}}) in it",
            )
            return None
        agent_of[custom_id] = index + 1
    return prompts


def _add_listed_prompts(task_list: Any, prompts: list[Prompt], check: TomlChecker) -> None:
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
