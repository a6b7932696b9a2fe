"""The report's charts: matplotlib figures saved as SVG whose labels stay text (searchable, read by
a browser's DOM), cleaned of anything that names a web address (the XML prologue, the doctype,
the metadata block and the namespace declarations an inline `<svg>` in HTML does not need).

matplotlib (the `report` extra) is imported here only, and only when a report is made; the
figures are drawn with its object API (`Figure`), never `pyplot`'s global state, so a report can
be made from the console's worker thread.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from swarm_tui.report.facts import RunReport, Step, Timeline

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["Charts", "require_matplotlib"]

BLUE, GREEN, RED, ORANGE, GREY, PURPLE = "#3b6fb6", "#2e9d5b", "#d1382f", "#e08a1e", "#8a8f98", "#7b4fb0"
PALETTE = (BLUE, GREEN, ORANGE, PURPLE, RED, GREY, "#1f9aa8", "#b5517d")
WIDE = (9.0, 3.2)


def require_matplotlib() -> None:
    """`ImportError` with the extra to install, before anything is read."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError("the report needs matplotlib: pip install 'swarm-tui[report]'") from None


class Charts:
    """Each chart of a report, as cleaned SVG text (None: nothing to draw)."""

    def __init__(self, report: RunReport) -> None:
        self.report = report
        span = report.timeline.bins * report.timeline.width_s if report.timeline else 0.0
        self.unit, self.per = ("h", 3600.0) if span > 3 * 3600 else ("min", 60.0) if span > 180 else ("s", 1.0)

    def all(self) -> dict[str, str | None]:
        import matplotlib

        with matplotlib.rc_context(
            {
                "svg.fonttype": "none",  # text stays text: labels and numbers a reader (and a test) can find
                "svg.hashsalt": "swarm-tui",  # the same run gives the same file
                "font.family": "sans-serif",
                "font.size": 9,
                "axes.spines.top": False,
                "axes.spines.right": False,
                "axes.titlesize": 10,
                "axes.titleweight": "bold",
                "axes.grid": True,
                "grid.color": "#e3e5e8",
                "grid.linewidth": 0.6,
                "legend.frameon": False,
                "legend.fontsize": 8,
            }
        ):
            return {
                "timeline": self.timeline(),
                "limits": self.limits(),
                "latency": self.latency(),
                "cost_time": self.cost_over_time(),
                "cost_split": self.cost_split(),
                "errors": self.errors(),
                "scores": self.scores(),
            }

    # ----------------------------------------------------------------- over time

    def _x(self, timeline: Timeline) -> list[float]:
        return [timeline.at(i) / self.per for i in range(timeline.bins)]

    def _time_axis(self, ax: Axes) -> None:
        ax.set_xlabel(f"time since the first call ({self.unit})")
        ax.set_xlim(left=0)

    def timeline(self) -> str | None:
        timeline = self.report.timeline
        if timeline is None:
            return None
        from matplotlib.figure import Figure

        fig = Figure(figsize=(9.0, 4.2), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1.3))
        x = self._x(timeline)
        rate = 1.0 / timeline.width_s
        top.plot(x, [n * rate for n in timeline.requests], color=BLUE, label="requests/s", linewidth=1.4)
        top.plot(x, [n * rate for n in timeline.answers], color=GREEN, label="answers/s", linewidth=1.4)
        top.set_ylabel("per second")
        top.set_ylim(bottom=0)
        top.legend(loc="upper right", ncols=2)
        top.set_title("Answers and requests over time")
        width = timeline.width_s / self.per * 0.9
        bottom.bar(x, timeline.rate_limited, width=width, color=RED, label="429s")
        bottom.bar(x, timeline.errors, width=width, bottom=timeline.rate_limited, color=ORANGE, label="errors")
        bottom.set_ylabel(f"per {_seconds(timeline.width_s)}")
        worst = max(a + b for a, b in zip(timeline.rate_limited, timeline.errors, strict=True))
        bottom.set_ylim(0, max(worst, 1) * 1.15)
        bottom.legend(loc="upper right", ncols=2)
        self._time_axis(bottom)
        return _svg(fig, "timeline")

    def limits(self) -> str | None:
        report = self.report
        if not report.limit and not report.rpm:
            return None
        from matplotlib.figure import Figure

        end = report.timeline.bins * report.timeline.width_s if report.timeline else 1.0
        fig = Figure(figsize=WIDE, layout="constrained")
        ax = fig.subplots()
        drawn = _steps(ax, report.limit, end, self.per, color=BLUE, label="in-flight limit")
        drawn |= _steps(ax, report.ceiling, end, self.per, color=GREY, label="ceiling", linestyle="--")
        if report.routed:
            for i, (name, steps) in enumerate(sorted(report.door_limits.items())):
                colour = PALETTE[(i + 2) % len(PALETTE)]
                drawn |= _steps(ax, steps, end, self.per, color=colour, label=f"{name} limit", linewidth=1.0)
        ax.set_ylabel("calls in flight")
        ax.set_ylim(0, _headroom(report.limit, report.ceiling, *report.door_limits.values()))
        rpm_known = any(step.value for step in report.rpm) or report.rpm_setting
        if rpm_known:
            right = ax.twinx()
            right.grid(False)
            right.spines["right"].set_visible(True)
            _steps(right, report.rpm, end, self.per, color=PURPLE, label="RPM learned", linewidth=1.2)
            if report.rpm_setting:
                right.axhline(report.rpm_setting, color=PURPLE, linestyle=":", label=f"--rpm {report.rpm_setting}")
            right.set_ylabel("requests per minute")
            setting = [Step(0.0, report.rpm_setting)] if report.rpm_setting else []
            right.set_ylim(0, _headroom(report.rpm, setting) * 1.25)  # its lines under the limit's
            handles, labels = ax.get_legend_handles_labels()
            more, names = right.get_legend_handles_labels()
            ax.legend(handles + more, labels + names, loc="lower right", ncols=3)
        elif drawn:
            ax.legend(loc="lower right", ncols=3)
        ax.set_title("The concurrency limit and the learned RPM")
        ax.set_xlim(0, end / self.per)
        ax.set_xlabel(f"time since the first call ({self.unit})")
        return _svg(fig, "limits")

    def cost_over_time(self) -> str | None:
        report, timeline = self.report, self.report.timeline
        if timeline is None or report.summary.get("cost_usd") is None:
            return None
        from matplotlib.figure import Figure

        fig = Figure(figsize=WIDE, layout="constrained")
        ax = fig.subplots()
        total, spent = 0.0, []
        for usd in timeline.cost_usd:
            total += usd
            spent.append(total)
        x = [(i + 1) * timeline.width_s / self.per for i in range(timeline.bins)]
        ax.fill_between([0.0, *x], [0.0, *spent], color=BLUE, alpha=0.15, linewidth=0)
        ax.plot([0.0, *x], [0.0, *spent], color=BLUE, label=f"spent: ${report.summary['cost_usd']:.4f}")
        if report.budget_usd:
            ax.axhline(report.budget_usd, color=RED, linestyle="--", label=f"budget ${report.budget_usd:.2f}")
        ax.set_ylabel("USD, cumulative")
        ax.set_ylim(bottom=0)
        ax.legend(loc="best")  # clear of the curve and of the budget line
        ax.set_title("Cost over time")
        self._time_axis(ax)
        return _svg(fig, "cost-time")

    # ----------------------------------------------------------------- distributions

    def latency(self) -> str | None:
        report = self.report
        if not report.latencies:
            return None
        from matplotlib.figure import Figure

        fig = Figure(figsize=WIDE, layout="constrained")
        ax = fig.subplots()
        low, high = report.latencies[0], report.latencies[-1]
        logarithmic = low > 0 and high / low > 30
        bins: Any = _log_bins(low, high) if logarithmic else 50
        if report.routed:
            for i, (name, values) in enumerate(sorted(report.endpoint_latencies.items())):
                ax.hist(values, bins=bins, histtype="step", linewidth=1.4, color=PALETTE[i % len(PALETTE)], label=name)
        else:
            ax.hist(report.latencies, bins=bins, color=BLUE, alpha=0.8)
        percentiles = report.summary.get("latency_ms") or {}
        top = ax.get_ylim()[1]
        for name, colour, height in (("p50", GREEN, 0.97), ("p95", ORANGE, 0.87), ("p99", RED, 0.77)):
            value = percentiles.get(name)
            if value is None:
                continue
            ax.axvline(value, color=colour, linestyle="--", linewidth=1.1)
            ax.text(value, top * height, f" {name} {value:,.1f} ms", color=colour, va="top", fontsize=8)
        if logarithmic:
            ax.set_xscale("log")
        ax.set_xlabel("latency of an answered call (ms)" + (", log scale" if logarithmic else ""))
        ax.set_ylabel("calls")
        if report.routed:  # beside the plot: its top right holds the percentiles' labels
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.set_title("Latency of the answered calls")
        return _svg(fig, "latency")

    def cost_split(self) -> str | None:
        details = self.report.summary.get("cost_breakdown") or {}
        if self.report.summary.get("cost_usd") is None or not details:
            return None
        parts = [
            ("by lane", details.get("by_lane") or {}),
            ("by endpoint", {k: v.get("cost_usd", 0.0) for k, v in (details.get("by_endpoint") or {}).items()}),
            ("by tier", details.get("by_tier") or {}),
        ]
        parts = [(title, {k: v for k, v in values.items() if v}) for title, values in parts]
        parts = [(title, values) for title, values in parts if values]
        if not parts:
            return None
        from matplotlib.figure import Figure

        fig = Figure(figsize=(9.0, 1.0 + 0.9 * max(len(v) for _, v in parts)), layout="constrained")
        axes = fig.subplots(1, len(parts), squeeze=False)[0]
        for ax, (title, values) in zip(axes, parts, strict=True):
            names = list(values)
            ax.barh(names, [values[n] for n in names], color=PALETTE[: len(names)])
            for y, name in enumerate(names):
                ax.text(values[name], y, f" ${values[name]:.4f}", va="center", fontsize=8)
            ax.set_title(f"Cost {title}")
            ax.invert_yaxis()
            ax.margins(x=0.45)
            ax.grid(axis="y", visible=False)
            ax.set_xlabel("USD")
        return _svg(fig, "cost-split")

    def errors(self) -> str | None:
        errors = self.report.errors
        if not errors:
            return None
        from matplotlib.figure import Figure

        fig = Figure(figsize=(9.0, 0.8 + 0.35 * len(errors)), layout="constrained")
        ax = fig.subplots()
        names = [name for name, _, _ in errors]
        counts = [count for _, count, _ in errors]
        colours = [RED if name == "rate_limit" else ORANGE for name in names]
        ax.barh(names, counts, color=colours)
        for y, count in enumerate(counts):
            ax.text(count, y, f" {count:,}", va="center", fontsize=8)
        ax.invert_yaxis()
        ax.margins(x=0.12)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("failed calls (all attempts)")
        ax.set_title("Errors by class")
        return _svg(fig, "errors")

    def scores(self) -> str | None:
        scores = self.report.scores
        if not scores:
            return None
        from matplotlib.figure import Figure

        rounds = sorted(scores)
        fig = Figure(figsize=WIDE, layout="constrained")
        ax = fig.subplots()
        ax.boxplot([scores[r] for r in rounds], tick_labels=[f"round {r}" for r in rounds], showmeans=True)
        for i, r in enumerate(rounds, start=1):
            mean = sum(scores[r]) / len(scores[r])
            ax.text(i, mean, f"  mean {mean:.2f} ({len(scores[r])})", fontsize=8, va="bottom")
        ax.set_ylabel("score")
        ax.set_title("The judge's scores by round")
        return _svg(fig, "scores")


