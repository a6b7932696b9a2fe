"""A shadow report rendered for people and written to disk: the one-line progress of a live run,
the side-by-side table with the rule and the verdict, shadow.json (written atomically), and
`safe_url`, which keeps credentials (user info, query string) out of every URL a report shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse, urlunparse

from swarm_tui.shadow.verdict import EndpointReport, ShadowReport, verdict_meaning


def safe_url(url: str) -> str:
    """The URL without user info or query string (either may carry a credential)."""
    parsed = urlparse(url)
    netloc = parsed.hostname or ""
    if parsed.port:
        netloc += f":{parsed.port}"
    return urlunparse((parsed.scheme, netloc, parsed.path, "", "", ""))


def progress_line(report: ShadowReport) -> str:
    p, s = report.primary, report.secondary

    def side(r: EndpointReport) -> str:
        p95 = r.latency_ms["p95"]
        err = f"{r.error_rate:.1%}" if r.error_rate is not None else "-"
        return f"{r.requests} req p95 {f'{p95:.0f}ms' if p95 is not None else '-'} err {err}"

    ratio = f"{report.p95_ratio:.2f}" if report.p95_ratio is not None else "-"
    ja = report.judged_agreement
    judged = (
        f"judge better p/=/s {ja['primary_better']}/{ja['equal']}/{ja['secondary_better']}  " if ja is not None else ""
    )
    return (
        f"shadow {report.elapsed_s:5.1f}s/{report.settings['duration_s']:g}s  primary (judged) {side(p)}  "
        f"secondary (baseline) {side(s)}  p95 ratio {ratio} (max {report.settings['threshold']:g})  "
        f"{judged}-> {report.verdict}"
    )


def format_report(report: ShadowReport) -> str:
    """The report for people: the side-by-side table, agreement, the rule it was judged by, the verdict."""
    lines = _table(report.primary, report.secondary)
    ag = report.agreement
    if ag["compared"]:
        json_part = (
            f"JSON-equal {ag['json_equal']}/{ag['json_comparable']}"
            if ag["json_comparable"]
            else "JSON-equal n/a (no JSON answers)"
        )
        lines.append(
            f"agreement over {ag['compared']} answered pairs: exact {ag['exact_share']:.0%}, {json_part}, "
            f"length ratio median {ag['length_ratio']['median']}"
        )
    else:
        lines.append("agreement: no pair where both endpoints answered")
    lines += judged_lines(report)
    paired = report.paired["primary_latency_ms"]["p95"]
    if paired is not None:
        lines.append(f"primary p95 on the mirrored requests only: {paired:.0f} ms")
    lines += _rule_lines(report)
    return "\n".join(lines)


def _table(p: EndpointReport, s: EndpointReport) -> list[str]:
    """The primary and the secondary side by side, one figure a row, columns aligned."""

    def ms(value: float | None) -> str:
        return f"{value:.0f} ms" if value is not None else "-"

    def errors(r: EndpointReport) -> str:
        if r.error_rate is None:
            return "-"
        detail = ", ".join(f"{k} {v}" for k, v in sorted(r.errors.items()))
        return f"{r.failed} ({r.error_rate:.1%})" + (f": {detail}" if detail else "")

    rows = [
        ("", f"primary {p.name} (judged)", f"secondary {s.name} (baseline)"),
        (
            "endpoint",
            p.base_url + (" SIMULATED" if p.simulated else ""),
            s.base_url + (" SIMULATED" if s.simulated else ""),
        ),
        ("model", str(p.model), str(s.model)),
        ("requests", str(p.requests), f"{s.requests} ({s.requests / p.requests:.0%} mirrored)" if p.requests else "0"),
        ("succeeded", str(p.succeeded), str(s.succeeded)),
        ("errors", errors(p), errors(s)),
        ("latency p50", ms(p.latency_ms["p50"]), ms(s.latency_ms["p50"])),
        ("latency p95", ms(p.latency_ms["p95"]), ms(s.latency_ms["p95"])),
        ("latency p99", ms(p.latency_ms["p99"]), ms(s.latency_ms["p99"])),
    ]
    if p.ttft_ms is not None and s.ttft_ms is not None:
        rows.append(
            (
                "TTFT p50/p95",
                f"{ms(p.ttft_ms['p50'])} / {ms(p.ttft_ms['p95'])}",
                f"{ms(s.ttft_ms['p50'])} / {ms(s.ttft_ms['p95'])}",
            )
        )
    rows += [
        (
            "tokens in/out",
            f"{p.tokens['prompt']:,} / {p.tokens['completion']:,}",
            f"{s.tokens['prompt']:,} / {s.tokens['completion']:,}",
        ),
        ("cost", p.cost_display, s.cost_display + (" (shadow)" if s.cost_usd is not None else "")),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    return [f"{a.ljust(w0)}  {b.ljust(w1)}  {c}".rstrip() for a, b, c in rows]


def _rule_lines(report: ShadowReport) -> list[str]:
    """Who was judged against whom, the rule (what ROLLBACK and ADOPT mean here), the verdict, the notes."""
    p, s = report.primary, report.secondary
    settings = report.settings
    points = settings["max_error_excess"] * 100
    judge = settings.get("judge")
    lines = [
        f"judged: the primary {p.name} (all traffic) against the secondary {s.name} (the baseline, "
        f"{settings['rate']:.0%} mirrored)",
        f"rule: ROLLBACK (exit 1, go back to the secondary) when primary p95 / secondary p95 > "
        f"{settings['threshold']:g} or the primary's error rate is more than {points:g} "
        f"point{'' if points == 1 else 's'} above the secondary's"
        + (
            f", or the judge prefers the secondary's answers by at least {judge['margin'] * 100:g} points of "
            f">= {judge['min_pairs']} judged pairs (sign test p < {judge['alpha']:g})"
            if judge
            else ""
        )
        + "; else ADOPT (exit 0, keep the primary)",
    ]
    meaning = verdict_meaning(report.verdict, p.name, s.name)
    reasons = f" ({'; '.join(report.reasons)})" if report.reasons else ""
    lines.append(f"verdict: {report.verdict}: {meaning}{reasons}")
    for note in report.notes:
        lines.append(f"note: {note}")
    return lines


def judged_lines(report: ShadowReport) -> list[str]:
    """The judged-agreement section (nothing without a judge)."""
    ja = report.judged_agreement
    if ja is None:
        return []
    judge = ja["judge"]
    who = "the primary (self)" if judge["self"] else judge["endpoint"]
    lines = []
    n = ja["judged"]
    if n:
        lines.append(
            f"judged agreement over {n} pair(s) (judge {who}, model {judge['model']}): primary better "
            f"{ja['primary_better']} ({ja['primary_better_share']:.0%}), "
            f"equal {ja['equal']} ({ja['equal_share']:.0%}), "
            f"secondary better {ja['secondary_better']} ({ja['secondary_better_share']:.0%})"
        )
    else:
        lines.append(f"judged agreement: no pair judged yet (judge {who}, model {judge['model']})")
    pos = ja["positions"]
    errors = ", ".join(f"{k} {v}" for k, v in sorted(ja["errors_by_kind"].items()))
    lines.append(
        f"  judge: {ja['selected']} of {ja['answered_pairs']} answered pairs sent ({judge['rate']:.0%}), primary shown "
        f"as A in {pos['primary_as_a']} and as B in {pos['primary_as_b']} (said A {pos['said_a']}, B {pos['said_b']}, "
        f"equal {pos['said_equal']}); re-asked {ja['reasked']}; errors {ja['errors']}"
        + (f" ({errors})" if errors else "")
        + (f"; skipped {ja['skipped']}" if ja["skipped"] else "")
        + f"; {ja['calls']} call(s), judge cost {ja['cost_display']} (apart)"
    )
    return lines


def write_report(report: ShadowReport, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "shadow.json"
    tmp = out_dir / ".shadow.json.tmp"
    tmp.write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
