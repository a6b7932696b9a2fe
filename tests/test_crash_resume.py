"""A run killed with SIGKILL at an arbitrary moment resumes without re-sending a success."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections import Counter

from tests.conftest import kill_when, read_jsonl, run_cli, start_cli, write_batch


def succeeded_indices(journal_path) -> set[int]:
    if not journal_path.exists():
        return set()
    db = sqlite3.connect(f"file:{journal_path}?mode=ro", uri=True)
    try:
        return {row[0] for row in db.execute("SELECT idx FROM tasks WHERE state = 'succeeded'")}
    except sqlite3.OperationalError:  # not created yet
        return set()
    finally:
        db.close()


def test_sigkill_mid_run_then_resume_keeps_exactly_once(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=60, latency_sigma=0.4, error_rate=0.05, seed=3)
    prompts = [f"crash test task {i}" for i in range(300)]
    job = write_batch(tmp_path / "job.jsonl", prompts)
    run_dir = tmp_path / "run"
    child = start_cli(
        "run",
        str(job),
        "--headless",
        "--base-url",
        sim.base_url,
        "--out",
        str(run_dir),
        "--concurrency",
        "20",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    kill_when(child, lambda: len(succeeded_indices(run_dir / "journal.sqlite")) >= 60, "60 answers journaled")

    done_before = succeeded_indices(run_dir / "journal.sqlite")
    assert 60 <= len(done_before) < 300
    sim.reset()
    result = run_cli("resume", str(run_dir), "--headless")
    assert result.returncode == 0, result.stderr

    resent = Counter(sim.stats()["successes_by_prompt"])
    assert not set(resent) & {prompts[i] for i in done_before}, "a journaled success was sent again"
    assert set(resent) == {prompts[i] for i in range(300) if i not in done_before}

    ids = Counter(line["custom_id"] for line in read_jsonl(run_dir / "results.jsonl"))
    ids.update(line["custom_id"] for line in read_jsonl(run_dir / "errors.jsonl"))
    assert ids == Counter(f"task-{i:04d}" for i in range(300))
    answers = {
        line["custom_id"]: line["response"]["body"]["choices"][0]["message"]["content"]
        for line in read_jsonl(run_dir / "results.jsonl")
    }
    assert all(answers[f"task-{i:04d}"].startswith(f"Sim answer to: {prompts[i]}") for i in range(300))


def test_resume_of_a_finished_run_sends_nothing(tmp_path, sim):
    job = write_batch(tmp_path / "job.jsonl", ["a", "b", "c"])
    first = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"))
    assert first.returncode == 0, first.stderr
    sim.reset()
    again = run_cli("resume", str(tmp_path / "run"), "--headless")
    assert again.returncode == 0, again.stderr
    assert sim.stats()["requests"] == 0
    assert len(read_jsonl(tmp_path / "run" / "results.jsonl")) == 3


def test_resume_retry_failed_reruns_only_the_failures(tmp_path, sim):
    job = write_batch(tmp_path / "job.jsonl", ["ok", "flaky [[sim:500x1]]"])
    first = run_cli(
        "run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"), "--max-attempts", "1"
    )
    assert first.returncode == 1
    assert "resume" in first.stderr and "--retry-failed" in first.stderr
    plain = run_cli("resume", str(tmp_path / "run"), "--headless")
    assert plain.returncode == 1, "failed tasks are finished work: plain resume leaves them"
    retried = run_cli("resume", str(tmp_path / "run"), "--headless", "--retry-failed")
    assert retried.returncode == 0, retried.stderr
    assert read_jsonl(tmp_path / "run" / "errors.jsonl") == []
    assert sim.stats()["successes_by_prompt"] == {"ok": 1, "flaky [[sim:500x1]]": 1}
