"""Process faults: a writer stopped with SIGSTOP and continued keeps its calls in flight
(time it did not run is not a call's time), and SIGHUP / SIGTERM stop a run the way a user who
closed the terminal would want: the answers in flight given a short grace, the outputs written,
the resume command in the log. Real processes, real signals."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from swarm_tui.core.stalls import TICK_S, StallWatch

from tests.conftest import REPO, read_jsonl, run_cli, start_cli, write_batch


def journal_count(run_dir, sql: str) -> int:
    path = run_dir / "journal.sqlite"
    if not path.exists():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        db.close()


def succeeded(run_dir) -> int:
    return journal_count(run_dir, "SELECT COUNT(*) FROM tasks WHERE state = 'succeeded'")


def start_run(tmp_path, base_url: str, n: int, *extra: str) -> tuple[subprocess.Popen, object]:
    job = write_batch(tmp_path / "job.jsonl", [f"process fault task {i}" for i in range(n)])
    run_dir = tmp_path / "run"
    log = open(tmp_path / "run.log", "w")  # noqa: SIM115 - the child writes it until it ends
    child = start_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        base_url,
        "--out",
        str(run_dir),
        *extra,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=os.environ.copy(),
    )
    return child, run_dir


def wait_for(condition, what: str, child: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert child.poll() is None or condition(), f"the run ended before {what}"
        assert time.monotonic() < deadline, f"{what}: not after {timeout} s"
        time.sleep(0.02)


def test_a_writer_stopped_and_continued_pays_for_nothing_twice(tmp_path, sim_factory):
    """SIGSTOP for 5 s while 20 calls are in flight: their answers arrive meanwhile and are used
    when the writer runs again; no deadline counts the 5 s (before: 4 abandoned, paid twice)."""
    sim = sim_factory(mode="process", latency_ms=600.0, latency_sigma=0.2)
    child, run_dir = start_run(tmp_path, sim.base_url, 200, "--concurrency", "20", "--no-adaptive")
    try:
        wait_for(lambda: succeeded(run_dir) >= 60, "60 answers (the straggler deadline armed)", child)
        child.send_signal(signal.SIGSTOP)
        time.sleep(5.0)
        child.send_signal(signal.SIGCONT)
        assert child.wait(120) == 0
    finally:
        if child.poll() is None:
            child.kill()
    assert sim.stats()["duplicate_successes"] == 0, "an answer was paid for twice"
    assert journal_count(run_dir, "SELECT COUNT(*) FROM attempts WHERE error_code = 'straggler'") == 0
    assert journal_count(run_dir, "SELECT COUNT(*) FROM attempts WHERE error_class = 'timeout'") == 0
    assert len(read_jsonl(run_dir / "results.jsonl")) == 200


def busy_until_stopped(stop: Callable[[], None], timeout: float = 30.0) -> float:
    """Call `stop` (which has this process stopped and continued), then run without yielding to the
    event loop until that happened (a jump of the monotonic clock between two reads); the jump, in
    seconds."""
    last = time.monotonic()
    deadline = last + timeout
    stop()
    while True:
        now = time.monotonic()
        if now - last > 1.0:
            return now - last
        assert now < deadline, f"the process was not stopped within {timeout:g} s"
        last = now


async def test_what_runs_first_after_a_stop_does_not_count_the_stop_as_running_time():
    """A stop lands in the middle of a turn of the event loop, and the rest of that turn runs on
    waking, before the stall watch's tick. An attempt that looked there whether its call was late
    read the whole stop as the call's time: a backup went out for a call whose answer was already
    waiting, and the prompt was paid twice. The watch's clock leaves a stop out from its first
    reading after it. A real SIGSTOP of this process, sent by a child that continues it 2 s later."""
    watch = StallWatch.of_running_loop()
    await asyncio.sleep(2 * TICK_S)  # the watch has ticked: the stop below is the only gap it meets
    started = watch.now()
    pid = os.getpid()
    stopper = subprocess.Popen(
        ["sh", "-c", f"read go; kill -STOP {pid}; sleep 2; kill -CONT {pid}"], stdin=subprocess.PIPE
    )
    assert stopper.stdin is not None
    go = stopper.stdin

    def stop() -> None:
        go.write(b"go\n")
        go.flush()

    try:
        stopped_s = busy_until_stopped(stop)  # no await in between: the tick cannot run
        ran_s = watch.now() - started
    finally:
        go.close()
        stopper.wait(30)
    assert stopped_s > 1.5
    assert ran_s < 1.0, f"{ran_s:.1f} s counted as running across a {stopped_s:.1f} s stop"
    await asyncio.sleep(2 * TICK_S)  # the tick comes: it does not count the stop a second time
    assert watch.stalls == 1, "the tick counted the stop a second time"


STOPS = 6
STOP_S = 3.5


def test_a_writer_stopped_and_continued_again_and_again_has_no_prompt_answered_twice(tmp_path, sim_factory):
    """SIGSTOP for 3.5 s, then SIGCONT, six times, while 300 calls of 1.2 s each are in flight: no
    answer is paid twice, the simulator answers each prompt once. Before, the calls out during a
    stop taught the straggler deadline their time without the stop (a call sent just before it and
    read on waking "took" 0.3 s), the deadline fell to its 1 s floor, and the calls still waiting
    to be read on waking got backups: 4 to 84 prompts answered twice in each of 5 runs."""
    sim = sim_factory(mode="process", latency_ms=1200.0, latency_sigma=0.05)
    child, run_dir = start_run(tmp_path, sim.base_url, 3000, "--concurrency", "300", "--no-adaptive")
    try:
        wait_for(lambda: succeeded(run_dir) >= 300, "300 answers (the straggler deadline armed)", child)
        for _ in range(STOPS):
            assert child.poll() is None, "the run ended before the stops"
            child.send_signal(signal.SIGSTOP)
            time.sleep(STOP_S)
            child.send_signal(signal.SIGCONT)
            time.sleep(1.5)  # calls go out again, and are looked at, before the next stop
        assert child.wait(120) == 0, (tmp_path / "run.log").read_text()
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGCONT)
            child.kill()
    answered = Counter(sim.stats()["successes_by_prompt"])
    twice = {prompt: n for prompt, n in answered.items() if n > 1}
    assert not twice, f"{len(twice)} prompts answered more than once: {sorted(twice.items())[:5]}"
    assert len(answered) == len(read_jsonl(run_dir / "results.jsonl")) == 3000


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_a_hangup_stops_dispatch_lets_the_calls_in_flight_answer_and_writes_the_outputs(tmp_path, sim_factory, sig):
    """An SSH connection that drops sends SIGHUP: before, the run died at once with no outputs
    written, and the resume re-sent every call that was in flight."""
    sim = sim_factory(mode="process", latency_ms=800.0, latency_sigma=0.1)
    child, run_dir = start_run(tmp_path, sim.base_url, 300, "--concurrency", "20", "--no-adaptive")
    wait_for(lambda: succeeded(run_dir) >= 20, "the first answers", child)
    in_flight_at_signal = sim.stats()["in_flight"]
    child.send_signal(sig)
    code = child.wait(60)
    log = (tmp_path / "run.log").read_text()
    assert code == 130, log
    assert "Traceback" not in log
    assert f"swarm-tui resume {run_dir}" in log, log
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["succeeded"] == len(read_jsonl(run_dir / "results.jsonl")) > 20
    cancelled = journal_count(run_dir, "SELECT COUNT(*) FROM attempts WHERE outcome = 'cancelled'")
    assert cancelled == 0, f"{cancelled} calls in flight were cut (of {in_flight_at_signal}): the grace is theirs"
    assert sim.stats()["in_flight"] == 0


def test_an_attached_view_tells_a_stopped_writer_from_a_dead_one(tmp_path, sim_factory):
    """A writer stopped with SIGSTOP beats no more, but holds the run's lock: attach says so and
    never offers (or suggests) a resume that would be refused, nor closes the run as killed."""
    from swarm_tui.frontend.attached import HEARTBEAT_STALE_S, AttachedRun

    sim = sim_factory(mode="process", latency_ms=300.0, latency_sigma=0.1)
    child, run_dir = start_run(tmp_path, sim.base_url, 200, "--concurrency", "10", "--no-adaptive")
    try:
        wait_for(lambda: succeeded(run_dir) >= 20, "the first answers", child)
        child.send_signal(signal.SIGSTOP)
        time.sleep(HEARTBEAT_STALE_S + 1.5)
        attached = AttachedRun(run_dir)
        try:
            attached.poll()
            liveness = attached.liveness()
            assert f"stopped (SIGSTOP?) — pid {child.pid}" in liveness, liveness
            assert not attached.live and not attached.resumable
            assert any(state.value == "running" for state in attached.states.values()), "not closed as killed"
        finally:
            import asyncio

            asyncio.run(attached.aclose())
        child.send_signal(signal.SIGCONT)
        assert child.wait(120) == 0
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGCONT)
            child.kill()
    assert sim.stats()["duplicate_successes"] == 0


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_hangup_of_the_console_stops_it_gently_and_writes_the_outputs(tmp_path, sim_factory):
    """The TUI in a real terminal gets SIGHUP (the SSH connection dropped): the answers in flight
    are let in, results.jsonl and summary.json written, exit 130."""
    sim = sim_factory(mode="process", latency_ms=800.0, latency_sigma=0.1)
    job = write_batch(tmp_path / "job.jsonl", [f"hangup task {i}" for i in range(300)])
    run_dir = tmp_path / "run"
    name = f"swarm-hangup-{os.getpid()}"
    env = (
        f"PYTHONPATH={REPO} SWARM_TUI_CONFIG={tmp_path / 'config.toml'} "
        f"PATH={Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    )
    command = (
        f"cd {tmp_path} && env -u COLUMNS -u LINES {env} swarm-tui run {job} --base-url {sim.base_url} "
        f"--concurrency 20 --no-adaptive --out {run_dir}; echo EXIT $? > {tmp_path / 'exit.txt'}; sleep 30"
    )
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "40", command], check=True)
    try:
        deadline = time.monotonic() + 60
        while succeeded(run_dir) < 20:
            assert time.monotonic() < deadline, "the console never got its first answers"
            time.sleep(0.05)
        pid = int((run_dir / ".lock").read_text().split()[0])
        os.kill(pid, signal.SIGHUP)
        deadline = time.monotonic() + 60
        while not (tmp_path / "exit.txt").exists():
            assert time.monotonic() < deadline, "the console did not end after SIGHUP"
            time.sleep(0.1)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
    assert (tmp_path / "exit.txt").read_text().split() == ["EXIT", "130"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["succeeded"] == len(read_jsonl(run_dir / "results.jsonl")) > 20
    assert journal_count(run_dir, "SELECT COUNT(*) FROM attempts WHERE outcome = 'cancelled'") == 0


def test_a_hangup_while_tasks_wait_between_retries_fails_none_of_them_and_resume_finishes_every_one(
    tmp_path, sim_factory
):
    """SIGHUP while tasks wait out a backoff and their next attempts are on the wire: a call that
    fails during the stop's grace leaves its task unfinished (it had attempts left), as the
    console's abort does, and a plain `resume` finishes every task, exit 0. Before, the stop
    journaled such a task failed after 2 of its 4 attempts and the resume ended with it, exit 1."""
    n = 24
    sim = sim_factory(mode="process", latency_ms=50.0, latency_sigma=0.1, hang_s=1.5)  # a hang: a 504 after 1.5 s
    job = write_batch(tmp_path / "job.jsonl", [f"flaky task {i} [[sim:hangx2]]" for i in range(n)])
    run_dir = tmp_path / "run"
    log = open(tmp_path / "run.log", "w")  # noqa: SIM115 - the child writes it until it ends
    child = start_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--out",
        str(run_dir),
        "--concurrency",
        str(n),
        "--no-adaptive",
        "--straggler",
        "off",
        stdout=log,
        stderr=subprocess.STDOUT,
        env=os.environ.copy(),
    )
    retried = "SELECT COUNT(*) FROM attempts WHERE outcome = 'retry'"
    try:  # every first attempt failed, some tasks wait out their backoff, others' next call hangs
        wait_for(
            lambda: journal_count(run_dir, retried) >= n and 1 <= sim.stats()["in_flight"] < n,
            "tasks between their attempts",
            child,
        )
        child.send_signal(signal.SIGHUP)
        code = child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
        log.close()
    stopped = (tmp_path / "run.log").read_text()
    assert code == 130, stopped
    failed = journal_count(run_dir, "SELECT COUNT(*) FROM tasks WHERE state = 'failed'")
    assert failed == 0, f"{failed} tasks with attempts left were failed by the stop:\n{stopped}"
    assert read_jsonl(run_dir / "errors.jsonl") == []
    resumed = run_cli("resume", str(run_dir), "--headless")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    results = read_jsonl(run_dir / "results.jsonl")
    assert sorted(r["custom_id"] for r in results) == [f"task-{i:04d}" for i in range(n)]
    assert read_jsonl(run_dir / "errors.jsonl") == []
