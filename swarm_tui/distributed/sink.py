"""What a shard's engine writes instead of SQLite: an outbox the driver replays into the journal.

The engine writes to a `core.ports.RunJournal`. On a Ray actor its writes go, in order and
interleaved with the engine's events, into one outbox; the actor streams the outbox to the driver
in batches, and the driver applies each record to the real journal before it lets its listeners
hear the events that followed it. So the rule of the single-process engine holds across
machines: whatever the screen shows as done is on disk, and a result counts only once the driver
has committed it.

The journal's abilities are the driver's here, so the forwarding journal's are no-ops: a
"transaction" groups nothing the driver would not apply in order anyway, nothing was spent before
(the shard's budget is its allowance), a forwarded write never fails, and a shard has no batches
(the driver owns a distributed run's batch lane: a batch write here is a bug, said so).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager

from swarm_tui.core.batches import BatchLines, BatchRow
from swarm_tui.core.errors import JournalWriteError
from swarm_tui.core.events import Attempt, EngineEvent
from swarm_tui.core.ports import ToolResult
from swarm_tui.core.task import JSONObject, Task

JOURNAL = "j"
EVENT = "e"


class Outbox:
    """Journal records and engine events, in the order the engine produced them."""

    def __init__(self) -> None:
        self.items: list[tuple[object, ...]] = []
        self.ready = asyncio.Event()

    def put(self, item: tuple[object, ...]) -> None:
        self.items.append(item)
        self.ready.set()

    def event(self, event: EngineEvent) -> None:
        self.put((EVENT, event))

    def drain(self) -> list[tuple[object, ...]]:
        items, self.items = self.items, []
        self.ready.clear()
        return items


class ForwardingJournal:
    """A `RunJournal` that forwards every write to the driver through an `Outbox`."""

    session = 0

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox

    def _put(self, method: str, *args: object) -> None:
        self._outbox.put((JOURNAL, method, args))

    # The events of a shard are not logged here: the driver logs each one it relays (it merges
    # the shards' limits and drops their run events), after applying the record before it.

    def record_attempt(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None:
        self._put("record_attempt", attempt)

    def record_retry(
        self, attempt: Attempt, logged: Iterable[EngineEvent] = (), body: JSONObject | None = None
    ) -> None:
        self._put("record_retry", attempt, body)

    def record_success(
        self,
        attempt: Attempt,
        response: JSONObject | bytes,
        logged: Iterable[EngineEvent] = (),
        parsed: str | None = None,
    ) -> None:
        self._put("record_success", attempt, response, parsed)

    def record_failure(
        self, attempt: Attempt, logged: Iterable[EngineEvent] = (), body: JSONObject | None = None
    ) -> None:
        self._put("record_failure", attempt, body)

    def record_cancelled(
        self, indices: Iterable[int], attempts: Iterable[Attempt] = (), logged: Iterable[EngineEvent] = ()
    ) -> None:
        self._put("record_cancelled", list(indices), list(attempts))

    def requeue(self, indices: Iterable[int], logged: Iterable[EngineEvent] = ()) -> None:
        self._put("requeue", list(indices))

    def add_tasks(self, tasks: Iterable[Task], logged: Iterable[EngineEvent] = ()) -> None:
        pass  # the driver journals tasks before it hands them out

    def record_step(self, attempt: Attempt, body: JSONObject, logged: Iterable[EngineEvent] = ()) -> None:
        self._put("record_step", attempt, body)

    def record_tool_calls(
        self,
        index: int,
        step: int,
        results: Sequence[ToolResult],
        body: JSONObject,
        logged: Iterable[EngineEvent] = (),
    ) -> None:
        self._put("record_tool_calls", index, step, list(results), body)

    def log(self, events: Iterable[EngineEvent]) -> None:
        pass

    def log_event(self, kind: str, data: JSONObject | None = None) -> None:
        self._put("log_event", kind, data)

    # ----------------------------------------------------------------- the abilities: the driver's

    def transaction(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    def spent_usd(self) -> float:
        return 0.0

    def on_write_failure(self, listener: Callable[[JournalWriteError], None]) -> None:
        pass  # a forwarded write does not fail here; the driver's journal stops the run

    def open_batches(self) -> list[BatchRow]:
        return []

    def has_batches(self) -> bool:
        return False

    def batch_tried(self) -> set[int]:
        return set()

    def record_batch_intent(self, endpoint: str, input_file_id: str, tasks: Sequence[tuple[int, int]]) -> BatchRow:
        raise _no_batches()

    def drop_batch(self, row: int, status: str) -> None:
        raise _no_batches()

    def record_batch_created(self, row: int, batch_id: str, status: str, logged: Iterable[EngineEvent] = ()) -> None:
        raise _no_batches()

    def record_batch_progress(
        self, row: int, status: str, counts: dict[str, int], logged: Iterable[EngineEvent] = ()
    ) -> None:
        raise _no_batches()

    def record_batch_lines(
        self,
        row: int,
        status: str,
        files: tuple[str | None, str | None],
        lines: BatchLines,
        logged: Iterable[EngineEvent] = (),
    ) -> None:
        raise _no_batches()


def _no_batches() -> RuntimeError:
    return RuntimeError("a shard's engine carries no batches: its driver does (a shard runs lane live)")
