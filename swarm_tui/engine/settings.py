"""How an engine runs: its settings, by concern, and the small vocabulary its parts share.

`EngineSettings` is five groups, each read by the parts it concerns: `pacing` (admission: the
in-flight limit, RPM/TPM, how long a Retry-After is honoured), `calls` (one attempt's deadlines,
streaming, hedges, an answer's size), `guards` (what ends a task or a run: attempts, budget,
failure rate), `lanes` (how tasks are carried: live, provider batches, the deadline's plan) and
`answers` (what an unusable answer leads to: re-asks, more room). The command line names every
field flat (`--timeout` is `timeout_s`): `EngineSettings.of(...)` and `settings.but(...)` take
those names and put each in its group. The response cache's settings are the run's, not the
engine's (`cache.CacheSettings`, on the run's plan)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from swarm_tui.core.call_errors import ErrorClass
from swarm_tui.core.lanes import LIVE
from swarm_tui.core.quota import WAIT
from swarm_tui.core.task import Task
from swarm_tui.engine.pacing.deadlines import STRAGGLER_FACTOR
from swarm_tui.providers.answer import MAX_ANSWER_BYTES

Trimmer = Callable[[Task], "Task | None"]
"""Shortens a request that passed the model's context length (e.g. drops the rolling memory);
None when there is nothing to drop."""


class RunStopped(Exception):
    """Raised by `call_direct` when the run was stopped (abort, budget) before the call could go out."""


MAX_STEPS_CODE = "max_steps"
"""The code of a multi-step agent that still asked for tools after its last allowed step."""

TRUNCATED_CODE = "length"
"""The code of an answer cut at its token limit before any content (`finish_reason: length`)."""

CONGESTED_LATENCY_SHARE = 0.25
"""A timeout counts as congestion when the median answer takes over this share of the timeout."""

STREAM_IDLE_S = 30.0
"""The default `--stream-idle`: a reasoning model may think silently for a while between chunks."""

HEDGE_MAX_SHARE = 0.05
HEDGE_QUIET_AFTER_429_S = 5.0
"""After a 429, backups wait this long while work waits in line (at the idle tail, the pace decides)."""

DEFAULT_MAX_TOKENS = 1024
"""What a request without max_tokens is assumed to reserve against TPM."""

REFUSALS = frozenset({ErrorClass.AUTH, ErrorClass.PERMISSION, ErrorClass.NOT_FOUND, ErrorClass.QUOTA})
REFUSALS_TO_STOP = 3
"""Calls refused for good in a row (a key, permission or model the provider does not accept)
after which dispatch stops: every other task would be refused the same way, and paid for nothing."""


@dataclass(frozen=True)
class Pacing:
    """Admission: how many calls at once, how fast, and how long a provider may hold them back."""

    concurrency: int = 50
    adaptive: bool = True
    """AIMD on the in-flight limit; `concurrency` is then the ceiling."""
    rpm: int | None = None
    tpm: int | None = None
    max_retry_after_s: float = 60.0
    """A provider's Retry-After is honoured up to this (the OpenAI SDK's own cap): a header of
    `999999` or `inf` must not hold a run for days; a longer one suspends the run
    (`pacing.suspension`)."""
    on_quota: str = WAIT
    """Quota spent (or a Retry-After past the cap): `wait` (suspended, probed, resumed by itself)
    or `stop` (stopped at once, resumable, exit 75)."""
    max_suspend_s: float | None = 3600.0
    """A suspension lasting longer stops the run, resumable (exit 75); None: no bound."""


@dataclass(frozen=True)
class CallLimits:
    """One attempt: its deadlines, whether it streams, its backup, what its answer may hold."""

    timeout_s: float = 60.0
    """Hard wall-clock limit of one attempt (the SDK's read timeout is per read, not per call)."""
    stream: bool = False
    first_token_timeout_s: float | None = None
    """A streamed call's first token (None: `timeout_s`, which bounds it anyway)."""
    idle_timeout_s: float | None = STREAM_IDLE_S
    """`--stream-idle`: the most silence a streamed call may keep between two chunks; past it the
    stream is cut and sent again. A stream that keeps sending is never cut (`timeout_s` bounds a
    streamed call only until its first token)."""
    hedge: bool = False
    """Send a backup when an attempt runs past the running p95 x `hedge_factor`."""
    hedge_factor: float = 3.0
    straggler_factor: float | None = STRAGGLER_FACTOR
    """Abandon (and send again) a call past this many times what it should take at its
    max_tokens (`deadlines`); None: no straggler deadline, only the hard timeout."""
    max_answer_bytes: int = MAX_ANSWER_BYTES
    """What one answer may hold (`--max-answer-bytes`): a larger body fails as `answer_too_large`."""


@dataclass(frozen=True)
class RunGuards:
    """What ends a task (its attempts) or the run's dispatch (the budget, the failure rate)."""

    max_attempts: int = 4
    budget_usd: float | None = None
    """A ceiling: a call goes out only when what was spent, what calls in flight may still cost
    and its own worst case stay within it (`ledger`)."""
    fail_on_error: float | None = None
    """Stop dispatch when the share of finished tasks that failed passes it."""


@dataclass(frozen=True)
class LaneSettings:
    """How tasks are carried: live calls, provider batches, or a live share first (`lanes.batch`)."""

    lane: str = LIVE
    """`live` calls, provider batches (`batch`), or a live share first and the rest as batches
    (`auto`)."""
    live_share: float = 0.02
    live_share_min: int = 20
    """Lane auto: the share of the tasks sent live first (at least this many)."""
    deadline_at: float | None = None
    """`--deadline`, as epoch seconds: lane auto's split is the autopilot's (`lanes.autopilot`)."""
    batch_poll_s: float = 2.0
    batch_poll_max_s: float = 60.0
    """A batch is polled after `batch_poll_s`, then 1.5x as long each time, up to this."""
    batch_max_requests: int = 50_000
    batch_max_bytes: int = 200 * 1024 * 1024
    """The provider's limits on one batch's input file (OpenAI's)."""


ON_TRUNCATED = ("retry", "fail", "accept")
"""`--on-truncated`: what an answer cut at its token limit (`finish_reason: length`) leads to when
the job checks its answers (the first is the default: see `AnswerSettings.on_truncated`)."""


@dataclass(frozen=True)
class AnswerSettings:
    """What an answer that is not usable leads to (`engine.answers`): asked again with the reason,
    given more room, sent to the escalation endpoint, or the task's end."""

    reasks: int = 1
    """`--reasks N`: an answer that fails its checks is asked for again up to N times, the
    conversation carrying the answer and what is wrong with it. One by default: a re-ask that
    names the field and the error fixes what it can the first time (on the measured job every
    fix came then), so a second mostly pays for the same mistake; instructor's 2 is `--reasks 2`."""
    on_truncated: str = "retry"
    """`--on-truncated`: a checked answer cut at its token limit is `retry`: asked once more with
    twice the room (up to the model's maximum from the price table, when the budget holds it),
    then a failure; `fail`: a failure at once; `accept`: checked as it is. Retry is the default
    because a cut JSON answer all but never passes its checks, and a re-ask at the same
    max_tokens is cut again (instructor's way: such answers all fail)."""


GROUPS: dict[str, type] = {
    "pacing": Pacing,
    "calls": CallLimits,
    "guards": RunGuards,
    "lanes": LaneSettings,
    "answers": AnswerSettings,
}
GROUP_OF: dict[str, str] = {f.name: group for group, kind in GROUPS.items() for f in fields(kind)}
"""Each field's group, by the flat name the command line gives it."""


@dataclass(frozen=True)
class EngineSettings:
    """How an engine runs, by concern (see the module)."""

    pacing: Pacing = Pacing()
    calls: CallLimits = CallLimits()
    guards: RunGuards = RunGuards()
    lanes: LaneSettings = LaneSettings()
    answers: AnswerSettings = AnswerSettings()

    @classmethod
    def of(cls, **flat: Any) -> EngineSettings:
        """Settings from flat field names (`EngineSettings.of(concurrency=4, timeout_s=2)`), the
        others at their defaults."""
        return cls().but(**flat)

    def but(self, **flat: Any) -> EngineSettings:
        """These settings with the fields named (flat, as `of` takes them) changed."""
        changes: dict[str, dict[str, Any]] = {}
        for name, value in flat.items():
            group = GROUP_OF.get(name)
            if group is None:
                raise TypeError(f"EngineSettings has no field {name!r}")
            changes.setdefault(group, {})[name] = value
        return replace(self, **{group: replace(getattr(self, group), **values) for group, values in changes.items()})

    def to_meta(self) -> dict[str, dict[str, Any]]:
        """As the journal's meta keeps them: one table per group."""
        return {group: asdict(getattr(self, group)) for group in GROUPS}

    @classmethod
    def from_meta(cls, data: dict[str, Any]) -> EngineSettings:
        """From the journal's meta: one table per group, or (a run made before the groups) one flat
        table, whose response-cache fields are the run's, not the engine's, and are left out."""
        if any(group in data for group in GROUPS):
            flat = {name: value for group in GROUPS for name, value in (data.get(group) or {}).items()}
        else:
            flat = {name: value for name, value in data.items() if name in GROUP_OF}
        return cls.of(**flat)
