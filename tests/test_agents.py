"""Multi-step agents over real loopback HTTP: the simulator plays a tool-calling model, the
tools are Python functions or the bundled example MCP server in a real subprocess.

What users rely on: every agent's final answer quotes its own tool results; each completed
model call and tool call is journaled and never done again after a crash; a job without tools
is the single call it always was."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from swarm_tui.core.events import AgentStepped, AttemptStarted, TaskState, ToolCallEnded
from swarm_tui.engine import EngineSettings
from swarm_tui.engine.kernel.queue import Place
from swarm_tui.jobs import load_job
from swarm_tui.journal import Journal
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.tools.spec import McpServerSpec, PythonToolSpec, ToolsSpec

from tests.conftest import read_jsonl, start_cli, write_batch
from tests.helpers import wait_until

EXAMPLE_SERVER = McpServerSpec("examples", (sys.executable, "-m", "swarm_tui.examples.mcp_tools"), where="tools.mcp[0]")


def agents_job(tmp_path, prompts, tools: ToolsSpec):
    job = load_job(write_batch(tmp_path / "job.jsonl", prompts, max_tokens=1024))
    from dataclasses import replace

    return replace(job, tools=tools)


def folded(text: str, limit: int = 80) -> str:
    """A tool result as the simulator quotes it: whitespace folded, cut at `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def token_of(prompt: str) -> str:
    import hashlib

    return "t-" + hashlib.sha256(prompt.encode()).hexdigest()[:8]


async def run_session(tmp_path, sim, job, **settings) -> tuple[SwarmSession, list]:
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(**settings))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    events: list = []
    session.engine.subscribe(events.append)
    try:
        await asyncio.wait_for(session.run(), 60)
    finally:
        await session.aclose()
    return session, events


async def test_agents_use_the_example_mcp_server_and_quote_their_own_results(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=5)
    prompts = [f"agent task {i} [[sim:tools=2]]" for i in range(20)]
    job = agents_job(tmp_path, prompts, ToolsSpec(mcp=(EXAMPLE_SERVER,), max_steps=4, source="job.toml"))
    session, events = await run_session(tmp_path, sim, job, concurrency=8)
    steps = [e for e in events if isinstance(e, AgentStepped)]
    ended = [e for e in events if isinstance(e, ToolCallEnded)]
    assert len(steps) == 40 and ended and all(e.ok for e in ended)
    assert all(s is TaskState.SUCCEEDED for s in session.engine.states.values())
    results = {line["custom_id"]: line for line in read_jsonl(tmp_path / "run" / "results.jsonl")}
    transcripts = {line["custom_id"]: line for line in read_jsonl(tmp_path / "run" / "transcripts.jsonl")}
    assert len(results) == len(transcripts) == 20
    for i, prompt in enumerate(prompts):
        custom_id = f"task-{i:04d}"
        answer = results[custom_id]["response"]["body"]["choices"][0]["message"]["content"]
        transcript = transcripts[custom_id]
        assert transcript["steps"] == 2 and len(transcript["tool_calls"]) >= 2
        quoted = answer.split("tool results: ", 1)[1].split("\n")[0]
        own = [m["content"] for m in transcript["messages"] if m["role"] == "tool"]
        assert quoted == " | ".join(folded(text) for text in own)  # its own tool outputs, in order
        if any(token_of(prompt) in text for text in own):  # a call that carried its token (lookup, note)
            assert all(token_of(other) not in quoted for other in prompts if other != prompt)
        assert [m["role"] for m in transcript["messages"]][-1] == "assistant"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["agents"]["steps"] == 40 and summary["agents"]["critical_path"] == 3
    assert summary["agents"]["tool_errors"] == 0
    assert sim.stats()["tool_steps"] == 40


async def test_tool_failures_go_back_to_the_model_and_max_steps_fails_the_agent(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=2)
    tools = ToolsSpec(
        python=(PythonToolSpec("tests.agent_tools:broken", where="tools.python[0]"),), max_steps=2, source="job.toml"
    )
    job = agents_job(tmp_path, ["fine [[sim:tools=1]]", "too long [[sim:tools=5]]"], tools)
    session, events = await run_session(tmp_path, sim, job, concurrency=2)
    ended = [e for e in events if isinstance(e, ToolCallEnded)]
    assert ended and not any(e.ok for e in ended)  # the tool raised: its error is the model's to read
    assert session.engine.states[0] is TaskState.SUCCEEDED
    assert session.engine.states[1] is TaskState.FAILED
    errors = read_jsonl(tmp_path / "run" / "errors.jsonl")
    assert errors[0]["custom_id"] == "task-0001" and errors[0]["error"]["code"] == "max_steps"
    transcript = read_jsonl(tmp_path / "run" / "transcripts.jsonl")[1]
    assert transcript["steps"] == 2  # kept: both steps, with the error each tool call returned
    assert all("ValueError" in call["result"] for call in transcript["tool_calls"])


async def test_a_job_without_tools_is_still_one_call_per_task(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=1)
    job = load_job(write_batch(tmp_path / "job.jsonl", ["plain [[sim:tools=3]]", "also plain"]))
    session, events = await run_session(tmp_path, sim, job, concurrency=2)
    assert not any(isinstance(e, AgentStepped | ToolCallEnded) for e in events)
    assert sim.stats()["requests"] == 2 and sim.stats()["tool_steps"] == 0
    assert not (tmp_path / "run" / "transcripts.jsonl").exists()
    assert "agents" not in json.loads((tmp_path / "run" / "summary.json").read_text())


async def test_an_agent_killed_mid_trajectory_resumes_without_redoing_a_completed_step(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=5)
    (tmp_path / "slowtools.py").write_text(
        textwrap.dedent('''
        import time

        def lookup(term: str) -> str:
            """Look a term up (slowly, so the run can be killed while tools run)."""
            time.sleep(0.4)
            return f"lookup({term}) done"
    ''')
    )
    job = tmp_path / "agents.toml"
    job.write_text(
        textwrap.dedent("""
        name = "agents"
        model = "sim-1"
        [request]
        max_tokens = 1024
        [agents]
        max_steps = 6
        [[tools.python]]
        function = "slowtools:lookup"
        [tasks]
        count = 6
        prompt = "agent {agent} [[sim:tools=3]]"
    """)
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run_dir = tmp_path / "run"
    proc = start_cli(
        "run",
        str(job),
        "--headless",
        "--out",
        str(run_dir),
        "--base-url",
        sim.base_url,
        "--concurrency",
        "6",
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def mid_trajectory() -> bool:
            if not (run_dir / "journal.sqlite").exists():
                return False
            journal = Journal.open(run_dir, readonly=True)
            try:
                return sum(len(journal.history.tool_calls_of(i)) for i in range(6)) >= 6
            finally:
                journal.close()

        await wait_until(mid_trajectory, "six tool calls journaled", timeout=60)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    journal = Journal.open(run_dir, readonly=True)
    before_calls = {i: [c["call_id"] for c in journal.history.tool_calls_of(i)] for i in range(6)}
    journal.close()
    requests_before = sim.stats()["requests"]

    os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    sys.path.insert(0, str(tmp_path))
    try:
        resumed = SwarmSession.reopen(run_dir)
        try:
            finished = await asyncio.wait_for(resumed.run(), 60)
        finally:
            await resumed.aclose()
    finally:
        sys.path.remove(str(tmp_path))
    assert finished.succeeded == 6
    journal = Journal.open(run_dir, readonly=True)
    try:
        for i in range(6):
            calls = [c["call_id"] for c in journal.history.tool_calls_of(i)]
            assert calls[: len(before_calls[i])] == before_calls[i]  # none run again
            assert len(calls) == len(set(calls)) >= 3  # each step's calls once (1-3 a step)
            steps = [a for a in journal.queries.attempts_of(i) if a["outcome"] == "step"]
            assert len(steps) == 3
        model_calls = sum(1 for i in range(6) for a in journal.queries.attempts_of(i) if a["outcome"] in ("step", "ok"))
    finally:
        journal.close()
    # each agent made exactly 4 model calls in all (3 steps + its answer): none was sent twice,
    # except calls in flight at the kill (journaled as cancelled, never as a completed step)
    assert model_calls == 6 * 4
    assert sim.stats()["requests"] - requests_before <= 6 * 4


async def test_x_cancels_one_agent_and_a_retry_continues_it_from_its_last_completed_step(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=20)
    tools = ToolsSpec(python=(PythonToolSpec("tests.agent_tools:nap", where="tools.python[0]"),), source="job.toml")
    job = agents_job(tmp_path, [f"agent {i} [[sim:tools=3]]" for i in range(3)], tools)
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=3))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    engine = session.engine
    steps: list[AgentStepped] = []
    engine.subscribe(lambda e: isinstance(e, AgentStepped) and steps.append(e))
    agent_1: list[str] = []
    engine.subscribe(lambda e: getattr(e, "index", None) == 0 and agent_1.append(type(e).__name__))
    run = asyncio.create_task(session.run())
    try:
        await wait_until(lambda: any(s.index == 0 for s in steps), "agent 1 to finish a step")
        where = {place: engine.queue.where(0) is place for place in (Place.IN_FLIGHT, Place.WORKING, Place.QUEUED)}
        assert engine.cancel_tasks([0]) == [0]
        await wait_until(lambda: engine.states[0] is TaskState.CANCELLED, f"agent 1 to stop ({where}, {agent_1})")
        assert engine.states[1] is not TaskState.CANCELLED  # only the one asked for
        assert engine.retry_failed([0]) == [0]
        finished = await asyncio.wait_for(run, 60)
    finally:
        await session.aclose()
    assert finished.succeeded == 3
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        assert len([a for a in journal.queries.attempts_of(0) if a["outcome"] == "step"]) == 3  # no step done twice
        calls = [c["call_id"] for c in journal.history.tool_calls_of(0)]
        assert len(calls) == len(set(calls))
    finally:
        journal.close()


async def test_x_on_a_task_waiting_for_a_slot_keeps_it_from_starting(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=300, latency_sigma=0.0)
    job = load_job(write_batch(tmp_path / "job.jsonl", ["first", "second", "third"]))
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=1, adaptive=False))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    engine = session.engine
    started: list[int] = []
    engine.subscribe(lambda e: isinstance(e, AttemptStarted) and started.append(e.index))
    run = asyncio.create_task(session.run())
    try:
        await wait_until(lambda: started == [0], "the first task to take the only slot")
        await asyncio.sleep(0)  # the dispatcher has taken the second task and waits for the slot
        assert 1 not in engine.queue.queued  # (else this test would not test the window it is about)
        assert engine.cancel_tasks([1]) == [1]
        finished = await asyncio.wait_for(run, 30)
    finally:
        await session.aclose()
    assert 1 not in started and engine.states[1] is TaskState.CANCELLED
    assert (finished.succeeded, finished.cancelled) == (2, 1)


async def test_x_just_as_a_step_ends_stops_the_agent_before_its_tools_begin(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=5)
    tools = ToolsSpec(python=(PythonToolSpec("tests.agent_tools:nap", where="tools.python[0]"),), source="job.toml")
    job = agents_job(tmp_path, ["agent [[sim:tools=2]]", "other [[sim:tools=1]]"], tools)
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=2))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    engine = session.engine
    loop = asyncio.get_running_loop()

    def cancel_at_once(event) -> None:  # runs before the step's tool calls take their first step
        if isinstance(event, AgentStepped) and event.index == 0 and event.step == 1:
            loop.call_soon(engine.cancel_tasks, [0])

    engine.subscribe(cancel_at_once)
    try:
        finished = await asyncio.wait_for(session.run(), 30)
    finally:
        await session.aclose()
    assert engine.states[0] is TaskState.CANCELLED and engine.states[1] is TaskState.SUCCEEDED
    assert (finished.succeeded, finished.cancelled) == (1, 1)


def mixed_first_step(tools: list[str], rounds: int) -> str:
    """A prompt whose agent's first step calls every one of `tools` (the simulator's seeded choice)."""
    from swarm_tui.sim.tool_request import ToolSpec
    from swarm_tui.sim.tools import choose_calls

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    offered = [ToolSpec(name, schema) for name in tools]
    for n in range(10_000):
        prompt = f"agent {n} [[sim:tools={rounds}]]"
        if {name for name, _ in choose_calls(0, prompt, 0, offered)} == set(tools):
            return prompt
    raise AssertionError("no prompt calls every tool in its first step")


async def test_a_steps_tool_results_are_journaled_together_in_the_order_asked(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=2)
    tools = ToolsSpec(
        python=(
            PythonToolSpec("tests.agent_tools:nap", where="tools.python[0]"),
            PythonToolSpec("tests.agent_tools:lookup", where="tools.python[1]"),
        ),
        source="job.toml",
    )
    job = agents_job(tmp_path, [f"agent {i} [[sim:tools=3]]" for i in range(12)], tools)
    session, events = await run_session(tmp_path, sim, job, concurrency=12)
    assert all(s is TaskState.SUCCEEDED for s in session.engine.states.values())
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        several = 0
        for i in range(12):
            rows = journal.history.tool_calls_of(i)
            messages = journal.queries.body_of(i)["messages"]
            for step in {row["step"] for row in rows}:
                of_step = [row for row in rows if row["step"] == step]
                several += len(of_step) > 1
                assert len({row["finished_at"] for row in of_step}) == 1  # one write for the step's results
            asked = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
            answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
            assert answered == asked == [row["call_id"] for row in rows]  # in the order the model asked
    finally:
        journal.close()
    assert several  # (else no step had two calls to write together)
    heard = [(e.index, e.step) for e in events if isinstance(e, ToolCallEnded)]
    assert len(heard) == sum(len(s.tools) for s in events if isinstance(s, AgentStepped))


async def test_x_mid_step_keeps_the_results_that_ended_and_resume_runs_only_the_others(tmp_path, sim_factory):
    from tests import agent_tools

    agent_tools.QUICK_CALLS.clear()
    agent_tools.GATE_CALLS.clear()
    agent_tools.GATE.clear()
    sim = sim_factory(latency_ms=2)
    tools = ToolsSpec(
        python=(
            PythonToolSpec("tests.agent_tools:quick", where="tools.python[0]"),
            PythonToolSpec("tests.agent_tools:gate", where="tools.python[1]"),
        ),
        source="job.toml",
    )
    job = agents_job(tmp_path, [mixed_first_step(["quick", "gate"], 2)], tools)
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=1))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    engine = session.engine
    run = asyncio.create_task(session.run())
    try:
        # the step's calls begin together: once `gate` has begun, `quick` has ended (it awaits nothing)
        await wait_until(lambda: agent_tools.GATE_CALLS, "the step's gated call to begin")
        assert agent_tools.QUICK_CALLS and engine.queue.where(0) is Place.WORKING
        assert engine.cancel_tasks([0]) == [0]
        await wait_until(lambda: engine.states[0] is TaskState.CANCELLED, "the agent to stop")
        journal = Journal.open(tmp_path / "run", readonly=True)
        try:
            kept = journal.history.tool_calls_of(0)
            transcript = journal.queries.body_of(0)["messages"]
        finally:
            journal.close()
        assert [row["name"] for row in kept] == ["quick"] * len(agent_tools.QUICK_CALLS)  # what ended is kept
        assert [m["content"] for m in transcript if m["role"] == "tool"] == [row["result"] for row in kept]
        gated = len(agent_tools.GATE_CALLS)
        agent_tools.GATE.set()
        assert (await asyncio.wait_for(run, 60)).cancelled == 1
    finally:
        agent_tools.GATE.set()
        await session.aclose()
    resumed = SwarmSession.reopen(tmp_path / "run")
    try:
        finished = await asyncio.wait_for(resumed.run(), 60)
    finally:
        await resumed.aclose()
    assert finished.succeeded == 1
    journal = Journal.open(tmp_path / "run", readonly=True)
    try:
        calls = journal.history.tool_calls_of(0)
    finally:
        journal.close()
    first_step = [row for row in calls if row["step"] == 1]
    assert [row["name"] for row in first_step].count("gate") == gated  # the cut calls, run once more
    assert len(agent_tools.QUICK_CALLS) == sum(row["name"] == "quick" for row in calls)  # none run twice
    assert len({row["call_id"] for row in calls}) == len(calls)


def processes_marked(mark: str) -> list[int]:
    """Live processes whose environment carries `SWARM_TUI_TEST_MARK=mark` (zombies are not alive)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as env, open(f"/proc/{entry}/stat") as stat:
                marked = f"SWARM_TUI_TEST_MARK={mark}".encode() in env.read().split(b"\0")
                zombie = stat.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if marked and not zombie:
            found.append(int(entry))
    return found


@pytest.mark.parametrize("ending", ["finished", "SIGINT", "SIGTERM"])
async def test_no_mcp_server_process_outlives_the_run(tmp_path, sim_factory, ending):
    import uuid

    mark = uuid.uuid4().hex
    sim = sim_factory(latency_ms=5 if ending == "finished" else 400, latency_sigma=0.0)
    job = tmp_path / "agents.toml"
    job.write_text(
        textwrap.dedent(f"""
        name = "agents"
        model = "sim-1"
        [request]
        max_tokens = 1024
        [[tools.mcp]]
        name = "lingering"
        command = ["python", "-m", "tests.mcp_lingering"]
        processes = 2
        env = {{ SWARM_TUI_TEST_MARK = "{mark}" }}
        [tasks]
        count = 8
        prompt = "agent {{agent}} [[sim:tools=3]]"
    """)
    )
    run_dir = tmp_path / "run"
    proc = start_cli(
        *("run", str(job), "--headless", "--out", str(run_dir), "--base-url", sim.base_url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        if ending != "finished":
            await wait_until(lambda: len(processes_marked(mark)) == 2, "the pool's two servers to run", timeout=60)
            await wait_until(lambda: sim.stats()["tool_steps"] > 0, "an agent to step", timeout=60)
            proc.send_signal(getattr(signal, ending))
        code = await asyncio.to_thread(proc.wait, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == (0 if ending == "finished" else 130)
    assert processes_marked(mark) == []
