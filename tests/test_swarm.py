"""Swarm layers: robust JSON, planner, workers with JSON answers, rolling memory, aggregator."""

from __future__ import annotations

import json

import pytest
from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.swarm.aggregator import chunk
from swarm_tui.swarm.memory import RollingMemory, estimate_tokens
from swarm_tui.swarm.planner import PLAN_INDEX, PlanError, parse_plan
from swarm_tui.util.json_repair import JsonExtractionError, extract_json, repair_truncated
from swarm_tui.util.locations import bundled

from tests.conftest import read_jsonl, run_cli
from tests.helpers import attempts_of


@pytest.mark.parametrize(
    "text, value",
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure! Here it is:\n```json\n{"a": [1, 2]}\n```\nAnything else?', {"a": [1, 2]}),
        ('The answer is ["x", "y",] as requested.', ["x", "y"]),
        ('{"subtasks": ["one", "two", "thr', {"subtasks": ["one", "two", "thr"]}),
        ('{"a": 1, "b":', {"a": 1}),
        ('```json\n{"a": {"b": [1, 2', {"a": {"b": [1, 2]}}),
        ('{"quote": "a \\"}\\" b"}', {"quote": 'a "}" b'}),
    ],
)
def test_extract_json_reads_what_models_write(text, value):
    assert extract_json(text) == value


def test_extract_json_failure_keeps_the_raw_text():
    with pytest.raises(JsonExtractionError) as caught:
        extract_json("I could not do that, sorry.")
    assert caught.value.raw == "I could not do that, sorry."
    assert repair_truncated("plain words") is None


def test_parse_plan_accepts_common_shapes_and_caps_the_count():
    assert parse_plan('{"subtasks": ["a", "b", "c"]}', 2) == ["a", "b"]
    assert parse_plan('["a", {"task": "b"}, {"description": "c"}]', 5) == ["a", "b", "c"]
    assert parse_plan('{"plan": ["x"]}', 5) == ["x"]
    with pytest.raises(PlanError) as caught:
        parse_plan('{"subtasks": []}', 3)
    assert caught.value.raw == '{"subtasks": []}'


def test_rolling_memory_keeps_a_window_and_fits_the_budget():
    memory = RollingMemory(window=3)
    for r in range(1, 6):
        memory.add(r, f"summary of round {r} " + "detail " * 50)
    assert [s.round for s in memory.summaries()] == [3, 4, 5]
    full = memory.render(10_000)
    assert "Round 3:" in full and "Round 5:" in full
    tight = memory.render(120)
    assert estimate_tokens(tight) <= 120 and "Round 5:" in tight and "Round 3:" not in tight
    assert memory.flush() == 3 and memory.render(10_000) == ""


def test_chunk_keeps_each_group_within_budget():
    items = ["x" * 400] * 10  # ~100 tokens each
    groups = chunk(items, 250)
    assert [len(g) for g in groups] == [2, 2, 2, 2, 2]
    assert sum(groups, []) == items


def test_research_sample_job_runs_headless_and_leaves_an_aggregate(tmp_path, sim):
    job = bundled("sample_jobs") / "research-swarm.toml"
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    aggregate = json.loads((tmp_path / "run" / "aggregate.json").read_text())
    assert len(aggregate["sources"]) == 12
    assert (tmp_path / "run" / "aggregate.md").read_text().startswith("# Decide whether")
    results = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert [r["custom_id"] for r in results] == [f"agent-{i:02d}" for i in range(1, 13)]
    # each worker got its own sub-task from the plan, after the shared context
    contents = [json.loads(r["response"]["body"]["choices"][0]["message"]["content"])["answer"] for r in results]
    assert all(f"Sub-task {i} of 12" in c for i, c in enumerate(contents, 1))
    stats = sim.stats()
    assert stats["requests"] == 1 + 1 + 12 + 1  # plan, warm-up, workers, aggregate
    assert stats["cache_hits"] >= 12
    assert "aggregate:" in result.stderr


