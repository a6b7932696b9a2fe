"""An orchestrator whose model spawns, waits for and merges its own sub-agents, over real loopback
HTTP on the simulator (which orchestrates in waves: `sim/orchestrating.py`).

What users rely on: every sub-agent answers once and the orchestrator's answer quotes them; the
limits (depth, agents per run, per call) are tool results the model reads, never a crash; a run
killed with SIGKILL resumes without spawning twice or sending a finished sub-agent again; a wait
never hangs on an agent the user cancelled."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from swarm_tui.core.events import AttemptStarted, Spawn, TaskState
from swarm_tui.core.task import Task
from swarm_tui.engine import EngineSettings
from swarm_tui.jobs import load_job
from swarm_tui.journal import Journal
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.tools.agent_tools import CallSite
from swarm_tui.tools.orchestrator_spec import OrchestratorSpec
from swarm_tui.tools.swarm_tools import Ended, SwarmTools

from tests.conftest import REPO, kill_when, read_jsonl, run_cli, start_cli

MARKER = re.compile(r"\[\[sim:[^\]]*\]\]")


def orchestrator_job(tmp_path: Path, goal: str, *, extra: str = "", max_tokens: int = 8192) -> Path:
    job = tmp_path / "orchestrate.toml"
    job.write_text(
        textwrap.dedent(f"""
        name = "orchestrate"
        model = "sim-1"
        [request]
        max_tokens = {max_tokens}
        [orchestrator]
        goal = "{goal}"
        """)
        + textwrap.dedent(extra)
    )
    return job


def quoted(answer: str) -> str:
    """A sub-agent's answer as the simulated orchestrator quotes it (markers out, folded, cut at 120)."""
    flat = " ".join(MARKER.sub("", answer).split())
    return flat if len(flat) <= 120 else flat[:120] + "…"


def answers_of(run_dir: Path) -> dict[str, str]:
    return {
        line["custom_id"]: line["response"]["body"]["choices"][0]["message"]["content"]
        for line in read_jsonl(run_dir / "results.jsonl")
    }


def tasks_of(run_dir: Path) -> list[tuple[int, str, int | None, int, str | None, str]]:
    if not (run_dir / "journal.sqlite").exists():
        return []
    db = sqlite3.connect(f"file:{run_dir / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT idx, custom_id, parent, depth, spawn, state FROM tasks ORDER BY idx").fetchall()
    except sqlite3.OperationalError:  # not made yet
        return []
    finally:
        db.close()


def spawns_logged(run_dir: Path) -> list[dict]:
    db = sqlite3.connect(f"file:{run_dir / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT data FROM log WHERE kind = 'TasksAdded'").fetchall()
    finally:
        db.close()
    return [json.loads(data) for (data,) in rows if "spawn" in json.loads(data)]


def test_one_orchestrator_spawns_100_sub_agents_in_two_waves_and_quotes_them(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=20)
    job = orchestrator_job(tmp_path, "Survey retry strategies [[sim:spawn=50+50]]")
    run_dir = tmp_path / "run"
    done = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(run_dir))
    assert done.returncode == 0, done.stderr

    tasks = tasks_of(run_dir)
    assert len(tasks) == 101
    children = [t for t in tasks if t[2] is not None]
    assert len(children) == 100 and all(parent == 0 and depth == 1 for _, _, parent, depth, _, _ in children)
    assert sorted(cid for _, cid, *_ in children) == sorted(
        [f"orchestrator/1.{n}" for n in range(1, 51)] + [f"orchestrator/2.{n}" for n in range(1, 51)]
    )
    logged = spawns_logged(run_dir)
    assert [len(s["indices"]) for s in logged] == [50, 50], "one spawn per wave, each once"
    assert [s["spawn"].get("wait", True) for s in logged] == [True, False]

    successes = Counter(sim.stats()["successes_by_prompt"])
    prompts = {
        cid: Journal.open(run_dir, readonly=True).queries.body_of(idx)["messages"][-1]["content"]
        for idx, cid, *_ in children
    }
    assert all(successes[prompt] == 1 for prompt in prompts.values()), "every sub-agent answered once"
    assert all(prompt.startswith("Follow-up") for cid, prompt in prompts.items() if "/2." in cid), (
        "the second wave is built from the first one's answers"
    )

    answers = answers_of(run_dir)
    final = answers["orchestrator"]
    assert final.startswith("Sim orchestrator answer to: Survey retry strategies")
    assert "100 of 100 sub-agents answered, in 2 waves" in final
    for cid, _ in prompts.items():
        agent_id = cid.split("/")[-1]
        assert f"[{agent_id}] {quoted(answers[cid])}" in final, f"{agent_id} is not quoted"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["total"] == 101 and summary["succeeded"] == 101
    tree = summary["orchestrator"]
    assert (tree["spawned"], tree["spawns"], tree["levels"], tree["critical_path_calls"]) == (100, 2, [1, 100], 5)
    assert 0 < tree["critical_path_s"] <= summary["makespan_s"]


