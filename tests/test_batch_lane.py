"""The batch lane (`--lane batch|auto`) against the simulator's real Batch API on loopback.

Every figure asserted here comes from the simulator's own counters (`/sim/stats`: files
uploaded, batches created, how often any custom_id was submitted) or from the run directory a
user would read: nothing paid twice, every custom_id once in results.jsonl ∪ errors.jsonl.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from collections import Counter

import openai
import pytest
from swarm_tui.core.events import BatchEnded, BatchProgress, BatchSubmitted, TaskState
from swarm_tui.engine.lanes.batch_lines import input_line
from swarm_tui.journal import Journal
from swarm_tui.run.session import SwarmSession

from tests.conftest import kill_when, read_jsonl, run_cli, start_cli, write_batch
from tests.helpers import open_session, run_session, wait_until

FAST_POLL = {"batch_poll_s": 0.05, "batch_poll_max_s": 0.2}
PRICES = {"custom/sim-1": {"input": 2.0, "output": 8.0, "batch_input": 1.0, "batch_output": 4.0}}
"""The test model's price, live and batch (OpenAI's: half)."""


def custom_ids(run_dir) -> Counter:
    ids = Counter(line["custom_id"] for line in read_jsonl(run_dir / "results.jsonl"))
    ids.update(line["custom_id"] for line in read_jsonl(run_dir / "errors.jsonl"))
    return ids


def every_task(n: int) -> Counter:
    return Counter(f"task-{i:04d}" for i in range(n))


async def test_lane_auto_sends_a_live_share_then_one_batch_billed_at_the_batch_rate(tmp_path, sim_factory):
    # a batch of 1 s: polled from 0.05 s on, it is seen running (BatchProgress) even on a loaded
    # machine; at 0.3 s a CI run's first poll came after it had completed
    sim = sim_factory(batch_seconds=1.0)
    prompts = [f"auto lane task {i}" for i in range(2000)]
    session = open_session(tmp_path, sim.base_url, prompts, lane="auto", prices=PRICES, **FAST_POLL)
    events: list = []
    finished = await run_session(session, events)

    assert finished.succeeded == 2000 and finished.failed == 0
    stats = sim.stats()
    batch = stats["batch"]
    assert stats["successes"] == 40  # the live share: 2% of 2,000 (at least 20)
    assert batch["batches_created"] == 1 and batch["lines_submitted"] == 1960
    assert batch["lines_by_custom_id_max"] == 1
    run_dir = tmp_path / "run"
    assert custom_ids(run_dir) == every_task(2000)
    line = read_jsonl(run_dir / "results.jsonl")[-1]
    assert set(line) == {"id", "custom_id", "response", "error"} and line["error"] is None
    assert line["response"]["status_code"] == 200 and line["response"]["body"]["object"] == "chat.completion"

    summary = json.loads((run_dir / "summary.json").read_text())
    by_endpoint = summary["cost_breakdown"]["by_endpoint"]
    live, batched = by_endpoint["custom"], by_endpoint["custom/batch"]
    assert live["attempts"] == 40 and batched["attempts"] == 1960
    live_rate = live["cost_usd"] / live["completion"]
    batch_rate = batched["cost_usd"] / batched["completion"]
    assert batch_rate == pytest.approx(live_rate / 2, rel=0.05)  # OpenAI's batch price: half
    assert summary["cost_breakdown"]["by_lane"]["batch"] == pytest.approx(batched["cost_usd"])
    assert [b["status"] for b in summary["batches"]] == ["completed"]
    assert summary["latency_ms"]["p50"] is not None and summary["latency_ms"]["p99"] < 10_000  # live calls only

    submitted = [e for e in events if isinstance(e, BatchSubmitted)]
    assert len(submitted) == 1 and len(submitted[0].indices) == 1960
    assert min(submitted[0].indices) == 40  # after the live share
    assert any(isinstance(e, BatchProgress) for e in events)
    assert [e for e in events if isinstance(e, BatchEnded)][0].succeeded == 1960


async def test_a_job_over_the_providers_limits_is_split_into_several_batches(tmp_path, sim_factory):
    sim = sim_factory(batch_seconds=0.2)
    session = open_session(
        tmp_path, sim.base_url, [f"split {i}" for i in range(250)], lane="batch", batch_max_requests=100, **FAST_POLL
    )
    finished = await run_session(session)
    assert finished.succeeded == 250
    batch = sim.stats()["batch"]
    assert batch["batches_created"] == 3 and batch["lines_submitted"] == 250 and batch["lines_by_custom_id_max"] == 1
    assert sim.stats()["requests"] == 0  # lane batch: nothing live


async def test_byte_limit_splits_too(tmp_path, sim_factory):
    sim = sim_factory(batch_seconds=0.1)
    session = open_session(
        tmp_path,
        sim.base_url,
        [f"bytes {i} " + "x" * 400 for i in range(30)],
        lane="batch",
        batch_max_bytes=5_000,
        **FAST_POLL,
    )
    await run_session(session)
    assert sim.stats()["batch"]["batches_created"] >= 3


async def test_error_lines_are_retried_live_in_lane_auto_and_never_paid_twice(tmp_path, sim_factory):
    sim = sim_factory(batch_seconds=0.2, batch_error_rate=0.1, seed=11)
    session = open_session(tmp_path, sim.base_url, [f"errors {i}" for i in range(300)], lane="auto", **FAST_POLL)
    events: list = []
    finished = await run_session(session, events)
    assert finished.succeeded == 300
    batch = sim.stats()["batch"]
    ended = next(e for e in events if isinstance(e, BatchEnded))
    assert ended.requeued == batch["lines_failed"] > 0
    assert sim.stats()["successes"] == 20 + ended.requeued  # the live share, then each failed line once, live
    assert batch["lines_by_custom_id_max"] == 1
    assert custom_ids(tmp_path / "run") == every_task(300)


async def test_a_line_that_cannot_succeed_fails_the_task_into_errors_jsonl(tmp_path, sim_factory):
    sim = sim_factory(batch_seconds=0.1)
    prompts = [f"fine {i}" for i in range(5)] + ["[[sim:400]] refused"]
    session = open_session(tmp_path, sim.base_url, prompts, lane="batch", **FAST_POLL)
    finished = await run_session(session)
    assert finished.succeeded == 5 and finished.failed == 1
    errors = read_jsonl(tmp_path / "run" / "errors.jsonl")
    assert [e["custom_id"] for e in errors] == ["task-0005"]
    assert errors[0]["response"]["status_code"] == 400
    assert sim.stats()["batch"]["lines_submitted"] == 6  # a 400 is never retried


async def test_an_expired_batch_puts_its_unrun_lines_into_the_next_batch(tmp_path, sim_factory):
    """A simulator whose every batch expires half done: each batch carries only the lines the
    one before did not run, until a task's attempts are spent (then it fails as expired)."""
    sim = sim_factory(batch_seconds=0.2, batch_expire_after=0.5)
    session = open_session(tmp_path, sim.base_url, [f"expiry {i}" for i in range(40)], lane="batch", **FAST_POLL)
    events: list = []
    finished = await run_session(session, events)
    ended = [e for e in events if isinstance(e, BatchEnded)]
    submitted = [len(e.indices) for e in events if isinstance(e, BatchSubmitted)]
    assert [e.status for e in ended] == ["expired"] * 4
    assert submitted == [40, 20, 10, 5]  # each batch: what the one before left
    assert [e.succeeded for e in ended] == [20, 10, 5, 2]
    assert finished.succeeded == 37 and finished.failed == 3  # 4 attempts each (--max-attempts)
    assert sim.stats()["batch"]["lines_by_custom_id_max"] == 4
    errors = read_jsonl(tmp_path / "run" / "errors.jsonl")
    assert {e["error"]["code"] for e in errors} == {"batch_expired"}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert [b["status"] for b in summary["batches"]] == ["expired"] * 4
    assert custom_ids(tmp_path / "run") == every_task(40)


