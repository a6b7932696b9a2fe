"""A request, the user's config and the job (or the stored run) resolved into the plan a session
opens: the endpoint or route, the model, the engine's settings and lanes, the response cache, the
embedded simulator, the judge, the tools, Ray, the traces and the run directory.

Each of them is decided here once, by one function, from what was asked over what the job, the
profile or the stored run says; the preflight (`run.preflight`) then checks the whole plan and the
session (`run.session`) opens it, neither deciding anything again. A request that contradicts
itself (`--ray-actors` without `--ray`, `--sim-*` on another provider, a route of one provider)
is refused here (InputError, exit 2): nothing is written or sent before the plan exists.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from swarm_tui.cache import CacheSettings
from swarm_tui.config import Config
from swarm_tui.core.checks import AnswerSpec
from swarm_tui.core.errors import InputError
from swarm_tui.core.lanes import AUTO
from swarm_tui.core.tiers import FLEX
from swarm_tui.engine import EngineSettings
from swarm_tui.engine.lanes.autopilot import deadline_at
from swarm_tui.engine.pacing.deadlines import STRAGGLER_FACTOR
from swarm_tui.engine.settings import CallLimits, Pacing
from swarm_tui.jobs import Job, TableSpec, load_job, load_tools_file
from swarm_tui.jobs.answer_spec import load_schema_file
from swarm_tui.jobs.job import CacheChoice
from swarm_tui.jobs.judge_spec import SELF as JUDGE_SELF
from swarm_tui.jobs.judge_spec import JudgeSpec, read_rubric
from swarm_tui.jobs.orchestrated import orchestrator_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.providers.routes import STRATEGIES, RoutePlan, provider_names
from swarm_tui.records import RunPlan
from swarm_tui.run.directory import default_run_dir
from swarm_tui.run.plan import DEMO_SIM, RayOptions
from swarm_tui.run.request import (
    AnswersRequest,
    CacheRequest,
    EngineRequest,
    JudgeRequest,
    ProviderRequest,
    RayRequest,
    ResumeRequest,
    RunRequest,
    SimRequest,
    TraceRequest,
)
from swarm_tui.run.stored import StoredRun
from swarm_tui.sim import SimConfig
from swarm_tui.tools import ToolsSpec
from swarm_tui.tools.orchestrator_spec import OrchestratorSpec
from swarm_tui.util.argtypes import STRAGGLER_OFF
from swarm_tui.util.locations import demo_job


@dataclass(frozen=True)
class Tracing:
    """The live export of the run's spans (`--otel`, `[otel]`)."""

    content: bool
    """The spans carry the prompts, answers and tool input and output (`--otel-content`)."""
    endpoint: str | None
    """The collector's URL; None: the standard OTEL_EXPORTER_OTLP_* variables."""


@dataclass(frozen=True)
class SessionPlan:
    """What a session is opened with, every part decided: the run's plan (endpoint or route, model,
    engine settings and lanes, cache, simulator), the job's tools and judge, where its engines run,
    its traces and its directory."""

    run: RunPlan
    run_dir: Path
    job: Job | None = None
    """A new run's job, its tools and judge as resolved; None for a resume (its tasks are journaled)."""
    tools: ToolsSpec | None = None
    judge: JudgeSpec | None = None
    judge_profile: ProviderProfile | None = None
    """The judge's own endpoint (None: the run's)."""
    judge_source: str = ""
    """Where the judge was asked for (`--judge`, the job file, the run directory): what a refusal names."""
    ray: RayOptions | None = None
    tracing: Tracing | None = None
    retry_failed: bool = False
    orchestrator: OrchestratorSpec | None = None
    """An orchestrator job's (its agents spawn agents: the engine must be able to); None: none."""


SIM_MODEL = "sim-1"
"""The model a table job asks the simulator for when none is named (the simulator's own)."""


def table_spec(request: RunRequest) -> TableSpec | None:
    """`--prompt`, `--system`, `--id`: how a table's rows become tasks (None without them)."""
    asked = request.table
    if not asked.asked:
        return None
    if asked.prompt is None:
        why = "--system and --id need --prompt (what to ask of each row)"
        raise InputError.single(request.job or "run", "--prompt", why)
    return TableSpec(asked.prompt, asked.system or "", asked.id)


