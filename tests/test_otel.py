"""OpenTelemetry traces of a run, against a real OTLP/HTTP receiver on loopback that
decodes the protobuf a collector gets: live (`--otel`) and again from the journal
(`export-traces`), the same trace; a collector that is down costs the run nothing."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.trace")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("opentelemetry.proto")

from swarm_tui.engine import EngineSettings  # noqa: E402
from swarm_tui.jobs import load_job  # noqa: E402
from swarm_tui.otel.export import export_run  # noqa: E402
from swarm_tui.providers.profile import ProviderProfile  # noqa: E402
from swarm_tui.run.session import RunPlan, SwarmSession  # noqa: E402
from swarm_tui.tools.spec import PythonToolSpec, ToolsSpec  # noqa: E402

from tests.conftest import REPO, run_cli, write_batch  # noqa: E402
from tests.helpers import wait_until  # noqa: E402
from tests.otlp_receiver import OtlpReceiver, unused_url  # noqa: E402

FIXTURE_V2 = REPO / "tests" / "fixtures" / "journal-v2" / "journal.sqlite"


@pytest.fixture
def receiver():
    server = OtlpReceiver().start()
    yield server
    server.stop()


def chats(spans):
    return [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]


def by_operation(spans) -> Counter:
    return Counter(s.attributes.get("gen_ai.operation.name") for s in spans)


def workflow_events(spans, name: str) -> list[dict]:
    return [attrs for s in spans if s.parent_id == "" for (n, _, attrs) in s.events if n == name]


async def test_a_100_agent_run_exported_live_and_from_its_journal_is_one_and_the_same_trace(
    tmp_path, sim_factory, receiver, monkeypatch
):
    """Tools, retries and a failover: one trace, a chat span per attempt journaled (summary.json's
    count), tokens that add up to the summary's, an execute_tool span per tool call, the failover
    as an event; the journal's export has the same ids."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    primary = sim_factory(latency_ms=5, error_rate=0.05)
    secondary = sim_factory(latency_ms=5, seed=99)
    prompts = [f"agent {i} [[sim:tools=1]]" if i % 2 else f"agent {i}" for i in range(100)]
    job = load_job(write_batch(tmp_path / "job.jsonl", prompts, max_tokens=256))
    tools = ToolsSpec(python=(PythonToolSpec("tests.agent_tools:lookup", where="tools.python[0]"),), max_steps=4)
    job = replace(job, tools=tools)
    profile = ProviderProfile("custom", base_url=primary.base_url, fallback_base_url=secondary.base_url)
    run_dir = tmp_path / "run"
    session = SwarmSession.open_new(job, RunPlan(profile, EngineSettings.of(concurrency=10)), run_dir)
    session.trace()
    run = asyncio.create_task(session.run())
    try:
        await wait_until(lambda: session.engine.stats.succeeded >= 30, "30 agents to finish on the primary", timeout=60)
        primary.update_config(down=True)
        finished = await asyncio.wait_for(run, 90)
    finally:
        await session.aclose()
    assert finished.succeeded == 100
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"]["retried"] > 0 and summary["failovers"] and summary["agents"]["tool_calls"] > 0
    assert summary["traces"]["dropped"] == 0 and summary["traces"]["exported"] == len(receiver.spans)

    live = list(receiver.spans)
    assert len({s.trace_id for s in live}) == 1
    assert summary["traces"]["trace_id"] == live[0].trace_id
    assert len(chats(live)) == summary["requests"]["sent"]
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats(live)) == summary["tokens"]["prompt"]
    assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in chats(live)) == summary["tokens"]["completion"]
    assert by_operation(live)["execute_tool"] == summary["agents"]["tool_calls"]
    failovers = workflow_events(live, "swarm_tui.failover")
    assert [f["swarm_tui.endpoint"] for f in failovers] == [f["to"] for f in summary["failovers"]]
    retries = [e for s in live for (n, _, e) in s.events if n in ("swarm_tui.retry", "swarm_tui.rate_limited")]
    assert len(retries) == summary["requests"]["retried"]
    assert by_operation(live)["invoke_workflow"] == 1
    chat = next(s for s in chats(live) if s.attributes["swarm_tui.outcome"] == "ok")
    assert chat.attributes["gen_ai.request.model"] == "sim-1" and chat.attributes["gen_ai.response.model"] == "sim-1"
    assert chat.attributes["gen_ai.request.max_tokens"] == 256 and chat.attributes["server.address"] == "127.0.0.1"
    assert "gen_ai.input.messages" not in chat.attributes  # content only when asked for
    ids = {s.span_id: s for s in live}
    assert len(ids) == len(live) and all(s.parent_id in ids for s in live if s.parent_id)  # a whole tree

    receiver.clear()
    report = export_run(run_dir, receiver.url)
    again = list(receiver.spans)
    assert report.dropped == 0 and report.trace_id == live[0].trace_id
    assert {s.trace_id for s in again} == {live[0].trace_id}
    assert {(s.span_id, s.name, s.parent_id) for s in again} == {(s.span_id, s.name, s.parent_id) for s in live}
    exported = {s.span_id: s for s in again}
    for span in chats(live):  # an attempt's span is the same either way, its times included
        twin = exported[span.span_id]
        assert (twin.attributes, twin.start_ns, twin.end_ns) == (span.attributes, span.start_ns, span.end_ns)