async def test_abort_cancels_the_batch_keeps_what_it_completed_and_resume_sends_only_the_rest(tmp_path, sim_factory):
    sim = sim_factory(batch_seconds=3.0)
    prompts = [f"abort {i}" for i in range(200)]
    session = open_session(tmp_path, sim.base_url, prompts, lane="batch", **FAST_POLL)
    engine = session.engine
    events: list = []
    engine.subscribe(events.append)
    run = asyncio.create_task(session.run())
    await wait_until(
        lambda: any(isinstance(e, BatchProgress) and e.completed >= 20 for e in events), "the batch made progress"
    )
    engine.abort()
    finished = await run
    await session.aclose()
    assert finished.aborted
    kept = finished.succeeded
    assert 20 <= kept < 200 and finished.cancelled == 200 - kept
    assert sim.stats()["batch"]["cancelled"] == 1

    resumed = SwarmSession.reopen(tmp_path / "run")
    kept_indices = {i for i, state in resumed.engine.states.items() if state is TaskState.SUCCEEDED}
    events.clear()
    finished = await run_session(resumed, events)
    assert finished.succeeded == 200
    [again] = [e for e in events if isinstance(e, BatchSubmitted)]
    assert set(again.indices) == set(range(200)) - kept_indices  # what the cancelled batch completed is kept
    assert sim.stats()["batch"]["lines_submitted"] == 200 + (200 - kept)
    assert custom_ids(tmp_path / "run") == every_task(200)


