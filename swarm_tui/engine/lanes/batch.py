"""The batch lane (`--lane batch|auto`): tasks carried as lines of provider batches (the OpenAI
Batch API: half the price, its own rate limits, answers within 24 h), in the same journal,
task states and events as live calls.

One batch, each step journaled before the next, so that a process killed anywhere never
submits the same tasks twice:

1. the tasks' requests are written as a Batch input file (JSONL, `custom_id` = the task's) and
   uploaded;
2. the file id and each line's (task, attempt number) are journaled (`record_batch_intent`);
3. the batch is created; its id is journaled with `BatchSubmitted` (the tasks run from now on);
4. it is polled with backoff (`BatchProgress` when its status or counts move);
5. when it ends (completed, expired, cancelled, failed) its output and error files are read and
   every line mapped back by `custom_id` into one journal transaction with its events
   (`record_batch_lines`): a success is billed at the batch rate; a line that may be retried
   goes back (live in lane `auto`, into the next batch in lane `batch`); a line the provider
   never ran (expired) is retried like a timeout; a task with no line at all likewise.

A session that finds a journaled file id without a batch id (killed between steps 2 and 3)
looks the batch up by that file id (`GET /v1/batches`) before it decides the batch was never
created. Abort cancels the open batches and keeps the lines they completed; any other stop
(budget, a quit) leaves them running at the provider, and `resume` re-attaches to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from swarm_tui.core.batches import BatchLines, BatchRow
from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.decide import Next
from swarm_tui.core.errors import JournalWriteError
from swarm_tui.core.events import (
    Attempt,
    BatchEnded,
    BatchProgress,
    BatchSubmitted,
    EngineEvent,
    TaskCancelled,
    TaskFailed,
    TaskRetrying,
    TaskState,
    TaskSucceeded,
)
from swarm_tui.core.lanes import AUTO, BATCH, LIVE, batch_endpoint
from swarm_tui.engine.lanes.batch_lines import BatchLimits, batch_errors, input_files, jsonl, line_outcome
from swarm_tui.engine.ledger import worst_usage
from swarm_tui.providers.client import CallResult
from swarm_tui.util.clock import run_time

if TYPE_CHECKING:
    from swarm_tui.core.task import Task
    from swarm_tui.engine.answers import AnswerChecks, Verdict
    from swarm_tui.engine.ports import LaneHost, Planner
    from swarm_tui.pricing import Price
    from swarm_tui.providers.client import ProviderClient

log = logging.getLogger(__name__)

TERMINAL = frozenset({"completed", "expired", "cancelled", "failed"})
"""Batch statuses after which nothing more happens to its lines."""
ABORT_WAIT_S = 30.0
"""How long an abort waits for a cancelled batch to say which lines it completed (a resume
collects them later when the provider takes longer)."""


class BatchLane:
    """The engine's batch lane: claims its tasks out of the live queue at run start, submits
    them as batches, follows the batches, and hands their lines back as task outcomes."""

    name = "batch"

    def __init__(
        self,
        host: LaneHost,
        client: ProviderClient,
        lane: str,
        price: Price | None,
        limits: BatchLimits,
        checks: AnswerChecks | None = None,
        planner: Planner | None = None,
    ) -> None:
        """`planner`: a deadline run's autopilot (the split after the live share, pull-backs, replans)."""
        self.engine = host
        """The engine (or the Ray driver), through its `LaneHost` port."""
        self.client = client
        self.checks = checks
        self.lane = lane
        self.endpoint = batch_endpoint(client.name)
        batch_price = price.batch_price() if price is not None else None
        self.price = batch_price or price
        """Batch lines are billed at the batch rate; at the live rate (an upper bound) when the
        provider publishes none for the model."""
        if price is not None and batch_price is None:
            log.warning("no batch rate is known for this model: batch lines are billed at the live rate")
        self.limits = limits
        self._pending: list[int] = []
        """Tasks waiting for the next batch."""
        self._live_first: list[int] = []
        """Lane auto: the first share, sent live; the batch waits for their outcome."""
        self._aborting = False
        self._refusals = 0
        """Batches the provider refused in a row (lane batch gives up after `max_attempts`)."""
        self._wake = asyncio.Event()
        self._open: list[BatchRow] = []
        """Batches of earlier sessions still open at the provider (`claim` reads them)."""
        self.planner = planner
        self._pulled: set[str] = set()
        """Batches the planner pulled back: their unrun lines go live."""

    # ----------------------------------------------------------------- the engine's side

    def claim(self, ready: Sequence[int]) -> list[int]:
        """Take the lane's tasks out of the live queue at run start; returns what stays live."""
        journal = self.engine.journal
        self._open = journal.open_batches()
        in_batches = {i for row in self._open for i, _ in row.tasks}
        for row in self._open:  # the numbers those lines carry are taken
            for index, number in row.tasks:
                self.engine.numbers.take(index, number)
        free = [i for i in ready if i not in in_batches]
        if self.lane == LIVE:  # a live session following the batches of an earlier one
            return free
        if self.lane == BATCH:
            self._pending = free
            return []
        settings = self.engine.settings
        tried = journal.batch_tried()
        if not journal.has_batches():  # the run's first batch: a live share first
            share = min(len(free), max(settings.lanes.live_share_min, math.ceil(settings.lanes.live_share * len(free))))
            self._live_first = free[:share]
            self._pending = free[share:]
            return self._live_first
        live = [i for i in free if i in tried]  # a batch line of theirs failed: retried live
        self._pending = [i for i in free if i not in tried]
        return live

    @property
    def waiting(self) -> list[int]:
        """Tasks the lane has not submitted yet."""
        return list(self._pending)

    def abort(self, *, leave_open: bool = False) -> None:
        """Cancel the open batches (what they completed is kept); submit nothing more. `leave_open`
        (a quit): they run on at the provider, and `resume` collects them."""
        if leave_open:
            return
        self._aborting = True
        self._wake.set()

    def wake(self) -> None:
        """The run is stopping: followers stop waiting for their next poll."""
        self._wake.set()

    async def run(self) -> None:
        """Follow the open batches of earlier sessions, then submit and follow the lane's tasks
        (in lane auto: once the live share has shown the prompt and key work)."""
        engine = self.engine
        followers: set[asyncio.Task[None]] = {
            asyncio.create_task(self._reattach(row), name=f"batch-{row.row}") for row in self._open
        }
        try:
            if self._live_first and not await self._live_share_passed():
                self._pending_back_to_engine()  # nothing submitted; open batches are still followed
            elif self.planner is not None and self._pending:
                self._pending, live = self.planner.split(self._pending)
                engine.give_back(live)
            while True:
                if self._pending and engine.stopping is None and not self._aborting:
                    todo, self._pending = self._pending, []
                    for chunk in input_files(todo, self.engine.tasks, self.limits):
                        followers.add(asyncio.create_task(self._submit(chunk), name="batch-submit"))
                if not followers:
                    return
                done, followers = await asyncio.wait(followers, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
        finally:
            for task in followers:
                task.cancel()
            self._pending_back_to_engine()
            engine.wake()

    def _pending_back_to_engine(self) -> None:
        """Tasks never submitted (a stop, a failed live share): back to the engine's queue, where
        a stop leaves them unfinished and a resume finds them."""
        if self._pending:
            self.engine.give_back(self._pending)
            self._pending = []

    async def _live_share_passed(self) -> bool:
        engine = self.engine
        states = engine.states
        while not all(states[i].is_final for i in self._live_first):
            if engine.stopping is not None:
                return False
            await asyncio.sleep(0.05)
        if any(states[i] is TaskState.SUCCEEDED for i in self._live_first):
            return True
        engine.stop_dispatch(
            f"lane auto: none of the {len(self._live_first)} tasks sent live first succeeded, so no batch "
            "was submitted (check the prompt, model and key; then resume)"
        )
        return False

    # ----------------------------------------------------------------- submitting

    async def _submit(self, chunk: list[tuple[int, bytes]]) -> None:
        engine = self.engine
        client = self.client
        within = self._within_budget([i for i, _ in chunk])
        if len(within) < len(chunk):
            engine.give_back(i for i, _ in chunk[len(within) :])  # left unfinished by the budget stop
            chunk = chunk[: len(within)]
            if not chunk:
                return
        try:
            file_id = await client.upload_batch_file("swarm-tui-batch.jsonl", b"".join(line for _, line in chunk))
        except Exception as exc:  # noqa: BLE001 - any failure to upload puts the tasks back
            await self._not_submitted([i for i, _ in chunk], client.classify(exc), "upload")
            return
        lines = [(index, engine.numbers.next(index)) for index, _ in chunk]
        try:
            row = engine.journal.record_batch_intent(self.endpoint, file_id, lines)
        except JournalWriteError:  # the run is stopping; nothing was submitted
            engine.give_back(i for i, _ in lines)
            return
        try:
            batch = await client.create_batch(file_id, {"swarm_tui": f"batch {row.row}"})
        except Exception as exc:  # noqa: BLE001
            engine.journal.drop_batch(row.row, "not_created")
            await self._not_submitted([i for i, _ in lines], client.classify(exc), "create")
            return
        row = replace(row, batch_id=batch["id"])
        self._refusals = 0
        try:
            self._submitted(row, batch["id"], batch.get("status") or "validating")
        except JournalWriteError:  # the batch runs at the provider: the next session finds it by its file
            return
        await self._follow(row)

    def _submitted(self, row: BatchRow, batch_id: str, status: str) -> None:
        engine = self.engine
        for index, _ in row.tasks:
            engine.numbers.count(index)
        submitted = BatchSubmitted(
            batch_id,
            self.endpoint,
            tuple(i for i, _ in row.tasks),
            tuple(n for _, n in row.tasks),
            row.input_file_id,
            row.submitted_at,
        )
        engine.outbox.commit(
            partial(engine.journal.record_batch_created, row.row, batch_id, status), events=[submitted]
        )

    async def _not_submitted(self, indices: list[int], error: CallError, step: str) -> None:
        """The provider took no batch: lane auto sends the tasks live; lane batch tries again
        after a backoff while the error may pass (up to `max_attempts` refusals in a row), and
        stops the run when it cannot."""
        engine = self.engine
        for index in indices:  # nothing was submitted: what the lines held goes back
            engine.ledger.settle(_held(index), None)
        engine.outbox.note("batch_refused", {"step": step, "error": error.message, "status": error.status})
        if self.lane == AUTO:
            engine.give_back(indices)
            engine.wake()
            return
        self._refusals += 1
        if error.retryable and self._refusals < engine.settings.guards.max_attempts and engine.stopping is None:
            await asyncio.sleep(engine.retry_policy.delay_s(error, self._refusals))
            self._pending.extend(indices)  # the lane's loop submits them when this returns
            return
        engine.give_back(indices)
        engine.stop_dispatch(f"the provider refused the batch ({step}): {error.message}")

    def _within_budget(self, indices: list[int]) -> list[int]:
        """The tasks (a prefix) whose worst case at the batch rate fits the budget; it is held in
        the run's ledger until their lines arrive. Stops dispatch when not all fit."""
        engine = self.engine
        ledger = engine.ledger
        if ledger.budget_usd is None:
            return indices
        fits: list[int] = []
        for index in indices:
            usage = worst_usage(engine.tasks[index].body, self.price.max_output) if self.price is not None else None
            worst = self.price.cost(usage) if self.price is not None and usage is not None else None
            if worst is None or not ledger.reserve(_held(index), worst):
                engine.stop_dispatch(
                    f"budget: ${ledger.committed_usd:.4f} spent or held, a batch of {len(indices)} tasks would pass "
                    f"the budget of ${ledger.budget_usd:.2f}; {len(fits)} submitted"
                )
                break
            fits.append(index)
        return fits

    # ----------------------------------------------------------------- following

    async def _reattach(self, row: BatchRow) -> None:
        """A batch an earlier session submitted (or was about to)."""
        engine = self.engine
        if row.batch_id is None:
            try:
                found = await self.client.find_batch(row.input_file_id)
            except Exception as exc:  # noqa: BLE001 - cannot tell: leave it for the next session
                engine.outbox.note("batch_lookup_failed", {"input_file_id": row.input_file_id, "error": str(exc)})
                return
            if found is None:  # never created: the tasks are free
                engine.journal.drop_batch(row.row, "not_created")
                self._pending.extend(i for i, _ in row.tasks)
                return
            row = replace(row, batch_id=found["id"])
            self._submitted(row, found["id"], found.get("status") or "validating")
        await self._follow(row)

    async def _follow(self, row: BatchRow) -> None:
        """Poll the batch until it ends, then journal its lines."""
        engine = self.engine
        client = self.client
        assert row.batch_id is not None
        settings = engine.settings
        wait = settings.lanes.batch_poll_s
        last: tuple[str, int, int] | None = None
        cancel_sent = False
        abort_deadline: float | None = None
        failures = 0
        while True:
            pull = not cancel_sent and self.planner is not None and self.planner.pull_back_due(row)
            if (self._aborting or pull) and not cancel_sent:
                cancel_sent = True
                if pull:  # its unrun lines go live (`_outcomes`)
                    self._pulled.add(row.batch_id)
                else:
                    abort_deadline = time.monotonic() + ABORT_WAIT_S
                with contextlib.suppress(Exception):
                    await client.cancel_batch(row.batch_id)
            elif engine.stopping is not None and not self._aborting:
                return  # a stop that is not an abort: the batch runs on; resume collects it
            try:
                batch = await client.retrieve_batch(row.batch_id)
                failures = 0
            except Exception as exc:  # noqa: BLE001 - a failed poll is tried again
                failures += 1
                engine.outbox.note(
                    "batch_poll_failed", {"batch_id": row.batch_id, "error": client.classify(exc).message}
                )
                batch = None
            if batch is not None:
                status = batch.get("status") or "?"
                counts = batch.get("request_counts") or {}
                now = (status, counts.get("completed") or 0, counts.get("failed") or 0)
                if status in TERMINAL:
                    await self._collect(row, batch)
                    return
                if now != last:
                    last = now
                    progress = BatchProgress(
                        row.batch_id, status, now[1], now[2], counts.get("total") or len(row.tasks), round(wait, 1)
                    )
                    engine.outbox.commit(
                        partial(engine.journal.record_batch_progress, row.row, status, dict(counts)),
                        events=[progress],
                        quiet=True,
                    )
            if abort_deadline is not None and time.monotonic() > abort_deadline:
                return  # still cancelling: a resume collects what it completed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._until_stopped(cancel_sent)
            wait = min(settings.lanes.batch_poll_max_s, wait * 1.5, self.planner.poll_s if self.planner else math.inf)

    async def _until_stopped(self, cancel_sent: bool) -> None:
        """Wait (for the next poll) until the run stops or aborts, whichever is news."""
        while not (self._aborting and not cancel_sent) and (self._aborting or self.engine.stopping is None):
            self._wake.clear()
            await self._wake.wait()

    async def _collect(self, row: BatchRow, batch: dict[str, Any]) -> None:
        """Read a finished batch's files and journal every line, with the batch closed, at once."""
        engine = self.engine
        assert row.batch_id is not None
        status = batch.get("status") or "?"
        files = (batch.get("output_file_id"), batch.get("error_file_id"))
        answered: dict[str, dict[str, Any]] = {}
        for file_id in files:
            if file_id:
                for line in jsonl(await self.client.file_content(file_id)):
                    custom_id = line.get("custom_id")
                    if isinstance(custom_id, str) and custom_id not in answered:
                        answered[custom_id] = line
        lines, events, requeue = self._outcomes(row, status, answered, batch_errors(batch))
        billed = {a.index: a.cost_usd for a in (*(a for a, _ in lines.succeeded), *lines.failed, *lines.retried)}
        for index, _ in row.tasks:  # each line's reservation becomes what it cost, in one step
            engine.ledger.settle(_held(index), billed.get(index))
        ended = BatchEnded(
            row.batch_id, status, len(lines.succeeded), len(lines.failed), len(requeue), len(lines.unfinished)
        )
        try:
            engine.outbox.commit(
                partial(engine.journal.record_batch_lines, row.row, status, files, lines), events=[*events, ended]
            )
        except JournalWriteError:
            return  # the run is stopping; the batch stays open for the next session
        if self.planner is not None:
            self._pending.extend(self.planner.batch_ended(row, status))
        for index in requeue:
            if self.lane == BATCH and not self._aborting:
                self._pending.append(index)
            else:  # lane auto: a failed batch line is retried live
                engine.retry_soon(index, 0.0)
        engine.check_failure_rate()
        engine.wake()

    def _outcomes(
        self, row: BatchRow, status: str, answered: dict[str, dict[str, Any]], why_failed: str | None
    ) -> tuple[BatchLines, list[EngineEvent], list[int]]:
        """Each line of a finished batch as its task's outcome: (the lines by how they ended, the
        events reporting them, the tasks to run again)."""
        engine = self.engine
        lines = BatchLines()
        events: list[EngineEvent] = []
        requeue: list[int] = []
        ended_at = run_time()
        for index, number in row.tasks:
            if engine.states.get(index) is TaskState.SUCCEEDED:
                continue  # answered meanwhile (a live retry of an earlier session): never twice
            task = engine.tasks[index]
            attempt = Attempt(
                index, number, row.endpoint, row.submitted_at, max(0.0, (ended_at - row.submitted_at) * 1000.0), "ok"
            )
            outcome = line_outcome(answered.get(task.custom_id), status, why_failed, self.client.classify_answer)
            if outcome is None and row.batch_id in self._pulled:  # pulled back by the planner: live now
                outcome = CallError(ErrorClass.TIMEOUT, "pulled back to live to keep the deadline", None, "pulled_back")
            if outcome is None:  # not run: the batch was cancelled (abort); the task waits, unfinished
                attempt = replace(attempt, outcome="cancelled")
                lines.unfinished.append(attempt)
                events.append(TaskCancelled(index, attempt))
                continue
            if isinstance(outcome, CallResult):
                attempt = replace(
                    attempt,
                    status=200,
                    request_id=outcome.request_id,
                    usage=outcome.usage,
                    cost_usd=self.price.cost(outcome.usage) if self.price is not None else None,
                )
                verdict = self.checks.verdict(task.body, outcome) if self.checks is not None else None
                if verdict is None or verdict.ok:
                    lines.succeeded.append((attempt, outcome.body))
                    if verdict is not None and verdict.parsed is not None:
                        lines.parsed[index] = verdict.parsed
                    events.append(TaskSucceeded(attempt, outcome.content, checks=verdict.checks if verdict else ()))
                    continue
                self._unusable_line(index, task, attempt, outcome, verdict, lines, events, requeue)
                continue
            self._failed_line(
                index,
                replace(attempt, status=outcome.status, error=outcome, request_id=outcome.request_id),
                lines,
                events,
                requeue,
            )
        return lines, events, requeue

    def _unusable_line(
        self,
        index: int,
        task: Task,
        attempt: Attempt,
        result: CallResult,
        verdict: Verdict,
        lines: BatchLines,
        events: list[EngineEvent],
        requeue: list[int],
    ) -> None:
        """A line whose answer is not usable (`engine.answers`): asked again (the task's next line, or
        live in lane auto, carries the conversation), given more room, or the task's end."""
        engine = self.engine
        assert self.checks is not None
        follow = self.checks.follow_up(
            index,
            task.body,
            result,
            verdict,
            fits=lambda _: True,  # a batch line is held against the budget when its batch ends
            max_output=self.price.max_output if self.price is not None else None,
        )
        attempt = replace(attempt, error=follow.error, request_id=result.request_id)
        if follow.body is None:
            attempt = replace(attempt, outcome="failed")
            lines.failed.append(attempt)
            events.append(TaskFailed(attempt))
            return
        attempt = replace(attempt, outcome="retry", retry_in_s=0.0)
        engine.ask_again(index, follow.body)
        lines.retried.append(attempt)
        lines.bodies[index] = follow.body
        events.append(TaskRetrying(attempt, 0.0))
        requeue.append(index)

    def _failed_line(
        self, index: int, attempt: Attempt, lines: BatchLines, events: list[EngineEvent], requeue: list[int]
    ) -> None:
        """A line that failed: retried (in the next batch, or live) or the task's end, as a live
        attempt's failure would be."""
        engine = self.engine
        assert attempt.error is not None
        decision = engine.retry_policy.after_failure(
            attempt.error,
            engine.numbers.in_round(index),
            stopping=engine.stopping is not None,
            trimmed=False,
            can_fail_over=False,
        )
        if decision.next is Next.GIVE_UP and not decision.resumable:
            attempt = replace(attempt, outcome="failed")
            lines.failed.append(attempt)
            events.append(TaskFailed(attempt))
        else:  # a stop leaves the task for the next run: never failed while it had attempts left
            attempt = replace(attempt, outcome="retry", retry_in_s=0.0)
            lines.retried.append(attempt)
            events.append(TaskRetrying(attempt, 0.0))
            requeue.append(index)


def _held(index: int) -> tuple[str, int]:
    """The ledger's key of a task's line in a batch."""
    return ("batch", index)
