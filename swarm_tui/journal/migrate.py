"""Journals of older schemas: brought to this one when resumed, or read as they are.

Schema 2 kept the run's notes (a failover, a trimmed request...) as untyped rows of an
`events` table; `migrate` turns them into the typed events they are now (`journal.note_kinds`),
appended to the log, and drops the table. Schema 1 had no event log at all: tasks, attempts and
a few run events. `JournalFollower` rebuilds the events the engine emitted by merging attempt
rows and run events by time, and by comparing task states; it serves two things only:
migrating such a journal when it is resumed (the rebuilt events, with its notes, become its
log, once), and attaching to one read-only. Journals of schema 2 and later are read through
their log (`swarm_tui.frontend.attached`).

What a schema-1 journal cannot say: which tasks are in flight right now (attempts are journaled
when they end). When the writer's heartbeat lists them (`heartbeat["in_flight"]`), the
follower shows them as running; otherwise they look queued until their attempt ends.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.events import (
    Attempt,
    AttemptEnded,
    AttemptStarted,
    ConcurrencyChanged,
    EngineEvent,
    PhaseAttempt,
    PhaseChanged,
    RateLimitsLearned,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopping,
    TaskCancelled,
    TaskFailed,
    TaskQueued,
    TaskRetrying,
    TaskState,
    TaskSucceeded,
)
from swarm_tui.core.usage import Usage
from swarm_tui.journal.note_kinds import old_note
from swarm_tui.journal.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from swarm_tui.journal.store import Journal

TASK_OUTCOMES = frozenset({"ok", "retry", "failed", "cancelled"})
"""Attempt outcomes that decide their task's state; others (a hedged pair's loser) do not."""
UNKNOWN_DELAY_S = math.nan
"""`TaskRetrying.delay_s` of a replayed retry from a journal written before `retry_in_s` existed."""


OLD_PHASE_INDICES = {-1: "plan", -3: "warm-up"}
"""The negative indices a schema-1 journal's swarm steps were journaled under (then as now
`swarm.planner.PLAN_INDEX` and `swarm.pipeline.WARMUP_INDEX`; the aggregator's were below):
history, so written here rather than imported from the swarm."""


def phase_of_index(index: int) -> str:
    """Which swarm step a negative index of a schema-1 journal belongs to."""
    return OLD_PHASE_INDICES.get(index, "aggregate")


Listener = Callable[[EngineEvent], None]


# --------------------------------------------------------------------------- rows -> events


_TimelineItem = tuple[float, int, dict[str, Any] | tuple[int, str, dict[str, Any] | None]]
"""(when, 0 for a run event / 1 for an attempt, the event (id, kind, data) or the attempt's row)."""


def attempt_from_row(row: Mapping[str, Any]) -> Attempt:
    """An `attempts` row of the journal as the engine's `Attempt` record."""
    error = None
    if row.get("error_class"):
        try:
            kind = ErrorClass(row["error_class"])
        except ValueError:
            kind = ErrorClass.UNEXPECTED
        error = CallError(
            kind,
            row.get("error_message") or "",
            row.get("status"),
            row.get("error_code"),
            request_id=row.get("request_id"),
        )
    usage = Usage(
        row.get("prompt_tokens") or 0,
        row.get("completion_tokens") or 0,
        row.get("cached_tokens") or 0,
        row.get("reasoning_tokens") or 0,
    )
    return Attempt(
        row["idx"],
        row["number"],
        row["endpoint"],
        row["started_at"],
        row["latency_ms"],
        row["outcome"],
        status=row.get("status"),
        error=error,
        request_id=row.get("request_id"),
        usage=usage,
        cost_usd=row.get("cost_usd"),
        ttft_ms=row.get("ttft_ms"),
        retry_in_s=row.get("retry_in_s"),
    )


class JournalFollower:
    """Turns a journal, as it grows, into engine events for its listeners.

    Each `poll()` reads the heartbeat, the new attempts and run events, then the task states.
    Attempts and run events are delivered in the order they happened; state changes that no
    attempt explains (a failed task requeued by a retry, waiting tasks cancelled by a stop)
    come from comparing the states, read last so that they are never older than the attempts.

    `timebase` maps an epoch timestamp to the listeners' clock: each replayed attempt is
    observed "at the time it ended", so rates computed over a recent window stay right.
    """

    def __init__(
        self,
        journal: Journal,
        indices: Iterable[int],
        *,
        provider: str = "",
        simulated: bool = False,
        timebase: Callable[[float], float] | None = None,
    ) -> None:
        self.journal = journal
        self.view: dict[int, TaskState] = {i: TaskState.QUEUED for i in indices}
        self.provider = provider
        self.simulated = simulated
        self.limit: int | None = None
        self.ceiling: int | None = None
        """The user's limit (the adaptive controller moves `limit` under it)."""
        self.rate_limits: tuple[int | None, int | None] = (None, None)
        self.paused = False
        self.stopped = False
        """A run ended (or is stopping) and no new one has started: waiting tasks were cancelled."""
        self.finished: RunFinished | None = None
        self.heartbeat: dict[str, Any] | None = None
        self.in_flight: set[int] | None = None
        """Indices the writer says are in flight, when its heartbeat says (else None: unknown)."""
        self.first_started: float | None = None
        self.last_ended: float | None = None
        self._listeners: list[Listener] = []
        self._last_attempt_id = 0
        self._last_event_id = 0
        self._announced = False
        self._timebase = timebase or (lambda epoch: epoch)
        self.now: float | None = None
        """While an event is delivered: its time on the listeners' clock (see `clock`)."""

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def clock(self) -> float:
        """The clock for a `RunStats` fed by this follower: event time during replay, else now."""
        return self.now if self.now is not None else self._timebase(time.time())

    # ----------------------------------------------------------------- polling

    def poll(self, target: Mapping[int, TaskState] | None = None, *, heartbeat_in_flight: bool = True) -> int:
        """Deliver what happened since the last poll; returns how many events were delivered.

        `target`: the task states to reconcile to (default: the journal's). A live engine
        resuming a run passes its own, where unfinished tasks are queued, not cancelled.
        """
        count = 0
        meta = self.journal.queries.meta() if target is None else {}
        self.heartbeat = meta.get("heartbeat")
        rows = self.journal.queries.attempts_since(self._last_attempt_id)
        logged = self.journal.history.old_events(self._last_event_id) if target is None else []
        states = dict(target) if target is not None else self.journal.queries.states()
        for i in states.keys() - self.view.keys():  # tasks that joined the run (a planner's sub-tasks)
            self.view[i] = TaskState.QUEUED
        if not self._announced and target is None:
            self._announced = True
            first = rows[0]["started_at"] if rows else time.time()
            plan = meta.get("plan") or {}
            settings = plan.get("settings") or {}
            limit = (settings.get("pacing") or settings).get("concurrency", 0)  # by concern, or flat (older runs)
            self.limit = self.ceiling = limit
            pending = sum(1 for s in states.values() if not s.is_final)
            count += self._deliver(RunStarted(len(self.view), pending, limit, self.provider, self.simulated), first)
        # Attempts and run events in the order they happened: a resume's `run` comes before its attempts.
        by_end = sorted(
            ((row["started_at"] + row["latency_ms"] / 1000.0, 1, row) for row in rows),
            key=lambda item: (item[0], item[2]["id"]),
        )
        ended: Iterable[_TimelineItem] = by_end
        timeline = heapq.merge(
            ended,
            ((at, 0, (event_id, kind, data)) for event_id, at, _, kind, data in logged),
            key=lambda item: (item[0], item[1]),
        )
        for at, _, item in timeline:
            if isinstance(item, dict):  # an attempt row (events are tuples)
                self._last_attempt_id = max(self._last_attempt_id, item["id"])
                count += self._attempt(attempt_from_row(item))
            else:
                event_id, kind, data = item
                self._last_event_id = max(self._last_event_id, event_id)
                count += self._logged(at, kind, data or {})
        count += self._reconcile(states)
        if heartbeat_in_flight:
            count += self._heartbeat_in_flight()
        return count

    def _deliver(self, event: EngineEvent, at: float | None = None) -> int:
        self.now = None if at is None else self._timebase(at)
        try:
            for listener in self._listeners:
                listener(event)
        finally:
            self.now = None
        return 1

    def _attempt(self, attempt: Attempt) -> int:
        i = attempt.index
        if i < 0:  # the planner, warm-up or aggregator: billed, but no cell of the grid
            ended = attempt.started_at + attempt.latency_ms / 1000.0
            return self._deliver(PhaseAttempt(phase_of_index(i), attempt), ended)
        if i not in self.view:
            return 0
        count = 0
        previous = self.view[i]
        if previous in (TaskState.FAILED, TaskState.CANCELLED) and attempt.outcome in TASK_OUTCOMES:
            # it was queued again since
            count += self._deliver(TaskQueued(i, previous))
        side = attempt.outcome not in TASK_OUTCOMES  # a hedged pair's other call (hedge_lost, hedge_failed)
        if self.in_flight is not None and i in self.in_flight and not side:
            self.in_flight.discard(i)  # its start was announced from the heartbeat
        else:
            count += self._deliver(AttemptStarted(i, attempt.number, attempt.endpoint, hedge=side), attempt.started_at)
        ended = attempt.started_at + attempt.latency_ms / 1000.0
        self.first_started = (
            attempt.started_at if self.first_started is None else min(self.first_started, attempt.started_at)
        )
        self.last_ended = ended if self.last_ended is None else max(self.last_ended, ended)
        if side:
            return count + self._deliver(AttemptEnded(attempt), ended)
        match attempt.outcome:
            case "ok":
                self.view[i] = TaskState.SUCCEEDED
                event: EngineEvent = TaskSucceeded(attempt, "")
            case "retry":
                self.view[i] = TaskState.RETRYING
                event = TaskRetrying(attempt, UNKNOWN_DELAY_S if attempt.retry_in_s is None else attempt.retry_in_s)
            case "failed":
                self.view[i] = TaskState.FAILED
                event = TaskFailed(attempt)
            case _:
                self.view[i] = TaskState.CANCELLED
                event = TaskCancelled(i, attempt)
        return count + self._deliver(event, ended)

    def _logged(self, at: float, kind: str, data: dict[str, Any]) -> int:
        match kind:
            case "run":
                self.stopped = False
                self.finished = None
                self.paused = False
                self.limit = data.get("concurrency", self.limit)
                self.ceiling = max(self.ceiling or 0, self.limit or 0) or None
                count = 0
                for i, state in self.view.items():  # a new run picks up what the last one left
                    if state is TaskState.CANCELLED:
                        self.view[i] = TaskState.QUEUED
                        count += self._deliver(TaskQueued(i, TaskState.CANCELLED), at)
                return count + self._deliver(
                    RunStarted(len(self.view), data.get("pending", 0), self.limit or 0, self.provider, self.simulated),
                    at,
                )
            case "paused":
                self.paused = True
                return self._deliver(RunPaused(), at)
            case "phase":
                return self._deliver(PhaseChanged(data.get("phase", ""), data.get("detail", "")), at)
            case "resumed":
                self.paused = False
                return self._deliver(RunResumed(), at)
            case "concurrency":
                self.limit = data.get("limit", self.limit)
                reason = data.get("reason", "")
                if reason in ("user", "attached view"):
                    self.ceiling = self.limit
                return self._deliver(ConcurrencyChanged(self.limit or 0, reason), at)
            case "rate_limits":
                self.rate_limits = (data.get("rpm"), data.get("tpm"))
                return self._deliver(RateLimitsLearned(*self.rate_limits), at)
            case "stopping":
                self.stopped = True
                return self._deliver(RunStopping(data.get("reason") or "stopped"), at)
            case "finished":
                self.stopped = True
                reason = data.get("reason")
                self.finished = RunFinished(
                    data.get("succeeded", 0),
                    data.get("failed", 0),
                    data.get("unfinished", 0),
                    aborted=bool(reason and "abort" in reason),
                    stop_reason=reason,
                )
                return self._deliver(self.finished, at)
        return 0

    def _reconcile(self, states: Mapping[int, TaskState]) -> int:
        """Apply the state changes no attempt explains: failed tasks requeued by a retry, waiting
        tasks cancelled by a stop. The states are read last, so they are never older than the
        attempts just delivered; anything newer is explained by the next poll's attempts."""
        count = 0
        for i, seen in self.view.items():
            actual = states.get(i, seen)
            if actual is seen:
                continue
            if seen is TaskState.FAILED or (seen is TaskState.CANCELLED and actual is TaskState.QUEUED):
                # Failed is final until a retry requeues it; cancelled is left when a run picks it up.
                self.view[i] = TaskState.QUEUED
                count += self._deliver(TaskQueued(i, seen))
                seen = TaskState.QUEUED
            if actual is TaskState.CANCELLED and self.stopped and seen in (TaskState.QUEUED, TaskState.RETRYING):
                self.view[i] = TaskState.CANCELLED
                count += self._deliver(TaskCancelled(i))
        return count

    def _heartbeat_in_flight(self) -> int:
        listed = (self.heartbeat or {}).get("in_flight")
        if listed is None or self.stopped and not listed:
            return 0
        if self.in_flight is None:
            self.in_flight = set()
        count = 0
        for i in listed:
            if i in self.view and i not in self.in_flight and not self.view[i].is_final:
                self.in_flight.add(i)
                self.view[i] = TaskState.RUNNING
                count += self._deliver(AttemptStarted(i, 0, self.provider))
        return count


def migrate(journal: Journal) -> int:
    """Bring a journal of an older schema (opened for writing) to this one, so that every later
    reader replays one log: a schema-1 journal gets the event log it lacks, rebuilt from its rows;
    the untyped notes of schemas 1 and 2 become their typed events. Returns how many events were
    written (0: the journal is of this schema already)."""
    schema = int(journal.queries.meta().get("schema") or 1)
    old = journal.history.old_events()
    if schema >= SCHEMA_VERSION and not old:
        return 0
    rebuilt = schema < 2
    notes = [
        (at, session, event)
        for _, at, session, kind, data in old
        if (event := old_note(kind, data or {}, rebuilt=rebuilt)) is not None
    ]
    timeline = _rebuilt_log(journal) if rebuilt else []
    # the notes between the rebuilt events by time; each keeps its own order (merge never reorders one)
    entries = list(heapq.merge(timeline, notes, key=lambda entry: entry[0]))
    journal.adopt_log(entries)
    return len(entries)


def _rebuilt_log(journal: Journal) -> list[tuple[float, int, EngineEvent]]:
    """A schema-1 journal's events, rebuilt from its rows by a follower (session 0: unknown)."""
    timeline: list[tuple[float, int, EngineEvent]] = []

    def keep(event: EngineEvent) -> None:
        at = follower.now if follower.now is not None else (timeline[-1][0] if timeline else time.time())
        timeline.append((at, 0, event))

    follower = JournalFollower(journal, journal.queries.states())
    follower.subscribe(keep)
    follower.poll(heartbeat_in_flight=False)
    return timeline
