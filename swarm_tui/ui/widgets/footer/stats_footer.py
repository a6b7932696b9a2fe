"""The stats footer, the console's bottom lines: cost, tokens, latency, throughput, progress,
the elapsed time and the ETA, with a latency sparkline to the right; one line more for each lane
the run comes to have (a service tier, the batch lane, the judge, the cache: `footer_lanes`).

Its fields have fixed widths (see `format.py`), so figures never shift as they grow and it
repaints without a layout pass. Below 80 columns (`NARROW_FOOTER_BELOW`) the figures take a
narrower arrangement that keeps done, failed, the elapsed time and the ETA in view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Sparkline

from swarm_tui.ui import format as fmt
from swarm_tui.ui.widgets.panels.text_panel import TextPanel
from swarm_tui.view.news import average_rates

if TYPE_CHECKING:
    from swarm_tui.engine import RunStats
    from swarm_tui.frontend.source import RunSource
    from swarm_tui.pricing.currency import DisplayCurrency

NARROW_FOOTER_BELOW = 80
"""Terminal widths below this get the footer's narrow arrangement."""


FOOTER_LINES = 3
"""The footer's figures without a lane's line (`footer_lanes`)."""


def footer_lanes(stats: RunStats) -> tuple[str, ...]:
    """The footer's lines past its three, in the order shown: `tier` once a live call was billed at
    a service tier (`--service-tier flex|priority`), `batch` in a run with a batch lane, `judge`
    once the judge has cost something, `cache` once an answer came from the cache, `answers` once an
    answer was checked (or came back unusable)."""
    shown = (
        ("tier", bool(stats.tier_cost_usd)),
        ("batch", stats.batch_sent > 0),
        ("judge", stats.judge_cost_usd > 0),
        ("cache", stats.cache_hits > 0),
        ("answers", stats.answers.any),
    )
    return tuple(name for name, wanted in shown if wanted)


