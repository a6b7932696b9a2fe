"""What a user asks of a run or of a resume, as typed records grouped by concern: which endpoint,
how the engine paces and guards its calls, the judge, the response cache, the embedded simulator,
traces, Ray, and how the run is shown.

A record holds what was asked and nothing more: None (or False) where the user said nothing, so
that the resolution (`run.resolve`) can tell "not asked" from a value and take the job's, the
profile's or the stored run's instead. The command line builds them (`cli.request`, the one place
argparse's names are read); nothing past it sees an `argparse.Namespace`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ProviderRequest:
    """`--provider` (a profile, several, or a route's name) or `--base-url`, and what changes a profile."""

    provider: str | None = None
    route: str | None = None
    """`--route`: how calls are spread over several providers."""
    max_price: float | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    backend: str | None = None
    service_tier: str | None = None
    fallback_base_url: str | None = None
    fallback_model: str | None = None
    fallback_api_key_env: str | None = None

    @property
    def changes_profile(self) -> bool:
        """A flag that changes a profile was given: on `resume` without `--base-url` or
        `--provider`, it applies to the run's own (`--model`: the run's endpoint, another model)."""
        return any(
            value is not None
            for value in (
                self.model,
                self.api_key_env,
                self.backend,
                self.service_tier,
                self.fallback_base_url,
                self.fallback_model,
                self.fallback_api_key_env,
            )
        )


@dataclass(frozen=True)
class EngineRequest:
    """How the engine paces, times, guards and carries the calls."""

    concurrency: int | None = None
    max_attempts: int | None = None
    timeout_s: float | None = None
    max_retry_after_s: float | None = None
    on_quota: str | None = None
    """`--on-quota wait|stop`."""
    max_suspend_s: float | None = None
    """`--max-suspend`: seconds, inf for off; None: not given."""
    rpm: int | None = None
    tpm: int | None = None
    max_answer_bytes: int | None = None
    stream: bool = False
    first_token_timeout_s: float | None = None
    idle_timeout_s: float | None = None
    hedge: bool = False
    straggler: float | str | None = None
    """`--straggler`: a factor, `auto` or `off`; None: not given."""
    fixed_concurrency: bool = False
    """`--no-adaptive`."""
    budget_usd: float | None = None
    fail_on_error: float | None = None
    lane: str | None = None
    deadline: str | None = None
    """`--deadline` as written (90s, 20m, 09:00): resolved to a time when the plan is made."""
    live_share: float | None = None
    batch_poll_s: float | None = None


@dataclass(frozen=True)
class JudgeRequest:
    """`--judge` and the options over the job's `[judge]`."""

    endpoint: str | None = None
    """`--judge PROFILE|URL|self`."""
    model: str | None = None
    rate: float | None = None
    rubric: Path | None = None
    action: str | None = None
    drop: float | None = None


@dataclass(frozen=True)
class AnswersRequest:
    """What makes an answer usable and what an unusable one leads to: `--schema`, `--reasks`,
    `--on-truncated`, `--escalate PROFILE`."""

    schema: Path | None = None
    reasks: int | None = None
    on_truncated: str | None = None
    escalate: str | None = None


@dataclass(frozen=True)
class CacheRequest:
    """`--cache [MODE]` and where and how long answers are kept."""

    mode: str | None = None
    dir: Path | None = None
    ttl_s: float | None = None
    max_bytes: int | None = None


@dataclass(frozen=True)
class SimRequest:
    """The `--sim-*` options of the embedded simulator."""

    latency_ms: float | None = None
    error_rate: float | None = None
    hang_rate: float | None = None
    seed: int | None = None
    drift_after_rounds: int | None = None
    schema_break_rate: float | None = None
    length_rate: float | None = None
    refusal_rate: float | None = None
    content_filter_rate: float | None = None


@dataclass(frozen=True)
class TraceRequest:
    """`--otel` and `--otel-content`."""

    otel: bool = False
    content: bool = False


@dataclass(frozen=True)
class RayRequest:
    """`--ray [ADDRESS]` ("local" without one) and `--ray-actors`."""

    address: str | None = None
    actors: int | None = None


@dataclass(frozen=True)
class ConsoleRequest:
    """How the run is shown: the console, or headless with a log of this format and pace."""

    headless: bool = False
    theme: str | None = None
    log_format: str = "text"
    log_every_s: float | None = None
    """None: the headless log's own pace."""
    bell: bool = False


@dataclass(frozen=True)
class RunOptions:
    """What `run` and `resume` share."""

    provider: ProviderRequest = field(default_factory=ProviderRequest)
    engine: EngineRequest = field(default_factory=EngineRequest)
    judge: JudgeRequest = field(default_factory=JudgeRequest)
    answers: AnswersRequest = field(default_factory=AnswersRequest)
    cache: CacheRequest = field(default_factory=CacheRequest)
    sim: SimRequest = field(default_factory=SimRequest)
    traces: TraceRequest = field(default_factory=TraceRequest)
    ray: RayRequest = field(default_factory=RayRequest)
    console: ConsoleRequest = field(default_factory=ConsoleRequest)


@dataclass(frozen=True)
class TableRequest:
    """`--prompt`, `--system`, `--id`: how a table job's rows become tasks (templates over its columns)."""

    prompt: str | None = None
    system: str | None = None
    id: str | None = None

    @property
    def asked(self) -> bool:
        return self.prompt is not None or self.system is not None or self.id is not None


@dataclass(frozen=True)
class RunRequest:
    """`swarm-tui run [JOB]`: a new run of a job (the demo without one) into a new run directory."""

    job: Path | None = None
    out: Path | None = None
    tools: Path | None = None
    """`--tools FILE.toml`: tools for a job that declares none."""
    table: TableRequest = field(default_factory=TableRequest)
    options: RunOptions = field(default_factory=RunOptions)
    orchestrate: str | None = None
    """`--orchestrate GOAL`: one orchestrator that spawns its own sub-agents (the job's
    `[orchestrator]` with this goal, or the defaults without a job)."""


@dataclass(frozen=True)
class ResumeRequest:
    """`swarm-tui resume RUN_DIR`: the run goes on; the options change its settings from now on."""

    run_dir: Path
    retry_failed: bool = False
    options: RunOptions = field(default_factory=RunOptions)
