"""Liveness over real HTTP: a run never fails a slow answer, says where every agent stands, holds
(not fails) while the account cannot be served, starts gently where no limit is stated, and says
why when nothing connects."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
import time

import pytest
from swarm_tui.core.events import (
    AgentSilent,
    AttemptStarted,
    CallProgress,
    DispatchWaiting,
    RunSuspended,
    SuspensionEnded,
)

from tests.conftest import read_jsonl, run_cli, write_batch
from tests.helpers import attempts_of, open_session, wait_until
from tests.hostile import HostileServer


def json_log(stderr: str) -> list[dict]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


async def run_cli_async(*args: str, timeout: float = 120) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "swarm_tui",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), timeout)
    return process.returncode or 0, err.decode()


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


# --------------------------------------------------------------------------- quota suspends


async def test_a_quota_window_mid_run_suspends_and_resumes_with_every_task_done_once(tmp_path, sim_factory):
    """1,000 tasks; 10 s into the run... the quota runs out for 10 s: nothing fails, nothing is paid
    twice, and the log says the run was suspended and resumed."""
    sim = sim_factory(mode="process", latency_ms=50.0, latency_sigma=0.2, seed=7)
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(1000)])
    run = asyncio.create_task(
        run_cli_async(
            "run",
            str(job),
            "--headless",
            "--log-format",
            "json",
            "--log-every",
            "1",
            "--base-url",
            sim.base_url,
            "--out",
            str(tmp_path / "run"),
            "--concurrency",
            "20",
            timeout=240,
        )
    )
    await wait_until(
        lambda: sim.stats()["successes"] >= 150, "the run got going", timeout=60, step=lambda: asyncio.sleep(0.05)
    )
    sim.update_config(quota_at_s=0.0, quota_for_s=10.0)  # the window opens now, on the simulator's clock
    code, stderr = await run
    assert code == 0, stderr[-3000:]
    results = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert len({r["custom_id"] for r in results}) == 1000 and not read_jsonl(tmp_path / "run" / "errors.jsonl")
    stats = sim.stats()
    assert stats["quota_errors"] >= 1 and stats["duplicate_successes"] <= 1  # the probes' "ping" may succeed once
    task_answers = {p: n for p, n in stats["successes_by_prompt"].items() if p.startswith("task")}
    assert len(task_answers) == 1000 and set(task_answers.values()) == {1}, "a task paid twice"
    kinds = [record["event"] for record in json_log(stderr)]
    assert "suspended" in kinds and "resumed_from_suspension" in kinds, kinds
    assert kinds.index("suspended") < kinds.index("resumed_from_suspension")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["failed"] == 0 and summary["suspensions"][0]["kind"] == "quota"
    assert 5 <= summary["suspensions"][0]["suspended_s"] <= 40


async def test_on_quota_stop_ends_the_run_resumable_with_exit_75(tmp_path, sim_factory):
    sim = sim_factory(quota_at_s=0.0, quota_for_s=3600.0)
    job = write_batch(tmp_path / "job.jsonl", [f"q {i}" for i in range(20)])
    code, stderr = await run_cli_async(
        "run",
        str(job),
        "--headless",
        "--log-format",
        "json",
        "--base-url",
        sim.base_url,
        "--out",
        str(tmp_path / "run"),
        "--on-quota",
        "stop",
    )
    assert code == 75, stderr[-2000:]
    assert not read_jsonl(tmp_path / "run" / "errors.jsonl"), "a task failed for the account's quota"
    record = next(r for r in json_log(stderr) if r["event"] == "suspended")
    assert "--on-quota stop" in record["message"] and record["kind"] == "quota"
    sim.update_config(quota_at_s=None)
    resumed = run_cli("resume", str(tmp_path / "run"), "--headless", "--base-url", sim.base_url)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert len(read_jsonl(tmp_path / "run" / "results.jsonl")) == 20


async def test_a_quota_error_of_one_request_fails_it_once_a_probe_is_answered(tmp_path, sim):
    """A quota error the account does not share (a probe is answered) is the request's own: it
    fails, once, as before; the others are answered and the run is not suspended."""
    session = open_session(tmp_path, sim.base_url, ["no money [[sim:quota]]"] + [f"fine {i}" for i in range(9)])
    events: list = []
    session.engine.subscribe(events.append)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert (finished.succeeded, finished.failed) == (9, 1)
    assert [a["error_class"] for a in attempts_of(tmp_path / "run", 0)] == ["quota"]
    assert not any(isinstance(e, RunSuspended) for e in events)


# --------------------------------------------------------------------------- a wait past the cap


def test_a_provider_that_asks_for_days_suspends_the_run_within_a_bound_then_stops_resumable(tmp_path, hostile):
    """Every call answered 429 `Retry-After: 999999` (past --max-retry-after): the run does not wait
    a capped minute at a time without end, nor fail the tasks it never got to send: it is
    suspended, probed at the cap, and stops resumable once --max-suspend passes (exit 75)."""
    server = hostile(always="ra999999")
    job = write_batch(tmp_path / "job.jsonl", [f"t {i}" for i in range(200)])
    started = time.monotonic()
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--log-format",
        "json",
        "--base-url",
        server.base_url,
        "--out",
        str(tmp_path / "run"),
        "--max-attempts",
        "2",
        "--max-retry-after",
        "1",
        "--max-suspend",
        "4",
        timeout=90,
    )
    assert result.returncode == 75, result.stderr[-2000:]
    assert time.monotonic() - started < 40
    assert not read_jsonl(tmp_path / "run" / "errors.jsonl"), "tasks failed for the provider's wait"
    records = json_log(result.stderr)
    suspended = next(r for r in records if r["event"] == "suspended")
    assert suspended["kind"] == "retry_after" and "999999" in suspended["message"]
    stopping = next(r for r in records if r["event"] == "stopping")
    assert "--max-suspend" in stopping["message"]
    assert sum(server.requests.values()) < 30, server.requests  # a probe a second, not the 200 tasks' attempts


# --------------------------------------------------------------------------- nothing connects


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_run_where_nothing_connects_stops_early_saying_why(tmp_path):
    job = write_batch(tmp_path / "job.jsonl", [f"t {i}" for i in range(200)])
    base = f"http://127.0.0.1:{closed_port()}/v1"
    result = run_cli(
        "run", str(job), "--headless", "--log-format", "json", "--base-url", base, "--out", str(tmp_path / "run")
    )
    assert result.returncode == 1, result.stderr[-2000:]
    stopping = next(r for r in json_log(result.stderr) if r["event"] == "stopping")
    assert "connection refused" in stopping["message"] and base in stopping["message"], stopping
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert "connection refused" in summary["stopped"]["reason"]
    assert summary["requests"]["sent"] < 30 and summary["failed"] < 10, summary["requests"]
    assert summary["unfinished"] > 150, "the tasks never sent must stay to resume"


# --------------------------------------------------------------------------- a gentle start


def test_a_gentle_start_where_limits_are_told_only_on_429s(tmp_path, sim_factory):
    """600 RPM, rate-limit headers only on 429s: the first window ramps, so few requests meet a 429
    (it went out whole after the first answer's wait: 7.4% of them)."""
    sim = sim_factory(mode="process", latency_ms=200.0, latency_sigma=0.2, rpm=600, rate_headers_on_success=False)
    job = write_batch(tmp_path / "job.jsonl", [f"g {i}" for i in range(100)])
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr[-2000:]
    stats = sim.stats()
    assert stats["rate_limited"] / stats["requests"] < 0.02, stats["by_status"]


# --------------------------------------------------------------------------- streams judged by silence


async def test_a_stream_that_stops_mid_answer_is_sent_again_within_the_idle_gap(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=20.0, chunk_delay_ms=30.0, output_tokens=(40, 40), hang_s=600.0)
    prompts = ["stops [[sim:stallx1]]"] + [f"fine {i}" for i in range(5)]
    session = open_session(tmp_path, sim.base_url, prompts, stream=True, idle_timeout_s=2.0, timeout_s=60.0)
    events: list = []
    session.engine.subscribe(events.append)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 6
    first, second = attempts_of(tmp_path / "run", 0)
    assert (first["error_class"], first["outcome"]) == ("broken_stream", "retry"), first
    assert "idle for 2s" in first["error_message"]
    last_chunk = first["started_at"] + first["latency_ms"] / 1000 - 2.0  # its silence began here
    assert second["started_at"] - last_chunk <= 2.0 + 1.0, "sent again later than --stream-idle + 1 s"
    assert second["outcome"] == "ok"
    assert any(isinstance(e, CallProgress) and e.index == 0 and e.ttft_ms is not None for e in events)


@pytest.mark.timeout(180)
async def test_a_steady_slow_stream_is_never_cut(tmp_path, sim_factory):
    """One token a second for 60 s, with --timeout 10 and --stream-idle 5: it completes untouched
    (only its silences judge it), and its figures are journaled."""
    sim = sim_factory(latency_ms=50.0, latency_sigma=0.0, tokens_per_s=1.0, output_tokens=(61, 61))
    session = open_session(tmp_path, sim.base_url, ["slow and steady"], stream=True, idle_timeout_s=5.0, timeout_s=10.0)
    events: list = []
    session.engine.subscribe(events.append)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 1
    (only,) = attempts_of(tmp_path / "run", 0)
    assert only["outcome"] == "ok" and only["latency_ms"] >= 55_000
    assert sim.stats()["requests"] == 1 and not any(isinstance(e, AgentSilent) for e in events)
    progress = [e for e in events if isinstance(e, CallProgress)]
    assert len(progress) >= 10 and progress[-1].tokens >= 25, progress[-3:]  # told every few seconds (chunks)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    figures = summary["streaming"]["custom"]
    assert figures["calls"] == 1 and 0.5 <= figures["tokens_per_s"]["p50"] <= 1.5 and figures["gap_ms"]["p50"] >= 500


# --------------------------------------------------------------------------- what dispatch waits for


async def test_dispatch_says_what_it_waits_for(tmp_path, sim_factory):
    """A slot, then the RPM bucket: each said as it starts to hold the line (and nothing once it is clear)."""
    sim = sim_factory(latency_ms=300.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"w {i}" for i in range(12)], concurrency=2, adaptive=False)
    events: list = []
    session.engine.subscribe(events.append)
    try:
        await session.run()
    finally:
        await session.aclose()
    reasons = [e.reason for e in events if isinstance(e, DispatchWaiting)]
    assert "slot" in reasons and reasons[-1] == "", reasons
    slot = next(e for e in events if isinstance(e, DispatchWaiting) and e.reason == "slot")
    assert slot.detail == "2 of 2 in flight"
    rpm_sim = sim_factory(latency_ms=10.0, latency_sigma=0.0)
    session = open_session(tmp_path, rpm_sim.base_url, [f"r {i}" for i in range(30)], run_name="rpm", rpm=600)
    events = []
    session.engine.subscribe(events.append)
    try:
        await session.run()
    finally:
        await session.aclose()
    assert "rpm" in [e.reason for e in events if isinstance(e, DispatchWaiting)]


