"""`swarm-tui ctl` and `runs`: a run read and steered from a script, whoever drives it (a headless
run, the console in a real pty), each command's effect in the journal's event log as a key
press's is; a run nobody drives says so and `ctl resume` starts its driver; `ctl` loads no engine;
no option is taken for an abbreviation of another."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from swarm_tui.core.events import (
    AttemptStarted,
    ConcurrencyChanged,
    RunPaused,
    RunResumed,
    TaskCancelled,
    TaskQueued,
    TaskState,
)
from swarm_tui.journal import Journal
from swarm_tui.journal.control import Command

from tests.conftest import REPO, run_cli, write_batch
from tests.helpers import open_session, wait_until

ALWAYS_FAILS = " [[sim:500]]"
NOT_FOUND = " [[sim:404]]"


def ctl(run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli("ctl", str(run_dir), *args, timeout=60)


def ctl_json(run_dir: Path, *args: str) -> tuple[int, dict]:
    done = ctl(run_dir, *args, "--json")
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, f"--json prints one object: {done.stdout!r} {done.stderr!r}"
    return done.returncode, json.loads(lines[0])


def logged(run_dir: Path) -> list:
    journal = Journal.open(run_dir, readonly=True)
    try:
        return [event for _, _, event in journal.history.log_since(0)]
    finally:
        journal.close()


def wait_for(condition, what: str, timeout: float = 60.0, child: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert child is None or child.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        time.sleep(0.1)


def status_of(run_dir: Path) -> dict:
    code, data = ctl_json(run_dir, "status")
    assert code == 0, data
    return data


def start_tui(args: list[str], cwd: Path) -> tuple[subprocess.Popen, threading.Thread]:
    """`swarm-tui ARGS` in a real pseudo-terminal (80x24): the console, not a headless run; its
    screen is read and thrown away as it is drawn (a full pty would stop it)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"}
    child = subprocess.Popen(
        [sys.executable, "-m", "swarm_tui", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    os.close(slave)

    def drain() -> None:
        while True:
            try:
                if not os.read(master, 65536):
                    break
            except OSError:
                break
        os.close(master)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    return child, reader


@pytest.mark.parametrize("front", ["headless", "console"])
def test_ctl_steers_a_run_and_what_it_did_is_in_the_event_log(tmp_path, front):
    prompts = [f"task {i}" + (ALWAYS_FAILS if i in (0, 1) else "") for i in range(80)]
    job = write_batch(tmp_path / "job.jsonl", prompts)
    run_dir = tmp_path / "run"
    args = ["run", str(job), "--out", str(run_dir), "--sim-latency-ms", "400", "--sim-error-rate", "0",
            "--concurrency", "2", "--no-adaptive", "--max-attempts", "1"]  # fmt: skip
    if front == "headless":
        child = subprocess.Popen(
            [sys.executable, "-m", "swarm_tui", *args, "--headless"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
        )
        reader = None
    else:
        child, reader = start_tui(args, tmp_path)
    try:
        wait_for(
            lambda: (run_dir / "journal.sqlite").exists() and status_of(run_dir)["live"], "the run live", child=child
        )
        wait_for(lambda: status_of(run_dir)["counts"]["failed"] == 2, "the two failures", child=child)

        code, paused = ctl_json(run_dir, "pause")
        assert code == 0 and paused["taken"] and paused["result"]["paused"] is True
        assert status_of(run_dir)["state"] == "paused", "the status read after the answer says the pause"
        code, limited = ctl_json(run_dir, "limit", "3")
        assert code == 0 and limited["result"] == {"limit": 3}
        code, retried = ctl_json(run_dir, "retry", "--failed")
        assert code == 0 and retried["result"]["queued"] == 2
        code, cancelled = ctl_json(run_dir, "cancel", "task-0050", "#61")
        assert code == 0 and cancelled["result"]["cancelled"] == 2
        code, resumed = ctl_json(run_dir, "resume")
        assert code == 0 and resumed["taken"] and resumed["result"]["paused"] is False
        code, aborted = ctl_json(run_dir, "abort")
        assert code == 0 and aborted["taken"]
        wait_for(lambda: not status_of(run_dir)["live"], "the abort to end the run")
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
        child.wait(60)
        if reader is not None:
            reader.join(10)

    events = logged(run_dir)
    kinds = [type(e) for e in events]
    assert RunPaused in kinds and RunResumed in kinds
    assert any(isinstance(e, ConcurrencyChanged) and e.limit == 3 and e.reason == "ctl" for e in events)
    requeued = {e.index for e in events if isinstance(e, TaskQueued) and e.previous is TaskState.FAILED}
    assert requeued == {0, 1}, "retry --failed queued the two failed agents again"
    assert {50, 60} <= {e.index for e in events if isinstance(e, TaskCancelled)}
    after_resume = kinds.index(RunResumed)
    assert AttemptStarted in kinds[after_resume:], "dispatch went on after the resume"


async def test_pause_now_holds_the_calls_in_flight_and_resume_sends_them_first(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=600.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(12)], concurrency=4, adaptive=False)
    runner = asyncio.create_task(session.run())
    try:
        engine = session.engine
        await wait_until(lambda: engine.board.live_tasks == 4, "four calls in flight")
        held_now = set(engine.board.in_flight)
        answer = session.apply_command(Command(1, "pause", {"now": True, "by": "ctl"}))
        assert answer == {"paused": True, "held": 4}
        await wait_until(lambda: engine.board.live_tasks == 0, "the held calls cut")
        assert {i for i, s in engine.states.items() if s is TaskState.CANCELLED} == held_now
        await asyncio.sleep(0.3)
        assert engine.board.live_tasks == 0, "nothing is sent while paused"
        started: list[int] = []
        engine.subscribe(lambda e: isinstance(e, AttemptStarted) and started.append(e.index))
        session.apply_command(Command(2, "resume", {"by": "ctl"}))
        await wait_until(lambda: len(started) >= 5, "dispatch after the resume")
        # the one task the dispatcher held for a slot when the pause came goes first, then the held ones
        assert held_now <= set(started[:5]), (held_now, started)
        finished = await asyncio.wait_for(runner, 30)
    finally:
        if not runner.done():
            session.engine.abort()
            await runner
        await session.aclose()
    assert finished.succeeded == 12 and finished.failed == 0, "a held call is no failed attempt"
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        cut = [a for a in journal.queries.attempts_since(0) if a["outcome"] == "cancelled"]
    finally:
        journal.close()
    assert {a["idx"] for a in cut} == held_now, "each held call is journaled (it may be billed)"


async def test_retry_errored_picks_the_failed_tasks_of_one_class(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=5.0)
    prompts = [f"task {i}" + (ALWAYS_FAILS if i < 3 else NOT_FOUND if i < 5 else "") for i in range(10)]
    session = open_session(tmp_path, sim.base_url, prompts, max_attempts=1)
    try:
        await session.run()
        assert session.failures.counts() == {"server_error": 3, "not_found": 2}
        assert session.pulse().failed_by_class == {"server_error": 3, "not_found": 2}
        assert session.apply_command(Command(1, "retry", {"errored": "not_found"})) == {"queued": 2}
        assert sorted(i for i, s in session.engine.states.items() if s is TaskState.QUEUED) == [3, 4]
        assert session.apply_command(Command(2, "retry", {"errored": "timeout"}))["queued"] == 0
        await session.run()
    finally:
        await session.aclose()
    assert session.failures.counts() == {"server_error": 3, "not_found": 2}, "they failed again, each of its class"


def test_a_run_nobody_drives_says_so_and_ctl_resume_starts_its_driver(tmp_path):
    prompts = [f"task {i}" for i in range(30)]
    job = write_batch(tmp_path / "job.jsonl", prompts)
    run_dir = tmp_path / "run"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "swarm_tui",
            "run",
            str(job),
            "--headless",
            "--out",
            str(run_dir),
            "--sim-latency-ms",
            "300",
            "--sim-error-rate",
            "0",
            "--concurrency",
            "2",
        ],  # fmt: skip
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: (run_dir / "journal.sqlite").exists() and status_of(run_dir)["done"] >= 2, "answers", child=child
        )
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    status = status_of(run_dir)
    assert status["state"] == "dead" and not status["live"], status
    assert status["next"] == f"swarm-tui ctl {run_dir} resume"
    refused = ctl(run_dir, "pause")
    assert refused.returncode == 3 and "nobody drives this run" in refused.stderr, refused.stderr
    code, data = ctl_json(run_dir, "retry", "--failed")
    assert code == 3 and data["error"] == "not driven" and "--retry-failed" in data["next"]

    code, resumed = ctl_json(run_dir, "resume")
    assert code == 0 and resumed["live"] and resumed["log"].endswith("resume.log"), resumed
    done = ctl(run_dir, "wait", "--timeout", "90")
    assert done.returncode == 0, done.stdout + done.stderr
    final = status_of(run_dir)
    assert final["state"] == "finished" and final["counts"]["succeeded"] == 30 and final["pid"] is None
    assert ctl(run_dir, "wait", "--json").returncode == 0


