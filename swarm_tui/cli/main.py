"""The `swarm-tui` command line (contract: DESIGN.md, "CLI contract"): the parser and the commands.

Exit codes: 0 every task succeeded; 1 the run ended with failed (or unfinished) tasks; 2 bad
input or configuration, nothing sent; 130 aborted by the user, journal intact and resumable.
`options` holds the run options and how they resolve, `checks` what is refused before anything
is written or sent, `cost` the estimate and shadow commands.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from dataclasses import replace
from pathlib import Path

from swarm_tui import __version__
from swarm_tui.cli.cache_cmd import add_cache_command
from swarm_tui.cli.checks import (
    check_budget,
    check_engine,
    check_key,
    check_lane,
    check_route,
    check_theme_option,
    check_tools,
    judge_options,
    ray_options,
    tui_available,
)
from swarm_tui.cli.cost import add_cost_commands
from swarm_tui.cli.export_cmd import add_export_command
from swarm_tui.cli.options import (
    PROFILE_FLAGS,
    add_console_options,
    add_run_options,
    console_options,
    resolve_answer,
    resolve_cache,
    resolve_escalation,
    resolve_profile,
    resolve_route,
    resolve_settings,
    sim_config,
    tracing,
    with_flag_overrides,
)
from swarm_tui.cli.replay_cmd import add_replay_command
from swarm_tui.cli.traces import add_trace_commands
from swarm_tui.config import Config, load_config
from swarm_tui.core.errors import InputError
from swarm_tui.frontend.headless import EXIT_ABORTED, EXIT_BAD_INPUT, run_headless
from swarm_tui.jobs import load_job, load_tools_file
from swarm_tui.run.plan import RunPlan
from swarm_tui.run.session import SwarmSession, default_run_dir
from swarm_tui.sim import add_arguments as add_sim_arguments
from swarm_tui.sim.args import SIM_DESCRIPTION, SIM_EPILOG
from swarm_tui.tools import ToolsSpec
from swarm_tui.util import secrets
from swarm_tui.util.locations import demo_job


def main(argv: list[str] | None = None) -> int:
    """Every failure a user can meet ends in one line and its exit code, never a traceback: bad
    input 2 (nothing sent), Ctrl-C at any moment 130 (`swarm_tui.__main__` covers the imports)."""
    from swarm_tui.journal import IncompleteRunError

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


HELP_FORMAT = argparse.RawDescriptionHelpFormatter
"""Every parser's formatter: the descriptions and epilogs keep their lines (examples, job formats)."""

JOB_FORMATS = """\
job formats (by extension):
  .jsonl  the OpenAI Batch API input format, one request a line:
            {"custom_id": "q1", "method": "POST", "url": "/v1/chat/completions",
             "body": {"model": "gpt-4.1-mini",
                      "messages": [{"role": "user", "content": "Say hello"}]}}
  .toml   a swarm job: a model, a system template and tasks, e.g.
            name = "hello"
            model = "gpt-4.1-mini"
            system = "You are agent {agent} of {total}."
            [tasks]
            count = 10
            prompt = "Say hello to agent {agent}."
          optional: [context], [request], [[task]], [plan], [judge], [[tools.mcp]]
  more: sample_jobs/ and the documentation's "Your first job" (docs/first-job.md)
"""

MAIN_EPILOG = f"""\
{JOB_FORMATS}
examples:
  swarm-tui                                   the console on the 100-agent demo (simulator)
  swarm-tui run job.jsonl --headless          a job, no UI: progress on stderr
  swarm-tui run job.toml --provider openai    on a real provider (key in OPENAI_API_KEY)
  swarm-tui attach runs/NAME                  watch and steer a run from another terminal
  swarm-tui COMMAND --help                    a command's options and examples

exit codes: 0 every task succeeded; 1 the run ended with failed or unfinished tasks;
  2 bad input or configuration (nothing was sent); 130 aborted (resumable)
"""

