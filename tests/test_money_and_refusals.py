"""What a user pays for, when the provider does not say it: an answer without usage is
billed by estimate and counted in the budget; a provider that refuses every call (a key, a
model) stops the run after a few instead of being sent every task; an answer cut at its token
limit is counted apart, and one cut before any content is not a success. Against the project's
hostile server on loopback."""

from __future__ import annotations

import json

import pytest
from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession

from tests.conftest import read_jsonl, write_batch
from tests.helpers import attempts_of, run_session
from tests.hostile import HostileServer

PRICED = {"custom/gpt-4.1": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}


@pytest.fixture
def hostile():
    server = HostileServer().start()
    yield server
    server.stop()


def session_on(tmp_path, base_url: str, prompts: list[str], run: str = "run", **settings) -> SwarmSession:
    job = load_job(write_batch(tmp_path / f"{run}.jsonl", prompts, model="gpt-4.1", max_tokens=200))
    plan = RunPlan(ProviderProfile("custom", base_url=base_url), EngineSettings.of(**settings), prices=PRICED)
    return SwarmSession.open_new(job, plan, tmp_path / run)


async def test_an_answer_without_usage_is_billed_by_estimate_and_counts_in_the_budget(tmp_path, hostile):
    """The measured case: a provider that sends no usage was billed $0, so each session of a
    resumed run passed the budget again (124 calls against a 31-call budget after 4 sessions)."""
    prompts = [f"question number {i} [[hostile:nousage]]" for i in range(400)]
    session = session_on(tmp_path, hostile.base_url, prompts, budget_usd=0.01, concurrency=4)
    first = await run_session(session)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["cost_usd"] > 0 and summary["cost_estimated_usd"] == summary["cost_usd"]
    assert "billed by estimate" in summary["cost_note"]
    [attempt] = attempts_of(tmp_path / "run", 0)
    assert attempt["estimated"] == 1 and attempt["prompt_tokens"] > 0 and attempt["completion_tokens"] > 0
    assert first.stop_reason and first.stop_reason.startswith("budget")
    sent_first = sum(hostile.answered.values())
    assert 0 < sent_first < 400

    resumed = SwarmSession.reopen(tmp_path / "run")  # the same ledger: nothing more fits
    await run_session(resumed)
    assert sum(hostile.answered.values()) - sent_first <= 2, "a resume must not spend the budget again"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["cost_usd"] <= 0.01 and summary["budget"]["held"]


@pytest.mark.parametrize(("marker", "kind"), [("401", "auth"), ("404", "not_found")])
async def test_a_provider_that_refuses_every_call_stops_the_run_after_a_few(tmp_path, sim_factory, marker, kind):
    """401 and 404 model-not-found are not retried, but the run went on sending every task (100
    requests for 100 tasks). Now it stops after three refusals in a row, saying why."""
    sim = sim_factory()
    job = load_job(write_batch(tmp_path / "job.jsonl", [f"task {i} [[sim:{marker}]]" for i in range(100)]))
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=2))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    finished = await run_session(session)
    assert sim.stats()["requests"] <= 4, "stopped after a few, not 100"
    assert finished.failed <= 4 and finished.cancelled >= 96
    assert f"refused 3 calls in a row ({kind}" in finished.stop_reason
    assert "resume" in finished.stop_reason


async def test_one_refusal_among_answers_does_not_stop_the_run(tmp_path, sim_factory):
    sim = sim_factory()
    prompts = [f"task {i}" + (" [[sim:404]]" if i % 10 == 0 else "") for i in range(60)]
    job = load_job(write_batch(tmp_path / "job.jsonl", prompts))
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=1))
    finished = await run_session(SwarmSession.open_new(job, plan, tmp_path / "run"))
    assert finished.succeeded == 54 and finished.failed == 6 and finished.stop_reason is None


async def test_an_answer_cut_before_any_content_is_not_a_success_and_a_cut_answer_is_counted(tmp_path, hostile):
    prompts = ["thinks too long [[hostile:lengthnull]]", "writes too long [[hostile:lengthcut]]", "fine"]
    session = session_on(tmp_path, hostile.base_url, prompts)
    finished = await run_session(session)
    assert finished.succeeded == 2 and finished.failed == 1
    assert hostile.answered["thinks too long [[hostile:lengthnull]]"] == 1, "not retried: it would be cut again"
    [error] = read_jsonl(tmp_path / "run" / "errors.jsonl")
    assert error["error"]["code"] == "length" and "raise max_tokens" in error["error"]["message"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["truncated"] == 1
    assert attempts_of(tmp_path / "run", 1)[0]["finish_reason"] == "length"
