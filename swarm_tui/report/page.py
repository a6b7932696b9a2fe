"""The report as one HTML file: its own styles, its charts inline (SVG), nothing fetched from a
network, so it opens anywhere (a mail attachment, a ticket, an air-gapped laptop).

Every figure that summary.json also has is written with `data-figure` (its path in summary.json,
`latency_ms.p95`) and `data-value` (the number itself): a reader sees it formatted, a script (or a
test, in a real browser) reads it back and finds it equal to the file's.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from html import escape
from typing import Any

from swarm_tui.report.facts import AgentLine, RunReport

__all__ = ["render_page"]

CSS = """
:root { color-scheme: light; --ink: #1d2330; --muted: #5f6672; --line: #e3e5e8; --accent: #3b6fb6; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       margin: 0; background: #f6f7f9; }
main { max-width: 1040px; margin: 0 auto; padding: 24px 28px 48px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 32px 0 8px; padding-top: 8px; border-top: 1px solid var(--line); }
.sub { color: var(--muted); margin: 0 0 16px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600;
         vertical-align: middle; margin-left: 8px; color: #fff; }
.finished { background: #2e9d5b; } .running { background: #3b6fb6; } .stopped { background: #e08a1e; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 8px; margin: 12px 0; }
.figure { border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; }
.figure .label { color: var(--muted); font-size: 12px; }
.figure .value { font-size: 18px; font-weight: 600; font-variant-numeric: tabular-nums; }
.chart svg { width: 100%; height: auto; display: block; }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin: 6px 0 12px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, monospace; background: #f1f3f5; padding: 1px 4px;
       border-radius: 3px; }
.message { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; word-break: break-word; }
.note { color: var(--muted); font-size: 12.5px; }
footer { margin-top: 36px; color: var(--muted); font-size: 12px; }
"""


def render_page(report: RunReport, charts: dict[str, str | None], version: str) -> str:
    """The whole HTML document."""
    s = report.summary
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>swarm-tui report: {escape(report.name)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        f'<h1>{escape(report.name)}<span class="badge {report.status}" id="status">{report.status}</span></h1>',
        f'<p class="sub">{_status_line(report)}</p>',
        "<h2>At a glance</h2>",
        _figures(s),
        _chart(charts, "timeline", "Throughput", _timeline_note(report)),
        _chart(charts, "limits", "Pacing", None),
        _chart(charts, "latency", "Latency", None),
        _endpoint_table(report),
        _chart(charts, "cost_time", "Cost", None),
        _chart(charts, "cost_split", "", _cost_note(s)),
        _errors(report, charts),
        _chart(charts, "scores", "Quality", None),
        _agents("The slowest agents", report.slowest, "slowest", took=True),
        _failed(report),
        _settings(report),
        _footer(report, version),
        "</main></body></html>",
    ]
    return "\n".join(part for part in parts if part)


def _status_line(report: RunReport) -> str:
    made = datetime.datetime.fromtimestamp(report.made_at).strftime("%Y-%m-%d %H:%M:%S")
    what = {
        "finished": "finished",
        "running": f"running: a snapshot as of {made}",
        "stopped": "stopped with work left",
    }[report.status]
    source = f" · job <code>{escape(report.source)}</code>" if report.source else ""
    return f"Run <code>{escape(str(report.run_dir))}</code>{source} · {what}"


def _figure(label: str, key: str, value: Any, shown: str) -> str:
    data = "" if value is None else f' data-value="{escape(str(value))}"'
    return (
        f'<div class="figure"><div class="label">{escape(label)}</div>'
        f'<div class="value" data-figure="{key}"{data}>{escape(shown)}</div></div>'
    )


def _figures(s: dict[str, Any]) -> str:
    latency = s.get("latency_ms") or {}
    tokens = s.get("tokens") or {}
    requests = s.get("requests") or {}
    cost = s.get("cost_usd")
    items = [
        _figure("tasks", "total", s["total"], f"{s['total']:,}"),
        _figure("succeeded", "succeeded", s["succeeded"], f"{s['succeeded']:,}"),
        _figure("failed", "failed", s["failed"], f"{s['failed']:,}"),
        _figure("unfinished", "unfinished", s["unfinished"], f"{s['unfinished']:,}"),
        _figure("time", "makespan_s", s.get("makespan_s"), _duration(s.get("makespan_s"))),
        _figure("cost", "cost_usd", cost, f"${cost:,.4f}" if cost is not None else "price unknown"),
    ]
    for name in ("p50", "p95", "p99"):
        value = latency.get(name)
        items.append(_figure(f"latency {name}", f"latency_ms.{name}", value, _ms(value)))
    items += [
        _figure("requests sent", "requests.sent", requests.get("sent"), f"{requests.get('sent', 0):,}"),
        _figure("retried", "requests.retried", requests.get("retried"), f"{requests.get('retried', 0):,}"),
        _figure("429s", "requests.rate_limited", requests.get("rate_limited"), f"{requests.get('rate_limited', 0):,}"),
        _figure(
            "5xx", "requests.server_errors", requests.get("server_errors"), f"{requests.get('server_errors', 0):,}"
        ),
        _figure("timeouts", "requests.timeouts", requests.get("timeouts"), f"{requests.get('timeouts', 0):,}"),
        _figure("tokens in", "tokens.prompt", tokens.get("prompt"), f"{tokens.get('prompt', 0):,}"),
        _figure("tokens out", "tokens.completion", tokens.get("completion"), f"{tokens.get('completion', 0):,}"),
        _figure("cached", "tokens.cached", tokens.get("cached"), f"{tokens.get('cached', 0):,}"),
    ]
    return f'<div class="figures" id="figures">{"".join(items)}</div>'


def _chart(charts: dict[str, str | None], key: str, title: str, note: str | None) -> str:
    svg = charts.get(key)
    if svg is None:
        return ""
    note_html = f'<p class="note">{note}</p>' if note else ""
    heading = f"<h2>{escape(title)}</h2>" if title else ""
    return f'{heading}<div class="chart" id="chart-{key}">{svg}</div>{note_html}'


def _timeline_note(report: RunReport) -> str | None:
    timeline = report.timeline
    if timeline is None:
        return None
    return (
        f"Each point is {timeline.width_s:g} s of the run. Requests are calls that ended (summary.json's "
        "<code>requests.sent</code>); answers are tasks answered; 429s and errors are the calls refused or failed."
    )


def _cost_note(s: dict[str, Any]) -> str | None:
    details = s.get("cost_breakdown") or {}
    if not details:
        return None
    return (
        f"Input ${details.get('input_usd', 0):.4f}, cached input ${details.get('cached_input_usd', 0):.4f}, "
        f"output ${details.get('output_usd', 0):.4f}; what retried, failed or lost calls cost: "
        f"${details.get('overhead_usd', 0):.4f}."
    )


def _endpoint_table(report: RunReport) -> str:
    if not report.routed:
        return ""
    rows = []
    for name, figures in sorted(report.endpoint_percentiles.items()):
        cells = "".join(
            f'<td class="num"{_endpoint_figure(name, p, figures.get(p))}>{_ms(figures.get(p))}</td>'
            for p in ("p50", "p95", "p99")
        )
        count = len(report.endpoint_latencies.get(name, []))
        rows.append(f'<tr><td>{escape(name)}</td><td class="num">{count:,}</td>{cells}</tr>')
    head = '<tr><th>endpoint</th><th class="num">answers</th><th class="num">p50</th><th class="num">p95</th>'
    return f'<table id="endpoints">{head}<th class="num">p99</th></tr>{"".join(rows)}</table>'


def _endpoint_figure(name: str, percentile: str, value: Any) -> str:
    """summary.json's place of an endpoint's figure (`endpoints.NAME.p95_ms`; it has no p99)."""
    if percentile == "p99" or value is None:
        return ""
    return f' data-figure="endpoints.{escape(name)}.{percentile}_ms" data-value="{value}"'


def _errors(report: RunReport, charts: dict[str, str | None]) -> str:
    if not report.errors:
        return "<h2>Errors</h2><p>No call failed.</p>"
    rows = []
    for name, count, examples in report.errors:
        shown = "".join(
            f'<div class="message">{_who(e.get("custom_id"), e.get("idx"))} call {e.get("number")}'
            f"{' · ' + str(e['status']) if e.get('status') else ''}: {_said(e.get('error_message'), 400)}"
            "</div>"
            for e in examples
        )
        rows.append(f'<tr><td>{escape(name)}</td><td class="num">{count:,}</td><td>{shown}</td></tr>')
    table = (
        f'<table id="errors"><tr><th>class</th><th class="num">calls</th><th>examples</th></tr>{"".join(rows)}</table>'
    )
    return _chart(charts, "errors", "Errors", None) + table


def _who(custom_id: Any, index: Any) -> str:
    if custom_id is None:
        return "a step of the swarm" if index is None or index < 0 else f"agent {index + 1}"
    return f"<code>{escape(str(custom_id))}</code>"


def _agents(title: str, agents: Iterable[AgentLine], key: str, *, took: bool) -> str:
    agents = list(agents)
    if not agents:
        return ""
    rows = []
    for agent in agents:
        attempts = "".join(
            f"<div>{a.get('number')}: {escape(str(a.get('outcome')))}"
            f"{' ' + escape(str(a['error_class'])) if a.get('error_class') else ''}"
            f"{' ' + str(a['status']) if a.get('status') else ''} · {_ms(a.get('latency_ms'))} · "
            f"{escape(str(a.get('endpoint')))}"
            f"{' · ' + _said(a['error_message'], 200) if a.get('error_message') else ''}</div>"
            for a in agent.attempts
        )
        took_cell = f'<td class="num">{agent.took_s:,.2f} s</td>' if took and agent.took_s is not None else ""
        rows.append(
            f"<tr><td>{agent.index + 1}</td><td><code>{escape(agent.custom_id)}</code></td>{took_cell}"
            f'<td class="message">{attempts}</td></tr>'
        )
    took_head = '<th class="num">first call to answer</th>' if took else ""
    return (
        f'<h2>{escape(title)}</h2><table id="{key}"><tr><th>agent</th><th>id</th>{took_head}<th>attempts '
        f"(number: outcome · latency · endpoint)</th></tr>{''.join(rows)}</table>"
    )


def _failed(report: RunReport) -> str:
    if not report.failed:
        return ""
    more = report.failed_total - len(report.failed)
    note = f'<p class="note">and {more:,} more (<code>errors.jsonl</code> lists every one)</p>' if more > 0 else ""
    return _agents(f"The failed agents ({report.failed_total:,})", report.failed, "failed", took=False) + note


def _settings(report: RunReport) -> str:
    rows = "".join(
        f'<tr><th>{escape(name)}</th><td class="message">{_said(value)}</td></tr>' for name, value in report.settings
    )
    if report.table:
        columns = ", ".join(c.get("name", "") for c in report.table.get("columns") or [])
        kind = escape(report.table.get("kind", ""))
        rows += f'<tr><th>table</th><td class="message">{kind}: {escape(columns)}</td></tr>'
    steps = "".join(
        f"<tr><th>{escape(what)}</th><td><code>{escape(command)}</code></td></tr>"
        for what, command in report.next_steps
    )
    return (
        f'<h2>The run\'s settings</h2><table id="settings">{rows}</table>'
        f'<h2>How to go on</h2><table id="next">{steps}</table>'
    )


def _footer(report: RunReport, version: str) -> str:
    made = datetime.datetime.fromtimestamp(report.made_at).strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"<footer>Made by swarm-tui {escape(version)} on {made} from "
        f"<code>{escape(str(report.run_dir / 'journal.sqlite'))}</code> (the run's journal, read-only). "
        "Every figure above is summary.json's; this file fetches nothing (web addresses in what the run "
        "said are shown without their scheme).</footer>"
    )


WEB_ADDRESS = re.compile(r"\b[a-z][a-z0-9+.-]*://", re.IGNORECASE)


def _said(text: Any, limit: int | None = None) -> str:
    """What the run or a provider said (an error message, an endpoint), as the page shows it: cut
    at `limit` characters, escaped, and each web address without its scheme (`platform.openai.com/
    account/rate-limits`): still read, but the file names no URL a mail filter or a browser would
    follow, and nothing in it points outside it."""
    shown = str(text or "")
    if limit is not None and len(shown) > limit:
        shown = shown[:limit] + "…"
    return escape(WEB_ADDRESS.sub("", shown))


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:,.1f} ms"


def _duration(seconds: Any) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:,.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"
