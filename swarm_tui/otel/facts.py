"""What the span model needs to know of a run besides its events: read once, cheap to ask.

The events say what each attempt did (usage, latency, outcome, a final answer's text); the
request a task sends (its model, its `max_tokens`, with `--otel-content` its messages), where an
endpoint name points (`server.address`) and, with `--otel-content`, what a tool call was given
and answered are read here: from the engine's tasks and the events' payloads in a live run
(`LiveFacts`), from the journal's tables afterwards (`otel.journal_source.JournalFacts`).

The engine's listeners get neither a kept answer nor a tool call's input and output (the journal
keeps them); the live tracer reads them from the journal, on a read-only connection of its own
thread: `gen_ai.response.model` from the head of the answer, the tool's input and output with
`--otel-content`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from swarm_tui.core.events import ToolCallEnded
from swarm_tui.journal import Journal
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.records import RunMeta

FALLBACK_SUFFIX = "/fallback"
BATCH_SUFFIX = "/batch"


class RunFacts(Protocol):
    job_name: str
    default_model: str | None
    content: bool
    """Prompts, answers and tool input/output go on the spans (`--otel-content`)."""

    def body(self, index: int) -> Mapping[str, Any] | None:
        """A task's request body (None: not a task of the grid, or unknown)."""

    def phase_model(self, phase: str) -> str | None:
        """The model a call of a swarm's step or of the judge asks for."""

    def tool_io(self, event: ToolCallEnded) -> tuple[str | None, str | None]:
        """(arguments, result) of a tool call. Asked only with content."""

    def response_model(self, index: int) -> str | None:
        """The model a task's kept answer says it came from (None: no answer, or it does not say)."""

    def server(self, endpoint: str) -> tuple[str, int] | None:
        """(host, port) an endpoint name's calls went to (None: not known, e.g. the embedded simulator)."""


def servers_of(profile: ProviderProfile) -> dict[str, tuple[str, int]]:
    """Endpoint name -> (host, port), of the run's profile and its fallback."""
    name = profile.name
    found: dict[str, tuple[str, int]] = {}
    for endpoint, url in ((name, profile.base_url), (name + FALLBACK_SUFFIX, profile.fallback_base_url)):
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


JUDGE_PHASE = "judge"


ANSWER_HEAD_CHARS = 1024
"""How much of an answer is searched for its `model` (a chat completion names it before its choices)."""
_MODEL_FIELD = re.compile(r'"model"\s*:\s*"((?:[^"\\]|\\.){1,200})"')


def answer_model(head: str | None) -> str | None:
    """The `model` a kept answer's head names (strict JSON, `strict_json`), or None."""
    found = _MODEL_FIELD.search(head) if head else None
    if found is None:
        return None
    try:
        model = json.loads(f'"{found.group(1)}"')
    except ValueError:
        return None
    return model if isinstance(model, str) else None


class MetaFacts:
    """What a run's record says (`records.RunMeta`): the job's name, the run's model and where its
    endpoints point."""

    def __init__(self, meta: RunMeta, *, content: bool) -> None:
        self.job_name = meta.job.name or "run"
        self.default_model = meta.plan.model
        """The model a call outside the grid asks for (the planner, the aggregator): the run's."""
        self.judge_model = meta.judge.model(self.default_model) if meta.judge is not None else self.default_model
        self.content = content
        self._servers = servers_of(meta.plan.profile)

    def phase_model(self, phase: str) -> str | None:
        """The model a call of a swarm's step or of the judge asks for (its body is not journaled)."""
        return self.judge_model if phase == JUDGE_PHASE else self.default_model

    def server(self, endpoint: str) -> tuple[str, int] | None:
        return self._servers.get(endpoint)


class LiveFacts(MetaFacts):
    """A running session's facts: the engine's tasks (bodies as sent) and, with content, what a
    tool call was given and answered, read from the journal (the engine's listeners get the
    event without them: the journal keeps them) on a read-only connection of the tracer's own."""

    def __init__(self, tasks: Mapping[int, Any], meta: RunMeta, *, content: bool, run_dir: Path | None = None) -> None:
        super().__init__(meta, content=content)
        self._tasks = tasks
        self._run_dir = run_dir
        self._reader: Journal | None = None

    def body(self, index: int) -> Mapping[str, Any] | None:
        task = self._tasks.get(index)
        return task.body if task is not None else None

    def _journal(self) -> Journal | None:
        if self._reader is None and self._run_dir is not None:
            self._reader = Journal.open(self._run_dir, readonly=True)
        return self._reader

    def response_model(self, index: int) -> str | None:
        reader = self._journal()
        return answer_model(reader.queries.answer_head(index, ANSWER_HEAD_CHARS)) if reader is not None else None

    def tool_io(self, event: ToolCallEnded) -> tuple[str | None, str | None]:
        if event.arguments is not None or event.result is not None:
            return event.arguments, event.result
        reader = self._journal()
        if reader is not None:
            for call in reader.history.tool_calls_of(event.index):
                if call["call_id"] == event.call_id:
                    return call["arguments"], call["result"]
        return None, None

    def close(self) -> None:
        """The journal's reader closed (by the thread that used it)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
