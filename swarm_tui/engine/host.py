"""The kernel's sides its lanes see: `core.ports.LaneHost` for every lane (the batch lane's
steps), and the live lane's own (a call on the wire holds its slot; an agent's tool run holds
none). The state is the kernel's (`kernel.Kernel` makes it); lanes change it only through here."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, MutableMapping, Sequence
from typing import Any

from swarm_tui.core.events import Attempt, AttemptEnded, ConcurrencyChanged, EngineEvent, TaskCancelled, TaskState
from swarm_tui.core.task import Task
from swarm_tui.engine.observable import ObservableEngine
from swarm_tui.engine.pacing.admission import AdmissionController


class KernelSide(ObservableEngine):
    """The kernel's public side (its state is made by `Kernel.__init__`)."""

    tasks: MutableMapping[int, Task]
    journal: Any
    admission: AdmissionController
    direct_calls: int
    _ready: deque[int]
    _retry_timers: dict[int, asyncio.TimerHandle]
    _in_flight: dict[int, asyncio.Task[None]]
    _working: dict[int, asyncio.Task[None]]
    _held: set[int]
    _reserved_tokens: dict[int, int]
    _wake: asyncio.Event

    # ----------------------------------------------------------------- the lanes' side (LaneHost)

    def give_back(self, indices: Iterable[int]) -> None:
        self._ready.extend(indices)
        self._wake.set()

    def retry_soon(self, index: int, delay_s: float = 0.0) -> None:
        self._retry_timers[index] = asyncio.get_running_loop().call_later(delay_s, self._requeue, index)

    def _requeue(self, index: int) -> None:
        """A backoff has ended: the task goes ahead of tasks never tried (its wait was its turn),
        and stays `retrying` until it is in flight again."""
        self._retry_timers.pop(index, None)
        self._ready.appendleft(index)
        self._wake.set()

    def queued_untried(self) -> list[int]:
        """The tasks waiting for a slot that no attempt has been made of (in queue order)."""
        return [i for i in self._ready if i not in self._attempt_numbers]

    def take_queued(self, indices: Sequence[int]) -> list[int]:
        """Take these tasks out of the live queue for another lane (those still in it)."""
        chosen = set(indices)
        taken = [i for i in self._ready if i in chosen]
        if taken:
            self._ready = deque(i for i in self._ready if i not in chosen)
        return taken

    def go_first(self, index: int) -> None:
        """The task's next step goes ahead of the queue now (an agent back from its tools)."""
        self._ready.appendleft(index)
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    # ----------------------------------------------------------------- the live lane's side

    def fly(self, index: int, task: asyncio.Task[None]) -> None:
        """The task's attempt is on the wire (it holds the slot the kernel admitted it with)."""
        self._in_flight[index] = task

    def flying(self, index: int) -> asyncio.Task[None] | None:
        return self._in_flight.get(index)

    def flights(self) -> list[asyncio.Task[None]]:
        return list(self._in_flight.values())

    def land(self, index: int) -> None:
        """An attempt is over, whatever its outcome: its slot and TPM reservation go back."""
        del self._in_flight[index]
        self._reserved_tokens.pop(index, None)
        self.admission.release()
        self._wake.set()

    def hold_tokens(self, index: int, tokens: int) -> None:
        self._reserved_tokens[index] = tokens

    def tokens_held(self, index: int) -> int:
        """Give back the TPM reservation of `index`'s call (what it held, 0 if none)."""
        return self._reserved_tokens.pop(index, 0)

    def work(self, index: int, task: asyncio.Task[None]) -> None:
        """The task is busy without a call (its tool calls): no slot, but the run waits for it."""
        self._working[index] = task

    def worked(self, index: int, task: asyncio.Task[None]) -> bool:
        """Its work is over; True when `task` was its current work (not one cancelled and replaced)."""
        if self._working.get(index) is not task:
            return False
        del self._working[index]
        self._wake.set()
        return True

    def workings(self) -> list[asyncio.Task[None]]:
        return list(self._working.values())

    def is_held(self, index: int) -> bool:
        return index in self._held

    def leave_unfinished(self, index: int, attempts: list[Attempt]) -> None:
        """A task stopped mid-attempt (abort, a journal that cannot keep its outcome): its calls
        are journaled as cancelled (when the journal can), and it waits for the next run() or resume."""
        events: list[EngineEvent] = [
            *(AttemptEnded(extra) for extra in attempts[1:]),
            TaskCancelled(index, attempts[0]),
        ]
        if index not in self._held:
            self._ready.append(index)
        self._commit(self.journal.record_cancelled, [index], attempts, events=events, quiet=True)

    def cancel_now(self, index: int) -> None:
        if self.states[index] is TaskState.CANCELLED:
            return
        cancelled = TaskCancelled(index)
        self._commit(self.journal.record_cancelled, [index], (), events=[cancelled], quiet=True)

    def adapt(self, limit: int, reason: str) -> None:
        """The adaptive controller moved the limit."""
        self.admission.set_limit(limit)
        self._emit(ConcurrencyChanged(limit, reason))