def resolve_run(request: RunRequest, config: Config) -> SessionPlan:
    """A new run's plan: the job read (the demo without one) for the endpoint the flags or the
    config name, with the job's own lane, cache, tools and judge under the flags."""
    options = request.options
    profile = resolve_profile(options.provider, config) or with_flag_overrides(
        config.profile(config.default_provider), options.provider
    )
    table = table_spec(request)
    adhoc = request.orchestrate is not None and request.job is None
    model = profile.model or (SIM_MODEL if (table is not None or adhoc) and profile.is_simulator else None)
    if adhoc:
        job = orchestrator_job(request.orchestrate or "", model=model)
    else:
        job = load_job(request.job or demo_job(), model_override=model, table=table)
        if request.orchestrate is not None:
            job = orchestrator_job(request.orchestrate, model=model, base=job, path=request.job)
    job = with_tools_file(job, request.tools)
    job = replace(job, answer=resolve_answer(options.answers, job.answer))
    settings = resolve_answer_settings(options.answers, resolve_settings(options.engine, profile))
    if job.lane is not None and options.engine.lane is None:  # the job's `lane`; --lane wins
        settings = settings.but(lane=job.lane)
    judge, judge_profile = resolve_judge(options.judge, job, profile, config)
    job = replace(job, judge=judge)
    first = job.tasks[0] if job.tasks else None
    plan = RunPlan(
        profile,
        settings,
        sim_config(options.sim, profile),
        config.prices,
        resolve_route(options.provider, config),
        resolve_cache(options.cache, job=job.cache),  # the job's `[cache]`; --cache, --cache-ttl and --cache-dir win
        escalate=resolve_escalation(options.answers, config, profile),
    ).deciding_model(first.body.get("model") if first is not None else None, job.template)
    return SessionPlan(
        plan,
        request.out or default_run_dir(job.name),
        job=job,
        tools=job.tools,
        judge=judge,
        judge_profile=judge_profile,
        judge_source=str(options.judge.endpoint and "--judge" or job.source),
        ray=ray_options(options.ray),
        tracing=tracing(options.traces, config),
        orchestrator=job.orchestrator,
    )


def resolve_resume(request: ResumeRequest, config: Config, stored: StoredRun) -> SessionPlan:
    """A resume's plan: the stored run's, with what the flags change from now on (a new endpoint or
    route, another model on its own endpoint, the engine's settings, the cache, the simulator)."""
    options = request.options
    kept = stored.meta.plan
    profile = resolve_profile(options.provider, config)
    if profile is None and options.provider.changes_profile:
        profile = with_flag_overrides(kept.profile, options.provider)  # e.g. --model: its endpoint, another model
    effective = profile or kept.profile
    if options.answers.schema is not None:
        raise InputError.single("--schema", "schema", "a run keeps the checks it started with: --schema goes with run")
    plan = stored.plan_with(
        profile=profile,
        settings=resolve_answer_settings(options.answers, resolve_settings(options.engine, effective, kept.settings)),
        cache=resolve_cache(options.cache, kept.cache),
        sim=sim_config(options.sim, effective, kept.sim),
        route=resolve_route(options.provider, config),
        escalate=resolve_escalation(options.answers, config, effective),
    )
    judge = stored.meta.judge
    return SessionPlan(
        plan,
        stored.run_dir,
        tools=stored.meta.tools,
        judge=judge.spec if judge is not None else None,
        judge_profile=judge.profile if judge is not None else None,
        judge_source=f"{stored.run_dir} (its [judge])",
        ray=ray_options(options.ray),
        tracing=tracing(options.traces, config),
        retry_failed=request.retry_failed,
        orchestrator=stored.meta.orchestrator,
    )


# ---------------------------------------------------------------------------------- the endpoint


def resolve_profile(asked: ProviderRequest, config: Config) -> ProviderProfile | None:
    """The profile the flags ask for; None when they ask for nothing (keep the default or stored one)."""
    if asked.base_url:
        profile = ProviderProfile(
            name="custom", base_url=asked.base_url, model=asked.model, api_key_env=asked.api_key_env or "OPENAI_API_KEY"
        )
        problem = profile.problem()
        if problem:
            raise InputError.single("--base-url", problem[0], problem[1])
    elif asked.provider:
        profile = config.profile(provider_names(asked.provider, config.routes)[0][0])
    else:
        return None
    return with_flag_overrides(profile, asked)


