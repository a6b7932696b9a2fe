"""The run panel, beside the grid: the phase, a legend with a count per state, the agent under
the cursor, the limits and request counts; the judge's score while a run has judged answers.

Its lines each have a rank (0 stays longest): when the rows beside the grid are fewer than the
lines (80x24, 60x20, a heat scale or an attached view's notes taking some), the panel drops the
highest ranks first and keeps, to the last, the phase and the done and failed counts. Its width
decides the legend's shape: two states a row where they fit, one a row where not (a narrow
panel beside the 80x24 grid). Each legend swatch carries the state's glyph, as the cells do, so
the legend reads without colour too.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text

from swarm_tui.core.events import TaskState
from swarm_tui.ui import format as fmt
from swarm_tui.ui.keys import key_hint
from swarm_tui.ui.screens.detail import why_of
from swarm_tui.ui.widgets.grid.agent_grid import (
    BATCH_GLYPH,
    GLYPHS,
    LOW_GLYPH,
    LOW_SCORE,
    STATE_LABELS,
    TOOL_GLYPH,
    AgentGrid,
)
from swarm_tui.ui.widgets.grid.cells import CACHED_GLYPH
from swarm_tui.ui.widgets.panels.endpoint_rows import endpoint_lines
from swarm_tui.ui.widgets.panels.text_panel import TextPanel
from swarm_tui.view.agents import AgentFacts
from swarm_tui.view.family import per_level
from swarm_tui.view.liveness import reason_counts

if TYPE_CHECKING:
    from swarm_tui.frontend.source import RunSource
    from swarm_tui.view.figures import QualityView

SPARK_BARS = "▁▂▃▄▅▆▇█"
"""The judge's sparkline: one bar a score, on the fixed 1-10 scale (a fall shows as a fall)."""
LEGEND: tuple[tuple[TaskState, int], ...] = (
    (TaskState.SUCCEEDED, 0),
    (TaskState.FAILED, 0),
    (TaskState.RUNNING, 2),
    (TaskState.RETRYING, 3),
    (TaskState.QUEUED, 3),
    (TaskState.CANCELLED, 4),
)
"""The legend's states in the order shown, with their ranks: the results first."""
LABEL_WIDTH = 9
"""The longest state label ("cancelled", "in tools")."""
ENDPOINT_RANK = 5
"""A routed run's endpoint rows: kept with the error counts, after the limits and the legend's results."""

