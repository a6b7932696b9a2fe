"""The options of `run` and `resume`, and how they resolve into a profile, engine settings and
the embedded simulator's settings."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from swarm_tui.cache import CacheSettings
from swarm_tui.config import Config
from swarm_tui.core.errors import InputError
from swarm_tui.core.lanes import AUTO, LANES
from swarm_tui.core.tiers import FLEX, SERVICE_TIERS
from swarm_tui.engine import EngineSettings
from swarm_tui.engine.lanes.autopilot import deadline_at
from swarm_tui.engine.pacing.deadlines import STRAGGLER_FACTOR
from swarm_tui.engine.settings import ON_TRUNCATED, CallLimits, Pacing
from swarm_tui.frontend.progress_lines import DEFAULT_EVERY_S, LOG_FORMATS
from swarm_tui.jobs.answer_spec import AnswerSpec, load_schema_file
from swarm_tui.jobs.job import CacheChoice
from swarm_tui.jobs.judge_spec import ACTIONS
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.providers.routes import STRATEGIES, RoutePlan, provider_names
from swarm_tui.util.argtypes import (
    STRAGGLER_OFF,
    byte_size,
    duration,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    share,
    straggler,
)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options `run` and `resume` share: provider, engine, judge, embedded simulator."""
    add_provider_options(p)
    add_engine_options(p)
    add_judge_options(p)
    add_answer_options(p)
    add_cache_options(p)
    add_sim_options(p)
    add_trace_options(p)


CACHE_MODES = ("readwrite", "read", "write", "off")


def add_cache_options(p: argparse.ArgumentParser) -> None:
    c = p.add_argument_group("response cache (off unless asked for; a cached answer is a replay)")
    c.add_argument(
        "--cache",
        nargs="?",
        const="readwrite",
        choices=CACHE_MODES,
        help="replay answers the cache holds and keep new ones; --cache read: replay only; --cache write: "
        "keep only (put it after the job file)",
    )
    add_cache_place_options(c)
    c.add_argument("--cache-ttl", type=duration, metavar="AGE", help="replay answers younger than this (default 14d)")


def add_cache_place_options(c) -> None:
    """`--cache-dir` and `--cache-max-size`: shared by `run`, `resume` and `swarm-tui cache`."""
    c.add_argument(
        "--cache-dir", type=Path, metavar="DIR", help="the cache's directory (default $XDG_CACHE_HOME/swarm-tui)"
    )
    c.add_argument(
        "--cache-max-size", type=byte_size, metavar="SIZE", help="least recently used answers go past it (default 2G)"
    )


def add_provider_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("provider")
    g.add_argument(
        "--provider",
        help="a profile from the config file (built in: sim, openai); several (a,b,c) or a [routes.NAME]: "
        "one swarm over all of them (--route)",
    )
    g.add_argument(
        "--route",
        choices=STRATEGIES,
        help="how calls are spread over several providers: fallback (default: the first healthy one in order), "
        "balance (by each one's headroom: keys whose limits add up), cheapest, fastest (spilling over when full)",
    )
    g.add_argument(
        "--max-price",
        type=positive_float,
        metavar="USD",
        help="never send to a provider above this per 1M output tokens",
    )
    g.add_argument("--base-url", help="an ad hoc OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", help="the model to ask for (replaces the model named in each request)")
    g.add_argument("--api-key-env", help="the env var holding the key (default OPENAI_API_KEY)")
    g.add_argument(
        "--backend",
        choices=["aiohttp", "httpx"],
        help="how calls are sent: aiohttp (default): chat calls on swarm-tui's own aiohttp path, with the SDK's "
        "headers and auth, streaming and batches through the SDK on aiohttp; httpx: everything through the "
        "SDK on httpx2. Both take the same proxy, TLS trust, headers and query",
    )
    g.add_argument(
        "--service-tier",
        choices=SERVICE_TIERS,
        help="the tier to ask for (sent as service_tier): flex: at the batch price, slower (a 900 s timeout by "
        "default), sometimes unavailable (retried); priority: faster, at a premium; billed at the tier the answer "
        "says served it",
    )
    g.add_argument("--fallback-base-url", help="a secondary endpoint to fail over to")
    g.add_argument("--fallback-model", help="the model to ask the fallback for (default: the same)")
    g.add_argument("--fallback-api-key-env", help="the env var holding the fallback's key")