def resolve_route(asked: ProviderRequest, config: Config) -> RoutePlan | None:
    """The route `--provider a,b,c` (or a `[routes.NAME]`) asks for, with `--route` and
    `--max-price` over the table's; None for one provider. The first profile is the run's."""
    if not asked.provider or asked.base_url:
        if asked.route or asked.max_price:
            raise InputError.single("--route", "provider", "a route needs two or more providers: --provider a,b")
        return None
    names, table = provider_names(asked.provider, config.routes)
    if len(names) < 2:
        if asked.route or asked.max_price:
            raise InputError.single("--route", "provider", "a route needs two or more providers: --provider a,b")
        return None
    if len(set(names)) != len(names):
        raise InputError.single("--provider", "provider", f"a profile named twice in {asked.provider!r}")
    others = tuple(with_flag_overrides(config.profile(name), asked, model_only=True) for name in names[1:])
    strategy = asked.route or table.get("strategy") or STRATEGIES[0]
    return RoutePlan(others, strategy, asked.max_price or table.get("max_price"))


def with_flag_overrides(profile: ProviderProfile, asked: ProviderRequest, model_only: bool = False) -> ProviderProfile:
    """`model_only`: a route's later endpoint keeps its own model unless `--model` names one, and
    takes no fallback flags (those are the first endpoint's)."""
    if model_only:
        return profile.with_overrides(model=asked.model, backend=asked.backend, service_tier=asked.service_tier)
    profile = profile.with_overrides(
        model=asked.model,
        api_key_env=asked.api_key_env,
        backend=asked.backend,
        service_tier=asked.service_tier,
        fallback_base_url=asked.fallback_base_url,
        fallback_model=asked.fallback_model,
        fallback_api_key_env=asked.fallback_api_key_env,
    )
    problem = profile.problem()
    if problem:
        raise InputError.single(f"provider {profile.name!r}", problem[0], problem[1])
    return profile


# ---------------------------------------------------------------------------------- the engine

STREAM_DEADLINE_S = 30.0
"""Default time-to-first-token and idle-between-chunks deadlines of a streamed attempt."""
FLEX_TIMEOUT_S = 900.0
"""A Flex call's default hard timeout and time to its first token: OpenAI's advice (15 minutes, as
Flex queues a call until it has room), where a default call's are 60 s and 30 s."""


def resolve_settings(
    asked: EngineRequest, profile: ProviderProfile, stored: EngineSettings | None = None
) -> EngineSettings:
    """The engine's settings and lanes: the flags over the stored run's (a resume), else over the
    profile's limits and the defaults."""
    base = stored or EngineSettings.of(
        concurrency=profile.concurrency or Pacing.concurrency,
        timeout_s=profile.timeout or CallLimits.timeout_s,
        rpm=profile.rpm,
        tpm=profile.tpm,
    )
    pacing, calls, guards, lanes = base.pacing, base.calls, base.guards, base.lanes
    settings = base.but(
        concurrency=asked.concurrency or pacing.concurrency,
        max_attempts=asked.max_attempts or guards.max_attempts,
        timeout_s=asked.timeout_s or calls.timeout_s,
        stream=asked.stream or calls.stream,
        first_token_timeout_s=asked.first_token_timeout_s or calls.first_token_timeout_s or STREAM_DEADLINE_S,
        idle_timeout_s=asked.idle_timeout_s or calls.idle_timeout_s or STREAM_DEADLINE_S,
        rpm=asked.rpm or pacing.rpm,
        tpm=asked.tpm or pacing.tpm,
        hedge=asked.hedge or calls.hedge,
        straggler_factor=straggler_factor(asked.straggler, calls.straggler_factor),
        adaptive=pacing.adaptive and not asked.fixed_concurrency,
        budget_usd=asked.budget_usd if asked.budget_usd is not None else guards.budget_usd,
        fail_on_error=asked.fail_on_error if asked.fail_on_error is not None else guards.fail_on_error,
        max_retry_after_s=asked.max_retry_after_s or pacing.max_retry_after_s,
        on_quota=asked.on_quota or pacing.on_quota,
        max_suspend_s=max_suspend(asked.max_suspend_s, pacing.max_suspend_s),
        lane=asked.lane or (AUTO if asked.deadline else lanes.lane),
        deadline_at=deadline_option(asked.deadline) if asked.deadline else lanes.deadline_at,
        live_share=asked.live_share if asked.live_share is not None else lanes.live_share,
        batch_poll_s=asked.batch_poll_s or lanes.batch_poll_s,
        max_answer_bytes=asked.max_answer_bytes or calls.max_answer_bytes,
    )
    return flex_defaults(settings, asked, profile) if profile.service_tier == FLEX else settings


