"""The ports at the bottom of the house: what the engine writes to, and what an engine can do.

* `JournalSink` — the writes the engine makes: every state change and the events that report it,
  in one transaction.
* The journal's optional abilities, each a protocol of its own: `Transactional` (several writes
  in one transaction: the engine's group commit), `Ledgered` (what earlier sessions spent: the
  budget's starting point), `WriteFailureNotice` (the journal tells the engine a write failed, so
  it stops sending) and `BatchJournal` (the batch lane's rows). `RunJournal` has them all: an
  engine is given one. The run's journal (`journal.records`) is one; a Ray shard's forwarding
  journal (`distributed.sink`) is one whose abilities are no-ops (its driver has the real ones).
  So nothing asks a journal whether it can do something: it can.
* `Capability` — what an engine can do beyond one call per task: the CLI refuses a run that needs
  one the chosen engine lacks (exit 2, naming it), instead of silently dropping it.

The ports that name the engine's own types (the `Engine` the front ends drive, the `LaneHost` a
lane drives, a `Lane`, the autopilot's `Planner`) are the engine's: `engine.ports`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from enum import StrEnum
from typing import Protocol

from swarm_tui.core.batches import BatchLines, BatchRow
from swarm_tui.core.errors import JournalWriteError
from swarm_tui.core.events import Attempt, EngineEvent
from swarm_tui.core.task import JSONObject, Task

ToolResult = tuple[JSONObject, str, bool, float]
"""(the tool call as the model asked for it, its result, ok, latency in ms): one of a step's results."""


class JournalSink(Protocol):
    """The writes the engine makes. `logged`: the events reporting the change, for the journal's
    event log (written in the same transaction)."""

    def record_attempt(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_retry(
        self, attempt: Attempt, logged: Iterable[EngineEvent] = (), body: JSONObject | None = None
    ) -> None:
        """A failed attempt tried again; `body`: the request the next attempt sends, when it changed
        (an answer asked for again: the conversation so far)."""

    def record_success(
        self,
        attempt: Attempt,
        response: JSONObject | bytes,
        logged: Iterable[EngineEvent] = (),
        parsed: str | None = None,
    ) -> None:
        """A task's answer: the bytes received (kept as they came) or a body; `parsed`: its JSON
        value as the job's checks read it (compact JSON text), None when none read JSON."""

    def record_failure(
        self, attempt: Attempt, logged: Iterable[EngineEvent] = (), body: JSONObject | None = None
    ) -> None:
        """A task's end; `body`: what a retry of it sends, when it changed (an answer that failed its
        checks: the conversation with it and its error)."""

    def record_cancelled(
        self, indices: Iterable[int], attempts: Iterable[Attempt] = (), logged: Iterable[EngineEvent] = ()
    ) -> None: ...
    def requeue(self, indices: Iterable[int], logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_step(self, attempt: Attempt, body: JSONObject, logged: Iterable[EngineEvent] = ()) -> None: ...
    def record_tool_calls(
        self,
        index: int,
        step: int,
        results: Sequence[ToolResult],
        body: JSONObject,
        logged: Iterable[EngineEvent] = (),
    ) -> None:
        """A step's tool results and the transcript that carries them all."""

    def add_tasks(self, tasks: Iterable[Task], logged: Iterable[EngineEvent] = ()) -> None: ...
    def log(self, events: Iterable[EngineEvent]) -> None:
        """Events that report no write of their own."""

    def log_event(self, kind: str, data: JSONObject | None = None) -> None:
        """A note that changes no task (a trimmed request, a lane's note)."""


class Transactional(Protocol):
    def transaction(self) -> AbstractContextManager[None]:
        """Several writes in one transaction (the engine's group commit): all of them or none."""


class Ledgered(Protocol):
    def spent_usd(self) -> float:
        """What every attempt journaled so far cost (all sessions): the budget's starting point."""


class WriteFailureNotice(Protocol):
    def on_write_failure(self, listener: Callable[[JournalWriteError], None]) -> None:
        """Call `listener` once, at the first write that fails (the engine stops sending there)."""


class BatchJournal(Protocol):
    """The batch lane's rows: a batch's intent before the provider is asked, then its id, its
    progress and its lines (each line's outcome and the batch closed, in one transaction)."""

    def open_batches(self) -> list[BatchRow]: ...
    def has_batches(self) -> bool: ...
    def batch_tried(self) -> set[int]: ...
    def record_batch_intent(self, endpoint: str, input_file_id: str, tasks: Sequence[tuple[int, int]]) -> BatchRow: ...
    def drop_batch(self, row: int, status: str) -> None: ...
    def record_batch_created(
        self, row: int, batch_id: str, status: str, logged: Iterable[EngineEvent] = ()
    ) -> None: ...
    def record_batch_progress(
        self, row: int, status: str, counts: dict[str, int], logged: Iterable[EngineEvent] = ()
    ) -> None: ...
    def record_batch_lines(
        self,
        row: int,
        status: str,
        files: tuple[str | None, str | None],
        lines: BatchLines,
        logged: Iterable[EngineEvent] = (),
    ) -> None: ...


class RunJournal(JournalSink, Transactional, Ledgered, WriteFailureNotice, BatchJournal, Protocol):
    """The journal an engine is given: the writes and every ability (see the module doc)."""


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
    HOLD_CALLS = "pausing with the calls in flight held (ctl pause --now)"
    SPAWN = "agents that spawn agents (an orchestrator: [orchestrator], --orchestrate)"
    ESCALATE = "escalating unusable answers to a stronger endpoint (--escalate)"


def missing(engine_capabilities: Iterable[Capability], needed: Iterable[Capability]) -> list[Capability]:
    """The capabilities a run needs that an engine does not have, in a stable order."""
    have = set(engine_capabilities)
    return [capability for capability in Capability if capability in set(needed) and capability not in have]
