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

from swarm_tui.core.batches import BatchRow
from swarm_tui.core.events import Attempt, EngineEvent, RunFinished, TaskState
from swarm_tui.core.task import Task


class JournalSink(Protocol):
    """The part of `Journal` the engine writes to. `logged`: the events reporting the change,
    for the journal's event log (written in the same transaction)."""

    def record_attempt(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_retry(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_success(self, attempt: Attempt, response: Any, logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_failure(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_cancelled(
        self, indices: Iterable[int], attempts: Iterable[Attempt] = (), logged: Iterable[EngineEvent] = ()
    ) -> None: ...
    def requeue(self, indices: Iterable[int], logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_step(self, attempt: Attempt, body: dict[str, Any], logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_tool_calls(
        self,
        index: int,
        step: int,
        results: Sequence[tuple[dict[str, Any], str, bool, float]],
        body: dict[str, Any],
        logged: Iterable[EngineEvent] = (),
    ) -> None:
        """A step's tool results, each (call, result, ok, latency ms), and the transcript that
        carries them all."""

    def add_tasks(self, tasks: Iterable[Task], logged: Iterable[EngineEvent] = ()) -> None: ...
    def log(self, events: Iterable[EngineEvent]) -> None: ...
    def log_event(self, kind: str, data: dict[str, Any] | None = None) -> None: ...


class LaneHost(Protocol):
    """What a lane may ask of the engine's kernel: the run's state, read; its steps, done through
    here (the kernel alone owns the queue, admission, the calls in flight and the steering)."""

    @property
    def tasks(self) -> Mapping[int, Task]: ...
    @property
    def states(self) -> Mapping[int, TaskState]: ...
    @property
    def settings(self) -> Any: ...
    @property
    def journal(self) -> Any:
        """The run's journal (a `JournalSink`, with the batch lane's own reads and writes)."""

    @property
    def ledger(self) -> Any:
        """The run's one spend ledger (`engine.ledger.SpendLedger`)."""

    @property
    def retry_policy(self) -> Any: ...

    @property
    def stopping(self) -> str | None:
        """Why the run is stopping, or None while it goes on."""

    def next_number(self, index: int) -> int:
        """The number of a new attempt of `index` (numbering goes on across sessions)."""

    def take_numbers(self, index: int, number: int) -> None:
        """Attempt `number` of `index` is taken (a line of a batch an earlier session submitted)."""

    def round_attempts(self, index: int) -> int:
        """Attempts of `index` in this round (its retries' budget)."""

    def count_attempt(self, index: int) -> None:
        """A new attempt of `index` in this round went out."""

    def give_back(self, indices: Iterable[int]) -> None:
        """Tasks the lane will not carry: back to the live queue (left unfinished by a stop)."""

    def retry_soon(self, index: int, delay_s: float = 0.0) -> None:
        """A task whose attempt failed and may be tried again: ahead of the live queue after `delay_s`."""

    def commit(
        self, write: Callable[..., None], *args: Any, events: Sequence[EngineEvent], quiet: bool = False
    ) -> None:
        """A journal write and the events that report it, in one transaction, then to the views
        (`quiet`: a journal that cannot be written has already stopped the run; the events go out)."""

    def commit_soon(self, write: Callable[..., None], *args: Any, events: Sequence[EngineEvent]) -> None:
        """Group commit: the write and its events go to disk with the next commit of this turn of
        the loop (one transaction for all of them), then out."""

    def emit(self, event: EngineEvent) -> None:
        """An event that reports no write of its own (on disk with the next commit, then out)."""

    def log(self, kind: str, data: dict[str, Any] | None = None) -> None:
        """A note in the journal that changes no task."""

    def stop_dispatch(self, reason: str) -> None: ...
    def check_failure_rate(self) -> None: ...
    def wake(self) -> None:
        """Something the dispatcher waits for may have changed."""


class Lane(Protocol):
    """A way of carrying tasks' attempts besides the live calls the kernel dispatches (the batch
    lane today). A lane claims its tasks out of the live queue when a run starts, carries them
    in its own loop, and reports each outcome through its `LaneHost`. Adding one is a module
    and a line in `engine/lanes.py`'s registry: the kernel is not edited."""

    name: str

    def claim(self, ready: Sequence[int]) -> list[int]:
        """Take this lane's tasks out of `ready` (the live queue, in order); return what stays live."""

    @property
    def waiting(self) -> Sequence[int]:
        """Tasks claimed and not carried yet."""

    async def run(self) -> None:
        """Carry the claimed tasks to their outcomes; return when the lane has nothing left."""

    def abort(self, *, leave_open: bool = False) -> None:
        """Stop carrying: cancel what is under way (unless `leave_open`: it runs on, a resume collects it)."""

    def wake(self) -> None:
        """The run is stopping: stop waiting."""


class Capability(StrEnum):
    """What an engine can do beyond running one call per task."""

    TOOLS = "multi-step agents with tools"
    BATCH = "the batch lane (--lane batch|auto)"
    JUDGE = "the judge (--judge)"
    CANCEL = "cancelling one agent (x)"
    FAIL_OVER = "failing over on the judge's word"
    LEAVE_BATCHES = "leaving provider batches open on quit"
    ROUTES = "a route over several endpoints (--provider a,b --route)"
    DEADLINE = "the deadline autopilot (--deadline)"


class Engine(Protocol):
    """What the front ends drive, whichever engine runs the swarm."""

    capabilities: frozenset[Capability]

    @property
    def tasks(self) -> Mapping[int, Task]: ...
    @property
    def client(self) -> Any:
        """The primary endpoint (`providers.client.ProviderClient`)."""

    @property
    def stats(self) -> Any:
        """The run's `RunStats`, fed by its events."""

    @property
    def admission(self) -> Any: ...
    @property
    def settings(self) -> Any: ...
    @property
    def tail(self) -> Any:
        """Its tail deadlines (`engine.deadlines.TailDeadlines`), or None where they live elsewhere."""

    @property
    def ledger(self) -> Any:
        """Its spend ledger, or None where the budget is split elsewhere."""

    @property
    def adaptive(self) -> Any: ...
    @property
    def fatal(self) -> str | None: ...
    @property
    def last_retry_after_asked_s(self) -> float | None: ...

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
    def abort(self, reason: str = "aborted by user", *, leave_batches: bool = False) -> None: ...
    def stop_dispatch(self, reason: str) -> None: ...
    def retry_failed(self, indices: Iterable[int] | None = None) -> list[int]: ...
    def cancel_tasks(self, indices: Iterable[int]) -> list[int]:
        """Stop these tasks now (`Capability.CANCEL`; an engine without it cancels nothing)."""

    def add_tasks(self, tasks: Sequence[Task]) -> list[int]: ...
    def announce_phase(self, phase: str, detail: str = "") -> None: ...
    async def call_direct(self, phase: str, index: int, body: dict[str, Any]) -> Any:
        """One call outside the task grid (a swarm's planner, warm-up, aggregator)."""

    async def aclose(self) -> None:
        """Let go of what the engine holds outside the process (a distributed engine's actors)."""


def missing(engine_capabilities: Iterable[Capability], needed: Iterable[Capability]) -> list[Capability]:
    """The capabilities a run needs that an engine does not have, in a stable order."""
    have = set(engine_capabilities)
    return [capability for capability in Capability if capability in set(needed) and capability not in have]


class Planner(Protocol):
    """A deadline run's autopilot, as the batch lane asks it (`autopilot.Autopilot`)."""

    poll_s: float

    def split(self, pending: Sequence[int]) -> tuple[list[int], list[int]]:
        """(the tasks for batches, those for the live lane), once the live share has answered."""

    def pull_back_due(self, row: BatchRow) -> bool:
        """The batch must be cancelled now and its unrun lines sent live."""

    def batch_ended(self, row: BatchRow, status: str) -> list[int]:
        """Tasks taken back from the live queue for the next batch."""
