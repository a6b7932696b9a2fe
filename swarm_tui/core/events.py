"""What the engine tells its listeners: plain, immutable records of every state change.

Listeners (the journal exporter, the headless progress line, the TUI's buffer) receive these
synchronously from the engine's loop; they must be cheap. A task's final result is already
committed to the journal when its event is emitted.

Some events carry a payload for the journal that its log does not hold (an answer's bytes, an
agent's transcript, a tool's result, added tasks' bodies, a batch's journal row): the journal's
projections write it to their tables (`journal.projections`), the codec skips it (`payload()`
fields), so an event read back from the log has it as None. Payloads are left out of equality
and of `repr` (an answer or a transcript in a log line is noise, and could hold what a user
typed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from swarm_tui.core.call_errors import CallError
from swarm_tui.core.notes import (
    ActorLost,
    AggregateWritten,
    BatchLookupFailed,
    BatchPollFailed,
    BatchRefused,
    CacheUnavailable,
    JudgeFailed,
    MemoryFlushed,
    PlanMade,
    RayStarted,
    SessionStarted,
    SwarmFinished,
    TaskTrimmed,
)
from swarm_tui.core.task import Task
from swarm_tui.core.usage import Usage

NOT_LOGGED = "log"
"""Field metadata key: `False` for a payload field the event log does not write."""


def payload(default: Any = None) -> Any:
    """A field the journal's projections read and the event log does not write (see the module)."""
    return field(default=default, compare=False, repr=False, metadata={NOT_LOGGED: False})


def is_logged(f: Any) -> bool:
    """Whether the log writes dataclass field `f` (a `payload()` field: no)."""
    return f.metadata.get(NOT_LOGGED, True) is not False


class TaskState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    """Waiting out a backoff before its next attempt."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in (TaskState.SUCCEEDED, TaskState.FAILED)

    @property
    def kept_by_a_stop(self) -> bool:
        """A stop journals nothing for a task in this state: never started (queued, as on disk)
        or unfinished already (cancelled). So a stop costs nothing per task it never sent."""
        return self in (TaskState.QUEUED, TaskState.CANCELLED)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One HTTP call for one task, as journaled: failed and cancelled ones too (they may be billed)."""

    index: int
    number: int
    endpoint: str
    started_at: float
    """The call's start, epoch seconds on the session's steady clock (`util.clock.run_time`: its
    wall start plus the monotonic time since), so that the time between two calls of a session is
    a monotonic one, whatever the system clock did meanwhile."""
    latency_ms: float
    outcome: str
    """ok / retry / failed / cancelled"""
    status: int | None = None
    error: CallError | None = None
    request_id: str | None = None
    usage: Usage = Usage()
    cost_usd: float | None = None
    ttft_ms: float | None = None
    retry_in_s: float | None = None
    """For a retried attempt: the backoff before the next one."""
    estimated: bool = False
    """`usage` and `cost_usd` are estimates: the provider reported no usage, or the call was cut
    (abandoned, cancelled) after it went out and may have been billed all the same."""
    finish_reason: str | None = None
    """Why the answer ended, as the provider says (`stop`, `length`, `tool_calls`...)."""
    saved_usd: float | None = None
    """A replay from the response cache (lane `cache`, cost 0): what the call that got the answer
    cost, which this attempt did not pay again."""
    service_tier: str | None = None
    """The service tier the call was billed at when not the default (`flex`, `priority`:
    `core.tiers.billed_tier`); None for the default tier and for a batch line (its endpoint says)."""
    tokens_per_s: float | None = None
    """A streamed answer's writing speed: tokens a second from its first token to its last."""
    gap_ms: float | None = None
    """A streamed answer's mean time between two chunks (OpenTelemetry's time per output chunk)."""


@dataclass(frozen=True, slots=True)
class RunStarted:
    total: int
    pending: int
    concurrency: int
    provider: str
    simulated: bool
    ceiling: int | None = None
    """The user's limit, which the adaptive limit (`concurrency`) works under; None: the same."""
    stream: bool = False
    """Calls are streamed (an agent's call waits for its first token, then streams)."""


@dataclass(frozen=True, slots=True)
class TaskQueued:
    """A task (back) in the queue: after `retry_failed`, or at the start of a run after a stop."""

    index: int
    previous: TaskState