def test_a_child_spawns_grandchildren_at_depth_2_and_depth_3_is_refused(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=2)
    job = orchestrator_job(tmp_path, "Nested [[sim:spawn=2/2/1]]", extra="max_depth = 2\n")
    run_dir = tmp_path / "run"
    done = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(run_dir))
    assert done.returncode == 0, done.stderr
    tasks = tasks_of(run_dir)
    assert Counter(depth for _, _, _, depth, _, _ in tasks) == {0: 1, 1: 2, 2: 4}
    by_id = {cid: (idx, parent) for idx, cid, parent, *_ in tasks}
    for cid, (_, parent) in by_id.items():
        if cid.count("/") == 2:  # a grandchild: its parent is the child its id names
            assert by_id[cid.rsplit("/", 1)[0]][0] == parent

    journal = Journal.open(run_dir, readonly=True)
    answers = answers_of(run_dir)
    for idx, cid, _, depth, _, _ in tasks:
        body = journal.queries.body_of(idx)
        offered = [t["function"]["name"] for t in body.get("tools", [])]
        if depth == 1:
            assert "spawn_agents" in offered, "a child may spawn (depth 1 < max_depth 2)"
        if depth == 2:
            assert "spawn_agents" not in offered, "past max_depth the swarm tools are not offered"
            refusal = [m["content"] for m in body["messages"] if m["role"] == "tool"]
            assert len(refusal) == 1 and refusal[0].startswith("spawn_agents refused: these agents would be at depth 3")
            assert "past max_depth 2" in refusal[0]
            assert "spawn refused:" in answers[cid]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["agents"]["tool_errors"] == 4  # the four refusals, each a tool result not ok


def test_spawns_past_max_agents_or_max_spawn_are_refused_in_the_tool_result(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=1)
    job = orchestrator_job(tmp_path, "Too many [[sim:spawn=3+4]]", extra="max_agents = 5\nmax_spawn = 3\n")
    run_dir = tmp_path / "run"
    done = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(run_dir))
    assert done.returncode == 0, done.stderr
    assert len(tasks_of(run_dir)) == 4, "the first wave (3) only: the second (4) was refused"
    final = answers_of(run_dir)["orchestrator"]
    assert "spawn refused: spawn_agents refused: 4 agents in one call, past max_spawn 3" in final

    again = orchestrator_job(tmp_path, "Too many [[sim:spawn=3+3]]", extra="max_agents = 5\nmax_spawn = 3\n")
    run_dir = tmp_path / "run2"
    done = run_cli("run", str(again), "--headless", "--base-url", sim.base_url, "--out", str(run_dir))
    assert done.returncode == 0, done.stderr
    final = answers_of(run_dir)["orchestrator"]
    assert "3 agents would pass max_agents 5 for the run (3 spawned so far): 2 more may be spawned" in final
    assert "3 of 3 sub-agents answered" in final


def test_sigkill_after_the_first_wave_then_resume_spawns_nothing_twice(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=80, latency_sigma=0.3)
    job = orchestrator_job(tmp_path, "Crash me [[sim:spawn=30+30]]")
    run_dir = tmp_path / "run"

    def wave_done(wave: int, at_least: int):
        def ready() -> bool:
            rows = tasks_of(run_dir)
            return sum(1 for _, cid, _, _, _, state in rows if f"/{wave}." in cid and state == "succeeded") >= at_least

        return ready

    first = start_cli(
        "run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(run_dir),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy(),
    )  # fmt: skip
    kill_when(first, wave_done(1, 30), "the first wave answered")
    before = {cid: state for _, cid, _, _, _, state in tasks_of(run_dir)}

    # the second session is killed in turn, while the second wave runs
    second = start_cli(
        "resume", str(run_dir), "--headless", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy()
    )
    kill_when(second, wave_done(2, 10), "ten of the second wave answered")
    middle = {cid: state for _, cid, _, _, _, state in tasks_of(run_dir)}

    sim_before = Counter(sim.stats()["successes_by_prompt"])
    sim.reset()
    last = run_cli("resume", str(run_dir), "--headless")
    assert last.returncode == 0, last.stderr

    tasks = tasks_of(run_dir)
    assert len(tasks) == 61 and len({cid for _, cid, *_ in tasks}) == 61
    logged = spawns_logged(run_dir)
    assert sorted((s["spawn"]["step"], len(s["indices"])) for s in logged) == [(1, 30), (2, 30)], "no spawn repeated"
    journal = Journal.open(run_dir, readonly=True)
    prompts = {cid: journal.queries.body_of(idx)["messages"][-1]["content"] for idx, cid, *_ in tasks if idx}
    resent = Counter(sim.stats()["successes_by_prompt"])
    finished_before = {cid for cid, state in middle.items() if state == "succeeded" and cid != "orchestrator"}
    assert {cid for cid, state in before.items() if "/1." in cid and state == "succeeded"} <= finished_before
    assert not any(resent[prompts[cid]] for cid in finished_before), "a sub-agent that had answered was sent again"
    assert all(resent[prompts[cid]] + sim_before[prompts[cid]] >= 1 for cid in prompts)

    answers = answers_of(run_dir)
    final = answers["orchestrator"]
    assert "60 of 60 sub-agents answered, in 2 waves" in final
    assert all(f"[{cid.split('/')[-1]}] {quoted(answers[cid])}" in final for cid in prompts)
    assert len(read_jsonl(run_dir / "results.jsonl")) == 61 and read_jsonl(run_dir / "errors.jsonl") == []
    tree = json.loads((run_dir / "summary.json").read_text())["orchestrator"]
    assert (tree["spawned"], tree["spawns"], tree["levels"]) == (60, 2, [1, 60])


