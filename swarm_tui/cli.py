"""The `swarm-tui` command line (contract: DESIGN.md, "CLI contract").

Exit codes: 0 every task succeeded; 1 the run ended with failed (or unfinished) tasks; 2 bad
input or configuration, nothing sent; 130 aborted by the user, journal intact and resumable.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
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
        args = parser.parse_args(["run", *(argv or [])])
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
    e = p.add_argument_group("engine")
    e.add_argument("--concurrency", type=_positive_int, help="in-flight cap (default 50)")
    e.add_argument("--max-attempts", type=_positive_int, help="attempts per task, the first included (default 4)")
    e.add_argument("--timeout", type=_positive_float, help="wall-clock limit of one attempt, seconds (default 60)")
    e.add_argument("--stream", action="store_true", help="stream answers (time to first token is measured)")
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
    return profile.with_overrides(model=args.model, api_key_env=args.api_key_env, backend=args.backend)


def resolve_settings(args: argparse.Namespace, profile: ProviderProfile,
                     stored: EngineSettings | None = None) -> EngineSettings:
    base = stored or EngineSettings(concurrency=profile.concurrency or EngineSettings.concurrency,
                                    timeout_s=profile.timeout or EngineSettings.timeout_s)
    return EngineSettings(
        concurrency=args.concurrency or base.concurrency,
        max_attempts=args.max_attempts or base.max_attempts,
        timeout_s=args.timeout or base.timeout_s,
        stream=args.stream or base.stream,
        first_token_timeout_s=base.first_token_timeout_s,
        idle_timeout_s=base.idle_timeout_s,
    )


def _sim_config(args: argparse.Namespace, profile: ProviderProfile):
    if not profile.is_simulator:
        return None
    from dataclasses import replace

    from .session import DEMO_SIM

    overrides = {"latency_ms": args.sim_latency_ms, "error_rate": args.sim_error_rate,
                 "hang_rate": args.sim_hang_rate, "seed": args.sim_seed}
    return replace(DEMO_SIM, **{k: v for k, v in overrides.items() if v is not None})


def _check_key(profile: ProviderProfile) -> None:
    """Fail before anything is written or sent when the key's env var is missing."""
    if not profile.is_simulator:
        resolve_api_key(profile, profile.base_url)


# --------------------------------------------------------------------------- commands


def cmd_run(args: argparse.Namespace) -> int:
    config = load_config()
    profile = resolve_profile(args, config) or config.profile(config.default_provider).with_overrides(
        model=args.model, backend=args.backend)
    job = load_job(args.job or demo_job(), model_override=args.model or profile.model)
    _check_key(profile)
    plan = RunPlan(profile, resolve_settings(args, profile), _sim_config(args, profile))
    run_dir = args.out or default_run_dir(job.name)
    session = SwarmSession.open_new(job, plan, run_dir)
    return _drive(session, args)


def cmd_resume(args: argparse.Namespace) -> int:
    config = load_config()
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
