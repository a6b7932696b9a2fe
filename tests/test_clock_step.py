"""A system clock stepped mid-run (NTP correcting a drift, a restored VM, `date -s`): the run's
figures are durations on the monotonic clock, never differences of wall times taken across the step.
Before, an hour's step made a short run's `makespan_s` an hour, its cost a minute a fraction of what
it was, "... since the run's first call" an hour, and a deadline met in seconds missed.

A real step: the run's process reads its wall clock through libfaketime (LD_PRELOAD), whose offset
the test changes mid-run (`FAKETIME_TIMESTAMP_FILE`, read again on every call); its monotonic clock
is left the real one (`FAKETIME_DONT_FAKE_MONOTONIC`), as a stepped system clock leaves it. The
simulator runs in a process of its own, on the true clock."""

from __future__ import annotations

import glob
import json
import os
import sqlite3
import subprocess
import time

import pytest

from tests.conftest import start_cli, write_batch

STEP_S = 3600
"""How far the clock is stepped forward mid-run: an hour."""

MODEL = "gpt-4.1-mini"
"""A priced model with batch rates (the deadline's autopilot may send batches)."""


def libfaketime() -> str | None:
    """The preloadable libfaketime (Debian's `faketime` package), or None."""
    for pattern in (
        "/usr/lib/*/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/local/lib/faketime/libfaketime.so.1",
    ):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


LIBFAKETIME = libfaketime()


def journal_value(run_dir, sql: str):
    path = run_dir / "journal.sqlite"
    if not path.exists():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return None
    finally:
        db.close()


@pytest.mark.skipif(LIBFAKETIME is None, reason="needs libfaketime to step a process's clock: apt-get install faketime")
def test_a_clock_stepped_an_hour_mid_run_leaves_its_makespan_cost_rate_and_deadline_true(tmp_path, sim_factory):
    sim = sim_factory(mode="process", latency_ms=300.0, latency_sigma=0.1, batch_seconds=2.0)
    n = 60
    job = write_batch(tmp_path / "job.jsonl", [f"clock task {i}" for i in range(n)], model=MODEL, max_tokens=16)
    run_dir = tmp_path / "run"
    offset = tmp_path / "faketime"
    offset.write_text("+0\n")
    env = {
        **os.environ,
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(offset),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    env.pop("FAKETIME", None)
    log = open(tmp_path / "run.log", "w")  # noqa: SIM115 - the child writes it until it ends
    began = time.monotonic()
    child = start_cli(
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
        "--deadline",
        "60s",
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        answered = "SELECT COUNT(*) FROM tasks WHERE state = 'succeeded'"
        while (journal_value(run_dir, answered) or 0) < 1:
            assert child.poll() is None, (tmp_path / "run.log").read_text()
            assert time.monotonic() < deadline, "no answers within 60 s"
            time.sleep(0.02)
        offset.write_text(f"+{STEP_S}\n")  # the system clock steps an hour forward, mid-run
        code = child.wait(120)
    finally:
        if child.poll() is None:
            child.kill()
        log.close()
    took = time.monotonic() - began
    text = (tmp_path / "run.log").read_text()
    assert code == 0, text
    after_step = journal_value(  # the journal's wall times: answers kept after the step, an hour on
        run_dir, f"SELECT COUNT(*) FROM results WHERE finished_at > (SELECT MIN(at) FROM log) + {STEP_S}"
    )
    assert after_step and after_step >= n // 2, f"{after_step} answers after the step: no step mid-run"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["succeeded"] == n
    assert 0 < summary["makespan_s"] <= took, f"makespan {summary['makespan_s']} s of a run that took {took:.1f} s"
    assert "since the run's first call" not in text, text
    assert summary["cost_usd"] > 0 and took < 60
    assert summary["cost_per_min_usd"] >= summary["cost_usd"], "a run shorter than a minute spent its cost in one"
    assert summary["deadline"]["met"], summary["deadline"]
