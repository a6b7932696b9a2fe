"""The judge against the simulator on loopback: a multi-round swarm whose answers degrade as its
memory grows (context pollution), the falling score, the action, and the recovery; each action;
the JSON re-ask; sampling; resume never judging twice; the judge's cost apart."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time

import pytest
from swarm_tui.core.events import AnswerJudged, EndpointSwitched, QualityDrift
from swarm_tui.core.notes import MemoryFlushed
from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import load_job
from swarm_tui.journal import Journal
from swarm_tui.judge.judge import sampled
from swarm_tui.judge.verdict import JUDGE_PREFIX
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.view.follower import LogFollower

from tests.helpers import run_session, wait_until

PRICES = {"custom/sim-1": {"input": 1.0, "output": 4.0}}


def swarm_job(tmp_path, *, agents: int = 30, rounds: int = 6, rate: float = 0.1, judge: str = ""):
    path = tmp_path / "swarm.toml"
    path.write_text(
        f'name = "drift"\nmodel = "sim-1"\ngoal = "watch quality"\n'
        f'[tasks]\ncount = {agents}\nprompt = "finding {{agent}}"\n'
        f"[memory]\nrounds = {rounds}\n"
        f"[judge]\nrate = {rate}\nfirst = 4\nbaseline = 6\nwindow = 5\ndrop = 1.5\n{judge}"
    )
    return load_job(path)


def open_run(tmp_path, job, base_url: str, *, fallback: str | None = None, name: str = "run", **settings):
    profile = ProviderProfile(name="custom", base_url=base_url, fallback_base_url=fallback)
    plan = RunPlan(profile, EngineSettings.of(**settings), prices=PRICES)
    return SwarmSession.open_new(job, plan, tmp_path / name)


def test_the_simulator_knows_the_judge_by_the_judges_own_words():
    from swarm_tui.sim import judging

    assert judging.JUDGE_PREFIX == JUDGE_PREFIX


async def test_pollution_lowers_the_score_the_memory_is_flushed_and_the_score_recovers(tmp_path, sim_factory):
    """The article's third risk row, end to end: answers degrade once the memory holds more
    than 1 round (from round 3: quality 7, then 5); the judge sees it within two rounds of the
    onset, the memory is flushed on its own, and the next round scores near the baseline again."""
    sim = sim_factory(drift_after_rounds=1, seed=5)
    session = open_run(tmp_path, swarm_job(tmp_path), sim.base_url)
    events: list = []
    finished = await run_session(session, events)
    assert finished.failed == 0

    drifts = [e for e in events if isinstance(e, QualityDrift)]
    assert drifts and drifts[0].action == "flush_memory" and "memory flushed" in drifts[0].detail
    first = drifts[0]
    assert first.round in (3, 4)  # onset in round 3: seen within two rounds
    assert first.baseline - first.rolling > 1.5
    quality = json.loads((tmp_path / "run" / "summary.json").read_text())["quality"]
    by_round = {int(r): v["mean"] for r, v in quality["by_round"].items()}
    assert all(by_round[r] >= first.baseline - 1 for r in (1, 2))  # before the onset
    assert by_round[first.round] < first.baseline - 1  # the fall
    assert by_round[first.round + 1] >= first.baseline - 1  # back near the baseline after the flush
    assert quality["drifts"][0]["action"] == "flush_memory"
    assert quality["judged"] == len([e for e in events if isinstance(e, AnswerJudged)])
    judge_attempts = sum(1 for line in _attempts(tmp_path / "run") if line["idx"] <= -1_000_000)
    assert judge_attempts == sim.stats()["judge"]["requests"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert 0 < quality["judge_cost_usd"] < summary["cost_usd"]  # inside the total, shown apart


def _attempts(run_dir):
    journal = Journal.open(run_dir, readonly=True)
    try:
        return journal.queries.attempts_since(0)
    finally:
        journal.close()


@pytest.mark.parametrize("action", ["alert", "pause"])
async def test_alert_and_pause(tmp_path, sim_factory, action):
    sim = sim_factory(drift_after_rounds=1, seed=5)
    session = open_run(tmp_path, swarm_job(tmp_path, rounds=5, judge=f'action = "{action}"\n'), sim.base_url)
    events: list = []
    session.engine.subscribe(events.append)
    run = asyncio.create_task(session.run())
    await wait_until(lambda: any(isinstance(e, QualityDrift) for e in events), "a drift", timeout=30)
    drift = next(e for e in events if isinstance(e, QualityDrift))
    assert drift.action == action
    if action == "pause":
        assert session.engine.paused
        while not run.done():  # the pollution goes on (nothing flushes it): each window pauses again
            if session.engine.paused:
                session.engine.resume()
            await asyncio.sleep(0.01)
    else:
        assert not session.engine.paused
    finished = await run
    await session.aclose()
    assert finished.failed == 0 and not finished.aborted
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        assert not journal.history.logged(MemoryFlushed)  # only what was asked
    finally:
        journal.close()


async def test_failover_sends_the_rest_to_the_fallback(tmp_path, sim_factory):
    primary = sim_factory(drift_after_rounds=0, seed=5)  # from round 2 on: the drift comes early
    fallback = sim_factory(seed=6)  # no pollution there
    session = open_run(
        tmp_path,
        swarm_job(tmp_path, rounds=5, judge='action = "failover"\n'),
        primary.base_url,
        fallback=fallback.base_url,
    )
    events: list = []
    finished = await run_session(session, events)
    assert finished.failed == 0
    drift = next(e for e in events if isinstance(e, QualityDrift))
    switched = [e for e in events if isinstance(e, EndpointSwitched)]
    assert switched and switched[0].endpoint.endswith("fallback") and "failed over" in drift.detail
    assert fallback.stats()["successes"] > 0


async def test_a_judges_failover_holds_past_the_breakers_cool_down(tmp_path, sim_factory, monkeypatch):
    """A breaker opened by errors sends one probe back to the primary after its cool-down, and a
    good answer closes it; one the judge opened must not: a probe tells the primary answers again,
    not that its answers are good again. The run goes on past the cool-down after the switch, and
    no task's attempt goes to the primary after it."""
    from swarm_tui.engine.routing.failover import CircuitBreaker

    # a cool-down of 1 s, not 10: the switch came 23.4 s before the end in 6 runs side by side, but
    # once in CI (cause not found: the scores it drew, its pace) 3.9 s before it, under the 11 needed
    monkeypatch.setitem(CircuitBreaker.__init__.__kwdefaults__, "cooldown_s", 1.0)
    primary = sim_factory(drift_after_rounds=0, seed=5, latency_ms=500, latency_sigma=0.1)
    fallback = sim_factory(seed=6, latency_ms=500, latency_sigma=0.1)
    # 7 rounds of 30 at 8 a second: the judge fails over in round 2 or 3, some 4 rounds (15 s) before the end
    session = open_run(
        tmp_path,
        swarm_job(tmp_path, rounds=7, judge='action = "failover"\n'),
        primary.base_url,
        fallback=fallback.base_url,
        concurrency=4,
        adaptive=False,
    )
    breaker = session.engine.endpoints.breaker
    assert breaker is not None and breaker.base_cooldown_s == 1.0
    switched_at: list[float] = []
    session.engine.subscribe(lambda e: isinstance(e, EndpointSwitched) and switched_at.append(time.time()))
    finished = await run_session(session)
    assert finished.failed == 0 and switched_at, "the judge failed over"
    with sqlite3.connect(f"file:{tmp_path / 'run' / 'journal.sqlite'}?mode=ro", uri=True) as db:
        last_start = db.execute("SELECT MAX(started_at) FROM attempts").fetchone()[0]
        on_primary = db.execute(
            "SELECT COUNT(*) FROM attempts WHERE endpoint = 'custom' AND started_at > ?", (switched_at[0],)
        ).fetchone()[0]
    after = last_start - switched_at[0]
    assert after > breaker.base_cooldown_s + 1, (
        f"the run went on {after:.1f}s after the failover: not past the cool-down"
    )
    assert on_primary == 0, f"{on_primary} attempts went back to the primary after the judge's failover"


