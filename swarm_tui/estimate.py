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
`build_estimate(...)` and shows `format_table(...)` (or its rows).
"""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .core.lanes import BATCH, LIVE
from .core.tiers import BATCH_TIER, DEFAULT, FLEX, PRIORITY
from .core.usage import Usage
from .currency import USD, DisplayCurrency, format_usd
from .errors import InputError
from .pricing import Price, PriceTable

SOURCE = "estimate"


@dataclass(frozen=True)
class Scenario:
    agents: int = 100
    tasks_per_day: float = 50
    input_tokens: float = 0
    """Prompt tokens per task (cached ones included). 0 by default, as in the article's scenario."""
    output_tokens: float = 2048
    cached_share: float = 0.0
    """Share of the input served from the provider's prefix cache (billed at the cached rate)."""
    days: float = 30
    measured_from: str | None = None
    """The run directory the per-task tokens were measured in, if any."""

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise InputError.single(SOURCE, problems[0][0], problems[0][1])

    def problems(self) -> list[tuple[str, str]]:
        out = []

        def number(value: Any) -> bool:
            return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

        if not number(self.agents) or self.agents < 1 or int(self.agents) != self.agents:
            out.append(("--agents", f"must be a whole number >= 1, not {self.agents!r}"))
        for name, value in (("--tasks-per-day", self.tasks_per_day), ("--days", self.days)):
            if not number(value) or value <= 0:
                out.append((name, f"must be a number > 0, not {value!r}"))
        for name, value in (("--input-tokens", self.input_tokens), ("--output-tokens", self.output_tokens)):
            if not number(value) or value < 0:
                out.append((name, f"must be a number of tokens >= 0, not {value!r}"))
        if not number(self.cached_share) or not 0 <= self.cached_share <= 1:
            out.append(("--cached-share", f"must be between 0 and 1 (e.g. 0.6 for 60%), not {self.cached_share!r}"))
        return out

    @property
    def tasks(self) -> float:
        return self.agents * self.tasks_per_day * self.days

    def usage(self) -> Usage:
        """The whole period's tokens (rounded to whole tokens)."""
        prompt = round(self.tasks * self.input_tokens)
        return Usage(
            prompt=prompt, completion=round(self.tasks * self.output_tokens), cached=round(prompt * self.cached_share)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "agents": self.agents,
            "tasks_per_day": self.tasks_per_day,
            "days": self.days,
            "input_tokens_per_task": self.input_tokens,
            "output_tokens_per_task": self.output_tokens,
            "cached_share": self.cached_share,
            "tasks": self.tasks,
            "measured_from": self.measured_from,
        }


@dataclass(frozen=True)
class EstimateRow:
    model: str
    provider: str
    price: Price
    cost_usd: float
    currency: DisplayCurrency
    """The display currency at this provider's rate (its billing rate when it has one)."""
    saving_usd: float = 0.0
    """Against the most expensive provider of the same model."""
    saving_share: float = 0.0
    priciest: bool = False
    batch_cost_usd: float | None = None
    """The same tokens at the provider's batch rate (`Price.batch_price`); None: none published."""
    flex_cost_usd: float | None = None
    """The same tokens live at the provider's Flex tier; None: no flex rate known."""
    priority_cost_usd: float | None = None
    """The same tokens live at the provider's Priority tier; None: no priority rate known."""

    def ways(self) -> list[tuple[str, str, Price, float]]:
        """(lane, tier, price, cost) of each way the provider bills these tokens, default first."""
        out = [(LIVE, DEFAULT, self.price, self.cost_usd)]
        for lane, tier, cost in ((LIVE, FLEX, self.flex_cost_usd), (LIVE, PRIORITY, self.priority_cost_usd),
                                 (BATCH, BATCH_TIER, self.batch_cost_usd)):  # fmt: skip
            price = self.price.for_tier(tier)
            if cost is not None and price is not None:
                out.append((lane, tier, price, cost))
        return out

    @property
    def display_amount(self) -> float | None:
        return self.currency.amount(self.cost_usd) if self.currency.shows_local else None

    @property
    def batch_saving_usd(self) -> float | None:
        """What the batch lane saves against the live price (None: no batch rate)."""
        return None if self.batch_cost_usd is None else self.cost_usd - self.batch_cost_usd

    @property
    def batch_saving_share(self) -> float | None:
        saving = self.batch_saving_usd
        if saving is None:
            return None
        return saving / self.cost_usd if self.cost_usd > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "provider": self.provider,
            "price": self.price.to_dict(),
            "cost_usd": round(self.cost_usd, 2),
            "cost_display": self.currency.format(self.cost_usd),
            "display": {**self.currency.to_dict(), "amount": _r2(self.display_amount)},
            "saving_usd": round(self.saving_usd, 2),
            "saving_share": round(self.saving_share, 4),
            "priciest_of_model": self.priciest,
            "batch_cost_usd": _r2(self.batch_cost_usd),
            "batch_saving_usd": _r2(self.batch_saving_usd),
            "batch_saving_share": None if self.batch_saving_share is None else round(self.batch_saving_share, 4),
            "tier_costs_usd": {tier: round(cost, 2) for _, tier, _, cost in self.ways()},
        }


