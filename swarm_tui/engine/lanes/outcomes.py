"""What an ended live call means for its task: an answer kept, a step of an agent, an answer that is
not usable (asked again, given more room, escalated or failed: `engine.answers` says which), or a
failure retried (after its backoff) or final — each journaled with the events that report it
before any view hears of it (through the engine's outbox)."""

from __future__ import annotations

import dataclasses
import time
from functools import partial
from typing import TYPE_CHECKING

from swarm_tui.core.call_errors import STRAGGLER_CODE, CallError, ErrorClass
from swarm_tui.core.decide import Next
from swarm_tui.core.events import Attempt, RateGateClosed, TaskFailed, TaskRetrying, TaskSucceeded
from swarm_tui.core.task import JSONObject
from swarm_tui.engine.calls import Call, answer_message, cut_before_any_content, finish_reason
from swarm_tui.engine.settings import (
    CONGESTED_LATENCY_SHARE,
    REFUSALS,
    REFUSALS_TO_STOP,
    TRUNCATED_CODE,
    Trimmer,
)
from swarm_tui.providers.client import CallResult

if TYPE_CHECKING:
    from swarm_tui.engine.answers import AnswerChecks, Verdict
    from swarm_tui.engine.lanes.live import LiveLane
    from swarm_tui.engine.routing.doors import Door


