"""A budget is a ceiling: every call that can cost money holds its worst case before it
goes out — a body's max_tokens, else the model's maximum output — and the recorded cost and what
the server actually served stay at or under the budget, with hedges and a swarm's direct calls
drawing on the same ledger. Against the simulator over loopback, priced as gpt-4.1."""

from __future__ import annotations

import json

import pytest
from swarm_tui.core.events import AttemptStarted
from swarm_tui.engine import EngineSettings
from swarm_tui.engine.ledger import SpendLedger, prompt_upper_estimate, worst_usage
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession

from tests.conftest import REPO, run_cli, write_batch
from tests.helpers import run_session

GPT41 = {"input": 2.0, "cached_input": 0.5, "output": 8.0}
"""USD per 1M tokens (gpt-4.1's list price), as the priced rows below bill the simulator."""


def served_usd(sim) -> float:
    """What the simulator served, priced like gpt-4.1 (cached tokens aside: none here)."""
    tokens = sim.stats()["tokens"]
    return (tokens["prompt"] * GPT41["input"] + tokens["completion"] * GPT41["output"]) / 1e6


def long_answers(tmp_path, n: int, *, max_tokens: int | None, tokens: int = 3500):
    lines = []
    for i in range(n):
        body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": f"essay {i} [[sim:tokens={tokens}]]"}]}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        lines.append(json.dumps({"custom_id": f"e{i}", "body": body}))
    path = tmp_path / "essays.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("max_tokens", [4000, None], ids=["max-tokens-4000", "no-max-tokens"])
async def test_the_budget_is_never_passed_by_what_calls_in_flight_write(tmp_path, sim_factory, max_tokens):
    """The measured case: 100 bodies, answers of 3,500 tokens, 100 in flight, --budget 0.10 spent
    $0.336 (a body without max_tokens reserved 1,024 output tokens). Now each call holds its worst
    case (4,000 tokens, or gpt-4.1's 32,768) and no more go out than the budget can hold."""
    sim = sim_factory(latency_ms=50.0, output_tokens=(16, 16))
    plan = RunPlan(
        ProviderProfile("custom", base_url=sim.base_url),
        EngineSettings.of(concurrency=100, budget_usd=0.10),
        prices={"custom/gpt-4.1": GPT41},
    )
    session = SwarmSession.open_new(
        load_job(long_answers(tmp_path, 100, max_tokens=max_tokens)), plan, tmp_path / "run"
    )
    finished = await run_session(session)

    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["cost_usd"] or 0) <= 0.10 and served_usd(sim) <= 0.10, (summary["cost_usd"], served_usd(sim))
    assert finished.stop_reason and finished.stop_reason.startswith("budget")
    assert summary["budget"]["held"] and summary["budget"]["peak_committed_usd"] <= 0.10 + 1e-9
    if max_tokens is None:  # 32,768 x $8/1M = $0.26 a call: not one fits, nothing is sent
        assert sim.stats()["requests"] == 0
        assert "32,768 output tokens at most" in finished.stop_reason
    else:  # $0.032 + the prompt each: three fit at once, about three answers are paid for
        assert 2 <= finished.succeeded <= 3 and sim.stats()["requests"] == finished.succeeded


async def test_a_hedge_holds_its_worst_case_too(tmp_path, sim_factory):
    """Slow calls under --hedge: a backup is a second call that may be billed in full, so it goes
    out only holding its own worst case; what was served stays under the budget."""
    sim = sim_factory(latency_ms=40.0, latency_sigma=0.1)
    prompts = [f"task {i}" for i in range(60)] + [f"slow {i} [[sim:hangx1]]" for i in range(6)]
    job = load_job(write_batch(tmp_path / "job.jsonl", prompts, model="gpt-4.1", max_tokens=2000))
    plan = RunPlan(
        ProviderProfile("custom", base_url=sim.base_url),
        EngineSettings.of(concurrency=10, hedge=True, budget_usd=0.5, timeout_s=30.0),
        prices={"custom/gpt-4.1": GPT41},
    )
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    held = []
    session.engine.subscribe(
        lambda e: (
            held.append(session.engine.ledger.holds((e.index, e.number)))
            if isinstance(e, AttemptStarted) and e.hedge
            else None
        )
    )
    finished = await run_session(session)
    assert finished.succeeded == 66
    assert held and all(held), "every backup sent held its worst case in the ledger"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["cost_usd"] <= 0.5 and served_usd(sim) <= 0.5


