"""What-if replay: a recorded run's provider, played offline at other settings.

A run is recorded against a simulator on loopback; `swarm-tui replay` plays it at twice its
concurrency with no network (the recorded endpoint hears nothing); a real run at that
concurrency then says whether the prediction held (within 15%)."""

from __future__ import annotations

import re

from tests.conftest import run_cli, write_batch


def makespans(report: str) -> tuple[float, float]:
    match = re.search(r"^makespan\s+([\d.]+) s\s+([\d.]+) s$", report, re.MULTILINE)
    assert match, report
    return float(match.group(1)), float(match.group(2))


def summary_makespan(run_dir) -> float:
    import json

    return json.loads((run_dir / "summary.json").read_text())["makespan_s"]


def test_replay_at_twice_the_concurrency_predicts_a_real_run_within_15_percent(tmp_path, sim_factory):
    sim = sim_factory(mode="process", latency_ms=150, latency_sigma=0.2)
    job = write_batch(tmp_path / "job.jsonl", [f"replayed {i}" for i in range(200)], max_tokens=16)
    recorded = tmp_path / "recorded"
    done = run_cli(
        "run", str(job), "--headless", "--base-url", sim.base_url, "--concurrency", "10", "--out", str(recorded)
    )
    assert done.returncode == 0, done.stderr
    heard = sim.stats()["requests"]

    replayed = run_cli("replay", str(recorded), "--concurrency", "20")
    assert replayed.returncode == 0, replayed.stderr
    assert sim.stats()["requests"] == heard, "a replay sends nothing to the recorded endpoint"
    was, predicted = makespans(replayed.stdout)
    assert abs(was - summary_makespan(recorded)) < 0.5, "the recorded column is the run's own"
    assert "p50 1" in replayed.stdout and "time compressed" in replayed.stdout

    real = tmp_path / "real"
    done = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--concurrency", "20", "--out", str(real))
    assert done.returncode == 0, done.stderr
    actual = summary_makespan(real)
    assert abs(predicted - actual) <= 0.15 * actual, (predicted, actual)


def test_a_run_with_no_answer_cannot_be_replayed_and_says_why(tmp_path, sim_factory):
    sim = sim_factory(error_rate=1.0)
    job = write_batch(tmp_path / "job.jsonl", ["never"], max_tokens=16)
    out = tmp_path / "run"
    run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--max-attempts", "1", "--out", str(out))
    replayed = run_cli("replay", str(out))
    assert replayed.returncode == 2
    assert "no answer to learn the provider from" in replayed.stderr and "journal.sqlite" in replayed.stderr