def test_status_agents_show_and_results_of_a_finished_run(tmp_path):
    prompts = [f"task {i}" + (NOT_FOUND if i == 4 else "") for i in range(8)]
    job = write_batch(tmp_path / "job.jsonl", prompts)
    run_dir = tmp_path / "run"
    done = run_cli(
        "run", str(job), "--headless", "--out", str(run_dir), "--sim-latency-ms", "5", "--sim-error-rate", "0"
    )
    assert done.returncode == 1, done.stderr
    status = status_of(run_dir)
    assert status["state"] == "finished" and status["counts"]["failed"] == 1
    assert status["failed_by_class"] == {"not_found": 1}
    assert status["next"] == f"swarm-tui ctl {run_dir} resume --retry-failed"
    text = ctl(run_dir, "status").stdout
    assert "finished" in text and "8/8 done (7 succeeded, 1 failed)" in text and "1 not_found" in text

    ids = ctl(run_dir, "agents", "--state", "failed", "--ids").stdout.split()
    assert ids == ["task-0004"]
    code, shown = ctl_json(run_dir, "show", "#1")
    assert code == 0 and shown["custom_id"] == "task-0000" and shown["answer"] and shown["attempts"]
    code, failed = ctl_json(run_dir, "show", "task-0004")
    assert failed["error"] and failed["answer"] is None and failed["state"] == "failed"
    code, page = ctl_json(run_dir, "results", "--state", "succeeded", "--limit", "5")
    assert page["total"] == 7 and len(page["results"]) == 5 and page["next_offset"] == 5
    code, rest = ctl_json(run_dir, "results", "--state", "succeeded", "--offset", "5")
    assert [r["custom_id"] for r in rest["results"]] == ["task-0006", "task-0007"] and rest["next_offset"] is None
    unknown = ctl(run_dir, "show", "task-9999")
    assert unknown.returncode == 2 and "no task task-9999" in unknown.stderr
    code, said = ctl_json(run_dir, "show", "task-9999")
    assert code == 2 and said["error"] == "bad input" and "task-9999" in said["message"]
    code, said = ctl_json(tmp_path / "nowhere", "status")
    assert code == 2 and said["error"] == "bad input" and "no journal" in said["message"]


