"""The direct lane: a call outside the task grid — the planner's, the warm-up's, the aggregator's,
the judge's — through the same admission, budget, retry policy and journal as any task's, under
a negative index (the phase's). Its backoff is waited out with its slot given back.

With the response cache on (`--cache`), a call whose answer the cache holds is not sent: it is
journaled as an attempt of lane `cache` (cost 0, its saving recorded) before any admission, and
an answer that came back is kept (`cache.CacheLane.replay` / `remember`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Protocol

from swarm_tui.core.call_errors import CallError
from swarm_tui.core.events import Attempt, PhaseAttempt
from swarm_tui.core.task import JSONObject
from swarm_tui.engine.answers import refused
from swarm_tui.engine.calls import cached_attempt
from swarm_tui.engine.settings import RunStopped
from swarm_tui.providers.client import CallResult, ProviderClient, StreamDeadlines
from swarm_tui.util.clock import run_time

if TYPE_CHECKING:
    from swarm_tui.engine.billing import Billing
    from swarm_tui.engine.engine import SwarmEngine
    from swarm_tui.engine.pacing.admission import AdmissionController
    from swarm_tui.engine.routing.endpoints import Endpoints


PROBE = "probe"
"""The phase of a suspended run's probes."""
PROBE_INDEX = -10
"""The index a probe's attempts are journaled under (below the tasks, apart from the other phases')."""


class DirectCache(Protocol):
    """What the direct lane asks of the response cache (`cache_lane.CacheLane`)."""

    def replay(self, body: JSONObject, client: ProviderClient) -> tuple[CallResult, float | None, str | None] | None:
        """(the answer, what it cost when it was paid for, its finish reason), or None: not cached."""

    def remember(
        self, body: JSONObject, client: ProviderClient, result: CallResult, cost_usd: float | None
    ) -> None: ...


class DirectLane:
    def __init__(
        self,
        engine: SwarmEngine,
        endpoints: Endpoints,
        billing: Billing,
        capped: Callable[[CallError], CallError],
        cache: DirectCache | None = None,
    ) -> None:
        """`capped(error)`: the error with its Retry-After honoured up to the run's cap; `cache`:
        the response cache's side for direct calls (`cache.CacheLane`), or None."""
        self.engine = engine
        self.endpoints = endpoints
        self.billing = billing
        self._capped = capped
        self.cache = cache
        self.on_wire = 0
        """Direct calls (planner, aggregator, judge) on the wire now."""

    async def call(
        self,
        phase: str,
        index: int,
        body: JSONObject,
        *,
        client: ProviderClient | None = None,
        admission: AdmissionController | None = None,
    ) -> CallResult:
        """One request outside the task grid; raises the last failure, or `RunStopped` when the
        run stopped (the budget included) before it could go out. `client` and `admission`:
        another endpoint (a judge's) and its own pacing."""
        engine, billing = self.engine, self.billing
        settings = engine.settings
        cache = self.cache
        if cache is not None:
            replayed = cache.replay(body, client or self.endpoints.route())
            if replayed is not None:
                result, saved_usd, finish = replayed
                self._record(phase, cached_attempt(index, engine.numbers.next(index), result, saved_usd, finish))
                return result
        admission = admission or engine.admission
        deadlines = StreamDeadlines(settings.calls.first_token_timeout_s, settings.calls.idle_timeout_s)
        round_attempts = 0
        while True:
            if not await admission.acquire(engine.token_estimate_of(body)):
                raise RunStopped(engine.stopping or "stopped")
            endpoint = client or self.endpoints.take(admission)
            number = engine.numbers.peek(index)
            if not billing.reserve(index, number, body, endpoint.name):
                self._give_back(admission, endpoint)
                if engine.stopping is not None:
                    raise RunStopped(engine.stopping)
                await engine.ledger.room()  # it fits once calls in flight settle
                continue
            engine.numbers.next(index)
            round_attempts += 1
            stalls = engine.stalls
            started_at, t0 = run_time(), stalls.now()
            self.on_wire += 1
            try:
                async with stalls.deadline(settings.calls.timeout_s):
                    result = await endpoint.complete(
                        body, stream=settings.calls.stream, deadlines=deadlines, bounded_by_caller=True
                    )
            except asyncio.CancelledError:  # an abort: the call went out and may be billed
                latency_ms = (stalls.now() - t0) * 1000
                self._record(
                    phase, billing.cut(index, number, endpoint.name, started_at, latency_ms, body, "cancelled")
                )
                raise
            except Exception as exc:
                failure, error = exc, endpoint.classify(exc)
            else:
                latency_ms = (stalls.now() - t0) * 1000
                attempt = billing.answered(index, number, endpoint.name, started_at, latency_ms, result, "ok", body)
                self._record(phase, attempt)
                if cache is not None and not refused(result):  # the caller reads it its own way, but a
                    cache.remember(body, endpoint, result, attempt.cost_usd)  # refusal is never kept
                return result
            finally:
                self._give_back(admission, endpoint)
                self.on_wire -= 1
            retry = engine.retry_policy.should_retry(error, round_attempts) and engine.stopping is None
            billing.unbilled(index, number)
            latency_ms = (stalls.now() - t0) * 1000
            outcome = "retry" if retry else "failed"
            attempt = Attempt(
                index, number, endpoint.name, started_at, latency_ms, outcome, status=error.status, error=error
            )
            self._record(phase, attempt)
            if not retry:
                raise failure
            error = self._capped(error)
            if error.is_rate_limit and error.retry_after_s:
                gate = self.endpoints.pacing(endpoint).admission if admission is engine.admission else admission
                gate.close_gate(error.retry_after_s)
            await asyncio.sleep(engine.retry_policy.delay_s(error, round_attempts))

    async def probe(self, endpoint: str, body: JSONObject) -> CallError | None:
        """One cheap call to ask whether `endpoint` serves the account again (a suspended run's
        probe): sent outside admission (which holds every other call), never retried, journaled
        and billed as phase `probe` under `PROBE_INDEX`; None when it was answered, else its error."""
        engine, billing = self.engine, self.billing
        client = self.endpoints.door_named(endpoint).client
        number = engine.numbers.next(PROBE_INDEX)
        stalls = engine.stalls
        started_at, t0 = run_time(), stalls.now()
        self.on_wire += 1
        try:
            async with stalls.deadline(engine.settings.calls.timeout_s):
                result = await client.complete(body, bounded_by_caller=True)
        except asyncio.CancelledError:
            latency_ms = (stalls.now() - t0) * 1000
            self._record(
                PROBE, billing.cut(PROBE_INDEX, number, client.name, started_at, latency_ms, body, "cancelled")
            )
            raise
        except Exception as exc:
            error = client.classify(exc)
            attempt = Attempt(
                PROBE_INDEX, number, client.name, started_at, (stalls.now() - t0) * 1000, "failed", error.status, error
            )
            self._record(PROBE, attempt)
            return self._capped(error)
        finally:
            self.on_wire -= 1
        latency_ms = (stalls.now() - t0) * 1000
        self._record(
            PROBE, billing.answered(PROBE_INDEX, number, client.name, started_at, latency_ms, result, "ok", body)
        )
        return None

    def _give_back(self, admission: AdmissionController, endpoint: ProviderClient) -> None:
        """The call's slot: the admission's, and its route door's when the run's admission chose one."""
        admission.release()
        if admission is self.engine.admission:
            self.endpoints.landed(endpoint)

    def _record(self, phase: str, attempt: Attempt) -> None:
        engine = self.engine
        engine.outbox.commit(partial(engine.journal.record_attempt, attempt), events=[PhaseAttempt(phase, attempt)])
