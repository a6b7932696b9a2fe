"""A door a route leaves: one that says it cannot serve the run at all (it does not serve the model,
or it states a rate limit of 0) is left for the run, by name, and its tasks go to the other doors.

Each test runs the real CLI in a subprocess against real simulators on loopback (one a door): one
answers 404 `model_not_found` for any model it does not list (`only_listed_models`), or 429 with
`x-ratelimit-limit-requests: 0` to every call (`limit_zero`)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.conftest import read_jsonl, run_cli, write_batch
from tests.test_routes import MODEL, TWO_PRICES, logged, served_once, write_config


def left_by_route(run_dir, door: str) -> list[dict]:
    """The switches that say the route left `door`."""
    return [s for s in logged(run_dir, "EndpointSwitched") if s.get("source") == door and "leaves it" in s["reason"]]


@pytest.mark.parametrize("strategy", ["fallback", "cheapest", "fastest"])
def test_a_door_without_the_model_is_left_and_the_other_door_serves_every_task(tmp_path, sim_factory, strategy):
    lacking, serving = sim_factory(only_listed_models=True), sim_factory()
    write_config(tmp_path, {"cheap": lacking.base_url, "dear": serving.base_url}, TWO_PRICES)
    prompts = [f"no model {i}" for i in range(100)]
    job = write_batch(tmp_path / "job.jsonl", prompts, model=MODEL)
    run_dir = tmp_path / "run"
    done = run_cli(
        "run", str(job), "--headless", "--provider", "cheap,dear", "--route", strategy, "--out", str(run_dir)
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["succeeded"] == 100 and summary["failed"] == 0, summary
    served_once(run_dir, [lacking, serving], prompts)
    assert lacking.stats()["successes"] == 0 and lacking.stats()["requests"] >= 1, "the door was never tried"
    assert not (run_dir / "errors.jsonl").exists() or not read_jsonl(run_dir / "errors.jsonl")
    left = left_by_route(run_dir, "cheap")
    assert len(left) == 1, logged(run_dir, "EndpointSwitched")
    reason = left[0]["reason"]
    assert left[0]["endpoint"] == "dear", left
    assert "endpoint cheap does not serve the model" in reason and "model_not_found" in reason, reason
    assert "its calls go to dear" in reason, reason


def test_a_door_stating_a_limit_of_zero_is_left_and_no_task_fails_for_it(tmp_path, sim_factory):
    zero, healthy = sim_factory(limit_zero=True), sim_factory()
    write_config(tmp_path, {"zero": zero.base_url, "healthy": healthy.base_url})
    prompts = [f"zero limit {i}" for i in range(40)]
    job = write_batch(tmp_path / "job.jsonl", prompts, model=MODEL)
    run_dir = tmp_path / "run"
    done = run_cli(
        "run",
        str(job),
        "--headless",
        "--provider",
        "zero,healthy",
        "--route",
        "fallback",
        "--max-attempts",
        "2",
        "--out",
        str(run_dir),
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["succeeded"] == 40 and summary["failed"] == 0, summary
    served_once(run_dir, [zero, healthy], prompts)
    asked = zero.stats()["requests"]
    assert 1 <= asked <= 5, f"the door stating a limit of 0 was sent {asked} requests"
    left = left_by_route(run_dir, "zero")
    assert len(left) == 1 and left[0]["endpoint"] == "healthy", logged(run_dir, "EndpointSwitched")
    assert "endpoint zero states a rate limit of 0" in left[0]["reason"], left
    assert "x-ratelimit-limit-requests: 0" in left[0]["reason"], left


def test_a_route_with_no_door_left_stops_saying_why_and_a_retry_of_its_failed_finishes(tmp_path, sim_factory):
    first, second = sim_factory(only_listed_models=True), sim_factory(only_listed_models=True)
    write_config(tmp_path, {"first": first.base_url, "second": second.base_url})
    prompts = [f"nowhere {i}" for i in range(50)]
    job = write_batch(tmp_path / "job.jsonl", prompts, model=MODEL)
    run_dir = tmp_path / "run"
    done = run_cli("run", str(job), "--headless", "--provider", "first,second", "--out", str(run_dir))
    assert done.returncode != 0, done.stderr
    stopped = json.loads((run_dir / "summary.json").read_text())["stopped"]["reason"]
    assert "no endpoint of the route can serve this run" in stopped, stopped
    assert "first does not serve the model" in stopped and "second does not serve the model" in stopped, stopped
    sent = first.stats()["requests"] + second.stats()["requests"]
    assert sent <= 10, f"{sent} requests to two doors that serve no model of the run"
    second.update_config(models=[MODEL])  # the second door now serves it
    resumed = run_cli("resume", str(run_dir), "--headless", "--retry-failed")
    assert resumed.returncode == 0, resumed.stderr
    results = read_jsonl(run_dir / "results.jsonl")
    assert sorted(r["custom_id"] for r in results) == [f"task-{i:04d}" for i in range(50)]
    assert first.stats()["successes"] == 0
    answered = Counter(second.stats()["successes_by_prompt"])
    assert answered == Counter(prompts), "a task was answered twice, or not at all"