async def test_a_call_silent_far_past_what_is_expected_is_flagged_once(tmp_path, sim_factory, monkeypatch):
    """Answers take 20 ms; a call that says nothing for far longer is flagged (not cut: only
    --timeout cuts a plain call) once, with what was expected."""
    from swarm_tui.engine.lanes import liveness

    monkeypatch.setattr(liveness, "SILENT_MIN_S", 1.0)
    monkeypatch.setattr(liveness, "SILENT_UNKNOWN_S", 1.0)
    sim = sim_factory(latency_ms=20.0, latency_sigma=0.1)
    prompts = [f"fine {i}" for i in range(40)] + ["hangs [[sim:hangx1]]"]
    session = open_session(tmp_path, sim.base_url, prompts, concurrency=4, straggler_factor=None, timeout_s=4.0)
    events: list = []
    session.engine.subscribe(events.append)
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 41
    silent = [e for e in events if isinstance(e, AgentSilent)]
    assert [e.index for e in silent] == [40], silent
    assert silent[0].silent_s >= 1.0 and silent[0].expected_s is not None and silent[0].expected_s < 0.5
    assert sum(isinstance(e, AttemptStarted) and e.index == 40 for e in events) == 2  # cut by --timeout, not by it
    assert not any(isinstance(e, SuspensionEnded) for e in events)


