"""Agents with tools and the batch lane on Ray: a local 2-CPU Ray, 2 worker actors, the simulator
on loopback; each run compared with the same run here (one feature set on Ray)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from swarm_tui.core.events import AgentStepped, BatchSubmitted  # noqa: E402
from swarm_tui.engine import EngineSettings  # noqa: E402
from swarm_tui.jobs import load_job  # noqa: E402
from swarm_tui.journal import Journal  # noqa: E402
from swarm_tui.providers.profile import ProviderProfile  # noqa: E402
from swarm_tui.run.session import RayOptions, RunPlan, SwarmSession  # noqa: E402
from swarm_tui.tools.spec import McpServerSpec, ToolsSpec  # noqa: E402

from tests.conftest import read_jsonl, start_cli, write_batch  # noqa: E402
from tests.helpers import wait_until  # noqa: E402
from tests.ray_support import JUDGE_PRICES, custom_ids, local_ray, ray_session, run_to_end  # noqa: E402, F401
from tests.test_agents import processes_marked  # noqa: E402

pytestmark = pytest.mark.timeout(300)  # a local Ray on 2 cores, and CLI runs that start their own


def agents_session(tmp_path: Path, base_url: str, name: str, ray_options: RayOptions | None) -> SwarmSession:
    """30 agents of 2 tool steps each, with the bundled example MCP server (on Ray: on the actors)."""
    server = McpServerSpec("examples", (sys.executable, "-m", "swarm_tui.examples.mcp_tools"), where="tools.mcp[0]")
    prompts = [f"agent task {i} [[sim:tools=2]]" for i in range(30)]
    job = load_job(write_batch(tmp_path / f"{name}.jsonl", prompts, max_tokens=1024))
    job = replace(job, tools=ToolsSpec(mcp=(server,), max_steps=4, source="job.toml"))
    profile = ProviderProfile(name="custom", base_url=base_url)
    plan = RunPlan(profile, EngineSettings.of(concurrency=12), prices=JUDGE_PRICES)
    return SwarmSession.open_new(job, plan, tmp_path / name, ray=ray_options)


def task_costs(run_dir: Path) -> dict[int, float]:
    journal = Journal.open(run_dir, readonly=True)
    try:
        return {i: sum(a["cost_usd"] or 0.0 for a in journal.queries.attempts_of(i)) for i in journal.queries.states()}
    finally:
        journal.close()


async def test_agents_with_tools_on_ray_agree_with_the_same_agents_run_here(tmp_path, sim_factory):
    """The tools run on the actors (their MCP servers started there), every step and tool result
    journaled through the driver: the same answers, steps, tool calls and cost as here.

    One thing may differ by design of the example server: an agent that calls `note` and
    `notes` in the same step races them (a step's tool calls run in parallel), here as on Ray.
    Such an agent's later answers differ; every other agent agrees to the token and the cent."""
    runs = {}
    for name, ray_options in (("local", None), ("ray", RayOptions(actors=2))):
        sim = sim_factory(latency_ms=5, seed=4)
        session = agents_session(tmp_path, sim.base_url, name, ray_options)
        finished = await run_to_end(session)
        assert (finished.succeeded, finished.failed, finished.cancelled) == (30, 0, 0), name
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        transcripts = {line["custom_id"]: line for line in read_jsonl(tmp_path / name / "transcripts.jsonl")}
        runs[name] = (summary, transcripts, sim.stats(), task_costs(tmp_path / name))
    here, on_ray = runs["local"], runs["ray"]
    (summary_here, transcripts_here, sim_here, costs_here) = here
    (summary_ray, transcripts_ray, sim_ray, costs_ray) = on_ray
    every = Counter(f"task-{i:04d}" for i in range(30))
    assert custom_ids(tmp_path / "ray") == custom_ids(tmp_path / "local") == every
    assert sim_ray["tool_steps"] == sim_here["tool_steps"] == 60, "each step's model call once"
    assert sim_ray["duplicate_successes"] == 0
    assert summary_ray["agents"] == summary_here["agents"]
    assert transcripts_ray.keys() == transcripts_here.keys()
    agreeing = []
    for custom_id, transcript in transcripts_ray.items():
        local = transcripts_here[custom_id]
        assert transcript["steps"] == local["steps"] == 2
        assert [m["role"] for m in transcript["messages"]] == [m["role"] for m in local["messages"]]
        assert len(transcript["tool_calls"]) == len(local["tool_calls"])
        if transcript["messages"] == local["messages"]:
            agreeing.append(int(custom_id.removeprefix("task-")))
        else:  # only a raced note/notes pair can tell them apart
            names = {call["name"] for call in transcript["tool_calls"]}
            assert {"note", "notes"} <= names, custom_id
    assert len(agreeing) >= 20
    assert sum(costs_ray[i] for i in agreeing) == pytest.approx(sum(costs_here[i] for i in agreeing), abs=1e-9)


async def test_an_actor_killed_mid_trajectory_loses_no_step_its_agents_go_on_elsewhere(tmp_path, sim_factory):
    """Agents whose actor dies between steps go on, on the other actor, from the transcript the
    driver journaled: no completed step asked again, only the calls in flight at the kill."""
    sim = sim_factory(latency_ms=60, seed=8)
    session = agents_session(tmp_path, sim.base_url, "run", RayOptions(actors=2))
    engine = session.engine
    stepped, killed = [0], []

    def on_event(event) -> None:
        if isinstance(event, AgentStepped):
            stepped[0] += 1
            if stepped[0] == 20 and not killed:
                killed.append(engine.actors[0])
                ray.kill(engine.actors[0])

    engine.subscribe(on_event)
    finished = await run_to_end(session)
    assert killed and engine.actors_lost == 1
    assert (finished.succeeded, finished.failed, finished.cancelled) == (30, 0, 0)
    transcripts = {line["custom_id"]: line for line in read_jsonl(tmp_path / "run" / "transcripts.jsonl")}
    assert len(transcripts) == 30 and all(t["steps"] == 2 for t in transcripts.values())
    # what the dead actor had out: at most its shard's share of the ceiling (the driver hears of
    # a call up to a batch later, so its own count at the kill can be short of it)
    share = engine.shards[0].concurrency
    stats = sim.stats()
    assert engine.shards[0].actor_no == 0 and share == 6
    assert stats["duplicate_successes"] <= share, "answered twice: only calls the dead actor had out"
    assert 90 <= stats["successes"] <= 90 + share, "a step asked again only if it was in flight"


BATCH_PRICES = {"custom/sim-1": {"input": 2.0, "output": 8.0, "batch_input": 1.0, "batch_output": 4.0}}


async def test_lane_auto_on_ray_agrees_with_the_same_run_here(tmp_path, sim_factory):
    """The batch lane on Ray runs on the driver: a live share on the actors, then the batch from
    the driver, its failed lines retried live on the actors; the same counts, batches and cost
    as here, every task once, no line paid twice."""
    runs = {}
    for name, ray_options in (("local", None), ("ray", RayOptions(actors=2))):
        sim = sim_factory(batch_seconds=0.2, batch_error_rate=0.1, seed=11)
        job = load_job(write_batch(tmp_path / f"{name}.jsonl", [f"batched {i}" for i in range(300)]))
        profile = ProviderProfile(name="custom", base_url=sim.base_url)
        settings = EngineSettings.of(concurrency=20, lane="auto", batch_poll_s=0.05, batch_poll_max_s=0.2)
        plan = RunPlan(profile, settings, prices=BATCH_PRICES)
        session = SwarmSession.open_new(job, plan, tmp_path / name, ray=ray_options)
        finished = await run_to_end(session)
        assert (finished.succeeded, finished.failed, finished.cancelled) == (300, 0, 0), name
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        runs[name] = (summary, sim.stats())
    (summary_here, sim_here), (summary_ray, sim_ray) = runs["local"], runs["ray"]
    every = Counter(f"task-{i:04d}" for i in range(300))
    assert custom_ids(tmp_path / "ray") == custom_ids(tmp_path / "local") == every
    batch_here, batch_ray = sim_here["batch"], sim_ray["batch"]
    assert batch_ray["batches_created"] == batch_here["batches_created"] == 1
    assert batch_ray["lines_submitted"] == batch_here["lines_submitted"] == 280, "after the live share of 20"
    assert batch_ray["lines_by_custom_id_max"] == 1
    assert sim_ray["successes"] == sim_here["successes"] == 20 + batch_ray["lines_failed"], "failed lines once, live"
    assert sim_ray["duplicate_successes"] == 0
    by_endpoint_ray = summary_ray["cost_breakdown"]["by_endpoint"]
    by_endpoint_here = summary_here["cost_breakdown"]["by_endpoint"]
    assert by_endpoint_ray.keys() == by_endpoint_here.keys() == {"custom", "custom/batch"}
    assert summary_ray["cost_usd"] == pytest.approx(summary_here["cost_usd"], abs=1e-6)
    assert [b["status"] for b in summary_ray["batches"]] == ["completed"]


async def test_a_quit_on_ray_leaves_the_batch_running_and_a_resume_on_ray_collects_it(tmp_path, sim_factory):
    sim = sim_factory(batch_seconds=1.0)
    prompts = [f"quit {i}" for i in range(50)]
    session = ray_session(tmp_path, sim.base_url, prompts, lane="batch", batch_poll_s=0.05, batch_poll_max_s=0.2)
    events: list = []
    session.engine.subscribe(events.append)
    run = asyncio.create_task(session.run())
    await wait_until(lambda: any(isinstance(e, BatchSubmitted) for e in events), "the batch was submitted")
    session.engine.abort("quit", leave_batches=True)
    finished = await run
    await session.aclose()
    assert finished.succeeded == 0 and sim.stats()["batch"]["cancelled"] == 0  # still running at the provider
    assert sim.stats()["requests"] == 0, "lane batch: nothing sent live"

    session = SwarmSession.reopen(tmp_path / "run", ray=RayOptions(actors=2))
    finished = await run_to_end(session)
    assert finished.succeeded == 50
    batch = sim.stats()["batch"]
    assert batch["batches_created"] == 1 and batch["lines_by_custom_id_max"] == 1, "collected, never submitted again"
    assert custom_ids(tmp_path / "run") == Counter(f"task-{i:04d}" for i in range(50))


@pytest.mark.parametrize("ending", ["finished", "SIGINT"])
async def test_no_mcp_server_started_on_an_actor_outlives_the_run(tmp_path, sim_factory, ending):
    """The actors' tool servers (one that lingers after its stdin closes) are stopped before the
    actors are killed, whether the run finished or was stopped by Ctrl-C."""
    mark = uuid.uuid4().hex
    sim = sim_factory(latency_ms=5 if ending == "finished" else 400, latency_sigma=0.0)
    server = Path(__file__).with_name("mcp_lingering.py")
    job = tmp_path / "agents.toml"
    job.write_text(
        'name = "agents"\nmodel = "sim-1"\n[request]\nmax_tokens = 1024\n'
        f'[[tools.mcp]]\nname = "lingering"\ncommand = ["{sys.executable}", "{server}"]\nprocesses = 2\n'
        f'env = {{ SWARM_TUI_TEST_MARK = "{mark}" }}\n'
        '[tasks]\ncount = 8\nprompt = "agent {agent} [[sim:tools=3]]"\n'
    )
    args = ["run", str(job), "--ray", "--headless", "--out", str(tmp_path / "run"), "--base-url", sim.base_url]
    proc = start_cli(*args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if ending != "finished":
            await wait_until(lambda: sim.stats()["tool_steps"] > 0, "an agent to step on an actor", timeout=120)
            assert len(processes_marked(mark)) == 2, "the actor's pool of two servers"
            proc.send_signal(signal.SIGINT)
        code = await asyncio.to_thread(proc.wait, 120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == (0 if ending == "finished" else 130)
    assert processes_marked(mark) == []


async def test_checked_answers_on_ray_are_held_to_the_schema_and_counted_as_a_run_here_counts_them(
    tmp_path, sim_factory
):
    """A job asking for a json_schema on a provider whose first answers break it (20%), are cut (3%)
    or refuse (1%), run on two actors: each shard's engine checks, re-asks and gives room as a run
    here does, so every answer kept validates and carries its parsed value, no refusal or cut
    answer is kept, and the summary counts the classes."""
    import jsonschema  # a dependency of the project: never skipped for want of it

    from tests.test_answers import PRICES, RATES, SCHEMA, schema_job

    sim = sim_factory(seed=41, **RATES)
    job = load_job(schema_job(tmp_path / "tickets.jsonl", 200))
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=50), prices=PRICES)
    finished = await run_to_end(SwarmSession.open_new(job, plan, tmp_path / "run", ray=RayOptions(actors=2)))
    results, errors = read_jsonl(tmp_path / "run" / "results.jsonl"), read_jsonl(tmp_path / "run" / "errors.jsonl")
    assert len(results) + len(errors) == 200 and finished.succeeded == len(results) >= 185
    for line in results:
        jsonschema.validate(line["parsed"], SCHEMA)
    assert {e["error"]["code"] for e in errors} <= {"refusal", "length"}, errors[:3]
    answers = json.loads((tmp_path / "run" / "summary.json").read_text())["answers"]
    assert answers["valid"] == len(results) and answers["reasked"] >= 10, answers
    assert sim.stats()["requests"] <= 1.3 * 200
