"""The live lane: each task the engine admits goes out as a live call and is followed to its outcome.

One attempt is one call — two when a backup was hedged. While it runs, its tail deadlines
(`deadlines.py`) are looked at: past the hedge deadline a backup goes out (`--hedge`, when the
hedge and the budget allow), past the straggler deadline the attempt is abandoned and sent again.
What an ended call means for its task is `outcomes.Outcomes`'s to say (the lane makes its own);
a multi-step agent's tool calls are `agents.ToolSteps`'. The lane owns its calls' TPM
reservations; the engine's queue holds each attempt's handle while it is on the wire.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING

from swarm_tui.core.call_errors import STRAGGLER_CODE, CallError, ErrorClass
from swarm_tui.core.errors import JournalWriteError
from swarm_tui.core.events import Attempt, AttemptEnded, AttemptStarted, RateLimitsLearned
from swarm_tui.core.task import JSONObject
from swarm_tui.engine.billing import Billing
from swarm_tui.engine.calls import Call
from swarm_tui.engine.lanes.agents import ToolSteps
from swarm_tui.engine.lanes.outcomes import Outcomes
from swarm_tui.engine.pacing.deadlines import RECHECK_S, TailDeadlines
from swarm_tui.engine.routing.endpoints import Endpoints
from swarm_tui.engine.settings import HEDGE_MAX_SHARE, HEDGE_QUIET_AFTER_429_S, Trimmer
from swarm_tui.providers.client import CallResult, ProviderClient, StreamDeadlines

if TYPE_CHECKING:
    from swarm_tui.engine.answers import AnswerChecks
    from swarm_tui.engine.engine import SwarmEngine
    from swarm_tui.engine.pacing.limits import LearnedLimits
    from swarm_tui.engine.routing.doors import Door

AnswerKept = Callable[[JSONObject, ProviderClient, CallResult, "float | None"], None]
"""Where a usable answer goes besides the journal (the cache lane's `remember`)."""
StepReplay = Callable[[int], bool]
"""An agent's next model call answered from the response cache (True: it was)."""

log = logging.getLogger(__name__)


class LiveLane:
    """The engine's dispatcher: live calls, their tail, their hedges."""

    def __init__(
        self,
        engine: SwarmEngine,
        endpoints: Endpoints,
        billing: Billing,
        tail: TailDeadlines,
        tools: ToolSteps,
        *,
        checks: AnswerChecks | None = None,
        trimmer: Trimmer | None = None,
        answer_kept: AnswerKept | None = None,
        step_replay: StepReplay | None = None,
    ) -> None:
        """`checks` and `trimmer`: the run's answer checks and the job's trimmer (`outcomes.Outcomes`);
        `answer_kept` and `step_replay`: the response cache's hooks (`cache.CacheLane.remember` and `replay_step`)."""
        self.engine = engine
        self.endpoints = endpoints
        self.billing = billing
        self.tail = tail
        self.tools = tools
        self.settings = engine.settings
        self.deadlines = StreamDeadlines(self.settings.calls.first_token_timeout_s, self.settings.calls.idle_timeout_s)
        self.hedges_sent = 0
        self.sends = 0
        self.last_rate_limited = -1e9
        """When the provider last pushed back (monotonic): no hedge for a while after."""
        self.last_retry_after_asked_s: float | None = None
        """The last Retry-After that was capped: what the provider asked for (shown while waiting)."""
        self.answer_kept = answer_kept
        self.step_replay = step_replay
        self._reserved_tokens: dict[int, int] = {}
        """The TPM reservation of each task's call on the wire."""
        self.outcomes = Outcomes(self, checks, trimmer)

    # ----------------------------------------------------------------- the engine's side

    def resumes_itself(self, index: int) -> bool:
        if self.tools.resumes_itself(index):
            return True
        return self.step_replay is not None and self.step_replay(index)

    def dispatch(self, index: int, tokens: int) -> bool:
        """Send the task's next attempt (its slot and `tokens` of TPM are taken); False when the
        budget had no room for its worst case (the engine gives the slot back and waits)."""
        engine = self.engine
        client = self.endpoints.take(engine.admission)
        if self.outcomes.escalates(index):  # its answers could not be used here: the stronger endpoint
            client = self.endpoints.escalate(client)
        if engine.ledger.budget_usd is not None and not self.billing.reserve(
            index, engine.numbers.peek(index), self.request_body(index, client), client.name
        ):
            self.endpoints.landed(client)  # the engine gives its own slot back
            return False
        self._reserved_tokens[index] = tokens
        self._launch(index, client)
        return True

    def cancel_all(self) -> None:
        """An abort: every call in flight stops (tool runs end with the run, `settle`)."""
        self.engine.queue.cancel_flights()

    async def settle(self) -> None:
        """The run is ending: wait for what is still under way (calls, tool runs) to end."""
        queue = self.engine.queue
        flights = queue.flights()
        if flights:
            await asyncio.gather(*flights, return_exceptions=True)
        for work in queue.tool_runs():  # a stop: tool calls still running end here
            work.cancel()
        tool_runs = queue.tool_runs()
        if tool_runs:
            await asyncio.gather(*tool_runs, return_exceptions=True)

    def tokens_held(self, index: int) -> int:
        """Give back the TPM reservation of `index`'s call (what it held, 0 if none)."""
        return self._reserved_tokens.pop(index, 0)

    def _land(self, index: int) -> None:
        """An attempt is over, whatever its outcome: its slot and TPM reservation go back."""
        engine = self.engine
        engine.queue.land(index)
        self._reserved_tokens.pop(index, None)
        engine.admission.release()

    # ----------------------------------------------------------------- one attempt

    def _launch(self, index: int, client: ProviderClient) -> None:
        engine = self.engine
        number = engine.numbers.next(index)
        engine.numbers.count(index)
        engine.outbox.emit(AttemptStarted(index, number, client.name))
        started_at = time.time()
        task = asyncio.create_task(self._attempt(index, number, client), name=f"attempt-{index}-{number}")
        task.add_done_callback(lambda done: self._attempt_done(done, index, number, client.name, started_at))
        engine.queue.fly(index, task)

    def _attempt_done(
        self, task: asyncio.Task[None], index: int, number: int, endpoint: str, started_at: float
    ) -> None:
        """An attempt's coroutine handles its own outcome and lands when it ends.

        Two things it cannot handle: being cancelled before its first step (an abort right after
        dispatch: the coroutine body never runs, so its cleanup is done here: no call went out),
        and raising (a bug, which must stop the run loudly rather than leave a task in limbo)."""
        engine = self.engine
        if engine.queue.flying(index) is task:
            self.endpoints.landed(self.endpoints.door_named(endpoint).client)
            self._land(index)
            self.billing.unbilled(index, number)  # nothing went out
            engine.leave_unfinished(index, [Attempt(index, number, endpoint, started_at, 0.0, "cancelled")])
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        log.error("attempt %s crashed", task.get_name(), exc_info=exc)
        engine.fail_run(f"internal error in {task.get_name()}: {type(exc).__name__}: {exc}")

    async def _attempt(self, index: int, number: int, client: ProviderClient) -> None:
        """Run one task's attempt to its outcome (see the module docstring)."""
        calls = [self._start_call(index, number, client)]
        hedged = False
        try:
            while True:
                running = [c.task for c in calls if not c.task.done()]
                wait_s = self._tail_check_s(calls[0], hedged)
                done, _ = await asyncio.wait(running, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    action = self._tail_action(calls, hedged)
                    if action == "hedge":
                        hedged = True  # one backup at most; none when the budget cannot hold its worst case
                        self._hedge(index, calls)
                    elif action is not None:
                        self._abandon(index, calls, action)
                        return
                    continue
                calls = self._ended(index, calls, done)
                if not calls:
                    return
        except (asyncio.CancelledError, JournalWriteError):  # abort, or a journal that cannot keep the outcome:
            for call in calls:  # every call of this task stops, the task stays unfinished
                call.task.cancel()
            self.engine.leave_unfinished(index, [self.cut(c, "cancelled") for c in calls])
        finally:
            self.endpoints.landed(client)
            self._land(index)

    def _ended(self, index: int, calls: list[Call], done: set[asyncio.Task[CallResult]]) -> list[Call]:
        """A call of the attempt ended: the calls still to wait for (none: the attempt is over)."""
        # a success wins over a failure that ended in the same instant
        finished = next(
            (c for c in calls if c.task in done and c.task.exception() is None),
            next(c for c in calls if c.task in done),
        )
        others = [c for c in calls if c is not finished and not c.task.done()]
        failure = finished.task.exception()
        error = None if failure is None else finished.client.classify(failure)
        self.endpoints.observe(finished.client, error, finished.latency_ms() / 1000)
        if error is None:
            for loser in (c for c in calls if c is not finished):
                self._end_loser(loser)
            self.learn(finished.task.result().rate_headers, finished)
            self.outcomes.on_success(index, finished, finished.task.result())
            return []
        if others:  # a sibling is still running: this one's failure is not the task's
            self.end_side_attempt(finished, "hedge_failed", error)
            return others
        for sibling in calls:  # both failed in the same instant: the other one is journaled too
            if (
                sibling is not finished
                and not sibling.task.cancelled()
                and (sibling_failure := sibling.task.exception()) is not None
            ):
                self.end_side_attempt(sibling, "hedge_failed", sibling.client.classify(sibling_failure))
        self.outcomes.on_failure(
            index, finished.number, finished.started_at, finished.latency_ms(), error, endpoint=finished.client.name
        )
        return []

    def request_body(self, index: int, client: ProviderClient) -> JSONObject:
        """What a task's call sends to `client`: its body, with the job's tools offered to every
        agent and the model renamed for a fallback that names it differently."""
        body = self.engine.tasks[index].body
        body = self.tools.offered(body)
        if client is not self.endpoints.client and client.profile.model:
            body = {**body, "model": client.profile.model}
        return body

    def _start_call(self, index: int, number: int, client: ProviderClient, *, hedge: bool = False) -> Call:
        engine = self.engine
        body = self.request_body(index, client)
        door = self.endpoints.pacing(client)
        if hedge:
            self.hedges_sent += 1
            door.rate_limits.take(engine.token_estimate_of(engine.tasks[index].body))
            door.sends += 1
            engine.outbox.emit(AttemptStarted(index, number, client.name, hedge=True))

        deadlines = self.deadlines
        settings = self.settings
        if settings.calls.stream:
            first_token_s = self.tail.first_token_s()
            if first_token_s is not None and (
                deadlines.first_token_s is None or first_token_s < deadlines.first_token_s
            ):
                deadlines = StreamDeadlines(first_token_s, deadlines.idle_s)
        stalls = engine.stalls

        async def call() -> CallResult:
            async with stalls.deadline(settings.calls.timeout_s):
                return await client.complete(
                    body, stream=settings.calls.stream, deadlines=deadlines, bounded_by_caller=True
                )

        self.sends += 1
        return Call(
            index,
            number,
            client,
            time.time(),
            stalls.now(),
            asyncio.create_task(call(), name=f"call-{index}-{number}"),
            body,
            stalls.now,
            self.sends if door.shared else door.sends,
        )

    # ----------------------------------------------------------------- the tail

    def _tail_check_s(self, first: Call, hedged: bool) -> float | None:
        """How long an attempt waits before it looks at its tail deadlines again."""
        if self.settings.calls.stream:  # a streamed call's deadlines are its first token and idle gaps
            return None
        elapsed = self.engine.stalls.now() - first.t0
        tail = self.tail
        hedge_s = None if hedged else tail.hedge_s(first.ceiling, first.work)
        due = [d for d in (tail.straggler_s(first.ceiling, first.work), hedge_s) if d is not None]
        if not due:
            return RECHECK_S  # no figures yet: a call that hangs now is judged once answers arrive
        return max(0.0, min(min(due) - elapsed, RECHECK_S * 2))

    def _tail_action(self, calls: list[Call], hedged: bool) -> str | None:
        """'hedge', an abandon reason, or None (nothing due yet)."""
        first, newest = calls[0], calls[-1]
        now = self.engine.stalls.now()
        elapsed = now - newest.t0  # the newest call: a backup gets its own time
        hedge_s = None if hedged else self.tail.hedge_s(first.ceiling, first.work)
        if hedge_s is not None and now - first.t0 >= hedge_s:
            if self._may_hedge():
                return "hedge"
            return (
                f"no answer after {hedge_s:.1f}s (--hedge: {self.settings.calls.hedge_factor:g} x what a call allowed "
                f"{first.ceiling:,} tokens takes here); no backup while the provider pushes back or the hedge "
                f"budget is spent: abandoned and sent again"
            )
        straggler_s = self.tail.straggler_s(newest.ceiling, newest.work)
        if straggler_s is not None and elapsed >= straggler_s:
            return (
                f"straggler: no answer after {elapsed:.1f}s, past its deadline {straggler_s:.1f}s "
                f"({self.tail.straggler_factor:g} x what a call allowed {newest.ceiling:,} tokens takes at "
                f"{newest.client.name}); abandoned and sent again"
            )
        return None

    def _hedge(self, index: int, calls: list[Call]) -> None:
        """A backup of a slow call, when the budget can hold its worst case too (an escalated
        task's at the escalation endpoint: its answers were not usable elsewhere)."""
        escalation = self.endpoints.escalation
        backup = escalation if escalation is not None and self.outcomes.escalates(index) else self.endpoints.route()
        number = self.engine.numbers.peek(index)
        if self.billing.reserve(index, number, self.request_body(index, backup), backup.name, stop=False):
            calls.append(self._start_call(index, self.engine.numbers.next(index), backup, hedge=True))

    def _abandon(self, index: int, calls: list[Call], reason: str) -> None:
        """Cancel a straggling attempt's calls and send the task again at once. Not a failure of
        the endpoint (no failover counts it) nor congestion: a timeout of the engine's own, whose
        calls may have been billed (their input at least, estimated)."""
        self.tail.abandoned += 1
        error = CallError(ErrorClass.TIMEOUT, reason, code=STRAGGLER_CODE)
        main = calls[0]
        for call in calls:
            call.task.cancel()
            if call is not main:
                self.end_side_attempt(call, "hedge_failed", error)
        self.outcomes.on_failure(
            index, main.number, main.started_at, main.latency_ms(), error, endpoint=main.client.name, cut=main
        )

    def _may_hedge(self) -> bool:
        """Backups stay under 5% of requests and are never sent while the provider is pushing back
        (the straggler is then abandoned and sent again instead: one request either way)."""
        engine = self.engine
        if self.hedges_sent + 1 > HEDGE_MAX_SHARE * max(engine.stats.sent, 1):
            return False
        if engine.admission.gate_remaining_s > 0 or engine.stopping is not None:
            return False
        return time.monotonic() - self.last_rate_limited > HEDGE_QUIET_AFTER_429_S

    # ----------------------------------------------------------------- the other calls of a hedged pair

    def _end_loser(self, call: Call) -> None:
        """The other call of a hedged pair whose winner succeeded: cancelled if still running (and
        billed by estimate: it went out); if it had finished too, what it cost is journaled all the same."""
        if not call.task.done():
            call.task.cancel()
            self._commit_side(self.cut(call, "hedge_lost"))
        elif call.task.cancelled() or call.task.exception() is not None:
            return  # its failure was journaled when it happened (hedge_failed)
        else:
            result = call.task.result()
            usage, cost, estimated = self.billing.billed(result, call.body, call.client.name)
            self.engine.ledger.settle((call.index, call.number), cost)
            attempt = Attempt(
                call.index,
                call.number,
                call.client.name,
                call.started_at,
                call.latency_ms(),
                "hedge_lost",
                status=200,
                usage=usage,
                cost_usd=cost,
                estimated=estimated,
            )
            self._commit_side(attempt)

    def end_side_attempt(self, call: Call, outcome: str, error: CallError) -> None:
        """A hedged pair's other call that failed (or was cut with its sibling): journaled and
        billed (cut: its input, estimated), but the task's state is not its to decide."""
        if not call.task.done() or call.task.cancelled():
            attempt = self.cut(call, outcome)
        else:
            self.billing.unbilled(call.index, call.number)
            attempt = Attempt(
                call.index,
                call.number,
                call.client.name,
                call.started_at,
                call.latency_ms(),
                outcome,
                status=error.status,
            )
        self._commit_side(dataclasses.replace(attempt, error=error, status=error.status))

    def _commit_side(self, attempt: Attempt) -> None:
        engine = self.engine
        engine.outbox.commit(partial(engine.journal.record_attempt, attempt), events=[AttemptEnded(attempt)])

    def cut(self, call: Call, outcome: str) -> Attempt:
        """The record of a call cut after it went out (abandoned, cancelled, a lost hedge)."""
        return self.billing.cut(
            call.index, call.number, call.client.name, call.started_at, call.latency_ms(), call.body, outcome
        )

    # ----------------------------------------------------------------- pacing from answers

    def learn(self, headers: Mapping[str, str], call: Call | None = None, door: Door | None = None) -> None:
        """Limits and what is left of them, from a response's headers (`call`: the request they
        answer; `door`: the endpoint that sent them, when no call is at hand)."""
        if call is not None:
            door = self.endpoints.pacing(call.client)
        door = door or self.endpoints.doors[0]
        sent = self.sends if door.shared else door.sends
        sent_since = sent - call.send_seq if call is not None else 0
        self.announce_limits(door.rate_limits.learn(headers, sent_since=sent_since), door)

    def announce_limits(self, learned: LearnedLimits | None, door: Door | None = None) -> None:
        if learned is not None:
            endpoint = door.name if door is not None and not door.shared else ""
            self.engine.outbox.emit(
                RateLimitsLearned(learned.rpm, learned.tpm, estimated=learned.estimated, endpoint=endpoint)
            )

    def capped(self, error: CallError) -> CallError:
        """A Retry-After longer than `max_retry_after_s` (or not finite) is honoured up to it."""
        wait = error.retry_after_s
        cap = self.settings.pacing.max_retry_after_s
        if wait is None or wait <= cap:
            return error
        return dataclasses.replace(error, retry_after_s=cap, retry_after_asked_s=wait)
