"""Headless runs: no UI, one live progress line on stderr, a summary at the end.

When stderr is not a terminal (CI, cron, `nohup ... &`) the progress line is not drawn; only
the final summary is printed. Ctrl-C (or SIGTERM) aborts: in-flight calls are cancelled, the
journal stays resumable, and the exit code is 130.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import TextIO

from .engine.events import RunFinished
from .engine.stats import RunStats
from .runlog import replay_history
from .session import SwarmSession

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_ABORTED = 0, 1, 2, 130
REFRESH_S = 0.25


def exit_code(finished: RunFinished, output_error: str | None = None) -> int:
    """The run's exit code, headless and in the TUI alike: 0 every task succeeded and the outputs
    were written; 130 the user aborted with work left (the journal is resumable); 1 otherwise: failed
    or unfinished tasks, a stop (budget, error rate, the journal), or results.jsonl / summary.json
    that could not be written (`output_error`: a run whose outputs are missing never says 0)."""
    complete = not (finished.failed or finished.cancelled or finished.stop_reason)
    if complete and output_error is None:
        return EXIT_OK
    if finished.aborted and not complete:
        return EXIT_ABORTED
    return EXIT_FAILED


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


def format_cost(stats: RunStats) -> str:
    return f"${stats.cost_usd:.4f}" if stats.cost_known else "price unknown"


def progress_line(stats: RunStats, waiting: str = "") -> str:
    """The live line; `waiting` says why nothing is being sent now (a provider's Retry-After)."""
    req_s, tok_s = stats.rates()
    p95 = stats.percentile(0.95)
    return (
        f"{stats.succeeded}/{stats.total} done  {stats.failed} failed  {stats.in_flight} in flight  "
        f"{req_s:5.1f} req/s  p95 {p95 / 1000 if p95 else 0:5.2f}s  "
        f"tok {stats.usage.prompt:,}/{stats.usage.completion:,}  {format_cost(stats)}  "
        f"ETA {format_duration(stats.eta_s())}"
        + (f"  batch {stats.batch_waiting:,} waiting" if stats.batch_sent else "")
        + (f"  {waiting}" if waiting else "")
    )


def gate_wait(engine) -> str:
    """ "waiting 42s: the provider asked (Retry-After 999999s, capped at 60s)" while the gate is closed."""
    remaining = engine.admission.gate_remaining_s
    if remaining <= 0:
        return ""
    asked = getattr(engine, "last_retry_after_asked_s", None)
    cap = f" (asked {asked:g}s, capped at {engine.settings.max_retry_after_s:g}s)" if asked else ""
    return f"waiting {remaining:.0f}s: provider's Retry-After{cap}"


async def run_headless(session: SwarmSession, *, stream: TextIO = sys.stderr) -> int:
    engine = session.engine
    loop = asyncio.get_running_loop()
    stops = StopSignals(engine, stream)
    stops.install(loop)
    if engine.stats.sent == 0 and session.has_history:
        # a resumed run: count what earlier sessions did, so "126/400 done" reads as the TUI's does
        replay_history(session.journal, engine.stats)
    live = stream.isatty()
    label = "SIMULATED" if session.simulated else session.client.base_url
    what = "plan -> fan-out -> aggregate" if session.pipeline and not session.tasks else f"{len(session.tasks)} tasks"
    print(
        f"swarm-tui: {what}, {session.job_name} -> {session.plan.profile.name} "
        f"({label}), model {session.model}, run dir {session.run_dir}",
        file=stream,
    )
    budget = session.budget_note()
    if budget:
        print(f"swarm-tui: {budget}", file=stream)
    painter = asyncio.create_task(_paint(engine, stream)) if live else None
    try:
        finished = await session.run()
        if painter:
            painter.cancel()
            stream.write("\r\033[K")
        summary = session.summary if session.summary is not None else session.finalize()
        with contextlib.suppress(OSError):  # a terminal that went away (SIGHUP): the outputs are written
            print_summary(summary, finished, session, stream)
    finally:
        if painter:
            painter.cancel()
        stops.remove(loop)
    code = exit_code(finished, session.output_error)
    # a stop by signal with work left is the user's stop (resumable), unless the outputs are missing
    return EXIT_ABORTED if stops.signalled and code == EXIT_FAILED and session.output_error is None else code


STOP_GRACE_S = 15.0
"""After SIGTERM or SIGHUP, how long the calls in flight have to answer before they are cut."""


class StopSignals:
    """Ctrl-C (SIGINT) aborts at once: the calls in flight are cancelled (a second one says what
    is being saved). SIGTERM and SIGHUP (a closed SSH session, a service manager) stop the run
    gently: nothing new is sent, the calls in flight get `STOP_GRACE_S` to answer (what they cost
    is kept), then the rest is cut; the outputs are written and the resume command printed either
    way (exit 130). A SIGHUP that `nohup` told the process to ignore stays ignored."""

    def __init__(self, engine, stream: TextIO) -> None:
        self.engine = engine
        self.stream = stream
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
        if self._interrupts == 1:
            self.engine.abort()
        elif self._interrupts == 2:
            self._say("stopping: cancelling the calls in flight and saving the journal...")

    def stopped(self, sig: signal.Signals) -> None:
        if self.signalled is not None:  # a second stop signal: cut the calls in flight now
            self.engine.abort(f"stopped by {sig.name}")
            return
        self.signalled = sig.name
        self.engine.stop_dispatch(
            f"stopped by {sig.name}: nothing new is sent, the calls in flight have {STOP_GRACE_S:g}s to answer"
        )
        self._grace = asyncio.get_running_loop().call_later(STOP_GRACE_S, self.engine.abort, f"stopped by {sig.name}")
        self._say(f"{sig.name}: nothing new is sent; the calls in flight have {STOP_GRACE_S:g}s to answer")

    def _say(self, text: str) -> None:
        with contextlib.suppress(OSError):
            print(f"\nswarm-tui: {text}", file=self.stream)


async def _paint(engine, stream: TextIO) -> None:
    while True:
        stream.write("\r\033[K" + progress_line(engine.stats, gate_wait(engine)))
        stream.flush()
        await asyncio.sleep(REFRESH_S)


def print_summary(summary: dict, finished: RunFinished, session: SwarmSession, stream: TextIO) -> None:
    """Where the run stands, after it ended (headless) or after the TUI closed: counts, figures, what next."""
    lat = summary["latency_ms"]
    req = summary["requests"]
    tok = summary["tokens"]
    cost = f"${summary['cost_usd']:.4f}" if summary["cost_usd"] is not None else "price unknown"
    lines = [
        f"{summary['succeeded']}/{summary['total']} succeeded, {summary['failed']} failed, "
        f"{summary['unfinished']} unfinished in {summary['makespan_s'] or 0:.1f}s",
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
    budget = summary.get("budget")
    if budget:
        lines.append(
            f"budget ${budget['usd']:.2f} {'held' if budget['held'] else 'PASSED'}: ${budget['spent_usd']:.4f} spent "
            f"({budget['used_share']:.0%}), at most ${budget['peak_committed_usd']:.4f} spent or held at once"
        )
    if summary.get("cost_estimated_usd"):
        lines.append(
            f"cost includes ${summary['cost_estimated_usd']:.4f} estimated (calls whose provider reported no "
            f"usage, or cut after they went out)"
        )
    if summary.get("truncated"):
        lines.append(f"{summary['truncated']} answers cut at their max_tokens (finish_reason length)")
    if finished.stop_reason:
        lines.append(f"stopped: {finished.stop_reason}")
    if session.output_error:
        lines.append(
            f"results.jsonl and summary.json not written ({session.output_error}); the journal keeps every result"
        )
    if finished.aborted or finished.cancelled or session.output_error:
        lines.append(f"resume with: swarm-tui resume {session.run_dir}")
    elif finished.failed:
        lines.append(f"retry the failed tasks with: swarm-tui resume {session.run_dir} --retry-failed")
    if not session.output_error:
        lines.append(f"results: {session.run_dir}/results.jsonl  errors: {session.run_dir}/errors.jsonl")
    if (session.run_dir / "aggregate.md").exists():
        lines.append(f"aggregate: {session.run_dir}/aggregate.md")
    print("\n".join(lines), file=stream)