async def test_resume_finds_a_batch_created_before_its_id_was_journaled(tmp_path, sim_factory):
    """A process killed between creating the batch and journaling its id: the next session
    looks the batch up by its input file and adopts it instead of submitting again."""
    sim = sim_factory(batch_seconds=0.2)
    session = open_session(tmp_path, sim.base_url, [f"orphan {i}" for i in range(10)], lane="batch", **FAST_POLL)
    lane = session.engine.lane
    assert lane is not None
    lines = [(i, 1) for i in range(10)]
    data = b"".join(input_line(session.engine.tasks[i]) for i, _ in lines)
    file_id = await session.client.upload_batch_file("x.jsonl", data)
    session.journal.records.record_batch_intent(lane.endpoint, file_id, lines)
    await session.client.create_batch(file_id, {})  # ... and the process died here
    await session.aclose()

    resumed = SwarmSession.reopen(tmp_path / "run")
    finished = await run_session(resumed)
    assert finished.succeeded == 10
    batch = sim.stats()["batch"]
    assert batch["batches_created"] == 1 and batch["lines_by_custom_id_max"] == 1
    assert custom_ids(tmp_path / "run") == every_task(10)


async def test_resume_submits_an_intent_whose_batch_was_never_created(tmp_path, sim_factory):
    sim = sim_factory(batch_seconds=0.1)
    session = open_session(tmp_path, sim.base_url, [f"never {i}" for i in range(6)], lane="batch", **FAST_POLL)
    lane = session.engine.lane
    assert lane is not None
    lines = [(i, 1) for i in range(6)]
    data = b"".join(input_line(session.engine.tasks[i]) for i, _ in lines)
    file_id = await session.client.upload_batch_file("x.jsonl", data)
    session.journal.records.record_batch_intent(lane.endpoint, file_id, lines)  # ... and the process died here
    await session.aclose()

    finished = await run_session(SwarmSession.reopen(tmp_path / "run"))
    assert finished.succeeded == 6
    assert sim.stats()["batch"]["batches_created"] == 1
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        assert journal.history.open_batches() == []
        assert [a["number"] for a in journal.queries.attempts_of(0)] == [2]  # the intent's number stays taken
    finally:
        journal.close()


async def test_lane_auto_submits_no_batch_when_the_live_share_fails(tmp_path, sim_factory, monkeypatch):
    sim = sim_factory(require_key="sk-right")
    monkeypatch.setenv("WRONG_KEY", "sk-wrong")
    session = open_session(
        tmp_path,
        sim.base_url,
        [f"bad key {i}" for i in range(100)],
        lane="auto",
        api_key_env="WRONG_KEY",
        **FAST_POLL,
    )
    finished = await run_session(session)
    # the live share (20) goes out a few at a time (the gentle start: no limit is stated), so the
    # refusals stop dispatch before all of it is sent; nothing is left half-decided
    assert 3 <= finished.failed <= 20 and finished.succeeded == 0 and finished.failed + finished.cancelled == 100
    # a key the provider refuses stops dispatch on its own (fail fast, saying why)
    assert "refused 3 calls in a row (auth 401" in (finished.stop_reason or "")
    assert sim.stats()["batch"]["files_uploaded"] == 0


async def test_lane_auto_submits_no_batch_when_every_live_call_is_a_bad_request(tmp_path, sim_factory):
    """A broken prompt (422 for every call, not a refusal of the account): the lane's own rule."""
    sim = sim_factory()
    session = open_session(
        tmp_path, sim.base_url, [f"broken {i} [[sim:422]]" for i in range(100)], lane="auto", **FAST_POLL
    )
    finished = await run_session(session)
    assert finished.failed == 20 and finished.succeeded == 0 and finished.cancelled == 80
    assert "no batch" in (finished.stop_reason or "")
    assert sim.stats()["batch"]["files_uploaded"] == 0


