"""The parsed command line of `run` and `resume` as typed requests (`run.request`): the one place
argparse's attribute names are read, so that nothing past the command line sees a Namespace."""

from __future__ import annotations

import argparse

from swarm_tui.run.request import (
    AnswersRequest,
    CacheRequest,
    ConsoleRequest,
    EngineRequest,
    JudgeRequest,
    ProviderRequest,
    RayRequest,
    ResumeRequest,
    RunOptions,
    RunRequest,
    SimRequest,
    TableRequest,
    TraceRequest,
)


def run_request(args: argparse.Namespace) -> RunRequest:
    """`swarm-tui run` (and the bare `swarm-tui`) as asked."""
    table = TableRequest(prompt=args.prompt, system=args.system, id=args.id)
    return RunRequest(
        job=args.job,
        out=args.out,
        tools=args.tools,
        table=table,
        options=run_options(args),
        orchestrate=args.orchestrate,
    )


def resume_request(args: argparse.Namespace) -> ResumeRequest:
    """`swarm-tui resume RUN_DIR` as asked."""
    return ResumeRequest(run_dir=args.run_dir, retry_failed=args.retry_failed, options=run_options(args))


def run_options(args: argparse.Namespace) -> RunOptions:
    """The options `run` and `resume` share (`cli.options.add_run_options`, `add_console_options`)."""
    return RunOptions(
        provider=ProviderRequest(
            provider=args.provider,
            route=args.route,
            max_price=args.max_price,
            base_url=args.base_url,
            model=args.model,
            api_key_env=args.api_key_env,
            backend=args.backend,
            service_tier=args.service_tier,
            fallback_base_url=args.fallback_base_url,
            fallback_model=args.fallback_model,
            fallback_api_key_env=args.fallback_api_key_env,
        ),
        engine=EngineRequest(
            concurrency=args.concurrency,
            max_attempts=args.max_attempts,
            timeout_s=args.timeout,
            max_retry_after_s=args.max_retry_after,
            on_quota=args.on_quota,
            max_suspend_s=args.max_suspend,
            rpm=args.rpm,
            tpm=args.tpm,
            max_answer_bytes=args.max_answer_bytes,
            stream=args.stream,
            first_token_timeout_s=args.ttft_timeout,
            idle_timeout_s=args.idle_timeout,
            hedge=args.hedge,
            straggler=args.straggler,
            fixed_concurrency=args.no_adaptive,
            budget_usd=args.budget,
            fail_on_error=args.fail_on_error,
            lane=args.lane,
            deadline=args.deadline,
            live_share=args.live_share,
            batch_poll_s=args.batch_poll,
        ),
        judge=JudgeRequest(
            endpoint=args.judge,
            model=args.judge_model,
            rate=args.judge_rate,
            rubric=args.judge_rubric,
            action=args.judge_action,
            drop=args.judge_drop,
        ),
        answers=AnswersRequest(
            schema=args.schema, reasks=args.reasks, on_truncated=args.on_truncated, escalate=args.escalate
        ),
        cache=CacheRequest(mode=args.cache, dir=args.cache_dir, ttl_s=args.cache_ttl, max_bytes=args.cache_max_size),
        sim=SimRequest(
            latency_ms=args.sim_latency_ms,
            error_rate=args.sim_error_rate,
            hang_rate=args.sim_hang_rate,
            seed=args.sim_seed,
            drift_after_rounds=args.sim_drift,
            schema_break_rate=args.sim_schema_break_rate,
            length_rate=args.sim_length_rate,
            refusal_rate=args.sim_refusal_rate,
            content_filter_rate=args.sim_content_filter_rate,
        ),
        traces=TraceRequest(otel=args.otel, content=args.otel_content),
        ray=RayRequest(address=args.ray, actors=args.ray_actors),
        console=ConsoleRequest(
            headless=args.headless,
            theme=args.theme,
            log_format=args.log_format,
            log_every_s=args.log_every,
            bell=args.bell,
        ),
    )