class Finished:
    """A run as it ended (a `SpawnHost`): every agent succeeded, with `answers` (else `answer N`);
    adding a task is a bug here."""

    def __init__(self, answers: dict[int, str] | None = None) -> None:
        self.answers = answers or {}

    def task_of(self, index: int) -> Task:
        return Task(index, "orchestrator", {})

    @property
    def next_index(self) -> int:
        return 4

    def add_tasks(self, tasks, spawn: Spawn) -> list[int]:
        raise AssertionError(f"spawned again: {tasks}")

    def ended(self, index: int) -> Ended | None:
        return Ended("succeeded", self.answers.get(index, f"answer {index}"))

    async def settle(self, indices, timeout_s=None) -> None:
        return None


async def test_long_answers_are_cut_to_their_share_and_agent_result_pages_them_whole():
    spawn = Spawn(0, 1, 1, 0, "call_a")
    tools = SwarmTools(OrchestratorSpec(result_chars=1000), spawned=[(1, "orchestrator/1.1", spawn),
                                                                      (2, "orchestrator/1.2", spawn)])  # fmt: skip
    long = "x" * 9000 + "the end"
    tools.attach(Finished({1: long, 2: "short"}))
    waited = await tools.call("wait_agents", "{}", 0)
    agents = json.loads(waited.text)["agents"]
    assert agents[0]["answer"] == long[:500] and agents[1] == {"id": "1.2", "state": "succeeded", "answer": "short"}
    assert agents[0]["cut"] == '500 of 9,007 characters shown; agent_result(id="1.1", offset=500) gives the rest'
    first = json.loads((await tools.call("agent_result", '{"id": "1.1", "offset": 500}', 0)).text)
    assert first["answer"] == long[500:8500] and first["next_offset"] == 8500 and first["total_chars"] == 9007
    last = json.loads((await tools.call("agent_result", '{"id": "1.1", "offset": 8500}', 0)).text)
    assert last["answer"].endswith("the end") and last["next_offset"] is None
    unknown = await tools.call("agent_result", '{"id": "9.9"}', 0)
    assert not unknown.ok and "no agent of yours is called '9.9' (yours: 1.1, 1.2)" in unknown.text
    assert not (await tools.call("wait_agents", "{}", 1)).ok, "agent 1 spawned none"


async def test_a_spawn_run_again_finds_its_agents_and_adds_none(tmp_path, sim_factory):
    """The journal says what a spawn added (keyed by its call's place): run again, it spawns nothing."""
    sim = sim_factory(latency_ms=1)
    job = load_job(orchestrator_job(tmp_path, "Once [[sim:spawn=3]]"))
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=4))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    try:
        await asyncio.wait_for(session.run(), 60)
    finally:
        await session.aclose()
    journal = Journal.open(tmp_path / "run", readonly=True)
    spawned = journal.queries.spawned()
    assert [s.key for _, _, s in spawned] == ["1:0"] * 3

    tools = SwarmTools(OrchestratorSpec(), spawned=spawned)
    tools.attach(Finished())
    arguments = json.dumps({"tasks": [{"prompt": "a"}, {"prompt": "b"}, {"prompt": "c"}]})
    again = await tools.call("spawn_agents", arguments, 0, site=CallSite(1, 0, "call_x"))
    assert again.ok and [a["answer"] for a in json.loads(again.text)["agents"]] == ["answer 1", "answer 2", "answer 3"]
    with pytest.raises(AssertionError, match="spawned again"):  # another call (another place) does spawn
        await tools.call("spawn_agents", arguments, 0, site=CallSite(2, 0, "call_y"))