def _session(tmp_path, base_url, toml_text, **settings) -> SwarmSession:
    path = tmp_path / "job.toml"
    path.write_text(toml_text)
    return SwarmSession.open_new(
        load_job(path),
        RunPlan(ProviderProfile("custom", base_url=base_url), EngineSettings.of(**settings)),
        tmp_path / "run",
    )


async def test_worker_json_is_asked_again_once_then_fails_keeping_the_raw_text(tmp_path, sim):
    session = _session(
        tmp_path,
        sim.base_url,
        """
model = "sim-1"
[workers]
json = true
[[task]]
id = "fine"
prompt = "answer in JSON"
[[task]]
id = "prose-once"
prompt = "answer in JSON [[sim:prosex1]]"
[[task]]
id = "never-json"
prompt = "answer in JSON [[sim:prose]]"
""",
    )
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert (finished.succeeded, finished.failed) == (2, 1)
    assert [a["outcome"] for a in attempts_of(tmp_path / "run", 1)] == ["retry", "ok"]
    assert [a["outcome"] for a in attempts_of(tmp_path / "run", 2)] == ["retry", "failed"]
    error = read_jsonl(tmp_path / "run" / "errors.jsonl")[0]
    assert error["custom_id"] == "never-json" and error["error"]["code"] == "invalid_json"
    assert "raw answer: Sim answer to: That answer could not be used" in error["error"]["message"]


async def test_planner_answer_cut_short_is_repaired(tmp_path, sim):
    # the first answer only is broken (fenced, in prose, cut at 70%: 4 whole sub-tasks and the 5th
    # cut mid-string); a re-ask would get the whole plan of 6, so the count tells the two apart
    session = _session(
        tmp_path,
        sim.base_url,
        """
model = "sim-1"
goal = "map the territory [[sim:badjsonx1]]"
[plan]
agents = 6
""",
    )
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert [a["outcome"] for a in attempts_of(tmp_path / "run", PLAN_INDEX)] == ["ok"], "one planner call"
    results = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert (finished.succeeded, finished.failed) == (5, 0)
    assert [r["custom_id"] for r in results] == [f"agent-{i}" for i in range(1, 6)]
    parts = [session.tasks[i].prompt.split("Your part: ", 1)[1] for i in range(5)]
    assert all(part.startswith(f"Sub-task {i} of 6: study the ") for i, part in enumerate(parts[:4], 1)), parts
    assert parts[4] == "Sub-task 5 of", "the cut-off last string is kept as it was cut"
    assert sim.stats()["requests"] == 1 + 5  # the plan, then one call per repaired sub-task


async def test_rounds_carry_memory_and_the_plan_survives_a_resume(tmp_path, sim):
    toml = """
model = "sim-1"
goal = "iterate"
[plan]
agents = 3
[aggregate]
chunk_tokens = 200
[memory]
rounds = 2
window = 5
"""
    session = _session(tmp_path, sim.base_url, toml, concurrency=1)
    phases = []
    from swarm_tui.core.events import PhaseChanged

    session.engine.subscribe(lambda e: isinstance(e, PhaseChanged) and phases.append(e.phase))
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.succeeded == 6
    assert phases.count("fan-out") == 2 and "planning" in phases and phases[-1] == "done"
    results = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert [r["custom_id"] for r in results] == [
        "r1-agent-1",
        "r1-agent-2",
        "r1-agent-3",
        "r2-agent-1",
        "r2-agent-2",
        "r2-agent-3",
    ]
    assert (tmp_path / "run" / "aggregate-round-1.json").exists() and (tmp_path / "run" / "aggregate.json").exists()
    aggregate = json.loads((tmp_path / "run" / "aggregate-round-1.json").read_text())
    assert aggregate["levels"] >= 1, "answers past chunk_tokens were reduced in chunks first"

    from swarm_tui.journal import Journal

    journal = Journal.open(tmp_path / "run", readonly=True)
    round2 = [row for row in journal.queries.tasks() if row.custom_id.startswith("r2-")]
    memory_messages = [m["content"] for m in round2[0].body["messages"] if m["content"].startswith("Memory of")]
    assert memory_messages and "Round 1:" in memory_messages[0]
    journal.close()

    sim.reset()
    resumed = SwarmSession.reopen(tmp_path / "run")
    try:
        again = await resumed.run()
    finally:
        await resumed.aclose()
    assert again.succeeded == 6
    assert sim.stats()["requests"] == 0, "nothing is asked again: plan, workers and aggregates are journaled"