@dataclass(frozen=True)
class Estimate:
    scenario: Scenario
    usage: Usage
    rows: list[EstimateRow]
    currency: DisplayCurrency
    prices_updated: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def cheapest(self) -> EstimateRow:
        return min(self.rows, key=lambda r: r.cost_usd)

    @property
    def priciest(self) -> EstimateRow:
        return max(self.rows, key=lambda r: r.cost_usd)

    def to_dict(self) -> dict[str, Any]:
        cheapest, priciest = self.cheapest, self.priciest
        return {
            "scenario": self.scenario.to_dict(),
            "tokens": {"input": self.usage.prompt, "cached": self.usage.cached, "output": self.usage.completion},
            "currency": self.currency.to_dict(),
            "rows": [r.to_dict() for r in self.rows],
            "cheapest": {
                "model": cheapest.model,
                "provider": cheapest.provider,
                "cost_usd": round(cheapest.cost_usd, 2),
                "saving_vs_priciest_usd": round(priciest.cost_usd - cheapest.cost_usd, 2),
            },
            "priciest": {
                "model": priciest.model,
                "provider": priciest.provider,
                "cost_usd": round(priciest.cost_usd, 2),
            },
            "prices_updated": self.prices_updated,
            "notes": self.notes,
        }


def build_estimate(
    scenario: Scenario,
    *,
    models: list[str] | None = None,
    providers: list[str] | None = None,
    table: PriceTable | None = None,
    currency: DisplayCurrency = USD,
) -> Estimate:
    """Price `scenario` on every provider row of `models` (all models when None or empty)."""
    table = table or PriceTable.builtin()
    known = table.models()
    if models:
        chosen: list[str] = []
        for name in models:
            canon = table.canonical(name)
            if canon is None:
                raise InputError.single(
                    SOURCE,
                    "--model",
                    f"no price for {name!r}; known models: {', '.join(known)} "
                    f'(add your own under [prices."provider/{name}"] in the config)',
                )
            if canon not in chosen:
                chosen.append(canon)
    else:
        chosen = known
    wanted = None
    if providers:
        known_providers = table.providers()
        wanted = set()
        for p in providers:
            key = "official" if p.strip() in ("*", "") else p.strip().lower()
            if key not in known_providers:
                raise InputError.single(
                    SOURCE, "--provider", f"no prices for provider {p!r}; known: {', '.join(known_providers)}"
                )
            wanted.add(key)
    usage = scenario.usage()
    size = scenario.input_tokens  # one task's prompt: what a long-context rule is judged on

    def cost_at(price: Price, tier: str) -> float | None:
        tiered = price.for_tier(tier)
        return tiered.cost(usage, size) if tiered is not None else None

    rows: list[EstimateRow] = []
    for model in chosen:
        offers = [o for o in table.offers(model) if wanted is None or o.provider in wanted]
        if not offers:
            continue
        priced = sorted(((o, o.price.cost(usage, size)) for o in offers), key=lambda pair: (pair[1], pair[0].provider))
        top = max(cost for _, cost in priced)
        for offer, cost in priced:
            rows.append(
                EstimateRow(
                    model=model,
                    provider=offer.provider,
                    price=offer.price,
                    cost_usd=cost,
                    currency=currency.for_provider(table, offer.provider),
                    saving_usd=top - cost,
                    saving_share=(top - cost) / top if top > 0 else 0.0,
                    priciest=len(priced) > 1 and cost == top,
                    batch_cost_usd=cost_at(offer.price, BATCH_TIER),
                    flex_cost_usd=cost_at(offer.price, FLEX),
                    priority_cost_usd=cost_at(offer.price, PRIORITY),
                )
            )
    if not rows:
        raise InputError.single(SOURCE, "--provider", "no price-table row matches the chosen models and providers")
    notes = []
    if scenario.input_tokens == 0:
        notes.append("input tokens: 0 per task (output only, as in the article's scenario); add --input-tokens N")
    if scenario.measured_from:
        notes.append(f"per-task tokens measured in {scenario.measured_from} (billed tokens per finished task)")
    return Estimate(scenario, usage, rows, currency, table.updated, notes)


# --------------------------------------------------------------------------- a run's measurements


@dataclass(frozen=True)
class RunMeasurement:
    run_dir: str
    finished_tasks: int
    input_tokens: float
    output_tokens: float
    cached_share: float
    model: str | None
    provider: str | None
    simulated: bool


