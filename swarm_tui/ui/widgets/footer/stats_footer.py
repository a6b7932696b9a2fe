"""The small panels around the grid: provider bar (top), lane panel (under the grid, while the
run has provider batches) and the stats footer (bottom); the run panel beside the grid is
`run_panel.py`. Each draws itself from the run source when the app's timer asks
(`update_from`), and repaints only when its text actually changed. Each fits its width: the
provider bar drops its explanations before its hint, the footer's figures take a narrower
arrangement below 80 columns that keeps done, failed, the elapsed time and the ETA in view.

The footer's fields have fixed widths (see `format.py`), so figures never shift as they
grow; it repaints without a layout pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Sparkline

from swarm_tui.providers.profile import key_status
from swarm_tui.ui import format as fmt
from swarm_tui.ui.keys import key_hint
from swarm_tui.ui.widgets.grid.agent_grid import BATCH_GLYPH, AgentGrid
from swarm_tui.ui.widgets.panels.run_panel import SPARK_BARS, RunPanel
from swarm_tui.ui.widgets.panels.text_panel import TextPanel
from swarm_tui.view.news import average_rates

if TYPE_CHECKING:
    from swarm_tui.engine import RunStats
    from swarm_tui.frontend.source import RunSource
    from swarm_tui.pricing.currency import DisplayCurrency
    from swarm_tui.view.figures import BatchView

__all__ = ["SPARK_BARS", "LanePanel", "ProviderBar", "RunPanel", "StatsFigures", "StatsFooter", "TextPanel"]

BATCH_WINDOW = "24h"
"""The completion window the batch lane asks for (OpenAI's only one)."""
OPEN_STATUSES = ("validating", "in_progress", "finalizing", "cancelling")
NARROW_FOOTER_BELOW = 80
"""Terminal widths below this get the footer's narrow arrangement."""


class ProviderBar(TextPanel):
    """One line: where the requests go. Says SIMULATED in plain words for the simulator."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "provider-bar--simulated",
        "provider-bar--attached",
        "provider-bar--dim",
        "provider-bar--bad",
    }

    DEFAULT_CSS = """
    ProviderBar { height: 1; background: $panel; color: $foreground; padding: 0 1; }
    ProviderBar > .provider-bar--simulated { color: $background; background: $swarm-simulated; text-style: bold; }
    ProviderBar > .provider-bar--attached { color: $background; background: $swarm-attached; text-style: bold; }
    ProviderBar > .provider-bar--dim { color: $text-muted; }
    ProviderBar > .provider-bar--bad { color: $error; text-style: bold; }
    """

    def update_from(self, source: RunSource) -> None:
        """Where the requests go, then the pane's key; at a narrow width the explanations go
        first (the simulator's, the key's env var), never the SIMULATED badge or the hint."""
        style = self.get_component_rich_style
        dim = style("provider-bar--dim")
        width = self.content_size.width
        head = Text(no_wrap=True, overflow="ellipsis")
        if source.attached:
            head.append(" ATTACHED ", style("provider-bar--attached"))
            head.append(" ")
        profile = source.profile
        doors = source.view.endpoints
        head.append(profile.name, "bold")
        head.append(" │ ", dim)
        if source.simulated:
            head.append(" SIMULATED ", style("provider-bar--simulated"))
        elif doors.routed:  # a route: its endpoints, the run panel's rows say how each does
            head.append("route " + ", ".join(doors.doors))
        else:
            head.append(source.base_url)
        model = Text()
        model.append(" │ model ", dim)
        model.append(source.model or "(as in each request)")
        about = Text()
        if source.simulated:
            about.append(" │ embedded simulator: no key, no network, not a real model", dim)
        else:
            env = profile.api_key_env or "OPENAI_API_KEY"
            status = key_status(profile)
            about.append(" │ key ", dim)
            about.append(f"{env} {status}", style("provider-bar--bad") if status == "missing" else "")
        hint = Text(f" │ {key_hint(self.app, type(self.app), 'app.provider')}: provider pane", dim)
        text = head
        for part in (model, about):
            if not width or text.cell_len + part.cell_len + hint.cell_len <= width:
                text.append_text(part)
        text.append_text(hint)
        self.show(text)


class LanePanel(TextPanel):
    """Under the grid while the run has provider batches (`--lane batch|auto`): the batch
    colour's legend with the lines waiting, then the latest batches, one a line: id, status,
    requests done and failed of the batch's, time in the provider's 24 h window, next poll.

    It reads the run view's `RunFigures.batches`, kept from the events alone, so a live view and an
    attached one show the same lines. Hidden (no height at all) in a run without batches."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "lane-panel--title",
        "lane-panel--dim",
        "lane-panel--bad",
        "lane-panel--good",
        "lane-panel--warn",
    }

    DEFAULT_CSS = """
    LanePanel { height: auto; padding: 0 2; display: none; }
    LanePanel > .lane-panel--title { color: $primary; text-style: bold; }
    LanePanel > .lane-panel--dim { color: $text-muted; }
    LanePanel > .lane-panel--bad { color: $error; text-style: bold; }
    LanePanel > .lane-panel--good { color: $success; }
    LanePanel > .lane-panel--warn { color: $warning; }
    """

    @staticmethod
    def shown(batches: Mapping[str, BatchView], rows: int) -> list[BatchView]:
        """The batches worth a line, at most `rows`: every open one first, then the latest ended,
        in the order they were submitted."""
        views = list(batches.values())
        open_ = [v for v in views if v.ended is None]
        keep = set(map(id, open_[-rows:]))
        for view in reversed(views):
            if len(keep) >= rows:
                break
            keep.add(id(view))
        return [v for v in views if id(v) in keep]

    def update_from(
        self, batches: Mapping[str, BatchView], grid: AgentGrid, stats: RunStats, now: float, rows: int = 2
    ) -> None:
        """`now`: epoch seconds (the batches' times are the provider's wall clock, not the run's)."""
        if not batches:
            self.display = False
            return
        self.display = True
        style = self.get_component_rich_style
        dim = style("lane-panel--dim")
        shown = self.shown(batches, rows)
        open_count = sum(1 for v in batches.values() if v.ended is None)
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{BATCH_GLYPH} ", grid.batch_style())
        text.append(f" {stats.batch_waiting} of {stats.batch_sent} batch lines waiting", "bold")
        text.append(f" · {len(batches)} batch{'es' if len(batches) != 1 else ''}", "")
        if len(batches) > 1:
            text.append(f" ({open_count} open)", dim)
        if len(shown) < len(batches):
            text.append(f", latest {len(shown)} shown", dim)
        hint = f" · half price, back within {BATCH_WINDOW}"
        width = self.content_size.width  # (0 before its first layout: then the panel's ellipsis cuts)
        if not width or text.cell_len + len(hint) <= width:  # the lane's promise, where it fits
            text.append(hint, dim)
        digits = len(str(max(v.requests for v in shown)))
        for view in shown:
            text.append("\n")
            self._batch_line(text, view, digits, now)
        self.show(text)

    def _batch_line(self, text: Text, view: BatchView, digits: int, now: float) -> None:
        style = self.get_component_rich_style
        dim, bad = style("lane-panel--dim"), style("lane-panel--bad")
        ended = view.ended
        status = view.status.replace("_", " ")
        if ended is None:
            status_style = style("lane-panel--warn") if view.status == "cancelling" else ""
        else:
            status_style = style("lane-panel--good" if view.status == "completed" else "lane-panel--bad")
        text.append(f"{fmt.short_batch_id(view.batch_id):<16}", dim)
        text.append(f"{status:<12}", status_style)
        done = ended.succeeded if ended is not None else view.completed
        text.append(f"{done:>{digits}}/{view.requests:<{digits}}")
        text.append(" done", dim)
        failed = ended.failed if ended is not None else view.failed
        if failed:
            text.append(f" {failed} failed", bad)
        if ended is not None:
            if ended.requeued:
                text.append(f" {ended.requeued} sent again", style("lane-panel--warn"))
            if ended.unfinished:
                text.append(f" {ended.unfinished} unfinished", style("lane-panel--warn"))
            return
        text.append(f"  {fmt.span(now - view.submitted_at)} of {BATCH_WINDOW}", dim)
        if view.next_poll_s is not None and view.polled_at is not None:
            due = view.polled_at + view.next_poll_s - now
            text.append(f" · poll in {fmt.span(due)}" if due >= 1 else " · polling", dim)

    def lines(self, batches: Mapping[str, BatchView], rows: int) -> int:
        """The panel's height for these batches (0: hidden)."""
        return 1 + len(self.shown(batches, rows)) if batches else 0