class StatsFigures(TextPanel):
    """The footer's figures: three lines of fixed-width fields, then one a lane the run has
    (`footer_lanes`; `StatsFooter.-batch` and so on): the batch lines waiting and the cost split
    live / batch; the judge's part of the cost, shown apart; the answers replayed from the
    response cache and what they saved."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"stats-figures--label", "stats-figures--bad", "stats-figures--unknown"}

    DEFAULT_CSS = """
    StatsFigures { width: 72; height: 3; padding: 0 1; }
    StatsFigures.-narrow { width: 52; }
    StatsFigures > .stats-figures--label { color: $text-muted; }
    StatsFigures > .stats-figures--bad { color: $error; text-style: bold; }
    StatsFigures > .stats-figures--unknown { color: $warning; }
    """

    def update_from(
        self,
        source: RunSource,
        currency: DisplayCurrency,
        elapsed_s: float | None = None,
        *,
        eta_s: float | None = None,
        narrow: bool = False,
    ) -> None:
        """`elapsed_s`: the run's time when it has ended (the clock stops there, and the rates
        are the run's average: the recent ones would stay frozen at its last seconds'); None
        while it runs. `eta_s`: the ETA to show (None: unknown, or paused). `narrow`: below 80
        columns, the progress line first and the tokens left out."""
        stats = source.stats
        line = _FooterText(
            stats,
            currency,
            self.get_component_rich_style("stats-figures--label"),
            self.get_component_rich_style("stats-figures--bad"),
            self.get_component_rich_style("stats-figures--unknown"),
        )
        req_s, tok_s = stats.rates() if elapsed_s is None else average_rates(stats, elapsed_s)
        clock = fmt.duration(stats.elapsed_s if elapsed_s is None else elapsed_s).rjust(7)
        if narrow:
            line.progress(clock, eta_s)
            line.text.append("\n")
            line.cost()
            line.in_flight(source.limit, known=source.in_flight_known)
            line.text.append("\n")
            line.latency()
            line.field(" ", fmt.rate(req_s))
            line.field(" req/s", "")
        else:
            line.cost()
            usage = stats.usage
            line.field("tok in ", fmt.si(usage.prompt))
            line.field(" out ", fmt.si(usage.completion))
            line.field(" cached ", fmt.si(usage.cached))
            line.text.append("\n")
            line.latency()
            line.field("   ", fmt.rate(req_s))
            line.field(" req/s ", fmt.rate(tok_s))
            line.field(" tok/s", "")
            line.text.append("\n")
            line.in_flight(source.limit, known=source.in_flight_known)
            line.progress(clock, eta_s, lead=" ")
        line.lanes()
        self.set_class(narrow, "-narrow")
        self.show(line.text)


class _FooterText:
    """The footer's figures as one text of fixed-width fields, labels dimmed."""

    def __init__(self, stats: RunStats, currency: DisplayCurrency, label: Style, bad: Style, unknown: Style) -> None:
        self.stats, self.currency = stats, currency
        self.label, self.bad, self.unknown = label, bad, unknown
        self.text = Text(no_wrap=True, overflow="crop")

    def field(self, name: str, value: str, style: Style | str = "") -> None:
        self.text.append(name, self.label)
        self.text.append(value, style)

    def in_flight(self, limit: int, *, known: bool = True) -> None:
        """The tasks holding an in-flight slot against the limit (`  12/50`); hedged backups beside
        them (`/35+1`: a backup is a call on the wire that holds no slot, so it is never counted
        against the limit); a limit lowered below the calls already out (AIMD, `-`) as what it is
        (`  36>35↓`: they finish, nothing new goes out until under it), never as a fraction past 1.
        Nine columns wide, as the figures beside it expect (a backup past a lowered limit: more)."""
        self.text.append("in flight ", self.label)
        if not known:  # an attached view of a journal that does not log its calls' starts
            self.text.append(f"   ?/{limit:<4}")
            return
        stats = self.stats
        tasks = stats.in_flight_tasks
        self.text.append(f"{tasks:>4}")
        tail = f"/{limit}" if tasks <= limit else f">{limit}↓"
        self.text.append(tail, "" if tasks <= limit else self.unknown)
        backups = f"+{stats.backups}" if stats.backups else ""
        self.text.append(backups, self.label)
        self.text.append(" " * max(0, 5 - len(tail) - len(backups)))

    def cost(self) -> None:
        stats = self.stats
        if stats.cost_known:
            self.field("cost ", fmt.usd(stats.cost_usd, 9))
            self.field("", fmt.money(stats.cost_usd, self.currency, 11))
        else:
            self.text.append("price unknown".ljust(25), self.unknown)

    def latency(self) -> None:
        stats = self.stats
        self.field("p50 ", fmt.latency(stats.percentile(0.5)))
        self.field(" p95 ", fmt.latency(stats.percentile(0.95)))
        self.field(" p99 ", fmt.latency(stats.percentile(0.99)))

    def progress(self, clock: str, eta_s: float | None, lead: str = "") -> None:
        """done, failed, of the total, the elapsed time and the ETA."""
        stats = self.stats
        self.field(f"{lead}done ", f"{stats.succeeded:>5}")
        self.field(" failed ", f"{stats.failed:>4}", self.bad if stats.failed else "")
        self.field(" of ", f"{stats.total:<5}")
        self.field(" ", clock)
        self.field(" ETA ", fmt.duration(eta_s))

    def lanes(self) -> None:
        """The service tier's line, the batch lane's, the judge's and the cache's, in a run that has
        them (`footer_lanes`)."""
        stats = self.stats
        lanes = footer_lanes(stats)
        if "tier" in lanes:  # the cost above, by the service tier it was billed at
            self.text.append("\n")
            self.field("tier ", stats.tier_label())
        if "batch" in lanes:  # "in flight" counts live calls; batch lines wait at the provider
            self.text.append("\n")
            self.field("in batch ", f"{stats.batch_waiting:>5}")
            self.field(" waiting", "")
            if stats.cost_known:
                live = max(0.0, stats.cost_usd - stats.batch_cost_usd)
                self.field("   cost (live ", fmt.usd(live, 0))
                self.field(" · batch ", fmt.usd(stats.batch_cost_usd, 0))
                self.field(")", "")
        if "judge" in lanes:  # inside `cost` above, shown apart
            self.text.append("\n")
            self.field("judge ", fmt.usd(stats.judge_cost_usd, 9))
            self.field("", fmt.money(stats.judge_cost_usd, self.currency, 11))
            share = stats.judge_cost_usd / stats.cost_usd if stats.cost_usd > 0 else 0.0
            self.field("", f"{share:>6.1%}")
            self.field(" of the cost", "")
        if "cache" in lanes:  # answered without a call: none of them is in `cost` or the tokens
            self.text.append("\n")
            self.field("cache ", f"{stats.cache_hits:>5}")
            self.field(" hits · saved ", fmt.usd(stats.cache_saved_usd, 9))
            self.field("", fmt.money(stats.cache_saved_usd, self.currency, 11))
        if "answers" in lanes:  # what the answer checks did; re-asks are not counted in `retried`
            answers = stats.answers
            self.text.append("\n")
            self.field("valid ", f"{answers.valid:>5}")
            self.field(" re-asked ", f"{answers.reasked:>4}")
            self.field(" escalated ", f"{answers.escalated:>4}")
            self.field(" refused ", f"{answers.refused:>4}", self.bad if answers.refused else "")
            self.field(" truncated ", f"{answers.truncated:>4}")


class StatsFooter(Horizontal):
    """Cost, tokens, latency, throughput, progress and time; a latency sparkline to the right.
    One line taller for each lane's line the run has (`show_lanes`)."""

    DEFAULT_CSS = """
    StatsFooter { height: 3; background: $panel; }
    StatsFooter > Sparkline { width: 1fr; height: 3; min-width: 4; margin-right: 1; }
    """

    def compose(self) -> ComposeResult:
        yield StatsFigures(id="figures")
        spark = Sparkline([], id="latency-spark", summary_function=max)
        spark.tooltip = "latency of successful calls, one bar per second (max)"
        yield spark

    def show_lanes(self, lanes: tuple[str, ...]) -> None:
        """The lanes' lines the figures show (`footer_lanes`): the footer, its figures and its
        sparkline as tall as they need, and a class per lane (`-batch`, `-judge`, `-cache`)."""
        for lane in ("batch", "judge", "cache", "answers"):
            self.set_class(lane in lanes, f"-{lane}")
        height = FOOTER_LINES + len(lanes)
        for widget in (self, *self.children):
            widget.styles.height = height
