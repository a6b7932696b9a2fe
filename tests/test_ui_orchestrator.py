"""An orchestrated run in the console: the grid shows each agent under its parent with its depth
mark, the run panel the agents per level and the critical path beside the time taken, the detail
each agent's line and what it spawned; `x` and `R` on a parent ask whether its subtree goes too.
The same from an attached view (the events of the journal) as from the run itself."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

from swarm_tui.config import Config
from swarm_tui.core.events import TaskState
from swarm_tui.engine import EngineSettings
from swarm_tui.frontend.attached import AttachedRun
from swarm_tui.jobs import load_job
from swarm_tui.providers.profile import ProviderProfile
from swarm_tui.run.session import RunPlan, SwarmSession
from swarm_tui.ui.app import make_app
from swarm_tui.ui.screens.detail import AgentDetailScreen
from swarm_tui.ui.screens.dialogs import ConfirmScreen
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid
from swarm_tui.ui.widgets.panels.run_panel import RunPanel
from textual.widgets import Static

from tests.conftest import run_cli
from tests.test_ui_app import on_top, wait_for


def job_file(tmp_path: Path, goal: str) -> Path:
    job = tmp_path / "tree.toml"
    job.write_text(
        textwrap.dedent(f"""
        name = "tree"
        model = "sim-1"
        [request]
        max_tokens = 4096
        [orchestrator]
        goal = "{goal}"
        """)
    )
    return job


async def test_the_attached_console_shows_the_tree_its_levels_and_critical_path(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=5, latency_sigma=0.0)
    run_dir = tmp_path / "run"
    done = run_cli("run", str(job_file(tmp_path, "Tree [[sim:spawn=2/2]]")), "--headless", "--base-url", sim.base_url,
                   "--out", str(run_dir))  # fmt: skip
    assert done.returncode == 0, done.stderr
    source = AttachedRun(run_dir)
    app = make_app(source, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: len(source.states) == 7, what="the run's seven agents")
            family = source.view.family
            # 0 spawned 1 and 2 (depth 1); 1 spawned 3 and 4, 2 spawned 5 and 6 (depth 2)
            assert family.children[0] == [1, 2] and {family.parent[i] for i in (3, 4, 5, 6)} == {1, 2}
            grid = app.query_one(AgentGrid)
            order = [grid.index_at(p) for p in range(grid.count)]
            assert order == [0, 1, *family.children[1], 2, *family.children[2]], "each agent under its parent"
            assert grid._cell_text(1, TaskState.SUCCEEDED, None, False).startswith("o'")
            assert grid._cell_text(order[2], TaskState.SUCCEEDED, None, False).startswith('o"')
            assert grid._cell_text(0, TaskState.SUCCEEDED, None, False).startswith("o ")

            panel = app.query_one(RunPanel).text.plain
            assert "levels 1 · 2 · 4" in panel
            path = family.critical_path()
            # the orchestrator's spawn, a child's spawn, a grandchild's answer, the child's, the orchestrator's
            assert path is not None and path.calls == 5
            assert f"critical {path.seconds:.1f}s ({path.calls} calls)" in panel and " · took " in panel

            grandchild = order[2]
            grid.move_to(grandchild)
            await pilot.press("enter")
            await wait_for(pilot, on_top(app, AgentDetailScreen), what="the detail")
            line = str(app.screen.query_one("#detail-family", Static).content)
            assert f"Spawned by agent 2 at its step 1 (waited for), depth 2; its line: 1 > 2 > {grandchild + 1}" in line
            await pilot.press("escape")
            grid.move_to(0)
            await pilot.press("enter")
            await wait_for(pilot, on_top(app, AgentDetailScreen), what="the orchestrator's detail")
            line = str(app.screen.query_one("#detail-family", Static).content)
            assert line == "Step 1 spawned 2 agents (2-3): 2 done"
            await pilot.press("escape", "q")
    finally:
        await source.aclose()


async def test_x_and_r_on_a_parent_ask_for_its_subtree(tmp_path, sim_factory):
    # each call takes 2 s: agent 2's two must still be on the wire when the cancel lands, however
    # long the key presses take on a loaded machine (at 0.5 s they had sometimes answered first)
    sim = sim_factory(latency_ms=2000, latency_sigma=0.0)
    job = load_job(job_file(tmp_path, "Steer [[sim:spawn=2/2]]"))
    plan = RunPlan(ProviderProfile("custom", base_url=sim.base_url), EngineSettings.of(concurrency=20))
    session = SwarmSession.open_new(job, plan, tmp_path / "run")
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    states = session.engine.states
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            family = app.view.family
            await wait_for(
                pilot,
                lambda: len(family.children.get(1, ())) == 2 and all(states[i] is TaskState.RUNNING for i in (3, 4)),
                timeout=20,
                what="agent 2 waiting for the two it spawned",
            )
            app.query_one(AgentGrid).move_to(1)
            await pilot.press("x")
            await wait_for(pilot, on_top(app, ConfirmScreen), what="the subtree question")
            await pilot.press("y")
            await wait_for(
                pilot,
                lambda: all(states[i] is TaskState.CANCELLED for i in (1, 3, 4)),
                what="agent 2 and its two cancelled",
            )
            assert states[0] is TaskState.RUNNING, "the orchestrator still waits (for agent 3)"
            await pilot.press("R")
            await wait_for(pilot, on_top(app, ConfirmScreen), what="the retry's subtree question")
            await pilot.press("y")
            await wait_for(pilot, lambda: app.phase == "DONE", timeout=30, what="the run to end")
            assert all(state is TaskState.SUCCEEDED for state in states.values())
            await pilot.press("q")
    finally:
        await session.aclose()
    logged = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert len(logged) == 7, "agent 2's spawn, run again after its retry, added no agent"
    await asyncio.sleep(0)