async def test_calls_wait_for_room_rather_than_stop_while_others_are_in_flight(tmp_path, sim_factory):
    """Worst cases fill a small budget at once (three calls of $0.016 in $0.05): the others wait
    for them to settle at what they cost, and the run goes on until the spend itself leaves no
    room for one more worst case."""
    sim = sim_factory(latency_ms=20.0)
    job = load_job(
        write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(80)], model="gpt-4.1", max_tokens=2000)
    )
    plan = RunPlan(
        ProviderProfile("custom", base_url=sim.base_url),
        EngineSettings.of(concurrency=10, budget_usd=0.05),
        prices={"custom/gpt-4.1": GPT41},
    )
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    finished = await run_session(session)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert finished.succeeded > 40, "far more than the three whose worst cases fit at once"
    assert summary["cost_usd"] <= 0.05 and served_usd(sim) <= 0.05
    if finished.succeeded < 80:
        assert finished.stop_reason.startswith("budget") and "the next call could cost up to" in finished.stop_reason


async def test_a_swarms_planner_and_aggregator_draw_on_the_same_ledger(tmp_path, sim_factory):
    """Planner, warm-up and aggregator calls (call_direct) were never checked against the budget.
    A budget too small for the planner's worst case sends nothing at all, and says why."""
    sim = sim_factory(latency_ms=5.0)
    job = load_job(REPO / "sample_jobs" / "research-swarm.toml", model_override="gpt-4.1")
    plan = RunPlan(
        ProviderProfile("custom", base_url=sim.base_url),
        EngineSettings.of(budget_usd=0.001),
        prices={"custom/gpt-4.1": GPT41},
    )
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    finished = await run_session(session)
    assert sim.stats()["requests"] == 0, "the planner's worst case does not fit: not sent"
    assert finished.stop_reason and finished.stop_reason.startswith("budget")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["budget"] == {**summary["budget"], "held": True, "stopped_dispatch": True}


def test_the_ledger_moves_a_reservation_to_the_spend_in_one_step():
    ledger = SpendLedger(1.0)
    ledger.open(0.25)
    assert ledger.reserve(("a", 1), 0.5) and not ledger.reserve(("b", 1), 0.3)
    ledger.settle(("a", 1), 0.1)  # the call cost less than its worst case
    assert ledger.spent_usd == pytest.approx(0.35) and ledger.reserved_usd == 0
    assert ledger.reserve(("b", 1), 0.6) and ledger.peak_committed_usd == pytest.approx(0.95)
    assert ledger.report().to_dict()["held"] and ledger.report().stopped


def test_a_prompt_is_estimated_high_and_an_answer_bounded_by_max_tokens_or_the_models_maximum():
    body = {"messages": [{"role": "user", "content": "x" * 300}]}
    assert prompt_upper_estimate(body) >= 100, "300 ASCII characters: at least 100 tokens held"
    cjk = {"messages": [{"role": "user", "content": "タスク" * 100}]}
    assert prompt_upper_estimate(cjk) >= 300, "every non-ASCII character a token of its own"
    assert worst_usage({**body, "max_tokens": 64}, 32768).completion == 64
    assert worst_usage(body, 32768).completion == 32768
    assert worst_usage(body, None) is None


def test_a_budget_without_a_bound_on_the_answers_refuses_to_start(tmp_path):
    """A model whose maximum output is unknown and bodies without max_tokens: exit 2 naming the
    flag, before anything is written or sent."""
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[prices."custom/house-model"]\ninput = 1.0\noutput = 2.0\n')
    job = tmp_path / "job.jsonl"
    job.write_text(json.dumps({"custom_id": "a", "body": {"messages": [{"role": "user", "content": "hi"}]}}) + "\n")
    result = run_cli(
        "run",
        str(job),
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "house-model",
        "--budget",
        "0.10",
        "--headless",
        "--out",
        str(tmp_path / "run"),
        env={"SWARM_TUI_CONFIG": str(config)},
    )
    assert result.returncode == 2, result.stderr
    assert "--budget" in result.stderr and "max_tokens" in result.stderr and "max_output" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()
