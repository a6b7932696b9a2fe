"""`swarm-tui ctl RUN ACTION`: a run driven by any process (the console, a headless run, a resume,
Ray), read and steered from a script: its status, its agents, one agent in full, its answers;
pause, resume, abort, retry, cancel, a new limit, and waiting for its end.

A thin layer over the Python API's `RemoteRun` (`swarm_tui.api`, from `run.remote`): it reads the
journal read-only and steers through its control queue, importing nothing of the engine, so a
status poll answers in a fraction of a second whatever the run's size.
With `--json` every call prints one JSON object (the reference lists its keys).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from swarm_tui.api import TASK_STATES
from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.run.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_NOT_DRIVEN, EXIT_OK, EXIT_TIMEOUT

if TYPE_CHECKING:
    import subprocess

    from swarm_tui.api import CommandSent, RemoteRun, RunStatus

EXIT_CODES = """\
exit codes: 0 done (the command taken by the run's driver; wait: every task succeeded);
  1 wait: the run ended with failed or unfinished tasks; 2 bad input (no run there, an unknown
  task); 3 nobody drives the run (ctl RUN resume starts a driver); 4 the driver did not take the
  command in time, or wait's --timeout passed first
"""

CTL_EPILOG = f"""\
{EXIT_CODES}
examples:
  swarm-tui ctl runs/big status                    counts, waits, failures by class, cost, ETA
  swarm-tui ctl runs/big status --json | jq .counts
  swarm-tui ctl runs/big retry --errored rate_limit
  swarm-tui ctl runs/big pause --now               hold the calls in flight too
  swarm-tui ctl runs/big wait --timeout 600 && echo all answered
"""

ACTIONS: dict[str, tuple[str, str, str]] = {
    "status": (
        "where the run stands",
        "Where the run stands: who drives it (live, paused, stopped, finished, dead), its tasks by state\n"
        "and what the unfinished ones wait on, the failed ones by error class, cost, rates, ETA, phase,\n"
        "limit, and each endpoint's health over its last attempts.\n",
        "  swarm-tui ctl runs/big status\n  swarm-tui ctl runs/big status --json | jq '.counts.failed'\n",
    ),
    "agents": (
        "list the run's agents (tasks)",
        "List the run's agents (tasks) as the journal keeps them: index, custom_id, state, attempts. A\n"
        "call in flight is not kept on disk: such an agent is listed queued (or retrying).\n",
        "  swarm-tui ctl runs/big agents --state failed\n  swarm-tui ctl runs/big agents --state failed --ids | head\n",
    ),
    "show": (
        "one agent in full: its request, attempts, answer",
        "One agent in full: its request, every attempt (status, error, tokens, cost, latency), its answer\n"
        "and the JSON the answer holds (parsed), or its final error. ID: a custom_id, or #N for agent N.\n",
        "  swarm-tui ctl runs/big show task-0042\n  swarm-tui ctl runs/big show '#7' --json | jq .parsed\n",
    ),
    "results": (
        "a page of the answers (and final errors)",
        "A page of the finished agents' answers and final errors, in order: each one's custom_id, answer,\n"
        "parsed JSON and error (--json: with the total and the next page's offset).\n",
        "  swarm-tui ctl runs/big results --state succeeded --limit 10\n"
        "  swarm-tui ctl runs/big results --json --offset 100 --limit 100\n",
    ),
    "pause": (
        "send nothing new (--now: hold the calls in flight too)",
        "Pause the run: nothing new is sent; the calls in flight finish, or with --now they are held too\n"
        "(cut, journaled as cancelled, and sent again first when the run resumes).\n",
        "  swarm-tui ctl runs/big pause\n  swarm-tui ctl runs/big pause --now\n",
    ),
    "resume": (
        "resume a paused run, or start a driver for a run nobody drives",
        "Resume a paused run. A run nobody drives (stopped, or its process gone) is resumed in a process\n"
        "of its own, `swarm-tui resume RUN --headless`, its output appended to RUN/resume.log: it goes on\n"
        "after this command and its terminal are gone, as the attached view's p does.\n",
        "  swarm-tui ctl runs/big resume\n  swarm-tui ctl runs/big resume --retry-failed\n",
    ),
    "abort": (
        "abort the run (resumable)",
        "Abort the run: the calls in flight are cancelled and nothing new is sent; the journal stays\n"
        "resumable (`ctl RUN resume`).\n",
        "  swarm-tui ctl runs/big abort\n  swarm-tui ctl runs/big abort --json\n",
    ),
    "retry": (
        "queue failed agents again",
        "Queue failed agents again, with a fresh retry budget: every failed one (--failed), those whose\n"
        "last error is of a class (--errored rate_limit), or the agents named (cancelled ones too).\n",
        "  swarm-tui ctl runs/big retry --failed\n  swarm-tui ctl runs/big retry --errored server_error\n"
        "  swarm-tui ctl runs/big retry task-0007 '#12'\n",
    ),
    "cancel": (
        "stop agents now (retry them by name later)",
        "Stop these agents now: a call in flight is cancelled (journaled: it may be billed), and each\n"
        "waits, cancelled, until retried by name or the run resumed.\n",
        "  swarm-tui ctl runs/big cancel task-0042\n  swarm-tui ctl runs/big cancel '#3' '#4'\n",
    ),
    "limit": (
        "set the concurrency ceiling",
        "Set the concurrency ceiling (the adaptive limit moves under it), as + and - do in the console.\n",
        "  swarm-tui ctl runs/big limit 20\n  swarm-tui ctl runs/big limit 200 --json\n",
    ),
    "wait": (
        "wait until nobody drives the run any more",
        "Wait until the run ends (or stops, or its process dies), then print its status: exit 0 when\n"
        "every task succeeded, 1 when some failed or are unfinished, 4 when --timeout passed first.\n",
        "  swarm-tui ctl runs/big wait\n  swarm-tui ctl runs/big wait --timeout 600 --json\n",
    ),
}


def add_parser(commands) -> None:
    ctl = commands.add_parser(
        "ctl",
        help="read and steer a run from a script: status, agents, pause, retry, limit, wait (--json)",
        description="Read and steer RUN, driven by any process (the console, a headless run, a resume, Ray), from\n"
        "a script or another terminal: through its journal (read-only) and its control queue, which\n"
        "the driving process serves within half a second. What a command did is in the run's event log\n"
        "as a key press's is. With --json every call prints one JSON object.\n",
        epilog=CTL_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    ctl.add_argument("run_dir", type=Path, metavar="RUN", help="the run directory (its journal.sqlite)")
    actions = ctl.add_subparsers(dest="action", metavar="ACTION", required=True)
    parsers = {}
    for name, (summary, description, examples) in ACTIONS.items():
        parser = actions.add_parser(
            name,
            help=summary,
            description=description,
            epilog=f"{EXIT_CODES}\nexamples:\n{examples}",
            formatter_class=HELP_FORMAT,
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parsers[name] = parser
    parsers["agents"].add_argument("--state", choices=TASK_STATES, help="only the agents in this state")
    parsers["agents"].add_argument("--ids", action="store_true", help="only their custom_ids, one a line")
    parsers["agents"].add_argument("--offset", type=int, default=0, metavar="N", help="skip the first N")
    parsers["agents"].add_argument("--limit", type=int, default=1000, metavar="N", help="at most N (default 1000)")
    parsers["show"].add_argument("id", metavar="ID", help="a custom_id, or #N for agent N")
    results = parsers["results"]
    results.add_argument("--state", choices=("succeeded", "failed"), help="only answers, or only final errors")
    results.add_argument("--offset", type=int, default=0, metavar="N", help="skip the first N")
    results.add_argument("--limit", type=int, default=20, metavar="N", help="at most N (default 20)")
    parsers["pause"].add_argument("--now", action="store_true", help="hold the calls in flight too")
    parsers["resume"].add_argument(
        "--retry-failed", action="store_true", help="a run nobody drives: also run its failed agents again"
    )
    retry = parsers["retry"]
    which = retry.add_mutually_exclusive_group()
    which.add_argument("--failed", action="store_true", help="every failed agent")
    which.add_argument("--errored", metavar="CLASS", help="the failed agents whose last error is of CLASS")
    retry.add_argument("ids", nargs="*", metavar="ID", help="these agents (a custom_id, or #N)")
    parsers["cancel"].add_argument("ids", nargs="+", metavar="ID", help="a custom_id, or #N for agent N")
    parsers["limit"].add_argument("limit", type=int, metavar="N", help="the new ceiling (1 or more)")
    parsers["wait"].add_argument("--timeout", type=float, metavar="S", help="give up after S seconds (exit 4)")
    ctl.set_defaults(handler=cmd_ctl)


def cmd_ctl(args: argparse.Namespace) -> int:
    from swarm_tui.api import NotDriven, RemoteRun
    from swarm_tui.core.errors import InputError
    from swarm_tui.journal import IncompleteRunError

    run_dir: Path = args.run_dir
    try:
        run = RemoteRun(run_dir)
    except (InputError, IncompleteRunError, FileNotFoundError) as exc:
        if not args.json:
            raise
        return _bad_input(args, exc)
    with run:
        try:
            return ACTION_HANDLERS[args.action](run, args)
        except (InputError, IncompleteRunError, FileNotFoundError) as exc:
            if not args.json:
                raise
            return _bad_input(args, exc)
        except NotDriven as exc:
            status = exc.status
            hint = (
                f"swarm-tui ctl {run_dir} resume --retry-failed"
                if args.action == "retry"
                else f"swarm-tui ctl {run_dir} resume"
            )
            say(
                args,
                f"swarm-tui: {exc}; nothing was sent (start a driver: {hint})",
                {
                    "run": str(run_dir),
                    "command": args.action,
                    "error": "not driven",
                    "state": status.state.value,
                    "liveness": status.liveness,
                    "next": hint,
                },
                error=True,
            )
            return EXIT_NOT_DRIVEN


def _bad_input(args: argparse.Namespace, exc: Exception) -> int:
    """Bad input said as one JSON object (--json), on stdout, exit 2."""
    from swarm_tui.util import secrets

    data = {"run": str(args.run_dir), "command": args.action, "error": "bad input", "message": secrets.mask(str(exc))}
    print(json.dumps(data, ensure_ascii=False))
    return EXIT_BAD_INPUT


def say(args: argparse.Namespace, text: str, data: dict[str, Any], *, error: bool = False) -> None:
    """One answer: `data` as one JSON object with --json, else `text` (on stderr when it is an error)."""
    if args.json:
        print(json.dumps(data, ensure_ascii=False, default=str))
    else:
        print(text, file=sys.stderr if error else sys.stdout)


def _status(run: RemoteRun, args: argparse.Namespace) -> int:
    status = run.status()
    say(args, status.describe(), status.to_json())
    return EXIT_OK


def _agents(run: RemoteRun, args: argparse.Namespace) -> int:
    rows = run.tasks(args.state, max(0, args.offset), max(0, args.limit))
    if args.json:
        data: dict[str, Any] = (
            {"ids": [r.custom_id for r in rows]} if args.ids else {"agents": [r.to_json() for r in rows]}
        )
        say(args, "", {"run": str(run.run_dir), **data})
    elif args.ids:
        print("\n".join(r.custom_id for r in rows))
    else:
        print("\n".join(f"#{r.index + 1}\t{r.custom_id}\t{r.state}\t{r.attempts} attempts" for r in rows))
    return EXIT_OK


def _show(run: RemoteRun, args: argparse.Namespace) -> int:
    detail = run.show(args.id)
    data = detail.to_json()
    if args.json:
        say(args, "", data)
        return EXIT_OK
    lines = [f"#{detail.index + 1} {detail.custom_id}: {detail.state}"]
    for attempt in detail.attempts:
        error = f" {attempt.get('error_class')}: {attempt.get('error_message')}" if attempt.get("error_class") else ""
        cost = f" ${attempt['cost_usd']:.5f}" if attempt.get("cost_usd") is not None else ""
        lines.append(
            f"  attempt {attempt.get('number')} {attempt.get('outcome')} {attempt.get('status') or ''} "
            f"{attempt.get('latency_ms', 0):.0f} ms on {attempt.get('endpoint')}{cost}{error}"
        )
    if data["answer"] is not None:
        lines += ["answer:", str(data["answer"])]
    if data["parsed"] is not None:
        lines += ["parsed:", json.dumps(data["parsed"], ensure_ascii=False, indent=2)]
    if data["error"] is not None:
        lines += ["error:", json.dumps(data["error"], ensure_ascii=False)]
    print("\n".join(lines))
    return EXIT_OK


def _results(run: RemoteRun, args: argparse.Namespace) -> int:
    page = run.results(args.state, args.offset, args.limit)
    if args.json:
        say(args, "", {"run": str(run.run_dir), **page.to_json()})
        return EXIT_OK
    for result in page.results:
        said = result.answer if result.ok else json.dumps(result.error, ensure_ascii=False)
        print(f"{result.custom_id}\t{'ok' if result.ok else 'failed'}\t{(said or '').replace(chr(10), ' ')}")
    more = f"; next: --offset {page.next_offset}" if page.next_offset is not None else ""
    print(f"({len(page.results)} of {page.total:,} from {page.offset}{more})", file=sys.stderr)
    return EXIT_OK


def _sent(run: RemoteRun, args: argparse.Namespace, sent: CommandSent, text: str) -> int:
    data = {"run": str(run.run_dir), **sent.to_json()}
    if not sent.taken:
        say(
            args,
            f"swarm-tui: the run's driver did not take `{sent.command}` in time (it is busy or stuck); "
            "it stays queued and is applied when taken",
            data,
            error=True,
        )
        return EXIT_TIMEOUT
    if sent.result is None:  # a driver from before commands were answered
        say(args, f"`{sent.command}` taken by the run's driver (it does not say what it did)", data)
        return EXIT_OK
    result = sent.result
    why = f" ({result['why']})" if result.get("why") else ""
    say(args, text.format(**result) + why, data)
    return EXIT_OK


def _pause(run: RemoteRun, args: argparse.Namespace) -> int:
    sent = run.send("pause", {"now": True} if args.now else None)
    return _sent(run, args, sent, "paused; {held} calls in flight held" if args.now else "paused")


def _resume(run: RemoteRun, args: argparse.Namespace) -> int:
    from swarm_tui.api import log_tail, resume_detached

    status = run.status()
    if status.state.driven or status.state.value == "starting":
        return _sent(run, args, run.send("resume"), "resumed")
    if status.holder is not None:  # a process holds it (stopped, silent, a console left open): no second driver
        say(
            args,
            f"swarm-tui: {run.run_dir}: {status.liveness}; not resumed",
            {
                "run": str(run.run_dir),
                "command": "resume",
                "error": "held",
                "state": status.state.value,
                "liveness": status.liveness,
            },
            error=True,
        )
        return EXIT_NOT_DRIVEN
    if status.state.value == "finished" and not (args.retry_failed and status.counts.get("failed")):
        say(
            args,
            f"{run.run_dir}: finished; nothing to resume",
            {"run": str(run.run_dir), "command": "resume", "started": None, "state": status.state.value},
        )
        return EXIT_OK
    process, log = resume_detached(run.run_dir, retry_failed=args.retry_failed)
    live = _wait_live(run, process)
    data = {"run": str(run.run_dir), "command": "resume", "started": process.pid, "log": str(log), "live": live}
    if not live:
        code = process.poll()
        last = log_tail(log)
        say(
            args, f"swarm-tui: the resume exited {code}: {last}", {**data, "exit_code": code, "error": last}, error=True
        )
        return EXIT_FAILED
    say(args, f"resumed in the background: pid {process.pid}, log {log}", data)
    return EXIT_OK


def _wait_live(run: RemoteRun, process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> bool:
    """Whether the driver started goes live (its first heartbeat) before it exits or `timeout_s` passes."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return process.returncode == 0 and run.status().state.driven
        beat = run.heartbeat()
        if beat is not None and beat.pid == process.pid:
            return True
        time.sleep(0.1)
    return process.poll() is None


def _abort(run: RemoteRun, args: argparse.Namespace) -> int:
    return _sent(run, args, run.send("abort"), "aborting: the calls in flight are cancelled; resumable")


def _retry(run: RemoteRun, args: argparse.Namespace) -> int:
    from swarm_tui.core.errors import InputError

    if args.ids and (args.failed or args.errored):
        raise InputError.single("ctl retry", "ID", "name agents, or --failed, or --errored CLASS: not both")
    if args.ids:
        sent = run.send("retry", {"indices": run.resolve(args.ids)})
    elif args.errored:
        sent = run.send("retry", {"errored": args.errored})
    elif args.failed:
        sent = run.send("retry")
    else:
        raise InputError.single("ctl retry", "retry", "say which: --failed, --errored CLASS, or agents' ids")
    return _sent(run, args, sent, "{queued} agents queued again")


def _cancel(run: RemoteRun, args: argparse.Namespace) -> int:
    sent = run.send("cancel", {"indices": run.resolve(args.ids)})
    return _sent(run, args, sent, "{cancelled} agents cancelled")


def _limit(run: RemoteRun, args: argparse.Namespace) -> int:
    from swarm_tui.core.errors import InputError

    if args.limit < 1:
        raise InputError.single("ctl limit", "N", f"a limit is 1 or more, not {args.limit}")
    return _sent(run, args, run.send("concurrency", {"limit": args.limit}), "concurrency ceiling {limit}")


def _wait(run: RemoteRun, args: argparse.Namespace) -> int:
    status: RunStatus = run.wait(args.timeout)
    say(args, status.describe(), status.to_json())
    if status.state.driven or status.state.value in ("starting", "silent"):
        return EXIT_TIMEOUT
    every = status.total > 0 and status.counts.get("succeeded", 0) == status.total
    return EXIT_OK if every else EXIT_FAILED


ACTION_HANDLERS = {
    "status": _status,
    "agents": _agents,
    "show": _show,
    "results": _results,
    "pause": _pause,
    "resume": _resume,
    "abort": _abort,
    "retry": _retry,
    "cancel": _cancel,
    "limit": _limit,
    "wait": _wait,
}