async def test_a_collector_that_is_down_costs_the_run_nothing_and_the_drop_is_counted(
    tmp_path, sim, monkeypatch, caplog
):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", unused_url())
    job = load_job(write_batch(tmp_path / "job.jsonl", [f"t{i}" for i in range(100)]))
    session = SwarmSession.open_new(
        job, RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings()), tmp_path / "run"
    )
    session.trace()
    try:
        finished = await asyncio.wait_for(session.run(), 60)
    finally:
        await session.aclose()
    assert finished.succeeded == 100 and finished.failed == 0
    traces = json.loads((tmp_path / "run" / "summary.json").read_text())["traces"]
    assert traces["spans"] == 201 and traces["exported"] == 0 and traces["dropped"] == 201  # 100 x 2 + the run
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR", "CRITICAL")]


def test_the_cli_run_with_a_collector_down_finishes_and_says_the_drop_once(tmp_path):
    job = write_batch(tmp_path / "job.jsonl", [f"t{i}" for i in range(20)])
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": unused_url()}
    done = run_cli("run", str(job), "--headless", "--otel", "--out", str(tmp_path / "run"), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("not delivered") == 1 and "Traceback" not in done.stderr
    traces = json.loads((tmp_path / "run" / "summary.json").read_text())["traces"]
    assert (
        traces["dropped"] == traces["spans"] > 20 and f"{traces['dropped']} of {traces['spans']} spans" in done.stderr
    )
    assert "ERROR" not in done.stderr and "Failed to export" not in done.stderr


def test_an_old_journal_exports_without_being_changed_and_twice_as_the_same_trace(tmp_path, receiver):
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    shutil.copy(FIXTURE_V2, run_dir / "journal.sqlite")
    before = hashlib.sha256((run_dir / "journal.sqlite").read_bytes()).hexdigest()
    first = export_run(run_dir, receiver.url)
    spans = list(receiver.spans)
    assert first.dropped == 0 and len(spans) == first.spans
    assert len(chats(spans)) == 36  # the fixture's attempts (README: 25 answers, 5 failures, the rest cut)
    assert [f["swarm_tui.endpoint"] for f in workflow_events(spans, "swarm_tui.failover")] == ["custom/fallback"]
    receiver.clear()
    second = export_run(run_dir, receiver.url)
    assert second.trace_id == first.trace_id
    assert sorted(s.span_id for s in receiver.spans) == sorted(s.span_id for s in spans)
    assert hashlib.sha256((run_dir / "journal.sqlite").read_bytes()).hexdigest() == before


def test_export_traces_cli_sends_the_run_and_fails_when_the_collector_is_down(tmp_path, receiver):
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    shutil.copy(FIXTURE_V2, run_dir / "journal.sqlite")
    sent = run_cli("export-traces", str(run_dir), "--endpoint", receiver.url, "--otel-content")
    assert sent.returncode == 0, sent.stderr
    trace_id = receiver.spans[0].trace_id
    assert trace_id in sent.stdout
    assert any("gen_ai.output.messages" in s.attributes for s in chats(receiver.spans))
    down = run_cli("export-traces", str(run_dir), "--endpoint", unused_url())
    assert down.returncode == 1 and "not delivered" in down.stderr and "Traceback" not in down.stderr
    missing = run_cli("export-traces", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "nowhere" in missing.stderr


def test_without_the_otel_extra_the_commands_name_it_and_touch_nothing(tmp_path):
    shadow = tmp_path / "shadow" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")  # an `opentelemetry` without the SDK or the exporter
    env = {"PYTHONPATH": f"{shadow.parent}:{REPO}"}
    job = write_batch(tmp_path / "job.jsonl", ["t0"])
    run = run_cli("run", str(job), "--headless", "--otel", "--out", str(tmp_path / "run"), env=env)
    assert run.returncode == 2 and "swarm-tui[otel]" in run.stderr and not (tmp_path / "run").exists()
    export = run_cli("export-traces", str(tmp_path), env=env)
    assert export.returncode == 2 and "swarm-tui[otel]" in export.stderr


def test_the_same_run_keeps_its_trace_id_wherever_its_directory_goes(tmp_path, receiver):
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    shutil.copy(FIXTURE_V2, here / "journal.sqlite")
    shutil.copytree(here, there)
    assert export_run(here, receiver.url).trace_id == export_run(there, receiver.url).trace_id
    assert Path(there / "journal.sqlite").exists()


def test_the_config_s_otel_table_exports_every_run_and_a_bad_setting_is_named(tmp_path, receiver):
    config = tmp_path / "config" / "config.toml"  # SWARM_TUI_CONFIG (conftest)
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[otel]\nenabled = true\nendpoint = "{receiver.url}"\n')
    job = write_batch(tmp_path / "job.jsonl", [f"t{i}" for i in range(5)])
    done = run_cli("run", str(job), "--headless", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    sent = json.loads((tmp_path / "run" / "summary.json").read_text())["requests"]["sent"]
    assert len(chats(receiver.spans)) == sent >= 5 and "spans of trace" in done.stderr
    config.write_text('[otel]\nenabled = true\nendpoint = "localhost:4318"\n')
    bad = run_cli("run", str(job), "--headless", "--out", str(tmp_path / "again"))
    assert bad.returncode == 2 and "otel.endpoint" in bad.stderr and ":3" in bad.stderr
    assert not (tmp_path / "again").exists()


def test_a_hedge_that_loses_after_its_task_settled_is_a_chat_span_of_that_task_s_agent():
    """The span model alone (no I/O): a hedged pair's slower call, journaled after the winner
    settled its task, belongs to the task's agent span, not to a new one left unfinished."""
    from swarm_tui.core.events import Attempt, AttemptEnded, AttemptStarted, TaskSucceeded
    from swarm_tui.core.notes import SessionStarted
    from swarm_tui.core.task import Task
    from swarm_tui.otel.facts import LiveFacts
    from swarm_tui.otel.ids import SpanIds
    from swarm_tui.otel.model import SpanModel
    from swarm_tui.records import JobRecord, RunMeta

    tasks = {0: Task(0, "task-0000", {"model": "sim-1", "messages": []})}
    meta = RunMeta(JobRecord("j"), RunPlan(ProviderProfile("custom"), EngineSettings()))
    model = SpanModel(SpanIds("hedge"), LiveFacts(tasks, meta, content=False))
    slow = Attempt(0, 1, "custom", 100.0, 900.0, "hedge_lost")
    fast = Attempt(0, 2, "custom", 100.5, 100.0, "ok")
    spans = [
        *model.feed(99.0, SessionStarted(1)),
        *model.feed(100.0, AttemptStarted(0, 1, "custom")),
        *model.feed(100.5, AttemptStarted(0, 2, "custom", hedge=True)),
        *model.feed(100.6, TaskSucceeded(fast, "answer")),
        *model.feed(101.0, AttemptEnded(slow)),
        *model.close(101.0),
    ]
    agents = [s for s in spans if s.name == "invoke_agent worker"]
    chats_ = [s for s in spans if s.name.startswith("chat")]
    assert len(agents) == 1 and len(chats_) == 2
    assert {c.parent_id for c in chats_} == {agents[0].span_id}
    assert [e.name for e in agents[0].events] == ["swarm_tui.hedge"]


async def test_a_resumed_run_is_the_same_trace_with_a_workflow_span_per_session(
    tmp_path, sim_factory, receiver, monkeypatch
):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    sim = sim_factory(latency_ms=20)
    job = load_job(write_batch(tmp_path / "job.jsonl", [f"t{i}" for i in range(60)]))
    run_dir = tmp_path / "run"
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=4))
    first = SwarmSession.open_new(job, plan, run_dir)
    run = asyncio.create_task(first.run())
    try:
        await wait_until(lambda: first.engine.stats.succeeded >= 10, "10 answers before the stop")
        first.engine.abort("stopped by the test")
        await asyncio.wait_for(run, 30)
    finally:
        await first.aclose()
    second = SwarmSession.reopen(run_dir)
    second.trace()
    try:
        finished = await asyncio.wait_for(second.run(), 60)
    finally:
        await second.aclose()
    assert finished.succeeded == 60
    live = list(receiver.spans)  # the resumed session's, live
    receiver.clear()
    export_run(run_dir, receiver.url)
    whole = list(receiver.spans)
    assert {s.trace_id for s in live} == {s.trace_id for s in whole} and len({s.trace_id for s in whole}) == 1
    roots = sorted((s for s in whole if not s.parent_id), key=lambda s: s.attributes["swarm_tui.session"])
    assert [s.attributes["swarm_tui.session"] for s in roots] == [1, 2]
    assert [s.span_id for s in live if not s.parent_id] == [roots[1].span_id]
    assert {s.span_id for s in live} <= {s.span_id for s in whole}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert len(chats(whole)) == summary["requests"]["sent"] > len(chats(live))


async def test_a_collector_that_comes_up_mid_run_gets_every_span(tmp_path, sim_factory, monkeypatch):
    """Down at the start, up later: the events kept unread meanwhile are sent once it answers."""
    url = unused_url()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    sim = sim_factory(latency_ms=30)
    job = load_job(write_batch(tmp_path / "job.jsonl", [f"t{i}" for i in range(60)]))
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=4))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    session.trace()
    receiver = None
    run = asyncio.create_task(session.run())
    try:
        await wait_until(lambda: session.engine.stats.succeeded >= 10, "10 answers with the collector down")
        receiver = OtlpReceiver(int(url.rsplit(":", 1)[1])).start()
        await wait_until(lambda: receiver.spans, "the first spans once the collector is up")
        finished = await asyncio.wait_for(run, 60)
    finally:
        await session.aclose()
        if receiver is not None:
            receiver.stop()
    assert finished.succeeded == 60
    traces = json.loads((tmp_path / "run" / "summary.json").read_text())["traces"]
    assert traces["dropped"] == 0 and traces["exported"] == traces["spans"] == len(receiver.spans) == 121