def add_engine_options(p: argparse.ArgumentParser) -> None:
    e = p.add_argument_group("engine")
    e.add_argument("--concurrency", type=positive_int, help="in-flight cap (default 50)")
    e.add_argument("--max-attempts", type=positive_int, help="attempts per task, the first included (default 4)")
    e.add_argument("--timeout", type=positive_float, help="wall-clock limit of one attempt, seconds (default 60)")
    e.add_argument(
        "--max-retry-after",
        type=positive_float,
        metavar="S",
        help="honour a provider's Retry-After up to this many seconds (default 60)",
    )
    e.add_argument(
        "--rpm", type=positive_int, help="requests per minute the provider allows (else learned from headers)"
    )
    e.add_argument("--tpm", type=positive_int, help="tokens per minute the provider allows (else learned from headers)")
    e.add_argument(
        "--max-answer-bytes",
        type=positive_int,
        metavar="N",
        help="what one answer may hold (default 8388608, 8 MiB); a larger one fails as answer_too_large",
    )
    e.add_argument("--stream", action="store_true", help="stream answers (time to first token is measured)")
    e.add_argument("--ttft-timeout", type=positive_float, help="streaming: seconds to the first token (default 30)")
    e.add_argument("--idle-timeout", type=positive_float, help="streaming: seconds between chunks (default 30)")
    e.add_argument(
        "--hedge", action="store_true", help="send a backup when an attempt runs past p95 x 3 (<= 5%% of requests)"
    )
    e.add_argument(
        "--straggler",
        type=straggler,
        metavar="auto|off|FACTOR",
        help="abandon and resend a call past FACTOR x what it should take at its max_tokens (auto: 3); off: only "
        "--timeout",
    )
    e.add_argument("--no-adaptive", action="store_true", help="keep the in-flight limit fixed (no AIMD)")
    e.add_argument(
        "--budget",
        type=positive_float,
        metavar="USD",
        help="a ceiling: a call goes out only if spent + the worst case of calls in flight + its own stays within it",
    )
    e.add_argument(
        "--fail-on-error", type=share, metavar="RATE", help="stop dispatch when this share of finished tasks failed"
    )
    e.add_argument(
        "--lane",
        choices=LANES,
        help="live calls (default); batch: every task through the provider's Batch API (half price, within 24 h); "
        "auto: a first share live (--live-share), the rest as batches, their failures retried live",
    )
    e.add_argument(
        "--deadline",
        metavar="WHEN",
        help="finish by then (90s, 20m, 2h, or a clock time: 09:00): the autopilot splits the tasks between live "
        "calls and provider batches (lane auto) from what it measures, pulls a late batch back to live, and says "
        "early, with the numbers, when the deadline or the budget cannot hold",
    )
    e.add_argument(
        "--live-share", type=share, metavar="SHARE", help="--lane auto: share of the tasks sent live first (0.02)"
    )
    e.add_argument(
        "--batch-poll",
        type=positive_float,
        metavar="S",
        help="batch lane: seconds before a batch's first poll (default 2; then 1.5x longer each time, up to 60)",
    )
    e.add_argument("--headless", action="store_true", help="no UI: a progress line on stderr")
    e.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="run the swarm's engines on Ray actors: a local Ray without ADDRESS, else 'auto' or "
        "ray://host:port (needs swarm-tui[ray])",
    )
    e.add_argument(
        "--ray-actors", type=positive_int, metavar="N", help="with --ray: worker actors (default: one per node)"
    )
    e.add_argument("--theme", help="TUI theme name or a theme file")


def add_judge_options(p: argparse.ArgumentParser) -> None:
    j = p.add_argument_group("judge (LLM-as-a-judge on a sample of the answers)")
    j.add_argument(
        "--judge", metavar="PROFILE|URL", help="judge a sample of the answers with this endpoint ('self': the run's)"
    )
    j.add_argument("--judge-model", help="the judge's model (default: the endpoint's, else the run's)")
    j.add_argument("--judge-rate", type=share, metavar="SHARE", help="share of answers judged (default 0.05)")
    j.add_argument("--judge-rubric", type=Path, metavar="FILE", help="what a good answer is (a text file)")
    j.add_argument(
        "--judge-action",
        choices=ACTIONS,
        help="when the score drifts down (default: flush_memory for a multi-round swarm, else alert)",
    )
    j.add_argument(
        "--judge-drop",
        type=positive_float,
        metavar="POINTS",
        help="allowed fall of the rolling score below its baseline (default 1.5; under 1: a share)",
    )


