"""What the span model needs to know of a run besides its events: read once, cheap to ask.

The events say what each attempt did (usage, latency, outcome); the request a task sends (its
model, its `max_tokens`, with `--otel-content` its messages), where an endpoint name points
(`server.address`) and, with `--otel-content`, what an answer and a tool call said are read
here: from the engine's tasks and the events' payloads in a live run (`LiveFacts`), from the
journal's tables afterwards (`otel.journal_source.JournalFacts`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..core.events import TaskSucceeded, ToolCallEnded

FALLBACK_SUFFIX = "/fallback"
BATCH_SUFFIX = "/batch"


class RunFacts(Protocol):
    job_name: str
    default_model: str | None
    content: bool
    """Prompts, answers and tool input/output go on the spans (`--otel-content`)."""

    def body(self, index: int) -> Mapping[str, Any] | None:
        """A task's request body (None: not a task of the grid, or unknown)."""

    def answer(self, event: TaskSucceeded) -> Any:
        """The answer of a success (bytes, text or a body; None: not known). Asked only with content."""

    def tool_io(self, event: ToolCallEnded) -> tuple[str | None, str | None]:
        """(arguments, result) of a tool call. Asked only with content."""

    def server(self, endpoint: str) -> tuple[str, int] | None:
        """(host, port) an endpoint name's calls went to (None: not known, e.g. the embedded simulator)."""


def servers_from_plan(plan: Mapping[str, Any] | None) -> dict[str, tuple[str, int]]:
    """Endpoint name -> (host, port), from a journal's `meta["plan"]` (its profile and fallback)."""
    profile = (plan or {}).get("profile") or {}
    name = profile.get("name") or ""
    found: dict[str, tuple[str, int]] = {}
    for endpoint, url in ((name, profile.get("base_url")), (name + FALLBACK_SUFFIX, profile.get("fallback_base_url"))):
        address = _address(url)
        if address is not None:
            found[endpoint] = address
            found[endpoint + BATCH_SUFFIX] = address
    return found


def _address(url: Any) -> tuple[str, int] | None:
    if not isinstance(url, str) or not url:
        return None
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname else None


def profile_model(plan: Mapping[str, Any] | None) -> str | None:
    model = ((plan or {}).get("profile") or {}).get("model")
    return model if isinstance(model, str) and model else None


def answer_message(answer: Any) -> dict[str, Any] | None:
    """The assistant's message of an answer (bytes or text of a chat completion, or its body)."""
    if isinstance(answer, bytes | bytearray | str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return None
    if not isinstance(answer, dict):
        return None
    choices = answer.get("choices") or [{}]
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    return message if isinstance(message, dict) else None


_MODEL_FIELD = re.compile(rb'"model"\s*:\s*"((?:[^"\\]|\\.){1,200})"')
ANSWER_HEAD_BYTES = 1024
"""How much of an answer is searched for its `model`: a chat completion names it before its choices."""


def answer_model(answer: Any) -> str | None:
    """The model an answer says it came from, read from its head (cheap on the run's loop: an
    answer may be megabytes, and only its first field or four are needed)."""
    if isinstance(answer, dict):
        model = answer.get("model")
        return model if isinstance(model, str) else None
    if isinstance(answer, str):
        answer = answer[:ANSWER_HEAD_BYTES].encode("utf-8", "replace")
    if not isinstance(answer, bytes | bytearray):
        return None
    found = _MODEL_FIELD.search(answer, 0, ANSWER_HEAD_BYTES)
    if found is None:
        return None
    try:
        return json.loads(b'"' + found.group(1) + b'"')
    except ValueError:
        return None


class MetaFacts:
    """What a journal's `meta` says: the job's name, the profile's model and where its endpoints point."""

    def __init__(self, meta: Mapping[str, Any], *, content: bool) -> None:
        job = meta.get("job") or {}
        self.job_name = str(job.get("name") or "run") if isinstance(job, dict) else "run"
        self.default_model = profile_model(meta.get("plan"))
        self.content = content
        self._servers = servers_from_plan(meta.get("plan"))

    def server(self, endpoint: str) -> tuple[str, int] | None:
        return self._servers.get(endpoint)


class LiveFacts(MetaFacts):
    """A running session's facts: the engine's tasks (bodies as sent) and the events' payloads."""

    def __init__(self, tasks: Mapping[int, Any], meta: Mapping[str, Any], *, content: bool) -> None:
        super().__init__(meta, content=content)
        self._tasks = tasks

    def body(self, index: int) -> Mapping[str, Any] | None:
        task = self._tasks.get(index)
        return task.body if task is not None else None

    def answer(self, event: TaskSucceeded) -> Any:
        return event.response

    def tool_io(self, event: ToolCallEnded) -> tuple[str | None, str | None]:
        return event.arguments, event.result
