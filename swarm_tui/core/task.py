"""The engine's unit of work: a task, one sub-agent's request (a multi-step agent's transcript
grows in its body), whatever job file it came from."""

from __future__ import annotations

import json
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any


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


JSONObject = dict[str, object]
"""A JSON object as it crosses a port (a request body, a transcript, a note's data): who reads its
values narrows them."""

RunTasks = Iterable[Task] | MutableMapping[int, Task]
"""What an engine is given: the tasks (a list), or a table of them by index."""


def by_index(tasks: RunTasks) -> MutableMapping[int, Task]:
    """A run's tasks keyed by index: a table given as one (`journal.task_table.JournalTasks`, whose
    bodies stay in the journal) as it is, a list's in a dict."""
    if isinstance(tasks, MutableMapping):
        return tasks
    return {task.index: task for task in tasks}
