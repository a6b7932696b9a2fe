"""What every engine shows its listeners and steering code, in one place.

`SwarmEngine` (one process) and `swarm_tui.distributed.RayEngine` (shards on Ray actors) keep
the same state — `tasks`, a `TaskBoard` (`states`), `admission`, an in-flight map, a stop
reason — and share these read-outs and the event plumbing, so the TUI, `attach` and headless
runs cannot tell them apart.

An event goes out in one way: written to the journal's log (`_emit`; events that report a
journal write are logged in that write's transaction, then `_deliver`ed), applied to the
board, then handed to the listeners. So a task's state only ever changes by an event that is
on disk, and a view replaying the log sees exactly what a live view saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from swarm_tui.core.board import TaskBoard
from swarm_tui.core.errors import JournalWriteError
from swarm_tui.core.events import EngineEvent, RunFinished, TaskCancelled, TaskState

log = logging.getLogger("swarm_tui.engine")

Listener = Callable[[EngineEvent], None]

FAIL_RATE_MIN_SAMPLE = 20
"""Finished tasks needed before --fail-on-error judges the rate (all of them in a smaller job)."""


@dataclass(frozen=True, slots=True)
class _Write:
    """A journal write waiting for the next commit, with the events that report it."""

    write: Callable[..., None]
    args: tuple[Any, ...]
    events: tuple[EngineEvent, ...]


class ObservableEngine:
    """Mixin: the subclass sets `tasks`, `board`, `states`, `admission`, `_listeners`,
    `_running`, `_aborted` and `_stop_reason`."""

    tasks: MutableMapping[int, Any]
    board: TaskBoard
    states: dict[int, TaskState]
    """`board.states`: read-only for the engine's code (events move it)."""
    journal: Any
    _listeners: list[Listener]
    _running: bool
    _aborted: bool
    _stop_reason: str | None
    settings: Any
    _attempt_numbers: dict[int, int]
    """The last attempt number of each task (numbering goes on across sessions)."""
    _round_attempts: dict[int, int]
    """Attempts of each task in its current round (its retries' budget)."""
    _outbox: list[EngineEvent | _Write]
    """Events emitted, and answers to keep, since the last commit: they go to disk (and out)
    with the next one, in order."""

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # ----------------------------------------------------------------- the lanes' side (LaneHost), shared

    @property
    def stopping(self) -> str | None:
        return self._stop_reason

    def next_number(self, index: int) -> int:
        self._attempt_numbers[index] = self._attempt_numbers.get(index, 0) + 1
        return self._attempt_numbers[index]

    def peek_number(self, index: int) -> int:
        """The number the next attempt of `index` will take (nothing taken yet)."""
        return self._attempt_numbers.get(index, 0) + 1

    def take_numbers(self, index: int, number: int) -> None:
        self._attempt_numbers[index] = max(self._attempt_numbers.get(index, 0), number)

    def round_attempts(self, index: int) -> int:
        return self._round_attempts.get(index, 1)

    def count_attempt(self, index: int) -> None:
        """A new attempt of `index` in this round."""
        self._round_attempts[index] = self._round_attempts.get(index, 0) + 1

    def new_round(self, index: int) -> None:
        """Its attempt budget starts over (an agent's next step has retries of its own)."""
        self._round_attempts.pop(index, None)

    def commit(
        self, write: Callable[..., None], *args: Any, events: Sequence[EngineEvent], quiet: bool = False
    ) -> None:
        self._commit(write, *args, events=events, quiet=quiet)

    def commit_soon(self, write: Callable[..., None], *args: Any, events: Sequence[EngineEvent]) -> None:
        self._commit_soon(write, *args, events=events)

    def emit(self, event: EngineEvent) -> None:
        self._emit(event)

    def emit_now(self, event: EngineEvent) -> None:
        self._emit_now(event)

    def log(self, kind: str, data: dict[str, Any] | None = None) -> None:
        """A journal event that changes no task (a judge that failed, a lane's note): when the
        journal cannot take it, the failure has already stopped the run, so it is not raised again."""
        try:
            self.journal.log_event(kind, data)
        except JournalWriteError:
            pass

    def check_failure_rate(self) -> None:
        self._check_failure_rate()

    def _emit(self, event: EngineEvent) -> None:
        """An event that reports no journal write of its own (a call started, a limit moved): it
        goes to disk with the next commit (group commit: at the latest when the loop turns),
        then out to the listeners, in the order it was emitted."""
        outbox = self._outbox
        outbox.append(event)
        if len(outbox) > 1:
            return  # a flush is already due
        try:
            asyncio.get_running_loop().call_soon(self._flush_outbox)
        except RuntimeError:  # no loop (steering before a run): now
            self._flush_outbox()

    def _emit_now(self, event: EngineEvent) -> None:
        """An event of the user's steering (pause, a new limit): on disk and out before the call
        returns, so the screen that asked shows its effect at once."""
        self._emit(event)
        self._flush_outbox()

    def _flush_outbox(self) -> None:
        if not self._outbox:
            return
        pending, self._outbox = self._outbox, []
        try:
            self._write_in_order(pending)
        except JournalWriteError:  # the journal told the engine, which is stopping the run
            self._deliver_unkept(pending)
            return
        self._deliver_in_order(pending)

    def _commit_soon(self, write: Callable[..., None], *args: Any, events: Sequence[EngineEvent]) -> None:
        """Group commit: a journal write (an answer) and its events go to disk with the next commit
        — one transaction for every answer that arrived in this turn of the loop — and out after
        it. A journal without transactions (a shard's, which forwards) commits at once."""
        if getattr(self.journal, "transaction", None) is None:
            self._commit(write, *args, events=events)
            return
        self._outbox.append(_Write(write, args, tuple(events)))
        if len(self._outbox) == 1:
            asyncio.get_running_loop().call_soon(self._flush_outbox)

    def _commit(
        self, write: Callable[..., None], *args: Any, events: Sequence[EngineEvent], quiet: bool = False
    ) -> None:
        """A journal write and the events that report it (after any still waiting for a commit),
        in one transaction; then they go out in order. `quiet`: a journal that cannot be written
        (it already told the engine, which is stopping) does not stop the events going out."""
        pending, self._outbox = self._outbox, []
        entries = [*pending, _Write(write, args, tuple(events))]
        try:
            self._write_in_order(entries)
        except JournalWriteError:
            self._deliver_unkept(pending)
            if not quiet:
                raise
            for event in events:
                self._deliver(event)
            return
        self._deliver_in_order(entries)

    def _write_in_order(self, entries: Sequence[EngineEvent | _Write]) -> None:
        """Events and writes, in the order they came, in one transaction (raises JournalWriteError)."""
        if all(not isinstance(entry, _Write) for entry in entries):
            self.journal.log(entries)
            return
        if len(entries) == 1 or getattr(self.journal, "transaction", None) is None:
            transaction = contextlib.nullcontext()
        else:
            transaction = self.journal.transaction()
        with transaction:
            events: list[EngineEvent] = []
            for entry in entries:
                if not isinstance(entry, _Write):
                    events.append(entry)
                    continue
                entry.write(*entry.args, [*events, *entry.events])
                events = []
            if events:
                self.journal.log(events)

    def _deliver_in_order(self, entries: Sequence[EngineEvent | _Write]) -> None:
        for entry in entries:
            if isinstance(entry, _Write):
                for event in entry.events:
                    self._deliver(event)
            else:
                self._deliver(entry)

    def _deliver_unkept(self, entries: Sequence[EngineEvent | _Write]) -> None:
        """What a commit that failed held: its plain events go out (the journal told the engine,
        which is stopping the run); an answer that could not be kept is shown as what it is on
        disk, a task left unfinished (resume sends it again)."""
        for entry in entries:
            if not isinstance(entry, _Write):
                self._deliver(entry)
                continue
            for event in entry.events:
                attempt = getattr(event, "attempt", None)
                if attempt is not None:
                    self._deliver(TaskCancelled(attempt.index, dataclasses.replace(attempt, outcome="cancelled")))

    def record(self, write: Callable[..., None], *args: Any, events: Sequence[EngineEvent]) -> None:
        """A journal write from outside the engine (the judge's verdict) and the events that report
        it, in one transaction, then out to the views; a journal that cannot be written has
        already stopped the run, and the events still go out."""
        self._commit(write, *args, events=events, quiet=True)

    def _deliver(self, event: EngineEvent) -> None:
        """An event already on disk: move the board, then tell the listeners."""
        self.board.apply(event)
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:  # a broken listener must not stop the swarm
                log.exception("engine listener %r failed on %r", listener, event)

    @property
    def running(self) -> bool:
        return self._running

    @property
    def paused(self) -> bool:
        return self.admission.paused  # type: ignore[attr-defined]

    @property
    def aborted(self) -> bool:
        return self._aborted

    def _check_failure_rate(self) -> None:
        """`--fail-on-error`: stop dispatch once the share of finished tasks that failed passes it
        (judged from FAIL_RATE_MIN_SAMPLE finished tasks, or all of a smaller job)."""
        limit = self.settings.guards.fail_on_error
        if limit is None:
            return
        failed = self.count(TaskState.FAILED)
        finished = failed + self.count(TaskState.SUCCEEDED)
        if finished >= min(FAIL_RATE_MIN_SAMPLE, len(self.tasks)) and failed / finished > limit:
            self.stop_dispatch(f"final-failure rate {failed / finished:.1%} passed --fail-on-error {limit:.1%}")

    def count(self, state: TaskState) -> int:
        return sum(1 for s in self.states.values() if s is state)

    def outcome(self) -> RunFinished:
        """Where the run stands now, as the event `run()` ends with."""
        succeeded, failed = self.count(TaskState.SUCCEEDED), self.count(TaskState.FAILED)
        return RunFinished(
            succeeded=succeeded,
            failed=failed,
            cancelled=len(self.tasks) - succeeded - failed,
            aborted=self._aborted,
            stop_reason=self._stop_reason,
        )

    def stop_dispatch(self, reason: str) -> None:  # pragma: no cover - each engine stops its own way
        raise NotImplementedError
