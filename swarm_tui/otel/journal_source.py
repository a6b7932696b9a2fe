"""A finished (or stopped) run's journal as the span model's input: its events in log order, and
the facts its tables hold (task bodies, answers, tool calls).

Any schema: a journal of schema 2 or later is read through its log, with the untyped notes a
schema-2 journal kept aside (`events` table) merged in by time as the typed events they became
(`journal.note_kinds`), as `migrate` would; a schema-1 journal has no log, and its events are
rebuilt from its rows by a `JournalFollower`, as a resume would. The journal is opened
read-only and never migrated: exporting a run changes nothing in it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from typing import Any

from swarm_tui.core.events import EngineEvent, ToolCallEnded
from swarm_tui.journal import Journal, JournalFollower
from swarm_tui.journal.note_kinds import old_note
from swarm_tui.otel.facts import ANSWER_HEAD_CHARS, MetaFacts, answer_model
from swarm_tui.records import RunMeta


def timeline(journal: Journal) -> Iterator[tuple[float, EngineEvent]]:
    """(epoch time, event) of everything the run did, in order."""
    rebuilt = not journal.history.has_log()
    notes = [
        (at, event)
        for _, at, _, kind, data in journal.history.old_events()
        if (event := old_note(kind, data or {}, rebuilt=rebuilt)) is not None
    ]
    logged = _rebuilt(journal) if rebuilt else [(at, event) for _, at, event in journal.history.log_since(0)]
    if not notes:
        yield from logged
        return
    yield from heapq.merge(logged, notes, key=lambda entry: entry[0])


def _rebuilt(journal: Journal) -> list[tuple[float, EngineEvent]]:
    """A schema-1 journal's events, rebuilt from its rows (the follower's replay clock is their time)."""
    events: list[tuple[float, EngineEvent]] = []
    follower = JournalFollower(journal, journal.queries.states())

    def keep(event: EngineEvent) -> None:
        at = follower.now if follower.now is not None else (events[-1][0] if events else 0.0)
        events.append((at, event))

    follower.subscribe(keep)
    follower.poll(heartbeat_in_flight=False)
    return events


class JournalFacts(MetaFacts):
    """The facts of `otel.facts.RunFacts`, read from a journal's tables once."""

    def __init__(self, journal: Journal, meta: RunMeta, *, content: bool) -> None:
        super().__init__(meta, content=content)
        tasks = journal.queries.tasks()
        self._bodies: dict[int, Mapping[str, Any]] = {row.index: row.body for row in tasks}
        indices = {row.custom_id: row.index for row in tasks}
        self._models = {
            indices[custom_id]: answer_model(response[:ANSWER_HEAD_CHARS])
            for custom_id, ok, _, response, _ in journal.queries.iter_result_texts()
            if ok and response
        }
        self._tools: dict[tuple[int, str], tuple[str | None, str | None]] = {}
        if content:  # what each tool call was given and answered
            for transcript in journal.history.iter_transcripts():
                index = indices[transcript["custom_id"]]
                for call in transcript["tool_calls"]:
                    self._tools[(index, call["id"])] = (call["arguments"], call["result"])

    def body(self, index: int) -> Mapping[str, Any] | None:
        return self._bodies.get(index)

    def response_model(self, index: int) -> str | None:
        return self._models.get(index)

    def tool_io(self, event: ToolCallEnded) -> tuple[str | None, str | None]:
        return self._tools.get((event.index, event.call_id), (None, None))
