"""The phase the run panel shows (RUNNING round 3/6, PAUSED, DONE ...), from the events alone.
No Textual: a live view and an attached one that saw the same events say the same.

A multi-round swarm runs the engine once a round, so each round ends with a `RunFinished`:
between rounds the panel says the round is done and the next comes (never "DONE" while rounds
are left), while a round runs it says which (`round 3/6`), and at the very end it gives the
final count with the rounds it took.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from swarm_tui.core.events import (
    EndpointSwitched,
    EngineEvent,
    PhaseChanged,
    RateGateClosed,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopping,
    RunSuspended,
    SuspensionEnded,
    TaskState,
)
from swarm_tui.view.news import counts_text, round_of


def counts_detail(states: Mapping[int, TaskState]) -> str:
    """ "97 done, 3 failed" (", 5 unfinished") of the states as they are."""
    counts = Counter(states.values())
    unfinished = sum(n for state, n in counts.items() if not state.is_final)
    return f"{counts[TaskState.SUCCEEDED]} done, {counts[TaskState.FAILED]} failed" + (
        f", {unfinished} unfinished" if unfinished else ""
    )


class PhaseView:
    """The phase and its detail; `take` each event in order."""

    def __init__(self) -> None:
        self.phase = "STARTING"
        self._detail = ""
        self._paused_here = False
        """The detail is the pause's ("in-flight calls finish; p resumes"), worded when read: the
        key that resumes is the screen's (its keymap may move it), not the view's."""
        self.resume_key = "p"
        self.round: tuple[int, int] | None = None
        """(round, rounds) of a multi-round swarm, once its fan-out names one."""
        self.round_detail = ""
        """The fan-out's own words for the round on now ("round 3/6: 150 agents")."""
        self.finished: RunFinished | None = None
        """The last `RunFinished` (a multi-round swarm has one a round)."""

    @property
    def detail(self) -> str:
        return f"in-flight calls finish; {self.resume_key} resumes" if self._paused_here else self._detail

    @detail.setter
    def detail(self, value: str) -> None:
        self._detail, self._paused_here = value, False

    @property
    def rounds_left(self) -> bool:
        return self.round is not None and self.round[0] < self.round[1]

    def _running_detail(self) -> str:
        return self.round_detail if self.round is not None else ""

    def take(self, event: EngineEvent) -> None:
        """One event, in order (`RunView` hands it those that move the phase)."""
        match event:
            case EndpointSwitched(endpoint=endpoint, reason=reason, source=source):
                away = f" (from {source})" if source and source != endpoint else ""
                self.detail = f"now sending to {endpoint}{away}: {reason}"
            case RunStarted():
                self.phase, self.detail = "RUNNING", self._running_detail()
            case RunPaused():
                self.phase, self._paused_here = "PAUSED", True
            case RunResumed():
                self.phase, self.detail = "RUNNING", self._running_detail()
            case RateGateClosed(seconds=seconds, asked_s=asked):
                capped = f" (it asked {asked:g}s; capped by --max-retry-after)" if asked else ""
                self.detail = f"provider asked to wait: nothing sent for {seconds:.1f}s (429){capped}"
            case PhaseChanged(phase=phase, detail=detail):
                found = round_of(detail)
                if found is not None:
                    self.round, self.round_detail = found, detail
                self.phase = phase.upper()
                if phase == "done" and self.finished is not None:  # the swarm's end: the count first
                    self.phase = "FINISHED" if self.finished.failed or self.finished.cancelled else "DONE"
                    self.detail = "; ".join(filter(None, (self._final_count(self.finished), detail)))
                else:
                    self.detail = detail
            case RunStopping(reason=reason):
                self.phase, self.detail = "STOPPING", reason
            case RunSuspended(kind=kind, reason=reason, probe_every_s=every):
                what = "quota spent" if kind == "quota" else "the provider asked for a long wait"
                probe = f"; a probe every {every:g}s+ resumes it" if every else ""
                self.phase, self.detail = "SUSPENDED", f"{what}: {reason}{probe}"
            case SuspensionEnded(suspended_s=held):
                self.phase, self.detail = "RUNNING", f"the provider answers again (suspended {held:.0f}s)"
            case RunFinished() as finished:
                self.finish(finished)

    def finish(self, finished: RunFinished) -> bool:
        """A run (or a round) ended; True when it is the end, not a round with more to come."""
        self.finished = finished
        if self.rounds_left and not finished.aborted and not finished.stop_reason:
            number, rounds = self.round or (0, 0)
            self.phase = "RUNNING"
            self.detail = f"round {number}/{rounds} done ({counts_text(finished)}); round {number + 1} next"
            return False
        if finished.aborted:
            self.phase = "ABORTED"
        elif finished.suspended:
            self.phase = "SUSPENDED"
        elif finished.failed or finished.cancelled:
            self.phase = "FINISHED"
        else:
            self.phase = "DONE"
        self.detail = self._final_count(finished)
        return True

    def _final_count(self, finished: RunFinished) -> str:
        rounds = f" in {self.round[1]} rounds" if self.round is not None and self.round[1] > 1 else ""
        return counts_text(finished) + rounds

    def settle(self, states: Mapping[int, TaskState]) -> None:
        """The phase of a run nobody has started here: what its states say."""
        counts = Counter(states.values())
        unfinished = sum(n for state, n in counts.items() if not state.is_final)
        failed = counts[TaskState.FAILED]
        self.phase = "DONE" if not (failed or unfinished) else "FINISHED" if not unfinished else "NOT STARTED"
        self.detail = counts_detail(states)
