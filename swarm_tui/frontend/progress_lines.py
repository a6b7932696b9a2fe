"""The headless run's log: what a long run says when nobody watches it. No Textual.

`nohup swarm-tui run ... --headless > big.log 2>&1 &` writes here. When stderr is not a terminal
the live line cannot be repainted, so the log gets instead:

* a progress line at a steady interval (`--log-every`, 5 s by default), stamped with the UTC
  time: `2026-12-01T10:00:05Z  126/400 done  2 failed  50 in flight  41.0 req/s  ETA 00:07  $0.0123`;
* one line for each state change, as it happens (the news of the run's `RunView`, worded by
  `progress.narrate`: paused, resumed, the ceiling moved, failover, drift, budget or error-rate
  stop, batches, rounds, the end).

`--log-format json` writes the same as one JSON object a line, with stable keys (`ts`, `event`
and the figures), for log shippers; it is JSON on a terminal too. On a terminal in text format
the live line is repainted in place, and the state changes are printed above it.

Progress lines are due on a fixed grid (start + k x interval), checked several times a second,
so they neither drift nor bunch up when the event loop is busy; a tick that finds several due
writes one.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from swarm_tui.core.events import EngineEvent, TaskState
from swarm_tui.engine.stats import RunStats
from swarm_tui.view.liveness import counts_line, reason_counts
from swarm_tui.view.news import News, SessionPace
from swarm_tui.view.run_view import RunView

LOG_FORMATS = ("text", "json")
PLAIN_REASONS = frozenset({"queued", "answer"})
"""Reasons the line's own counts already say (tasks queued, calls in flight): no `why` for them alone."""
DEFAULT_EVERY_S = 5.0
TICK_S = 0.25
"""How often the writer looks at the clock (a terminal's live line repaints as often)."""


