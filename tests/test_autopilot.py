"""Say when and how much, it plans the rest: `--deadline`, with or without `--budget`.

Each test runs the real CLI against a simulator on loopback whose limits it is never told
(600 RPM, 200 ms answers) and whose Batch API turns a batch around in a few seconds (or not
in time), and judges the plan by what happened: when the run ended, what it cost against the
same answers all live, which lane carried each task, and that no task was answered twice."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from swarm_tui.engine.lanes.autopilot import Measured, deadline_at, plan

from tests.conftest import run_cli, write_batch

MODEL = "gpt-4.1-mini"
"""A priced model with batch rates (half the live price)."""


def start(sim_factory, **config):
    return sim_factory(mode="process", latency_ms=200, latency_sigma=0.1, rpm=600, **config)


def run(tmp_path: Path, sim, n: int, *flags: str, name: str = "run"):
    job = write_batch(tmp_path / f"{name}.jsonl", [f"{name} {i}" for i in range(n)], model=MODEL, max_tokens=16)
    out = tmp_path / name
    done = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(out), *flags, timeout=300)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else None
    return done, out, summary


def lanes_of_answers(out: Path) -> dict[str, int]:
    with sqlite3.connect(out / "journal.sqlite") as db:
        rows = db.execute(
            "SELECT CASE WHEN endpoint LIKE '%/batch' THEN 'batch' ELSE 'live' END, COUNT(*), SUM(cost_usd) "
            "FROM attempts WHERE outcome = 'ok' GROUP BY 1"
        ).fetchall()
    return {lane: count for lane, count, _ in rows}


def cost_all_live(out: Path) -> float:
    """What the same answers cost had every one been a live call (a batch line costs half)."""
    with sqlite3.connect(out / "journal.sqlite") as db:
        live, batch = db.execute(
            "SELECT COALESCE(SUM(CASE WHEN endpoint NOT LIKE '%/batch' THEN cost_usd END), 0), "
            "COALESCE(SUM(CASE WHEN endpoint LIKE '%/batch' THEN cost_usd END), 0) FROM attempts"
        ).fetchone()
    return live + 2 * batch


def answered_once(sim, out: Path, n: int) -> None:
    """Every task has one result, no live prompt was answered twice, no batch line was submitted
    twice, and no task answered in a batch was answered live too."""
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["custom_id"] for r in results) == [f"task-{i:04d}" for i in range(n)]
    live = dict(sim.stats()["successes_by_prompt"])
    assert set(live.values()) <= {1}, "a task was answered twice live"
    assert sim.stats()["batch"]["custom_ids_resubmitted"] == 0
    with sqlite3.connect(out / "journal.sqlite") as db:
        in_batches = {
            row[0]
            for row in db.execute(
                "SELECT t.custom_id FROM attempts a JOIN tasks t ON t.idx = a.idx "
                "WHERE a.outcome = 'ok' AND a.endpoint LIKE '%/batch'"
            )
        }
    live_ids = {f"task-{int(prompt.split()[-1]):04d}" for prompt in live}
    assert not live_ids & in_batches, "a task answered in a batch was sent live too"
    assert len(live_ids) + len(in_batches) == n


def test_a_deadline_live_alone_would_miss_is_kept_with_batches_at_under_07x_the_live_cost(tmp_path, sim_factory):
    sim = start(sim_factory, batch_seconds=3)
    done, out, summary = run(tmp_path, sim, 300, "--deadline", "20s")  # live alone: 300 / 10 a second = 30 s
    assert done.returncode == 0, done.stderr
    assert summary["succeeded"] == 300
    assert summary["deadline"]["met"], summary["deadline"]
    assert summary["makespan_s"] < 20
    assert summary["cost_usd"] < 0.7 * cost_all_live(out), (summary["cost_usd"], cost_all_live(out))
    first = summary["plans"][0]
    assert first["live"] > 0 and first["batch"] > 0, "live takes what it can by the deadline, batches the rest"
    assert "ride on a batch turnaround not known yet" in first["reason"]
    assert any("a batch ended" in p["reason"] for p in summary["plans"]), "the turnaround seen, the plan moved"
    assert "plan:" in done.stderr, "the headless log says the plan"
    answered_once(sim, out, 300)


def test_a_deadline_with_room_runs_nine_tasks_in_ten_at_the_batch_price(tmp_path, sim_factory):
    sim = start(sim_factory, batch_seconds=3)
    done, out, summary = run(tmp_path, sim, 300, "--deadline", "10m")
    assert done.returncode == 0, done.stderr
    lanes = lanes_of_answers(out)
    assert lanes.get("batch", 0) >= 0.9 * 300, lanes
    assert summary["deadline"]["met"]
    answered_once(sim, out, 300)


def test_a_batch_that_cannot_end_in_time_is_pulled_back_to_live_before_it_is_too_late(tmp_path, sim_factory):
    sim = start(sim_factory, batch_seconds=40)  # its batches end in 40 s, a cancel takes 4 s
    done, out, summary = run(tmp_path, sim, 120, "--deadline", "30s")  # live alone: 12 s
    assert done.returncode == 0, done.stderr
    assert summary["succeeded"] == 120 and summary["deadline"]["met"], summary["deadline"]
    assert any("cancelled, its unrun lines sent live" in p["reason"] for p in summary["plans"]), summary["plans"]
    assert sim.stats()["batch"]["cancelled"] >= 1
    lanes = lanes_of_answers(out)  # what the batch ran before its cancel is kept: paid once
    assert lanes["live"] > lanes.get("batch", 0) and sum(lanes.values()) == 120, lanes
    answered_once(sim, out, 120)


def test_an_impossible_deadline_and_budget_are_said_with_numbers_and_the_budget_holds(tmp_path, sim_factory):
    sim = start(sim_factory, batch_seconds=3)
    done, out, summary = run(tmp_path, sim, 300, "--deadline", "5s", "--budget", "0.001")
    assert done.returncode != 0
    assert "plan: the deadline or the budget cannot hold" in done.stderr
    said = next(p for p in summary["plans"] if not p["feasible"])
    assert "raise the budget to $" in said["reason"] and "allow" in said["reason"], said
    assert summary["cost_usd"] <= 0.001


@pytest.mark.parametrize("when", ["25:00", "9:75", "soon", "-5m", "0s"])
def test_a_deadline_that_is_no_time_names_the_flag(tmp_path, sim, when):
    done, _, _ = run(tmp_path, sim, 3, f"--deadline={when}")
    assert done.returncode == 2 and "--deadline" in done.stderr, done.stderr
    assert sim.stats()["requests"] == 0


def test_a_clock_time_deadline_that_has_passed_today_is_tomorrow():
    from datetime import datetime

    now = datetime(2026, 12, 1, 22, 30).astimezone()
    assert deadline_at("09:00", now) - now.timestamp() == pytest.approx(10.5 * 3600)
    assert deadline_at("23:00", now) - now.timestamp() == pytest.approx(0.5 * 3600)
    assert deadline_at("90s", now) - now.timestamp() == pytest.approx(90)


def test_the_plan_model_keeps_the_cheap_lane_only_where_the_deadline_allows():
    measured = Measured(live_per_s=10.0, turnaround_s=None, live_cost=1.0, batch_cost=0.5)
    slack = plan(100, 600, measured, None)
    assert (slack.live, slack.batch, slack.feasible) == (0, 100, True)
    tight = plan(1000, 50, measured, None)
    assert tight.live == int(10 * 50 * 0.85) and tight.batch == 1000 - tight.live
    seen = plan(1000, 50, Measured(10.0, 20.0, 1.0, 0.5), None)
    assert (seen.live, seen.batch, seen.finish_s) == (0, 1000, 20.0)
    slow = plan(100, 50, Measured(10.0, 600.0, 1.0, 0.5), None)
    assert (slow.live, slow.batch) == (100, 0)
    broke = plan(100, 600, measured, budget_left=10.0)
    assert not broke.feasible and "raise the budget to $50.0000" in broke.why


async def test_the_console_says_the_plan_and_rings_when_it_cannot_hold(tmp_path, sim_factory):
    """The plan in the console (Pilot, a real run over loopback): a notice for a plan that holds,
    an alert for one that cannot (here: a budget far below what the plan costs)."""
    import time

    from swarm_tui.config import Config
    from swarm_tui.ui.app import make_app

    from tests.helpers import open_session
    from tests.test_ui_app import wait_for

    sim = sim_factory(batch_seconds=2.0)
    prices = {"custom/sim-1": {"input": 2.0, "output": 8.0, "batch_input": 1.0, "batch_output": 4.0}}
    session = open_session(
        tmp_path,
        sim.base_url,
        [f"console {i}" for i in range(60)],
        prices=prices,
        lane="auto",
        deadline_at=time.time() + 0.5,  # the live share alone takes longer: it cannot hold
        budget_usd=0.015,  # the live share fits (about $0.01), the plan for the rest does not
        batch_poll_s=0.05,
        batch_poll_max_s=0.2,
    )
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(
                pilot,
                lambda: any(n.title == "The deadline or the budget cannot hold" for n in app._notifications),
                what="the alert of a plan that cannot hold",
            )
            said = next(n for n in app._notifications if n.title == "The deadline or the budget cannot hold")
            assert "raise the budget to $" in said.message
            await wait_for(pilot, lambda: session.summary is not None, what="the run to end")
    finally:
        await session.aclose()
