"""The headless log: what a long run says when nobody watches it. Real runs on the
simulator over loopback, a real attached view steering through the journal, the README's
recipe run as written in an empty directory with its output redirected to a file."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from swarm_tui.engine.stats import RunStats
from swarm_tui.frontend.attached import AttachedRun
from swarm_tui.frontend.headless import run_headless
from swarm_tui.frontend.progress_lines import ProgressLines

from tests.conftest import REPO, run_cli
from tests.helpers import open_session, wait_until

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
PROGRESS = re.compile(
    rf"^{STAMP}  (?:round \d+/\d+  )?\d+/\d+ done  \d+ failed  \d+ in flight  [\d.]+ req/s  "
    r"(?:ETA [\d:-]+|PAUSED)  (?:\$\d+\.\d{4}|price unknown)"
)


def test_progress_lines_come_on_a_steady_grid_and_a_late_tick_writes_one():
    now = [100.0]
    stream = io.StringIO()
    stats = RunStats(total=400, succeeded=126, failed=2, in_flight=50)
    log = ProgressLines(stream, stats, every_s=5.0, clock=lambda: now[0], wall_clock=lambda: 1_796_119_205.0)
    written = []
    for t in (100.0, 104.9, 105.0, 105.2, 109.9, 121.0, 124.9, 125.0):
        now[0] = t
        written.append(log.tick())
    assert written == [False, False, True, False, False, True, False, True]
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0] == "2026-12-01T10:00:05Z  126/400 done  2 failed  50 in flight  0.0 req/s  ETA --:--  $0.0000"


async def test_a_headless_log_gets_progress_and_a_line_for_each_change_made_from_an_attached_view(
    tmp_path, sim_factory
):
    sim = sim_factory(latency_ms=120.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(40)], concurrency=2, adaptive=False)
    stream = io.StringIO()  # not a terminal: the log a file would get
    attached = AttachedRun(tmp_path / "run")

    async def steer_from_another_view() -> None:
        await wait_until(lambda: session.engine.stats.succeeded >= 4, "the first answers")
        attached.pause()
        await wait_until(lambda: "paused: nothing new is sent" in stream.getvalue(), "the pause in the log")
        await wait_until(lambda: "PAUSED" in stream.getvalue().rsplit("paused:", 1)[1], "a paused progress line")
        attached.set_concurrency(3)
        await wait_until(lambda: "concurrency ceiling set to 3 (attached view)" in stream.getvalue(), "the limit")
        attached.resume()
        await wait_until(lambda: "resumed: dispatch goes on" in stream.getvalue(), "the resume in the log")

    steering = asyncio.create_task(steer_from_another_view())
    try:
        code = await run_headless(session, stream=stream, every_s=0.2)
        await steering
    finally:
        await session.aclose()
        await attached.aclose()
    assert code == 0
    lines = stream.getvalue().splitlines()
    end = next(n for n, line in enumerate(lines) if "  finished: 40 done, 0 failed in " in line)
    assert all(re.match(STAMP, line) for line in lines[: end + 1]), lines
    progress = [line for line in lines[:end] if PROGRESS.match(line)]
    assert len(progress) >= 3, lines
    order = [
        next(n for n, line in enumerate(lines) if text in line)
        for text in ("paused:", "concurrency ceiling set to 3", "resumed:")
    ]
    assert order == sorted(order) and order[-1] < end
    assert lines[end + 1].startswith("40/40 succeeded, 0 failed, 0 unfinished in "), lines[end + 1]


async def test_json_logs_are_one_object_a_line_with_stable_keys(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=60.0, latency_sigma=0.0)
    session = open_session(
        tmp_path,
        sim.base_url,
        [f"task {i}" + (" [[sim:500]]" if i == 3 else "") for i in range(20)],
        concurrency=2,
        max_attempts=2,
    )
    stream = io.StringIO()
    try:
        code = await run_headless(session, stream=stream, log_format="json", every_s=0.1)
    finally:
        await session.aclose()
    assert code == 1
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert all(re.fullmatch(STAMP, r["ts"]) and r["event"] for r in records)
    kinds = [r["event"] for r in records]
    assert kinds[0] == "start" and kinds[1] == "run_started" and kinds[-2:] == ["finished", "summary"]
    progress = [r for r in records if r["event"] == "progress"]
    assert progress and all(
        {"done", "total", "failed", "in_flight", "req_s", "eta_s", "cost_usd", "paused"} <= set(r) for r in progress
    )
    summary = records[-1]
    assert (summary["succeeded"], summary["failed"]) == (19, 1)
    assert summary["next"] == f"retry the failed tasks with: swarm-tui resume {tmp_path / 'run'} --retry-failed"


async def test_a_resume_with_retry_failed_reports_its_own_time_and_does_not_suggest_itself(tmp_path, sim):
    from swarm_tui.run.session import SwarmSession

    session = open_session(
        tmp_path, sim.base_url, [f"task {i}" + (" [[sim:500]]" if i == 1 else "") for i in range(5)], max_attempts=1
    )
    try:
        await session.run()
    finally:
        await session.aclose()
    db = __import__("sqlite3").connect(tmp_path / "run" / "journal.sqlite")
    with db:  # the run was created an hour ago
        db.execute("UPDATE attempts SET started_at = started_at - 3600")
    db.close()
    resumed = SwarmSession.reopen(tmp_path / "run", retry_failed=True)
    stream = io.StringIO()
    try:
        code = await run_headless(resumed, stream=stream, retried=True)
    finally:
        await resumed.aclose()
    assert code == 1
    out = stream.getvalue()
    head = next(line for line in out.splitlines() if line.startswith("4/5 succeeded"))
    session_s = float(re.search(r"unfinished in ([\d.]+)s \(this session", head).group(1))
    assert session_s < 600 and "since the run's first call" in head, head
    assert "--retry-failed" not in out.split(head, 1)[1]
    assert f"1 still failed after the retry: their errors are in {tmp_path / 'run'}/errors.jsonl" in out


def readme_recipe() -> list[str]:
    """The README's SSH recipe: the commands of the block under **Over SSH.** that start the run."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("**Over SSH.**", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [c for c in commands if c and not c.startswith(("tail ", "swarm-tui attach"))]