# --------------------------------------------------------------------------- every reason, on screen and in the log


def reasons_job(tmp_path) -> tuple:
    """A run that waits on each reason in turn: the RPM bucket (--rpm 60), streams writing 20
    tokens a second, 500s to back off from (once the screen is up), and (patched in mid-run) a
    quota window."""
    prompts = [f"steady {i}" for i in range(5)] + [f"flaky {i} [[sim:500x2]]" for i in range(5)]
    prompts += [f"steady {i}" for i in range(5, 35)]
    return write_batch(tmp_path / "job.jsonl", prompts), ["--stream", "--rpm", "60", "--stream-idle", "10"]


async def open_the_quota_window_mid_run(sim, requests: int = 6) -> None:
    await wait_until(
        lambda: sim.stats()["requests"] >= requests, "the run got going", timeout=60, step=lambda: asyncio.sleep(0.05)
    )
    sim.update_config(quota_at_s=0.0, quota_for_s=3.0)


async def test_the_headless_json_log_says_each_reason_while_the_run_waits_on_it(tmp_path, sim_factory):
    """Each reason is in the log's progress records while the run waits on it; once all four were
    said the run is interrupted (the rest of it, ~45 s at --rpm 60, would show nothing new)."""
    sim = sim_factory(latency_ms=100.0, latency_sigma=0.0, tokens_per_s=20.0, output_tokens=(40, 40))
    job, flags = reasons_job(tmp_path)
    args = ["--headless", "--log-format", "json", "--log-every", "0.25", "--base-url", sim.base_url, *flags]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "swarm_tui",
        "run",
        str(job),
        "--out",
        str(tmp_path / "run"),
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    wanted = {"waiting", "streaming", "backoff", "suspended"}
    seen: set[str] = set()
    said: list[bytes] = []

    async def read_the_log() -> None:
        async for line in process.stderr:
            said.append(line)
            record = json.loads(line) if line.startswith(b"{") else {}
            if record.get("event") == "progress" and "reasons" in record:
                assert record["why"], record
                said_before = wanted <= seen
                seen.update(record["reasons"])
                if wanted <= seen and not said_before:  # all four said: the rest of the run shows nothing new
                    process.send_signal(signal.SIGINT)

    quota = asyncio.create_task(open_the_quota_window_mid_run(sim))
    try:
        await asyncio.wait_for(read_the_log(), 120)
        code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
        quota.cancel()
    assert wanted <= seen, (seen, b"".join(said[-40:]).decode())
    assert code == 130, b"".join(said[-40:]).decode()