async def test_an_unreadable_verdict_is_asked_again_once(tmp_path, sim_factory):
    # one verdict in prose: its re-ask is answered in JSON whenever it goes out (with three, a
    # re-ask sent before the third first request met prose again, and the judge failed that one)
    sim = sim_factory(judge_prose_first=1)
    session = open_run(tmp_path, swarm_job(tmp_path, rounds=1), sim.base_url)
    await run_session(session)
    quality = json.loads((tmp_path / "run" / "summary.json").read_text())["quality"]
    judge = sim.stats()["judge"]
    assert judge["prose"] == 1 and quality["judge_errors"] == 0
    assert judge["requests"] == quality["judged"] + 1  # one re-ask for the unreadable verdict


async def test_a_judge_that_never_answers_in_json_fails_apart_and_the_swarm_goes_on(tmp_path, sim_factory):
    sim = sim_factory(judge_prose_first=10_000)
    session = open_run(tmp_path, swarm_job(tmp_path, rounds=1), sim.base_url)
    finished = await run_session(session)
    assert finished.succeeded == 30 and finished.failed == 0
    quality = json.loads((tmp_path / "run" / "summary.json").read_text())["quality"]
    judge = sim.stats()["judge"]
    assert quality["judged"] == 0 and judge["requests"] == judge["prose"] >= 8
    assert quality["judge_errors"] * 2 == judge["requests"]  # each answer asked twice, then given up