RUN_DESCRIPTION = """\
Run a job: the console (TUI), or with --headless (or when stdout is not a terminal) no UI and
a progress line on stderr. Without JOB: the 100-agent demo. The whole job and the config are
checked before anything is sent (exit 2 naming file, line and field). The run directory
(--out) holds journal.sqlite, results.jsonl, errors.jsonl and summary.json; a run stopped
in any way goes on with `swarm-tui resume RUN`. The provider is the built-in simulator `sim`
(no key, no network) unless --provider or --base-url names another.
"""

RUN_EPILOG = f"""\
{JOB_FORMATS}
examples:
  swarm-tui run first.jsonl --headless --out runs/first    a JSONL job on the simulator
  swarm-tui run first.toml                                 a TOML job in the console
  swarm-tui run first.jsonl --provider openai --headless   a profile (key in OPENAI_API_KEY)
  export DEEPSEEK_API_KEY=...                              a real endpoint, ad hoc:
  swarm-tui run first.toml --base-url https://api.deepseek.com/v1 --model deepseek-chat \\
      --api-key-env DEEPSEEK_API_KEY --headless --budget 0.50
"""

RESUME_EPILOG = """\
examples:
  swarm-tui resume runs/first                      finish the tasks a stop or crash left
  swarm-tui resume runs/first --retry-failed       ... and send the failed tasks again
  swarm-tui resume runs/first --model gpt-4.1 --headless    the run's endpoint, another model
  swarm-tui resume runs/first --provider openai    move the run to another endpoint
"""

ATTACH_EPILOG = """\
examples:
  nohup swarm-tui run job.jsonl --headless --out runs/big > runs/big.log 2>&1 &
  swarm-tui attach runs/big                 the same screen, from the journal (q: detach)
  swarm-tui attach runs/big --bell          ring the terminal's bell when it finishes or stops
"""

PROVIDERS_DESCRIPTION = """\
The provider profiles: the built-in `sim` (the embedded simulator, no key) and `openai`
(OPENAI_BASE_URL or api.openai.com, key in OPENAI_API_KEY), and the [providers.NAME]
tables of the config file ($SWARM_TUI_CONFIG, else ~/.config/swarm-tui/config.toml).
  list       each profile's URL, model, key variable (set or missing), headers and route;
             a config file that does not parse exits 2 naming file, line and field
  test NAME  one tiny call (max_tokens 1) through the profile, with its latency: exit 0 OK,
             exit 1 FAILED with the reason (no network, a refused key, an unknown model)
"""

