"""Headless runs: no UI; progress and state changes on stderr, a summary at the end.

On a terminal the progress line is repainted in place and state changes are printed above
it. When stderr is not a terminal (CI, cron, `nohup ... > big.log 2>&1 &`) the log gets a
timestamped progress line every `--log-every` seconds (5 by default) and a line for each state
change; `--log-format json` writes both as JSON lines (`progress_log.py`). Ctrl-C (or SIGTERM)
aborts: in-flight calls are cancelled, the journal stays resumable, and the exit code is 130.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from typing import TextIO

from .engine.events import RunFinished
from .engine.stats import RunStats
from .progress import counts_text
from .progress_log import DEFAULT_EVERY_S, TICK_S, ProgressLog, clock_text, progress_fields, progress_text
from .runlog import replay_history
from .session import SwarmSession

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_ABORTED = 0, 1, 2, 130


def exit_code(finished: RunFinished) -> int:
    if finished.aborted:
        return EXIT_ABORTED
    if finished.failed or finished.cancelled or finished.stop_reason:
        return EXIT_FAILED
    return EXIT_OK


def format_duration(seconds: float | None) -> str:
    return clock_text(seconds)


def format_cost(stats: RunStats) -> str:
    return f"${stats.cost_usd:.4f}" if stats.cost_known else "price unknown"


def progress_line(stats: RunStats, waiting: str = "") -> str:
    """The progress line of `stats` alone (the run's ETA); `waiting` says why nothing is being
    sent now (a provider's Retry-After). The headless log adds the session's pace, round, pause."""
    return progress_text(progress_fields(stats, waiting=waiting))


def gate_wait(engine) -> str:
    """ "waiting 42s: the provider asked (Retry-After 999999s, capped at 60s)" while the gate is closed."""
    remaining = engine.admission.gate_remaining_s
    if remaining <= 0:
        return ""
    asked = getattr(engine, "last_retry_after_asked_s", None)
    cap = f" (asked {asked:g}s, capped at {engine.settings.max_retry_after_s:g}s)" if asked else ""
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
    interrupts = 0

    def interrupted() -> None:  # a second Ctrl-C while in-flight calls wind down says so, no traceback
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1:
            engine.abort()
        elif interrupts == 2:
            print("\nswarm-tui: stopping: cancelling the calls in flight and saving the journal...", file=stream)

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, interrupted)
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
            pass
    if engine.stats.sent == 0 and session.has_history:
        # a resumed run: count what earlier sessions did, so "126/400 done" reads as the TUI's does
        replay_history(session.journal, engine.stats)
    log = ProgressLog(
        stream,
        engine.stats,
        log_format=log_format,
        every_s=every_s,
        live=stream.isatty(),
        bell=bell,
        waiting=lambda: gate_wait(engine),
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
        if log.json:
            log.say("summary", "", **summary_fields(summary, finished, session, retried=retried))
        else:
            print_summary(summary, finished, session, stream, session_s=session_s, retried=retried)
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass
    return exit_code(finished)


async def _tick(log: ProgressLog) -> None:
    while True:
        await asyncio.sleep(min(TICK_S, log.every_s))
        log.tick()


def elapsed_text(summary: dict, session_s: float | None) -> str:
    """How long: this session's time, and the run's span when it is another (a resume)."""
    makespan = summary["makespan_s"] or 0.0
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


def summary_fields(summary: dict, finished: RunFinished, session: SwarmSession, *, retried: bool = False) -> dict:
    """The summary as the JSON log's last record: the counts, figures and the next step."""
    keys = ("total", "succeeded", "failed", "unfinished", "makespan_s", "latency_ms", "tokens", "cost_usd", "requests")
    return {
        **{key: summary.get(key) for key in keys},
        "stop_reason": finished.stop_reason,
        "next": next_step(finished, session, retried=retried),
        "output_error": session.output_error,
        "results": None if session.output_error else str(session.run_dir / "results.jsonl"),
    }


def print_summary(
    summary: dict,
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
    lat = summary["latency_ms"]
    req = summary["requests"]
    tok = summary["tokens"]
    cost = f"${summary['cost_usd']:.4f}" if summary["cost_usd"] is not None else "price unknown"
    lines = [
        f"{summary['succeeded']}/{summary['total']} succeeded, {summary['failed']} failed, "
        f"{summary['unfinished']} unfinished {elapsed_text(summary, session_s)}",
        f"latency p50 {lat['p50']} ms  p95 {lat['p95']} ms  p99 {lat['p99']} ms"
        if lat["p50"] is not None
        else "latency: no live call succeeded",
        f"requests {req['sent']} sent, {req['retried']} retried ({req['rate_limited']} rate-limited, "
        f"{req['server_errors']} 5xx, {req['timeouts']} timeouts)",
        f"tokens {tok['prompt']:,} in ({tok['cached']:,} cached) / {tok['completion']:,} out  cost {cost}",
    ]
    batches = summary.get("batches") or []
    if batches:
        by_lane = summary.get("cost_breakdown", {}).get("by_lane") or {}
        billed = (
            f", ${by_lane['batch']:.4f} at the batch rate"
            if by_lane.get("batch") is not None and summary["cost_usd"] is not None
            else ""
        )
        statuses = ", ".join(sorted({b["status"] for b in batches}))
        lines.append(
            f"batch lane: {len(batches)} batch{'es' if len(batches) != 1 else ''} of "
            f"{sum(b['requests'] for b in batches):,} lines ({statuses}){billed}"
        )
    quality = summary.get("quality")
    if quality:
        drifts = quality["drifts"]
        lines.append(
            f"quality: {quality['judged']} judged"
            + (f", mean {quality['mean']:.1f}, p10 {quality['p10']:.1f}" if quality["judged"] else "")
            + (f", {quality['judge_errors']} could not be judged" if quality["judge_errors"] else "")
            + f", judge ${quality['judge_cost_usd']:.4f}"
            + (
                f"; {len(drifts)} drift{'s' if len(drifts) != 1 else ''} ({', '.join(d['action'] for d in drifts)})"
                if drifts
                else ""
            )
        )
    if finished.stop_reason:
        lines.append(f"stopped: {finished.stop_reason}")
    if session.output_error:
        lines.append(
            f"results.jsonl and summary.json not written ({session.output_error}); the journal keeps every result"
        )
    step = next_step(finished, session, retried=retried)
    if step:
        lines.append(step)
    if not session.output_error:
        lines.append(f"results: {session.run_dir}/results.jsonl  errors: {session.run_dir}/errors.jsonl")
    if (session.run_dir / "aggregate.md").exists():
        lines.append(f"aggregate: {session.run_dir}/aggregate.md")
    print("\n".join(lines), file=stream)