async def test_the_sampled_share_and_the_first_answers_of_the_round(tmp_path, sim_factory):
    sim = sim_factory()
    job = swarm_job(tmp_path, agents=300, rounds=1)
    session = open_run(tmp_path, job, sim.base_url)
    await run_session(session)
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        judged = set(journal.history.judgments())
        ids = {row.index: row.custom_id for row in journal.queries.tasks()}
    finally:
        journal.close()
    share = {i for i, cid in ids.items() if sampled(cid, 0.1)}
    assert share <= judged and len(judged - share) <= 4  # the share, and the round's first answers
    assert 15 <= len(share) <= 45


async def test_resume_never_judges_an_answer_twice(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=20.0)
    job = swarm_job(tmp_path, agents=200, rounds=1, rate=0.3)
    session = open_run(tmp_path, job, sim.base_url, concurrency=8)
    events: list = []
    session.engine.subscribe(events.append)
    run = asyncio.create_task(session.run())
    await wait_until(lambda: sum(isinstance(e, AnswerJudged) for e in events) >= 10, "ten verdicts", timeout=30)
    session.engine.abort()
    await run
    await session.aclose()
    before = set(_judgments(tmp_path / "run"))
    assert before

    resumed = SwarmSession.reopen(tmp_path / "run")
    events.clear()
    await run_session(resumed, events)
    again = {e.index for e in events if isinstance(e, AnswerJudged)}
    assert not again & before
    after = _judgments(tmp_path / "run")
    assert set(after) == before | again
    assert sim.stats()["judge"]["pointwise"] == len(after)  # every verdict asked for once


def _judgments(run_dir):
    journal = Journal.open(run_dir, readonly=True)
    try:
        return journal.history.judgments()
    finally:
        journal.close()


async def test_an_attached_view_sees_the_same_scores_and_drifts(tmp_path, sim_factory):
    sim = sim_factory(drift_after_rounds=2, seed=5)
    session = open_run(tmp_path, swarm_job(tmp_path), sim.base_url)
    events: list = []
    await run_session(session, events)
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        follower = LogFollower(journal, ())
        follower.poll()
        quality = follower.figures.quality
        judged = {e.index: (e.score, e.reason) for e in events if isinstance(e, AnswerJudged)}
        assert quality.judged == judged == {i: (s, r) for i, (s, r, _) in journal.history.judgments().items()}
        assert [d.action for d in quality.drifts] == [e.action for e in events if isinstance(e, QualityDrift)]
    finally:
        journal.close()


def test_the_sample_swarm_plays_the_whole_loop_offline(tmp_path):
    """sample_jobs/quality-drift.toml on the embedded simulator, as the README runs it: the score
    falls within two rounds of the onset (round 4), the memory is flushed on its own, the next
    round is back near the baseline; summary.json says all of it, the judge's cost apart."""
    from swarm_tui.util.locations import bundled

    from tests.conftest import run_cli

    job = bundled("sample_jobs") / "quality-drift.toml"
    result = run_cli(
        "run", str(job), "--sim-drift", "2", "--sim-latency-ms", "5", "--headless", "--out", str(tmp_path / "run")
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    quality = summary["quality"]
    [drift, *_] = quality["drifts"]
    assert drift["action"] == "flush_memory" and drift["round"] in (4, 5)
    by_round = {int(r): v["mean"] for r, v in quality["by_round"].items()}
    assert all(by_round[r] >= drift["baseline"] - 1 for r in (1, 2, 3))
    assert by_round[drift["round"]] < drift["baseline"] - 1
    assert by_round[drift["round"] + 1] >= drift["baseline"] - 1
    assert 0 < quality["judge_cost_usd"] < summary["cost_usd"]
    assert "quality drift" in result.stderr and "1 drift (flush_memory)" in result.stderr
