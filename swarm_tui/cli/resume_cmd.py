"""`swarm-tui resume RUN_DIR`: a run goes on where it stopped, never sending a task that succeeded.

The stored run is held (its lock, its journal and its meta, each opened or read once), the request
resolved over its plan, the plan checked, and only then does the session begin the journal's new
session; a refusal on the way releases the run untouched.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.cli.options import add_console_options, add_run_options

RESUME_EPILOG = """\
examples:
  swarm-tui resume runs/first                      finish the tasks a stop or crash left
  swarm-tui resume runs/first --retry-failed       ... and send the failed tasks again
  swarm-tui resume runs/first --model gpt-4.1 --headless    the run's endpoint, another model
  swarm-tui resume runs/first --provider openai    move the run to another endpoint
"""


def add_parser(commands) -> None:
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


def cmd_resume(args: argparse.Namespace) -> int:
    from swarm_tui.cli.drive import console_checks, drive
    from swarm_tui.cli.request import resume_request
    from swarm_tui.config import load_config
    from swarm_tui.run.preflight import preflight, refuse
    from swarm_tui.run.resolve import resolve_resume
    from swarm_tui.run.session import SwarmSession
    from swarm_tui.run.stored import StoredRun

    request = resume_request(args)
    config = load_config()
    stored = StoredRun.open(request.run_dir)
    with stored.released_on_error():
        plan = resolve_resume(request, config, stored)
        refuse(preflight(plan, config, also=console_checks(request.options.console)))
        session = SwarmSession.open_existing(stored, plan.run, retry_failed=plan.retry_failed, ray=plan.ray)
    return drive(session, request.options.console, plan.tracing, retried=plan.retry_failed)
