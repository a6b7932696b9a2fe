"""The engine's unit of work: a task, one sub-agent's request (a multi-step agent's transcript
grows in its body), whatever job file it came from."""

from __future__ import annotations

import json
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
