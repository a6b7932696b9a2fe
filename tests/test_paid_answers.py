"""Nothing paid is lost, nothing is paid twice: the ordinary faults a careful user meets.

Real processes, real loopback HTTP, a real file size limit and real SIGKILL: a journal that
stops taking writes, two processes on one run directory, 200s that are not answers, redirects,
absurd Retry-After headers, a directory that is not a run, a run directory deleted mid-run,
an interrupted journal creation and a budget that spans sessions.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from swarm_tui.core.events import RateGateClosed
from swarm_tui.engine import EngineSettings
from swarm_tui.frontend.headless import gate_wait
from swarm_tui.run.session import SwarmSession

from tests.conftest import read_jsonl, run_cli, start_cli, write_batch
from tests.helpers import open_session
from tests.hostile import HostileServer

PRICES = {"custom/sim-1": {"input": 100.0, "cached_input": 100.0, "output": 100.0}}  # $ per 1M tokens


@pytest.fixture
def hostile():
    servers: list[HostileServer] = []

    def start(**kwargs) -> HostileServer:
        server = HostileServer(**kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def cli(*args: str, limit_file_bytes: int | None = None) -> subprocess.Popen:
    """`swarm-tui ARGS` as a background process (optionally under `ulimit -f`)."""

    def limit() -> None:
        if limit_file_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_bytes, resource.RLIM_INFINITY))

    return start_cli(
        *args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit,
    )


def wait_for(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"within {timeout:g}s: {what} never happened")
        time.sleep(0.02)


def journal_rows(run_dir: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(f"file:{run_dir / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def assert_clean_exit(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert "never retrieved" not in stderr, stderr


# --------------------------------------------------------------------------- 1. a journal that stops taking writes


def test_a_journal_that_cannot_grow_stops_the_run_and_resume_pays_nothing_twice(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=20.0)
    job = write_batch(tmp_path / "job.jsonl", [f"task {i} " + "x" * 100 for i in range(1000)])
    run_dir = tmp_path / "run"
    proc = cli(
        "run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(run_dir), limit_file_bytes=700 * 1024
    )
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert_clean_exit(stderr)
    assert "journal write failed" in stderr and "file size limit" in stderr, stderr
    assert f"swarm-tui resume {run_dir}" in stderr
    answered = sim.stats()["successes"]
    kept = journal_rows(run_dir, "SELECT COUNT(*) FROM tasks WHERE state = 'succeeded'")[0][0]
    assert 0 < kept < 1000, "the limit must bite mid-run for this test to mean anything"
    assert answered - kept <= 50, f"{answered} answers paid, {kept} kept: more lost than the calls in flight"

    result = run_cli("resume", str(run_dir), "--headless")
    assert result.returncode == 0, result.stderr
    stats = sim.stats()
    assert stats["successes"] - answered == 1000 - kept, "resume re-sent answered tasks"
    assert stats["duplicate_successes"] <= answered - kept
    assert len(read_jsonl(run_dir / "results.jsonl")) == 1000


# --------------------------------------------------------------------------- 2. one writer per run directory


def test_a_second_process_on_a_run_directory_is_refused_and_a_dead_ones_lock_is_taken_over(tmp_path, sim_factory):
    # 60 tasks two at a time at 1 s each: the first process runs for ~30 s, long past the two
    # refused starts even on a loaded machine (at 300 ms it could finish and free its lock first)
    sim = sim_factory(latency_ms=1000.0)
    job = write_batch(tmp_path / "job.jsonl", [f"slow task {i}" for i in range(60)])
    run_dir = tmp_path / "run"
    first = cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--out",
        str(run_dir),
        "--concurrency",
        "2",
        "--no-adaptive",
    )
    try:
        wait_for(
            lambda: (run_dir / "journal.sqlite").exists() and sim.stats()["successes"] >= 2,
            "the first process answering its first tasks",
        )
        for args in (
            ("resume", str(run_dir), "--headless"),
            ("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(run_dir)),
        ):
            second = run_cli(*args)
            assert second.returncode == 2, second.stderr
            assert f"PID {first.pid}" in second.stderr and "attach" in second.stderr, second.stderr
            assert_clean_exit(second.stderr)
        before_kill = sim.stats()["successes"]
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    assert before_kill < 60, "the first process must still have been running"
    resumed = run_cli("resume", str(run_dir), "--headless", "--concurrency", "20")
    assert resumed.returncode == 0, resumed.stderr
    results = read_jsonl(run_dir / "results.jsonl")
    assert sorted(r["custom_id"] for r in results) == [f"task-{i:04d}" for i in range(60)]
    per_task = journal_rows(run_dir, "SELECT idx, COUNT(*) FROM attempts WHERE outcome = 'ok' GROUP BY idx")
    assert all(n == 1 for _, n in per_task), "a journaled success was sent again"


def test_a_success_already_journaled_is_never_overwritten_by_a_failure(tmp_path, sim):
    from swarm_tui.core.call_errors import CallError, ErrorClass
    from swarm_tui.core.events import Attempt
    from swarm_tui.journal import Journal

    session = open_session(tmp_path, sim.base_url, ["a"])
    journal: Journal = session.journal
    try:
        journal.records.record_success(Attempt(0, 1, "custom", time.time(), 5.0, "ok", status=200), {"id": "paid"})
        late = CallError(ErrorClass.SERVER, "late failure of another attempt", 500)
        journal.records.record_failure(Attempt(0, 2, "custom", time.time(), 5.0, "failed", status=500, error=late))
        journal.records.requeue([0])
        assert journal.queries.states()[0] == "succeeded"
        assert journal.queries.result_of(0)["ok"] is True and journal.queries.result_of(0)["response"] == {"id": "paid"}
    finally:
        journal.close()
        session.lock.release()


# --------------------------------------------------------------------------- 3, 4. 200s that are not answers, redirects


def test_a_200_that_is_not_a_chat_completion_is_retried_as_bad_response(tmp_path, hostile):
    server = hostile()
    fates = ["nochoices", "emptychoices", "badjson", "plain", "array", "html"]
    job = write_batch(
        tmp_path / "job.jsonl",
        [f"t{i} [[hostile:{fate}x1]]" for i, fate in enumerate(fates)] + ["always [[hostile:nochoices]]"],
    )
    run_dir = tmp_path / "run"
    result = run_cli(
        "run", str(job), "--headless", "--base-url", server.base_url, "--out", str(run_dir), "--max-attempts", "2"
    )
    assert result.returncode == 1, result.stderr
    assert_clean_exit(result.stderr)
    assert len(read_jsonl(run_dir / "results.jsonl")) == len(fates)
    [error] = read_jsonl(run_dir / "errors.jsonl")
    assert error["custom_id"] == f"task-{len(fates):04d}" and error["error"]["code"] == "bad_response"
    first_tries = journal_rows(
        run_dir, "SELECT idx, status, error_class, error_message FROM attempts WHERE number = 1 ORDER BY idx"
    )
    for (_index, status, error_class, message), fate in zip(first_tries, fates, strict=False):
        assert (status, error_class) == (200, "bad_response"), (fate, status, error_class)
        assert "body:" in message, message  # kept for the detail view
    html_message = first_tries[fates.index("html")][3]
    assert "Sign in" in html_message and "text/html" in html_message


def test_a_redirect_is_never_followed(tmp_path, hostile, backend):
    elsewhere = hostile()
    server = hostile(other_url=f"{elsewhere.base_url}/chat/completions")
    job = write_batch(tmp_path / "job.jsonl", ["a [[hostile:redirect302]]", "b [[hostile:redirect307]]", "c"])
    run_dir = tmp_path / "run"
    result = run_cli(
        "run", str(job), "--headless", "--base-url", server.base_url, "--out", str(run_dir), "--backend", backend
    )
    assert result.returncode == 1, result.stderr
    assert sum(elsewhere.requests.values()) == 0, f"the prompts went to another server: {elsewhere.requests}"
    errors = read_jsonl(run_dir / "errors.jsonl")
    assert [e["error"]["code"] for e in errors] == ["redirect", "redirect"]
    assert all(elsewhere.base_url in e["error"]["message"] for e in errors)
    assert server.requests["POST /v1/chat/completions"] == 3, "a redirect is not retried"
    assert len(read_jsonl(run_dir / "results.jsonl")) == 1


# --------------------------------------------------------------------------- 5, 6. the run directory


def test_out_on_a_directory_that_is_not_a_run_is_refused_and_left_alone(tmp_path, sim):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "results.jsonl").write_text("my own results\n")
    job = write_batch(tmp_path / "job.jsonl", ["a"])
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(mine))
    assert result.returncode == 2, result.stderr
    assert "not empty" in result.stderr and "--out" in result.stderr
    assert (mine / "results.jsonl").read_text() == "my own results\n"
    assert sorted(p.name for p in mine.iterdir()) == ["results.jsonl"]
    assert sim.stats()["requests"] == 0
    for bad in (job, tmp_path / "job.jsonl" / "sub", Path("/proc/swarm-tui-run")):
        refused = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(bad))
        assert refused.returncode == 2, refused.stderr
        assert_clean_exit(refused.stderr)
    assert sim.stats()["requests"] == 0


def test_new_run_directories_and_files_are_private(tmp_path, sim):
    old = os.umask(0o022)
    try:
        job = write_batch(tmp_path / "job.jsonl", ["a", "b"])
        result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"))
    finally:
        os.umask(old)
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "run"
    assert run_dir.stat().st_mode & 0o777 == 0o700
    for path in run_dir.iterdir():
        assert path.stat().st_mode & 0o077 == 0, f"{path.name} is readable by others"


def test_a_run_directory_deleted_mid_run_stops_the_run(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=200.0)
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(400)])
    run_dir = tmp_path / "run"
    proc = cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--out",
        str(run_dir),
        "--concurrency",
        "4",
        "--no-adaptive",
    )
    wait_for(lambda: sim.stats()["successes"] >= 4, "the run answering its first tasks")
    shutil.rmtree(run_dir)
    deleted_at = sim.stats()["requests"]
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    assert_clean_exit(stderr)
    assert "deleted" in stderr, stderr
    assert sim.stats()["requests"] - deleted_at < 40, "the run went on sending into a deleted directory"


def test_an_interrupted_journal_creation_leaves_no_half_run(tmp_path, sim):
    big = write_batch(tmp_path / "big.jsonl", [f"task {i} " + "y" * 200 for i in range(100_000)])
    run_dir = tmp_path / "run"
    proc = cli("run", str(big), "--headless", "--base-url", sim.base_url, "--out", str(run_dir))
    wait_for(
        lambda: run_dir.is_dir() and any(p.name.startswith(".journal.sqlite.") for p in run_dir.iterdir()),
        "the journal being built",
        timeout=120,
    )
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert not (run_dir / "journal.sqlite").exists(), "a journal appeared although its creation was killed"
    resumed = run_cli("resume", str(run_dir), "--headless")
    assert resumed.returncode == 2 and "no journal" in resumed.stderr, resumed.stderr
    assert_clean_exit(resumed.stderr)
    small = write_batch(tmp_path / "small.jsonl", ["a", "b"])
    again = run_cli("run", str(small), "--headless", "--base-url", sim.base_url, "--out", str(run_dir))
    assert again.returncode == 0, again.stderr
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")], "the killed build's file was left"


# --------------------------------------------------------------------------- 7. Retry-After


@pytest.mark.parametrize("fate", ["ra999999", "rainf", "rams1e12"])
def test_an_absurd_retry_after_is_capped(tmp_path, hostile, fate, backend):
    server = hostile()
    job = write_batch(tmp_path / "job.jsonl", [f"a [[hostile:{fate}x1]]", "b"])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        server.base_url,
        "--out",
        str(tmp_path / "run"),
        "--max-retry-after",
        "1",
        "--backend",
        backend,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    delays = journal_rows(tmp_path / "run", "SELECT retry_in_s FROM attempts WHERE outcome = 'retry'")
    assert len(delays) == 1 and delays[0][0] <= 1.2, delays


async def test_a_capped_wait_is_announced_with_what_the_provider_asked(tmp_path, hostile):
    server = hostile()
    session = open_session(tmp_path, server.base_url, ["a [[hostile:ra999999x1]]"], max_retry_after_s=0.5)
    seen: list[str] = []
    events: list[RateGateClosed] = []
    session.engine.subscribe(
        lambda e: (events.append(e), seen.append(gate_wait(session.engine))) if isinstance(e, RateGateClosed) else None
    )
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 1
    assert [(e.seconds, e.asked_s) for e in events] == [(0.5, 999999.0)]
    assert "asked 999999s, capped at 0.5s" in seen[0], seen


def test_x_should_retry_false_is_obeyed(tmp_path, hostile, backend):
    server = hostile()
    job = write_batch(tmp_path / "job.jsonl", ["a [[hostile:noretry]]"])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        server.base_url,
        "--out",
        str(tmp_path / "run"),
        "--backend",
        backend,
    )
    assert result.returncode == 1, result.stderr
    assert server.requests["POST /v1/chat/completions"] == 1


# --------------------------------------------------------------------------- 9. one spend ledger


async def test_the_budget_is_one_ledger_across_sessions(tmp_path, sim):
    session = open_session(
        tmp_path, sim.base_url, [f"budgeted task {i}" for i in range(80)], prices=PRICES, concurrency=4, budget_usd=0.1
    )
    try:
        first = await session.run()
    finally:
        await session.aclose()
    assert first.stop_reason.startswith("budget")
    spent_first = json.loads((tmp_path / "run" / "summary.json").read_text())["cost_usd"]
    resumed = SwarmSession.reopen(tmp_path / "run", settings=EngineSettings.of(concurrency=4, budget_usd=0.1))
    try:
        second = await resumed.run()
    finally:
        await resumed.aclose()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert second.stop_reason.startswith("budget")
    assert spent_first <= summary["cost_usd"] <= 0.1, "the resume spent as if nothing had been spent before"


# --------------------------------------------------------------------------- a stop right after dispatch


async def test_an_abort_right_after_dispatch_leaves_no_agent_running(tmp_path, sim):
    """Attempts cancelled before their first step never run their own cleanup: the engine must
    still count them as stopped (the screen once showed 'running' cells for good)."""
    from swarm_tui.core.events import AttemptStarted
    from swarm_tui.engine import TaskState

    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(20)], concurrency=10, adaptive=False)
    engine = session.engine
    started = []

    def on_event(event) -> None:
        if isinstance(event, AttemptStarted):
            started.append(event.index)
            if len(started) == 5:
                engine.abort("test: abort while dispatching")

    engine.subscribe(on_event)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.aborted and finished.cancelled >= 15
    assert not [i for i, s in engine.states.items() if s is TaskState.RUNNING]
    assert engine.admission.in_flight == 0 and engine.stats.in_flight == 0
    # unfinished on disk as in the engine: the calls cut are cancelled, the tasks never sent stay queued
    rows = journal_rows(tmp_path / "run", "SELECT COUNT(*) FROM tasks WHERE state IN ('cancelled', 'queued')")
    assert rows[0][0] == finished.cancelled


async def test_headless_resume_progress_counts_the_whole_run(tmp_path, sim):
    """'0/400 done' when 126 were done: the progress line and summary count every session."""
    import io

    from swarm_tui.frontend.headless import progress_line, run_headless

    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(30)], concurrency=2, adaptive=False)
    session.engine.subscribe(
        lambda e: session.engine.abort("test: stop early") if session.engine.stats.succeeded >= 10 else None
    )
    try:
        await session.run()
    finally:
        await session.aclose()
    done_before = journal_rows(tmp_path / "run", "SELECT COUNT(*) FROM tasks WHERE state = 'succeeded'")[0][0]
    assert 10 <= done_before < 30
    resumed = SwarmSession.reopen(tmp_path / "run")
    first_lines: list[str] = []
    resumed.engine.subscribe(
        lambda e: first_lines.append(progress_line(resumed.engine.stats)) if not first_lines else None
    )
    try:
        code = await run_headless(resumed, stream=io.StringIO())
    finally:
        await resumed.aclose()
    assert code == 0
    assert first_lines[0].startswith(f"{done_before}/30 done"), first_lines[0]


def test_temporary_files_of_a_killed_export_are_removed_by_the_next_writer(tmp_path, sim):
    job = write_batch(tmp_path / "job.jsonl", ["a", "b"])
    run_dir = tmp_path / "run"
    assert run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(run_dir)).returncode == 0
    leftovers = [run_dir / ".results.jsonl.999999.tmp", run_dir / ".summary.json.999998.tmp"]
    for path in leftovers:
        path.write_text("half an export")
    result = run_cli("resume", str(run_dir), "--headless")
    assert result.returncode == 0, result.stderr
    assert not [p for p in leftovers if p.exists()]
    assert len(read_jsonl(run_dir / "results.jsonl")) == 2