FOOTER_LINES = 3
"""The footer's figures without a lane's line (`footer_lanes`)."""


def footer_lanes(stats: RunStats) -> tuple[str, ...]:
    """The footer's lines past its three, in the order shown: `tier` once a live call was billed at
    a service tier (`--service-tier flex|priority`), `batch` in a run with a batch lane, `judge`
    once the judge has cost something, `cache` once an answer came from the cache."""
    shown = (
        ("tier", bool(stats.tier_cost_usd)),
        ("batch", stats.batch_sent > 0),
        ("judge", stats.judge_cost_usd > 0),
        ("cache", stats.cache_hits > 0),
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
        in_flight = f"{stats.in_flight:>4}" if source.in_flight_known else "   ?"
        clock = fmt.duration(stats.elapsed_s if elapsed_s is None else elapsed_s).rjust(7)
        if narrow:
            line.progress(clock, eta_s)
            line.text.append("\n")
            line.cost()
            line.field("in flight ", f"{in_flight}/{source.limit:<4}")
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
            line.field("in flight ", f"{in_flight}/{source.limit:<4}")
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
        for lane in ("batch", "judge", "cache"):
            self.set_class(lane in lanes, f"-{lane}")
        height = FOOTER_LINES + len(lanes)
        for widget in (self, *self.children):
            widget.styles.height = height