def deadline_option(text: str) -> float:
    """`--deadline WHEN` as a time (InputError naming the flag when it is not one)."""
    try:
        return deadline_at(text)
    except ValueError as exc:
        raise InputError.single("--deadline", "deadline", str(exc)) from None


def flex_defaults(settings: EngineSettings, asked: EngineRequest, profile: ProviderProfile) -> EngineSettings:
    """A Flex run's deadlines, where neither a flag nor the profile sets them: a Flex call may wait
    minutes in the provider's queue, so the hard timeout and the time to the first token are 15
    minutes, and no straggler deadline abandons (and pays again for) a call that is only queued."""
    changes: dict[str, Any] = {}
    if not asked.timeout_s and not profile.timeout and settings.calls.timeout_s == CallLimits.timeout_s:
        changes["timeout_s"] = FLEX_TIMEOUT_S
    if not asked.first_token_timeout_s and settings.calls.first_token_timeout_s == STREAM_DEADLINE_S:
        changes["first_token_timeout_s"] = FLEX_TIMEOUT_S
    if asked.straggler is None and settings.calls.straggler_factor == STRAGGLER_FACTOR:
        changes["straggler_factor"] = None
    return settings.but(**changes) if changes else settings


def max_suspend(given: float | None, stored: float | None) -> float | None:
    """`--max-suspend`: a bound in seconds, off (None); not given: what was stored."""
    if given is None:
        return stored
    return None if math.isinf(given) else given


def straggler_factor(given: float | str | None, stored: float | None) -> float | None:
    """`--straggler`: auto (the default factor), off (None), a factor; not given: what was stored."""
    if given is None:
        return stored
    if given == STRAGGLER_OFF:
        return None
    return STRAGGLER_FACTOR if given == "auto" else float(given)


# ---------------------------------------------------------------------------------- the answers


def resolve_answer_settings(asked: AnswersRequest, settings: EngineSettings) -> EngineSettings:
    """`--reasks` and `--on-truncated` over the settings (the stored run's, on a resume)."""
    answers = settings.answers
    return settings.but(
        reasks=asked.reasks if asked.reasks is not None else answers.reasks,
        on_truncated=asked.on_truncated or answers.on_truncated,
    )


def resolve_answer(asked: AnswersRequest, job_answer: AnswerSpec | None) -> AnswerSpec | None:
    """The job's `[answer]` with `--schema FILE` over it (exit 2 naming the file and line when the
    schema cannot be read or is no valid JSON Schema)."""
    if asked.schema is None:
        return job_answer
    schema = load_schema_file(asked.schema)
    return (job_answer or AnswerSpec()).with_schema(schema, str(asked.schema))


def resolve_escalation(asked: AnswersRequest, config: Config, run: ProviderProfile) -> ProviderProfile | None:
    """`--escalate PROFILE`: the stronger endpoint (its key checked with the run's); exit 2 when it
    is the run's own endpoint and model (escalating there would ask the same model again)."""
    if not asked.escalate:
        return None
    profile = config.profile(asked.escalate)
    if profile.name == run.name and (profile.model or None) == (run.model or None):
        raise InputError.single(
            "--escalate", "escalate", f"{asked.escalate!r} is the run's own endpoint and model: name a stronger one"
        )
    return profile


# ---------------------------------------------------------------------------------- the run's parts


def resolve_cache(
    asked: CacheRequest, stored: CacheSettings | None = None, job: CacheChoice | None = None
) -> CacheSettings:
    """The run's use of the response cache: the flags, else the job's `[cache]`, else what the run
    stored (a resume), else off."""
    base = stored or CacheSettings()
    if job is not None:
        base = replace(base, mode=job.mode, ttl_s=job.ttl_s or base.ttl_s, dir=job.dir)
    return replace(
        base,
        mode=asked.mode or base.mode,
        dir=str(asked.dir) if asked.dir is not None else base.dir,
        ttl_s=asked.ttl_s or base.ttl_s,
        max_bytes=asked.max_bytes or base.max_bytes,
    )


