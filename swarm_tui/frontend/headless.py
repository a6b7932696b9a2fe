"""Headless runs: no UI; progress and state changes on stderr, a summary at the end.

On a terminal the progress line is repainted in place and state changes are printed above
it. When stderr is not a terminal (CI, cron, `nohup ... > big.log 2>&1 &`) the log gets a
timestamped progress line every `--log-every` seconds (5 by default) and a line for each state
change; `--log-format json` writes both as JSON lines (`progress_log.py`). Ctrl-C aborts at
once; SIGTERM and SIGHUP stop gently (`StopSignals`); the journal stays resumable, exit 130.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from typing import TextIO

from swarm_tui.core.events import RunFinished
from swarm_tui.engine.ports import Engine
from swarm_tui.engine.stats import RunStats
from swarm_tui.frontend.progress_lines import (
    DEFAULT_EVERY_S,
    TICK_S,
    ProgressLines,
    clock_text,
    progress_fields,
    progress_text,
)
from swarm_tui.otel.report import TraceReport
from swarm_tui.records import Quality, Summary
from swarm_tui.run.cost import tier_text
from swarm_tui.run.exit_codes import exit_code, signalled_exit_code
from swarm_tui.run.session import SwarmSession
from swarm_tui.view.follower import earlier_session_events
from swarm_tui.view.news import counts_text


def format_duration(seconds: float | None) -> str:
    return clock_text(seconds)


def format_cost(stats: RunStats) -> str:
    return f"${stats.cost_usd:.4f}" if stats.cost_known else "price unknown"


def progress_line(stats: RunStats, waiting: str = "") -> str:
    """The progress line of `stats` alone (the run's ETA); `waiting` says why nothing is being
    sent now (a provider's Retry-After). The headless log adds the session's pace, round, pause."""
    return progress_text(progress_fields(stats, waiting=waiting))


def gate_wait(engine: Engine) -> str:
    """ "waiting 42s: the provider asked (Retry-After 999999s, capped at 60s)" while the gate is closed."""
    remaining = engine.admission.gate_remaining_s
    if remaining <= 0:
        return ""
    asked = engine.last_retry_after_asked_s
    cap = f" (asked {asked:g}s, capped at {engine.settings.pacing.max_retry_after_s:g}s)" if asked else ""
    return f"waiting {remaining:.0f}s: provider's Retry-After{cap}"


async def run_headless(
    session: SwarmSession,
    *,
    stream: TextIO = sys.stderr,
    log_format: str = "text",
    every_s: float = DEFAULT_EVERY_S,
    retried: bool = False,
    bell: bool = False,
) -> int:
    """Run the session to its end, saying how it goes on `stream`. `retried`: the session was
    opened with `--retry-failed` (the summary does not suggest the command just run); `bell`:
    ring on a terminal when it stops, drifts or ends."""
    engine = session.engine
    loop = asyncio.get_running_loop()
    stops = StopSignals(engine, stream, session)
    stops.install(loop)
    if engine.stats.sent == 0 and session.has_history:
        # a resumed run: count what earlier sessions did, so "126/400 done" reads as the TUI's does
        earlier_session_events(session.journal, engine.stats)
    log = ProgressLines(
        stream,
        engine.stats,
        log_format=log_format,
        every_s=every_s,
        live=stream.isatty(),
        bell=bell,
        waiting=lambda: gate_wait(engine),
        states=engine.states,
    )
    engine.subscribe(log.observe)
    label = "SIMULATED" if session.simulated else session.client.base_url
    what = "plan -> fan-out -> aggregate" if session.pipeline and not session.tasks else f"{len(session.tasks)} tasks"
    log.say(
        "start",
        f"swarm-tui: {what}, {session.job_name} -> {session.plan.profile.name} "
        f"({label}), model {session.model}, run dir {session.run_dir}",
        run_dir=str(session.run_dir),
        job=session.job_name,
        provider=session.plan.profile.name,
        simulated=session.simulated,
        model=session.model,
    )
    budget = session.budget_note()
    if budget:
        log.say("budget", f"swarm-tui: {budget}", note=budget)
    ticker = asyncio.create_task(_tick(log))
    started = time.monotonic()
    try:
        finished = await session.run()
        ticker.cancel()
        log.finish()
        session_s = time.monotonic() - started
        log.say(
            "finished",
            f"{'aborted' if finished.aborted else 'finished'}: {counts_text(finished)} in {session_s:.1f}s"
            + (f" ({finished.stop_reason})" if finished.stop_reason else ""),
            succeeded=finished.succeeded,
            failed=finished.failed,
            unfinished=finished.cancelled,
            aborted=finished.aborted,
            stop_reason=finished.stop_reason,
            session_s=round(session_s, 1),
        )
        summary = session.summary if session.summary is not None else session.finalize()
        with contextlib.suppress(OSError):  # a terminal that went away (SIGHUP): the outputs are written
            if log.json:
                log.say("summary", "", **summary_fields(summary, finished, session, retried=retried))
            else:
                print_summary(summary, finished, session, stream, session_s=session_s, retried=retried)
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        stops.remove(loop)
    return signalled_exit_code(exit_code(finished, session.output_error), stops.signalled, session.output_error)


STOP_GRACE_S = 15.0
"""After SIGTERM or SIGHUP, how long the calls in flight have to answer before they are cut."""


class StopSignals:
    """Ctrl-C (SIGINT) aborts at once: the calls in flight are cancelled (a second one says what
    is being saved). SIGTERM and SIGHUP (a closed SSH session, a service manager) stop the run
    gently: nothing new is sent, the calls in flight get `STOP_GRACE_S` to answer (what they cost
    is kept), then the rest is cut; the outputs are written and the resume command printed either
    way (exit 130). A SIGHUP that `nohup` told the process to ignore stays ignored. Either is the
    user's stop (`SwarmSession.stop_by_user`): a big run's outputs are left for `swarm-tui export`,
    not written for minutes after the user asked to leave."""

    def __init__(self, engine: Engine, stream: TextIO, session: SwarmSession | None = None) -> None:
        self.engine = engine
        self.stream = stream
        self.session = session
        self.signalled: str | None = None
        self._interrupts = 0
        self._installed: list[signal.Signals] = []
        self._grace: asyncio.TimerHandle | None = None

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        handlers = {signal.SIGINT: self.interrupted, signal.SIGTERM: self.stopped, signal.SIGHUP: self.stopped}
        for sig, handler in handlers.items():
            if sig is signal.SIGHUP and signal.getsignal(sig) is signal.SIG_IGN:
                continue  # nohup: a hangup must not stop the run
            try:
                loop.add_signal_handler(sig, handler, sig)
            except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
                continue
            self._installed.append(sig)

    def remove(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._grace is not None:
            self._grace.cancel()
        for sig in self._installed:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)

    def interrupted(self, sig: signal.Signals) -> None:
        self._interrupts += 1
        self.signalled = sig.name
        if self.session is not None:
            self.session.stop_by_user()
        if self._interrupts == 1:
            self.engine.abort()
        elif self._interrupts == 2:
            self._say("stopping: cancelling the calls in flight and saving the journal...")

    def stopped(self, sig: signal.Signals) -> None:
        if self.signalled is not None:  # a second stop signal: cut the calls in flight now
            self.engine.abort(f"stopped by {sig.name}")
            return
        self.signalled = sig.name
        reason = f"stopped by {sig.name}: nothing new is sent, the calls in flight have {STOP_GRACE_S:g}s to answer"
        if self.session is not None:
            self.session.stop_by_user(reason)
        else:
            self.engine.stop_dispatch(reason)
        self._grace = asyncio.get_running_loop().call_later(STOP_GRACE_S, self.engine.abort, f"stopped by {sig.name}")
        self._say(f"{sig.name}: nothing new is sent; the calls in flight have {STOP_GRACE_S:g}s to answer")

    def _say(self, text: str) -> None:
        with contextlib.suppress(OSError):
            print(f"\nswarm-tui: {text}", file=self.stream)


async def _tick(log: ProgressLines) -> None:
    while True:
        await asyncio.sleep(min(TICK_S, log.every_s))
        log.tick()


def elapsed_text(summary: Summary, session_s: float | None) -> str:
    """How long: this session's time, and the run's span when it is another (a resume)."""
    makespan = summary.makespan_s or 0.0
    if session_s is None:
        return f"in {makespan:.1f}s"
    if makespan > session_s + 1.0:  # earlier sessions: the run started before this one
        return f"in {session_s:.1f}s (this session; {makespan:.1f}s since the run's first call)"
    return f"in {session_s:.1f}s"


def next_step(finished: RunFinished, session: SwarmSession, *, retried: bool = False) -> str | None:
    """What to do next, in one line: resume what is unfinished, retry what failed (but not the
    very command that just retried them: say where their errors are)."""
    run_dir = session.run_dir
    if finished.aborted or finished.cancelled or session.output_error:
        return f"resume with: swarm-tui resume {run_dir}"
    if finished.failed and retried:
        return f"{finished.failed} still failed after the retry: their errors are in {run_dir}/errors.jsonl"
    if finished.failed:
        return f"retry the failed tasks with: swarm-tui resume {run_dir} --retry-failed"
    return None


def summary_fields(summary: Summary, finished: RunFinished, session: SwarmSession, *, retried: bool = False) -> dict:
    """The summary as the JSON log's last record: the counts, figures and the next step."""
    keys = ("total", "succeeded", "failed", "unfinished", "makespan_s", "latency_ms", "tokens", "cost_usd", "requests")
    data = summary.to_json()
    return {
        **{key: data.get(key) for key in keys},
        "stop_reason": finished.stop_reason,
        "next": next_step(finished, session, retried=retried),
        "output_error": session.output_error,
        "outputs_deferred": session.outputs_deferred,
        "results": None if session.output_error or session.outputs_deferred else str(session.run_dir / "results.jsonl"),
        **({"traces": data["traces"]} if summary.traces else {}),  # --otel: spans sent and dropped
    }


def quality_line(quality: Quality) -> str:
    """The judge's figures of summary.json's `quality`, as one line."""
    drifts = quality.drifts
    return (
        f"quality: {quality.judged} judged"
        + (f", mean {quality.mean:.1f}, p10 {quality.p10:.1f}" if quality.judged else "")
        + (f", {quality.judge_errors} could not be judged" if quality.judge_errors else "")
        + f", judge ${quality.judge_cost_usd:.4f}"
        + (
            f"; {len(drifts)} drift{'s' if len(drifts) != 1 else ''} ({', '.join(d.action for d in drifts)})"
            if drifts
            else ""
        )
    )


def lane_lines(summary: Summary) -> list[str]:
    """The summary's lines of money billed another way than live at the default tier (at a service
    tier, `--service-tier flex|priority`, against the default tier; through the batch lane), and of
    the answers replayed from the response cache (sent nothing, cost nothing)."""
    lines: list[str] = []
    tiers = tier_text(summary)
    if tiers is not None:
        lines.append(tiers)
    batches = summary.batches
    if batches:
        by_lane = summary.spend.cost_breakdown.by_lane if summary.spend is not None else {}
        billed = (
            f", ${by_lane['batch']:.4f} at the batch rate"
            if by_lane.get("batch") is not None and summary.cost_usd is not None
            else ""
        )
        statuses = ", ".join(sorted({b.status for b in batches}))
        lines.append(
            f"batch lane: {len(batches)} batch{'es' if len(batches) != 1 else ''} of "
            f"{sum(b.requests for b in batches):,} lines ({statuses}){billed}"
        )
    cache = summary.cache
    if cache:
        unpriced = f" ({cache.unpriced_hits:,} unpriced)" if cache.unpriced_hits else ""
        lines.append(f"cache {cache.hits:,} hits · saved ${cache.saved_usd:.4f}{unpriced}")
    answers = summary.answers
    if answers is not None:  # what the answer checks did (a re-ask is not among the retried requests above)
        ended = ", ".join(f"{count} {kind}" for kind, count in answers.failed.items() if count) or "none"
        lines.append(
            f"answers {answers.valid:,} valid · {answers.reasked:,} re-asked · {answers.more_room:,} given "
            f"more room · {answers.escalated:,} escalated · failed: {ended}"
        )
    return lines


def print_summary(
    summary: Summary,
    finished: RunFinished,
    session: SwarmSession,
    stream: TextIO,
    *,
    session_s: float | None = None,
    retried: bool = False,
) -> None:
    """Where the run stands, after it ended (headless) or after the TUI closed: counts, figures,
    what next. `session_s`: how long this session ran (a resume's, not the run's since it was
    created); `retried`: it was opened with `--retry-failed`."""
    lat, req, tok = summary.latency_ms, summary.requests, summary.tokens
    cost = f"${summary.cost_usd:.4f}" if summary.cost_usd is not None else "price unknown"
    lines = [
        f"{summary.succeeded}/{summary.total} succeeded, {summary.failed} failed, "
        f"{summary.unfinished} unfinished {elapsed_text(summary, session_s)}",
        f"latency p50 {lat.p50} ms  p95 {lat.p95} ms  p99 {lat.p99} ms"
        if lat.p50 is not None
        else "latency: no live call succeeded",
        f"requests {req.sent} sent, {req.retried} retried ({req.rate_limited} rate-limited, "
        f"{req.server_errors} 5xx, {req.timeouts} timeouts)",
        f"tokens {tok.prompt:,} in ({tok.cached:,} cached) / {tok.completion:,} out  cost {cost}",
    ]
    lines.extend(lane_lines(summary))
    tree = summary.orchestrator
    if tree is not None:  # an orchestrator's: its agents by level, the critical path against the makespan
        levels = " + ".join(str(n) for n in tree.levels)
        took = f" of {summary.makespan_s:.1f}s" if summary.makespan_s is not None else ""
        lines.append(
            f"agents {levels} by level ({tree.spawned} spawned in {tree.spawns} spawns); critical path "
            f"{tree.critical_path_calls} calls, {tree.critical_path_s:.1f}s{took}"
        )
    if summary.quality:
        lines.append(quality_line(summary.quality))
    budget = summary.budget
    if budget:
        lines.append(
            f"budget ${budget.usd:.2f} {'held' if budget.held else 'PASSED'}: ${budget.spent_usd:.4f} spent "
            f"({budget.used_share:.0%}), at most ${budget.peak_committed_usd:.4f} spent or held at once"
        )
    if summary.cost_estimated_usd:
        lines.append(
            f"cost includes ${summary.cost_estimated_usd:.4f} estimated (calls whose provider reported no "
            f"usage, or cut after they went out)"
        )
    if summary.truncated:
        lines.append(f"{summary.truncated} answers cut at their max_tokens (finish_reason length)")
    if summary.traces:  # --otel: what reached the collector, said once
        lines.append(TraceReport.from_dict(summary.traces.to_json()).describe())
    if finished.stop_reason:
        lines.append(f"stopped: {finished.stop_reason}")
    if session.output_error:
        lines.append(
            f"results.jsonl and summary.json not written ({session.output_error}); the journal keeps every result"
        )
    if session.outputs_deferred:
        lines.append(session.outputs_deferred)
    step = next_step(finished, session, retried=retried)
    if step:
        lines.append(step)
    if not session.output_error and not session.outputs_deferred:
        lines.append(f"results: {session.run_dir}/results.jsonl  errors: {session.run_dir}/errors.jsonl")
    if (session.run_dir / "aggregate.md").exists():
        lines.append(f"aggregate: {session.run_dir}/aggregate.md")
    print("\n".join(lines), file=stream)