@dataclass(frozen=True, slots=True)
class AttemptStarted:
    index: int
    number: int
    endpoint: str
    hedge: bool = False
    """A backup sent because the task's first attempt was slow."""


@dataclass(frozen=True, slots=True)
class AttemptEnded:
    """An attempt that does not decide its task: the loser (or a failure) of a hedged pair."""

    attempt: Attempt

    @property
    def index(self) -> int:
        return self.attempt.index


@dataclass(frozen=True, slots=True)
class TaskRetrying:
    attempt: Attempt
    delay_s: float
    body: dict[str, Any] | None = payload()
    """The request the next attempt sends when it is not the task's body as journaled: an answer
    asked for again carries the conversation so far (the answer and why it was refused), which a
    resumed run goes on from. Not logged."""

    @property
    def index(self) -> int:
        return self.attempt.index


@dataclass(frozen=True, slots=True)
class TaskSucceeded:
    attempt: Attempt
    content: str
    response: dict[str, Any] | bytes | None = payload()
    """The answer as the journal keeps it in `results`: the bytes received (strict one-line JSON,
    `providers.answer`) or a body (a batch line's). Not logged."""
    checks: tuple[str, ...] = ()
    """The checks the answer passed (`json_schema`, `json`, `regex`...): none when the job asks for none."""
    parsed: str | None = payload()
    """The answer's JSON value as its checks read it (compact JSON text; results.jsonl's `parsed`),
    None when no check read JSON. Not logged."""

    @property
    def index(self) -> int:
        return self.attempt.index


@dataclass(frozen=True, slots=True)
class TaskFailed:
    attempt: Attempt
    body: dict[str, Any] | None = payload()
    """The request a retry of the task sends, when it is not the body as journaled: an answer that
    failed its checks carries the conversation with that answer and its error, so that `r` (or
    `resume --retry-failed`) asks it again with the reason. Not logged."""

    @property
    def index(self) -> int:
        return self.attempt.index


@dataclass(frozen=True, slots=True)
class AgentStepped:
    """A model call of a multi-step agent asked for tools: step `step` is done, its tool calls run
    next (the task keeps running; its slot goes back while the tools work)."""

    attempt: Attempt
    step: int
    tools: tuple[str, ...]
    """The names of the tools called, in the order the model asked."""
    body: dict[str, Any] | None = payload()
    """The task's request body that now holds this step's answer (its transcript): a resumed run
    goes on from it and never sends the call again. Not logged."""

    @property
    def index(self) -> int:
        return self.attempt.index


@dataclass(frozen=True, slots=True)
class ToolCallEnded:
    """One tool call of an agent's step finished; its result is journaled (and is in the transcript)."""

    index: int
    step: int
    call_id: str
    name: str
    ok: bool
    latency_ms: float
    arguments: str | None = payload()
    """The arguments the model gave (JSON text, as it wrote them). Not logged."""
    result: str | None = payload()
    """What the tool answered (or why it failed), as the transcript carries it. Not logged."""
    body: dict[str, Any] | None = payload()
    """The task's transcript that now carries the result (the call is never run again): on the
    last result of a step only, as the step's results are journaled together. Not logged."""


@dataclass(frozen=True, slots=True)
class TaskCancelled:
    index: int
    attempt: Attempt | None = None
    """The attempt that was in flight when it was cancelled, if any."""


@dataclass(frozen=True, slots=True)
class RunPaused:
    pass


@dataclass(frozen=True, slots=True)
class RunResumed:
    pass


@dataclass(frozen=True, slots=True)
class ConcurrencyChanged:
    limit: int
    reason: str
    ceiling: int | None = None
    """The user's limit after the change (None: unchanged, or not adaptive)."""
    endpoint: str = ""
    """A routed run: the endpoint whose own limit moved to `endpoint_limit` (`limit` is the route's total)."""
    endpoint_limit: int | None = None


@dataclass(frozen=True, slots=True)
class RateGateClosed:
    """A provider said to wait (Retry-After): no task of it is dispatched until then."""

    seconds: float
    asked_s: float | None = None
    """What the provider asked for when it was more than the cap (`--max-retry-after`)."""


@dataclass(frozen=True, slots=True)
class RateLimitsLearned:
    """The provider's RPM/TPM, from configuration or its `x-ratelimit-limit-*` headers."""

    rpm: int | None
    tpm: int | None
    estimated: bool = False
    """The RPM is estimated from 429s (the provider states none)."""
    endpoint: str = ""
    """Whose limits these are in a routed run (each endpoint learns its own); "" otherwise."""


