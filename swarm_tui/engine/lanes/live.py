"""The live lane: each task the engine admits goes out as a live call and is followed to its outcome.

One attempt is one call — two when a backup was hedged, three when that backup was late too at
the run's idle tail. While it runs, its tail deadline
(`deadlines.py`) is looked at: past it (the straggler deadline; earlier with `--hedge`, and at the
run's idle tail) a backup goes out when the hedge budget, the provider and the budget allow, and
the first call keeps running: a guess never ends an attempt, only `--timeout`, a stream's
silences (`providers.client`) and real errors do. What an ended call means for its task is
`outcomes.Outcomes`'s to say (the lane makes its own); a multi-step agent's tool calls are
`agents.ToolSteps`'; what each call is doing (its first token, its stream, a silence) is told by
`liveness.Liveness`; whether an endpoint was ever reached, `reachability.Reachability`. The lane
owns its calls' TPM reservations; the engine's queue holds each attempt's handle while it is on
the wire.
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
from swarm_tui.engine.lanes.liveness import Liveness
from swarm_tui.engine.lanes.outcomes import Outcomes
from swarm_tui.engine.lanes.reachability import Reachability
from swarm_tui.engine.pacing.deadlines import RECHECK_S, TailDeadlines
from swarm_tui.engine.routing.endpoints import Endpoints
from swarm_tui.engine.settings import HEDGE_MAX_SHARE, HEDGE_QUIET_AFTER_429_S, Trimmer
from swarm_tui.providers.client import CallResult, ProviderClient, StreamDeadlines
from swarm_tui.providers.streamed import StreamProgress
from swarm_tui.util.clock import run_time

if TYPE_CHECKING:
    from swarm_tui.engine.answers import AnswerChecks
    from swarm_tui.engine.engine import SwarmEngine
    from swarm_tui.engine.pacing.limits import LearnedLimits
    from swarm_tui.engine.routing.doors import Door

MAX_BACKUPS = 2
"""Backups one attempt may have: the first when its call is late, a second (at the run's idle tail)
when the call is still late after it (the backup hangs too, or failed)."""
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
        limits = self.settings.calls
        first_token_s = limits.timeout_s  # a streamed call waits for its first token no longer than a plain call runs
        if limits.first_token_timeout_s is not None:
            first_token_s = min(first_token_s, limits.first_token_timeout_s)
        self.deadlines = StreamDeadlines(first_token_s, limits.idle_timeout_s)
        """A streamed call's deadlines: its silences (`providers.client`: never its length)."""
        self.wire: dict[int, list[Call]] = {}
        """Each task's calls on the wire now (two while a backup runs): what liveness watches."""
        self.hedges_sent = 0
        self.sends = 0
        self.late_calls: dict[int, str] = {}
        """Tasks whose call is past its deadline with nothing from it (hung, or slow past its like),
        with the endpoint it went to: their slots are not what the provider serves (`late_at`)."""
        self.last_rate_limited = -1e9
        """When the provider last pushed back (monotonic): no hedge for a while after."""
        self.last_retry_after_asked_s: float | None = None
        """The last Retry-After that was capped: what the provider asked for (shown while waiting)."""
        self.answer_kept = answer_kept
        self.step_replay = step_replay
        self._reserved_tokens: dict[int, int] = {}
        """The TPM reservation of each task's call on the wire."""
        self.outcomes = Outcomes(self, checks, trimmer)
        self.liveness = Liveness(self)
        self.reachability = Reachability(self)

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
        started_at = run_time()
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
        wire = self.wire
        wire[index] = calls
        straggled: str | None = None
        """Why the first call got a backup (past its deadline, with nothing from it); None: no backup yet."""
        backups = 0
        try:
            while True:
                running = [c.task for c in calls if not c.task.done()]
                latest = calls[-1]
                # watched while it may still get a backup: a late call whose backup failed or hangs
                # while work waits in line looks again, so that the idle tail finds it (not --timeout)
                watched = straggled is None or backups < MAX_BACKUPS
                wait_s = self._tail_check_s(latest) if watched else None
                done, _ = await asyncio.wait(running, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
                if not done:  # a backup only when it may go (else the call waits on)
                    again = straggled is None or self._may_back_up_again(backups)
                    late = self._late(latest) if again else None
                    if late is not None:
                        self.late_calls.setdefault(index, calls[0].client.name)
                    if late is not None and self._may_hedge() and self._hedge(index, calls):
                        straggled = straggled or late
                        backups += 1
                    continue
                calls = self._ended(index, calls, done, straggled)
                if not calls:
                    return
                wire[index] = calls
        except (asyncio.CancelledError, JournalWriteError):  # abort, or a journal that cannot keep the outcome:
            for call in calls:  # every call of this task stops, the task stays unfinished
                call.task.cancel()
            self.engine.leave_unfinished(index, [self.cut(c, "cancelled") for c in calls])
        finally:
            wire.pop(index, None)
            self.late_calls.pop(index, None)
            self.endpoints.landed(client)
            self._land(index)

    def _ended(
        self, index: int, calls: list[Call], done: set[asyncio.Task[CallResult]], straggled: str | None = None
    ) -> list[Call]:
        """A call of the attempt ended: the calls still to wait for (none: the attempt is over).
        `straggled`: why the first call got a backup; if the backup wins, the first call is journaled
        as the straggler it was (a timeout of the engine's own, cut, billed by estimate)."""
        # a success wins over a failure that ended in the same instant
        finished = next(
            (c for c in calls if c.task in done and c.task.exception() is None),
            next(c for c in calls if c.task in done),
        )
        others = [c for c in calls if c is not finished and not c.task.done()]
        failure = finished.task.exception()
        error = None if failure is None else finished.client.classify(failure)
        if error is None or not finished.hedge:  # a backup's failure is no sign of its endpoint's health
            latency_s = finished.latency_ms() / 1000 if finished.timed else None
            self.endpoints.observe(finished.client, error, latency_s)
        self.reachability.observe(finished.client, error)
        if error is None:
            for loser in (c for c in calls if c is not finished):
                self._end_loser(loser, straggled if loser is calls[0] else None)
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
        body = self.tools.offered(index, body)
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
        settings = self.settings
        stalls = engine.stalls
        stream = settings.calls.stream
        progress = StreamProgress(stalls.now, partial(self._first_token, index, number)) if stream else None

        async def call() -> CallResult:
            if progress is not None:  # judged by its silences: the first token, then the gaps between chunks
                return await client.complete(body, stream=True, deadlines=self.deadlines, progress=progress)
            async with stalls.deadline(settings.calls.timeout_s):
                return await client.complete(body, bounded_by_caller=True)

        self.sends += 1
        return Call(
            index,
            number,
            client,
            run_time(),
            stalls.now(),
            asyncio.create_task(call(), name=f"call-{index}-{number}"),
            body,
            stalls,
            self.sends if door.shared else door.sends,
            progress,
            hedge,
        )

    def _first_token(self, index: int, number: int) -> None:
        """A streamed call's first token came: its agent streams now (the event carries the time it took)."""
        self.liveness.first_token(index, number)

    # ----------------------------------------------------------------- the tail

    def _tail_check_s(self, first: Call) -> float | None:
        """How long an attempt waits before it looks at its tail deadline again (None: until it ends)."""
        deadline = self._hedge_deadline_s(first)
        if deadline is None:
            if first.progress is not None and first.progress.first_at is not None:
                return None  # tokens flow: only its silences judge it now
            return RECHECK_S  # no figures yet: a call that hangs now is judged once answers arrive
        left = deadline - (self.engine.stalls.now() - first.t0)
        if left <= 0:  # late, but no backup went (the provider pushes back, the share is spent): look again later
            return RECHECK_S
        return min(left, RECHECK_S * 2)

    def _hedge_deadline_s(self, call: Call) -> float | None:
        """When a call with nothing from it yet gets a backup: past what its like should take (its
        straggler deadline; for a stream, of its first token), earlier with `--hedge`, and earlier
        still at the run's tail, when slots are idle and a backup holds up no one."""
        tail = self.tail
        if call.progress is not None:
            if call.progress.first_at is not None:
                return None
            due = tail.first_token_s()
        else:
            due = tail.straggler_s(call.ceiling, call.work)
        if self.settings.calls.hedge:
            due = _sooner(due, tail.hedge_s(call.ceiling, call.work))
        if tail.straggler_factor is not None and self._slots_idle():
            due = _sooner(due, tail.tail_hedge_s(call.ceiling, call.work))
        return due

    def _late(self, call: Call) -> str | None:
        """Why a call is late enough for a backup now (None: it is not)."""
        deadline = self._hedge_deadline_s(call)
        if deadline is None:
            return None
        elapsed = self.engine.stalls.now() - call.t0
        if elapsed < deadline:
            return None
        what = "no first token" if call.progress is not None else "no answer"
        ceiling = f"allowed {call.ceiling:,} tokens " if call.ceiling is not None else ""
        return (
            f"straggler: {what} after {elapsed:.1f}s, past its deadline {deadline:.1f}s (what a call {ceiling}"
            f"takes at {call.client.name}); a backup was sent and answered first"
        )

    def late_at(self, door: Door) -> int:
        """Calls to `door` in flight past their deadline with nothing from them (every door's, when
        the engine's slots are the door's)."""
        if door.shared:
            return len(self.late_calls)
        return sum(1 for endpoint in self.late_calls.values() if endpoint == door.name)

    def _may_back_up_again(self, backups: int) -> bool:
        """A call still late after its backup (the backup hangs too, or failed) may get another, at
        the run's idle tail only (a call that hangs may be sent to a replica that hangs as well): at
        most `MAX_BACKUPS` an attempt."""
        return backups < MAX_BACKUPS and self._slots_idle()

    def _slots_idle(self) -> bool:
        """The run's tail: nothing waits in line and slots are free, so a backup holds up no task."""
        engine = self.engine
        return not engine.queue.has_ready and engine.admission.in_flight < engine.admission.limit

    def _hedge(self, index: int, calls: list[Call]) -> bool:
        """A backup of a slow call, when the budget can hold its worst case too (an escalated
        task's at the escalation endpoint: its answers were not usable elsewhere); True when it went."""
        escalation = self.endpoints.escalation
        backup = escalation if escalation is not None and self.outcomes.escalates(index) else self.endpoints.route()
        if self._pushed_back() and not (self._slots_idle() and self._paced_room(index, backup)):
            return False
        number = self.engine.numbers.peek(index)
        if not self.billing.reserve(index, number, self.request_body(index, backup), backup.name, stop=False):
            return False
        calls.append(self._start_call(index, self.engine.numbers.next(index), backup, hedge=True))
        return True

    def _may_hedge(self) -> bool:
        """Backups stay under 5% of requests while work waits in line (at the run's tail, with slots
        idle, each late call may have its one backup: it holds no one up), and none goes through a
        Retry-After gate or while the run stops. Where the provider pushed back lately, `_hedge`
        holds a backup unless it is the idle tail and the endpoint's pace has room for it (a guess
        never ends an attempt: only `--timeout` and real errors do, so a held-back call waits on)."""
        engine = self.engine
        if self.hedges_sent + 1 > HEDGE_MAX_SHARE * max(engine.stats.sent, 1) and not self._slots_idle():
            return False
        return engine.admission.gate_remaining_s <= 0 and engine.stopping is None

    def _pushed_back(self) -> bool:
        """A 429 came within `HEDGE_QUIET_AFTER_429_S`: while work waits in line, the provider's room
        goes to it, not to copies of calls already out."""
        return time.monotonic() - self.last_rate_limited <= HEDGE_QUIET_AFTER_429_S

    def _paced_room(self, index: int, backup: ProviderClient) -> bool:
        """`backup`'s endpoint may take one more call of task `index` now: its RPM and TPM buckets
        (learned from 429s where it states none) hold no wait. The backup then takes its share of
        them (`_start_call`), so backups at the tail are paced as every call is."""
        limits = self.endpoints.pacing(backup).rate_limits
        return limits.wait_s(self.engine.token_estimate_of(self.engine.tasks[index].body)) <= 0

    # ----------------------------------------------------------------- the other calls of a hedged pair

    def _end_loser(self, call: Call, straggled: str | None = None) -> None:
        """The other call of a hedged pair whose winner succeeded: cancelled if still running (and
        billed by estimate: it went out); if it had finished too, what it cost is journaled all the
        same. `straggled`: it is the first call, overtaken by its backup: journaled as the straggler
        it was (a timeout of the engine's own, no failure of its task)."""
        if not call.task.done():
            call.task.cancel()
            attempt = self.cut(call, "hedge_lost")
            if straggled is not None:
                self.tail.abandoned += 1
                error = CallError(ErrorClass.TIMEOUT, straggled, code=STRAGGLER_CODE)
                attempt = dataclasses.replace(attempt, error=error)
            self._commit_side(attempt)
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


def _sooner(a: float | None, b: float | None) -> float | None:
    """The earlier of two deadlines, either unknown (None)."""
    if a is None:
        return b
    return a if b is None or a <= b else b