Line = tuple[int, Text]


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
        notes: Sequence[tuple[int, str]] = (),
        max_lines: int | None = None,
        follow: str | None = None,
    ) -> None:
        """`notes`: ranked lines under the phase (an attached view: who drives the run, how to resume it);
        the phase, its detail and the notes wrap to the panel's width rather than lose their ends.
        The judge's scores (a run with a judge) show once an answer is judged; the agents' facts,
        the rate limits and the scores are the run view's (`source.view`). `max_lines`: the rows
        the panel has without squeezing the error log and the footer (the grid's). `follow`: what
        the grid's cursor follows ("active", "failed"), if anything."""
        self._style = self.get_component_rich_style
        self._dim = self._style("run-panel--dim")
        self._bad = self._style("run-panel--bad")
        width = self.content_size.width
        lines: list[Line] = []
        lines += self._status(phase, detail, notes)
        lines.append((8, self._run_name(source)))
        digits = len(str(len(source.states)))
        counts = Counter(source.states.values())
        lines += self._legend(source, grid, digits, width, Counter(counts))
        lines += self._reasons(source, counts, width)
        quality = source.view.figures.quality
        if quality.judged:
            lines += self._judge_lines(quality, grid, digits, width)
        endpoints = source.view.endpoints
        rate_limits = source.view.figures.rate_limits
        if endpoints.routed and rate_limits == (None, None):  # a route's: its doors' added up
            rate_limits = endpoints.summed_limits()
        lines += self._figures(source, rate_limits, width)
        now = time.time() if source.running else None  # a run that ended: its rates as of its end
        doors = endpoint_lines(endpoints, now, width, dim=self._dim, bad=self._bad)
        headers = {len(lines): len(doors) - 1} if doors else {}
        lines += [(ENDPOINT_RANK, line) for line in doors]
        if grid.heat:
            lines += self._heat_scale(grid)
        lines += self._where(source, grid, follow)
        self.show(self._fitted(lines, max_lines, headers))

    # ----------------------------------------------------------------- the lines

    def _status(self, phase: str, detail: str, notes: Sequence[tuple[int, str]]) -> list[Line]:
        """The phase and its detail, then the notes, wrapped: the phase's lines stay, the notes
        (who drives an attached view, how to resume it) right after."""
        paused = phase in ("PAUSED", "STOPPING", "SUSPENDED")
        bad = phase in ("ABORTED", "CRASHED", "NOT RUNNING", "STOPPED")
        style = "run-panel--paused" if paused else "run-panel--bad" if bad else "run-panel--title"
        status = Text()
        status.append(phase, self._style(style))
        status.append(f" {detail}" if detail else "", self._dim)
        lines = [(0, line) for line in self._wrapped(status)]
        for rank, note in notes:
            lines += [(rank, line) for line in self._wrapped(Text(note, self._dim))]
        return lines

    def _run_name(self, source: RunSource) -> Text:
        run_name = source.run_dir.name
        named = run_name if source.job_name in run_name else f"{source.job_name} · run {run_name}"
        return Text(f"run {named}" if named == run_name else named, self._dim)

    def _legend(
        self, source: RunSource, grid: AgentGrid, digits: int, width: int, counts: Counter[TaskState]
    ) -> list[Line]:
        """A count per state, each beside a swatch of its cell (colour and glyph); multi-step
        agents split running into thinking and in their tools, a batch lane's lines apart; with
        `--cache`, the done answers replayed from the cache (of the done: they are results)."""
        labels = dict(STATE_LABELS)
        entries: list[tuple[int, Text]] = []
        facts = source.view.agents
        if facts.stepping:  # multi-step agents: a running one thinks, or runs its tools (their own entry)
            labels[TaskState.RUNNING] = "thinking"
            counts[TaskState.RUNNING] = max(0, counts[TaskState.RUNNING] - facts.in_tools)
        if facts.batching:  # running: live calls; the lines waiting in batches have their own entry
            counts[TaskState.RUNNING] = max(0, counts[TaskState.RUNNING] - facts.in_batch)
        for state, rank in LEGEND:
            entry = Text()
            if grid.heat and state is TaskState.SUCCEEDED:
                for level in range(1, 6):
                    entry.append(" ", grid.heat_style(level))
                entry.append(f"{counts[state]:>{digits}} done")
            else:
                entry.append(f"{GLYPHS[state]} ", grid.state_style(state))
                entry.append(f" {counts[state]:>{digits}} ")
                entry.append(labels[state], self._bad if state is TaskState.FAILED and counts[state] else "")
            entries.append((rank, entry))
        if facts.stepping:
            entry = Text()
            entry.append(f"{TOOL_GLYPH} ", grid.tool_style())
            entry.append(f" {facts.in_tools:>{digits}} in tools")
            entries.insert(3, (2, entry))
        if facts.batching:
            entry = Text()
            entry.append(f"{BATCH_GLYPH} ", grid.batch_style())
            entry.append(f" {facts.in_batch:>{digits}} in batch")
            entries.insert(3, (2, entry))
        if facts.caching:  # last: the rows above stay as they are without a cache
            entry = Text()
            entry.append(f"{CACHED_GLYPH} ", grid.cached_style())
            entry.append(f" {facts.from_cache:>{digits}} cached")
            entries.append((1, entry))
        column = 2 + 1 + digits + 1 + LABEL_WIDTH
        lines: list[Line] = []
        if not width or 2 * column + 1 <= width:  # two entries a row
            for n in range(0, len(entries), 2):
                pair = entries[n : n + 2]
                line = Text()
                for m, (_, entry) in enumerate(pair):
                    if m:
                        line.append(" " * max(1, column + 1 - pair[0][1].cell_len))
                    line.append_text(entry)
                lines.append((min(rank for rank, _ in pair), line))
        else:
            lines = entries
        if facts.stepping:  # and how a cell tells it: a sample cell, as the grid draws it now
            sample = Text()
            sample.append(*grid.cell_sample(6, 3, in_tools=True))
            where = " agent 7, step 3" if grid.step_beside_number else "" if grid.compact else " step 3"
            sample.append(f"{where}: in its tools", self._dim)
            lines.append((6, sample))
        return lines

    def _reasons(self, source: RunSource, counts: Counter[TaskState], width: int) -> list[Line]:
        """The agents not done counted by why: `12 waiting: RPM · 3 streaming · 1 silent 40s`, the
        silent ones in the error colour (kept with the legend's running counts)."""
        facts = source.view.agents
        reasons = reason_counts(
            source.view.liveness, counts, source.stats.in_flight_tasks, facts.in_tools, facts.in_batch, time.time()
        )
        if not reasons or not source.running:
            return []
        line = Text()
        for n, (code, count, words) in enumerate(reasons):
            if n:
                line.append(" · ", self._dim)
            line.append(f"{count:,} {words}", self._bad if code == "silent" else "")
        return [(6, wrapped) for wrapped in self._wrapped(line)]

    def _figures(self, source: RunSource, rate_limits: tuple[int | None, int | None], width: int) -> list[Line]:
        """Two numbers, two names: the adaptive limit (what may be in flight now) and the
        ceiling `+`/`-` set, under which the limit adapts, with the calls already out when the
        limit was lowered below them (they finish; nothing new goes out until under it); the
        provider's limits; the calls."""
        dim, bad = self._dim, self._bad
        stats = source.stats
        limits = Text()
        limits.append("limit ", dim)
        limits.append(f"{source.limit}")
        if source.in_flight_known and stats.in_flight_tasks > source.limit:
            limits.append(f" ({stats.in_flight_tasks} in flight, lowered)", dim)
        limits.append(" · ceiling ", dim)
        limits.append(f"{source.ceiling}")
        rpm, tpm = rate_limits
        rates = Text()
        rates.append("rpm ", dim)
        rates.append(fmt.si(rpm, 5).strip() if rpm else "-")
        rates.append(" tpm ", dim)
        rates.append(fmt.si(tpm, 5).strip() if tpm else "-")
        lines: list[Line] = []
        if not width or limits.cell_len + 2 + rates.cell_len <= width:
            limits.append("  ")
            limits.append_text(rates)
            lines.append((4, limits))
        else:
            lines += [(4, limits), (7, rates)]
        calls = Text()
        calls.append("calls ", dim)
        calls.append(f"{stats.sent}")
        calls.append(" sent, ", dim)
        calls.append(f"{stats.retried}")
        calls.append(" retried", dim)
        lines.append((6, calls))
        errors = Text()
        for label, value in (("429s ", stats.rate_limited), ("  5xx ", stats.server_errors)):
            errors.append(label, dim)
            errors.append(f"{value}", bad if value else "")
        errors.append("  timeouts " if not width or width >= 28 else "  t/o ", dim)
        errors.append(f"{stats.timeouts}", bad if stats.timeouts else "")
        lines.append((5, errors))
        straggler_s = source.straggler_s
        if straggler_s is not None:  # the backup deadline (docs: deadlines and backups)
            cut = f" · cut {straggler_s:.1f}s"
            if not width or errors.cell_len + len(cut) <= width:
                errors.append(cut, dim)
            else:
                lines.append((8, Text(f"straggler cut {straggler_s:.1f}s", dim)))
        if stats.steps or stats.tool_calls:  # multi-step agents: their steps, tools and critical path
            agents = Text()
            agents.append("steps ", dim)
            agents.append(f"{stats.steps}")
            agents.append("  tools ", dim)
            agents.append(f"{stats.tool_calls}")
            if stats.tool_errors:
                agents.append(f" ({stats.tool_errors} failed)", bad)
            agents.append("  path ", dim)
            agents.append(f"{stats.critical_path}")
            lines.append((5, agents))
        family = source.view.family
        if family.spawning:  # an orchestrator's: its agents per level, and the critical path beside the time taken
            levels = Text()
            levels.append("levels ", dim)
            levels.append(per_level(family.levels(len(source.states))))
            lines.append((3, levels))
            path = family.critical_path()
            if path is not None:
                line = Text()
                line.append("critical ", dim)
                line.append(f"{_seconds(path.seconds)} ({path.calls} calls)")
                line.append(" · took " if not width or width >= 36 else " · ", dim)
                line.append(_seconds(stats.elapsed_s))
                lines.append((3, line))
        return lines

    def _where(self, source: RunSource, grid: AgentGrid, follow: str | None) -> list[Line]:
        """Which agents the grid shows when it scrolls, what it follows, and the agent under
        the cursor with what its keys do."""
        dim = self._dim
        lines: list[Line] = []
        shown = grid.visible_range()
        width = self.content_size.width
        follow_key = key_hint(self.app, type(self.app), "app.follow")
        if shown is not None:
            line = Text()
            first, last = (grid.index_at(p) + 1 for p in shown)
            line.append(f"agents {first}–{last} of {grid.count}", "bold")
            hint = f" · {follow_key} follow"
            if not follow and (not width or line.cell_len + len(hint) <= width):
                line.append(hint, dim)
            lines.append((1, line))
        if follow:
            lines.append((1, Text(f"following {follow} agents ({follow_key}: next)", self._style("run-panel--paused"))))
        index = grid.cursor_index
        if index is None:
            return lines
        state = source.states.get(index, TaskState.QUEUED)
        cursor = Text()
        facts = source.view.agents
        cursor.append(f"▸ agent {index + 1}: {self._agent_state(facts, index, state)}", "bold")
        parent = source.view.family.parent.get(index)
        if parent is not None:  # a spawned agent: whose, and how deep
            cursor.append(f" (of {parent + 1}, depth {source.view.family.depth_of(index)})", dim)
        score = facts.score_of(index) if state is TaskState.SUCCEEDED else None
        if score is not None:
            cursor.append(f", judged {score:g}", self._style("run-panel--paused") if score <= LOW_SCORE else "bold")
        open_key = key_hint(self.app, AgentGrid, "grid.open")
        retry = f"  {key_hint(self.app, type(self.app), 'app.retry_agent')}: retry" if state is TaskState.FAILED else ""
        hint = f"  {open_key}: detail{retry}"
        if not width or cursor.cell_len + len(hint) <= width:
            cursor.append(hint, dim)
        lines.append((1, cursor))
        if source.running and not state.is_final:  # why it is where it is (the detail says it in full)
            why = why_of(source, index, state, time.time())
            text = Text(f"  why: {why.text}", dim)
            if width and text.cell_len > width:
                text.truncate(width, overflow="ellipsis")
            lines.append((7, text))
        return lines

    @staticmethod
    def _agent_state(facts: AgentFacts, index: int, state: TaskState) -> str:
        """The state of the agent under the cursor; for a multi-step agent, its step and what it does."""
        step = facts.step_of(index) if state in (TaskState.RUNNING, TaskState.RETRYING) else None
        if step is None:
            return STATE_LABELS[state]
        number, tools = step
        if state is TaskState.RETRYING:
            return f"retrying, step {number}"
        if tools is None:
            return f"step {number}, thinking"
        return f"step {number}, in {', '.join(dict.fromkeys(tools)) or 'its tools'}"

    def _judge_lines(self, quality: QualityView, grid: AgentGrid, digits: int, width: int) -> list[Line]:
        """The judge, in three lines: how its cells look in the grid (a legend row, with counts),
        the rolling score and its baseline with a sparkline of the recent scores, and the last
        drift with what was done about it. The score stays longest, then the drift."""
        dim, warn = self._dim, self._style("run-panel--paused")
        low = sum(1 for score, _ in quality.judged.values() if score <= LOW_SCORE)
        legend = Text()
        legend.append(f"{GLYPHS[TaskState.SUCCEEDED]} ", grid.judged_style())
        legend.append(f" {len(quality.judged):>{digits}} {'judged':<{LABEL_WIDTH}} ")
        legend.append(f"{LOW_GLYPH} ", grid.low_score_style())
        legend.append(f" {low:>{digits}} ")
        legend.append(f"scored ≤{LOW_SCORE:g}", warn if low else "")
        lines: list[Line] = [(5, legend)]
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
        lines.append((2, line))
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
            lines.append((3, line))
        return lines

    def _heat_scale(self, grid: AgentGrid) -> list[Line]:
        """The heat view's key: its five colours, fast to slow, with the latencies between them
        (one-column swatches in a narrow panel)."""
        bounds = grid.heat_bounds
        if not bounds:
            return [(1, Text("heat: no finished call yet", self._dim))]
        narrow = 0 < self.content_size.width < 32
        swatch, pad = (" ", "") if narrow else ("  ", " ")
        scale = Text()
        for level in range(1, 6):
            scale.append(swatch, grid.heat_style(level))
            if level <= len(bounds):
                scale.append(f"{pad}{bounds[level - 1]:.0f} ")
        title = "heat ms, fast → slow" if narrow else "heat: latency, fast → slow (ms)"
        return [(1, Text(title, self._dim)), (1, scale)]

    # ----------------------------------------------------------------- fitting

    @staticmethod
    def _fitted(lines: list[Line], max_lines: int | None, headers: Mapping[int, int] | None = None) -> Text:
        """The lines that fit in `max_lines`, in their order: the highest ranks go first (of equal
        ranks, the later). `headers`: the position of a header and how many rows follow it; a
        header whose rows all went goes too."""
        kept = list(range(len(lines)))
        if max_lines is not None:
            while len(kept) > max(1, max_lines):
                worst = max(kept, key=lambda n: (lines[n][0], n))
                kept.remove(worst)
        for header, rows in (headers or {}).items():
            if header in kept and not any(header + n in kept for n in range(1, rows + 1)):
                kept.remove(header)
        text = Text(no_wrap=True, overflow="ellipsis")
        for n, position in enumerate(kept):
            if n:
                text.append("\n")
            text.append_text(lines[position][1])
        return text

    def _wrapped(self, text: Text) -> list[Text]:
        """`text` folded at word boundaries to the panel's width (whole before the first layout)."""
        width = self.content_size.width
        if width <= 0:
            return [text]
        return list(text.wrap(self.app.console, width, overflow="fold"))


def _seconds(seconds: float) -> str:
    """A span of the run: tenths of a second under a minute (a simulated swarm's), else mm:ss."""
    return f"{seconds:.1f}s" if seconds < 60 else fmt.duration(seconds)
