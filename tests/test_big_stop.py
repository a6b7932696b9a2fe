"""A stop of a big run is quick: Ctrl-C or SIGTERM costs nothing per task never sent
(before: a TaskCancelled journaled, encoded and delivered for each, minutes for a million), and
a stop holding more answers than `STOP_EXPORT_MAX_RESULTS` leaves results.jsonl to `swarm-tui
export` instead of writing it after the user asked to leave. Real processes, real signals, the
simulator on loopback; the seconds are measured by benchmarks/bench_jobs.py (`stop`)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
from collections import Counter

import pytest
from swarm_tui.core.events import TaskSucceeded
from swarm_tui.frontend.headless import run_headless
from swarm_tui.run.directory import RunDirLock
from swarm_tui.run.session import SwarmSession

from tests.conftest import read_jsonl, run_cli
from tests.helpers import open_session
from tests.test_process_faults import journal_count, start_run, succeeded, wait_for

BIG = 30_000
CONCURRENCY = 20


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_of_a_big_run_journals_nothing_per_task_it_never_sent(tmp_path, sim_factory, sig):
    """30,000 tasks stopped after the first few hundred answers: the journal gains a cancellation
    for each call cut or backoff waited out (at most the calls in flight and their retries), not
    one per never-sent task; those stay queued, so summary.json, the journal and resume agree."""
    sim = sim_factory(mode="process", latency_ms=2.0, latency_sigma=0.1)
    child, run_dir = start_run(
        tmp_path, sim.base_url, BIG, "--concurrency", str(CONCURRENCY), "--no-adaptive", "--log-every", "1"
    )
    try:
        wait_for(lambda: succeeded(run_dir) >= 300, "the first answers", child, timeout=120)
        child.send_signal(sig)
        code = child.wait(120)  # a hang guard, not a timing figure
    finally:
        if child.poll() is None:
            child.kill()
    log = (tmp_path / "run.log").read_text()
    assert code == 130, log[-2000:]
    assert "Traceback" not in log
    cancelled_events = journal_count(run_dir, "SELECT COUNT(*) FROM log WHERE kind = 'TaskCancelled'")
    retried = journal_count(run_dir, "SELECT COUNT(*) FROM log WHERE kind = 'TaskRetrying'")
    assert cancelled_events <= CONCURRENCY + retried, f"{cancelled_events} cancellations journaled at the stop"
    states = dict.fromkeys(("succeeded", "failed", "queued", "cancelled", "running", "retrying"), 0)
    states.update(
        {
            state: journal_count(run_dir, f"SELECT COUNT(*) FROM tasks WHERE state = '{state}'")
            for state in ("succeeded", "failed", "queued", "cancelled", "running", "retrying")
        }
    )
    assert states["running"] == states["retrying"] == 0, states
    assert states["queued"] > BIG // 2, "the tasks never sent stay queued"
    summary = json.loads((run_dir / "summary.json").read_text())  # few answers: written at the stop
    assert (
        summary["unfinished"]
        == states["queued"] + states["cancelled"]
        == BIG - summary["succeeded"] - summary["failed"]
    )
    assert len(read_jsonl(run_dir / "results.jsonl")) == summary["succeeded"] == states["succeeded"]
    assert f"swarm-tui resume {run_dir}" in log


async def test_a_big_stop_leaves_the_outputs_to_export_and_says_how(tmp_path, sim_factory, monkeypatch):
    """More answers than the stop writes (the bound lowered to 20 here): Ctrl-C ends the run with
    130 and the note naming `swarm-tui export RUN`; that command (a real process) writes every
    answer, sending nothing; the resume then finishes the run, each custom_id once."""
    monkeypatch.setattr("swarm_tui.run.outputs.STOP_EXPORT_MAX_RESULTS", 20)
    sim = sim_factory(latency_ms=20.0, latency_sigma=0.1)
    n = 400
    session = open_session(tmp_path, sim.base_url, [f"stop task {i}" for i in range(n)], concurrency=5)
    run_dir = session.run_dir
    answers = 0

    def on_event(event) -> None:
        nonlocal answers
        answers += isinstance(event, TaskSucceeded)
        if answers == 40:
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, to this process's own handler

    session.engine.subscribe(on_event)
    stream = io.StringIO()
    try:
        code = await run_headless(session, stream=stream)
    finally:
        await session.aclose()
    text = stream.getvalue()
    assert code == 130, text
    assert f"write them, sending nothing, with: swarm-tui export {run_dir}" in text, text
    assert f"resume with: swarm-tui resume {run_dir}" in text
    assert not (run_dir / "results.jsonl").exists() and not (run_dir / "summary.json").exists()
    assert "results: " not in text  # no path to a file that is not there

    sent_before = sim.stats()["requests"]
    exported = await asyncio.to_thread(run_cli, "export", str(run_dir))
    assert exported.returncode == 0, exported.stderr
    kept = journal_count(run_dir, "SELECT COUNT(*) FROM tasks WHERE state = 'succeeded'")
    results = read_jsonl(run_dir / "results.jsonl")
    assert len(results) == kept >= 40 and len({r["custom_id"] for r in results}) == kept
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["succeeded"], summary["unfinished"]) == (kept, n - kept - summary["failed"])
    assert "cost_breakdown" in summary  # the whole summary, as a run's end writes it
    assert sim.stats()["requests"] == sent_before, "export sent nothing"

    cut = journal_count(run_dir, "SELECT COUNT(*) FROM attempts WHERE outcome = 'cancelled'")
    resumed = SwarmSession.reopen(run_dir)
    try:
        finished = await resumed.run()
    finally:
        await resumed.aclose()
    assert (finished.succeeded + finished.failed, finished.cancelled) == (n, 0)
    lines = [*read_jsonl(run_dir / "results.jsonl"), *read_jsonl(run_dir / "errors.jsonl")]
    ids = Counter(line["custom_id"] for line in lines)
    assert len(ids) == n and set(ids.values()) == {1}
    # Ctrl-C cuts the calls in flight (journaled, maybe billed) and resume sends those again; nothing else twice
    assert sim.stats()["duplicate_successes"] <= cut <= 5


def test_export_refuses_a_run_another_process_drives(tmp_path, sim):
    """`swarm-tui export` takes the run's lock: a run being driven writes its own outputs (exit 2)."""
    session = open_session(tmp_path, sim.base_url, ["one task"])
    asyncio.run(session.aclose())  # made, never run: a journal with one queued task
    lock = RunDirLock(session.run_dir).acquire()
    try:
        busy = run_cli("export", str(session.run_dir))
    finally:
        lock.release()
    assert busy.returncode == 2, busy.stderr
    assert "Traceback" not in busy.stderr and not (session.run_dir / "results.jsonl").exists()
    free = run_cli("export", str(session.run_dir))
    assert free.returncode == 0, free.stderr
    assert "0 succeeded, 0 failed, 1 unfinished" in free.stdout
    assert read_jsonl(session.run_dir / "results.jsonl") == []


def test_export_of_no_run_is_bad_input(tmp_path):
    result = run_cli("export", str(tmp_path / "nowhere"))
    assert result.returncode == 2 and "no journal" in result.stderr, result.stderr
