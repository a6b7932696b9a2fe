"""The journal as the engine sees it (`JournalRecords`, a `core.ports.RunJournal`): the `record_*`
writes, thin wrappers over the one write path, and the few reads the engine's lanes need (what
was spent, the open batches). The engine, the batch lane and the Ray driver's replay of a
shard's records write through it; a Ray shard has a forwarding stand-in (`distributed.sink`).

Each logs the events it is given (`logged`, as before) and applies the projection of the event
its arguments stand for (`journal.projections`: the same rules `append` applies), in one
transaction. So `record_success(attempt, answer, logged)` writes what
`append([TaskSucceeded(attempt, content, response=answer)])` writes, and logs `logged`.
A caller that switches to `append` passes the reporting events with their payloads instead
(see each method); once none is left, this module goes.

Two writes here report no event: a batch's intent (written before the provider is asked, so
that a process killed in between finds its batch) and a batch dropped before it was created.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from swarm_tui.core.batches import BatchLines, BatchRow
from swarm_tui.core.errors import JournalWriteError
from swarm_tui.core.events import (
    AgentStepped,
    AnswerJudged,
    Attempt,
    AttemptEnded,
    BatchEnded,
    BatchProgress,
    BatchSubmitted,
    EngineEvent,
    TaskCancelled,
    TaskFailed,
    TaskQueued,
    TaskRetrying,
    TasksAdded,
    TaskState,
    TaskSucceeded,
    ToolCallEnded,
)
from swarm_tui.core.task import Task
from swarm_tui.journal.history import JournalHistory
from swarm_tui.journal.note_kinds import note_event
from swarm_tui.journal.queries import JournalQueries
from swarm_tui.journal.writer import JournalWriter
from swarm_tui.util.clock import run_time

ToolResult = tuple[dict[str, Any], str, bool, float]
"""(the tool call as the model asked it, its result, ok, latency in ms): one row of a step's results."""


