"""`swarm-tui run [JOB]` (and the bare `swarm-tui`): a new run of a job, in the console or headless.

The run's steps in order: the command line as a request, the request resolved with the config
and the job into a plan, the plan's preflight (every problem at once, nothing written or sent),
the session opened on the plan, and the session driven by a front end.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from swarm_tui.cli.help import HELP_FORMAT, JOB_FORMATS
from swarm_tui.cli.options import add_console_options, add_run_options

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
  swarm-tui run tickets.csv --prompt "Classify: {{text}}" --id "{{ticket_id}}" --headless
                                                           a table (export: swarm-tui export RUN --format csv)
  swarm-tui run first.jsonl --provider openai --headless   a profile (key in OPENAI_API_KEY)
  export DEEPSEEK_API_KEY=...                              a real endpoint, ad hoc:
  swarm-tui run first.toml --base-url https://api.deepseek.com/v1 --model deepseek-chat \\
      --api-key-env DEEPSEEK_API_KEY --headless --budget 0.50
"""


def add_parser(commands) -> None:
    run = commands.add_parser(
        "run",
        help="run a job (the TUI unless --headless)",
        description=RUN_DESCRIPTION,
        epilog=RUN_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    run.add_argument(
        "job",
        nargs="?",
        type=Path,
        help="a .jsonl (OpenAI Batch) or .toml (swarm) job, or a table with --prompt; default: the 100-agent demo",
    )
    run.add_argument("--out", type=Path, help="run directory (default: runs/<timestamp>-<job name>)")
    run.add_argument(
        "--tools",
        type=Path,
        metavar="FILE.toml",
        help="tools for a job that declares none ([[tools.mcp]], [[tools.python]], [agents]): every task an agent",
    )
    table = run.add_argument_group(
        "tables (a .csv, .parquet, a .jsonl of records, or a dataset directory: each row a task; needs swarm-tui[data])"
    )
    table.add_argument(
        "--prompt", metavar="TEMPLATE", help='what to ask of each row, over its columns: "Classify: {text}"'
    )
    table.add_argument("--system", metavar="TEMPLATE", help="a system message for each row (a template too)")
    table.add_argument(
        "--id", metavar="TEMPLATE", help='each task\'s id, from its row: "{ticket_id}" (default row-N: its row number)'
    )
    add_run_options(run)
    add_console_options(run)
    run.set_defaults(handler=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from swarm_tui.cli.drive import console_checks, drive
    from swarm_tui.cli.request import run_request
    from swarm_tui.config import load_config
    from swarm_tui.run.preflight import preflight, refuse
    from swarm_tui.run.resolve import resolve_run
    from swarm_tui.run.session import SwarmSession

    request = run_request(args)
    config = load_config()
    plan = resolve_run(request, config)
    refuse(preflight(plan, config, also=console_checks(request.options.console)))
    assert plan.job is not None  # a new run's plan holds its job
    session = SwarmSession.open_new(plan.job, plan.run, plan.run_dir, ray=plan.ray, judge_profile=plan.judge_profile)
    return drive(session, request.options.console, plan.tracing)
