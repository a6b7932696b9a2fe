"""Each endpoint (door) of a routed run, as the run panel's rows show it: kept from the events alone.

A routed run (`--provider a,b,c --route ...`) announces each of its doors at its start with a
`ConcurrencyChanged(endpoint=..., endpoint_limit=...)`, and again whenever a door's own limit
moves; its attempts carry their endpoint. From those, per door: what is in flight against its
limit, the answers of the last 60 s beside the RPM it learned or was told, the p95 latency of its
answers, its 429s and other errors, what it cost, and whether its breaker is open (an
`EndpointSwitched` about it). Only announced doors have figures, so a run of one endpoint (or the
legacy primary/fallback pair, the cache, a batch lane, the judge's own endpoint) adds no row.

The counts are defined as `summary.json`'s `endpoints` are (`journal.queries.endpoint_totals`):
requests are the attempts that ended, 429s are attempts answered 429, errors are the other failed
ones. So the live rows, the attached ones (the journal's log replayed through the same code) and
the summary agree.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from swarm_tui.core.call_errors import ErrorClass
from swarm_tui.core.events import Attempt, ConcurrencyChanged, EndpointSwitched, RateLimitsLearned
from swarm_tui.engine.stats import SortedLatencies, nearest_rank

RPM_WINDOW_S = 60.0
"""The window a door's observed rate counts answers over (a minute: what an RPM limit counts)."""


@dataclass
class DoorFigures:
    """One endpoint of a routed run, as its events tell it."""

    name: str
    limit: int | None = None
    """Its own in-flight limit (adaptive: where it stands now)."""
    in_flight: int = 0
    rpm_limit: int | None = None
    """The RPM it was told or learned from its headers (or estimated from its 429s)."""
    tpm_limit: int | None = None
    requests: int = 0
    answered: int = 0
    rate_limited: int = 0
    errors: int = 0
    """Failed attempts other than 429s."""
    cost_usd: float = 0.0
    unpriced: int = 0
    """Attempts with tokens but no price: the cost shown is then a floor."""
    open: bool = False
    """Its breaker opened (new attempts go elsewhere) and no probe has brought it back yet."""
    latencies_ms: SortedLatencies = field(default_factory=SortedLatencies)
    answers_at: deque[float] = field(default_factory=deque)
    """When its recent answers came (epoch seconds), the last `RPM_WINDOW_S` of them."""

    def rpm(self, now: float) -> int:
        """Answers in the `RPM_WINDOW_S` before `now`."""
        times = self.answers_at
        while times and now - times[0] > RPM_WINDOW_S:
            times.popleft()
        return sum(1 for at in times if at <= now)

    @property
    def p95_ms(self) -> float | None:
        return nearest_rank(self.latencies_ms, 0.95)

    @property
    def cost_known(self) -> bool:
        return self.unpriced == 0


class EndpointFigures:
    """The doors of a routed run, in the order the route names them; moved by `RunView`."""

    def __init__(self) -> None:
        self.doors: dict[str, DoorFigures] = {}
        self.latest: float | None = None
        """When the last attempt of a door ended (epoch seconds): the rates of a run that ended
        are as of its end."""

    @property
    def routed(self) -> bool:
        """More than one door: the run panel shows a row each (a single endpoint shows none)."""
        return len(self.doors) > 1

    def rows(self, now: float | None = None) -> list[tuple[DoorFigures, int]]:
        """Each door with its answers of the last minute before `now` (None: before the last
        answer, for a run that no longer runs)."""
        at = now if now is not None else self.latest
        return [(door, door.rpm(at) if at is not None else 0) for door in self.doors.values()]

    def forget_run(self) -> None:
        """An earlier session's calls in flight and its recent answers are not this session's
        (a resumed run's replay): its totals stay."""
        for door in self.doors.values():
            door.in_flight = 0
            door.answers_at.clear()
        self.latest = None

    # ----------------------------------------------------------------- the events

    def concurrency_changed(self, event: ConcurrencyChanged) -> None:
        if not event.endpoint:
            return
        door = self.doors.get(event.endpoint)
        if door is None:
            door = self.doors[event.endpoint] = DoorFigures(event.endpoint)
        if event.endpoint_limit is not None:
            door.limit = event.endpoint_limit

    def rate_limits(self, event: RateLimitsLearned) -> None:
        door = self.doors.get(event.endpoint) if event.endpoint else None
        if door is not None:
            door.rpm_limit = event.rpm or door.rpm_limit
            door.tpm_limit = event.tpm or door.tpm_limit

    def summed_limits(self) -> tuple[int | None, int | None]:
        """The route's RPM and TPM: its doors' added up, where every door's is known (keys of one
        provider add up); None where one is not."""
        doors = self.doors.values()
        rpms, tpms = [d.rpm_limit for d in doors], [d.tpm_limit for d in doors]
        return (
            sum(r for r in rpms if r) if rpms and all(rpms) else None,
            sum(t for t in tpms if t) if tpms and all(tpms) else None,
        )

    def switched(self, event: EndpointSwitched) -> None:
        """The door a switch is about opened (the calls went elsewhere) or came back (its probe
        answered: the switch goes to the door itself)."""
        door = self.doors.get(event.source) if event.source else None
        if door is not None:
            door.open = event.endpoint != event.source

    def started(self, endpoint: str) -> None:
        door = self.doors.get(endpoint)
        if door is not None:
            door.in_flight += 1

    def ended(self, attempt: Attempt, at: float | None, *, in_flight: bool = True) -> None:
        """An attempt on a door ended (`in_flight`: its start was seen, so a slot comes back; a
        planner's or judge's call has no start event)."""
        door = self.doors.get(attempt.endpoint)
        if door is None:
            return
        if in_flight:
            door.in_flight = max(0, door.in_flight - 1)
        door.requests += 1
        if attempt.cost_usd is not None:
            door.cost_usd += attempt.cost_usd
        elif attempt.usage.total:
            door.unpriced += 1
        error = attempt.error
        if error is not None and error.kind is ErrorClass.RATE_LIMIT:
            door.rate_limited += 1
        elif error is not None and attempt.outcome != "ok":
            door.errors += 1
        if attempt.outcome == "ok":
            door.answered += 1
            door.latencies_ms.add(attempt.latency_ms)
            ended = time.time() if at is None else at
            door.answers_at.append(ended)
            while ended - door.answers_at[0] > RPM_WINDOW_S:  # bounded by a minute's answers, painted or not
                door.answers_at.popleft()
            self.latest = ended if self.latest is None else max(self.latest, ended)