def batch_row(journal_path) -> tuple[str | None, int]:
    if not journal_path.exists():
        return None, 0
    db = sqlite3.connect(f"file:{journal_path}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT batch_id, COUNT(*) FROM batches WHERE batch_id IS NOT NULL").fetchone()
        return row[0], row[1]
    except sqlite3.OperationalError:
        return None, 0
    finally:
        db.close()


def test_kill_9_while_the_batch_runs_then_resume_reattaches_and_submits_nothing_twice(tmp_path, sim_factory):
    sim = sim_factory(mode="process", batch_seconds=4.0)
    job = write_batch(tmp_path / "job.jsonl", [f"killed lane {i}" for i in range(2000)])
    run_dir = tmp_path / "run"
    child = start_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--lane",
        "auto",
        "--batch-poll",
        "0.1",
        "--out",
        str(run_dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    kill_when(child, lambda: batch_row(run_dir / "journal.sqlite")[0] is not None, "the batch submitted")
    batch_id = batch_row(run_dir / "journal.sqlite")[0]
    assert sim.stats()["batch"]["batches_created"] == 1

    result = run_cli("resume", str(run_dir), "--headless", "--batch-poll", "0.1")
    assert result.returncode == 0, result.stderr
    batch = sim.stats()["batch"]
    assert batch["batches_created"] == 1 and batch["lines_by_custom_id_max"] == 1  # re-attached, not re-sent
    assert sim.stats()["successes"] == 40  # the live share, once
    assert custom_ids(run_dir) == every_task(2000)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [b["batch_id"] for b in summary["batches"]] == [batch_id]
    assert summary["succeeded"] == 2000


async def test_an_attached_view_replays_the_batch_as_the_live_run_saw_it(tmp_path, sim_factory):
    from swarm_tui.view.follower import LogFollower

    sim = sim_factory(batch_seconds=0.3)
    session = open_session(tmp_path, sim.base_url, [f"attach {i}" for i in range(60)], lane="auto", **FAST_POLL)
    await run_session(session)
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        follower = LogFollower(journal, range(60))
        follower.poll()
        assert all(state is TaskState.SUCCEEDED for state in follower.view.values())
        [view] = follower.figures.batches.values()
        assert view.status == "completed" and view.requests == 40 and view.completed == 40
    finally:
        journal.close()


async def test_the_sdk_sees_the_batch_the_lane_made(tmp_path, sim_factory):
    """The lane speaks the Batch API as the SDK does: its batch is an ordinary one to any client."""
    sim = sim_factory(batch_seconds=0.1)
    session = open_session(tmp_path, sim.base_url, ["one", "two"], lane="batch", **FAST_POLL)
    await run_session(session)
    client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="sk-test")
    try:
        batches = [b async for b in client.batches.list()]
        assert len(batches) == 1 and batches[0].endpoint == "/v1/chat/completions"
        assert batches[0].request_counts.completed == 2
    finally:
        await client.close()


async def test_one_model_a_batch_file(tmp_path, sim_factory):
    """A job naming two models is sent as one batch a model (the provider refuses a mixed file)."""
    sim = sim_factory(batch_seconds=0.1)
    job = tmp_path / "mixed.jsonl"
    job.write_text(
        "".join(
            json.dumps(
                {
                    "custom_id": f"task-{i:04d}",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {"model": f"sim-{i % 2}", "messages": [{"role": "user", "content": f"mixed {i}"}]},
                }
            )
            + "\n"
            for i in range(10)
        )
    )
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--lane",
        "batch",
        "--batch-poll",
        "0.05",
        "--out",
        str(tmp_path / "run"),
    )
    assert result.returncode == 0, result.stderr
    batch = sim.stats()["batch"]
    assert batch["batches_created"] == 2 and batch["files_rejected"] == 0
    assert custom_ids(tmp_path / "run") == every_task(10)


@pytest.fixture
def no_batch_api():
    """A relay that speaks chat completions only: its /files answers an HTML page."""
    from tests.hostile import HostileServer

    server = HostileServer().start()
    yield server
    server.stop()


