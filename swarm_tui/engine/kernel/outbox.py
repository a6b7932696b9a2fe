"""The outbox: how an event goes out, for every engine (the local one and the Ray driver).

An event goes out in one way: written to the journal's log (events that report a journal write
are logged in that write's transaction), then applied to the board, then handed to the
listeners. So a task's state only ever changes by an event that is on disk, and a view replaying
the log sees exactly what a live view saw.

Writes are grouped: an event that reports no write of its own (a call started, a limit moved) and
an answer to keep (`commit_soon`) wait for the next commit, at the latest when the loop turns,
and go to disk in one transaction with everything else that arrived in that turn (`Transactional`).
A write that must be on disk before its caller goes on (`commit`) takes everything still waiting
with it. The outbox owns the listeners too: it is the one place events are delivered from.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import cast

from swarm_tui.core.board import TaskBoard
from swarm_tui.core.errors import JournalWriteError
from swarm_tui.core.events import (
    AgentStepped,
    Attempt,
    AttemptEnded,
    EngineEvent,
    PhaseAttempt,
    TaskCancelled,
    TaskFailed,
    TaskRetrying,
    TaskSucceeded,
)
from swarm_tui.core.ports import RunJournal
from swarm_tui.core.task import JSONObject

log = logging.getLogger("swarm_tui.engine")

Listener = Callable[[EngineEvent], None]
Write = Callable[[Sequence[EngineEvent]], None]
"""A journal write, given the events that report it (logged in its transaction): e.g.
`functools.partial(journal.record_success, attempt, answer)`."""


@dataclass(frozen=True, slots=True)
class _Write:
    """A journal write waiting for the next commit, with the events that report it."""

    write: Write
    events: tuple[EngineEvent, ...]


class Outbox:
    """The events and writes since the last commit, and the listeners they go out to."""

    def __init__(self, journal: RunJournal, board: TaskBoard, listeners: Iterable[Listener] = ()) -> None:
        self._journal = journal
        self._board = board
        self._listeners: list[Listener] = list(listeners)
        self._pending: list[EngineEvent | _Write] = []
        """Events emitted, and answers to keep, since the last commit: to disk (and out) with
        the next one, in order."""

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def emit(self, event: EngineEvent) -> None:
        """An event that reports no journal write of its own: to disk with the next commit (at the
        latest when the loop turns), then out, in the order it was emitted."""
        pending = self._pending
        pending.append(event)
        if len(pending) > 1:
            return  # a flush is already due
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:  # no loop (steering before a run): now
            self.flush()

    def emit_now(self, event: EngineEvent) -> None:
        """An event of the user's steering (pause, a new limit): on disk and out before the call
        returns, so the screen that asked shows its effect at once."""
        self.emit(event)
        self.flush()

    def flush(self) -> None:
        """Everything waiting goes to disk in one transaction, then out."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        try:
            self._write_in_order(pending)
        except JournalWriteError:  # the journal told the engine, which is stopping the run
            self._deliver_unkept(pending)
            return
        self._deliver_in_order(pending)

    def commit_soon(self, write: Write, *, events: Sequence[EngineEvent]) -> None:
        """Group commit: a journal write (an answer) and its events go to disk with the next
        commit — one transaction for every answer that arrived in this turn of the loop — and out
        after it."""
        self._pending.append(_Write(write, tuple(events)))
        if len(self._pending) == 1:
            asyncio.get_running_loop().call_soon(self.flush)

    def commit(self, write: Write, *, events: Sequence[EngineEvent], quiet: bool = False) -> None:
        """A journal write and the events that report it (after any still waiting for a commit),
        in one transaction; then they go out in order. `quiet`: a journal that cannot be written
        (it already told the engine, which is stopping) does not stop the events going out; else
        the `JournalWriteError` is raised."""
        pending, self._pending = self._pending, []
        entries = [*pending, _Write(write, tuple(events))]
        try:
            self._write_in_order(entries)
        except JournalWriteError:
            self._deliver_unkept(pending)
            if not quiet:
                raise
            for event in events:
                self.deliver(event)
            return
        self._deliver_in_order(entries)

    def note(self, kind: str, data: JSONObject | None = None) -> None:
        """A journal note that changes no task (a judge that failed, a lane's note): when the
        journal cannot take it, the failure has already stopped the run, so it is not raised again."""
        with contextlib.suppress(JournalWriteError):
            self._journal.log_event(kind, data)

    # ----------------------------------------------------------------- in order

    def _write_in_order(self, entries: Sequence[EngineEvent | _Write]) -> None:
        """Events and writes, in the order they came, in one transaction (raises JournalWriteError)."""
        if all(not isinstance(entry, _Write) for entry in entries):
            self._journal.log(cast("Sequence[EngineEvent]", entries))
            return
        transaction: AbstractContextManager[None] = (
            contextlib.nullcontext() if len(entries) == 1 else self._journal.transaction()
        )
        with transaction:
            events: list[EngineEvent] = []
            for entry in entries:
                if not isinstance(entry, _Write):
                    events.append(entry)
                    continue
                entry.write([*events, *entry.events])
                events = []
            if events:
                self._journal.log(events)

    def _deliver_in_order(self, entries: Sequence[EngineEvent | _Write]) -> None:
        for entry in entries:
            if isinstance(entry, _Write):
                for event in entry.events:
                    self.deliver(event)
            else:
                self.deliver(entry)

    def _deliver_unkept(self, entries: Sequence[EngineEvent | _Write]) -> None:
        """What a commit that failed held: its plain events go out (the journal told the engine,
        which is stopping the run); an answer that could not be kept is shown as what it is on
        disk, a task left unfinished (resume sends it again)."""
        for entry in entries:
            if not isinstance(entry, _Write):
                self.deliver(entry)
                continue
            for event in entry.events:
                attempt = _attempt_of(event)
                if attempt is not None:
                    self.deliver(TaskCancelled(attempt.index, dataclasses.replace(attempt, outcome="cancelled")))

    def deliver(self, event: EngineEvent) -> None:
        """An event already on disk (this outbox's, or another engine's sharing the journal: the Ray
        driver's own calls): move the board, then tell the listeners."""
        self._board.apply(event)
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:  # a broken listener must not stop the swarm
                log.exception("engine listener %r failed on %r", listener, event)


def _attempt_of(event: EngineEvent) -> Attempt | None:
    """The attempt an event reports, if it reports one."""
    if isinstance(event, TaskSucceeded | TaskFailed | TaskRetrying | AgentStepped | AttemptEnded | PhaseAttempt):
        return event.attempt
    if isinstance(event, TaskCancelled):
        return event.attempt
    return None