def test_a_judged_multi_round_swarm_has_its_judge_its_drift_and_its_scores_in_the_trace(tmp_path, receiver):
    """sample_jobs/quality-drift.toml, as the README runs it, exported live: the judge's calls as
    spans of their own, the drift acted on and every score as events of the run's span."""
    from swarm_tui.util.locations import bundled

    job = bundled("sample_jobs") / "quality-drift.toml"
    out = tmp_path / "run"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    done = run_cli("run", str(job), "--sim-drift", "2", "--sim-latency-ms", "5", "--headless", "--otel",
                   "--out", str(out), env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    spans = list(receiver.spans)
    assert len(chats(spans)) == summary["requests"]["sent"]
    judge_calls = [s for s in spans if s.name == "invoke_agent judge"]
    assert judge_calls and all(s.attributes["swarm_tui.phase"] == "judge" for s in judge_calls)
    assert {s.attributes.get("gen_ai.request.model") for s in chats(spans)} == {"kimi-k2.5"}  # the judge's too
    scores = workflow_events(spans, "gen_ai.evaluation.result")
    assert len(scores) == summary["quality"]["judged"]
    drifts = workflow_events(spans, "swarm_tui.quality_drift")
    assert [d["swarm_tui.action"] for d in drifts] == [d["action"] for d in summary["quality"]["drifts"]]


async def test_a_429_is_an_event_of_its_task_with_the_retry_after(tmp_path, sim, receiver):
    prompts = [f"t{i}" for i in range(10)]
    prompts[3], prompts[7] = "limited 3 [[sim:429x1]]", "limited 7 [[sim:429x1]]"
    job = load_job(write_batch(tmp_path / "job.jsonl", prompts))
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=2))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    try:
        assert (await asyncio.wait_for(session.run(), 60)).succeeded == 10
    finally:
        await session.aclose()
    assert export_run(tmp_path / "run", receiver.url).dropped == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    limited = [(s, e) for s in receiver.spans for (n, _, e) in s.events if n == "swarm_tui.rate_limited"]
    assert len(limited) == summary["requests"]["rate_limited"] == 2
    assert {s.attributes["swarm_tui.task.index"] for s, _ in limited} == {3, 7}
    assert all(e["http.response.status_code"] == 429 and e["swarm_tui.retry_after_s"] > 0 for _, e in limited)
    assert workflow_events(receiver.spans, "swarm_tui.rate_gate_closed")


