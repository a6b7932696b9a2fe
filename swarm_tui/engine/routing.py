"""Where a live call goes: the primary endpoint, or its fallback while the circuit breaker is open."""

from __future__ import annotations

from ..core.errors import CallError
from ..core.events import EndpointSwitched
from ..core.ports import LaneHost
from ..providers.client import ProviderClient
from .failover import CircuitBreaker


class Endpoints:
    """The run's primary endpoint and its fallback (if any), and the breaker between them."""

    def __init__(self, host: LaneHost, client: ProviderClient, fallback: ProviderClient | None) -> None:
        self.host = host
        self.client = client
        self.fallback = fallback
        self.breaker = CircuitBreaker() if fallback is not None else None

    def route(self) -> ProviderClient:
        """Where the next attempt goes (in half-open state, exactly one probe goes to the primary)."""
        if self.fallback is None or self.breaker is None or self.breaker.use_primary():
            return self.client
        return self.fallback

    def observe(self, client: ProviderClient, error: CallError | None) -> None:
        """An attempt on the primary ended (`error` None: it answered): the breaker may switch."""
        if self.breaker is None or self.fallback is None or client is not self.client:
            return
        was_primary = self.breaker.state == "closed"
        reason = self.breaker.on_primary_result(error)
        if reason is not None:
            target = self.client.name if self.breaker.state == "closed" else self.fallback.name
            self.host.emit(EndpointSwitched(target, reason, from_primary=was_primary))

    def fail_over(self, reason: str) -> bool:
        """Send new attempts to the fallback now (the judge saw quality drop on the primary);
        False when there is no fallback. Half-open probes bring the primary back as usual."""
        if self.fallback is None or self.breaker is None:
            return False
        self.breaker.force_open(reason)
        self.host.emit(EndpointSwitched(self.fallback.name, reason, from_primary=True))
        return True

    def can_fail_over(self, endpoint: str) -> bool:
        """An attempt that went to `endpoint` may go to the fallback instead."""
        return self.fallback is not None and endpoint == self.client.name
