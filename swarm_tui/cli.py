"""The `swarm-tui` command line (contract: DESIGN.md, "CLI contract").

Exit codes: 0 every task succeeded; 1 the run ended with failed (or unfinished) tasks; 2 bad
input or configuration, nothing sent; 130 aborted by the user, journal intact and resumable.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

from . import __version__, secrets
from .argtypes import (
    STRAGGLER_OFF,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    positive_share,
    share,
    straggler,
)
from .config import Config, load_config
from .core.lanes import LANES, LIVE
from .core.ports import Capability, missing
from .engine import EngineSettings
from .engine.deadlines import STRAGGLER_FACTOR
from .engine.ledger import answer_ceiling
from .errors import InputError
from .headless import EXIT_ABORTED, EXIT_BAD_INPUT, run_headless
from .jobs import Job, load_job, load_tools_file
from .judge.spec import ACTIONS, JudgeSpec, read_rubric
from .judge.spec import SELF as JUDGE_SELF
from .locations import demo_job
from .progress_log import DEFAULT_EVERY_S, LOG_FORMATS
from .providers.client import preflight
from .providers.profile import ProviderProfile
from .session import RunPlan, SwarmSession, default_run_dir
from .sim import add_arguments as add_sim_arguments
from .tools import Toolbox, ToolsSpec


def main(argv: list[str] | None = None) -> int:
    """Every failure a user can meet ends in one line and its exit code, never a traceback: bad
    input 2 (nothing sent), Ctrl-C at any moment 130 (`swarm_tui.__main__` covers the imports)."""
    from .journal import IncompleteRunError

    secrets.install_log_masking()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:  # bare `swarm-tui`: the demo swarm on the embedded simulator
            args = parser.parse_args(["run", *(argv if argv is not None else sys.argv[1:])])
        return args.handler(args)
    except (InputError, FileNotFoundError, FileExistsError, IncompleteRunError) as exc:
        print(f"swarm-tui: {secrets.mask(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:  # Ctrl-C before the run's own handler was installed (or after it ended)
        return interrupted()


def interrupted() -> int:
    """Ctrl-C outside the run's own handler: one line, exit 130 (a second Ctrl-C meanwhile is ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print("\nswarm-tui: interrupted", file=sys.stderr)
    return EXIT_ABORTED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="swarm-tui", description="Run, watch and steer a swarm of LLM sub-agents.")
    parser.add_argument("--version", action="version", version=f"swarm-tui {__version__}")
    parser.add_argument("--theme", default=argparse.SUPPRESS, help="TUI theme name or a theme file (bare swarm-tui)")
    parser.set_defaults(command=None)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser("run", help="run a job (the TUI unless --headless)")
    run.add_argument(
        "job", nargs="?", type=Path, help="a .jsonl (OpenAI Batch) or .toml (swarm) job; default: the 100-agent demo"
    )
    run.add_argument("--out", type=Path, help="run directory (default: runs/<timestamp>-<job name>)")
    run.add_argument(
        "--tools",
        type=Path,
        metavar="FILE.toml",
        help="tools for a job that declares none ([[tools.mcp]], [[tools.python]], [agents]): every task an agent",
    )
    _add_run_options(run)
    _add_console_options(run)
    run.set_defaults(handler=cmd_run)

    resume = commands.add_parser("resume", help="finish what a run left unfinished; never re-sends a success")
    resume.add_argument("run_dir", type=Path)
    resume.add_argument("--retry-failed", action="store_true", help="also run the tasks that failed finally")
    _add_run_options(resume)
    _add_console_options(resume)
    resume.set_defaults(handler=cmd_resume)

    attach = commands.add_parser("attach", help="watch (and steer) a run another process drives, e.g. over SSH")
    attach.add_argument("run_dir", type=Path)
    attach.add_argument("--theme", help="TUI theme name or a theme file")
    _add_console_options(attach, logs=False)
    attach.set_defaults(handler=cmd_attach)

    sim = commands.add_parser("sim", help="serve the OpenAI-compatible simulator in the foreground")
    add_sim_arguments(sim)
    sim.set_defaults(handler=cmd_sim)

    providers = commands.add_parser("providers", help="list provider profiles, or test one")
    providers.add_argument("action", nargs="?", choices=["list", "test"], default="list")
    providers.add_argument("name", nargs="?", help="the profile to test")
    providers.set_defaults(handler=cmd_providers)
    _add_cost_commands(commands)
    return parser