def pty_run(args: list[str], until: list[str], *, timeout: float = 120, size: tuple[int, int] = (40, 140)) -> str:
    """Run `swarm-tui ARGS` in a real pseudo-terminal of `size` (rows, columns) until every text of
    `until` has appeared on it (escape sequences stripped), then quit it with `q`; what it drew."""
    import fcntl
    import os
    import pty
    import re
    import select
    import struct
    import subprocess
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(size[1]), "LINES": str(size[0])}
    process = subprocess.Popen(
        [sys.executable, "-m", "swarm_tui", *args], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
    )
    os.close(slave)
    drawn, text = b"", ""
    ansi = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]|\x1b\][^\x07]*\x07")
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not all(word in text for word in until):
            # a screen that stops changing (a run that ended) draws nothing more: wait for it only
            # until the deadline, never in a read that blocks past it
            readable, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if not readable:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
            text = ansi.sub("", drawn.decode("utf-8", "replace"))
    finally:
        try:
            os.write(master, b"q")
            process.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait(5)
        os.close(master)
    return text


async def test_the_console_says_each_reason_while_the_run_waits_on_it(tmp_path, sim_factory):
    """In a real terminal: the run panel counts the agents by why (waiting for the RPM bucket,
    streaming, backing off, suspended) while the run waits on each, and the phase says SUSPENDED."""
    sim = sim_factory(latency_ms=100.0, latency_sigma=0.0, tokens_per_s=20.0, output_tokens=(40, 40))
    job, flags = reasons_job(tmp_path)
    wanted = ["waiting: RPM", "streaming", "backing off", "SUSPENDED", "suspended"]
    args = ["run", str(job), "--base-url", sim.base_url, "--out", str(tmp_path / "run"), *flags]
    drawing = asyncio.create_task(asyncio.to_thread(pty_run, args, wanted))
    await open_the_quota_window_mid_run(sim)
    drawn = await drawing
    missing = [word for word in wanted if word not in drawn]
    assert not missing, (missing, drawn[-2000:])