def _steps(ax: Axes, steps: Sequence[Step], end_s: float, per: float, **style: Any) -> bool:
    """A step line of values that hold until the next step (a None: not drawn there)."""
    known = [step for step in steps if step.value is not None]
    if not known:
        return False
    xs: list[float] = []
    ys: list[float] = []
    for i, step in enumerate(steps):
        if step.value is None:
            continue
        until = steps[i + 1].at_s if i + 1 < len(steps) else end_s
        xs += [max(step.at_s, 0.0) / per, max(until, 0.0) / per]
        ys += [step.value, step.value]
    ax.plot(xs, ys, **style)
    return True


def _headroom(*series: Sequence[Step]) -> float:
    """The top of an axis: a fifth above the highest value drawn on it."""
    values = [step.value for steps in series for step in steps if step.value is not None]
    return max(values, default=1) * 1.2 or 1.0


def _log_bins(low: float, high: float, count: int = 50) -> list[float]:
    import math

    a, b = math.log10(low), math.log10(high)
    return [10 ** (a + (b - a) * i / count) for i in range(count + 1)]


def _seconds(width_s: float) -> str:
    if width_s >= 3600:
        return f"{width_s / 3600:g} h"
    if width_s >= 60:
        return f"{width_s / 60:g} min"
    return f"{width_s:g} s"


_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.DOTALL)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_NAMESPACES = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
_REFERENCE = re.compile(r'(href|clip-path)="(url\()?#([^")]+)')
"""A reference to an element of the same chart (a marker, a clip path): renamed as its id is."""


def _svg(fig: Figure, name: str) -> str:
    """The figure as inline SVG text: no prologue, metadata or namespaces (an `<svg>` in HTML needs
    none, and they are the only web addresses matplotlib writes), its ids prefixed by `name` so two
    charts on one page never share one."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = _METADATA.sub("", _PROLOGUE.sub("", buffer.getvalue(), count=1))
    text = _NAMESPACES.sub("", text)
    text = re.sub(r'id="([^"]+)"', lambda m: f'id="{name}-{m.group(1)}"', text)
    text = _REFERENCE.sub(lambda m: f'{m.group(1)}="{m.group(2) or ""}#{name}-{m.group(3)}', text)
    return re.sub(r'width="[\d.]+pt" height="[\d.]+pt"', 'width="100%"', text, count=1)