async def test_content_only_when_asked_and_then_prompts_answers_and_tool_io_live(tmp_path, sim, receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    job = load_job(write_batch(tmp_path / "job.jsonl", [f"agent {i} [[sim:tools=1]]" for i in range(4)]))
    tools = ToolsSpec(python=(PythonToolSpec("tests.agent_tools:lookup", where="tools.python[0]"),), max_steps=3)
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=2))
    session = SwarmSession.open_new(replace(job, tools=tools), plan, tmp_path / "run")
    session.trace(content=True)
    try:
        assert (await asyncio.wait_for(session.run(), 60)).succeeded == 4
    finally:
        await session.aclose()
    spans = list(receiver.spans)
    finals = [s for s in chats(spans) if s.attributes["swarm_tui.outcome"] == "ok"]
    assert len(finals) == 4
    for chat in finals:
        asked = json.loads(chat.attributes["gen_ai.input.messages"])
        assert asked[0]["role"] == "user" and asked[0]["parts"][0]["content"].startswith("agent ")
        said = json.loads(chat.attributes["gen_ai.output.messages"])
        assert said[0]["role"] == "assistant" and said[0]["parts"][0]["content"]
    tool_spans = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert tool_spans and all("lookup(" in s.attributes["gen_ai.tool.call.result"] for s in tool_spans)
    assert all(json.loads(s.attributes["gen_ai.tool.call.arguments"]) for s in tool_spans)


