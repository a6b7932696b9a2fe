"""Watch and steer a run that another process drives, through its journal. No Textual here.

`swarm-tui attach RUN_DIR` shows the same screen as the TUI that runs the swarm. It gets
there by replaying the journal as the very engine events a live engine emits
(`engine/events.py`), so the UI code is shared and knows nothing of where events come from:

* `JournalFollower` polls a journal (a read-only connection: WAL readers never block the
  writer) and turns new attempt rows, task-state changes and logged run events into engine
  events, incrementally. It also replays a whole journal at once, which the TUI uses to show
  cumulative figures when it resumes a run.
* `AttachedRun` is the run source the TUI drives for an attached view: the follower, a
  `RunStats` fed by it, the liveness of the writer (heartbeat age, process alive) and the
  steering commands, written to the journal's control queue through a second, writable
  connection that `SwarmSession` in the running process polls.

What the journal cannot say: which tasks are in flight right now (attempts are journaled
when they end). When the writer's heartbeat lists them (`heartbeat["in_flight"]`), the
follower shows them as running; otherwise they look queued until their attempt ends.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from .engine.events import (
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
from .engine.stats import RunStats
from .jobs import Task
from .journal import Journal
from .providers.errors import CallError, ErrorClass
from .providers.profile import ProviderProfile
from .providers.usage import Usage

POLL_S = 0.5
HEARTBEAT_STALE_S = 3.0
"""The writer beats every 0.5 s; three seconds of silence means nobody drives the run."""
TASK_OUTCOMES = frozenset({"ok", "retry", "failed", "cancelled"})
"""Attempt outcomes that decide their task's state; others (a hedged pair's loser) do not."""
UNKNOWN_DELAY_S = math.nan
"""`TaskRetrying.delay_s` of a replayed retry from a journal written before `retry_in_s` existed."""


def phase_of_index(index: int) -> str:
    """Which swarm step a negative journal index belongs to (see swarm_tui.swarm)."""
    from .swarm.pipeline import WARMUP_INDEX
    from .swarm.planner import PLAN_INDEX

    return {PLAN_INDEX: "plan", WARMUP_INDEX: "warm-up"}.get(index, "aggregate")


Listener = Callable[[EngineEvent], None]


# --------------------------------------------------------------------------- rows -> events


_TimelineItem = tuple[float, int, dict[str, Any] | tuple[int, str, dict | None]]
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

    def poll(self, target: Mapping[int, TaskState] | None = None) -> int:
        """Deliver what happened since the last poll; returns how many events were delivered.

        `target`: the task states to reconcile to (default: the journal's). A live engine
        resuming a run passes its own, where unfinished tasks are queued, not cancelled.
        """
        count = 0
        meta = self.journal.meta() if target is None else {}
        self.heartbeat = meta.get("heartbeat")
        rows = self.journal.attempts_since(self._last_attempt_id)
        logged = self.journal.events(self._last_event_id) if target is None else []
        states = dict(target) if target is not None else self.journal.states()
        for i in states.keys() - self.view.keys():  # tasks that joined the run (a planner's sub-tasks)
            self.view[i] = TaskState.QUEUED
        if not self._announced and target is None:
            self._announced = True
            first = rows[0]["started_at"] if rows else time.time()
            plan = meta.get("plan") or {}
            limit = (plan.get("settings") or {}).get("concurrency", 0)
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
            ((at, 0, (event_id, kind, data)) for event_id, at, kind, data in logged),
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


def replay_history(journal: Journal, stats: RunStats, states: Mapping[int, TaskState]) -> list[EngineEvent]:
    """Feed every attempt journaled so far into `stats` (a live engine's, before it resumes a
    run) so that its counts, tokens, cost and latencies are the run's, not just this session's;
    the task states end at `states`. Returns the events, for the screen's error log and grid.

    Replayed attempts do not count toward the recent-rate window (req/s, tok/s): they
    happened before this session started."""
    events: list[EngineEvent] = []
    wall, now = time.time(), stats.clock()
    follower = JournalFollower(journal, states, timebase=lambda epoch: now - (wall - epoch))
    follower.subscribe(stats.observe)
    follower.subscribe(events.append)
    original_clock = stats.clock
    stats.clock = follower.clock
    try:
        follower.poll(target=states)
    finally:
        stats.clock = original_clock
    stats._recent.clear()  # RunStats has no public way to observe without rating; see module notes
    return events


# --------------------------------------------------------------------------- the attached view


def process_alive(pid: int | None) -> bool | None:
    """True/False for a pid on this machine; None when it cannot be told."""
    if not pid:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return None
    return True


class AttachedRun:
    """A run driven by another process, seen through its journal: a run source for the TUI.

    Steering writes commands into the journal's control queue; the running session applies
    them within half a second, and their effect comes back through the journal (a `paused`
    event, requeued tasks...), so what the screen shows is what the engine did.
    """

    attached = True

    def __init__(self, run_dir: Path, *, clock: Callable[[], float] = time.time) -> None:
        from .session import plan_from_meta  # the stored plan, without starting anything

        self.run_dir = Path(run_dir)
        self.journal = Journal.open(self.run_dir, readonly=True)
        meta = self.journal.meta()
        self.journal_meta = meta
        self.plan = plan_from_meta(meta["plan"])
        self.job_name = meta.get("job", {}).get("name", self.run_dir.name)
        rows = self.journal.tasks()
        self.tasks = [Task(r.index, r.custom_id, r.body) for r in rows]
        self.profile: ProviderProfile = self.plan.profile
        self.settings = self.plan.settings
        self.model = self.profile.model or (self.tasks[0].body.get("model") if self.tasks else None)
        self.simulated = self.profile.is_simulator
        self.base_url = "embedded simulator" if self.simulated else self.profile.base_url
        self._wall_clock = clock
        self.follower = JournalFollower(
            self.journal,
            (t.index for t in self.tasks),
            provider=self.profile.name,
            simulated=self.simulated,
            timebase=None,
        )
        self.stats = RunStats(clock=self._stats_clock)
        self.follower.subscribe(self.stats.observe)
        self._commands: Journal | None = None

    # ----------------------------------------------------------------- what the UI reads

    @property
    def states(self) -> Mapping[int, TaskState]:
        return self.follower.view

    def subscribe(self, listener: Listener) -> None:
        self.follower.subscribe(listener)

    def _stats_clock(self) -> float:
        if self.follower.now is not None:
            return self.follower.now
        if not self.live and self.follower.last_ended is not None:
            return self.follower.last_ended  # a run nobody drives: elapsed stops where it ended
        return self._wall_clock()

    @property
    def heartbeat_age_s(self) -> float | None:
        beat = self.follower.heartbeat
        if not beat or "at" not in beat:
            return None
        return max(0.0, self._wall_clock() - beat["at"])

    @property
    def live(self) -> bool:
        """Someone is driving the run right now (a fresh heartbeat, and no final 'finished')."""
        age = self.heartbeat_age_s
        if age is None or age > HEARTBEAT_STALE_S or self.follower.finished is not None:
            return False
        return process_alive((self.follower.heartbeat or {}).get("pid")) is not False

    @property
    def running(self) -> bool:
        return self.live

    @property
    def can_steer(self) -> bool:
        return self.live

    @property
    def paused(self) -> bool:
        return self.follower.paused

    @property
    def limit(self) -> int:
        return self.follower.limit or self.settings.concurrency

    @property
    def ceiling(self) -> int:
        return self.follower.ceiling or self.limit

    @property
    def straggler_s(self) -> float | None:
        return None  # the engine's tail figures are not journaled until the run ends (summary.json)

    @property
    def in_flight_known(self) -> bool:
        return self.follower.in_flight is not None

    def liveness(self) -> str:
        """Who drives this journal, in a few words (the status panel puts the phase before it,
        and the resume command, when there is work left, on a line of its own)."""
        age = self.heartbeat_age_s
        beat = self.follower.heartbeat or {}
        if self.follower.finished is not None:
            return "the run that wrote it has ended"
        if age is None:
            return "no heartbeat: never run, or run by an older swarm-tui"
        if self.live:
            return f"live · pid {beat.get('pid')} · heartbeat {age:.1f}s ago"
        alive = process_alive(beat.get("pid"))
        return "its process is gone" if alive is False else f"nobody running it: silent for {age:.0f}s"

    def eta_s(self) -> float | None:
        return self.stats.eta_s() if self.live else None

    def attempts_of(self, index: int) -> list[dict[str, Any]]:
        return self.journal.attempts_of(index)

    def result_of(self, index: int) -> dict[str, Any] | None:
        return self.journal.result_of(index)

    # ----------------------------------------------------------------- the poll loop

    async def run(self) -> None:
        """Follow the journal until cancelled (the attached view never ends the run)."""
        while True:
            self.poll()
            await asyncio.sleep(POLL_S)

    def poll(self) -> int:
        delivered = self.follower.poll()
        if len(self.follower.view) != len(self.tasks):  # tasks joined the run: read them
            self.tasks = [Task(r.index, r.custom_id, r.body) for r in self.journal.tasks()]
            self.stats.total = len(self.tasks)
        return delivered

    # ----------------------------------------------------------------- steering (control queue)

    def _send(self, command: str, args: dict[str, Any] | None = None) -> None:
        if self._commands is None:
            self._commands = Journal.open(self.run_dir)
        self._commands.send_command(command, args)

    def pause(self) -> None:
        self._send("pause")

    def resume(self) -> None:
        self._send("resume")

    def abort(self, reason: str = "aborted from an attached view") -> None:
        self._send("abort")

    def set_concurrency(self, limit: int, reason: str = "attached view") -> int:
        limit = max(1, limit)
        self._send("concurrency", {"limit": limit})
        return limit

    @property
    def has_memory(self) -> bool:
        swarm = self.journal_meta.get("swarm") or {}
        return (swarm.get("memory") or {}).get("rounds", 1) > 1

    def flush_memory(self) -> int | None:
        """Ask the running session to flush its rolling memory (how many rounds is not known here)."""
        self._send("flush_memory")
        return None

    def retry(self, indices: Iterable[int] | None = None) -> list[int]:
        """Ask the running engine to requeue failed tasks; returns those asked for."""
        chosen = [i for i in (self.states if indices is None else indices) if self.states.get(i) is TaskState.FAILED]
        if chosen:
            self._send("retry", {"indices": chosen} if indices is not None else None)
        return chosen

    def exit_code(self) -> int:
        return 0  # leaving an attached view detaches; it says nothing about the run

    async def aclose(self) -> None:
        self.journal.close()
        if self._commands is not None:
            self._commands.close()
