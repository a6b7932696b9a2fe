"""What a shard's engine writes instead of SQLite: an outbox the driver replays into the journal.

The engine only ever calls the `JournalSink` methods (`core.ports`) on its journal. On a Ray actor they
go, in order and interleaved with the engine's events, into one outbox; the actor streams the
outbox to the driver in batches, and the driver applies each record to the real `Journal`
before it lets its listeners hear the events that followed it. So the rule of the
single-process engine holds across machines: whatever the screen shows as done is on disk, and
a result counts only once the driver has committed it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from swarm_tui.core.events import Attempt, EngineEvent
from swarm_tui.core.task import Task

JOURNAL = "j"
EVENT = "e"


class Outbox:
    """Journal records and engine events, in the order the engine produced them."""

    def __init__(self) -> None:
        self.items: list[tuple] = []
        self.ready = asyncio.Event()

    def put(self, item: tuple) -> None:
        self.items.append(item)
        self.ready.set()

    def event(self, event: EngineEvent) -> None:
        self.put((EVENT, event))

    def drain(self) -> list[tuple]:
        items, self.items = self.items, []
        self.ready.clear()
        return items


class ForwardingJournal:
    """A `JournalSink` that forwards every write to the driver through an `Outbox`."""

    session = 0

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox

    def _put(self, method: str, *args: Any) -> None:
        self._outbox.put((JOURNAL, method, args))

    # The events of a shard are not logged here: the driver logs each one it relays (it merges
    # the shards' limits and drops their run events), after applying the record before it.

    def record_attempt(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None:
        self._put("record_attempt", attempt)

    def record_retry(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None:
        self._put("record_retry", attempt)

    def record_success(self, attempt: Attempt, response: dict[str, Any], logged: Iterable[EngineEvent] = ()) -> None:
        self._put("record_success", attempt, response)

    def record_failure(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None:
        self._put("record_failure", attempt)

    def record_cancelled(
        self, indices: Iterable[int], attempts: Iterable[Attempt] = (), logged: Iterable[EngineEvent] = ()
    ) -> None:
        self._put("record_cancelled", list(indices), list(attempts))

    def requeue(self, indices: Iterable[int], logged: Iterable[EngineEvent] = ()) -> None:
        self._put("requeue", list(indices))

    def add_tasks(self, tasks: Iterable[Task], logged: Iterable[EngineEvent] = ()) -> None:
        pass  # the driver journals tasks before it hands them out

    def record_step(self, attempt: Attempt, body: dict[str, Any], logged: Iterable[EngineEvent] = ()) -> None:
        self._put("record_step", attempt, body)

    def record_tool_calls(
        self,
        index: int,
        step: int,
        results: Sequence[tuple[dict[str, Any], str, bool, float]],
        body: dict[str, Any],
        logged: Iterable[EngineEvent] = (),
    ) -> None:
        self._put("record_tool_calls", index, step, list(results), body)

    def log(self, events: Iterable[EngineEvent]) -> None:
        pass

    def log_event(self, kind: str, data: dict[str, Any] | None = None) -> None:
        self._put("log_event", kind, data)