async def test_a_wait_never_hangs_on_an_agent_the_user_cancelled(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=1)
    job = load_job(orchestrator_job(tmp_path, "Cancel one [[sim:spawn=3]] [[sim:tokens=8]]"))
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=4))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    cancelled: list[int] = []

    def cancel_the_second(event) -> None:  # the user's `x` on sub-agent 1.2 as its call goes out
        if not cancelled and isinstance(event, AttemptStarted) and event.index == 2:
            cancelled.append(event.index)
            session.engine.cancel_tasks([event.index])

    session.engine.subscribe(cancel_the_second)
    try:
        await asyncio.wait_for(session.run(), 60)
    finally:
        await session.aclose()
    states = session.engine.states
    assert states[0] is TaskState.SUCCEEDED and states[cancelled[0]] is TaskState.CANCELLED
    final = answers_of(tmp_path / "run")["orchestrator"]
    assert "[1.2] cancelled: cancelled by the user" in final and "2 of 3 sub-agents answered" in final


def test_bad_orchestrator_tables_and_flags_exit_2_naming_file_line_and_field(tmp_path, sim):
    job = tmp_path / "bad.toml"
    job.write_text('name = "bad"\nmodel = "sim-1"\n[orchestrator]\ngoal = "x"\nmax_depth = 0\nfanout = 3\n')
    result = run_cli("run", str(job), "--headless", "--base-url", sim.base_url, "--out", str(tmp_path / "run"))
    assert result.returncode == 2
    assert f"{job}:5: orchestrator.max_depth: must be an integer from 1 to 8, not 0" in result.stderr
    assert f"{job}:6: orchestrator.fanout: unknown key" in result.stderr
    assert not (tmp_path / "run").exists() and sim.stats()["requests"] == 0

    both = tmp_path / "both.toml"
    both.write_text('model = "sim-1"\n[orchestrator]\ngoal = "x"\n[[task]]\nprompt = "y"\n')
    result = run_cli("run", str(both), "--headless", "--base-url", sim.base_url)
    assert result.returncode == 2 and "orchestrator.goal: give the orchestrator a goal or [tasks]" in result.stderr

    batch = tmp_path / "job.jsonl"
    batch.write_text(
        json.dumps({"custom_id": "a", "body": {"model": "sim-1", "messages": [{"role": "user", "content": "x"}]}})
        + "\n"
    )
    result = run_cli("run", str(batch), "--orchestrate", "goal", "--headless", "--base-url", sim.base_url)
    assert result.returncode == 2 and "--orchestrate with a job needs its [orchestrator] table" in result.stderr

    clash = tmp_path / "clash.toml"
    clash.write_text(
        'model = "sim-1"\n[orchestrator]\ngoal = "x"\n'
        '[[tools.python]]\nfunction = "tests.agent_tools:lookup"\nname = "spawn_agents"\n'
    )
    result = run_cli("run", str(clash), "--headless", "--base-url", sim.base_url, cwd=REPO)
    assert result.returncode == 2 and "spawn_agents: the name of an orchestrator's own tool" in result.stderr

    result = run_cli(
        "run", "--orchestrate", "goal", "--lane", "batch", "--headless", "--base-url", sim.base_url, "--model", "m"
    )
    assert result.returncode == 2 and "an orchestrator and its sub-agents run live only" in result.stderr


def test_run_orchestrate_on_the_embedded_simulator_needs_no_job_and_no_key(tmp_path):
    run_dir = tmp_path / "run"
    result = run_cli(
        "run", "--orchestrate", "Plan a launch", "--headless", "--out", str(run_dir),
        "--sim-latency-ms", "5", "--sim-error-rate", "0",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    answers = answers_of(run_dir)
    assert answers["orchestrator"].startswith("Sim orchestrator answer to: Plan a launch")
    tasks = tasks_of(run_dir)
    assert len(tasks) >= 10 and {depth for _, _, _, depth, _, _ in tasks} == {0, 1}
    assert all(state == "succeeded" for *_, state in tasks)
    said = re.search(r"agents 1 \+ (\d+) by level \((\d+) spawned in 2 spawns\); critical path 5 calls", result.stderr)
    assert said is not None and int(said.group(1)) == int(said.group(2)) == len(tasks) - 1, result.stderr


def test_an_orchestrator_on_ray_is_refused_by_name(tmp_path, sim):
    result = run_cli("run", "--orchestrate", "goal", "--ray", "--headless", "--base-url", sim.base_url, "--model", "m")
    assert result.returncode == 2
    assert "agents that spawn agents (an orchestrator: [orchestrator], --orchestrate) does not run on Ray" in (
        result.stderr
    )
    assert sim.stats()["requests"] == 0
