"""The small panels around the grid: provider bar (top), run panel (beside the grid; the judge's
score under the legend while a run has judged answers), lane panel (under the grid, while the run
has provider batches) and the stats footer (bottom). Each draws
itself from the run source when the app's timer asks (`update_from`), and repaints only when
its text actually changed.

The footer's fields have fixed widths (see `format.py`), so figures never shift as they
grow; it repaints without a layout pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Sparkline

from ..engine import TaskState
from ..providers.profile import key_status
from . import format as fmt
from .grid import LOW_SCORE, STATE_LABELS, STATES, AgentGrid
from .keys import key_hint

if TYPE_CHECKING:
    from ..currency import DisplayCurrency
    from ..engine import RunStats
    from ..runlog import BatchView, QualityView
    from .source import RunSource

BATCH_WINDOW = "24h"
"""The completion window the batch lane asks for (OpenAI's only one)."""
OPEN_STATUSES = ("validating", "in_progress", "finalizing", "cancelling")
SPARK_BARS = "▁▂▃▄▅▆▇█"
"""The judge's sparkline: one bar a score, on the fixed 1-10 scale (a fall shows as a fall)."""


def _height(text: Text) -> int:
    """A panel's lines for `text` (a last newline ends a line; it starts none): the same count
    decides both the height and whether a change needs a layout pass."""
    return len(text.plain.rstrip("\n").split("\n")) if text.plain else 1


class TextPanel(Widget):
    """A few lines of styled text, drawn with the line API from strips cached per change.

    Cheaper than a `Static` for text that changes ten times a second: the `Text` is split
    into lines and rendered to segments once per change, with none of the markup, wrapping
    and visual conversion a `Static` does on every repaint.
    """

    DEFAULT_CSS = """
    TextPanel { height: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._text = Text()
        self._key: tuple | None = None
        self._strips: list[Strip] | None = None
        self._base: Style | None = None

    def show(self, text: Text) -> None:
        key = (text.plain, tuple(text.spans))
        if key != self._key:
            height_changed = self._key is None or _height(text) != _height(self._text)
            self._key = key
            self._text = text
            self._strips = None
            self.refresh(layout=height_changed)
            if height_changed and self.is_mounted:
                # Once more after this refresh: a layout of the screen that runs before this panel's
                # own request reaches it keeps the row's old arrangement (seen in a terminal, never
                # under Pilot: an attached view's panel stayed a line short of its text)
                self.call_after_refresh(self.refresh, layout=True)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips = None
        self._base = None

    @property
    def base_style(self) -> Style:
        if self._base is None:
            self._base = self.rich_style
        return self._base

    def get_content_height(self, container, viewport, width: int) -> int:
        return _height(self._text)

    def render_line(self, y: int) -> Strip:
        if self._strips is None:
            base = self.base_style
            console = self.app.console
            strips = []
            for line in self._text.split("\n", allow_blank=True):
                line.stylize_before(base)
                line.no_wrap, line.overflow = True, "ellipsis"
                strips.append(Strip(line.render(console)))
            self._strips = strips
        width = self.size.width
        base = self.base_style
        if y >= len(self._strips):
            return Strip.blank(width, base)
        strip = self._strips[y]
        if strip.cell_length > width:
            return strip.crop(0, width - 1).extend_cell_length(width - 1) + Strip([Segment("…", base)])
        return strip.extend_cell_length(width, base)


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
        dim = self.get_component_rich_style("provider-bar--dim")
        text = Text(no_wrap=True, overflow="ellipsis")
        if source.attached:
            text.append(" ATTACHED ", self.get_component_rich_style("provider-bar--attached"))
            text.append(" ")
        profile = source.profile
        text.append(profile.name, "bold")
        text.append(" │ ", dim)
        if source.simulated:
            text.append(" SIMULATED ", self.get_component_rich_style("provider-bar--simulated"))
        else:
            text.append(source.base_url)
        text.append(" │ model ", dim)
        text.append(source.model or "(as in each request)")
        if source.simulated:
            text.append(" │ embedded simulator: no key, no network, not a real model", dim)
        else:
            env = profile.api_key_env or "OPENAI_API_KEY"
            status = key_status(profile)
            text.append(" │ key ", dim)
            text.append(
                f"{env} {status}", self.get_component_rich_style("provider-bar--bad") if status == "missing" else ""
            )
        text.append(" │ e: provider pane", dim)
        self.show(text)


class RunPanel(TextPanel):
    """Beside the grid: run state, the legend with a count per state, the agent under the cursor."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "run-panel--title",
        "run-panel--dim",
        "run-panel--bad",
        "run-panel--paused",
    }

    DEFAULT_CSS = """
    RunPanel { width: 1fr; height: auto; padding: 0 1; }
    RunPanel > .run-panel--title { color: $primary; text-style: bold; }
    RunPanel > .run-panel--dim { color: $text-muted; }
    RunPanel > .run-panel--bad { color: $error; text-style: bold; }
    RunPanel > .run-panel--paused { color: $warning; text-style: bold; }
    """

    def update_from(
        self,
        source: RunSource,
        grid: AgentGrid,
        phase: str,
        detail: str,
        rate_limits: tuple[int | None, int | None] = (None, None),
        notes: Sequence[str] = (),
        quality: QualityView | None = None,
        max_lines: int | None = None,
    ) -> None:
        """`notes`: lines under the phase (an attached view: who drives the run, how to resume it);
        the phase, its detail and the notes wrap to the panel's width rather than lose their ends.
        `quality`: the judge's scores (a run with a judge), shown once an answer is judged.
        `max_lines`: the rows the panel has without squeezing the error log and the footer (the
        grid's); the judge's lines give way first (the heat scale or an attached view's notes
        need them), the legend row, then the drift, then the score."""
        style = self.get_component_rich_style
        dim = style("run-panel--dim")
        bad = style("run-panel--bad")
        stats = source.stats
        phase_style = (
            "run-panel--paused"
            if phase in ("PAUSED", "STOPPING")
            else ("run-panel--bad" if phase in ("ABORTED", "CRASHED", "NOT RUNNING") else "run-panel--title")
        )
        status = Text()
        status.append(phase, style(phase_style))
        status.append(f" {detail}" if detail else "", dim)
        for note in notes:
            status.append("\n" + note, dim)
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append_text(self._wrapped(status))
        text.append("\n")
        run_name = source.run_dir.name
        text.append(
            f"run {run_name}\n" if source.job_name in run_name else f"{source.job_name} · run {run_name}\n", dim
        )
        counts = Counter(source.states.values())
        digits = len(str(len(source.states)))
        labels = STATE_LABELS
        if grid.stepping:  # multi-step agents: a running one thinks, or runs its tools (their own line)
            labels = {**STATE_LABELS, TaskState.RUNNING: "thinking"}
            counts[TaskState.RUNNING] = max(0, counts[TaskState.RUNNING] - grid.in_tools)
        if grid.batching:  # running: live calls; the lines waiting in batches are the lane panel's
            counts[TaskState.RUNNING] = max(0, counts[TaskState.RUNNING] - grid.in_batch)
        for pair in (STATES[i : i + 2] for i in range(0, len(STATES), 2)):
            for n, state in enumerate(pair):
                if n:
                    text.append(" ")
                if grid.heat and state is TaskState.SUCCEEDED:
                    for level in range(1, 6):
                        text.append(" ", grid.heat_style(level))
                    text.append(f"{counts[state]:>{digits}} {'done':<9}")
                    continue
                text.append("  ", grid.state_style(state))
                label = labels[state] if n else f"{labels[state]:<9}"
                text.append(
                    f" {counts[state]:>{digits}} {label}", bad if state is TaskState.FAILED and counts[state] else ""
                )
            text.append("\n")
        if grid.stepping:  # and how a cell tells it: a sample cell, as the grid draws it now
            text.append("  ", grid.tool_style())
            text.append(f" {grid.in_tools:>{digits}} {'in tools':<9} ")
            text.append(*grid.cell_sample(6, 3, in_tools=True))
            where = " agent 7, step 3" if grid.step_beside_number else "" if grid.compact else " step 3"
            text.append(f"{where}\n", dim)
        judge = self._judge_lines(quality, grid, digits) if quality is not None and quality.judged else []
        if judge:  # the lines below them, apart: how many there are decides how many judge lines fit
            head, text = text, Text(no_wrap=True, overflow="ellipsis")
        # Two numbers, two names: the adaptive limit (what may be in flight now) and the
        # ceiling `+`/`-` set, under which the limit adapts.
        limits = Text()
        limits.append("limit ", dim)
        limits.append(f"{source.limit}")
        limits.append(" · ceiling ", dim)
        limits.append(f"{source.ceiling}")
        rpm, tpm = rate_limits
        rates = Text()
        rates.append("rpm ", dim)
        rates.append(fmt.si(rpm, 5).strip() if rpm else "-")
        rates.append(" tpm ", dim)
        rates.append(fmt.si(tpm, 5).strip() if tpm else "-")
        width = self.content_size.width
        text.append_text(limits)
        text.append("\n" if 0 < width < limits.cell_len + 2 + rates.cell_len else "  ")
        text.append_text(rates)
        text.append("\ncalls ", dim)
        text.append(f"{stats.sent}")
        text.append(" sent, ", dim)
        text.append(f"{stats.retried}")
        text.append(" retried\n", dim)
        for label, value in (
            ("429s ", stats.rate_limited),
            ("  5xx ", stats.server_errors),
            ("  timeouts ", stats.timeouts),
        ):
            text.append(label, dim)
            text.append(f"{value}", bad if value else "")
        straggler_s = source.straggler_s
        if straggler_s is not None:  # the straggler deadline (README: the three deadlines)
            text.append(f" · cut {straggler_s:.1f}s", dim)
        text.append("\n")
        if stats.steps or stats.tool_calls:  # multi-step agents: their steps, tools and critical path
            text.append("steps ", dim)
            text.append(f"{stats.steps}")
            text.append("  tools ", dim)
            text.append(f"{stats.tool_calls}")
            if stats.tool_errors:
                text.append(f" ({stats.tool_errors} failed)", bad)
            text.append("  path ", dim)
            text.append(f"{stats.critical_path}\n")
        if grid.heat:
            self._heat_scale(text, grid, dim)
        index = grid.cursor_index
        if index is not None:
            state = source.states.get(index, TaskState.QUEUED)
            cursor = Text()
            cursor.append(f"▸ agent {index + 1}: {self._agent_state(grid, index, state)}", "bold")
            score = grid.score_of(index) if state is TaskState.SUCCEEDED else None
            if score is not None:
                cursor.append(f", judged {score:g}", style("run-panel--paused") if score <= LOW_SCORE else "bold")
            open_key = key_hint(self.app, AgentGrid, "grid.open")
            retry = (
                f"  {key_hint(self.app, type(self.app), 'app.retry_agent')}: retry" if state is TaskState.FAILED else ""
            )
            hint = f"  {open_key}: detail{retry}"
            width = self.content_size.width
            if score is None or not width or cursor.cell_len + len(hint) <= width:  # a judged one: its score first
                cursor.append(hint, dim)
            text.append_text(cursor)
        if judge:
            text = self._with_judge(head, judge, text, max_lines)
        self.show(text)

    @staticmethod
    def _agent_state(grid: AgentGrid, index: int, state: TaskState) -> str:
        """The state of the agent under the cursor; for a multi-step agent, its step and what it does."""
        step = grid.step_of(index) if state in (TaskState.RUNNING, TaskState.RETRYING) else None
        if step is None:
            return STATE_LABELS[state]
        number, tools = step
        if state is TaskState.RETRYING:
            return f"retrying, step {number}"
        if tools is None:
            return f"step {number}, thinking"
        return f"step {number}, in {', '.join(dict.fromkeys(tools)) or 'its tools'}"

    def _judge_lines(self, quality: QualityView, grid: AgentGrid, digits: int) -> list[tuple[int, Text]]:
        """The judge, in three lines at most, each with its rank (0 stays longest): how its cells
        look in the grid (a legend row, with counts), the rolling score and its baseline with a
        sparkline of the recent scores, and the last drift with what was done about it."""
        style = self.get_component_rich_style
        dim, warn = style("run-panel--dim"), style("run-panel--paused")
        width = self.content_size.width
        low = sum(1 for score, _ in quality.judged.values() if score <= LOW_SCORE)
        legend = Text()
        legend.append("  ", grid.judged_style())
        legend.append(f" {len(quality.judged):>{digits}} {'judged':<9} ")
        legend.append("  ", grid.low_score_style())
        legend.append(f" {low:>{digits}} ")
        legend.append(f"scored ≤{LOW_SCORE:g}", warn if low else "")
        lines = [(2, legend)]
        line = Text()
        line.append("judge ", dim)
        rolling, baseline = quality.rolling, quality.baseline
        if rolling is None:
            line.append("–")
        else:
            line.append(f"{rolling:.1f}", warn if rolling <= LOW_SCORE else "bold")
        if baseline is None:
            line.append(" · baseline pending", dim)
        else:
            line.append(" · base ", dim)
            line.append(f"{baseline:.1f}")
        room = (width or 80) - line.cell_len - 1
        if room >= 4:
            good = Style(color=grid.state_style(TaskState.SUCCEEDED).bgcolor)
            poor = Style(color=grid.low_score_style().bgcolor)
            line.append(" ")
            for score in list(quality.recent)[-room:]:
                bar = SPARK_BARS[round((min(10.0, max(1.0, score)) - 1) / 9 * (len(SPARK_BARS) - 1))]
                line.append(bar, poor if score <= LOW_SCORE else good)
        lines.append((0, line))
        if quality.drifts:
            last = quality.drifts[-1]
            done = last.detail.rpartition("; ")[2] or last.action
            line = Text()
            line.append("drift", warn)
            line.append(f" r{last.round}")
            if len(quality.drifts) > 1:
                line.append(f" (#{len(quality.drifts)})", dim)
            line.append(" → ", dim)
            if width and line.cell_len + len(done) > width:  # "memory flushed (3 rounds)": its words first
                done = done.partition(" (")[0]
            line.append(done)
            lines.append((1, line))
        return lines

    @staticmethod
    def _with_judge(head: Text, judge: list[tuple[int, Text]], tail: Text, max_lines: int | None) -> Text:
        """`head`, the judge's lines that fit in `max_lines` with `tail`, then `tail`."""
        used = head.plain.count("\n") + len(tail.plain.rstrip("\n").split("\n"))
        room = len(judge) if max_lines is None else max(0, max_lines - used)
        kept = sorted(rank for rank, _ in judge)[:room]
        for rank, line in judge:
            if rank in kept:
                head.append_text(line)
                head.append("\n")
        head.append_text(tail)
        return head

    def _wrapped(self, text: Text) -> Text:
        """`text` folded at word boundaries to the panel's width (as is before the first layout)."""
        width = self.content_size.width
        if width <= 0:
            return text
        return Text("\n").join(text.wrap(self.app.console, width, overflow="fold"))

    @staticmethod
    def _heat_scale(text: Text, grid: AgentGrid, dim: Style) -> None:
        """The heat view's key: its five colours, fast to slow, with the latencies between them."""
        bounds = grid.heat_bounds
        if not bounds:
            text.append("heat: no finished call yet\n", dim)
            return
        text.append("heat: latency, fast → slow (ms)\n", dim)
        for level in range(1, 6):
            text.append("  ", grid.heat_style(level))
            if level <= len(bounds):
                text.append(f" {bounds[level - 1]:.0f} ")
        text.append("\n")