async def test_an_orchestrator_s_agents_are_under_the_tool_span_that_spawned_them(
    tmp_path, sim_factory, receiver, monkeypatch
):
    """The trace's tree is the tree of agents: each spawned agent's span under the `execute_tool
    spawn_agents` span of its parent's call, with its parent and depth; live and from the journal alike."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    sim = sim_factory(latency_ms=2)
    job = tmp_path / "tree.toml"
    job.write_text(
        'name = "tree"\nmodel = "sim-1"\n[request]\nmax_tokens = 4096\n'
        '[orchestrator]\ngoal = "Tree [[sim:spawn=2/2]]"\n'
    )
    run_dir = tmp_path / "run"
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=8))
    session = SwarmSession.open_new(load_job(job), plan, run_dir)
    session.trace()
    try:
        await asyncio.wait_for(session.run(), 60)
    finally:
        await session.aclose()
    live = list(receiver.spans)
    ids = {s.span_id: s for s in live}
    assert all(s.parent_id in ids for s in live if s.parent_id), "a whole tree"
    agents = {s.attributes["swarm_tui.task.index"]: s for s in live if s.name == "invoke_agent worker"}
    assert len(agents) == 7
    for index, span in agents.items():
        if index == 0:
            assert "swarm_tui.agent.parent" not in span.attributes
            continue
        spawn = ids[span.parent_id]
        assert spawn.name == "execute_tool spawn_agents"
        assert spawn.attributes["swarm_tui.task.index"] == span.attributes["swarm_tui.agent.parent"]
        assert ids[spawn.parent_id] is agents[span.attributes["swarm_tui.agent.parent"]]
        assert span.attributes["swarm_tui.agent.depth"] == (1 if span.attributes["swarm_tui.agent.parent"] == 0 else 2)

    receiver.clear()
    export_run(run_dir, receiver.url)
    assert {(s.span_id, s.name, s.parent_id) for s in receiver.spans} == {
        (s.span_id, s.name, s.parent_id) for s in live
    }