def add_answer_options(p: argparse.ArgumentParser) -> None:
    a = p.add_argument_group(
        "answers (checked against the body's response_format, the job's [answer], --schema; a refusal or a "
        "filtered answer is never a success)"
    )
    a.add_argument(
        "--schema",
        type=Path,
        metavar="FILE.json",
        help="a JSON Schema every answer's JSON must match (a JSONL job's [answer]; read robustly: fences, prose)",
    )
    a.add_argument(
        "--reasks",
        type=non_negative_int,
        metavar="N",
        help="ask an answer that fails its checks again, with the error, up to N times (default 1)",
    )
    a.add_argument(
        "--on-truncated",
        choices=ON_TRUNCATED,
        help="a checked answer cut at its max_tokens: retry once with twice the room, up to the model's maximum "
        "and within the budget (default); fail; accept it and check it as it is",
    )
    a.add_argument(
        "--escalate",
        metavar="PROFILE",
        help="a task whose answers still cannot be used goes once to this profile's endpoint and model, with the "
        "conversation so far (its attempts' endpoint: escalate:PROFILE)",
    )


def add_sim_options(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("embedded simulator (provider sim)")
    s.add_argument("--sim-latency-ms", type=non_negative_float, help="median latency of the simulator")
    s.add_argument("--sim-error-rate", type=share, help="share of requests answered with a 5xx (0-1)")
    s.add_argument("--sim-hang-rate", type=share, help="share of requests that never answer (0-1)")
    s.add_argument("--sim-seed", type=int, help="simulator seed")
    s.add_argument(
        "--sim-drift",
        type=non_negative_int,
        metavar="N",
        help="answers degrade once the swarm's memory holds more than N rounds (context pollution, for --judge)",
    )


def add_trace_options(p: argparse.ArgumentParser) -> None:
    t = p.add_argument_group("traces (OpenTelemetry GenAI spans; needs swarm-tui[otel])")
    t.add_argument(
        "--otel",
        action="store_true",
        help="export the run's spans while it goes, OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT (default "
        "http://localhost:4318); a collector that is down costs the run nothing (dropped spans are counted)",
    )
    t.add_argument(
        "--otel-content",
        action="store_true",
        help="with --otel: the prompts, answers and tool arguments and results on the spans too (implies --otel)",
    )


def tracing(args: argparse.Namespace, config: Config) -> tuple[bool, str | None] | None:
    """None: no live export; else (whether the spans carry content, the collector's URL or None
    for the standard variables): `--otel` / `--otel-content`, or the config's `[otel]`."""
    otel = config.otel
    content = bool(getattr(args, "otel_content", False) or otel.get("content"))
    if not (content or getattr(args, "otel", False) or otel.get("enabled")):
        return None
    return content, otel.get("endpoint")


def add_console_options(p: argparse.ArgumentParser, *, logs: bool = True) -> None:
    """How a run speaks to someone not watching: the headless log's format and pace, a bell (issue 25)."""
    g = p.add_argument_group("console and log")
    if logs:
        g.add_argument(
            "--log-format",
            choices=LOG_FORMATS,
            default="text",
            help="headless: text lines, or one JSON object a line for log shippers (default text)",
        )
        g.add_argument(
            "--log-every",
            type=positive_float,
            default=DEFAULT_EVERY_S,
            metavar="S",
            help="headless, stderr not a terminal: a timestamped progress line every S seconds (default 5)",
        )
    g.add_argument(
        "--bell", action="store_true", help="ring the terminal's bell when the run finishes, stops or drifts"
    )


def console_options(args: argparse.Namespace) -> dict:
    return {"bell": args.bell, "retried": bool(getattr(args, "retry_failed", False))}


def resolve_profile(args: argparse.Namespace, config: Config) -> ProviderProfile | None:
    """The profile the flags ask for; None when they ask for nothing (keep the stored one)."""
    if args.base_url:
        profile = ProviderProfile(
            name="custom", base_url=args.base_url, model=args.model, api_key_env=args.api_key_env or "OPENAI_API_KEY"
        )
        problem = profile.problem()
        if problem:
            raise InputError.single("--base-url", problem[0], problem[1])
    elif args.provider:
        profile = config.profile(provider_names(args.provider, config.routes)[0][0])
    else:
        return None
    return with_flag_overrides(profile, args)


def resolve_route(args: argparse.Namespace, config: Config) -> RoutePlan | None:
    """The route `--provider a,b,c` (or a `[routes.NAME]`) asks for, with `--route` and
    `--max-price` over the table's; None for one provider. The first profile is the run's."""
    if not args.provider or args.base_url:
        if args.route or args.max_price:
            raise InputError.single("--route", "provider", "a route needs two or more providers: --provider a,b")
        return None
    names, table = provider_names(args.provider, config.routes)
    if len(names) < 2:
        if args.route or args.max_price:
            raise InputError.single("--route", "provider", "a route needs two or more providers: --provider a,b")
        return None
    if len(set(names)) != len(names):
        raise InputError.single("--provider", "provider", f"a profile named twice in {args.provider!r}")
    others = tuple(with_flag_overrides(config.profile(name), args, model_only=True) for name in names[1:])
    strategy = args.route or table.get("strategy") or STRATEGIES[0]
    return RoutePlan(others, strategy, args.max_price or table.get("max_price"))


def with_flag_overrides(
    profile: ProviderProfile, args: argparse.Namespace, model_only: bool = False
) -> ProviderProfile:
    """`model_only`: a route's later endpoint keeps its own model unless `--model` names one, and
    takes no fallback flags (those are the first endpoint's)."""
    if model_only:
        return profile.with_overrides(model=args.model, backend=args.backend, service_tier=args.service_tier)
    profile = profile.with_overrides(
        model=args.model,
        api_key_env=args.api_key_env,
        backend=args.backend,
        service_tier=args.service_tier,
        fallback_base_url=args.fallback_base_url,
        fallback_model=args.fallback_model,
        fallback_api_key_env=args.fallback_api_key_env,
    )
    problem = profile.problem()
    if problem:
        raise InputError.single(f"provider {profile.name!r}", problem[0], problem[1])
    return profile


STREAM_DEADLINE_S = 30.0
"""Default time-to-first-token and idle-between-chunks deadlines of a streamed attempt."""
FLEX_TIMEOUT_S = 900.0
"""A Flex call's default hard timeout and time to its first token: OpenAI's advice (15 minutes, as
Flex queues a call until it has room), where a default call's are 60 s and 30 s."""


def resolve_settings(
    args: argparse.Namespace, profile: ProviderProfile, stored: EngineSettings | None = None
) -> EngineSettings:
    base = stored or EngineSettings.of(
        concurrency=profile.concurrency or Pacing.concurrency,
        timeout_s=profile.timeout or CallLimits.timeout_s,
        rpm=profile.rpm,
        tpm=profile.tpm,
    )
    pacing, calls, guards, lanes = base.pacing, base.calls, base.guards, base.lanes
    settings = base.but(
        concurrency=args.concurrency or pacing.concurrency,
        max_attempts=args.max_attempts or guards.max_attempts,
        timeout_s=args.timeout or calls.timeout_s,
        stream=args.stream or calls.stream,
        first_token_timeout_s=args.ttft_timeout or calls.first_token_timeout_s or STREAM_DEADLINE_S,
        idle_timeout_s=args.idle_timeout or calls.idle_timeout_s or STREAM_DEADLINE_S,
        rpm=args.rpm or pacing.rpm,
        tpm=args.tpm or pacing.tpm,
        hedge=args.hedge or calls.hedge,
        straggler_factor=straggler_factor(args.straggler, calls.straggler_factor),
        adaptive=pacing.adaptive and not args.no_adaptive,
        budget_usd=args.budget if args.budget is not None else guards.budget_usd,
        fail_on_error=args.fail_on_error if args.fail_on_error is not None else guards.fail_on_error,
        max_retry_after_s=args.max_retry_after or pacing.max_retry_after_s,
        lane=args.lane or (AUTO if args.deadline else lanes.lane),
        deadline_at=deadline_option(args.deadline) if args.deadline else lanes.deadline_at,
        live_share=args.live_share if args.live_share is not None else lanes.live_share,
        batch_poll_s=args.batch_poll or lanes.batch_poll_s,
        max_answer_bytes=args.max_answer_bytes or calls.max_answer_bytes,
        reasks=args.reasks if args.reasks is not None else base.answers.reasks,
        on_truncated=args.on_truncated or base.answers.on_truncated,
    )
    return flex_defaults(settings, args, profile) if profile.service_tier == FLEX else settings


def resolve_escalation(args: argparse.Namespace, config: Config, run: ProviderProfile) -> ProviderProfile | None:
    """`--escalate PROFILE`: the stronger endpoint (its key checked by the caller); exit 2 when it is
    the run's own endpoint and model (escalating there would ask the same model again)."""
    if not args.escalate:
        return None
    profile = config.profile(args.escalate)
    if profile.name == run.name and (profile.model or None) == (run.model or None):
        raise InputError.single(
            "--escalate", "escalate", f"{args.escalate!r} is the run's own endpoint and model: name a stronger one"
        )
    return profile


def resolve_answer(args: argparse.Namespace, job_answer: AnswerSpec | None) -> AnswerSpec | None:
    """The job's `[answer]` with `--schema FILE` over it (exit 2 naming the file and line when the
    schema cannot be read or is no valid JSON Schema)."""
    if args.schema is None:
        return job_answer
    schema = load_schema_file(args.schema)
    return (job_answer or AnswerSpec()).with_schema(schema, str(args.schema))


def resolve_cache(
    args: argparse.Namespace, stored: CacheSettings | None = None, job: CacheChoice | None = None
) -> CacheSettings:
    """The run's use of the response cache: the flags, else the job's `[cache]`, else what the run
    stored (a resume), else off."""
    base = stored or CacheSettings()
    if job is not None:
        base = replace(base, mode=job.mode, ttl_s=job.ttl_s or base.ttl_s, dir=job.dir)
    return replace(
        base,
        mode=args.cache or base.mode,
        dir=str(args.cache_dir) if args.cache_dir is not None else base.dir,
        ttl_s=args.cache_ttl or base.ttl_s,
        max_bytes=args.cache_max_size or base.max_bytes,
    )


def deadline_option(text: str) -> float:
    try:
        return deadline_at(text)
    except ValueError as exc:
        raise InputError.single("--deadline", "deadline", str(exc)) from None


def flex_defaults(settings: EngineSettings, args: argparse.Namespace, profile: ProviderProfile) -> EngineSettings:
    """A Flex run's deadlines, where neither a flag nor the profile sets them: a Flex call may wait
    minutes in the provider's queue, so the hard timeout and the time to the first token are 15
    minutes, and no straggler deadline abandons (and pays again for) a call that is only queued."""
    changes: dict[str, Any] = {}
    if not args.timeout and not profile.timeout and settings.calls.timeout_s == CallLimits.timeout_s:
        changes["timeout_s"] = FLEX_TIMEOUT_S
    if not args.ttft_timeout and settings.calls.first_token_timeout_s == STREAM_DEADLINE_S:
        changes["first_token_timeout_s"] = FLEX_TIMEOUT_S
    if args.straggler is None and settings.calls.straggler_factor == STRAGGLER_FACTOR:
        changes["straggler_factor"] = None
    return settings.but(**changes) if changes else settings


def straggler_factor(given: float | str | None, stored: float | None) -> float | None:
    """`--straggler`: auto (the default factor), off (None), a factor; not given: what was stored."""
    if given is None:
        return stored
    if given == STRAGGLER_OFF:
        return None
    return STRAGGLER_FACTOR if given == "auto" else float(given)


def sim_config(args: argparse.Namespace, profile: ProviderProfile, stored=None):
    """The embedded simulator's settings: the stored ones (a resume) or the demo's, with the
    `--sim-*` flags applied; None when the run is not on the simulator."""
    overrides = {
        "latency_ms": args.sim_latency_ms,
        "error_rate": args.sim_error_rate,
        "hang_rate": args.sim_hang_rate,
        "seed": args.sim_seed,
        "drift_after_rounds": args.sim_drift,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if not profile.is_simulator:
        if overrides:
            flag = "--sim-" + next(iter(overrides)).replace("_", "-")
            raise InputError.single(
                flag,
                "provider",
                f"the run's provider is {profile.name!r}, not the embedded simulator: --sim-* options do not apply",
            )
        return None
    from swarm_tui.run.plan import DEMO_SIM

    try:
        return replace(stored or DEMO_SIM, **overrides)
    except ValueError as exc:  # e.g. --sim-hang-rate 0.99 on top of the demo's 2% errors
        raise InputError.single("--sim-*", "simulator", str(exc)) from None


PROFILE_FLAGS = (
    "model",
    "api_key_env",
    "backend",
    "service_tier",
    "fallback_base_url",
    "fallback_model",
    "fallback_api_key_env",
)
"""Flags that change a profile: on `resume` without --base-url or --provider they apply to the run's own."""
