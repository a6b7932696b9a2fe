"""A run held, not failed, while the provider cannot serve the account: quota spent, or a wait asked
for past `--max-retry-after`.

Two errors may be the account's rather than the request's: a quota or billing error (OpenAI
`insufficient_quota`, DeepSeek 402, Moonshot `exceeded_current_quota_error`, a spend limit:
`ErrorClass.QUOTA`) and a Retry-After past `--max-retry-after` (a provider saying "come back in
11 days"). When one meets a call that no fallback can take, nothing more is sent while one cheap
probe (`probe_body`: one token of one word, journaled and billed as phase `probe`) asks whose
it is:

* the probe is answered: the error was the request's own (a model the key may not use, a spend
  limit per request, a wait asked of that call): its task goes on as after any failure (a quota
  error fails it, a long Retry-After is honoured up to the cap and counted);
* the probe meets it too: the account cannot be served. The run is **suspended**: nothing new is
  sent (admission holds every call), every call that meets the error goes back in line, its
  attempt not counted toward `--max-attempts` (neither error is billed: nothing is paid twice);
  a probe at a growing interval (quota: `PROBE_FIRST_S`, doubling, at most `PROBE_MAX_S`; a
  long Retry-After: every cap) resumes the run by itself once one is answered (`SuspensionEnded`).

The wait is bounded: past `--max-suspend` (default an hour) the run stops, resumable (exit 75,
sysexits' EX_TEMPFAIL: try again later); with `--on-quota stop` it stops as soon as it is
suspended. Every step is an event (`RunSuspended`, `SuspensionEnded`), so a banner, the log and
`--bell` say it.

Why a suspension and not attempts for the long Retry-After: counting a capped wait toward the
attempts fails tasks that were never sent, on a provider that may well come back; a suspension
fails nothing, says what it waits for, and ends (answered, or past its bound) by itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any

from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.decide import Next
from swarm_tui.core.events import Attempt, RateGateClosed, RunSuspended, SuspensionEnded, TaskFailed, TaskRetrying
from swarm_tui.core.quota import STOP, WAIT

if TYPE_CHECKING:
    from swarm_tui.core.task import JSONObject
    from swarm_tui.engine.engine import SwarmEngine

Probe = Callable[[str, "JSONObject"], Coroutine[Any, Any, "CallError | None"]]
"""Send one probe to the endpoint named (`direct.DirectLane.probe`): None when it was answered."""

PROBE_FIRST_S = 2.0
PROBE_GROWTH = 2.0
PROBE_MAX_S = 300.0
DEFAULT_MAX_SUSPEND_S = 3600.0
QUOTA = "quota"
RETRY_AFTER = "retry_after"


def probe_body(model: object) -> JSONObject:
    """The cheapest call that tells whether the account is served: one token of one word."""
    body: JSONObject = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
    if isinstance(model, str) and model:
        body["model"] = model
    return body


class Suspension:
    """The engine's suspension (see the module doc): whether it holds, since when, its probes."""

    def __init__(
        self,
        engine: SwarmEngine,
        probe: Probe,
        *,
        on_quota: str = WAIT,
        max_suspend_s: float | None = DEFAULT_MAX_SUSPEND_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self._probe = probe
        self.on_quota = on_quota
        self.max_suspend_s = max_suspend_s
        self._clock = clock
        self.kind: str | None = None
        """Why the run is suspended (`quota`, `retry_after`); None: it is not."""
        self.reason = ""
        self.endpoint = ""
        self.since = 0.0
        self.every_s = PROBE_FIRST_S
        self.suspensions = 0
        """How many times this session was suspended."""
        self._model: object = None
        self._timer: asyncio.TimerHandle | None = None
        self._probing: asyncio.Task[None] | None = None
        self._check: asyncio.Task[CallError | None] | None = None
        """The probe deciding whether a first quota error is the account's or the request's."""

    @property
    def active(self) -> bool:
        return self.kind is not None

    def takes(self, error: CallError, can_fail_over: bool) -> bool:
        """Whether a failed call's error is the suspension's: quota, or a Retry-After past the cap
        (the caller's `capped` error says what was asked), with nowhere else to send it."""
        if can_fail_over or self.engine.stopping is not None:
            return False
        return error.kind is ErrorClass.QUOTA or (error.is_rate_limit and error.retry_after_asked_s is not None)

    def hit(self, index: int, attempt: Attempt, error: CallError, endpoint: str) -> None:
        """A call met the error (`takes` said so): while the run is suspended its task goes back in
        line, uncounted; else the task waits for a probe to say whose the error is (the account's:
        the run is suspended; the request's: the task goes on as after any failure)."""
        engine = self.engine
        self._model = engine.tasks[index].body.get("model") if index in engine.tasks else None
        if self.active:
            self._requeue(index, attempt, self._wait_of(error, endpoint))
            return
        engine.admission.suspend()  # nothing more to a maybe empty account while the probe asks
        if self._check is None:
            self._check = asyncio.create_task(self._probe(endpoint, probe_body(self._model)), name="account-check")
        decide = asyncio.create_task(self._decide(index, attempt, error, endpoint, self._check), name=f"check-{index}")
        engine.queue.work(index, decide)  # the run waits for the verdict, no slot held

    async def _decide(
        self, index: int, attempt: Attempt, error: CallError, endpoint: str, check: asyncio.Task[CallError | None]
    ) -> None:
        engine = self.engine
        try:
            verdict = await asyncio.shield(check)
        except asyncio.CancelledError:  # the run stopped meanwhile: the task is unfinished, in line
            engine.queue.worked(index, _current())
            engine.leave_unfinished(index, [dataclasses.replace(attempt, outcome="cancelled")])
            raise
        finally:
            if self._check is check:
                self._check = None
        engine.queue.worked(index, _current())
        if verdict is not None and self.takes(verdict, can_fail_over=False):  # the account's: the run holds
            if not self.active:
                kind = QUOTA if error.kind is ErrorClass.QUOTA else RETRY_AFTER
                self._begin(kind, self._reason(kind, error, endpoint), endpoint, every_s=self._first_probe_s(error))
            self._requeue(index, attempt, self._wait_of(error, endpoint))
            return
        if not self.active:  # the account is served (or the probe says nothing): the error is this request's
            engine.admission.unsuspend()
        self._as_usual(index, attempt, error, endpoint)

    def _as_usual(self, index: int, attempt: Attempt, error: CallError, endpoint: str) -> None:
        """The request's own refusal: failed (quota is never retried), or retried after its capped
        wait and counted, as after any failure (`RetryPolicy.after_failure`)."""
        engine = self.engine
        decision = engine.retry_policy.after_failure(
            error, engine.numbers.in_round(index), stopping=engine.stopping is not None
        )
        if decision.resumable:  # a stop, not the task's end: it waits, unfinished, for the next run
            engine.leave_unfinished(index, [dataclasses.replace(attempt, outcome="retry")])
            return
        if decision.next is Next.GIVE_UP:
            failed = dataclasses.replace(attempt, outcome="failed")
            engine.outbox.commit(partial(engine.journal.record_failure, failed), events=[TaskFailed(failed)])
            engine.check_failure_rate()
            return
        delay = decision.delay_s
        if error.retry_after_s:
            self._close_gate(error, endpoint)
        retried = dataclasses.replace(attempt, retry_in_s=round(delay, 3))
        engine.outbox.commit(partial(engine.journal.record_retry, retried), events=[TaskRetrying(retried, delay)])
        engine.retry_soon(index, delay)

    def _wait_of(self, error: CallError, endpoint: str) -> float:
        """A long Retry-After closes the gate for the cap (and is said so): the task's wait."""
        if error.kind is ErrorClass.QUOTA or not error.retry_after_s:
            return 0.0
        self._close_gate(error, endpoint)
        return error.retry_after_s

    def _close_gate(self, error: CallError, endpoint: str) -> None:
        engine = self.engine
        wait = error.retry_after_s or 0.0
        if engine.endpoints.door_named(endpoint).admission.close_gate(wait):
            engine.live.last_retry_after_asked_s = error.retry_after_asked_s
            engine.outbox.emit(RateGateClosed(wait, asked_s=error.retry_after_asked_s))

    def _first_probe_s(self, error: CallError) -> float:
        if error.kind is ErrorClass.QUOTA:
            return PROBE_FIRST_S
        return max(0.1, error.retry_after_s or PROBE_FIRST_S)

    def _reason(self, kind: str, error: CallError, endpoint: str) -> str:
        if kind == QUOTA:
            return f"{endpoint}: {error.message[:200]}"
        cap = self.engine.settings.pacing.max_retry_after_s
        asked = error.retry_after_asked_s or 0.0
        return f"{endpoint} asked to wait {asked:g}s (Retry-After), more than --max-retry-after {cap:g}s"

    def _requeue(self, index: int, attempt: Attempt, delay_s: float) -> None:
        """Back in line (after `delay_s`), its attempt journaled as a retry not counted."""
        engine = self.engine
        engine.numbers.uncount(index)
        attempt = dataclasses.replace(attempt, outcome="retry", retry_in_s=round(delay_s, 3))
        engine.outbox.commit(partial(engine.journal.record_retry, attempt), events=[TaskRetrying(attempt, delay_s)])
        engine.retry_soon(index, delay_s)

    def _begin(self, kind: str, reason: str, endpoint: str, *, every_s: float = PROBE_FIRST_S) -> None:
        engine = self.engine
        self.kind, self.reason, self.endpoint = kind, reason, endpoint
        self.since = self._clock()
        self.every_s = every_s
        self.suspensions += 1
        engine.admission.suspend()
        stop = self.on_quota == STOP
        engine.outbox.emit(
            RunSuspended(
                kind,
                reason,
                endpoint,
                probe_every_s=None if stop else round(every_s, 3),
                until_s=None if stop else self.max_suspend_s,
            )
        )
        if stop:
            engine.stop_suspended(kind, f"suspended ({kind}): {reason}; --on-quota stop: resume the run later")
            return
        self._schedule()

    def _schedule(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self.every_s, self._due)

    def _due(self) -> None:
        self._timer = None
        engine = self.engine
        if not self.active or engine.stopping is not None:
            return
        held_s = self._clock() - self.since
        if self.max_suspend_s is not None and held_s >= self.max_suspend_s:
            engine.stop_suspended(
                self.kind or QUOTA,
                f"suspended {held_s:.0f}s ({self.reason}), past --max-suspend {self.max_suspend_s:g}s: "
                "stopped, resumable (`swarm-tui resume`)",
            )
            return
        self._probing = asyncio.create_task(self._probe_now(), name="suspension-probe")

    async def _probe_now(self) -> None:
        error = await self._probe(self.endpoint, probe_body(self._model))
        if not self.active:
            return
        if error is None:
            self.end()
            return
        if self.kind == QUOTA:
            self.every_s = min(PROBE_MAX_S, self.every_s * PROBE_GROWTH)
        elif error.retry_after_s:
            self.every_s = max(0.1, error.retry_after_s)
        self._schedule()

    def end(self) -> None:
        """The provider answered: the run sends again."""
        kind = self.kind
        if kind is None:
            return
        held_s = self._clock() - self.since
        self.kind = None
        self.engine.admission.unsuspend()
        self.engine.outbox.emit(SuspensionEnded(kind, round(held_s, 3)))

    def close(self) -> None:
        """The run ends: no probe is due any more."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._probing is not None and not self._probing.done():
            self._probing.cancel()
        if self._check is not None and not self._check.done():
            self._check.cancel()

    def describe(self) -> dict[str, object]:
        """For summary.json: whether and why the run was suspended."""
        return {
            "suspensions": self.suspensions,
            "on_quota": self.on_quota,
            "max_suspend_s": self.max_suspend_s,
            "suspended": self.kind,
        }


def _current() -> asyncio.Task[Any]:
    task = asyncio.current_task()
    assert task is not None
    return task
