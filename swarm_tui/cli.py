"""The `swarm-tui` command line (contract: DESIGN.md, "CLI contract").

Exit codes: 0 every task succeeded; 1 the run ended with failed (or unfinished) tasks; 2 bad
input or configuration, nothing sent; 130 aborted by the user, journal intact and resumable.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path

from . import __version__
from .config import Config, load_config
from .engine import EngineSettings
from .errors import InputError
from .headless import EXIT_BAD_INPUT, run_headless
from .jobs import load_job
from .locations import demo_job
from .providers.profile import ProviderProfile, resolve_api_key
from .session import RunPlan, SwarmSession, default_run_dir
from .sim import add_arguments as add_sim_arguments


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `swarm-tui`: the demo swarm on the embedded simulator
        args = parser.parse_args(["run", *(argv if argv is not None else sys.argv[1:])])
    try:
        return args.handler(args)
    except InputError as exc:
        print(f"swarm-tui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (FileNotFoundError, FileExistsError) as exc:
        print(f"swarm-tui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swarm-tui", description="Run, watch and steer a swarm of LLM sub-agents.")
    parser.add_argument("--version", action="version", version=f"swarm-tui {__version__}")
    parser.add_argument("--theme", default=argparse.SUPPRESS, help="TUI theme name or a theme file (bare swarm-tui)")
    parser.set_defaults(command=None)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser("run", help="run a job (the TUI unless --headless)")
    run.add_argument("job", nargs="?", type=Path, help="a .jsonl (OpenAI Batch) or .toml (swarm) job; default: the 100-agent demo")
    run.add_argument("--out", type=Path, help="run directory (default: runs/<timestamp>-<job name>)")
    _add_run_options(run)
    run.set_defaults(handler=cmd_run)

    resume = commands.add_parser("resume", help="finish what a run left unfinished; never re-sends a success")
    resume.add_argument("run_dir", type=Path)
    resume.add_argument("--retry-failed", action="store_true", help="also run the tasks that failed finally")
    _add_run_options(resume)
    resume.set_defaults(handler=cmd_resume)

    attach = commands.add_parser("attach", help="watch (and steer) a run another process drives, e.g. over SSH")
    attach.add_argument("run_dir", type=Path)
    attach.add_argument("--theme", help="TUI theme name or a theme file")
    attach.set_defaults(handler=cmd_attach)

    sim = commands.add_parser("sim", help="serve the OpenAI-compatible simulator in the foreground")
    add_sim_arguments(sim)
    sim.set_defaults(handler=cmd_sim)

    providers = commands.add_parser("providers", help="list provider profiles, or test one")
    providers.add_argument("action", nargs="?", choices=["list", "test"], default="list")
    providers.add_argument("name", nargs="?", help="the profile to test")
    providers.set_defaults(handler=cmd_providers)
    return parser


def _add_run_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("provider")
    g.add_argument("--provider", help="a profile from the config file (built in: sim, openai)")
    g.add_argument("--base-url", help="an ad hoc OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", help="the model to ask for (replaces the model named in each request)")
    g.add_argument("--api-key-env", help="the env var holding the key (default OPENAI_API_KEY)")
    g.add_argument("--backend", choices=["httpx", "aiohttp"], help="the SDK's HTTP backend")
    g.add_argument("--fallback-base-url", help="a secondary endpoint to fail over to")
    g.add_argument("--fallback-model", help="the model to ask the fallback for (default: the same)")
    g.add_argument("--fallback-api-key-env", help="the env var holding the fallback's key")
    e = p.add_argument_group("engine")
    e.add_argument("--concurrency", type=_positive_int, help="in-flight cap (default 50)")
    e.add_argument("--max-attempts", type=_positive_int, help="attempts per task, the first included (default 4)")
    e.add_argument("--timeout", type=_positive_float, help="wall-clock limit of one attempt, seconds (default 60)")
    e.add_argument("--rpm", type=_positive_int, help="requests per minute the provider allows (else learned from headers)")
    e.add_argument("--tpm", type=_positive_int, help="tokens per minute the provider allows (else learned from headers)")
    e.add_argument("--stream", action="store_true", help="stream answers (time to first token is measured)")
    e.add_argument("--ttft-timeout", type=_positive_float, help="streaming: seconds to the first token (default 30)")
    e.add_argument("--idle-timeout", type=_positive_float, help="streaming: seconds between chunks (default 30)")
    e.add_argument("--hedge", action="store_true", help="send a backup when an attempt runs past p95 x 3 (<= 5%% of requests)")
    e.add_argument("--no-adaptive", action="store_true", help="keep the in-flight limit fixed (no AIMD)")
    e.add_argument("--budget", type=_positive_float, metavar="USD", help="stop dispatch before the cost would pass this")
    e.add_argument("--fail-on-error", type=_rate, metavar="RATE", help="stop dispatch when this share of finished tasks failed")
    e.add_argument("--headless", action="store_true", help="no UI: a progress line on stderr")
    e.add_argument("--theme", help="TUI theme name or a theme file")
    s = p.add_argument_group("embedded simulator (provider sim)")
    s.add_argument("--sim-latency-ms", type=float, help="median latency of the simulator")
    s.add_argument("--sim-error-rate", type=float, help="share of requests answered with a 5xx")
    s.add_argument("--sim-hang-rate", type=float, help="share of requests that never answer")
    s.add_argument("--sim-seed", type=int, help="simulator seed")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _rate(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError("must be between 0 and 1")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


# --------------------------------------------------------------------------- provider + settings


def resolve_profile(args: argparse.Namespace, config: Config) -> ProviderProfile | None:
    """The profile the flags ask for; None when they ask for nothing (keep the stored one)."""
    if args.base_url:
        profile = ProviderProfile(name="custom", base_url=args.base_url, model=args.model,
                                  api_key_env=args.api_key_env or "OPENAI_API_KEY")
        problem = profile.problem()
        if problem:
            raise InputError.single("--base-url", problem[0], problem[1])
    elif args.provider:
        profile = config.profile(args.provider)
    else:
        return None
    return _with_flag_overrides(profile, args)


def _with_flag_overrides(profile: ProviderProfile, args: argparse.Namespace) -> ProviderProfile:
    profile = profile.with_overrides(model=args.model, api_key_env=args.api_key_env, backend=args.backend,
                                     fallback_base_url=args.fallback_base_url, fallback_model=args.fallback_model,
                                     fallback_api_key_env=args.fallback_api_key_env)
    problem = profile.problem()
    if problem:
        raise InputError.single(f"provider {profile.name!r}", problem[0], problem[1])
    return profile


STREAM_DEADLINE_S = 30.0
"""Default time-to-first-token and idle-between-chunks deadlines of a streamed attempt."""


def resolve_settings(args: argparse.Namespace, profile: ProviderProfile,
                     stored: EngineSettings | None = None) -> EngineSettings:
    base = stored or EngineSettings(concurrency=profile.concurrency or EngineSettings.concurrency,
                                    timeout_s=profile.timeout or EngineSettings.timeout_s,
                                    rpm=profile.rpm, tpm=profile.tpm)
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
        adaptive=base.adaptive and not args.no_adaptive,
        budget_usd=args.budget if args.budget is not None else base.budget_usd,
        fail_on_error=args.fail_on_error if args.fail_on_error is not None else base.fail_on_error,
    )


def _sim_config(args: argparse.Namespace, profile: ProviderProfile):
    if not profile.is_simulator:
        return None
    from .session import DEMO_SIM

    overrides = {"latency_ms": args.sim_latency_ms, "error_rate": args.sim_error_rate,
                 "hang_rate": args.sim_hang_rate, "seed": args.sim_seed}
    return replace(DEMO_SIM, **{k: v for k, v in overrides.items() if v is not None})


def _check_budget(plan: RunPlan, model: str | None, config: Config) -> None:
    if plan.settings.budget_usd is not None and plan.price_for(model) is None:
        raise InputError.single(
            "--budget", "budget", f"no price is known for model {model!r} on provider {plan.profile.name!r}; "
            f"add [prices.\"{plan.profile.name}/{model}\"] with input, cached_input and output to {config.path}")


def _check_key(profile: ProviderProfile) -> None:
    """Fail before anything is written or sent when the key's env var is missing."""
    if not profile.is_simulator:
        resolve_api_key(profile, profile.base_url)
    fallback = profile.fallback()
    if fallback is not None:
        resolve_api_key(fallback, fallback.base_url)


