"""`swarm-tui estimate`: what a workload costs a month per model and provider, live and as batches."""

from __future__ import annotations

import argparse
from pathlib import Path

from swarm_tui.cli.help import HELP_FORMAT
from swarm_tui.run.exit_codes import EXIT_OK
from swarm_tui.util.argtypes import non_negative_float, positive_float, positive_int, share

ESTIMATE_EPILOG = """\
examples:
  swarm-tui estimate --agents 100 --tasks-per-day 50 --output-tokens 2048 --days 30 \\
      --model gpt-4.1     the source article's ROI scenario: 307.2M output tokens a month
  swarm-tui estimate --from-run runs/demo --model kimi-k2.5 --model deepseek-v3.2
      the per-task tokens a real run billed (its journal), priced on other models
  swarm-tui estimate --input-tokens 1500 --cached-share 0.6 --currency JPY --rate 150 --json
"""


def add_parser(commands) -> None:
    est = commands.add_parser(
        "estimate",
        help="project a workload's monthly cost per model and provider",
        description="Project the monthly cost of a workload per model and provider, side by side (e.g. the source\n"
        "article's 100 agents x 50 tasks/day x 2,048 output tokens x 30 days), with its cost at the\n"
        "provider's batch rate (the batch lane) and the saving against live.\n",
        epilog=ESTIMATE_EPILOG,
        formatter_class=HELP_FORMAT,
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


def cmd_estimate(args: argparse.Namespace) -> int:
    import json

    from swarm_tui.cli.options import display_currency
    from swarm_tui.config import load_config
    from swarm_tui.estimate import Scenario, build_estimate, format_table, measure_run, scenario_from_run
    from swarm_tui.pricing import PriceTable

    config = load_config()
    table = PriceTable.builtin(config.prices, billing=config.billing, source=config.path)
    currency = display_currency(config, args.currency, args.rate, "--rate")
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
    return EXIT_OK
