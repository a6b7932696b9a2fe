"""Multi-step agents: a model call that asked for tools is a step; its tool calls run (in parallel,
holding no slot), and their results are journaled together with the transcript that carries them
(one write a step); then the agent's next model call goes ahead of the queue. Past `max_steps`
the agent fails as `max_steps`."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.errors import JournalWriteError
from swarm_tui.core.events import AgentStepped, Attempt, TaskFailed, ToolCallEnded
from swarm_tui.core.task import Task
from swarm_tui.engine.calls import answer_message
from swarm_tui.engine.settings import MAX_STEPS_CODE
from swarm_tui.providers.client import CallResult
from swarm_tui.tools.agent_tools import CallSite
from swarm_tui.tools.transcript import (
    assistant_message,
    owed_tool_calls,
    pending_tool_calls,
    steps_taken,
    tool_message,
)

if TYPE_CHECKING:
    from swarm_tui.engine.engine import SwarmEngine
    from swarm_tui.tools.agent_tools import AgentTools
    from swarm_tui.tools.toolbox import ToolOutcome

log = logging.getLogger(__name__)


class ToolSteps:
    """The tool calls of the run's agents (`toolbox` None: no task is an agent)."""

    def __init__(self, engine: SwarmEngine, toolbox: AgentTools | None) -> None:
        self.engine = engine
        self.toolbox = toolbox

    @property
    def enabled(self) -> bool:
        return self.toolbox is not None

    def offered(self, index: int, body: dict[str, Any]) -> dict[str, Any]:
        """The tools offered to agent `index` (the job's, and an orchestrator's by its depth), when
        its body names none of its own."""
        if self.toolbox is None or "tools" in body:
            return body
        tools = self.toolbox.offered_to(index)
        return {**body, "tools": tools} if tools else body

    def resumes_itself(self, index: int) -> bool:
        """An agent stopped between a step's model call and the end of its tool calls (a crash, an
        abort, `x`): exactly the tool calls its transcript still owes run before the model is
        asked again (True: they were started)."""
        if self.toolbox is None:
            return False
        messages = self.engine.tasks[index].body.get("messages", [])
        if not pending_tool_calls(messages):
            return False
        self._start(index, steps_taken(messages))
        return True

    def on_tool_request(self, index: int, attempt: Attempt, result: CallResult) -> None:
        """A model call asked for tools: journal it and the transcript that now holds it (so it is
        never sent again), then run its tool calls; the agent calls the model again after them."""
        engine = self.engine
        assert self.toolbox is not None
        task = engine.tasks[index]
        messages = list(task.body.get("messages", []))
        step = steps_taken(messages) + 1
        if step > self.toolbox.max_steps:
            error = CallError(
                ErrorClass.BAD_RESPONSE,
                f"the agent still asked for tools after {self.toolbox.max_steps} steps (max_steps)",
                200,
                MAX_STEPS_CODE,
                request_id=result.request_id,
            )
            failed = TaskFailed(dataclasses.replace(attempt, outcome="failed", error=error))
            engine.outbox.commit(partial(engine.journal.record_failure, failed.attempt), events=[failed])
            engine.check_failure_rate()
            return
        asked = assistant_message(answer_message(result))
        body = {**task.body, "messages": [*messages, asked]}
        stepped = AgentStepped(attempt, step, tuple(c["function"]["name"] for c in asked["tool_calls"]))
        engine.tasks[index] = Task(task.index, task.custom_id, body)
        engine.numbers.new_round(index)  # each step's model call has its own retries
        engine.outbox.commit(partial(engine.journal.record_step, attempt, body), events=[stepped])
        self._start(index, step)

    def _start(self, index: int, step: int) -> None:
        task = asyncio.create_task(self._run(index, step), name=f"tools-{index}-{step}")
        task.add_done_callback(lambda done: self._done(done, index))
        self.engine.queue.work(index, task)

    def _done(self, task: asyncio.Task[None], index: int) -> None:
        """A step's tool calls are over, however (also when cancelled before they began, when the
        coroutine never runs): the agent goes back ahead of the queue for its next model call,
        or, cancelled by the user, waits unfinished with the tool results it has."""
        engine = self.engine
        queue = engine.queue
        if queue.worked(index, task):
            if queue.is_held(index):
                queue.rest(index)
                engine.cancel_now(index)
            else:
                queue.go_first(index)  # its next model call (or, after a stop, it waits unfinished)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("tool run %s crashed", task.get_name(), exc_info=exc)
            engine.fail_run(f"internal error in {task.get_name()}: {type(exc).__name__}: {exc}")

    async def _run(self, index: int, step: int) -> None:
        """The tool calls of one step, in parallel; their results are journaled together when the
        last one ends (one write of the transcript a step, not one a result), or, when the agent
        is stopped first (`x`, a stop of the run), those that ended by then. What follows is
        `_done`'s."""
        assert self.toolbox is not None
        toolbox = self.toolbox
        calls = owed_tool_calls(self.engine.tasks[index].body.get("messages", []))
        ended: dict[int, ToolOutcome] = {}
        """Each call's outcome by its place in the step (the model's ids need not be unique)."""

        async def run_one(position: int, call: dict[str, Any]) -> None:
            function = call.get("function") or {}
            ended[position] = await toolbox.call(
                function.get("name", ""),
                function.get("arguments") or "{}",
                caller=index,
                site=CallSite(step, position, call.get("id") or ""),
            )

        try:
            await asyncio.gather(*(run_one(position, call) for position, call in calls))
        finally:  # also when cancelled: what ended is kept, what did not runs again
            kept = [(call, ended[position]) for position, call in calls if position in ended]
            self._journal_results(index, step, kept)

    def _journal_results(self, index: int, step: int, results: list[tuple[dict[str, Any], ToolOutcome]]) -> None:
        """A step's tool results (in the order the model asked for them) and the transcript that now
        carries them all, in one journal write; then the events that report them."""
        if not results:
            return
        engine = self.engine
        task = engine.tasks[index]
        answered = [tool_message(call["id"], outcome.text) for call, outcome in results]
        body = {**task.body, "messages": [*task.body["messages"], *answered]}
        events = [
            ToolCallEnded(
                index, step, call["id"], (call.get("function") or {}).get("name", ""), outcome.ok, outcome.latency_ms
            )
            for call, outcome in results
        ]
        engine.tasks[index] = Task(task.index, task.custom_id, body)
        try:
            rows = [(call, outcome.text, outcome.ok, outcome.latency_ms) for call, outcome in results]
            engine.outbox.commit(partial(engine.journal.record_tool_calls, index, step, rows, body), events=events)
        except JournalWriteError:
            pass  # the journal told the engine, which is stopping the run; the agent stays unfinished