# --------------------------------------------------------------------------- commands


def cmd_run(args: argparse.Namespace) -> int:
    config = load_config()
    _check_theme(args)
    profile = resolve_profile(args, config) or _with_flag_overrides(config.profile(config.default_provider), args)
    job = load_job(args.job or demo_job(), model_override=args.model or profile.model)
    _check_key(profile)
    plan = RunPlan(profile, resolve_settings(args, profile), _sim_config(args, profile), config.prices)
    _check_budget(plan, job.model or (job.tasks[0].body.get("model") if job.tasks else None), config)
    run_dir = args.out or default_run_dir(job.name)
    session = SwarmSession.open_new(job, plan, run_dir)
    return _drive(session, args)


def cmd_resume(args: argparse.Namespace) -> int:
    config = load_config()
    _check_theme(args)
    profile = resolve_profile(args, config)
    if profile is not None:
        _check_key(profile)
    from .journal import Journal
    from .session import _plan_from_meta

    journal = Journal.open(args.run_dir, readonly=True)
    stored = _plan_from_meta(journal.meta()["plan"])
    journal.close()
    effective = profile or stored.profile
    _check_key(effective)
    settings = resolve_settings(args, effective, stored.settings)
    session = SwarmSession.open_existing(args.run_dir, profile=profile, settings=settings,
                                         retry_failed=args.retry_failed)
    return _drive(session, args)


def _drive(session: SwarmSession, args: argparse.Namespace) -> int:
    if args.headless or not _tui_available():
        return asyncio.run(_headless(session))
    from .ui.app import run_tui

    return run_tui(session, theme=args.theme)


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
    from .ui.app import run_attached

    return run_attached(args.run_dir, theme=args.theme)


async def _headless(session: SwarmSession) -> int:
    try:
        return await run_headless(session)
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
        from .providers.profile import key_status

        print(f"config: {config.path}{'' if config.path.exists() else ' (not created yet)'}")
        for name, profile in sorted(config.profiles.items()):
            default = " (default)" if name == config.default_provider else ""
            url = "embedded simulator (SIMULATED)" if profile.is_simulator else profile.base_url
            key = profile.api_key_env or "OPENAI_API_KEY"
            print(f"{name}{default}: {url}  model={profile.model}  key {key}: {key_status(profile)}")
        return 0
    if not args.name:
        raise InputError.single("providers test", "name", "which profile? e.g. `swarm-tui providers test sim`")
    from .providers.probe import probe_profile

    result = asyncio.run(probe_profile(config.profile(args.name)))
    print(result.describe())
    return 0 if result.ok else 1
