"""A route: several endpoints (doors) behind one swarm, each with its own pacing.

Each door keeps what a single-endpoint run keeps for its one provider: its in-flight limit and
Retry-After gate (`AdmissionController`), its RPM/TPM buckets learned from its own headers and
429s (`RateLimits`), its adaptive limit (`AdaptiveConcurrency`), its circuit breaker and its
price. The route's admission (`RouteAdmission`) is the engine's: a slot is free when the route's
strategy finds a door with room, and that door's slot and rate budget are taken with it, in the
same step (the engine's dispatcher sends the admitted task at once, `routing.Endpoints.take`).

Strategies (`--route`):

* `fallback`: the first door whose breaker is closed takes every call (the chain's next one while
  those before it are open; back to the first when its probe answers);
* `balance`: the healthy door with the most headroom (the largest share of its in-flight limit
  free, among those whose rate budget has room now), so keys of one provider add up;
* `cheapest` / `fastest`: healthy doors by price per expected call / by observed median latency
  (a door not yet measured first, to measure it), spilling to the next while the preferred one is
  full or paced;
* a door priced above `--max-price` (USD per 1M output tokens) is never used;
* a door that says it cannot serve this run at all is left for the run (`Route.leave`): it does not
  serve the model (404 `model_not_found`), or it states a rate limit of 0. No strategy chooses it
  again; its calls go to the doors still in use (`routing.Endpoints.observe` says so, by name).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from swarm_tui.engine.pacing.admission import AdmissionController
from swarm_tui.engine.pacing.limits import AdaptiveConcurrency, RateLimits
from swarm_tui.engine.routing.failover import CircuitBreaker
from swarm_tui.pricing import Price
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.routes import Strategy

NOMINAL_CALL = (1_000, 500)
"""The prompt and answer tokens `cheapest` prices a call at: its endpoints ranked by a blend of
their input and output prices."""

LATENCY_WINDOW = 200
"""Answers a door's median latency is taken over (`fastest`)."""


