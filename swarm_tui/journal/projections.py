"""The journal's tables as projections of its event log: what each event writes besides its row.

`RULES` maps an event type to the one function that writes what it says: a task's state and
attempt count, its attempts, its result, an agent's transcript and tool calls, added tasks, the
judge's verdicts, a batch's progress. `Journal.append` logs each event and applies its rule in
the same transaction, so the tables never say anything the log does not. Events with no rule
(a call started, a limit moved, a note) are only logged.

Task states move by the board's one transition rule (`core.board`): the state an event settles
its task in (`SETTLES`) and the states a task never leaves for it (`KEPT`) are written into the
SQL below once, at import, as the guard of each update. `RUNNING` is not kept on disk: a task is
running only while a process runs it, and a resumed run starts from the state it had before.

What the log does not hold travels on the events as payload fields (`core.events.payload`): an
answer's bytes, a transcript, a tool's result, added tasks' bodies, a batch's journal row. A rule
whose payload is missing raises ValueError: a caller that forgot it would lose what a resumed
run needs (the answer, the transcript), so it fails where the mistake is made, not later.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from swarm_tui.core.board import KEPT, SETTLES
from swarm_tui.core.call_errors import error_body
from swarm_tui.core.events import (
    AgentStepped,
    AnswerJudged,
    Attempt,
    AttemptEnded,
    BatchEnded,
    BatchProgress,
    BatchSubmitted,
    PhaseAttempt,
    TaskCancelled,
    TaskFailed,
    TaskQueued,
    TaskRetrying,
    TasksAdded,
    TaskState,
    TaskSucceeded,
    ToolCallEnded,
)
from swarm_tui.journal.connection import MaskedConnection
from swarm_tui.util.strict_json import strict_text

Rule = Callable[[MaskedConnection, Any, int, float], None]
"""(connection, event, session, now): the writes one event makes (in the caller's transaction)."""


def _kept(target: TaskState) -> str:
    """The SQL list of the states a task never leaves for `target` (the board's rule)."""
    return ", ".join(f"'{state.value}'" for state in sorted(KEPT[target]))


def _settle_sql(target: TaskState) -> str:
    """A task's new state from an attempt that decided it (its number taken: resume numbers on)."""
    return (
        f"UPDATE tasks SET state = '{target.value}', attempts = MAX(attempts, ?), updated_at = ? "
        f"WHERE idx = ? AND state NOT IN ({_kept(target)})"
    )


def _move_sql(target: TaskState) -> str:
    """A task's new state from an event that carries no attempt number."""
    return f"UPDATE tasks SET state = '{target.value}', updated_at = ? WHERE idx = ? AND state NOT IN ({_kept(target)})"


_SETTLE = {event_type: _settle_sql(SETTLES[event_type]) for event_type in (TaskSucceeded, TaskFailed, TaskRetrying)}
_CANCEL = _move_sql(SETTLES[TaskCancelled])
_QUEUE = _move_sql(SETTLES[TaskQueued])
_NUMBER_TAKEN = "UPDATE tasks SET attempts = MAX(attempts, ?) WHERE idx = ?"
_STEP_BODY = (  # a task running its tools: its transcript, unless it already succeeded (KEPT[RUNNING])
    "UPDATE tasks SET body = ?, attempts = MAX(attempts, ?), updated_at = ? "
    f"WHERE idx = ? AND state NOT IN ({_kept(TaskState.RUNNING)})"
)
_TOOL_BODY_ANY = "UPDATE tasks SET body = ?, updated_at = ? WHERE idx = ?"
_TOOL_BODY = f"UPDATE tasks SET body = ?, updated_at = ? WHERE idx = ? AND state NOT IN ({_kept(TaskState.RUNNING)})"
_ATTEMPT = (
    "INSERT INTO attempts (idx, number, session, endpoint, started_at, latency_ms, ttft_ms, outcome, "
    "retry_in_s, status, error_class, error_code, error_message, request_id, prompt_tokens, "
    "completion_tokens, cached_tokens, reasoning_tokens, cost_usd, estimated, finish_reason, saved_usd, "
    "tokens_per_s, gap_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_ANSWER = (  # a success already journaled stays as it is (the first answer paid for is the one kept)
    "INSERT INTO results (idx, ok, request_id, response, error, finished_at, parsed) VALUES (?, 1, ?, ?, NULL, ?, ?) "
    "ON CONFLICT (idx) DO UPDATE SET ok = 1, request_id = excluded.request_id, "
    "response = excluded.response, error = NULL, finished_at = excluded.finished_at, parsed = excluded.parsed "
    "WHERE results.ok = 0"
)
_ERROR = (  # a success already journaled is never turned into a failure
    "INSERT INTO results (idx, ok, request_id, response, error, finished_at) VALUES (?, 0, ?, NULL, ?, ?) "
    "ON CONFLICT (idx) DO UPDATE SET request_id = excluded.request_id, error = excluded.error, "
    "finished_at = excluded.finished_at WHERE results.ok = 0"
)
_FORGET_ERROR = "DELETE FROM results WHERE idx = ? AND ok = 0"
_TOOL_CALL = (
    "INSERT OR IGNORE INTO tool_calls (idx, step, call_id, name, arguments, result, ok, latency_ms, "
    "finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
TASK_ROW = "INSERT OR IGNORE INTO tasks (idx, custom_id, body, state, updated_at) VALUES (?, ?, ?, ?, ?)"
_SPAWNED_ROW = (
    "INSERT INTO tasks (idx, custom_id, body, state, updated_at, parent, depth, spawn) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
"""An agent's spawned task: a clash of its id is a bug (the spawn's ids are checked), never ignored."""
TASK_ROW_WITH_INPUT = "INSERT INTO tasks (idx, custom_id, body, state, updated_at, row) VALUES (?, ?, ?, ?, ?, ?)"
"""A new table job's task with its input row (`Journal.create`)."""
_JUDGMENT = "INSERT OR REPLACE INTO judgments (idx, score, reason, round, at) VALUES (?, ?, ?, ?, ?)"
_BATCH_CREATED = "UPDATE batches SET batch_id = ?, status = ? WHERE id = ?"
_BATCH_POLLED = "UPDATE batches SET status = ?, counts = ? WHERE id = ?"
_BATCH_CLOSED = "UPDATE batches SET status = ?, ended_at = ?, output_file_id = ?, error_file_id = ? WHERE id = ?"


def attempt_row(a: Attempt, session: int) -> tuple[Any, ...]:
    error, usage = a.error, a.usage
    return (
        a.index,
        a.number,
        session,
        a.endpoint,
        a.started_at,
        a.latency_ms,
        a.ttft_ms,
        a.outcome,
        a.retry_in_s,
        a.status,
        error.kind if error else None,
        error.code if error else None,
        error.message if error else None,
        a.request_id,
        usage.prompt,
        usage.completion,
        usage.cached,
        usage.reasoning,
        a.cost_usd,
        a.estimated,
        a.finish_reason,
        a.saved_usd,
        a.tokens_per_s,
        a.gap_ms,
    )


def answer_text(response: dict[str, Any] | bytes) -> str:
    """An answer as the journal keeps it: strict one-line JSON in UTF-8 (`strict_json`): the bytes
    a client checked when they came, or a body (a batch line's) encoded under the same rules."""
    if isinstance(response, bytes | bytearray):
        try:
            return response.decode("utf-8")
        except UnicodeDecodeError:
            return strict_text(json.loads(response))
    return strict_text(response)


def _missing(event: object, name: str) -> ValueError:
    return ValueError(f"{type(event).__name__} needs its {name!r} payload to be journaled")


# --------------------------------------------------------------------------- the rules


def _succeeded(db: MaskedConnection, event: TaskSucceeded, session: int, now: float) -> None:
    if event.response is None:
        raise _missing(event, "response")
    a = event.attempt
    db.execute(_ATTEMPT, attempt_row(a, session))
    db.execute(_SETTLE[TaskSucceeded], (a.number, now, a.index))
    db.execute(_ANSWER, (a.index, a.request_id, answer_text(event.response), now, event.parsed))


def _failed(db: MaskedConnection, event: TaskFailed, session: int, now: float) -> None:
    a = event.attempt
    if a.error is None:
        raise _missing(event, "attempt.error")
    db.execute(_ATTEMPT, attempt_row(a, session))
    db.execute(_SETTLE[TaskFailed], (a.number, now, a.index))
    db.execute(_ERROR, (a.index, a.request_id, json.dumps(error_body(a.error), ensure_ascii=False), now))
    if event.body is not None:  # what a retry sends: the answer and why it failed its checks
        db.execute(_TOOL_BODY_ANY, (json.dumps(event.body, ensure_ascii=False), now, a.index))


def _retrying(db: MaskedConnection, event: TaskRetrying, session: int, now: float) -> None:
    """A failed attempt to be tried again; with a `body`, the request the next one sends (an answer
    asked for again: the conversation so far, which a resumed run goes on from)."""
    a = event.attempt
    db.execute(_ATTEMPT, attempt_row(a, session))
    db.execute(_SETTLE[TaskRetrying], (a.number, now, a.index))
    if event.body is not None:
        db.execute(_TOOL_BODY, (json.dumps(event.body, ensure_ascii=False), now, a.index))


def _attempt_ended(db: MaskedConnection, event: AttemptEnded, session: int, now: float) -> None:
    """An attempt that decides nothing (a hedged pair's other call): its number is taken all the same."""
    a = event.attempt
    db.execute(_ATTEMPT, attempt_row(a, session))
    db.execute(_NUMBER_TAKEN, (a.number, a.index))


def _phase_attempt(db: MaskedConnection, event: PhaseAttempt, session: int, now: float) -> None:
    """A call outside the grid (planner, warm-up, aggregator, judge): billed, so journaled."""
    db.execute(_ATTEMPT, attempt_row(event.attempt, session))


def _cancelled(db: MaskedConnection, event: TaskCancelled, session: int, now: float) -> None:
    """A task stopped before it finished: unfinished on disk, so `resume` sends it (its call in
    flight, if any, journaled as cancelled: it may be billed, and its number is taken)."""
    a = event.attempt
    if a is not None:
        db.execute(_ATTEMPT, attempt_row(a, session))
        db.execute(_NUMBER_TAKEN, (a.number, a.index))
    db.execute(_CANCEL, (now, event.index))


def _queued(db: MaskedConnection, event: TaskQueued, session: int, now: float) -> None:
    """A task back in the queue: a failure of it leaves errors.jsonl until it finishes anew."""
    db.execute(_QUEUE, (now, event.index))
    db.execute(_FORGET_ERROR, (event.index,))


def _stepped(db: MaskedConnection, event: AgentStepped, session: int, now: float) -> None:
    """A multi-step agent's model call asked for tools: the call, and the transcript that now holds
    its answer (a resumed run continues from it and never sends that call again)."""
    if event.body is None:
        raise _missing(event, "body")
    a = event.attempt
    db.execute(_ATTEMPT, attempt_row(a, session))
    db.execute(_STEP_BODY, (json.dumps(event.body, ensure_ascii=False), a.number, now, a.index))


def _tool_call_ended(db: MaskedConnection, event: ToolCallEnded, session: int, now: float) -> None:
    """A tool call's result (never run again), and the transcript that now carries it: a step's
    results are written together, the transcript once, on the last of them (the others carry
    none). A result without its text could not be sent to the model again: refused."""
    if event.result is None:
        raise _missing(event, "result")
    db.execute(
        _TOOL_CALL,
        (event.index, event.step, event.call_id, event.name, event.arguments, event.result, event.ok,
         event.latency_ms, now),
    )  # fmt: skip
    if event.body is not None:
        db.execute(_TOOL_BODY, (json.dumps(event.body, ensure_ascii=False), now, event.index))


def _tasks_added(db: MaskedConnection, event: TasksAdded, session: int, now: float) -> None:
    """New tasks, queued; an agent's spawn with their ancestry (its parent, their depth, the call
    that spawned them: what makes the spawn happen once, whatever is run again)."""
    if len(event.tasks) != len(event.indices):
        raise _missing(event, "tasks")
    spawn = event.spawn
    if spawn is None:
        db.executemany(
            TASK_ROW,
            (
                (t.index, t.custom_id, json.dumps(t.body, ensure_ascii=False), TaskState.QUEUED, now)
                for t in event.tasks
            ),
        )
        return
    called = json.dumps(dataclasses.asdict(spawn), separators=(",", ":"))
    db.executemany(
        _SPAWNED_ROW,
        (
            (t.index, t.custom_id, json.dumps(t.body, ensure_ascii=False), TaskState.QUEUED, now, spawn.parent,
             spawn.depth, called)
            for t in event.tasks
        ),
    )  # fmt: skip


def _judged(db: MaskedConnection, event: AnswerJudged, session: int, now: float) -> None:
    """A judged answer (a resumed run never judges it again)."""
    db.execute(_JUDGMENT, (event.index, event.score, event.reason, event.round, now))


def _batch_submitted(db: MaskedConnection, event: BatchSubmitted, session: int, now: float) -> None:
    if event.row is None:
        raise _missing(event, "row")
    db.execute(_BATCH_CREATED, (event.batch_id, event.status, event.row))


def _batch_progress(db: MaskedConnection, event: BatchProgress, session: int, now: float) -> None:
    if event.row is None:
        raise _missing(event, "row")
    db.execute(_BATCH_POLLED, (event.status, json.dumps(event.counts or {}), event.row))


def _batch_ended(db: MaskedConnection, event: BatchEnded, session: int, now: float) -> None:
    """A finished batch closed (its lines are the events logged with it, in the same transaction:
    a process killed while writing them leaves the batch open, and the next session reads it again)."""
    if event.row is None:
        raise _missing(event, "row")
    db.execute(_BATCH_CLOSED, (event.status, now, *event.files, event.row))


RULES: dict[type, Rule] = {
    TaskSucceeded: _succeeded,
    TaskFailed: _failed,
    TaskRetrying: _retrying,
    AttemptEnded: _attempt_ended,
    PhaseAttempt: _phase_attempt,
    TaskCancelled: _cancelled,
    TaskQueued: _queued,
    AgentStepped: _stepped,
    ToolCallEnded: _tool_call_ended,
    TasksAdded: _tasks_added,
    AnswerJudged: _judged,
    BatchSubmitted: _batch_submitted,
    BatchProgress: _batch_progress,
    BatchEnded: _batch_ended,
}
"""Event type -> what it writes besides its log row (looked up once per event)."""