@dataclass(frozen=True, slots=True)
class EndpointSwitched:
    """New attempts now go to `endpoint` (the fallback, or the primary again)."""

    endpoint: str
    reason: str
    from_primary: bool | None = None
    """The calls went to the primary until now (summary.json's failovers say it); None: not said
    (a log written before the field: the summary works it out from the endpoints)."""
    source: str = ""
    """The endpoint the switch is about (the one that opened, or came back); "" in older logs."""


@dataclass(frozen=True, slots=True)
class PlanChanged:
    """The autopilot's plan (`--deadline`): how many of the tasks left go live and how many as
    batches, when the run is projected to end and at what cost, and whether that keeps the
    deadline and the budget (with the numbers, in `reason`)."""

    live: int
    batch: int
    finish_at: float | None
    """Epoch seconds (None: the finish rides on a batch turnaround not known yet)."""
    cost_usd: float | None
    deadline_at: float
    feasible: bool
    reason: str


@dataclass(frozen=True, slots=True)
class Spawn:
    """Where tasks added by an agent come from: the tool call of `parent` (an orchestrator's
    `spawn_agents`) that asked for them. The call's place in its agent's transcript (`step`,
    `position`) is what makes a spawn happen once: a resumed run that runs the call again finds
    the tasks it added, journaled with this record, and adds none."""

    parent: int
    """The spawning agent's task index."""
    depth: int
    """The new tasks' depth: the parent's plus one (a job's own tasks are at depth 0)."""
    step: int
    """The parent's step whose tool call this is."""
    position: int
    """The call's place among that step's tool calls."""
    call_id: str
    """The model's id of the call (an `execute_tool` span's), not unique on every provider."""
    wait: bool = True
    """The call waits for the new tasks' answers (else a later `wait_agents` does)."""

    @property
    def key(self) -> str:
        """The call's place in its parent's transcript, the same in every session."""
        return f"{self.step}:{self.position}"


@dataclass(frozen=True, slots=True)
class TasksAdded:
    """New tasks joined the run (a plan's sub-tasks, a later round, an agent's spawn); `total` is
    the new count."""

    indices: tuple[int, ...]
    total: int
    tasks: tuple[Task, ...] = payload(())
    """The new tasks, bodies included (the journal holds every task: resume needs no job file).
    Not logged."""
    spawn: Spawn | None = None
    """The agent's tool call that added them (None: the run's own: a job, a plan, a round)."""


@dataclass(frozen=True, slots=True)
class PhaseChanged:
    """The swarm moved to another step: planning, warm-up, fan-out (round r), aggregating, done."""

    phase: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PhaseAttempt:
    """A call outside the task grid (planner, warm-up, aggregator): billed and journaled all the same."""

    phase: str
    attempt: Attempt


@dataclass(frozen=True, slots=True)
class BatchSubmitted:
    """Tasks sent as one provider batch (`--lane batch|auto`): each is running, its attempt
    `numbers[i]` carried by the batch's line, until the batch's output says how it ended."""

    batch_id: str
    endpoint: str
    """The lane's endpoint name (`<provider>/batch`): its attempts are billed at the batch rate."""
    indices: tuple[int, ...]
    numbers: tuple[int, ...]
    input_file_id: str = ""
    submitted_at: float = 0.0
    """Epoch seconds: when its input file was journaled (the provider's 24 h window runs from about then)."""
    row: int | None = payload()
    """The batch's row in the journal (`Journal.record_batch_intent`). Not logged."""
    status: str = payload("validating")
    """The batch's status as the provider created it. Not logged."""


@dataclass(frozen=True, slots=True)
class BatchProgress:
    """A poll of a batch: its status (validating, in_progress, finalizing, completed, expired,
    cancelling, cancelled, failed) and request counts."""

    batch_id: str
    status: str
    completed: int
    failed: int
    total: int
    next_poll_s: float | None = None
    row: int | None = payload()
    """The batch's row in the journal. Not logged."""
    counts: dict[str, int] | None = payload()
    """The provider's `request_counts` as it said them. Not logged."""