def measure_run(run_dir: str | Path) -> RunMeasurement:
    """Per-task tokens of a run: billed tokens / finished tasks, from its journal (read-only) or,
    without one, its summary.json."""
    run_dir = Path(run_dir)
    from .journal import JOURNAL_NAME, Journal

    model = provider = None
    simulated = False
    if (run_dir / JOURNAL_NAME).exists():
        journal = Journal.open(run_dir, readonly=True)
        try:
            totals = journal.attempt_totals()
            counts = journal.counts()
            plan = journal.meta().get("plan") or {}
            tasks = journal.tasks()
        finally:
            journal.close()
        finished = counts.get("succeeded", 0) + counts.get("failed", 0)
        prompt, completion, cached = totals["prompt"], totals["completion"], totals["cached"]
        profile = plan.get("profile") or {}
        provider = profile.get("name")
        model = profile.get("model") or (tasks[0].body.get("model") if tasks else None)
        simulated = provider == "sim" and not profile.get("base_url")
    elif (run_dir / "summary.json").exists():
        try:
            summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
            finished = int(summary["succeeded"]) + int(summary["failed"])
            tokens = summary["tokens"]
            prompt, completion, cached = int(tokens["prompt"]), int(tokens["completion"]), int(tokens["cached"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError.single(run_dir / "summary.json", "tokens", f"unreadable summary: {exc}") from None
        model, provider, simulated = summary.get("model"), summary.get("provider"), bool(summary.get("simulated"))
    else:
        raise InputError.single(run_dir, "--from-run", "not a run directory (no journal.sqlite or summary.json)")
    if finished <= 0:
        raise InputError.single(run_dir, "--from-run", "the run has no finished task to measure tokens from")
    return RunMeasurement(
        str(run_dir),
        finished,
        prompt / finished,
        completion / finished,
        cached / prompt if prompt else 0.0,
        model,
        provider,
        simulated,
    )


def scenario_from_usage(
    usage: Usage, finished_tasks: int, base: Scenario | None = None, measured_from: str = "this run"
) -> Scenario:
    """`base` with the per-task tokens of `usage` billed over `finished_tasks` tasks: what the TUI
    uses to project a live run (`RunStats.usage`, `RunStats.done`)."""
    if finished_tasks <= 0:
        raise InputError.single(SOURCE, "tasks", "no finished task to measure tokens from yet")
    return replace(
        base or Scenario(),
        input_tokens=usage.prompt / finished_tasks,
        output_tokens=usage.completion / finished_tasks,
        cached_share=usage.cached / usage.prompt if usage.prompt else 0.0,
        measured_from=measured_from,
    )


def scenario_from_run(measured: RunMeasurement, base: Scenario | None = None, **explicit: Any) -> Scenario:
    """`base` (agents, tasks a day, days) with the run's per-task tokens, unless given in `explicit`."""
    base = base or Scenario()
    values: dict[str, Any] = {
        "input_tokens": measured.input_tokens,
        "output_tokens": measured.output_tokens,
        "cached_share": measured.cached_share,
    }
    values.update({k: v for k, v in explicit.items() if v is not None})
    return replace(base, measured_from=measured.run_dir, **values)


# --------------------------------------------------------------------------- the table as text


def tokens_text(n: float) -> str:
    """`307.2M`, `1.5B`, `12.3k`, `950`."""
    for limit, div, suffix in ((1e3, 1, ""), (1e6, 1e3, "k"), (1e9, 1e6, "M"), (float("inf"), 1e9, "B")):
        if abs(n) < limit:
            return f"{n:,.0f}" if not suffix else f"{n / div:,.1f}{suffix}"
    return str(n)  # pragma: no cover


def table_cells(
    estimate: Estimate, *, tokens: bool = True, narrow: bool = False
) -> tuple[list[str], list[list[str]], dict[str, str]]:
    """(headers, one row of cells per way a provider bills the tokens, billing notes) of the
    projection table: what `format_table` prints (`narrow`: its short headers) and the TUI's `$`
    screen shows (`tokens=False`: without the token columns, which are the same on every row).

    Each provider row of a model gives a line per lane and tier it has a rate for (`EstimateRow.
    ways`): live at the default tier, at Flex, at Priority, and the batch lane. `saving vs
    priciest` compares each with the model's priciest offer at the default tier (negative: dearer).
    A local cost at another rate than the display currency's is marked `*`; the notes say which
    provider bills at which rate."""
    cur = estimate.currency
    u = estimate.usage
    prices = ["in/1M", "out/1M"] if narrow else ["in $/1M", "out $/1M"]
    headers = ["model", "provider", "lane", "tier", *prices]
    headers += ["input tok", "output tok"] if tokens else []
    headers.append("cost USD")
    if cur.shows_local:
        headers.append(f"cost {cur.code}")
    headers.append("saving" if narrow else "saving vs priciest")
    rows: list[list[str]] = []
    billed_notes: dict[str, str] = {}
    for row in estimate.rows:
        top = row.cost_usd + row.saving_usd  # the model's priciest default-tier offer
        for lane, tier, price, cost in row.ways():
            cells = [row.model, row.provider, lane, tier if lane == LIVE else NO_TIER]
            cells += [price_text(price.input), price_text(price.output)]
            cells += [tokens_text(u.prompt), tokens_text(u.completion)] if tokens else []
            cells.append(format_usd(cost))
            if cur.shows_local:
                local = row.currency.local(cost)
                if row.currency.rate != cur.rate:
                    local += "*"
                    billed_notes[row.provider] = row.currency.rate_text()
                cells.append(local)
            if row.priciest and tier == DEFAULT:
                cells.append("priciest" if narrow else "(priciest)")
            elif tier == DEFAULT and row.saving_usd <= 0:
                cells.append("-")
            else:
                cells.append(f"{(top - cost) / top:.1%}" if top > 0 else "-")
            rows.append(cells)
    return headers, rows, billed_notes


TABLE_WIDTH = 80
"""`format_table` fits a terminal of 80 columns: the model heads its rows, the notes wrap."""


def format_table(estimate: Estimate) -> str:
    s = estimate.scenario
    u = estimate.usage
    cur = estimate.currency
    lines = [
        f"Monthly projection: {s.agents:,} agents x {_num(s.tasks_per_day)} tasks/day x {_num(s.days)} days"
        f" = {_num(s.tasks)} tasks",
        f"Per task: {_num(s.input_tokens)} input tokens ({s.cached_share:.0%} cached)"
        f" + {_num(s.output_tokens)} output tokens",
        f"Tokens: {tokens_text(u.prompt)} input ({tokens_text(u.cached)} cached) + {tokens_text(u.completion)} output",
    ]
    show_local = cur.shows_local
    headers, table, billed_notes = table_cells(estimate, tokens=False, narrow=True)
    headers, table = headers[1:], [cells[1:] for cells in table]  # the model heads its rows instead
    right = set(range(3, len(headers)))
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(headers)]

    def render(cells: list[str]) -> str:
        return (
            "  "
            + "  ".join(
                c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            ).rstrip()
        )

    lines.append("")
    lines.append(render(headers))
    models = [row.model for row in estimate.rows for _ in row.ways()]
    previous = None
    for model, cells in zip(models, table, strict=True):
        if model != previous:
            if previous is not None:
                lines.append("")
            lines.append(model)
        previous = model
        lines.append(render(cells))
    lines.append("")
    notes: list[str] = []
    cheapest, priciest = estimate.cheapest, estimate.priciest
    if len({r.model for r in estimate.rows}) > 1 and priciest.cost_usd > cheapest.cost_usd:
        notes.append(
            f"Cheapest: {cheapest.model} @ {cheapest.provider} {format_usd(cheapest.cost_usd)}, "
            f"{format_usd(priciest.cost_usd - cheapest.cost_usd)} "
            f"({(priciest.cost_usd - cheapest.cost_usd) / priciest.cost_usd:.1%}) less than the priciest, "
            f"{priciest.model} @ {priciest.provider} {format_usd(priciest.cost_usd)}"
        )
    notes.append(
        "Lane live or batch (the provider's Batch API, within 24 h); tier default, flex (the batch rate, "
        "answered live: slower, sometimes unavailable) or priority (faster, at a premium), where the provider "
        "publishes the rate. Saving: against the model's priciest offer at the default tier."
    )
    if show_local:
        basis = f"{cur.rate_text()} ({cur.basis})" if cur.basis else cur.rate_text()
        if billed_notes:
            bills = ", ".join(f"{p} bills {r}" for p, r in sorted(billed_notes.items()))
            notes.append(f"{cur.code} at {basis}; * {bills} (price table [billing])")
        else:
            notes.append(f"{cur.code} at {basis}")
    notes.append(
        f"Prices: USD per 1M tokens, built-in table updated {estimate.prices_updated or '?'} "
        "(official list prices and the source article's relay prices); override in your config [prices]."
    )
    notes += [f"Note: {note}" for note in estimate.notes]
    for note in notes:
        lines += textwrap.wrap(note, TABLE_WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join(lines)


NO_TIER = "—"
"""The tier column of the batch lane's row (the batch is its own rate, not a service tier)."""


def price_text(value: float) -> str:
    """USD per 1M tokens: `8.00`, `0.50`, `0.625`, `0.028`, `0.0433` (never rounded away: a half
    of $1.25 is $0.625, not $0.62)."""
    cents = value * 100
    if value == 0 or (value >= 0.1 and abs(cents - round(cents)) < 1e-9):
        return f"{value:.2f}"
    return f"{value:.4g}"


def _num(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _r2(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
