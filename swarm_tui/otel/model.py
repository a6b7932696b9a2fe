"""The span model: a run's events, in their log order, become spans by OpenTelemetry's GenAI
conventions. One piece of code for the live export and the journal's, so both give the same spans.

The trace, per session of the run (`SessionStarted` numbers them): a workflow span
(`invoke_workflow <job>`), the root; under it an agent span per task (`invoke_agent worker`,
from its first attempt to the event that settled it) and per call of the swarm's planner,
warm-up, aggregator or judge (`invoke_agent plan` ...); under an agent span a `chat` span per
attempt journaled (every row of `attempts`, so the counts are summary.json's) and an
`execute_tool` span per tool call; an agent an orchestrator spawned is under the `execute_tool`
span of the `spawn_agents` call that spawned it (its parent and depth as attributes), so the
trace's tree is the tree of agents. Retries, 429s with their Retry-After, hedges and abandoned
stragglers are events of the agent span; failovers, quality drifts, closed rate gates, phases
and the judge's scores are events of the workflow span. Cost, lane, outcome and the project's
other figures are attributes under `swarm_tui.`.

Times come from the events: an attempt's own start and latency (the same live and from the
journal), else the time the event was logged (`at`: the log's time afterwards, the delivery's
live, a commit apart). A span goes out when it ends: a chat span with its attempt's event, an
agent span when its task settles, the workflow span when its session ends (`close`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from swarm_tui.core.events import (
    AgentStepped,
    AnswerJudged,
    Attempt,
    AttemptEnded,
    AttemptStarted,
    BatchEnded,
    BatchSubmitted,
    EndpointSwitched,
    PhaseAttempt,
    PhaseChanged,
    QualityDrift,
    RateGateClosed,
    RunFinished,
    RunStarted,
    RunStopping,
    TaskCancelled,
    TaskFailed,
    TaskRetrying,
    TasksAdded,
    TaskSucceeded,
    ToolCallEnded,
)
from swarm_tui.core.notes import SessionStarted
from swarm_tui.otel.attempts import NS, chat_attributes, error_type, provider_name
from swarm_tui.otel.facts import RunFacts
from swarm_tui.otel.ids import SpanIds
from swarm_tui.otel.spans import CLIENT, Attributes, SpanEvent, SpanRecord

WORKER = "worker"
"""The agent name of a task of the grid."""
STRAGGLER = "straggler"
"""The error code of an attempt abandoned past the straggler deadline (`engine.deadlines`)."""


@dataclass(slots=True)
class _Open:
    """A span still open: its record, filled in as its events come."""

    record: SpanRecord
    first: int = 0
    """The attempt number that opened it (an agent's)."""
    settled: bool = False
    attempts: int = 0
    usage: list[int] = field(default_factory=lambda: [0, 0])


class SpanModel:
    """Feed it `(at, event)` in log order (`feed`), then `close(at)`; each call returns the spans
    that ended. Cheap per event: a few dicts, no I/O, no JSON unless content was asked for."""

    def __init__(self, ids: SpanIds, facts: RunFacts, *, session: int = 0) -> None:
        self.ids = ids
        self.facts = facts
        self.session = session
        """The session being read (0: none yet; a live model starts at its journal's)."""
        self._workflow: _Open | None = None
        self._agents: dict[int, _Open] = {}
        self._settled: dict[int, tuple[int, int]] = {}
        """(span id, first attempt number) of each task's last settled agent span."""
        self._spawned: dict[int, tuple[int, int, str]] = {}
        """(parent, depth, the spawning call's id) of each agent an orchestrator spawned."""
        self._last_at = 0.0

    # ----------------------------------------------------------------- feeding

    def feed(self, at: float, event: Any) -> list[SpanRecord]:
        self._last_at = at
        out: list[SpanRecord] = []
        match event:
            case SessionStarted():
                out.extend(self.close(at))
                self.session += 1
            case RunStarted():
                self._on_run_started(at, event)
            case RunFinished():
                self._on_run_finished(at, event)
            case AttemptStarted(index=index, number=number, endpoint=endpoint, hedge=hedge):
                agent = self._agent(index, number, at)
                if hedge:
                    hedged = {NS + "attempt": number, NS + "endpoint": endpoint}
                    agent.record.events.append(SpanEvent(NS + "hedge", at, hedged))
            case TaskRetrying(attempt=attempt, delay_s=delay):
                agent = self._agent(attempt.index, attempt.number, attempt.started_at)
                out.append(self._chat(attempt, agent))
                agent.record.events.append(self._retry_event(attempt, delay))
            case AttemptEnded(attempt=attempt):
                agent = self._late(attempt) or self._agent(attempt.index, attempt.number, attempt.started_at)
                out.append(self._chat(attempt, agent))
                if attempt.error is not None and attempt.error.code == STRAGGLER:
                    abandoned = SpanEvent(NS + "abandoned", _end(attempt), {NS + "attempt": attempt.number})
                    agent.record.events.append(abandoned)
            case AgentStepped(attempt=attempt, step=step, tools=tools):
                agent = self._agent(attempt.index, attempt.number, attempt.started_at)
                chat = self._chat(attempt, agent)
                chat.attributes[NS + "agent.step"] = step
                chat.attributes[NS + "agent.tools"] = tools
                out.append(chat)
            case TaskSucceeded(attempt=attempt):
                agent = self._agent(attempt.index, attempt.number, attempt.started_at)
                chat = self._chat(attempt, agent)
                self._answer_attributes(chat, event)
                out.append(chat)
                out.append(self._settle(agent, attempt.index, _end(attempt), "succeeded"))
            case TaskFailed(attempt=attempt):
                agent = self._agent(attempt.index, attempt.number, attempt.started_at)
                out.append(self._chat(attempt, agent))
                settled = self._settle(agent, attempt.index, _end(attempt), "failed")
                settled.error = error_type(attempt)
                out.append(settled)
            case TaskCancelled(index=index, attempt=attempt):
                if attempt is not None:
                    agent = self._agent(index, attempt.number, attempt.started_at)
                    out.append(self._chat(attempt, agent))
                if index in self._agents:
                    out.append(self._settle(self._agents[index], index, at, "cancelled"))
            case ToolCallEnded():
                out.append(self._tool(at, event))
            case PhaseAttempt(phase=phase, attempt=attempt):
                out.extend(self._phase(phase, attempt))
            case TasksAdded(indices=indices, spawn=spawn) if spawn is not None:
                for index in indices:
                    self._spawned[index] = (spawn.parent, spawn.depth, spawn.call_id)
            case _:
                self._workflow_event(at, event)
        return out

    def close(self, at: float | None = None) -> list[SpanRecord]:
        """End the session being read: its agents still open (unfinished: a stop, a killed
        process) and its workflow span."""
        at = self._last_at if at is None else at
        out = [
            self._settle(agent, index, max(at, agent.record.start), "unfinished")
            for index, agent in list(self._agents.items())
        ]
        self._settled.clear()  # a hedge of this session cannot end in the next
        if self._workflow is not None:
            record = self._workflow.record
            if not self._workflow.settled:
                record.end = max(at, record.start)
            record.attributes[NS + "attempts"] = self._workflow.attempts
            record.attributes["gen_ai.usage.input_tokens"] = self._workflow.usage[0]
            record.attributes["gen_ai.usage.output_tokens"] = self._workflow.usage[1]
            out.append(record)
            self._workflow = None
        return out

    # ----------------------------------------------------------------- the workflow span

    def _session_number(self) -> int:
        return max(self.session, 1)  # a journal from before SessionStarted: its one session

    def _root(self, at: float) -> _Open:
        if self._workflow is None:
            name = self.facts.job_name
            self._workflow = _Open(
                SpanRecord(
                    f"invoke_workflow {name}",
                    self.ids.span("session", self._session_number()),
                    None,
                    at,
                    at,
                    attributes={
                        "gen_ai.operation.name": "invoke_workflow",
                        "gen_ai.workflow.name": name,
                        NS + "session": self._session_number(),
                    },
                )
            )
        return self._workflow

    def _on_run_started(self, at: float, event: RunStarted) -> None:
        root = self._root(at)
        root.settled = False
        attributes = root.record.attributes
        attributes.setdefault(NS + "tasks", event.total)
        attributes["gen_ai.provider.name"] = provider_name(event.provider)
        attributes[NS + "simulated"] = event.simulated
        root.record.events.append(
            SpanEvent(NS + "run_started", at, {NS + "pending": event.pending, NS + "concurrency": event.concurrency})
        )

    def _on_run_finished(self, at: float, event: RunFinished) -> None:
        root = self._root(at)
        root.settled = True
        record = root.record
        record.end = max(at, record.start)
        record.attributes.update(
            {
                NS + "succeeded": event.succeeded,
                NS + "failed": event.failed,
                NS + "cancelled": event.cancelled,
                NS + "aborted": event.aborted,
            }
        )
        if event.stop_reason:
            record.attributes[NS + "stop_reason"] = event.stop_reason

    def _workflow_event(self, at: float, event: Any) -> None:
        """A run-wide event as an event of the workflow span (others are not traced)."""
        match event:
            case EndpointSwitched(endpoint=endpoint, reason=reason, from_primary=from_primary):
                attributes: Attributes = {NS + "endpoint": endpoint, NS + "reason": reason}
                if from_primary is not None:
                    attributes[NS + "from_primary"] = from_primary
                name = "failover"
            case QualityDrift(rolling=rolling, baseline=baseline, action=action, detail=detail, round=round_number):
                attributes = {
                    NS + "rolling": rolling,
                    NS + "baseline": baseline,
                    NS + "action": action,
                    NS + "detail": detail,
                    NS + "round": round_number,
                }
                name = "quality_drift"
            case RateGateClosed(seconds=seconds, asked_s=asked):
                attributes = {NS + "retry_after_s": seconds}
                if asked is not None:
                    attributes[NS + "retry_after_asked_s"] = asked
                name = "rate_gate_closed"
            case PhaseChanged(phase=phase, detail=detail):
                attributes, name = {NS + "phase": phase, NS + "detail": detail}, "phase"
            case RunStopping(reason=reason):
                attributes, name = {NS + "reason": reason}, "run_stopping"
            case AnswerJudged(index=index, score=score, reason=reason, round=round_number):
                attributes = {
                    "gen_ai.evaluation.name": "judge",
                    "gen_ai.evaluation.score.value": score,
                    NS + "task.index": index,
                    NS + "round": round_number,
                }
                if self.facts.content:
                    attributes["gen_ai.evaluation.explanation"] = reason
                self._root(at).record.events.append(SpanEvent("gen_ai.evaluation.result", at, attributes))
                return
            case BatchSubmitted(batch_id=batch_id, indices=indices):
                attributes, name = {NS + "batch.id": batch_id, NS + "batch.requests": len(indices)}, "batch_submitted"
            case BatchEnded(batch_id=batch_id, status=status, succeeded=ok, failed=failed, requeued=requeued):
                attributes = {
                    NS + "batch.id": batch_id,
                    NS + "batch.status": status,
                    NS + "succeeded": ok,
                    NS + "failed": failed,
                    NS + "requeued": requeued,
                }
                name = "batch_ended"
            case _:
                return
        self._root(at).record.events.append(SpanEvent(NS + name, at, attributes))

    # ----------------------------------------------------------------- agents

    def _agent(self, index: int, number: int, at: float) -> _Open:
        """The open agent span of a task, opened by its first attempt (its id: the task's index
        and that attempt's number, so a task run again after it settled gets a span of its own)."""
        agent = self._agents.get(index)
        if agent is None:
            root = self._root(at)
            attributes: Attributes = {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": WORKER,
                NS + "task.index": index,
            }
            parent_id = root.record.span_id
            spawned = self._spawned.get(index)
            if spawned is not None:  # under the execute_tool span of the call that spawned it
                parent, depth, call_id = spawned
                parent_id = self.ids.span("tool", parent, call_id)
                attributes[NS + "agent.parent"] = parent
                attributes[NS + "agent.depth"] = depth
            agent = self._agents[index] = _Open(
                SpanRecord(
                    f"invoke_agent {WORKER}",
                    self.ids.span("agent", index, number),
                    parent_id,
                    at,
                    at,
                    attributes=attributes,
                ),
                first=number,
            )
        elif at < agent.record.start:
            agent.record.start = at
        return agent

    def _late(self, attempt: Attempt) -> _Open | None:
        """The span a hedged pair's other call belongs to when it ends after its task settled (the
        settled agent's, already sent): a stand-in carrying that span's id, its counts unused."""
        if attempt.index in self._agents:
            return None
        settled = self._settled.get(attempt.index)
        if settled is None or settled[1] > attempt.number:
            return None
        return _Open(SpanRecord("", settled[0], None, attempt.started_at, attempt.started_at))

    def _settle(self, agent: _Open, index: int, end: float, outcome: str) -> SpanRecord:
        del self._agents[index]
        self._settled[index] = (agent.record.span_id, agent.first)
        record = agent.record
        record.end = max(end, record.start)
        record.attributes[NS + "outcome"] = outcome
        record.attributes[NS + "attempts"] = agent.attempts
        record.attributes["gen_ai.usage.input_tokens"] = agent.usage[0]
        record.attributes["gen_ai.usage.output_tokens"] = agent.usage[1]
        return record

    def _retry_event(self, attempt: Attempt, delay: float) -> SpanEvent:
        error = attempt.error
        attributes: Attributes = {NS + "attempt": attempt.number}
        if delay == delay:  # NaN: an unknown delay, replayed from an old journal
            attributes[NS + "delay_s"] = delay
        if attempt.status is not None:
            attributes["http.response.status_code"] = attempt.status
        if error is not None:
            attributes["error.type"] = error_type(attempt)
            if error.retry_after_s is not None:
                attributes[NS + "retry_after_s"] = error.retry_after_s
        limited = attempt.status == 429 or (error is not None and error.kind.value == "rate_limit")
        return SpanEvent(NS + ("rate_limited" if limited else "retry"), _end(attempt), attributes)

    def _phase(self, phase: str, attempt: Attempt) -> list[SpanRecord]:
        """A call of the swarm's planner, warm-up, aggregator or the judge: an agent span of its
        own (named by the phase) around its chat span."""
        root = self._root(attempt.started_at)
        span = _Open(
            SpanRecord(
                f"invoke_agent {phase}",
                self.ids.span("phase", attempt.index, attempt.number),
                root.record.span_id,
                attempt.started_at,
                _end(attempt),
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": phase,
                    NS + "phase": phase,
                    NS + "task.index": attempt.index,
                },
            )
        )
        chat = self._chat(attempt, span, phase)
        chat.attributes[NS + "phase"] = phase
        record = span.record
        record.attributes[NS + "outcome"] = attempt.outcome
        if attempt.error is not None:
            record.error = error_type(attempt)
        return [chat, record]

    # ----------------------------------------------------------------- chat and tool spans

    def _chat(self, attempt: Attempt, parent: _Open, phase: str | None = None) -> SpanRecord:
        """An attempt's chat span; its attributes are made when it is sent (`chat_attributes`, off
        the loop live, never for a span dropped), but for the content, read now."""
        usage, error = attempt.usage, attempt.error
        body = (self.facts.body(attempt.index) if phase is None else None) or {}
        model = body.get("model") or (self.facts.phase_model(phase) if phase else self.facts.default_model)
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        attributes: Attributes = {}
        if self.facts.content and isinstance(body.get("messages"), list):
            attributes["gen_ai.input.messages"] = _json([_message(m) for m in body["messages"]])
        parent.attempts += 1
        parent.usage[0] += usage.prompt
        parent.usage[1] += usage.completion
        root = self._workflow
        if root is not None and root is not parent:
            root.attempts += 1
            root.usage[0] += usage.prompt
            root.usage[1] += usage.completion
        return SpanRecord(
            f"chat {model}" if model else "chat",
            self.ids.span("chat", attempt.index, attempt.number),
            parent.record.span_id,
            attempt.started_at,
            _end(attempt),
            CLIENT,
            attributes,
            error=(error.message or error_type(attempt)) if error is not None else None,
            deferred=partial(
                chat_attributes,
                attempt,
                str(model) if model else None,
                max_tokens if isinstance(max_tokens, int) else None,
                self.facts.server(attempt.endpoint),
            ),
        )

    def _answer_attributes(self, chat: SpanRecord, event: TaskSucceeded) -> None:
        """The model the kept answer names; with content, the answer's text (the event's, logged
        with it: the same both ways)."""
        model = self.facts.response_model(event.attempt.index)
        if model:
            chat.attributes["gen_ai.response.model"] = model
        if self.facts.content:
            message = {"role": "assistant", "parts": [{"type": "text", "content": event.content}]}
            if event.attempt.finish_reason:
                message["finish_reason"] = event.attempt.finish_reason
            chat.attributes["gen_ai.output.messages"] = _json([message])

    def _tool(self, at: float, event: ToolCallEnded) -> SpanRecord:
        agent = self._agents.get(event.index)
        parent = agent.record.span_id if agent is not None else self._root(at).record.span_id
        attributes: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.name,
            "gen_ai.tool.call.id": event.call_id,
            NS + "task.index": event.index,
            NS + "agent.step": event.step,
            NS + "latency_ms": event.latency_ms,
        }
        if self.facts.content:
            arguments, result = self.facts.tool_io(event)
            if arguments is not None:
                attributes["gen_ai.tool.call.arguments"] = arguments
            if result is not None:
                attributes["gen_ai.tool.call.result"] = result
        if not event.ok:
            attributes["error.type"] = "tool_error"
        return SpanRecord(
            f"execute_tool {event.name}",
            self.ids.span("tool", event.index, event.call_id),
            parent,
            at - event.latency_ms / 1000.0,
            at,
            attributes=attributes,
            error="tool_error" if not event.ok else None,
        )


def _end(attempt: Attempt) -> float:
    return attempt.started_at + attempt.latency_ms / 1000.0


def _message(message: Any) -> Any:
    """A chat message in the conventions' shape (role and parts); one that is not plain text as it is."""
    if isinstance(message, dict) and isinstance(message.get("content"), str) and set(message) <= {"role", "content"}:
        return {"role": message.get("role"), "parts": [{"type": "text", "content": message["content"]}]}
    return message


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