def sim_config(asked: SimRequest, profile: ProviderProfile, stored: SimConfig | None = None) -> SimConfig | None:
    """The embedded simulator's settings: the stored ones (a resume) or the demo's, with the
    `--sim-*` flags applied; None when the run is not on the simulator."""
    flags: dict[str, tuple[str, Any]] = {  # SimConfig's field: (its flag, the value asked)
        "latency_ms": ("--sim-latency-ms", asked.latency_ms),
        "error_rate": ("--sim-error-rate", asked.error_rate),
        "hang_rate": ("--sim-hang-rate", asked.hang_rate),
        "seed": ("--sim-seed", asked.seed),
        "drift_after_rounds": ("--sim-drift", asked.drift_after_rounds),
        "schema_break_rate": ("--sim-schema-break-rate", asked.schema_break_rate),
        "length_rate": ("--sim-length-rate", asked.length_rate),
        "refusal_rate": ("--sim-refusal-rate", asked.refusal_rate),
        "content_filter_rate": ("--sim-content-filter-rate", asked.content_filter_rate),
    }
    overrides = {field: value for field, (_, value) in flags.items() if value is not None}
    if not profile.is_simulator:
        if overrides:
            raise InputError.single(
                flags[next(iter(overrides))][0],
                "provider",
                f"the run's provider is {profile.name!r}, not the embedded simulator: --sim-* options do not apply",
            )
        return None
    try:
        return replace(stored or DEMO_SIM, **overrides)
    except ValueError as exc:  # e.g. --sim-hang-rate 0.99 on top of the demo's 2% errors
        raise InputError.single("--sim-*", "simulator", str(exc)) from None


def with_tools_file(job: Job, path: Path | None) -> Job:
    """`--tools FILE.toml`: tools for a job that declares none (every task an agent)."""
    if path is None:
        return job
    if job.tools is not None and job.tools.any:
        raise InputError.single(path, "tools", f"the job {job.source} declares its own tools")
    return replace(job, tools=load_tools_file(path))


def resolve_judge(
    asked: JudgeRequest, job: Job, profile: ProviderProfile, config: Config
) -> tuple[JudgeSpec | None, ProviderProfile | None]:
    """The job's `[judge]` with the `--judge*` options over it, and the judge's own endpoint (None:
    the run's). Whether its action can work is the preflight's to say."""
    options = {"model": asked.model, "rate": asked.rate, "action": asked.action, "drop": asked.drop}
    given: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
    if asked.rubric is not None:
        given["rubric"] = read_rubric(asked.rubric, _rubric_problem(asked.rubric))
    if asked.endpoint is None and job.judge is None:
        if given:
            flag = "--judge-" + next(iter(given)).replace("_", "-")
            raise InputError.single(flag, "judge", f"{flag} needs --judge (or a [judge] table in the job)")
        return None, None
    spec = replace(job.judge or JudgeSpec(), **given)
    if asked.endpoint is not None:
        spec = replace(spec, endpoint=None if asked.endpoint == JUDGE_SELF else asked.endpoint)
    if spec.endpoint is None or spec.endpoint == profile.name:
        return spec, None
    if "://" in spec.endpoint:
        return spec, ProviderProfile(name="judge", base_url=spec.endpoint.rstrip("/"), model=spec.model)
    return spec, config.profile(spec.endpoint)


def _rubric_problem(path: Path):
    def report(message: str) -> None:
        raise InputError.single(path, "judge.rubric", message)

    return report


def ray_options(asked: RayRequest) -> RayOptions | None:
    """`--ray [ADDRESS]` (whether Ray is installed is the preflight's to say)."""
    if asked.address is None:
        if asked.actors:
            raise InputError.single("--ray-actors", "ray", "--ray-actors needs --ray")
        return None
    return RayOptions(address=asked.address, actors=asked.actors)


def tracing(asked: TraceRequest, config: Config) -> Tracing | None:
    """The live export asked for (`--otel`, `--otel-content`, or the config's `[otel]`); None: none."""
    otel = config.otel
    content = bool(asked.content or otel.get("content"))
    if not (content or asked.otel or otel.get("enabled")):
        return None
    return Tracing(content, otel.get("endpoint"))
