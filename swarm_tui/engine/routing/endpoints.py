"""Where a live call goes: the run's endpoints and the pacing each call answers to.

Three shapes, one surface:

* one endpoint: every call goes there, paced by the engine's own admission;
* the primary and its fallback (`--fallback-base-url`): the engine's admission paces both, and
  a circuit breaker on the primary sends new calls to the fallback while it is open;
* a route (`--provider a,b,c --route ...`, `route.Route`): each endpoint has its own admission,
  rate limits, adaptive limit and breaker, and the engine's admission is the route's
  (`route.RouteAdmission`), which chooses the door as it admits a call.

The lanes ask `take()` for the endpoint of a call just admitted, `pacing(client)` for the door
whose rate limits, gate and adaptive limit a call's outcome teaches, and `landed(client)` when an
admitted call is over.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from swarm_tui.core.call_errors import CallError
from swarm_tui.core.events import ConcurrencyChanged, EndpointSwitched, RateLimitsLearned
from swarm_tui.engine.kernel.outbox import Outbox
from swarm_tui.engine.pacing.admission import AdmissionController
from swarm_tui.engine.pacing.limits import AdaptiveConcurrency, RateLimits
from swarm_tui.engine.routing.doors import Door, Route, RouteAdmission
from swarm_tui.engine.routing.failover import CircuitBreaker
from swarm_tui.pricing import Price
from swarm_tui.providers.client import ProviderClient
from swarm_tui.providers.routes import Strategy


@dataclass(frozen=True)
class RouteSpec:
    """A routed run's endpoints after the primary (and its fallback), each with its price, and
    the strategy that spreads calls over them (`route.Strategy`)."""

    others: Sequence[tuple[ProviderClient, Price | None]]
    strategy: str = "fallback"
    max_price: float | None = None
    """USD per 1M output tokens: an endpoint priced above it is never sent to."""


class Endpoints:
    """The run's endpoints (see the module doc) and the breakers between them."""

    def __init__(
        self,
        outbox: Outbox,
        client: ProviderClient,
        fallback: ProviderClient | None,
        *,
        admission: AdmissionController,
        rate_limits: RateLimits,
        adaptive: AdaptiveConcurrency | None,
        adapt: Callable[[int, str], None],
        route: Route | None = None,
        escalation: ProviderClient | None = None,
    ) -> None:
        """`outbox`: where what the endpoints do is said (a switch, a door's limit); `admission`,
        `rate_limits`, `adaptive` and `adapt`: the engine's own pacing (a run of one endpoint, or
        the pair); `route`: the doors of a routed run, paced each on its own; `escalation`: the
        stronger endpoint a task goes to when its answers could not be used (`--escalate`), a door
        of its own that no strategy chooses, under the engine's admission."""
        self._outbox = outbox
        self.client = client
        self.fallback = fallback
        self.route_of_doors = route
        self._adapt_shared = adapt
        self.breaker = CircuitBreaker() if fallback is not None and route is None else None
        if route is not None:
            self.doors = route.doors
        else:
            shared = [client, *([fallback] if fallback is not None else [])]
            self.doors = [
                Door(c, admission, rate_limits, adaptive, self.breaker if c is client else None, shared=True)
                for c in shared
            ]
        self._by_name = {door.name: door for door in self.doors}
        self.escalation = escalation
        if escalation is not None:
            self._by_name[escalation.name] = Door(
                escalation,
                admission,
                RateLimits(escalation.profile.rpm, escalation.profile.tpm),
                None,
                None,
                shared=True,
            )

    @property
    def routed(self) -> bool:
        return self.route_of_doors is not None

    # ----------------------------------------------------------------- where calls go

    def route(self) -> ProviderClient:
        """Where a call with no slot of its own goes (a hedge's backup, a cache key's endpoint): the
        door the strategy prefers now; for the pair, the primary unless its breaker is open (in
        half-open state, exactly one probe goes to the primary)."""
        if self.route_of_doors is not None:
            return self.route_of_doors.order()[0].client
        if self.fallback is None or self.breaker is None or self.breaker.use_primary():
            return self.client
        return self.fallback

    def take(self, admission: AdmissionController) -> ProviderClient:
        """The endpoint of the call `admission` just admitted (a route's admission chose its door)."""
        if isinstance(admission, RouteAdmission) and admission.chosen is not None:
            door, admission.chosen = admission.chosen, None
            return door.client
        return self.route()

    def escalate(self, taken: ProviderClient) -> ProviderClient:
        """The escalation endpoint, for a call admitted at `taken`'s door (its slot there goes back:
        the call holds the engine's own)."""
        assert self.escalation is not None, "a task is escalated only where there is somewhere to go"
        self.landed(taken)
        return self.escalation

    def pacing(self, client: ProviderClient) -> Door:
        """The door whose limits, gate and adaptive limit a call to `client` answers to."""
        return self.door_named(client.name)

    def door_named(self, endpoint: str) -> Door:
        """The door of the endpoint named `endpoint` (the first door for a name it does not know)."""
        return self._by_name.get(endpoint) or self.doors[0]

    def landed(self, client: ProviderClient) -> None:
        """An admitted call to `client` is over: its door's slot goes back (a route's; the engine
        gives back its own)."""
        door = self._by_name.get(client.name)
        if door is not None and not door.shared:
            door.admission.release()

    def adapt(self, door: Door, limit: int, reason: str) -> None:
        """A door's adaptive limit moved: the engine's limit (one endpoint, the pair), or the door's
        and the route's total."""
        if door.shared:
            self._adapt_shared(limit, reason)
            return
        door.admission.set_limit(limit)
        total = self.route_of_doors.limit if self.route_of_doors is not None else limit
        self._outbox.emit(ConcurrencyChanged(total, f"{door.name}: {reason}", endpoint=door.name, endpoint_limit=limit))

    def announce(self) -> None:
        """A routed run's start: each endpoint's own limit and the limits it was told (the
        console's endpoint rows begin from these)."""
        if self.route_of_doors is None:
            return
        total = sum(d.admission.limit for d in self.doors)
        for door in self.doors:
            limit = door.admission.limit
            self._outbox.emit(ConcurrencyChanged(total, "start", endpoint=door.name, endpoint_limit=limit))
            limits = door.rate_limits
            if limits.rpm or limits.tpm:
                self._outbox.emit(RateLimitsLearned(limits.rpm, limits.tpm, endpoint=door.name))

    def observe(self, client: ProviderClient, error: CallError | None, latency_s: float | None = None) -> None:
        """An attempt on `client` ended (`error` None: it answered): its breaker may switch."""
        door = self._by_name.get(client.name)
        if door is None:
            return
        if error is None and latency_s is not None:
            door.latencies_s.append(latency_s)
        if self.route_of_doors is not None:
            self._observe_door(door, error)
            return
        if self.breaker is None or self.fallback is None or client is not self.client:
            return
        was_primary = self.breaker.state == "closed"
        reason = self.breaker.on_primary_result(error)
        if reason is not None:
            target = self.client.name if self.breaker.state == "closed" else self.fallback.name
            self._outbox.emit(EndpointSwitched(target, reason, from_primary=was_primary, source=client.name))

    def _observe_door(self, door: Door, error: CallError | None) -> None:
        unusable = _cannot_serve(error) if error is not None else None
        if unusable is not None and self.route_of_doors is not None and door in self.route_of_doors.doors:
            self._leave(door, unusable)
            return
        breaker = door.breaker
        if breaker is None:
            return
        was_closed = breaker.state == "closed"
        reason = breaker.on_primary_result(error)
        if reason is None:
            return
        if breaker.state == "closed":  # its probe answered: it takes its share (or its place) again
            self._outbox.emit(EndpointSwitched(door.name, reason, from_primary=False, source=door.name))
            return
        others = [d for d in self.route_of_doors.order() if d is not door] if self.route_of_doors else []
        target = others[0].name if others else door.name
        self._outbox.emit(
            EndpointSwitched(target, reason, from_primary=was_closed and door is self.doors[0], source=door.name)
        )

    def _leave(self, door: Door, why: str) -> None:
        """`door` said it cannot serve this run: the route leaves it, and says so by name (when no
        door is left, the lane stops the run saying why: `none_left`)."""
        route = self.route_of_doors
        assert route is not None
        if not route.leave(door, why):
            return
        in_use = route.in_use
        if not in_use:
            return
        where = ", ".join(d.name for d in in_use)
        reason = f"endpoint {door.name} {why}: the route leaves it for this run, its calls go to {where}"
        first = door is self.doors[0]
        self._outbox.emit(EndpointSwitched(route.order()[0].name, reason, from_primary=first, source=door.name))
        self._outbox.emit(ConcurrencyChanged(route.limit, f"{door.name} left", endpoint=door.name))

    def has_left(self, endpoint: str) -> bool:
        """The route left the door of `endpoint` (it cannot serve this run)."""
        door = self._by_name.get(endpoint)
        return door is not None and bool(door.left)

    def none_left(self) -> str | None:
        """Why no call can go anywhere: every door of the route was left (None: one is in use)."""
        route = self.route_of_doors
        if route is None or route.in_use:
            return None
        left = "; ".join(f"{d.name} {d.left}" for d in route.doors if d.left)
        return (
            f"no endpoint of the route can serve this run ({left}): nothing more is sent; check the model "
            f"name and each endpoint's key, then `swarm-tui resume` the run"
        )

    def fail_over(self, reason: str) -> bool:
        """Send new attempts elsewhere now (the judge saw quality drop): the pair's fallback, or a
        route's next door; False when there is nowhere to go. It stays there for the run
        (a probe tells an endpoint answers again, not that its answers are good again)."""
        if self.route_of_doors is not None:
            current = self.route_of_doors.order()
            if len(current) < 2 or current[0].breaker is None:
                return False
            current[0].breaker.force_open(reason)
            self._outbox.emit(EndpointSwitched(current[1].name, reason, from_primary=True, source=current[0].name))
            return True
        if self.fallback is None or self.breaker is None:
            return False
        self.breaker.force_open(reason)
        self._outbox.emit(EndpointSwitched(self.fallback.name, reason, from_primary=True, source=self.client.name))
        return True

    def can_fail_over(self, endpoint: str) -> bool:
        """An attempt that went to `endpoint` may go elsewhere instead."""
        if self.route_of_doors is not None:
            return any(d.name != endpoint and d.healthy for d in self.route_of_doors.in_use)
        return self.fallback is not None and endpoint == self.client.name