@dataclass(frozen=True, slots=True)
class BatchEnded:
    """A batch's lines are journaled: how many succeeded, failed for good, went back to be run
    again (error lines that may be retried, lines not run before an expiry), or stay unfinished
    (an abort's cancel)."""

    batch_id: str
    status: str
    succeeded: int
    failed: int
    requeued: int
    unfinished: int = 0
    row: int | None = payload()
    """The batch's row in the journal. Not logged."""
    files: tuple[str | None, str | None] = payload((None, None))
    """The batch's output and error file ids. Not logged."""


@dataclass(frozen=True, slots=True)
class AnswerJudged:
    """The judge scored a task's answer (1-10) against the task and the rubric."""

    index: int
    score: float
    reason: str
    round: int = 1
    rolling: float | None = None
    """The rolling score after this one (None until the baseline is made)."""
    baseline: float | None = None


@dataclass(frozen=True, slots=True)
class QualityDrift:
    """The rolling judge score fell more than the allowed drop below its baseline: `action`
    (alert, flush_memory, pause, failover) was taken."""

    rolling: float
    baseline: float
    action: str
    detail: str = ""
    round: int = 1


@dataclass(frozen=True, slots=True)
class DispatchWaiting:
    """What the next task in line waits for before it can be sent, when that changed: a slot of the
    in-flight limit, the RPM or TPM bucket, the provider's Retry-After gate, the budget's room, the
    run's gentle start, a pause or a suspension ("" once nothing holds it: tasks go out, or none wait)."""

    reason: str
    wait_s: float | None = None
    """How long until it may go, when known (a gate, a bucket)."""
    detail: str = ""
    """What a person needs to read it: "50 of 50 in flight", "asked 999999s, capped at 60s"."""


@dataclass(frozen=True, slots=True)
class CallProgress:
    """A streamed call's progress: its first token (with the time it took), then every few seconds
    while it streams (the tokens so far and their pace)."""

    index: int
    number: int
    tokens: int
    ttft_ms: float | None = None
    tokens_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class AgentSilent:
    """An agent's call has been silent far longer than its like takes: nothing from it for
    `silent_s` (its first word, or its next chunk), where `expected_s` was expected."""

    index: int
    number: int
    silent_s: float
    expected_s: float | None = None
    streaming: bool = False
    """It had started streaming: the silence is between two chunks."""


@dataclass(frozen=True, slots=True)
class RunSuspended:
    """Nothing new is sent: the provider cannot serve the account now (`quota`: its quota or spend
    limit is spent) or asked for a wait past `--max-retry-after` (`retry_after`). Calls that meet
    it go back in line, not failed; a probe (every `probe_every_s`) resumes the run by itself."""

    kind: str
    reason: str
    endpoint: str = ""
    probe_every_s: float | None = None
    until_s: float | None = None
    """The most the run waits so (`--max-suspend`) before it stops, resumable."""


@dataclass(frozen=True, slots=True)
class SuspensionEnded:
    """The provider answered again (a probe went through): the run sends again."""

    kind: str
    suspended_s: float


@dataclass(frozen=True, slots=True)
class RunStopping:
    """Dispatch stopped for a reason other than completion: abort, budget, error rate."""

    reason: str


@dataclass(frozen=True, slots=True)
class RunFinished:
    succeeded: int
    failed: int
    cancelled: int
    aborted: bool
    stop_reason: str | None = None
    suspended: str | None = None
    """The run stopped suspended (`quota`, `retry_after`): resumable once the provider serves again."""


EngineEvent = (
    RunStarted
    | TaskQueued
    | AttemptStarted
    | AttemptEnded
    | TaskRetrying
    | TaskSucceeded
    | TaskFailed
    | TaskCancelled
    | AgentStepped
    | ToolCallEnded
    | RunPaused
    | RunResumed
    | ConcurrencyChanged
    | RateGateClosed
    | RateLimitsLearned
    | EndpointSwitched
    | PlanChanged
    | TasksAdded
    | PhaseChanged
    | PhaseAttempt
    | BatchSubmitted
    | BatchProgress
    | BatchEnded
    | AnswerJudged
    | QualityDrift
    | RunStopping
    | RunFinished
    | DispatchWaiting
    | CallProgress
    | AgentSilent
    | RunSuspended
    | SuspensionEnded
    | SessionStarted
    | TaskTrimmed
    | BatchRefused
    | BatchLookupFailed
    | BatchPollFailed
    | JudgeFailed
    | MemoryFlushed
    | PlanMade
    | AggregateWritten
    | SwarmFinished
    | RayStarted
    | ActorLost
    | CacheUnavailable
)
