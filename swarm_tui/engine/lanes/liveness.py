"""What each live call is doing, told as events so that every view can say where an agent stands.

A view knows from the events it already has that an agent's call went out (`AttemptStarted`),
came back, waits out a backoff or runs its tools. What only the live lane sees is told here:

* a streamed call's **first token** (`CallProgress`, with the time it took), then, while it
  streams, its tokens so far and their pace every `REPORT_EVERY_S` (not a chunk at a time: a
  million-task run must not log a row per token);
* a call **silent far past what its like takes** (`AgentSilent`, once a call): nothing from it
  for `SILENT_FACTOR` x what a healthy call of its size takes at p95 (its first token; for a
  stream that started, its own mean gap between chunks), and at least `SILENT_MIN_S`; with no
  figures yet, `SILENT_UNKNOWN_S`. A silent call is not cut for it (only `--timeout` and the
  stream deadlines cut): the flag is for the person watching (a glyph, the error log, `--bell`).

`tick` is called by the engine's watch a few times a second; it walks the calls on the wire (at
most the in-flight limit), so its cost does not grow with the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from swarm_tui.core.events import AgentSilent, CallProgress

if TYPE_CHECKING:
    from swarm_tui.engine.calls import Call
    from swarm_tui.engine.lanes.live import LiveLane

REPORT_EVERY_S = 5.0
"""A stream's progress is told this often (its first token at once)."""
SILENT_FACTOR = 10.0
SILENT_MIN_S = 10.0
SILENT_UNKNOWN_S = 30.0
"""With nothing learned yet of how long a call takes, a call this silent is flagged."""


class Liveness:
    """The live lane's calls as the views see them (see the module doc)."""

    def __init__(self, lane: LiveLane) -> None:
        self.lane = lane
        self._reported: dict[tuple[int, int], float] = {}
        """Each streaming call's last progress report (the engine's stall-aware clock)."""
        self._flagged: set[tuple[int, int]] = set()
        """Calls flagged silent (once each, until they speak again or end)."""

    def first_token(self, index: int, number: int) -> None:
        """A streamed call's first token came (called from its chunk loop)."""
        call = self._call(index, number)
        if call is None or call.progress is None:
            return
        progress = call.progress
        self._reported[(index, number)] = progress.clock()
        ttft = progress.ttft_s
        self.lane.engine.outbox.emit(
            CallProgress(index, number, 1, ttft_ms=None if ttft is None else round(ttft * 1000, 1))
        )

    def tick(self, now: float) -> None:
        """Tell the progress of the streams due for it, and flag the calls silent too long."""
        reported, flagged = self._reported, self._flagged
        live: set[tuple[int, int]] = set()
        for calls in list(self.lane.wire.values()):
            for call in calls:
                key = (call.index, call.number)
                live.add(key)
                progress = call.progress
                if progress is not None and progress.first_at is not None:
                    last = reported.get(key)
                    if last is not None and now - last >= REPORT_EVERY_S:
                        reported[key] = now
                        rate = progress.tokens_per_s()
                        self.lane.engine.outbox.emit(
                            CallProgress(
                                call.index,
                                call.number,
                                progress.chunks,
                                tokens_per_s=None if rate is None else round(rate, 1),
                            )
                        )
                silent = self._silent(call, now)
                if silent is None:
                    flagged.discard(key)
                elif key not in flagged:
                    flagged.add(key)
                    silent_s, expected_s = silent
                    self.lane.engine.outbox.emit(
                        AgentSilent(
                            call.index,
                            call.number,
                            round(silent_s, 1),
                            None if expected_s is None else round(expected_s, 3),
                            streaming=progress is not None and progress.first_at is not None,
                        )
                    )
        for key in [k for k in reported if k not in live]:
            del reported[key]
        flagged.intersection_update(live)

    def expected_s(self, call: Call) -> float | None:
        """What is expected of a call now: its first word (an answer, a first token), or, streaming,
        its next chunk (its own mean gap so far)."""
        progress = call.progress
        tail = self.lane.tail
        if progress is None:
            return tail.expected_s(call.ceiling, call.work)
        if progress.first_at is None:
            return tail.first_token_expected_s()
        return progress.gap_s()

    def _silent(self, call: Call, now: float) -> tuple[float, float | None] | None:
        """(how long it has been silent, what was expected) when that is far too long; else None."""
        progress = call.progress
        silent_s = progress.silent_s(now) if progress is not None else now - call.t0
        if silent_s < SILENT_MIN_S:
            return None
        expected = self.expected_s(call)
        threshold = SILENT_UNKNOWN_S if expected is None else max(SILENT_MIN_S, SILENT_FACTOR * expected)
        return (silent_s, expected) if silent_s >= threshold else None

    def _call(self, index: int, number: int) -> Call | None:
        for call in self.lane.wire.get(index, ()):
            if call.number == number:
                return call
        return None
