"""The error log's rows, as data: one failed attempt each, with what was to happen next. No
Textual: `RunView` makes them from the events; the error log (`ui/widgets/errorlog/`) lays them out,
counts a retry down on its clock and says what became of each agent since. And the failed tasks
by class (`FailedClasses`): what a script asks of a run's failures (`ctl`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace

from swarm_tui.core.events import Attempt, EngineEvent, TaskCancelled, TaskFailed, TaskQueued, TaskSucceeded
from swarm_tui.journal.queries import UNKNOWN_CLASS
from swarm_tui.view.news import PHASE_LABELS

DIGITS = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt, as the log shows it, with what was to happen next."""

    attempt: Attempt
    next_step: str
    """What was to happen next, in the log's words ("gave up", "other call on"); "" for a retry
    whose delay is known: the log counts it down (`delay_s`)."""
    gave_up: bool = False
    retry_due: float | None = None
    """When the retry is due (the screen's clock), for the countdown; None when not a pending retry."""
    kind: str = "retry"
    """retry (another attempt follows), final (the agent failed), side (a hedged pair's loser),
    step (a planner's, aggregator's or judge's call: `phase` says which)."""
    phase: str = ""
    delay_s: float | None = None
    """A retry's backoff, when known: the screen counts it down from when the row is shown."""
    note: str = ""
    """The row's words when no error says them (a call flagged silent)."""

    @classmethod
    def retrying(cls, attempt: Attempt, delay_s: float, now: float | None = None) -> Failure:
        """NaN delay: a retry is coming but its delay is unknown (an attached view)."""
        if math.isnan(delay_s):
            return cls(attempt, "retrying")
        return cls(attempt, "", retry_due=None if now is None else now + delay_s, delay_s=delay_s)

    @classmethod
    def final(cls, attempt: Attempt) -> Failure:
        return cls(attempt, "gave up", gave_up=True, kind="final")

    @classmethod
    def side(cls, attempt: Attempt) -> Failure:
        """A hedged pair's call that failed: the other call decides the task."""
        return cls(attempt, "other call on", kind="side")

    @classmethod
    def silent(cls, attempt: Attempt, note: str) -> Failure:
        """A call flagged silent far past what was expected: not cut (only --timeout cuts it), said."""
        return cls(attempt, "still waiting", kind="silent", note=note)

    @classmethod
    def step(cls, phase: str, attempt: Attempt) -> Failure:
        """A call outside the task grid that failed (`PhaseAttempt`)."""
        final = attempt.outcome != "retry"
        return cls(attempt, "gave up" if final else "retrying", gave_up=final, kind="step", phase=phase)

    def shown_at(self, now: float) -> Failure:
        """This row as shown at `now` (the screen's clock): a retry's countdown runs from here."""
        if self.delay_s is None or self.retry_due is not None:
            return self
        return replace(self, retry_due=now + self.delay_s)

    @property
    def index(self) -> int:
        return self.attempt.index

    @property
    def error_class(self) -> str:
        error = self.attempt.error
        return str(error.kind) if error else self.attempt.outcome

    @property
    def message(self) -> str:
        error = self.attempt.error
        return error.message if error else self.note

    @property
    def repeat_key(self) -> tuple[str, str, str]:
        """What makes two failures repeats of each other: class, status, message (digits aside:
        a request id or a count in the text does not make it another error)."""
        return (self.error_class, str(self.attempt.status or ""), DIGITS.sub("#", self.message))

    @property
    def agent_label(self) -> str:
        if self.kind == "step":
            return PHASE_LABELS.get(self.phase, self.phase)[:5]
        return f"#{self.index + 1}"


class FailedClasses:
    """The tasks that failed finally, by the class of their last error, kept from the events (a
    resumed run's earlier failures given at the start): what `ctl status` counts and
    `ctl retry --errored CLASS` picks. Every update is O(1): it is a listener of the engine."""

    def __init__(self, failed: Mapping[int, str] | None = None) -> None:
        self._class_of: dict[int, str] = dict(failed or {})
        self._counts: Counter[str] = Counter(self._class_of.values())

    def observe(self, event: EngineEvent) -> None:
        match event:
            case TaskFailed(attempt=attempt):
                self._settle(attempt.index, str(attempt.error.kind) if attempt.error is not None else UNKNOWN_CLASS)
            case TaskQueued(index=index) | TaskCancelled(index=index):
                self._settle(index, None)
            case TaskSucceeded(attempt=attempt):
                self._settle(attempt.index, None)

    def _settle(self, index: int, kind: str | None) -> None:
        old = self._class_of.pop(index, None)
        if old is not None:
            self._counts[old] -= 1
            if not self._counts[old]:
                del self._counts[old]
        if kind is not None:
            self._class_of[index] = kind
            self._counts[kind] += 1

    def counts(self) -> dict[str, int]:
        """How many failed tasks each class holds, most first."""
        return dict(self._counts.most_common())

    def of_class(self, kind: str) -> list[int]:
        """The failed tasks whose last error is of class `kind`, in index order."""
        return sorted(index for index, found in self._class_of.items() if found == kind)
