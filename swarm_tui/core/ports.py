"""The ports between the parts: what each part asks of another, and nothing more.

* `JournalSink` — what the engine writes to (the run's `Journal`, or a Ray shard's forwarding
  sink): every state change and the events that report it, in one transaction.
* `Engine` — what the front ends drive (`SwarmEngine` in one process, `RayEngine` over Ray
  actors), with the capabilities it declares: the CLI refuses a run that needs one the chosen
  engine lacks (exit 2, naming it), instead of silently dropping it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol

from .events import Attempt, EngineEvent, RunFinished, TaskState
from .task import Task


class JournalSink(Protocol):
    """The part of `Journal` the engine writes to. `logged`: the events reporting the change,
    for the journal's event log (written in the same transaction)."""

    def record_attempt(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_retry(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_success(
        self, attempt: Attempt, response: Any, logged: Iterable[EngineEvent] = ()
    ) -> None: ...
    def record_failure(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_cancelled(
        self, indices: Iterable[int], attempts: Iterable[Attempt] = (), logged: Iterable[EngineEvent] = ()
    ) -> None: ...
    def requeue(self, indices: Iterable[int], logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_step(self, attempt: Attempt, body: dict[str, Any], logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_tool_call(
        self,
        index: int,
        step: int,
        call: dict[str, Any],
        result: str,
        ok: bool,
        latency_ms: float,
        body: dict[str, Any],
        logged: Iterable[EngineEvent] = (),
    ) -> None: ...
    def add_tasks(self, tasks: Iterable[Task], logged: Iterable[EngineEvent] = ()) -> None: ...
    def log(self, events: Iterable[EngineEvent]) -> None: ...
    def log_event(self, kind: str, data: dict[str, Any] | None = None) -> None: ...


class Capability(StrEnum):
    """What an engine can do beyond running one call per task."""

    TOOLS = "multi-step agents with tools"
    BATCH = "the batch lane (--lane batch|auto)"
    JUDGE = "the judge (--judge)"
    CANCEL = "cancelling one agent (x)"
    FAIL_OVER = "failing over on the judge's word"
    LEAVE_BATCHES = "leaving provider batches open on quit"


class Engine(Protocol):
    """What the front ends drive, whichever engine runs the swarm."""

    capabilities: frozenset[Capability]
    tasks: Mapping[int, Task]

    @property
    def states(self) -> Mapping[int, TaskState]: ...
    @property
    def running(self) -> bool: ...
    @property
    def paused(self) -> bool: ...

    def subscribe(self, listener: Callable[[EngineEvent], None]) -> None: ...
    async def run(self) -> RunFinished: ...
    def outcome(self) -> RunFinished: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def set_concurrency(self, limit: int, reason: str = "user") -> int: ...
    def abort(self, reason: str = "aborted by user") -> None: ...
    def stop_dispatch(self, reason: str) -> None: ...
    def retry_failed(self, indices: Iterable[int] | None = None) -> list[int]: ...
    def add_tasks(self, tasks: Sequence[Task]) -> list[int]: ...


def missing(engine_capabilities: Iterable[Capability], needed: Iterable[Capability]) -> list[Capability]:
    """The capabilities a run needs that an engine does not have, in a stable order."""
    have = set(engine_capabilities)
    return [capability for capability in Capability if capability in set(needed) and capability not in have]