def test_runs_lists_each_run_with_its_state(tmp_path):
    root = tmp_path / "runs"
    job = write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(4)])
    assert run_cli("run", str(job), "--headless", "--out", str(root / "a"), "--sim-latency-ms", "5",
                   "--sim-error-rate", "0").returncode == 0  # fmt: skip
    (root / "not-a-run").mkdir()
    listed = run_cli("runs", str(root), "--json")
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)["runs"]
    assert [(Path(r["run"]).name, r["state"], r["done"], r["total"]) for r in runs] == [("a", "finished", 4, 4)]
    table = run_cli("runs", str(root)).stdout
    assert "finished" in table and "4/4" in table


def test_ctl_status_answers_without_loading_the_engine(tmp_path):
    job = write_batch(tmp_path / "job.jsonl", ["a", "b"])
    run_dir = tmp_path / "run"
    assert run_cli("run", str(job), "--headless", "--out", str(run_dir), "--sim-latency-ms", "5").returncode in (0, 1)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "swarm_tui", "ctl", str(run_dir), "status", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    heavy = {"openai", "textual", "aiohttp", "httpx", "swarm_tui.engine", "swarm_tui.providers", "swarm_tui.sim"}
    assert not heavy & imported, heavy & imported
    assert "swarm_tui.journal" in imported


@pytest.mark.parametrize(
    "argv",
    [
        ["resume", "RUN", "--id", "5"],  # once taken for --idle-timeout
        ["run", "JOB", "--idle", "5", "--headless"],
        ["ctl", "RUN", "agents", "--stat", "failed"],
    ],
)
def test_an_abbreviated_option_is_refused(tmp_path, argv):
    job = write_batch(tmp_path / "job.jsonl", ["a"])
    argv = [str(job) if a == "JOB" else str(tmp_path / "run") if a == "RUN" else a for a in argv]
    done = run_cli(*argv)
    assert done.returncode == 2 and "unrecognized arguments" in done.stderr, done.stderr


def test_each_command_line_names_its_command_module():
    import argparse

    from swarm_tui.cli.main import COMMANDS, build_parser

    def names(parser: argparse.ArgumentParser) -> list[str]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return list(sub.choices)

    assert names(build_parser()) == list(COMMANDS)
    for name in COMMANDS:
        assert names(build_parser(only=name)) == [name], f"{name}: its module adds another command"


def test_every_key_of_status_json_is_documented(tmp_path):
    job = write_batch(tmp_path / "job.jsonl", ["a", "b" + NOT_FOUND])
    run_dir = tmp_path / "run"
    run_cli("run", str(job), "--headless", "--out", str(run_dir), "--sim-latency-ms", "5", "--sim-error-rate", "0")
    status = status_of(run_dir)
    page = (REPO / "docs" / "guides" / "ctl.md").read_text(encoding="utf-8")
    keys = set(status) | set(status["counts"]) | {k for e in status["endpoints"].values() for k in e}
    keys |= {"in_flight", "in_tools", "in_batch", "backoff", "queued", "held"}  # a live run's waits
    missing = sorted(key for key in keys if f"`{key}`" not in page)
    assert not missing, f"status --json keys the ctl page does not name: {missing}"
