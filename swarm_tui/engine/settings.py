"""How an engine runs: its settings, and the small vocabulary its parts share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from swarm_tui.core.call_errors import ErrorClass
from swarm_tui.core.lanes import LIVE
from swarm_tui.core.task import Task
from swarm_tui.engine.pacing.deadlines import STRAGGLER_FACTOR
from swarm_tui.providers.answer import MAX_ANSWER_BYTES
from swarm_tui.providers.client import CallResult

Validator = Callable[[Task, CallResult], "str | None"]
"""Checks a successful answer (e.g. that it is JSON); returns what is wrong with it, or None."""

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

HEDGE_MAX_SHARE = 0.05
HEDGE_QUIET_AFTER_429_S = 5.0

DEFAULT_MAX_TOKENS = 1024
"""What a request without max_tokens is assumed to reserve against TPM."""

REFUSALS = frozenset({ErrorClass.AUTH, ErrorClass.PERMISSION, ErrorClass.NOT_FOUND, ErrorClass.QUOTA})
REFUSALS_TO_STOP = 3
"""Calls refused for good in a row (a key, permission or model the provider does not accept)
after which dispatch stops: every other task would be refused the same way, and paid for nothing."""


@dataclass(frozen=True)
class EngineSettings:
    concurrency: int = 50
    max_attempts: int = 4
    timeout_s: float = 60.0
    """Hard wall-clock limit of one attempt (the SDK's read timeout is per read, not per call)."""
    stream: bool = False
    first_token_timeout_s: float | None = None
    idle_timeout_s: float | None = None
    rpm: int | None = None
    tpm: int | None = None
    adaptive: bool = True
    """AIMD on the in-flight limit; `concurrency` is then the ceiling."""
    hedge: bool = False
    """Send a backup when an attempt runs past the running p95 x `hedge_factor`."""
    hedge_factor: float = 3.0
    straggler_factor: float | None = STRAGGLER_FACTOR
    """Abandon (and send again) a call past this many times what it should take at its
    max_tokens (`deadlines`); None: no straggler deadline, only the hard timeout."""
    budget_usd: float | None = None
    """A ceiling: a call goes out only when what was spent, what calls in flight may still cost
    and its own worst case stay within it (`ledger`)."""
    fail_on_error: float | None = None
    """Stop dispatch when the share of finished tasks that failed passes it."""
    max_retry_after_s: float = 60.0
    """A provider's Retry-After is honoured up to this (the OpenAI SDK's own cap): a header of
    `999999` or `inf` must not hold a run for days."""
    lane: str = LIVE
    """How tasks are carried: `live` calls, provider batches (`batch`), or a live share first and
    the rest as batches (`auto`); see `batch_lane`."""
    live_share: float = 0.02
    live_share_min: int = 20
    """Lane auto: the share of the tasks sent live first (at least this many)."""
    deadline_at: float | None = None
    """`--deadline`, as epoch seconds: lane auto's split is the autopilot's (`autopilot`)."""
    batch_poll_s: float = 2.0
    batch_poll_max_s: float = 60.0
    """A batch is polled after `batch_poll_s`, then 1.5x as long each time, up to this."""
    batch_max_requests: int = 50_000
    batch_max_bytes: int = 200 * 1024 * 1024
    """The provider's limits on one batch's input file (OpenAI's)."""
    max_answer_bytes: int = MAX_ANSWER_BYTES
    """What one answer may hold (`--max-answer-bytes`): a larger body fails as `answer_too_large`."""
    cache: str = "off"
    """The response cache (`--cache`): `off`, `read`, `write` or `readwrite` (`cache.CacheMode`)."""
    cache_dir: str | None = None
    """Where the cache file is (None: `$XDG_CACHE_HOME/swarm-tui`)."""
    cache_ttl_s: float = 14 * 24 * 3600.0
    """Cached answers older than this are not replayed (`--cache-ttl`)."""
    cache_max_bytes: int = 2 * 1024**3
    """The cache's size bound: past it, the least recently used answers go first."""