class Outcomes:
    """The live lane's outcomes: success, tool request, invalid or empty answer, failure."""

    def __init__(self, lane: LiveLane, checks: AnswerChecks | None, trimmer: Trimmer | None) -> None:
        self.lane = lane
        self.engine = lane.engine
        self.checks = checks
        self.trimmer = trimmer
        self._trimmed: set[int] = set()
        self._refusals: list[CallError] = []
        """Calls refused for good (auth, permission, no such model) since the last answer."""

    def on_success(self, index: int, call: Call, result: CallResult) -> None:
        engine, lane = self.engine, self.lane
        asks_for_tools = lane.tools.enabled and bool(answer_message(result).get("tool_calls"))
        checks, body = self.checks, engine.tasks[index].body
        if (
            not asks_for_tools
            and finish_reason(result) == "length"
            and not (checks is not None and checks.checked(body))  # a checked answer cut is the checks' to judge
            and cut_before_any_content(result)
        ):
            self._on_empty_answer(index, call, result)
            return
        verdict = checks.verdict(body, result) if checks is not None and not asks_for_tools else None
        if verdict is not None and not verdict.ok:
            self._on_unusable(index, call, result, verdict)
            return
        self._refusals.clear()
        latency_ms = call.latency_ms()
        door = lane.endpoints.pacing(call.client)
        door.rate_limits.settle(lane.tokens_held(index), result.usage.total)
        lane.announce_limits(door.rate_limits.note_answer(), door)
        timed = call.timed  # a call the process was stopped under says nothing of how long calls take
        if timed:
            lane.tail.observe(
                latency_ms / 1000,
                None if result.ttft_ms is None else result.ttft_ms / 1000,
                tokens=result.usage.completion,
                ceiling=call.ceiling,
                work=call.work,
            )
        adaptive = door.adaptive
        if adaptive is not None:
            if timed:
                adaptive.observe_latency(latency_ms / 1000)
            admission = door.admission
            busy = admission.in_flight >= admission.limit or engine.queue.has_ready  # work is waiting
            grown = adaptive.on_success(busy)
            if grown is not None:
                lane.endpoints.adapt(door, grown, "slow start: +1" if adaptive.slow_start else "clean and busy: +1")
        attempt = lane.billing.answered(
            index,
            call.number,
            call.client.name,
            call.started_at,
            latency_ms,
            result,
            "step" if asks_for_tools else "ok",
            body,
        )
        if lane.answer_kept is not None:  # the response cache (`--cache`): a usable answer, or an agent's step
            lane.answer_kept(call.body, call.client, result, attempt.cost_usd)
        if asks_for_tools:
            lane.tools.on_tool_request(index, attempt, result)
            return
        parsed, passed = (verdict.parsed, verdict.checks) if verdict is not None else (None, ())
        succeeded = TaskSucceeded(attempt, result.content, checks=passed)
        answer = result.raw if result.raw is not None else result.body  # kept as received
        engine.outbox.commit_soon(
            partial(engine.journal.record_success, attempt, answer, parsed=parsed), events=[succeeded]
        )

    def _on_unusable(self, index: int, call: Call, result: CallResult, verdict: Verdict) -> None:
        """An answer that came back unusable (refused, filtered, cut, failing a check): billed, then
        asked again, given more room, sent to the escalation endpoint, or the task's end
        (`answers.AnswerChecks.follow_up`); a new attempt of the same task either way."""
        engine, lane = self.engine, self.lane
        assert self.checks is not None
        lane.endpoints.pacing(call.client).rate_limits.settle(lane.tokens_held(index), result.usage.total)
        task = engine.tasks[index]
        endpoint = call.client.name
        follow = self.checks.follow_up(
            index,
            task.body,
            result,
            verdict,
            fits=lambda body: lane.billing.fits(body, endpoint),
            max_output=lane.billing.max_output(endpoint),
        )
        attempt = lane.billing.answered(
            index,
            call.number,
            endpoint,
            call.started_at,
            call.latency_ms(),
            result,
            "retry" if follow.again else "failed",
            task.body,
        )
        attempt = dataclasses.replace(attempt, error=follow.error)
        if follow.body is None:
            if follow.kept is not None:  # `r` asks it again, with the reason
                engine.ask_again(index, follow.kept)
            self._fail(attempt, follow.kept)
            return
        attempt = dataclasses.replace(attempt, retry_in_s=0.0)
        engine.ask_again(index, follow.body)  # not a transport retry: the next call has retries of its own
        retrying = TaskRetrying(attempt, 0.0)
        engine.outbox.commit(partial(engine.journal.record_retry, attempt, body=follow.body), events=[retrying])
        engine.retry_soon(index, 0.0)

    def escalates(self, index: int) -> bool:
        """The task's next attempt goes to the escalation endpoint (its re-asks are spent)."""
        return self.checks is not None and index in self.checks.escalated

    def _on_empty_answer(self, index: int, call: Call, result: CallResult) -> None:
        """An answer cut at its token limit before any content (`finish_reason: length`, no text,
        no tool call: a reasoning model that spent its tokens thinking): billed, and a failure
        of its own that another attempt of the same body would repeat."""
        engine = self.engine
        self.lane.endpoints.pacing(call.client).rate_limits.settle(self.lane.tokens_held(index), result.usage.total)
        error = CallError(
            ErrorClass.TRUNCATED,
            "the answer was cut at its token limit before any content (finish_reason length): raise max_tokens",
            200,
            TRUNCATED_CODE,
            request_id=result.request_id,
            should_retry=False,
        )
        attempt = self.lane.billing.answered(
            index,
            call.number,
            call.client.name,
            call.started_at,
            call.latency_ms(),
            result,
            "failed",
            engine.tasks[index].body,
        )
        self._fail(dataclasses.replace(attempt, error=error))

    def _fail(self, attempt: Attempt, body: JSONObject | None = None) -> None:
        """The task's end; `body`: what a retry of it sends (a failed check's re-ask)."""
        engine = self.engine
        failed = TaskFailed(attempt)
        engine.outbox.commit(partial(engine.journal.record_failure, attempt, body=body), events=[failed])
        engine.check_failure_rate()

    def on_failure(
        self,
        index: int,
        number: int,
        started_at: float,
        latency_ms: float,
        error: CallError,
        *,
        endpoint: str,
        cut: Call | None = None,
    ) -> None:
        """A failed attempt: journaled, then retried (after its backoff) or the task's end.
        `cut`: the call was abandoned by the engine itself (a straggler), not failed by the
        endpoint: no congestion, and billed by estimate (it went out)."""
        engine, lane = self.engine, self.lane
        error = lane.capped(error)
        lane.tokens_held(index)  # a refused request used no tokens, but keep them: pace down
        door = lane.endpoints.door_named(endpoint)
        # the route left this door (it cannot serve the run): the attempt was the door's failure, not
        # the task's; it goes elsewhere at once, uncounted, and teaches the door's pacing nothing
        left = lane.endpoints.has_left(endpoint)
        lane.learn(error.rate_headers, door=door)
        if error.is_rate_limit and not left:
            lane.last_rate_limited = time.monotonic()
            learned = door.rate_limits.on_rate_limited(sent_at=time.monotonic() - latency_ms / 1000)
            lane.announce_limits(learned, door)
        if door.adaptive is not None and cut is None and not left:
            self._adapt_to_failure(error, door)
        none_left = lane.endpoints.none_left() if left else None
        if none_left is not None and engine.stopping is None:
            engine.stop_dispatch(none_left)
        can_fail_over = lane.endpoints.can_fail_over(endpoint)
        if cut is None and engine.suspension.takes(error, can_fail_over):
            lane.billing.unbilled(index, number)  # quota spent, or a wait past the cap: the run holds, the task waits
            held = Attempt(index, number, endpoint, started_at, latency_ms, "retry", status=error.status, error=error)
            engine.suspension.hit(index, dataclasses.replace(held, request_id=error.request_id), error, endpoint)
            return
        decision = engine.retry_policy.after_failure(
            error,
            engine.numbers.in_round(index),
            stopping=engine.stopping is not None,
            trimmed=self._trim_once(index, error),
            can_fail_over=can_fail_over,
            door_left=left and none_left is None,
        )
        retry = decision.next is not Next.GIVE_UP
        if left and (retry or decision.resumable):
            engine.numbers.uncount(index)
        outcome = "retry" if retry or decision.resumable else "failed"
        if cut is not None:
            attempt = dataclasses.replace(lane.cut(cut, outcome), latency_ms=latency_ms)
        else:
            lane.billing.unbilled(index, number)
            attempt = Attempt(index, number, endpoint, started_at, latency_ms, outcome)
        attempt = dataclasses.replace(attempt, status=error.status, error=error, request_id=error.request_id)
        if decision.resumable:  # a stop, not the task's end: it waits, unfinished, for the next run
            engine.leave_unfinished(index, [attempt])
            return
        if not retry:
            self._fail(attempt)
            self._check_refusals(error, endpoint)
            return
        delay = decision.delay_s
        attempt = dataclasses.replace(attempt, retry_in_s=round(delay, 3))
        if error.is_rate_limit and error.retry_after_s and not left and door.admission.close_gate(error.retry_after_s):
            lane.last_retry_after_asked_s = error.retry_after_asked_s
            engine.outbox.emit(RateGateClosed(error.retry_after_s, asked_s=error.retry_after_asked_s))
        retrying = TaskRetrying(attempt, delay)
        engine.outbox.commit(partial(engine.journal.record_retry, attempt), events=[retrying])
        engine.retry_soon(index, delay)

    def _check_refusals(self, error: CallError, endpoint: str) -> None:
        """The provider refuses calls for good (a key it does not take, a model it does not have,
        an empty account): after a few in a row, with no answer between, stop dispatch saying
        why and where (`endpoint`, the last to refuse), instead of sending every other task to the
        same refusal."""
        if error.kind not in REFUSALS:
            return
        self._refusals.append(error)
        if len(self._refusals) >= REFUSALS_TO_STOP:
            status = f" {error.status}" if error.status else ""
            code = f" {error.code}" if error.code else ""
            self.engine.stop_dispatch(
                f"the provider ({endpoint}) refused {len(self._refusals)} calls in a row ({error.kind}{status}{code}: "
                f"{error.message[:160]}): nothing more is sent; check the key, the model name and the base "
                f"URL, then `swarm-tui resume` the run"
            )

    def _trim_once(self, index: int, error: CallError) -> bool:
        """Context length exceeded: never retried as is, but shortened once when a trimmer can."""
        if error.kind is not ErrorClass.CONTEXT_LENGTH or self.trimmer is None or index in self._trimmed:
            return False
        engine = self.engine
        shorter = self.trimmer(engine.tasks[index])
        if shorter is None:
            return False
        self._trimmed.add(index)
        engine.tasks[index] = shorter
        engine.outbox.note("trimmed", {"index": index, "custom_id": shorter.custom_id})
        return True

    def _adapt_to_failure(self, error: CallError, door: Door) -> None:
        """A rate limit backs the limit off; overload does when sustained; other failures (a 500,
        a 502, a lone hung call among fast answers) leave it alone: they say nothing about load."""
        adaptive = door.adaptive
        assert adaptive is not None
        if error.is_rate_limited:
            shrunk = adaptive.on_congestion(late=self.lane.late_at(door))
        elif error.is_overload or (
            error.kind is ErrorClass.TIMEOUT and error.code != STRAGGLER_CODE and self._latency_congested()
        ):
            shrunk = adaptive.on_overload()
        else:
            adaptive.on_other_failure()
            return
        if shrunk is not None:
            reason = f"{error.kind}{f' {error.status}' if error.status else ''}: decrease"
            self.lane.endpoints.adapt(door, shrunk, reason)

    def _latency_congested(self) -> bool:
        """A timeout is congestion only when answers have been slowing down overall: shrinking the
        limit for a lone hung call would leave the slots to the hung calls."""
        p50 = self.engine.stats.percentile(0.5)
        return p50 is None or p50 / 1000 > CONGESTED_LATENCY_SHARE * self.engine.settings.calls.timeout_s