class LanePanel(TextPanel):
    """Under the grid while the run has provider batches (`--lane batch|auto`): the batch
    colour's legend with the lines waiting, then the latest batches, one a line: id, status,
    requests done and failed of the batch's, time in the provider's 24 h window, next poll.

    It reads the run's `RunFigures.batches`, kept from the events alone, so a live view and an
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
        text.append("  ", grid.batch_style())
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


class StatsFigures(TextPanel):
    """The footer's figures: three lines of fixed-width fields; a fourth in a run with a batch
    lane (`StatsFooter.-batch`): the batch lines waiting, and the cost split live / batch; one
    more in a run whose judge has cost something (`StatsFooter.-judge`): the judge's part of the
    cost, shown apart."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"stats-figures--label", "stats-figures--bad", "stats-figures--unknown"}

    DEFAULT_CSS = """
    StatsFigures { width: 72; height: 3; padding: 0 1; }
    StatsFigures > .stats-figures--label { color: $text-muted; }
    StatsFigures > .stats-figures--bad { color: $error; text-style: bold; }
    StatsFigures > .stats-figures--unknown { color: $warning; }
    """

    def update_from(self, source: RunSource, currency: DisplayCurrency, elapsed_s: float | None = None) -> None:
        """`elapsed_s`: the run's time when it has ended (the clock stops there); None while it runs."""
        stats = source.stats
        label: Style = self.get_component_rich_style("stats-figures--label")
        bad: Style = self.get_component_rich_style("stats-figures--bad")
        text = Text(no_wrap=True, overflow="crop")

        def field(name: str, value: str, style: Style | str = "") -> None:
            text.append(name, label)
            text.append(value, style)

        if stats.cost_known:
            field("cost ", fmt.usd(stats.cost_usd, 9))
            field("", fmt.money(stats.cost_usd, currency, 11))
        else:
            text.append("price unknown".ljust(25), self.get_component_rich_style("stats-figures--unknown"))
        usage = stats.usage
        field("tok in ", fmt.si(usage.prompt))
        field(" out ", fmt.si(usage.completion))
        field(" cached ", fmt.si(usage.cached))
        text.append("\n")
        field("p50 ", fmt.latency(stats.percentile(0.5)))
        field(" p95 ", fmt.latency(stats.percentile(0.95)))
        field(" p99 ", fmt.latency(stats.percentile(0.99)))
        req_s, tok_s = stats.rates()
        field("   ", fmt.rate(req_s))
        field(" req/s ", fmt.rate(tok_s))
        field(" tok/s", "")
        text.append("\n")
        in_flight = f"{stats.in_flight:>4}" if source.in_flight_known else "   ?"
        field("in flight ", f"{in_flight}/{source.limit:<4}")
        field(" done ", f"{stats.succeeded:>5}")
        field(" failed ", f"{stats.failed:>4}", bad if stats.failed else "")
        field(" of ", f"{stats.total:<5}")
        field(" ", fmt.duration(stats.elapsed_s if elapsed_s is None else elapsed_s).rjust(7))
        field(" ETA ", fmt.duration(source.eta_s()))
        if stats.batch_sent:  # "in flight" counts live calls; batch lines wait at the provider
            text.append("\n")
            field("in batch ", f"{stats.batch_waiting:>5}")
            field(" waiting", "")
            if stats.cost_known:
                live = max(0.0, stats.cost_usd - stats.batch_cost_usd)
                field("   cost (live ", fmt.usd(live, 0))
                field(" · batch ", fmt.usd(stats.batch_cost_usd, 0))
                field(")", "")
        if stats.judge_cost_usd > 0:  # inside `cost` above, shown apart
            text.append("\n")
            field("judge ", fmt.usd(stats.judge_cost_usd, 9))
            field("", fmt.money(stats.judge_cost_usd, currency, 11))
            share = stats.judge_cost_usd / stats.cost_usd if stats.cost_usd > 0 else 0.0
            field("", f"{share:>6.1%}")
            field(" of the cost", "")
        self.show(text)


class StatsFooter(Horizontal):
    """Cost, tokens, latency, throughput, progress and time; a latency sparkline to the right."""

    DEFAULT_CSS = """
    StatsFooter { height: 3; background: $panel; }
    StatsFooter > Sparkline { width: 1fr; height: 3; min-width: 4; margin-right: 1; }
    StatsFooter.-batch { height: 4; }
    StatsFooter.-batch > StatsFigures { height: 4; }
    StatsFooter.-batch > Sparkline { height: 4; }
    StatsFooter.-judge { height: 4; }
    StatsFooter.-judge > StatsFigures { height: 4; }
    StatsFooter.-judge > Sparkline { height: 4; }
    StatsFooter.-batch.-judge { height: 5; }
    StatsFooter.-batch.-judge > StatsFigures { height: 5; }
    StatsFooter.-batch.-judge > Sparkline { height: 5; }
    """

    def compose(self) -> ComposeResult:
        yield StatsFigures(id="figures")
        spark = Sparkline([], id="latency-spark", summary_function=max)
        spark.tooltip = "latency of successful calls, one bar per second (max)"
        yield spark
