"""Decisions that hold on mixed work: answers take time in proportion to the tokens they
write, so a long answer among short ones is not a straggler, an abandoned call is not the
endpoint's failure, and the adaptive limit really grows in a run.

The simulator writes at `tokens_per_s` after its first-token latency, as a model does;
`[[sim:tokens=N]]` makes one task's answer N tokens long."""

from __future__ import annotations

import json

import pytest
from swarm_tui.core.call_errors import CallError, ErrorClass
from swarm_tui.core.events import ConcurrencyChanged, EndpointSwitched
from swarm_tui.engine import EngineSettings
from swarm_tui.engine.pacing.deadlines import TailDeadlines
from swarm_tui.engine.routing.failover import CircuitBreaker
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession

from tests.helpers import attempts_of, run_session

PRICES = {"custom/sim-1": {"input": 2.0, "output": 8.0}}


def mixed_job(tmp_path, *, n: int = 300, long_every: int = 50, long_tokens: int = 600, max_tokens=None):
    """`n` tasks, one in `long_every` writing `long_tokens` tokens, the rest 16; `max_tokens`: the
    bodies' (a callable of the task's length, a number for all, None for none)."""
    lines = []
    for i in range(n):
        long = i % long_every == long_every // 2
        body = {
            "model": "sim-1",
            "messages": [{"role": "user", "content": f"task {i}" + (f" [[sim:tokens={long_tokens}]]" if long else "")}],
        }
        ceiling = max_tokens(long) if callable(max_tokens) else max_tokens
        if ceiling is not None:
            body["max_tokens"] = ceiling
        lines.append(json.dumps({"custom_id": f"t{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}))
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return load_job(path)


@pytest.mark.parametrize(
    "max_tokens",
    [
        pytest.param(lambda long: 800 if long else 16, id="each-its-own-ceiling"),
        pytest.param(2000, id="one-generous-ceiling"),
        pytest.param(None, id="no-max-tokens"),
    ],
)
async def test_the_long_answers_of_a_mixed_job_are_not_stragglers(tmp_path, sim_factory, max_tokens):
    """The case measured on a foreign server: 6 long answers among 294 short ones were abandoned 4
    times each at the 1 s floor and the healthy primary was failed over. Each call is judged by
    what it may write at the endpoint's own rate, and nothing here is a failure of the primary."""
    primary = sim_factory(
        mode="process", latency_ms=20.0, latency_sigma=0.2, tokens_per_s=300.0, output_tokens=(16, 16)
    )
    fallback = sim_factory(latency_ms=20.0, output_tokens=(16, 16))
    job = mixed_job(tmp_path, max_tokens=max_tokens)
    profile = ProviderProfile("custom", base_url=primary.base_url, fallback_base_url=fallback.base_url)
    session = SwarmSession.open_new(job, RunPlan(profile, EngineSettings.of(concurrency=50)), tmp_path / "run")
    events: list = []
    finished = await run_session(session, events)

    assert finished.succeeded == 300
    assert primary.stats()["requests"] <= 303, "no long answer sent again"
    assert fallback.stats()["requests"] == 0, "the healthy primary was never failed over"
    assert not [e for e in events if isinstance(e, EndpointSwitched)]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["deadlines"]["abandoned"] == 0
    long_ones = [i for i in range(300) if i % 50 == 25]
    for index in long_ones:
        [attempt] = attempts_of(tmp_path / "run", index)
        assert attempt["outcome"] == "ok" and attempt["completion_tokens"] >= 590
        assert attempt["latency_ms"] > 1900, "a 600-token answer at 300 tokens/s takes 2 s"


def test_a_long_ceiling_is_judged_by_its_own_length_not_by_short_answers():
    """The rule as a table: 16-token answers of 70 ms say nothing of a call allowed 1,600 tokens,
    except that at their rate it may take at least ~25 x as long."""
    tail = TailDeadlines(60.0)
    for _ in range(100):
        tail.observe(0.073, tokens=16, ceiling=16, work="p sim-1")
    assert tail.straggler_s(16, "p sim-1") == pytest.approx(1.0), "short calls: the floor"
    long = tail.straggler_s(1600, "p sim-1")
    assert long is None or long > 3 * 5.4, "1,600 tokens at the measured rate: at least 5.4 s, x3"
    assert tail.straggler_s(None, "p sim-1") is None, "no max_tokens: only the hard timeout"
    assert tail.straggler_s(16, "other sim-1") is None, "another endpoint's answers say nothing of this one"
    for _ in range(30):  # long answers arrive: the line is learned
        tail.observe(5.4, tokens=1600, ceiling=1600, work="p sim-1")
    times = tail.describe()["by_model"]["p sim-1"]
    assert 250 < times["tokens_per_s"] < 350
    assert tail.straggler_s(1600, "p sim-1") == pytest.approx(3 * 5.4, rel=0.15)
    assert tail.straggler_s(16, "p sim-1") == pytest.approx(1.0)


def test_straggler_off_leaves_only_the_hard_timeout():
    tail = TailDeadlines(60.0, straggler_factor=None)
    for _ in range(50):
        tail.observe(0.1, tokens=64, ceiling=64)
    assert tail.straggler_s(64) is None
    assert tail.describe()["straggler_rule"].startswith("off")


async def test_an_abandoned_call_is_not_a_failure_of_the_primary_and_is_billed_by_estimate(tmp_path, sim_factory):
    """Calls hung at a healthy primary are abandoned and sent again: never a failover, never a
    shrink of the limit, and each abandoned call (it went out) costs its input, estimated."""
    primary = sim_factory(latency_ms=50.0, latency_sigma=0.2)
    fallback = sim_factory(latency_ms=50.0)
    prompts = [f"task {i}" for i in range(150)] + [f"hangs {i} [[sim:hangx1]]" for i in range(8)]
    from tests.conftest import write_batch

    job = load_job(write_batch(tmp_path / "job.jsonl", prompts))
    profile = ProviderProfile("custom", base_url=primary.base_url, fallback_base_url=fallback.base_url)
    plan = RunPlan(profile, EngineSettings.of(concurrency=20, timeout_s=60.0), prices=PRICES)
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    events: list = []
    finished = await run_session(session, events)

    assert finished.succeeded == 158
    assert not [e for e in events if isinstance(e, EndpointSwitched)], "abandonment is not the primary failing"
    assert not [e for e in events if isinstance(e, ConcurrencyChanged) and "decrease" in e.reason]
    assert fallback.stats()["requests"] == 0
    for index in range(150, 158):
        cut, answered = attempts_of(tmp_path / "run", index)
        assert cut["error_code"] == "straggler" and cut["estimated"] == 1
        assert cut["prompt_tokens"] > 0 and cut["cost_usd"] > 0, "its input at least"
        assert answered["outcome"] == "ok" and answered["estimated"] == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["deadlines"]["abandoned"] == 8
    assert summary["cost_estimated_usd"] > 0
    assert summary["cost_usd"] >= summary["cost_estimated_usd"]


@pytest.mark.parametrize(
    ("errors", "words"),
    [
        ([CallError(ErrorClass.SERVER, "upstream died", 502)] * 5, "failed 5 attempts in a row"),
        ([CallError(ErrorClass.AUTH, "invalid api key", 401)], "refused a call (auth 401"),
    ],
)
def test_a_failover_says_what_happened_in_words_a_user_can_act_on(errors, words):
    breaker = CircuitBreaker()
    reasons = [breaker.on_primary_result(error) for error in errors]
    assert reasons[:-1] == [None] * (len(errors) - 1)
    assert words in reasons[-1] and (
        "new attempts go to the fallback" in reasons[-1] or "failing over at once" in reasons[-1]
    ), reasons[-1]
    assert "0 failures" not in reasons[-1]


async def test_the_adaptive_limit_grows_to_the_ceiling_in_a_run(tmp_path, sim_factory):
    """The engine, not only the class: it starts at half the ceiling and, busy and clean, reaches
    it, so the provider really sees up to the ceiling in flight (a limit that never grew would
    leave it at 20)."""
    sim = sim_factory(mode="process", latency_ms=80.0, latency_sigma=0.1)
    from tests.conftest import write_batch

    job = load_job(write_batch(tmp_path / "job.jsonl", [f"task {i}" for i in range(800)]))
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=40))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    events: list = []
    finished = await run_session(session, events)
    assert finished.succeeded == 800
    limits = [e.limit for e in events if isinstance(e, ConcurrencyChanged)]
    assert limits and max(limits) == 40, limits[:10]
    assert sim.stats()["peak_in_flight"] >= 36, "the provider saw the grown limit in flight"