def test_a_relay_without_the_batch_api_lane_auto_runs_everything_live(tmp_path, no_batch_api):
    job = write_batch(tmp_path / "job.jsonl", [f"relay {i}" for i in range(60)])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        no_batch_api.base_url,
        "--lane",
        "auto",
        "--out",
        str(tmp_path / "run"),
    )
    assert result.returncode == 0, result.stderr
    assert sum(no_batch_api.answered.values()) == 60  # the 20 of the live share, then the 40 the batch could not take
    assert no_batch_api.requests["POST /v1/files"] == 1 and not no_batch_api.requests["POST /v1/batches"]
    assert custom_ids(tmp_path / "run") == every_task(60)


def test_a_relay_without_the_batch_api_lane_batch_stops_saying_why(tmp_path, no_batch_api):
    job = write_batch(tmp_path / "job.jsonl", [f"relay {i}" for i in range(10)])
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        no_batch_api.base_url,
        "--lane",
        "batch",
        "--out",
        str(tmp_path / "run"),
    )
    assert result.returncode == 1
    assert "refused the batch (upload)" in result.stderr
    assert sum(no_batch_api.answered.values()) == 0
    assert "resume with: swarm-tui resume" in result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["unfinished"] == 10 and summary["failed"] == 0


def test_a_disk_full_while_the_lines_are_journaled_loses_none_of_them(tmp_path, sim_factory):
    """`ulimit -f`: the journal cannot take the batch's 2,000 answers. The batch stays open in
    the journal (its lines are written in one transaction or not at all), and the resume reads
    its output file again: every answer kept, nothing submitted twice."""
    from tests.test_paid_answers import cli as spawn

    sim = sim_factory(mode="process", batch_seconds=0.5)
    job = write_batch(tmp_path / "job.jsonl", [f"disk full {i}" for i in range(2000)])
    run_dir = tmp_path / "run"
    child = spawn(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--lane",
        "batch",
        "--batch-poll",
        "0.1",
        "--out",
        str(run_dir),
        limit_file_bytes=1_500_000,
    )
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == 1, stderr
    assert "journal write failed" in stderr and "file size limit" in stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["succeeded"] == 0 and summary["batches"][0]["status"] != "completed"

    result = run_cli("resume", str(run_dir), "--headless", "--batch-poll", "0.1")
    assert result.returncode == 0, result.stderr
    batch = sim.stats()["batch"]
    assert batch["batches_created"] == 1 and batch["lines_by_custom_id_max"] == 1
    assert custom_ids(run_dir) == every_task(2000)


def test_a_toml_job_names_its_lane_and_a_wrong_one_is_refused_before_anything_is_sent(tmp_path, sim_factory):
    sim = sim_factory(batch_seconds=0.1)
    job = tmp_path / "job.toml"
    job.write_text('name = "lanes"\nmodel = "sim-1"\nlane = "batch"\n[tasks]\ncount = 5\nprompt = "lane {agent}"\n')
    result = run_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--batch-poll",
        "0.05",
        "--out",
        str(tmp_path / "run"),
    )
    assert result.returncode == 0, result.stderr
    assert sim.stats()["batch"]["lines_submitted"] == 5 and sim.stats()["requests"] == 0

    job.write_text('name = "lanes"\nmodel = "sim-1"\nlane = "bulk"\n[tasks]\ncount = 5\nprompt = "lane {agent}"\n')
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run2"))
    assert result.returncode == 2
    assert f"{job}:3" in result.stderr and "lane" in result.stderr and "unknown lane 'bulk'" in result.stderr
    assert not (tmp_path / "run2").exists()


async def test_a_quit_leaves_the_batch_running_and_resume_collects_it(tmp_path, sim_factory):
    sim = sim_factory(batch_seconds=1.0)
    session = open_session(tmp_path, sim.base_url, [f"quit {i}" for i in range(50)], lane="batch", **FAST_POLL)
    events: list = []
    session.engine.subscribe(events.append)
    run = asyncio.create_task(session.run())
    await wait_until(lambda: any(isinstance(e, BatchSubmitted) for e in events), "the batch was submitted")
    session.engine.abort("quit", leave_batches=True)
    finished = await run
    await session.aclose()
    assert finished.succeeded == 0 and sim.stats()["batch"]["cancelled"] == 0  # still running at the provider

    finished = await run_session(SwarmSession.reopen(tmp_path / "run"))
    assert finished.succeeded == 50
    batch = sim.stats()["batch"]
    assert batch["batches_created"] == 1 and batch["lines_by_custom_id_max"] == 1