def _add_run_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("provider")
    g.add_argument("--provider", help="a profile from the config file (built in: sim, openai)")
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
    g.add_argument("--fallback-base-url", help="a secondary endpoint to fail over to")
    g.add_argument("--fallback-model", help="the model to ask the fallback for (default: the same)")
    g.add_argument("--fallback-api-key-env", help="the env var holding the fallback's key")
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


def _add_console_options(p: argparse.ArgumentParser, *, logs: bool = True) -> None:
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


def _console_options(args: argparse.Namespace) -> dict:
    return {"bell": args.bell, "retried": bool(getattr(args, "retry_failed", False))}


# --------------------------------------------------------------------------- provider + settings


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
        profile = config.profile(args.provider)
    else:
        return None
    return _with_flag_overrides(profile, args)


def _with_flag_overrides(profile: ProviderProfile, args: argparse.Namespace) -> ProviderProfile:
    profile = profile.with_overrides(
        model=args.model,
        api_key_env=args.api_key_env,
        backend=args.backend,
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


def resolve_settings(
    args: argparse.Namespace, profile: ProviderProfile, stored: EngineSettings | None = None
) -> EngineSettings:
    base = stored or EngineSettings(
        concurrency=profile.concurrency or EngineSettings.concurrency,
        timeout_s=profile.timeout or EngineSettings.timeout_s,
        rpm=profile.rpm,
        tpm=profile.tpm,
    )
    return replace(
        base,
        concurrency=args.concurrency or base.concurrency,
        max_attempts=args.max_attempts or base.max_attempts,
        timeout_s=args.timeout or base.timeout_s,
        stream=args.stream or base.stream,
        first_token_timeout_s=args.ttft_timeout or base.first_token_timeout_s or STREAM_DEADLINE_S,
        idle_timeout_s=args.idle_timeout or base.idle_timeout_s or STREAM_DEADLINE_S,
        rpm=args.rpm or base.rpm,
        tpm=args.tpm or base.tpm,
        hedge=args.hedge or base.hedge,
        straggler_factor=_straggler_factor(args.straggler, base.straggler_factor),
        adaptive=base.adaptive and not args.no_adaptive,
        budget_usd=args.budget if args.budget is not None else base.budget_usd,
        fail_on_error=args.fail_on_error if args.fail_on_error is not None else base.fail_on_error,
        max_retry_after_s=args.max_retry_after or base.max_retry_after_s,
        lane=args.lane or base.lane,
        live_share=args.live_share if args.live_share is not None else base.live_share,
        batch_poll_s=args.batch_poll or base.batch_poll_s,
        max_answer_bytes=args.max_answer_bytes or base.max_answer_bytes,
    )


def _straggler_factor(given: float | str | None, stored: float | None) -> float | None:
    """`--straggler`: auto (the default factor), off (None), a factor; not given: what was stored."""
    if given is None:
        return stored
    if given == STRAGGLER_OFF:
        return None
    return STRAGGLER_FACTOR if given == "auto" else float(given)


def _sim_config(args: argparse.Namespace, profile: ProviderProfile, stored=None):
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
    from .session import DEMO_SIM

    try:
        return replace(stored or DEMO_SIM, **overrides)
    except ValueError as exc:  # e.g. --sim-hang-rate 0.99 on top of the demo's 2% errors
        raise InputError.single("--sim-*", "simulator", str(exc)) from None


def _check_budget(plan: RunPlan, job: Job, model: str | None, config: Config) -> None:
    """A budget is a ceiling: every call must have a worst case the run can hold against it, so
    the model's price must be known, and a body without max_tokens needs the model's maximum
    output from the price table (exit 2, nothing sent, naming what to set)."""
    if plan.settings.budget_usd is None:
        return
    price = plan.price_for(model)
    if price is None:
        raise InputError.single(
            "--budget",
            "budget",
            f"no price is known for model {model!r} on provider {plan.profile.name!r}; "
            f'add [prices."{plan.profile.name}/{model}"] with input, cached_input and output to {config.path}',
        )
    if price.max_output is not None:
        return
    template = job.template.request if job.template is not None else None
    unbounded = next((task for task in job.tasks if answer_ceiling(task.body) is None), None)
    if unbounded is not None or (template is not None and answer_ceiling(template) is None):
        which = f"task {unbounded.custom_id!r}" if unbounded is not None else "the job's requests"
        raise InputError.single(
            "--budget",
            "budget",
            f"{which} sets no max_tokens and the maximum output of {model!r} is not known, so the worst case "
            f"of a call cannot be held against the budget: set max_tokens in the job (request.max_tokens, or "
            f'each body\'s), or add max_output = N to [prices."{plan.profile.name}/{model}"] in {config.path}',
        )


def _check_key(profile: ProviderProfile) -> None:
    """Fail before anything is written or sent when the key's env var (or a header's) is missing, or
    the route cannot be used (a proxy the backend cannot speak, a CA bundle that cannot be read)."""
    if profile.is_simulator:
        preflight(profile, "http://127.0.0.1")
    else:
        preflight(profile, profile.base_url)
    fallback = profile.fallback()
    if fallback is not None:
        preflight(fallback, fallback.base_url)


# --------------------------------------------------------------------------- commands


def cmd_run(args: argparse.Namespace) -> int:
    config = load_config()
    _check_theme(args)
    profile = resolve_profile(args, config) or _with_flag_overrides(config.profile(config.default_provider), args)
    job = load_job(args.job or demo_job(), model_override=args.model or profile.model)
    if args.tools:
        if job.tools is not None and job.tools.any:
            raise InputError.single(args.tools, "tools", f"the job {job.source} declares its own tools")
        job = replace(job, tools=load_tools_file(args.tools))
    _check_key(profile)
    settings = resolve_settings(args, profile)
    if job.lane is not None and args.lane is None:  # the job's `lane`; --lane wins
        settings = replace(settings, lane=job.lane)
    plan = RunPlan(profile, settings, _sim_config(args, profile), config.prices)
    job, judge_profile = _judge(args, job, profile, config)
    _check_budget(plan, job, job.model or (job.tasks[0].body.get("model") if job.tasks else None), config)
    ray = _ray_options(args)
    _check_engine(
        ray,
        job.tools,
        plan.settings,
        judged=job.judge is not None,
        judge_where=str(args.judge and "--judge" or job.source),
    )
    _check_tools(job.tools)
    _check_lane(plan.settings, job.tools)
    run_dir = args.out or default_run_dir(job.name)
    session = SwarmSession.open_new(job, plan, run_dir, ray=ray, judge_profile=judge_profile)
    return _drive(session, args)


PROFILE_FLAGS = ("model", "api_key_env", "backend", "fallback_base_url", "fallback_model", "fallback_api_key_env")
"""Flags that change a profile: on `resume` without --base-url or --provider they apply to the run's own."""


def cmd_resume(args: argparse.Namespace) -> int:
    config = load_config()
    _check_theme(args)
    profile = resolve_profile(args, config)
    if profile is not None:
        _check_key(profile)
    from .journal import Journal
    from .session import plan_from_meta

    journal = Journal.open(args.run_dir, readonly=True)
    meta = journal.meta()
    journal.close()
    stored = plan_from_meta(meta["plan"])
    if profile is None and any(getattr(args, flag) is not None for flag in PROFILE_FLAGS):
        profile = _with_flag_overrides(stored.profile, args)  # e.g. --model: the run's endpoint, another model
    effective = profile or stored.profile
    _check_key(effective)
    settings = resolve_settings(args, effective, stored.settings)
    sim = _sim_config(args, effective, stored.sim)
    ray = _ray_options(args)
    tools = ToolsSpec.from_meta(meta["tools"]) if meta.get("tools") else None
    _check_engine(ray, tools, settings, judged=bool(meta.get("judge")), judge_where=f"{args.run_dir} (its [judge])")
    _check_tools(tools)
    _check_lane(settings, tools)
    session = SwarmSession.open_existing(
        args.run_dir, profile=profile, settings=settings, retry_failed=args.retry_failed, ray=ray, sim=sim
    )
    return _drive(session, args)


def _ray_options(args: argparse.Namespace):
    """`--ray [ADDRESS]`: checked before anything is written or sent (exit 2 when it cannot work)."""
    if args.ray is None:
        if args.ray_actors:
            raise InputError.single("--ray-actors", "ray", "--ray-actors needs --ray")
        return None
    from .distributed import require_ray
    from .session import RayOptions

    require_ray()
    return RayOptions(address=args.ray, actors=args.ray_actors)


def _check_tools(tools: ToolsSpec | None) -> None:
    """Start the job's tools once and stop them (exit 2, nothing sent, when one does not start)."""
    if tools is None or not tools.any:
        return

    servers = f"{len(tools.mcp)} MCP server{'s' if len(tools.mcp) != 1 else ''}" if tools.mcp else "its Python tools"
    print(f"swarm-tui: starting the job's tools to check them ({servers}) ...", file=sys.stderr, flush=True)

    async def probe() -> None:
        toolbox = Toolbox(tools)
        await toolbox.start()
        await toolbox.aclose()

    asyncio.run(probe())


def _judge(
    args: argparse.Namespace, job: Job, profile: ProviderProfile, config: Config
) -> tuple[Job, ProviderProfile | None]:
    """The job's `[judge]` with the `--judge*` options over it, and the judge's own endpoint
    (None: the run's); exit 2 (nothing sent) when it cannot work."""
    options = {
        "model": args.judge_model,
        "rate": args.judge_rate,
        "action": args.judge_action,
        "drop": args.judge_drop,
    }
    given = {k: v for k, v in options.items() if v is not None}
    if args.judge_rubric is not None:
        given["rubric"] = read_rubric(args.judge_rubric, _rubric_problem(args.judge_rubric))
    if args.judge is None and job.judge is None:
        if given:
            flag = "--judge-" + next(iter(given)).replace("_", "-")
            raise InputError.single(flag, "judge", f"{flag} needs --judge (or a [judge] table in the job)")
        return job, None
    spec = replace(job.judge or JudgeSpec(), **given)
    if args.judge is not None:
        spec = replace(spec, endpoint=None if args.judge == JUDGE_SELF else args.judge)
    where = str(args.judge and "--judge" or job.source)
    multi_round = job.swarm is not None and job.swarm.memory.rounds > 1
    action = spec.action_for(multi_round)
    if action == "flush_memory" and not multi_round:
        raise InputError.single(where, "judge.action", "flush_memory needs a multi-round swarm ([memory] rounds > 1)")
    if action == "failover" and profile.fallback() is None:
        raise InputError.single(where, "judge.action", "failover needs a fallback (--fallback-base-url)")
    judge_profile = None
    if spec.endpoint is not None and spec.endpoint != profile.name:
        if "://" in spec.endpoint:
            judge_profile = ProviderProfile(name="judge", base_url=spec.endpoint.rstrip("/"), model=spec.model)
        else:
            judge_profile = config.profile(spec.endpoint)
        _check_key(judge_profile)
    return replace(job, judge=spec), judge_profile


def _rubric_problem(path: Path):
    def report(message: str) -> None:
        raise InputError.single(path, "judge.rubric", message)

    return report


def _check_engine(ray, tools: ToolsSpec | None, settings: EngineSettings, *, judged: bool, judge_where: str) -> None:
    """The engine that will run the swarm must be able to do everything the run asks for: what
    it cannot do is refused (exit 2, naming it, nothing sent), never silently dropped."""
    if ray is None:
        return
    from .distributed import CAPABILITIES

    asked = {
        Capability.TOOLS: tools.source if tools is not None and tools.any else None,
        Capability.BATCH: "--lane" if settings.lane != LIVE else None,
        Capability.JUDGE: judge_where if judged else None,
    }
    lacking = missing(CAPABILITIES, [capability for capability, where in asked.items() if where is not None])
    if lacking:
        first = lacking[0]
        raise InputError.single(
            asked[first] or "--ray", "ray", f"{first.value} does not run on Ray yet: drop --ray to run it here"
        )


def _check_lane(settings: EngineSettings, tools: ToolsSpec | None) -> None:
    """The batch lane carries one-call tasks of one engine (exit 2 otherwise, nothing sent)."""
    if settings.lane == LIVE:
        return
    if tools is not None and tools.any:
        raise InputError.single(
            tools.source, "lane", f"multi-step agents run live only (--lane {settings.lane} needs a job without tools)"
        )


def _drive(session: SwarmSession, args: argparse.Namespace) -> int:
    if args.headless or not _tui_available():
        return asyncio.run(_headless(session, args))
    from .ui.launch import run_tui

    return run_tui(session, theme=args.theme, **_console_options(args))


def _check_theme(args: argparse.Namespace) -> None:
    """A --theme that cannot load fails before a run directory is made (exit 2)."""
    if args.theme and not args.headless and _tui_available():
        from .ui.themes import check_theme

        check_theme(args.theme)


def cmd_attach(args: argparse.Namespace) -> int:
    from .journal import Journal

    Journal.open(args.run_dir, readonly=True).close()  # no journal there: exit 2 with its path
    if not _tui_available():
        print("swarm-tui: attach needs a terminal (stdout is not a tty)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.theme:
        from .ui.themes import check_theme

        check_theme(args.theme)
    from .ui.launch import run_attached

    return run_attached(args.run_dir, theme=args.theme, bell=args.bell)


async def _headless(session: SwarmSession, args: argparse.Namespace) -> int:
    try:
        return await run_headless(session, log_format=args.log_format, every_s=args.log_every, **_console_options(args))
    finally:
        await session.aclose()


def _tui_available() -> bool:
    try:
        import swarm_tui.ui.app  # noqa: F401
    except ImportError:
        return False
    return sys.stdout.isatty() or bool(os.environ.get("SWARM_TUI_FORCE_TUI"))


def cmd_sim(args: argparse.Namespace) -> int:
    from .sim import config_from_args, serve_forever

    serve_forever(config_from_args(args), args.host, args.port, quiet=args.sim_quiet)
    return 0


def cmd_providers(args: argparse.Namespace) -> int:
    config = load_config()
    if args.action == "list":
        from .providers.listing import profile_lines

        print(f"config: {config.path}{'' if config.path.exists() else ' (not created yet)'}")
        for name, profile in sorted(config.profiles.items()):
            print("\n".join(profile_lines(name, profile, default=name == config.default_provider)))
        return 0
    if not args.name:
        raise InputError.single("providers test", "name", "which profile? e.g. `swarm-tui providers test sim`")
    from .providers.probe import probe_profile

    result = asyncio.run(probe_profile(config.profile(args.name)))
    print(result.describe())
    return 0 if result.ok else 1


# --------------------------------------------------------------------------- cost: estimate, shadow
# (issue 5; kept apart so that the rest of this file can change without touching it)


def _add_cost_commands(commands) -> None:
    est = commands.add_parser(
        "estimate",
        help="project a workload's monthly cost per model and provider",
        description="Project the monthly cost of a workload per model and provider, side by side "
        "(e.g. the source article's 100 agents x 50 tasks/day x 2,048 output tokens x 30 days), "
        "with its cost at the provider's batch rate (the batch lane) and the saving against live.",
    )
    est.add_argument("--agents", type=positive_int, help="sub-agents (default 100)")
    est.add_argument("--tasks-per-day", type=positive_float, metavar="N", help="tasks per agent a day (default 50)")
    est.add_argument(
        "--input-tokens",
        type=non_negative_float,
        metavar="N",
        help="prompt tokens per task, cached ones included (default 0: output only, as the article)",
    )
    est.add_argument(
        "--output-tokens", type=non_negative_float, metavar="N", help="output tokens per task (default 2048)"
    )
    est.add_argument(
        "--cached-share", type=share, metavar="P", help="share of input served from the prompt cache (default 0)"
    )
    est.add_argument("--days", type=positive_float, help="days in the period (default 30)")
    which = est.add_mutually_exclusive_group()
    which.add_argument("--model", action="append", metavar="MODEL", help="a model to price (repeatable)")
    which.add_argument("--all-models", action="store_true", help="every model of the price table (the default)")
    est.add_argument(
        "--provider",
        action="append",
        metavar="NAME",
        help="only these providers' rows (repeatable; e.g. official, holysheep, relay-avg)",
    )
    est.add_argument("--currency", help="display currency (default: the config's, CNY)")
    est.add_argument("--rate", type=positive_float, help="units of the display currency per $1 (e.g. 7.3)")
    est.add_argument("--from-run", type=Path, metavar="RUN_DIR", help="take the per-task tokens a run measured")
    est.add_argument("--json", action="store_true", help="machine-readable output")
    est.set_defaults(handler=cmd_estimate)

    sh = commands.add_parser(
        "shadow",
        help="judge the primary endpoint against a mirrored baseline: ADOPT (exit 0) or ROLLBACK (exit 1)",
        description="Send a workload to the primary endpoint (the one migrated to, judged) and mirror a share "
        "of it to the secondary (the baseline); compare latency, errors, cost and answers. "
        "ADOPT (exit 0) keeps the primary; ROLLBACK (exit 1) goes back to the secondary.",
    )
    sh.add_argument(
        "--primary",
        required=True,
        help="the endpoint judged, carrying all traffic: a provider profile name or a base URL",
    )
    sh.add_argument(
        "--secondary",
        required=True,
        help="the baseline, getting the mirrored share (ROLLBACK goes back to it): "
        "a provider profile name or a base URL",
    )
    sh.add_argument("--model", help="the model asked of both (default: each profile's)")
    sh.add_argument("--secondary-model", help="the model asked of the secondary, if named differently there")
    sh.add_argument("--primary-key-env", help="env var holding the primary's key (base URL; default OPENAI_API_KEY)")
    sh.add_argument(
        "--secondary-key-env", help="env var holding the secondary's key (base URL; default OPENAI_API_KEY)"
    )
    sh.add_argument(
        "--rate", type=positive_share, default=0.1, help="share of requests mirrored to the secondary (default 0.1)"
    )
    sh.add_argument(
        "--duration", type=positive_float, default=600.0, metavar="S", help="seconds of traffic (default 600)"
    )
    sh.add_argument(
        "--threshold",
        type=positive_float,
        default=2.0,
        help="ROLLBACK when primary p95 / secondary p95 exceeds this (default 2.0)",
    )
    sh.add_argument(
        "--max-error-excess",
        type=share,
        default=0.01,
        metavar="P",
        help="ROLLBACK when the primary's error rate exceeds the secondary's by more (default 0.01)",
    )
    sh.add_argument("--job", type=Path, help="a .jsonl or .toml job to send (default: a built-in probe workload)")
    sh.add_argument("--rps", type=positive_float, default=2.0, help="requests a second to the primary (default 2)")
    sh.add_argument("--stream", action="store_true", help="stream answers (time to first token is measured)")
    sh.add_argument(
        "--timeout", type=positive_float, default=30.0, metavar="S", help="limit of one request (default 30)"
    )
    sh.add_argument("--max-tokens", type=positive_int, default=64, help="max_tokens of probe requests (default 64)")
    sh.add_argument("--out", type=Path, help="where shadow.json goes (default runs/<timestamp>-shadow)")
    sh.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    sh.add_argument(
        "--headless", action="store_true", help="no live view: progress on stderr (the default when not on a terminal)"
    )
    sh.add_argument("--currency", help="display currency (default: the config's)")
    sh.add_argument("--currency-rate", type=positive_float, metavar="RATE", help="units of the display currency per $1")
    sj = sh.add_argument_group("judge (which answer of a mirrored pair is better)")
    sj.add_argument(
        "--judge", metavar="PROFILE|URL|self", help="ask this endpoint which answer is better ('self': the primary)"
    )
    sj.add_argument("--judge-model", help="the judge's model (default: the endpoint's, else the primary's)")
    sj.add_argument("--judge-rubric", type=Path, metavar="FILE", help="what a better answer is (a text file)")
    sj.add_argument("--judge-rate", type=share, metavar="SHARE", help="share of the answered pairs judged (default 1)")
    sj.add_argument("--judge-key-env", help="env var holding the judge's key (base URL; default OPENAI_API_KEY)")
    sh.set_defaults(handler=cmd_shadow)


def _display_currency(config: Config, code: str | None, rate: float | None, rate_flag: str):
    from .currency import from_config, resolve_currency

    if code is None and rate is None:
        return from_config(config)
    if code is None and rate is not None:
        code = config.currency
    return resolve_currency(code, rate, source="command line", code_field="--currency", rate_field=rate_flag)


def cmd_estimate(args: argparse.Namespace) -> int:
    import json

    from .estimate import Scenario, build_estimate, format_table, measure_run, scenario_from_run
    from .pricing import PriceTable

    config = load_config()
    table = PriceTable.builtin(config.prices, billing=config.billing, source=config.path)
    currency = _display_currency(config, args.currency, args.rate, "--rate")
    base = Scenario(
        **{
            k: v
            for k, v in {
                "agents": args.agents,
                "tasks_per_day": args.tasks_per_day,
                "days": args.days,
                "input_tokens": args.input_tokens,
                "output_tokens": args.output_tokens,
                "cached_share": args.cached_share,
            }.items()
            if v is not None
        }
    )
    models = args.model
    if args.from_run is not None:
        measured = measure_run(args.from_run)
        scenario = scenario_from_run(
            measured,
            base,
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            cached_share=args.cached_share,
        )
        if not models and not args.all_models and table.canonical(measured.model):
            models = [measured.model]
    else:
        scenario = base
    estimate = build_estimate(scenario, models=models, providers=args.provider, table=table, currency=currency)
    if args.from_run is not None and measured.simulated:
        estimate.notes.append("the run was SIMULATED: its token counts come from the simulator")
    if args.json:
        print(json.dumps(estimate.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(format_table(estimate))
    return 0


def cmd_shadow(args: argparse.Namespace) -> int:
    import json
    import time

    from .shadow import (
        ShadowConfig,
        ShadowRun,
        endpoint_profile,
        format_report,
        progress_line,
        shadow_judge,
        write_report,
    )

    config = load_config()
    primary = endpoint_profile(
        args.primary, config, label="primary", model=args.model, api_key_env=args.primary_key_env
    )
    secondary = endpoint_profile(
        args.secondary,
        config,
        label="secondary",
        model=args.secondary_model or args.model,
        api_key_env=args.secondary_key_env,
    )
    _check_key(primary)
    _check_key(secondary)
    judge = shadow_judge(
        args.judge,
        config,
        model=args.judge_model,
        rubric_file=args.judge_rubric,
        rate=args.judge_rate,
        api_key_env=args.judge_key_env,
    )
    if judge is not None and judge.endpoint is not None:
        _check_key(judge.endpoint)
    bodies = None
    if args.job is not None:
        job = load_job(args.job, model_override=args.model)
        bodies = [task.body for task in job.tasks]
    shadow_config = ShadowConfig(
        primary=primary,
        secondary=secondary,
        model=args.model,
        secondary_model=args.secondary_model,
        rate=args.rate,
        duration_s=args.duration,
        threshold=args.threshold,
        max_error_excess=args.max_error_excess,
        rps=args.rps,
        bodies=bodies,
        workload=str(args.job) if args.job else "probe",
        stream=args.stream,
        timeout_s=args.timeout,
        max_tokens=args.max_tokens,
        prices=config.prices,
        billing=config.billing,
        currency=_display_currency(config, args.currency, args.currency_rate, "--currency-rate"),
        judge=judge,
    )
    live = sys.stderr.isatty()
    last_line = [0.0]

    def on_update(report) -> None:
        if report.finished:
            if live:
                sys.stderr.write("\r\033[K")
            return
        now = time.monotonic()
        if live:
            sys.stderr.write("\r\033[K" + progress_line(report))
            sys.stderr.flush()
        elif now - last_line[0] >= 5.0:
            last_line[0] = now
            print(progress_line(report), file=sys.stderr)

    run = ShadowRun(shadow_config, on_update)
    out_dir = args.out or default_run_dir("shadow")
    print(
        f"swarm-tui shadow: {run.endpoints[0].profile.name} <- all traffic, {run.endpoints[1].profile.name} <- "
        f"{args.rate:.0%} mirrored, {args.duration:g}s at {args.rps:g} req/s ({shadow_config.workload}); "
        f"report: {out_dir / 'shadow.json'}",
        file=sys.stderr,
    )

    async def drive():
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, run.stop)
            except (NotImplementedError, RuntimeError):
                pass
        return await run.run()

    if not args.headless and _tui_available():
        from .ui.shadow_view import ShadowApp

        report = ShadowApp(run).run() or run.snapshot()
    else:
        report = asyncio.run(drive())
    path = write_report(report, out_dir)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(format_report(report))
        print(f"report: {path}")
    return report.exit_code