@dataclass
class Door:
    """One endpoint of a route, with its own pacing (see the module doc)."""

    client: ProviderClient
    admission: AdmissionController
    rate_limits: RateLimits
    adaptive: AdaptiveConcurrency | None
    breaker: CircuitBreaker | None
    price: Price | None = None
    shared: bool = False
    """Its admission is the engine's own (a run of one endpoint, or the legacy primary/fallback
    pair): the engine takes and gives back its slots, nothing is counted twice."""
    sends: int = 0
    """Requests sent to it (what its rate-limit headers are read against)."""
    latencies_s: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))
    left: str = ""
    """Why the route left it for the run ("": it is in use; see the module doc)."""

    @property
    def name(self) -> str:
        return self.client.name

    @property
    def healthy(self) -> bool:
        """Its breaker lets calls through (closed, or its one half-open probe is due)."""
        breaker = self.breaker
        return breaker is None or breaker.admits()

    def saturated(self, wait: float | None) -> bool:
        """It has no room a wait would bring (a `cheapest`/`fastest` route spills past it): every
        slot up to its ceiling is taken, or a stated rate limit or the provider's Retry-After paces
        it; not while its adaptive limit is still growing, nor while its first answer is awaited."""
        if wait is None:
            ceiling = self.adaptive.ceiling if self.adaptive is not None else self.admission.limit
            return self.admission.in_flight >= ceiling or self.admission.paused
        limits = self.rate_limits
        return limits.rpm is not None or limits.tpm is not None or self.admission.gate_remaining_s > 0

    def median_latency_s(self) -> float | None:
        if not self.latencies_s:
            return None
        ordered = sorted(self.latencies_s)
        return ordered[len(ordered) // 2]

    def call_price(self, prompt_tokens: int, answer_tokens: int) -> float:
        """What one call of this size is expected to cost here (inf: no price known)."""
        price = self.price
        if price is None:
            return math.inf
        return (prompt_tokens * price.input + answer_tokens * price.output) / 1_000_000


class Route:
    """The doors of a run and the strategy that chooses among them."""

    def __init__(self, doors: Sequence[Door], strategy: Strategy, max_price: float | None = None) -> None:
        self.doors = list(doors)
        self.strategy = strategy
        self.max_price = max_price
        self.allowed = [d for d in self.doors if max_price is None or _output_price(d.price) <= max_price]
        """The doors `--max-price` lets calls go to (the CLI refuses a route that leaves none)."""

    @property
    def in_use(self) -> list[Door]:
        """The doors calls may go to: allowed by `--max-price` and not left (none: every door was left)."""
        return [d for d in self.allowed or self.doors if not d.left]

    def leave(self, door: Door, reason: str) -> bool:
        """No call goes to `door` again this run (`reason`: why); True when it was in use until now."""
        if door.left:
            return False
        door.left = reason
        return True

    def order(self, prompt_tokens: int = NOMINAL_CALL[0], answer_tokens: int = NOMINAL_CALL[1]) -> list[Door]:
        """The doors in the order the strategy prefers them for a call of this size, healthy first."""
        doors = self.in_use or self.allowed or self.doors  # every door left: the run is stopping
        match self.strategy:
            case Strategy.CHEAPEST:
                doors = sorted(doors, key=lambda d: d.call_price(prompt_tokens, answer_tokens))
            case Strategy.FASTEST:
                doors = sorted(doors, key=lambda d: d.median_latency_s() or 0.0)
            case Strategy.BALANCE:
                doors = sorted(doors, key=_used_share)
        healthy = [d for d in doors if d.healthy]
        return healthy or doors  # every door open: keep sending (the probes bring them back)

    def choose(
        self, tokens: int, prompt_tokens: int = NOMINAL_CALL[0], answer_tokens: int = NOMINAL_CALL[1]
    ) -> tuple[Door | None, float | None]:
        """The door the next call goes to now (with its slot free and its rate budget room), or None
        and how long until one may have room (None: until a slot is given back)."""
        order = self.order(prompt_tokens, answer_tokens)
        if self.strategy is Strategy.FALLBACK:
            order = order[:1]  # a chain waits for its current door: the next one takes over only when it opens
        soonest: float | None = None
        prefers = self.strategy in (Strategy.CHEAPEST, Strategy.FASTEST)
        for door in order:
            wait = door.admission.room_wait_s(tokens)
            if wait is not None and wait <= 0:
                return door, 0.0
            if wait is not None:
                soonest = wait if soonest is None else min(soonest, wait)
            if prefers and not door.saturated(wait):
                break  # the preferred door will have room: wait for it rather than pay more (or wait longer)
        return None, soonest

    @property
    def limit(self) -> int:
        """The sum of the doors' in-flight limits (but a door left's: it holds no call again)."""
        return sum(d.admission.limit for d in self.doors if not d.left) or sum(d.admission.limit for d in self.doors)


def _used_share(door: Door) -> float:
    return door.admission.in_flight / max(door.admission.limit, 1)


def _output_price(price: Price | None) -> float:
    return math.inf if price is None else price.output


class RouteAdmission(AdmissionController):
    """The engine's admission over a route: a slot is one of a door's (see the module doc)."""

    def __init__(self, route: Route, clock: Callable[[], float] = time.monotonic) -> None:
        self.route = route
        super().__init__(max(1, route.limit), rate_limits=RateLimits(clock=clock), clock=clock)
        self.cap: int | None = None  # (the base's __init__ set one: the doors' sum rules until the user sets one)
        """The user's limit on the route's total (`+`/`-`, `set_concurrency`); None: the doors' sum."""
        self.chosen: Door | None = None
        """The door the last admitted call was given a slot at (taken by `routing.Endpoints.take`)."""
        for door in route.doors:
            door.admission.on_change(self.changed)  # a door's room is the route's

    @property
    def paces_tokens(self) -> bool:
        return any(d.rate_limits.tokens is not None for d in self.route.doors)

    @property
    def gate_remaining_s(self) -> float:
        return min(d.admission.gate_remaining_s for d in self.route.doors)

    def room_wait_s(self, tokens: int) -> float | None:
        if self.paused or self.in_flight >= self.limit:
            return None
        door, wait = self.route.choose(tokens)
        if door is None:
            return wait if wait is not None else None
        self.chosen = door
        return 0.0

    def waiting_for(self, tokens: int = 0) -> tuple[str, float | None, str]:
        """The route's own holds (pause, suspension, its total), else what holds its preferred door."""
        if self.paused or self.held or self.in_flight >= self.limit:
            return super().waiting_for(tokens)
        for door in self.route.order():
            reason, wait, detail = door.admission.waiting_for(tokens)
            if not reason:
                return "", None, ""
            return reason, wait, f"{door.name}: {detail}" if detail else door.name
        return "", None, ""

    def take(self, tokens: int) -> None:
        self.in_flight += 1
        door = self.chosen
        assert door is not None, "a route admits a call at the door it chose"
        door.admission.take(tokens)
        door.sends += 1
        if door.breaker is not None:
            door.breaker.note_sent()

    @property
    def limit(self) -> int:
        """The route's in-flight limit: the sum of its doors' (each adaptive on its own), capped by the user's."""
        total = self.route.limit
        return total if self.cap is None else min(total, self.cap)

    @limit.setter
    def limit(self, value: int) -> None:
        self.cap = value