class JournalRecords:
    """`record_*`, `requeue`, `add_tasks`, `log_event` and the batch lane's writes (see the module)."""

    def __init__(self, writer: JournalWriter, queries: JournalQueries, history: JournalHistory) -> None:
        self._writer = writer
        self._queries = queries
        self._history = history

    def _record(self, logged: Iterable[EngineEvent], *projected: EngineEvent) -> None:
        with self._writer.writing():
            self._writer.write(logged, projected)

    # ----------------------------------------------------------------- the engine's abilities

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Several writes in one transaction (the engine's group commit): all of them or none."""
        with self._writer.transaction():
            yield

    def on_write_failure(self, listener: Callable[[JournalWriteError], None]) -> None:
        """Call `listener` once, at the first write that fails (the engine stops dispatch there)."""
        self._writer.on_write_failure(listener)

    def spent_usd(self) -> float:
        """What every attempt journaled so far cost (all sessions): the budget's starting point."""
        return self._queries.spent_usd()

    def log(self, events: Iterable[EngineEvent]) -> None:
        """Events that report no write of their own, logged (`JournalWriter.log`)."""
        self._writer.log(events)

    def record_attempt(self, attempt: Attempt, logged: Iterable[EngineEvent] = ()) -> None:
        """An attempt that changes no task state (a hedged pair's loser, a phase's call):
        `AttemptEnded(attempt)` (or `PhaseAttempt(phase, attempt)`)."""
        self._record(logged, AttemptEnded(attempt))

    def record_retry(
        self, attempt: Attempt, logged: Iterable[EngineEvent] = (), body: dict[str, Any] | None = None
    ) -> None:
        """`TaskRetrying(attempt, delay_s, body=body)` (`body`: the request the next attempt sends)."""
        self._record(logged, TaskRetrying(attempt, attempt.retry_in_s or 0.0, body=body))

    def record_success(
        self,
        attempt: Attempt,
        response: dict[str, Any] | bytes,
        logged: Iterable[EngineEvent] = (),
        parsed: str | None = None,
    ) -> None:
        """A task's answer, `response` as the bytes received (kept as they came) or as a body, and
        its JSON value as the checks read it: `TaskSucceeded(attempt, content, response=response,
        parsed=parsed)`."""
        self._record(logged, TaskSucceeded(attempt, "", response=response, parsed=parsed))

    def record_failure(
        self, attempt: Attempt, logged: Iterable[EngineEvent] = (), body: dict[str, Any] | None = None
    ) -> None:
        """`TaskFailed(attempt, body=body)` (its attempt carries the error; `body`: what a retry sends)."""
        self._record(logged, TaskFailed(attempt, body=body))

    def record_cancelled(
        self, indices: Iterable[int], attempts: Iterable[Attempt] = (), logged: Iterable[EngineEvent] = ()
    ) -> None:
        """Tasks stopped before they finished: they stay unfinished, so `resume` sends them.
        `TaskCancelled(index, attempt)` for each, a second call of the same task as its own
        `TaskCancelled` (or `AttemptEnded`)."""
        stopped = set(indices)
        events: list[TaskCancelled | AttemptEnded] = [
            TaskCancelled(a.index, a) if a.index in stopped else AttemptEnded(a) for a in attempts
        ]
        covered = {event.index for event in events}
        events.extend(TaskCancelled(i) for i in sorted(stopped - covered))
        self._record(logged, *events)

    def requeue(self, indices: Iterable[int], logged: Iterable[EngineEvent] = ()) -> None:
        """Failed tasks asked to run again: `TaskQueued(index, previous)` for each."""
        self._record(logged, *(TaskQueued(i, TaskState.FAILED) for i in indices))

    def add_tasks(self, tasks: Iterable[Task], logged: Iterable[EngineEvent] = ()) -> None:
        """`TasksAdded(indices, total, tasks=tasks)`, with the ancestry of the `TasksAdded` logged
        for them (an agent's spawn: its parent, their depth, the call that spawned them)."""
        tasks = tuple(tasks)
        logged = list(logged)
        indices = tuple(t.index for t in tasks)
        spawn = next((e.spawn for e in logged if isinstance(e, TasksAdded) and e.indices == indices), None)
        self._record(logged, TasksAdded(indices, 0, tasks=tasks, spawn=spawn))

    def record_step(self, attempt: Attempt, body: dict[str, Any], logged: Iterable[EngineEvent] = ()) -> None:
        """A multi-step agent's model call asked for tools: `AgentStepped(attempt, step, tools, body=body)`."""
        self._record(logged, AgentStepped(attempt, 0, (), body=body))

    def record_tool_calls(
        self,
        index: int,
        step: int,
        results: Sequence[ToolResult],
        body: dict[str, Any],
        logged: Iterable[EngineEvent] = (),
    ) -> None:
        """A step's tool calls, each with its result, and the transcript that now carries them all
        (written once): `ToolCallEnded(index, step, call_id, name, ok, latency_ms, arguments=...,
        result=...)` for each, the last with `body=body`."""
        ended = []
        for position, (call, result, ok, latency_ms) in enumerate(results, 1):
            function = call.get("function") or {}
            ended.append(
                ToolCallEnded(
                    index,
                    step,
                    call.get("id") or "",
                    function.get("name", ""),
                    ok,
                    latency_ms,
                    arguments=function.get("arguments"),
                    result=result,
                    body=body if position == len(results) else None,
                )
            )
        self._record(logged, *ended)

    def record_judgment(
        self, index: int, score: float, reason: str, round_number: int, logged: Iterable[EngineEvent] = ()
    ) -> None:
        """A judged answer: `AnswerJudged(index, score, reason, round)`."""
        self._record(logged, AnswerJudged(index, score, reason, round_number))

    def log_event(self, kind: str, data: dict[str, Any] | None = None) -> None:
        """A note by its old name ("trimmed", "batch_refused"...): logged as its typed event
        (`journal.note_kinds`; "failover" and "quality_drift" write nothing: the `EndpointSwitched`
        and `QualityDrift` logged with them say it)."""
        event = note_event(kind, data or {})
        if event is not None:
            self._writer.append([event])

    # ----------------------------------------------------------------- the batch lane

    def open_batches(self) -> list[BatchRow]:
        """Batches submitted (or about to be) whose lines are not journaled yet."""
        return self._history.open_batches()

    def has_batches(self) -> bool:
        """The run has submitted (or was about to submit) a batch."""
        return self._history.has_batches()

    def batch_tried(self) -> set[int]:
        """Tasks that already had a batch line: a retry of theirs goes live (`--lane auto`)."""
        return self._history.batch_tried()

    def record_batch_intent(self, endpoint: str, input_file_id: str, tasks: Sequence[tuple[int, int]]) -> BatchRow:
        """An uploaded Batch input file about to become a batch: (task index, attempt number) of
        each line. Written before the batch is created, so that a process killed in between
        finds its batch (by this file id) instead of submitting the same tasks again."""
        now = run_time()
        with self._writer.writing():
            db = self._writer.db
            cursor = db.execute(
                "INSERT INTO batches (endpoint, input_file_id, status, tasks, submitted_at) VALUES (?, ?, ?, ?, ?)",
                (endpoint, input_file_id, "uploaded", json.dumps(list(tasks)), now),
            )
            db.executemany(  # the numbers are taken: a later attempt numbers on from them
                "UPDATE tasks SET attempts = MAX(attempts, ?) WHERE idx = ?", ((n, i) for i, n in tasks)
            )
        assert cursor.lastrowid is not None
        return BatchRow(cursor.lastrowid, endpoint, input_file_id, None, "uploaded", list(tasks), now)

    def drop_batch(self, row: int, status: str) -> None:
        """A batch that was never created (or cannot be found): its tasks are free again."""
        with self._writer.writing():
            self._writer.db.execute(
                "UPDATE batches SET status = ?, ended_at = ? WHERE id = ?", (status, run_time(), row)
            )

    def record_batch_created(self, row: int, batch_id: str, status: str, logged: Iterable[EngineEvent] = ()) -> None:
        """`BatchSubmitted(batch_id, endpoint, indices, numbers, ..., row=row, status=status)`."""
        self._record(logged, BatchSubmitted(batch_id, "", (), (), row=row, status=status))

    def record_batch_progress(
        self, row: int, status: str, counts: dict[str, int], logged: Iterable[EngineEvent] = ()
    ) -> None:
        """`BatchProgress(batch_id, status, completed, failed, total, ..., row=row, counts=counts)`."""
        self._record(logged, BatchProgress("", status, 0, 0, 0, row=row, counts=counts))

    def record_batch_lines(
        self,
        row: int,
        status: str,
        files: tuple[str | None, str | None],
        lines: BatchLines,
        logged: Iterable[EngineEvent] = (),
    ) -> None:
        """A finished batch's every line, and the batch closed, in one transaction: each line's
        `TaskSucceeded` (with its `response`), `TaskFailed`, `TaskRetrying` or `TaskCancelled`, then
        `BatchEnded(..., row=row, files=files)`."""
        events: list[EngineEvent] = [
            TaskSucceeded(a, "", response=response, parsed=lines.parsed.get(a.index)) for a, response in lines.succeeded
        ]
        events += [TaskFailed(a) for a in lines.failed]
        events += [TaskRetrying(a, a.retry_in_s or 0.0, body=lines.bodies.get(a.index)) for a in lines.retried]
        events += [TaskCancelled(a.index, a) for a in lines.unfinished]
        events.append(BatchEnded("", status, 0, 0, 0, row=row, files=files))
        self._record(logged, *events)