def recipe_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user's shell: `swarm-tui` on the PATH, this checkout importable."""
    bin_dir = Path(sys.executable).parent
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "SWARM_TUI_CONFIG": str(tmp_path / "config.toml"),
    }


def wait_for_file_text(path: Path, text: str, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        content = path.read_text(encoding="utf-8") if path.exists() else ""
        if text in content:
            return content
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} never reached {path}; it holds:\n{content}")
        time.sleep(0.1)


def test_the_readmes_ssh_recipe_works_as_written_in_an_empty_directory(tmp_path):
    commands = readme_recipe()
    assert commands[0] == "mkdir -p runs" and commands[1].startswith("nohup swarm-tui run ")
    empty = tmp_path / "empty"
    empty.mkdir()
    started = subprocess.run(
        ["sh", "-c", "\n".join(commands)],
        cwd=empty,
        env=recipe_env(tmp_path),
        timeout=30,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    assert started.returncode == 0, started.stderr
    log = wait_for_file_text(empty / "runs" / "big.log", "succeeded, ")
    lines = log.splitlines()
    assert re.match(rf"{STAMP}  swarm-tui: 100 tasks, swarm-100 -> sim \(SIMULATED\)", lines[0]), lines[0]
    assert any(re.match(rf"{STAMP}  finished: ", line) for line in lines), log
    assert (empty / "runs" / "big" / "journal.sqlite").exists()  # what `swarm-tui attach runs/big` reads


def test_a_redirected_log_gets_progress_lines_while_the_run_goes_on(tmp_path):
    """The recipe's shape (nohup, stdout and stderr into a file) on a slower simulator: progress
    lines arrive in the file before the run ends, at the interval asked for."""
    empty = tmp_path / "empty"
    empty.mkdir()
    command = (
        "mkdir -p runs\nnohup swarm-tui run --headless --out runs/slow --sim-latency-ms 800 --concurrency 20 "
        "--log-every 1 > runs/slow.log 2>&1 &"
    )
    subprocess.run(
        ["sh", "-c", command], cwd=empty, env=recipe_env(tmp_path), timeout=30, check=True, stdin=subprocess.DEVNULL
    )
    log_path = empty / "runs" / "slow.log"
    early = wait_for_file_text(log_path, " in flight  ")  # a progress line, while the run goes on
    assert "finished:" not in early
    log = wait_for_file_text(log_path, "succeeded, ")
    progress = [line for line in log.splitlines() if PROGRESS.match(line)]
    assert len(progress) >= 3, log


def test_a_job_with_tools_says_they_are_starting_before_anything_else(tmp_path, sim):
    from tests.conftest import write_batch

    job = write_batch(tmp_path / "job.jsonl", ["add 2 and 3 [[sim:tools=1]]"], max_tokens=1024)
    tools = tmp_path / "tools.toml"
    tools.write_text('[[tools.python]]\nfunction = "tests.agent_tools:add"\n')
    result = run_cli(
        "run",
        str(job),
        "--tools",
        str(tools),
        "--headless",
        "--base-url",
        sim.base_url,
        "--out",
        str(tmp_path / "run"),
        env={"PYTHONPATH": str(REPO)},
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    first = result.stderr.splitlines()[0]
    assert first == "swarm-tui: starting the job's tools to check them (its Python tools) ...", first


def test_every_state_change_has_its_line_and_its_stable_json_keys():
    from swarm_tui.core.events import (
        BatchEnded,
        BatchSubmitted,
        ConcurrencyChanged,
        EndpointSwitched,
        PhaseChanged,
        QualityDrift,
        RunFinished,
        RunStopping,
    )

    stream = io.StringIO()
    log = ProgressLines(stream, RunStats(total=10), log_format="json", wall_clock=lambda: 1_796_119_205.0)
    for event in (
        ConcurrencyChanged(12, "429", None),  # the adaptive limit's own move: no line
        ConcurrencyChanged(20, "attached view", ceiling=20),
        EndpointSwitched("fallback", "5xx above 1% of recent attempts"),
        QualityDrift(5.1, 7.9, "flush_memory", "rolling 5.1 < baseline 7.9 - 1.5; memory flushed (2 rounds)", 3),
        RunStopping("budget $1.00 reached"),
        BatchSubmitted("batch_1", "sim/batch", (1, 2, 3), (1, 1, 1)),
        BatchEnded("batch_1", "completed", 2, 1, 0),
        PhaseChanged("fan-out", "round 2/6: 5 agents"),
        RunFinished(10, 0, 0, False),
    ):
        log.observe(event)
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [r["event"] for r in records] == [
        "limit",
        "failover",
        "drift",
        "stopping",
        "batch_submitted",
        "batch_ended",
        "phase",
        "round_finished",
    ]
    assert all(r["ts"] == "2026-12-01T10:00:05Z" and r["message"] for r in records)
    by = {r["event"]: r for r in records}
    assert (by["limit"]["ceiling"], by["limit"]["by"]) == (20, "attached view")
    assert by["failover"]["endpoint"] == "fallback" and by["drift"]["action"] == "flush_memory"
    assert by["stopping"]["reason"] == "budget $1.00 reached"
    assert (by["batch_ended"]["succeeded"], by["batch_ended"]["failed"]) == (2, 1)
    assert (by["phase"]["round"], by["phase"]["rounds"]) == (2, 6)
    assert by["round_finished"]["message"] == "round 2/6 finished: 10 done, 0 failed"
    log.progress()
    assert json.loads(stream.getvalue().splitlines()[-1])["round"] == 2


def test_the_bell_rings_on_a_terminal_only_and_only_when_asked():
    from swarm_tui.core.events import RunStopping

    rings = []
    for live, bell in ((True, True), (True, False), (False, True)):
        stream = io.StringIO()
        log = ProgressLines(stream, RunStats(total=1), live=live, bell=bell)
        log.observe(RunStopping("error rate 50% above --fail-on-error 20%"))
        log.finish()
        rings.append(stream.getvalue().count("\a"))
    assert rings == [2, 0, 0], "a stop and the end, on a terminal that asked; a log file never gets a BEL"


def test_run_options_without_run_apply_to_the_demo(tmp_path):
    """`swarm-tui --headless ...` is the demo with run's options (it was an "invalid choice" of
    command, naming the option's value); --help and --version stay the command line's own."""
    from swarm_tui.cli.main import command_line

    assert command_line(["--headless", "--out", "x"]) == ["run", "--headless", "--out", "x"]
    assert command_line(["--theme", "swarm-light"]) == ["run", "--theme", "swarm-light"]
    assert [command_line([flag]) for flag in ("-h", "--help", "--version")] == [["-h"], ["--help"], ["--version"]]
    assert command_line(["estimate", "--headless"]) == ["estimate", "--headless"] and command_line([]) == ["run"]
    result = run_cli("--headless", "--sim-latency-ms", "1", "--out", str(tmp_path / "demo"))
    assert "swarm-tui: 100 tasks, swarm-100 -> sim (SIMULATED)" in result.stderr, result.stderr
    assert result.returncode in (0, 1) and (tmp_path / "demo" / "results.jsonl").exists(), result.stderr
