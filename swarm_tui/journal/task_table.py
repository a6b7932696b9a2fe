"""A run's tasks as the engine holds them: indices in memory, bodies in the journal.

A million-task job keeps no million request bodies in memory (1.2 KB each as dicts): the engine
holds `JournalTasks`, a mapping from index to `Task` whose bodies stay in the journal's `tasks`
table and are read when a task is looked up, a window of rows in one query (the dispatcher asks
for tasks in order, so one query serves the next `WINDOW` dispatches). What the engine sets
(a multi-step agent's grown transcript, a planned swarm's new agents) is held in memory beside
them, and is what a lookup returns from then on; the journal has it too (the same transaction
as the event that grew it), so a resume reads the same body.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Iterator, MutableMapping, Sequence
from typing import TYPE_CHECKING

from swarm_tui.core.task import Task

if TYPE_CHECKING:
    from swarm_tui.journal.queries import JournalQueries

WINDOW = 256
"""Rows read in one query: a query costs ~25 us, a row ~4 us (its JSON decoded)."""
WINDOWS_KEPT = 8
"""Windows kept decoded: the ones being dispatched, and those a retry or the console comes back to."""


class JournalTasks(MutableMapping[int, Task]):
    """The tasks of a run by index: bodies read from `journal` when asked for (see the module doc).

    `indices`: the tasks the journal holds, in order (a `range` for a new run's 0..n-1)."""

    def __init__(self, journal: JournalQueries, indices: Sequence[int]) -> None:
        self._journal = journal
        self._indices = indices if isinstance(indices, range) else array("q", indices)
        self._set: dict[int, Task] = {}
        """Tasks the engine set (grown transcripts, new agents): these win over the journal's rows."""
        self._added: dict[int, None] = {}
        """Indices the journal's rows did not have when this table was made, in the order set."""
        self._read: dict[int, Task] = {}
        """The tasks of the windows read last (at most `WINDOWS_KEPT` of them)."""
        self._windows: deque[list[int]] = deque()
        """The indices of each window in `_read`, oldest first."""

    def __getitem__(self, index: int) -> Task:
        task = self._set.get(index)
        if task is not None:
            return task
        if not self._holds(index):
            raise KeyError(index)
        task = self._read.get(index)
        if task is not None:
            return task
        self._read_window(index)
        task = self._read.get(index)
        if task is None:
            raise KeyError(index)
        return task

    def __setitem__(self, index: int, task: Task) -> None:
        if index not in self._set and not self._holds(index):
            self._added[index] = None
        self._set[index] = task

    def __delitem__(self, index: int) -> None:
        raise TypeError("a run's tasks are never removed")

    def __contains__(self, index: object) -> bool:
        return isinstance(index, int) and (index in self._set or self._holds(index))

    def __iter__(self) -> Iterator[int]:
        yield from self._indices
        yield from self._added

    def __len__(self) -> int:
        return len(self._indices) + len(self._added)

    def _holds(self, index: int) -> bool:
        """Whether the journal's rows (as of this table's making) hold `index`."""
        indices = self._indices
        if isinstance(indices, range):
            return index in indices
        position = bisect_left(indices, index)
        return position < len(indices) and indices[position] == index

    def _read_window(self, index: int) -> None:
        """Read the window of `WINDOW` indices `index` falls in (windows are aligned: none overlaps
        another), in one query; the oldest window kept is let go."""
        first = index - index % WINDOW
        window = self._journal.task_window(first, first + WINDOW)
        self._read.update((idx, Task(idx, custom_id, body)) for idx, custom_id, body in window)
        self._windows.append([idx for idx, _, _ in window])
        if len(self._windows) > WINDOWS_KEPT:
            for idx in self._windows.popleft():
                del self._read[idx]
