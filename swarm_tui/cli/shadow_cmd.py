"""`swarm-tui shadow`: the primary endpoint judged against a mirrored baseline, ADOPT or ROLLBACK."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.util.argtypes import positive_float, positive_int, positive_share, share

SHADOW_EPILOG = """\
ROLLBACK when the primary's p95 is over --threshold x the secondary's, its error rate is more
than --max-error-excess above the secondary's, or (with --judge) the secondary's answers are
clearly better; else ADOPT. Report on stdout and in OUT/shadow.json; Ctrl-C stops early (130).

examples:
  swarm-tui shadow --primary holysheep --secondary openai --model gpt-4.1
      10% of 600 s of probe traffic mirrored to the official endpoint
  swarm-tui shadow --primary http://127.0.0.1:8801/v1 --secondary http://127.0.0.1:8802/v1 \\
      --model kimi-k2.5 --rate 0.1 --duration 60 --rps 10     two `swarm-tui sim` endpoints
  swarm-tui shadow --primary relay --secondary openai --job job.jsonl --judge self
      your own requests, and a judge of which answer of each pair is better
"""


def add_parser(commands) -> None:
    sh = commands.add_parser(
        "shadow",
        help="judge the primary endpoint against a mirrored baseline: ADOPT (exit 0) or ROLLBACK (exit 1)",
        description="Send a workload to the primary endpoint (the one migrated to, judged) and mirror a share of\n"
        "it to the secondary (the baseline); compare latency, errors, cost and answers. ADOPT (exit\n"
        "0) keeps the primary; ROLLBACK (exit 1) goes back to the secondary.\n",
        epilog=SHADOW_EPILOG,
        formatter_class=HELP_FORMAT,
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


def cmd_shadow(args: argparse.Namespace) -> int:
    import json

    from swarm_tui.cli.drive import tui_available
    from swarm_tui.run.directory import default_run_dir
    from swarm_tui.shadow import ShadowRun, format_report, write_report

    shadow_config = shadow_config_of(args)
    run = ShadowRun(shadow_config, shadow_progress())
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

    if not args.headless and tui_available():
        from swarm_tui.ui.shadow_view import ShadowApp

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


def shadow_config_of(args: argparse.Namespace):
    """The shadow comparison the options ask for: both endpoints (their keys checked), the judge,
    the workload (exit 2 before anything is sent when one cannot be used)."""
    from swarm_tui.cli.options import display_currency
    from swarm_tui.config import load_config
    from swarm_tui.jobs import load_job
    from swarm_tui.run.preflight import check_key
    from swarm_tui.shadow import ShadowConfig, endpoint_profile, shadow_judge

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
    check_key(primary)
    check_key(secondary)
    judge = shadow_judge(
        args.judge,
        config,
        model=args.judge_model,
        rubric_file=args.judge_rubric,
        rate=args.judge_rate,
        api_key_env=args.judge_key_env,
    )
    if judge is not None and judge.endpoint is not None:
        check_key(judge.endpoint)
    bodies = None
    if args.job is not None:
        job = load_job(args.job, model_override=args.model)
        bodies = [task.body for task in job.tasks]
    return ShadowConfig(
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
        currency=display_currency(config, args.currency, args.currency_rate, "--currency-rate"),
        judge=judge,
    )


def shadow_progress():
    """How a shadow run says how it goes: a line repainted on a terminal, one every 5 s otherwise."""
    import time

    from swarm_tui.shadow import progress_line

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

    return on_update