PROVIDERS_EPILOG = """\
a profile, in the config file:
  [providers.deepseek]
  base_url = "https://api.deepseek.com/v1"
  model = "deepseek-chat"
  api_key_env = "DEEPSEEK_API_KEY"    # the env var's name, never the key

examples:
  swarm-tui providers                 the same as `providers list`
  swarm-tui providers test sim        a call to the simulator (always works)
  swarm-tui providers test deepseek   a call to the real endpoint
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swarm-tui",
        description="Run, watch and steer a swarm of LLM sub-agents against any OpenAI-compatible endpoint.\n"
        "Without a command: the console on the 100-agent demo, on the built-in simulator (no key, no\n"
        "network).\n",
        epilog=MAIN_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    parser.add_argument("--version", action="version", version=f"swarm-tui {__version__}")
    parser.add_argument("--theme", default=argparse.SUPPRESS, help="TUI theme name or a theme file (bare swarm-tui)")
    parser.set_defaults(command=None)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run a job (the TUI unless --headless)",
        description=RUN_DESCRIPTION,
        epilog=RUN_EPILOG,
        formatter_class=HELP_FORMAT,
    )
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
    add_run_options(run)
    add_console_options(run)
    run.set_defaults(handler=cmd_run)

    resume = commands.add_parser(
        "resume",
        help="finish what a run left unfinished; never re-sends a success",
        description="Finish what a run left unfinished (stopped, aborted, crashed, killed): the tasks the journal\n"
        "shows as succeeded are never sent again, a multi-step agent goes on from its last completed\n"
        "step, open provider batches are collected. The run keeps its settings (provider, lane,\n"
        "cache, budget: the same ledger); the options below change them from now on.\n",
        epilog=RESUME_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    resume.add_argument("run_dir", type=Path, help="the run directory (--out of the run)")
    resume.add_argument("--retry-failed", action="store_true", help="also run the tasks that failed finally")
    add_run_options(resume)
    add_console_options(resume)
    resume.set_defaults(handler=cmd_resume)

    attach = commands.add_parser(
        "attach",
        help="watch (and steer) a run another process drives, e.g. over SSH",
        description="Watch a run another process drives (a --headless run under nohup, on a server over SSH) in\n"
        "the same console, read from its journal while it is written. r, p, a and +/- reach the\n"
        "running engine through the journal's control queue; q detaches and leaves the run going. A\n"
        "run nobody drives any more can be resumed from here (p, or r to retry its failures too).\n"
        "Needs a terminal.\n",
        epilog=ATTACH_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    attach.add_argument("run_dir", type=Path, help="the run directory to watch")
    attach.add_argument("--theme", help="TUI theme name or a theme file")
    add_console_options(attach, logs=False)
    attach.set_defaults(handler=cmd_attach)

    sim = commands.add_parser(
        "sim",
        help="serve the OpenAI-compatible simulator in the foreground",
        description=SIM_DESCRIPTION,
        epilog=SIM_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    add_sim_arguments(sim)
    sim.set_defaults(handler=cmd_sim)

    providers = commands.add_parser(
        "providers",
        help="list provider profiles, or test one",
        description=PROVIDERS_DESCRIPTION,
        epilog=PROVIDERS_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    providers.add_argument(
        "action",
        nargs="?",
        choices=["list", "test"],
        default="list",
        help="list: every profile and whether its key is set (default); test: one tiny call through NAME",
    )
    providers.add_argument("name", nargs="?", help="the profile to test")
    providers.set_defaults(handler=cmd_providers)
    add_cost_commands(commands)
    add_cache_command(commands)
    add_export_command(commands)
    add_trace_commands(commands)
    add_replay_command(commands)
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    config = load_config()
    check_theme_option(args)
    profile = resolve_profile(args, config) or with_flag_overrides(config.profile(config.default_provider), args)
    job = load_job(args.job or demo_job(), model_override=args.model or profile.model)
    if args.tools:
        if job.tools is not None and job.tools.any:
            raise InputError.single(args.tools, "tools", f"the job {job.source} declares its own tools")
        job = replace(job, tools=load_tools_file(args.tools))
    check_key(profile)
    job = replace(job, answer=resolve_answer(args, job.answer))
    escalate = resolve_escalation(args, config, profile)
    if escalate is not None:
        check_key(escalate)
    settings = resolve_settings(args, profile)
    if job.lane is not None and args.lane is None:  # the job's `lane`; --lane wins
        settings = settings.but(lane=job.lane)
    cache = resolve_cache(args, job=job.cache)  # the job's `[cache]`; --cache, --cache-ttl and --cache-dir win
    route = resolve_route(args, config)
    for other in route.others if route is not None else ():
        check_key(other)
    plan = RunPlan(profile, settings, sim_config(args, profile), config.prices, route, cache, escalate)
    job, judge_profile = judge_options(args, job, profile, config)
    first_model = job.model or (job.tasks[0].body.get("model") if job.tasks else None)
    check_budget(plan, job, first_model, config)
    check_route(plan, first_model)
    ray = ray_options(args)
    check_engine(
        ray,
        job.tools,
        plan.settings,
        judged=job.judge is not None,
        judge_where=str(args.judge and "--judge" or job.source),
        routed=route is not None,
        escalated=escalate is not None,
    )
    check_tools(job.tools)
    check_lane(plan.settings, job.tools)
    traces = check_tracing(args, config)
    run_dir = args.out or default_run_dir(job.name)
    session = SwarmSession.open_new(job, plan, run_dir, ray=ray, judge_profile=judge_profile)
    return drive(session, args, traces)


def cmd_resume(args: argparse.Namespace) -> int:
    config = load_config()
    check_theme_option(args)
    profile = resolve_profile(args, config)
    route = resolve_route(args, config)
    for named in [*([profile] if profile else []), *(route.others if route else ())]:
        check_key(named)
    from swarm_tui.journal import Journal
    from swarm_tui.run.plan import plan_from_meta

    journal = Journal.open(args.run_dir, readonly=True)
    meta = journal.queries.meta()
    journal.close()
    stored = plan_from_meta(meta["plan"])
    if profile is None and any(getattr(args, flag) is not None for flag in PROFILE_FLAGS):
        profile = with_flag_overrides(stored.profile, args)  # e.g. --model: the run's endpoint, another model
    effective = profile or stored.profile
    check_key(effective)
    if args.schema is not None:
        raise InputError.single("--schema", "schema", "a run keeps the checks it started with: --schema goes with run")
    escalate = resolve_escalation(args, config, effective) if args.escalate else stored.escalate
    if escalate is not None:
        check_key(escalate)
    settings = resolve_settings(args, effective, stored.settings)
    cache = resolve_cache(args, stored.cache)
    sim = sim_config(args, effective, stored.sim)
    ray = ray_options(args)
    tools = ToolsSpec.from_meta(meta["tools"]) if meta.get("tools") else None
    routed = route is not None or (profile is None and stored.route is not None)
    check_engine(
        ray,
        tools,
        settings,
        judged=bool(meta.get("judge")),
        judge_where=f"{args.run_dir} (its [judge])",
        routed=routed,
        escalated=escalate is not None,
    )
    check_tools(tools)
    check_lane(settings, tools)
    traces = check_tracing(args, config)
    session = SwarmSession.open_existing(
        args.run_dir,
        profile=profile,
        settings=settings,
        cache=cache,
        retry_failed=args.retry_failed,
        ray=ray,
        sim=sim,
        route=route,
        escalate=escalate,
    )
    return drive(session, args, traces)


def cmd_attach(args: argparse.Namespace) -> int:
    from swarm_tui.journal import Journal

    Journal.open(args.run_dir, readonly=True).close()  # no journal there: exit 2 with its path
    if not tui_available():
        print("swarm-tui: attach needs a terminal (stdout is not a tty)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.theme:
        from swarm_tui.ui.themes import check_theme

        check_theme(args.theme)
    from swarm_tui.ui.launch import run_attached

    return run_attached(args.run_dir, theme=args.theme, bell=args.bell)


def cmd_sim(args: argparse.Namespace) -> int:
    from swarm_tui.sim import config_from_args, serve_forever

    serve_forever(config_from_args(args), args.host, args.port, quiet=args.sim_quiet)
    return 0


def cmd_providers(args: argparse.Namespace) -> int:
    config = load_config()
    if args.action == "list":
        from swarm_tui.providers.listing import profile_lines

        print(f"config: {config.path}{'' if config.path.exists() else ' (not created yet)'}")
        for name, profile in sorted(config.profiles.items()):
            print("\n".join(profile_lines(name, profile, default=name == config.default_provider)))
        return 0
    if not args.name:
        raise InputError.single("providers test", "name", "which profile? e.g. `swarm-tui providers test sim`")
    from swarm_tui.providers.probe import probe_profile

    result = asyncio.run(probe_profile(config.profile(args.name)))
    print(result.describe())
    return 0 if result.ok else 1


def check_tracing(args: argparse.Namespace, config: Config) -> tuple[bool, str | None] | None:
    """The live export asked for (`--otel`, `[otel]`): exit 2 naming the otel extra when it is
    missing, before the run directory is touched."""
    traces = tracing(args, config)
    if traces is not None:
        from swarm_tui.otel.sdk import require_sdk

        require_sdk("--otel-content" if traces[0] else "--otel")
    return traces


def drive(session: SwarmSession, args: argparse.Namespace, traces: tuple[bool, str | None] | None = None) -> int:
    if traces is not None:
        try:
            session.trace(content=traces[0], endpoint=traces[1])
        except BaseException:
            asyncio.run(session.aclose())  # the run directory's lock and the simulator, released
            raise
    if args.headless or not tui_available():
        return asyncio.run(run_headless_session(session, args))
    from swarm_tui.ui.launch import run_tui

    return run_tui(session, theme=args.theme, **console_options(args))


async def run_headless_session(session: SwarmSession, args: argparse.Namespace) -> int:
    try:
        return await run_headless(session, log_format=args.log_format, every_s=args.log_every, **console_options(args))
    finally:
        await session.aclose()