def _cannot_serve(error: CallError) -> str | None:
    """Why an endpoint that answered `error` cannot serve this run at all (None: it may, later):
    it does not serve the model, or it states a rate limit of 0."""
    if error.lacks_model:
        status = f" {error.status}" if error.status else ""
        code = f" {error.code}" if error.code else ""
        return f"does not serve the model ({error.kind}{status}{code}: {error.message[:160]})"
    if error.states_zero_limit:
        stated = ", ".join(
            f"{k}: {v}" for k, v in sorted(error.rate_headers.items()) if k.startswith("x-ratelimit-limit")
        )
        return f"states a rate limit of 0 ({stated}): no wait brings it room"
    return None


def build_route(
    doors: Sequence[tuple[ProviderClient, Price | None]],
    strategy: str,
    *,
    concurrency: int,
    adaptive: bool,
    max_price: float | None = None,
) -> Route:
    """The doors of a routed run, each with its own admission, rate limits, adaptive limit and
    breaker (`doors`: each endpoint's client and price, in the route's order)."""
    built = []
    names = [client.name for client, _ in doors]
    for client, price in doors:
        profile = client.profile
        ceiling = profile.concurrency or concurrency
        rate_limits = RateLimits(profile.rpm, profile.tpm)
        door_admission = AdmissionController(ceiling, rate_limits=rate_limits)
        door_adaptive = AdaptiveConcurrency(ceiling) if adaptive else None
        if door_adaptive is not None:
            door_admission.set_limit(door_adaptive.limit)
        rest = [n for n in names if n != client.name]
        breaker = CircuitBreaker(
            subject=f"endpoint {client.name}",
            elsewhere=("the route's other endpoints (" + ", ".join(rest) + ")") if rest else "it still",
        )
        built.append(Door(client, door_admission, rate_limits, door_adaptive, breaker, price=price))
    return Route(built, Strategy(strategy), max_price)