async def test_an_abort_between_rounds_holds_for_the_next_round(tmp_path, sim):
    """Aborted while the first round's answers are aggregated: the second round never starts (the
    engine forgot the stop as the round began, and ran it)."""
    from swarm_tui.core.events import PhaseChanged

    toml = 'model = "sim-1"\ngoal = "iterate"\n[plan]\nagents = 3\n[aggregate]\n[memory]\nrounds = 2\n'
    session = _session(tmp_path, sim.base_url, toml, concurrency=3)
    engine = session.engine
    engine.subscribe(lambda e: isinstance(e, PhaseChanged) and e.phase == "aggregating" and engine.abort())
    try:
        finished = await session.run()
    finally:
        await session.aclose()
    assert finished.aborted and finished.succeeded == 3
    from swarm_tui.journal import Journal

    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        sent = [row.custom_id for row in journal.queries.tasks() if row.attempts]
    finally:
        journal.close()
    assert sent == ["r1-agent-1", "r1-agent-2", "r1-agent-3"]


def test_a_planner_that_fails_for_good_ends_the_run_with_exit_1_and_no_traceback(tmp_path, sim):
    path = tmp_path / "job.toml"
    path.write_text('model = "sim-1"\ngoal = "unreachable [[sim:401]]"\n[plan]\nagents = 3\n')
    result = run_cli("run", str(path), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"))
    assert result.returncode == 1
    assert "stopped: planning failed: auth" in result.stderr
    assert "Traceback" not in result.stderr


async def test_a_request_past_the_context_length_is_retried_once_without_its_memory(tmp_path, sim_factory):
    from swarm_tui.core.task import Task
    from swarm_tui.engine import AnswerRules, Doors, EngineSettings, build_engine
    from swarm_tui.journal import Journal
    from swarm_tui.providers.client import ProviderClient
    from swarm_tui.swarm.memory import RollingMemory
    from swarm_tui.swarm.pipeline import drop_memory

    sim = sim_factory(context_window=1000)
    memory = RollingMemory()
    memory.add(1, "a long summary of round one " * 200)  # ~1,400 tokens: past the window with it
    with_memory = {
        "model": "sim-1",
        "max_tokens": 100,
        "messages": [
            {"role": "system", "content": memory.render(10_000)},
            {"role": "user", "content": "round two task"},
        ],
    }
    no_memory = {"model": "sim-1", "max_tokens": 100, "messages": [{"role": "user", "content": "plain task"}]}
    tasks = [
        Task(0, "with-memory", with_memory),
        Task(
            1,
            "too-long-anyway",
            {"model": "sim-1", "max_tokens": 100, "messages": [{"role": "user", "content": "x " * 3000}]},
        ),
        Task(2, "fits", no_memory),
    ]
    journal = Journal.create(tmp_path / "run", tasks, {"job": {"name": "context"}, "plan": {}})  # a whole run
    client = ProviderClient(ProviderProfile("custom", base_url=sim.base_url), sim.base_url)
    engine = build_engine(
        tasks, journal.records, EngineSettings(), Doors(client), answers=AnswerRules(trimmer=drop_memory)
    )
    try:
        finished = await engine.run()
    finally:
        await client.aclose()
        journal.close()
    assert (finished.succeeded, finished.failed) == (2, 1)
    assert [a["error_class"] for a in attempts_of(tmp_path / "run", 0)] == ["context_length", None]
    assert [a["error_class"] for a in attempts_of(tmp_path / "run", 1)] == ["context_length"]  # nothing to drop