def utc_stamp(epoch: float) -> str:
    """`2026-12-01T10:00:05Z`: sortable, the same in every time zone."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def clock_text(seconds: float | None) -> str:
    """`mm:ss` or `h:mm:ss`; `--:--` when unknown."""
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


class ProgressLines:
    """Writes the run's progress and news to `stream`; the engine's listener (`observe`) and a
    ticker (`tick`) feed it. `live`: the stream is a terminal (text: one line repainted in place)."""

    def __init__(
        self,
        stream: TextIO,
        stats: RunStats,
        *,
        log_format: str = "text",
        every_s: float = DEFAULT_EVERY_S,
        live: bool = False,
        bell: bool = False,
        waiting: Callable[[], str] = lambda: "",
        wall_clock: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
        states: Mapping[int, TaskState] | None = None,
    ) -> None:
        """`waiting`: why nothing is sent now (a provider's Retry-After), or ''. `bell`: ring the
        terminal's bell on a stop, a drift, a failover and the end (on a terminal only: a log file
        gets no control characters). `states`: the engine's task states, which its view reads
        (None: the view keeps a board of its own)."""
        if log_format not in LOG_FORMATS:
            raise ValueError(f"log format {log_format!r} (known: {', '.join(LOG_FORMATS)})")
        self.stream = stream
        self.stats = stats
        self.json = log_format == "json"
        self.every_s = every_s
        self.live = live and not self.json
        self.bell = bell and live
        self.waiting = waiting
        self.wall_clock = wall_clock
        self.clock = clock
        self.view = RunView(states=states, stats=stats, screen=False)
        """The run as its events tell it (its pace, its round, its pause): the figures of its lines."""
        self.started_at = clock()
        self._due = self.started_at + every_s
        self._painted = False
        self.lines_written = 0

    # ----------------------------------------------------------------- inputs

    def observe(self, event: EngineEvent) -> None:
        """The engine's listener: a line for each state change, when it happens."""
        news = self.view.tell(event)
        if news is not None:
            self.news(news)

    def tick(self, now: float | None = None) -> bool:
        """Write the progress line if it is due (`now`: the monotonic clock); True if written."""
        now = self.clock() if now is None else now
        if self.live:
            self._paint()
            return True
        if now < self._due:
            return False
        missed = int((now - self._due) // self.every_s)  # a busy loop: one line, not a burst
        self._due += (missed + 1) * self.every_s
        self.progress()
        return True

    # ----------------------------------------------------------------- lines

    def fields(self) -> dict[str, Any]:
        """The progress line's figures, under the JSON log's stable keys."""
        view = self.view
        return progress_fields(
            self.stats,
            pace=view.pace,
            paused=view.figures.paused,
            round_=view.phases.round,
            waiting=self.waiting(),
            reasons=self.reasons(),
        )

    def reasons(self) -> list[tuple[str, int, str]]:
        """The agents not done, counted by why (`view.liveness.reason_counts`)."""
        view = self.view
        counts = Counter(view.states.values())
        stats = self.stats
        return reason_counts(view.liveness, counts, stats.in_flight_tasks, 0, stats.batch_waiting, self.wall_clock())

    def progress(self) -> None:
        """One progress line, now."""
        fields = self.fields()
        if self.json:
            self._write_json("progress", fields)
        else:
            self._write_line(progress_text(fields))

    def news(self, news: News) -> None:
        if news.alert:
            self.ring()
        if self.json:
            self._write_json(news.kind, {"message": news.text, "level": news.level, **news.fields})
        else:
            self._write_line(news.text)

    def say(self, kind: str, text: str, **fields: Any) -> None:
        """A line of the front end's own (the start, the end)."""
        self.news(News(kind, text, fields=fields))

    def ring(self) -> None:
        if self.bell:
            self.stream.write("\a")

    def finish(self) -> None:
        """The run is over: the live line is cleared (the summary follows), the bell rung if asked."""
        self.ring()
        if self._painted:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._painted = False

    # ----------------------------------------------------------------- writing

    def _stamp(self) -> str:
        return utc_stamp(self.wall_clock())

    def _write_line(self, text: str) -> None:
        if self.live:  # above the live line, which is painted again at the next tick
            self.stream.write(f"\r\033[K{text}\n")
            self._painted = False
        else:
            self.stream.write(f"{self._stamp()}  {text}\n")
        self.stream.flush()
        self.lines_written += 1

    def _write_json(self, kind: str, fields: dict[str, Any]) -> None:
        record = {"ts": self._stamp(), "event": kind, **fields}
        self.stream.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.stream.flush()
        self.lines_written += 1

    def _paint(self) -> None:
        self.stream.write("\r\033[K" + progress_text(self.fields()))
        self.stream.flush()
        self._painted = True


def progress_fields(
    stats: RunStats,
    *,
    pace: SessionPace | None = None,
    paused: bool = False,
    round_: tuple[int, int] | None = None,
    waiting: str = "",
    reasons: list[tuple[str, int, str]] | None = None,
) -> dict[str, Any]:
    """The progress line's figures, under the JSON log's stable keys. `pace`: the ETA at this
    session's pace (without it, the run's); `round_`: the round a multi-round swarm is on;
    `reasons`: the agents not done counted by why (`view.liveness.reason_counts`): `why` (their
    words, `12 waiting: RPM · 3 streaming`) and `reasons` (code: count)."""
    req_s, tok_s = stats.rates()
    p95 = stats.percentile(0.95)
    eta = pace.eta_s() if pace is not None else stats.eta_s()
    fields: dict[str, Any] = {
        "done": stats.succeeded,
        "total": stats.total,
        "failed": stats.failed,
        "in_flight": stats.in_flight,
        "req_s": round(req_s, 1),
        "tok_s": round(tok_s, 1),
        "p95_ms": round(p95, 1) if p95 is not None else None,
        "eta_s": None if paused else _rounded(eta),
        "cost_usd": round(stats.cost_usd, 6) if stats.cost_known else None,
        "paused": paused,
    }
    if round_ is not None:
        fields["round"], fields["rounds"] = round_
    if stats.batch_sent:
        fields["batch_waiting"] = stats.batch_waiting
    if waiting:
        fields["waiting"] = waiting
    if reasons and any(code not in PLAIN_REASONS for code, _, _ in reasons):  # something to say beyond the counts
        fields["reasons"] = {code: count for code, count, _ in reasons}
        fields["why"] = counts_line(reasons)
    return fields


def progress_text(f: dict[str, Any]) -> str:
    """The line of `progress_fields`: `126/400 done  2 failed  50 in flight  41.0 req/s  ETA 00:07  $0.0123`."""
    cost = f"${f['cost_usd']:.4f}" if f["cost_usd"] is not None else "price unknown"
    parts = [f"round {f['round']}/{f['rounds']}"] if "round" in f else []
    parts += [
        f"{f['done']}/{f['total']} done",
        f"{f['failed']} failed",
        f"{f['in_flight']} in flight",
        f"{f['req_s']:.1f} req/s",
        "PAUSED" if f["paused"] else f"ETA {clock_text(f['eta_s'])}",
        cost,
    ]
    if "batch_waiting" in f:
        parts.append(f"batch {f['batch_waiting']:,} waiting")
    if "waiting" in f:
        parts.append(f["waiting"])
    if "why" in f:
        parts.append(f["why"])
    return "  ".join(parts)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
