"""`swarm-tui estimate`: what a workload costs a month, per model and provider, side by side.

A scenario is agents x tasks a day x days, each task sending `input_tokens` (a share of them
served from the provider's prefix cache) and receiving `output_tokens`. Every price-table row of
each chosen model is priced (official, the article's relay, other relays' average, the user's
own rows), with the saving against the most expensive option, in USD and the display currency
(at a provider's own billing rate when it has one: the article's relay bills ¥1 = $1), and the
same workload each other way the provider bills it (lane and tier: live at its Flex and
Priority tiers, and through its Batch API, where it publishes those rates). A model's
long-context rule is judged on one task's prompt, not the month's.

The source article's scenario, 100 agents x 50 tasks/day x 2,048 output tokens x 30 days, is
307.2M output tokens a month: $2,457.60 for GPT-4.1 at $8.00/1M.

`--from-run RUN_DIR` takes the per-task tokens a real run measured (billed tokens per finished
task, retries and failures included), read from the run's journal (read-only) or summary.json.

Pure functions and dataclasses, no Textual: the TUI builds the same table with
`build_estimate(...)` and shows `format_table(...)` (or its rows). The parts: `scenario` (the
workload, its rows, `build_estimate`), `runs` (per-task tokens measured in a run), `text` (the
table's cells and `format_table`).
"""

from __future__ import annotations

from swarm_tui.estimate.runs import RunMeasurement, measure_run, scenario_from_run, scenario_from_usage
from swarm_tui.estimate.scenario import SOURCE, Estimate, EstimateRow, Scenario, build_estimate
from swarm_tui.estimate.text import NO_TIER, TABLE_WIDTH, format_table, price_text, table_cells, tokens_text

__all__ = [
    "NO_TIER",
    "SOURCE",
    "TABLE_WIDTH",
    "Estimate",
    "EstimateRow",
    "RunMeasurement",
    "Scenario",
    "build_estimate",
    "format_table",
    "measure_run",
    "price_text",
    "scenario_from_run",
    "scenario_from_usage",
    "table_cells",
    "tokens_text",
]
