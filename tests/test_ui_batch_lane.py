"""The batch lane in the console: the lane panel (each batch's id, status,
requests done and failed, time in the 24 h window, next poll), the grid's batch colour until a
task's line comes back, and the footer's batch line (lines waiting, cost split live / batch).

Driven like a user would (Pilot) on the simulator's real Batch API over loopback, live and
attached: both read the run's `RunFigures`, so both show the same lines. A run without batches
looks exactly as before (the snapshots in test_ui_snapshots.py hold it byte for byte)."""

from __future__ import annotations

import asyncio
import re

from swarm_tui.config import Config
from swarm_tui.core.events import BatchEnded, BatchProgress, BatchSubmitted
from swarm_tui.engine import TaskState
from swarm_tui.frontend.attached import AttachedRun
from swarm_tui.ui.app import SwarmApp, make_app
from swarm_tui.ui.contrast import contrast_ratio, readable_on
from swarm_tui.ui.themes import bundled_themes
from swarm_tui.ui.widgets.footer.stats_footer import StatsFigures, StatsFooter
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid
from swarm_tui.ui.widgets.panels.lane_panel import LanePanel
from textual.color import Color

from tests.helpers import open_session
from tests.scripted_run import FROZEN
from tests.test_ui_agent_cells import cell, panel_text
from tests.test_ui_app import wait_for

FAST_POLL = {"batch_poll_s": 0.05, "batch_poll_max_s": 0.2}
PRICES = {"custom/sim-1": {"input": 2.0, "output": 8.0, "batch_input": 1.0, "batch_output": 4.0}}
OPEN_LINE = re.compile(r"batch_…\w{8} +(validating|in progress|finalizing) +\d+/30 done  \d+s of 24h")


def lane_text(app: SwarmApp) -> str:
    panel = app.query_one(LanePanel)
    return "\n".join(panel.render_line(y).text.rstrip() for y in range(panel.size.height))


def footer_text(app: SwarmApp) -> str:
    return app.query_one(StatsFigures).text.plain


def polled(lane: str) -> bool:
    """The lane panel shows a poll of the batch: when the next one is due, or one under way."""
    return "poll in" in lane or "polling" in lane


def batch_cells(app: SwarmApp, indices) -> bool:
    """Every one of these agents' cells is drawn in the batch colour."""
    grid = app.query_one(AgentGrid)
    batch = grid.batch_style().bgcolor
    return all(cell(grid, i)[1].bgcolor == batch for i in indices)


async def test_the_console_shows_the_batch_lane_while_it_waits_then_its_lines_arrive(tmp_path, sim_factory):
    sim = sim_factory(batch_seconds=5.0)  # long enough to be seen waiting on a loaded machine
    session = open_session(
        tmp_path, sim.base_url, [f"lane {i}" for i in range(30)], lane="batch", prices=PRICES, **FAST_POLL
    )
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            grid = app.query_one(AgentGrid)
            # the line is drawn from the batch's submission on ("validating", the status before any
            # poll); the poll's figures come with its first BatchProgress, later on a loaded machine
            await wait_for(
                pilot,
                lambda: OPEN_LINE.search(lane_text(app)) and polled(lane_text(app)) and batch_cells(app, range(30)),
                what="the batch to be polled and its agents drawn in the batch colour",
            )
            assert grid.batch_style().bgcolor != grid.state_style(TaskState.RUNNING).bgcolor
            assert grid.facts.in_batch == app.source.stats.batch_waiting == 30
            lane = lane_text(app)
            assert lane.startswith("=  30 of 30 batch lines waiting · 1 batch · half price, back within 24h"), lane
            assert polled(lane), lane
            assert "0 running" in panel_text(app), "running counts live calls; the lines wait in the batch"
            assert "=  30 in batch" in panel_text(app), "the legend counts the batch lines too"
            footer = footer_text(app)
            assert "in flight    0/" in footer and "in batch    30 waiting" in footer, footer
            assert app.query_one(StatsFooter).has_class("-batch")
            assert sim.stats()["requests"] == 0, "lane batch: nothing live"

            await wait_for(pilot, lambda: app.phase == "DONE", timeout=20, what="the batch's lines to arrive")
            await wait_for(pilot, lambda: "completed" in lane_text(app), what="the lane panel to say so")
            assert all(cell(grid, i)[1].bgcolor == grid.state_style(TaskState.SUCCEEDED).bgcolor for i in range(30))
            assert grid.facts.in_batch == 0
            lane = lane_text(app)
            assert re.search(r"0 of 30 batch lines waiting · 1 batch", lane), lane
            assert re.search(r"batch_…\w{8} +completed +30/30 done$", lane, re.M), lane
            stats = app.source.stats
            assert stats.batch_cost_usd > 0 and abs(stats.batch_cost_usd - stats.cost_usd) < 1e-12
            split = f"in batch     0 waiting   cost (live $0.0000 · batch ${stats.batch_cost_usd:.4f})"
            assert split in footer_text(app), footer_text(app)
            live_lane, live_split = lane, footer_text(app).splitlines()[3]
            await pilot.press("q")
    finally:
        await session.aclose()

    attached = AttachedRun(tmp_path / "run")  # the same run, replayed from its journal: the same lines
    app = make_app(attached, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            grid = app.query_one(AgentGrid)
            await wait_for(
                pilot,
                lambda: lane_text(app) == live_lane and grid.facts.batching and grid.facts.in_batch == 0,
                what="the attached view to show the lane",
            )
            assert footer_text(app).splitlines()[3] == live_split
    finally:
        await attached.aclose()


async def test_an_attached_view_shows_the_batch_while_its_lines_wait(tmp_path, sim_factory):
    """Lane auto: a live share first (done), then the rest in a batch, seen from another view."""
    sim = sim_factory(batch_seconds=2.0)
    session = open_session(
        tmp_path, sim.base_url, [f"auto {i}" for i in range(30)], lane="auto", live_share=0.02, **FAST_POLL
    )
    runner = asyncio.create_task(session.run())
    attached = AttachedRun(tmp_path / "run")
    app = make_app(attached, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: "batch lines waiting" in lane_text(app), what="the batch to be shown")
            [batch] = attached.follower.figures.batches.values()
            waiting = [i for i in range(30) if attached.follower.board.in_flight.get(i)]
            assert len(waiting) == batch.requests == 10, "the first 20 (the least live share) went live"
            await wait_for(
                pilot,
                lambda: (
                    batch_cells(app, waiting)
                    and re.search(r"(validating|in progress|finalizing) +\d+/10 done", lane_text(app))
                ),
                what="its agents in the batch colour, its status polled",
            )
            grid = app.query_one(AgentGrid)
            done = grid.state_style(TaskState.SUCCEEDED).bgcolor
            assert all(cell(grid, i)[1].bgcolor == done for i in range(30) if i not in waiting)
            await wait_for(pilot, lambda: runner.done(), timeout=20, what="the run to end")
            await wait_for(
                pilot,
                lambda: re.search(r"completed +10/10 done", lane_text(app)),
                what="the attached view to see the batch completed",
            )
            assert all(cell(grid, i)[1].bgcolor == done for i in range(30))
    finally:
        if not runner.done():
            session.engine.abort()
            await runner
        await session.aclose()
        await attached.aclose()


SUBMITTED = [
    BatchSubmitted(
        "batch_6797a5d4d0e881909e1c4a6a0c9c2b07", "custom/batch", tuple(range(20)), (1,) * 20, submitted_at=FROZEN
    ),
    BatchSubmitted(
        "batch_6797a5d4d0e881909e1c4a6a11111111",
        "custom/batch",
        tuple(range(20, 40)),
        (1,) * 20,
        submitted_at=FROZEN + 5,
    ),
    BatchSubmitted(
        "batch_6797a5d4d0e881909e1c4a6a22222222",
        "custom/batch",
        tuple(range(40, 45)),
        (1,) * 5,
        submitted_at=FROZEN + 10,
    ),
]
"""Three batches of OpenAI-like ids (the same timestamp first): the second ends expired."""


def feed_batches(app: SwarmApp) -> None:
    view = app.view
    for event in SUBMITTED:
        view.observe(event, FROZEN)
    view.observe(BatchProgress(SUBMITTED[0].batch_id, "in_progress", 4, 1, 20, next_poll_s=8.0), FROZEN + 720)
    view.observe(BatchProgress(SUBMITTED[1].batch_id, "expired", 10, 3, 20), FROZEN + 700)
    view.observe(BatchEnded(SUBMITTED[1].batch_id, "expired", succeeded=10, failed=3, requeued=7), FROZEN + 701)
    app.layout._wall_clock = lambda: FROZEN + 725
    app.update_panels()


async def test_lane_panel_lines_from_the_events_alone(app_on_run):
    """Batches fed as events into a frozen run: every figure of a line, the latest shown at 80x24
    (open ones kept), and nothing at all before a batch exists."""
    app = app_on_run()
    async with app.run_test(size=(80, 24)) as pilot:
        footer = app.query_one(StatsFooter)
        panel = app.query_one(LanePanel)
        assert not panel.display and not footer.has_class("-batch") and not app.grid.facts.batching
        assert footer.size.height == 3
        feed_batches(app)
        await pilot.pause()
        app.update_panels()  # (as the next tick does, now that the panel has its width)
        await pilot.pause()
        lane = lane_text(app).splitlines()
        assert lane[0] == "=  45 of 45 batch lines waiting · 3 batches (2 open), latest 2 shown", lane
        assert lane[1:] == [
            "batch_…0c9c2b07 in progress  4/20 done 1 failed  12m of 24h · poll in 3s",
            "batch_…22222222 validating   0/5  done  11m of 24h",
        ], "the open ones, not the ended"
        assert footer.has_class("-batch") and footer.size.height == 4
        assert footer_text(app).splitlines()[3].startswith("in batch    45 waiting   cost (live $0.0245 · batch")


async def test_a_taller_lane_panel_lists_more_batches(app_on_run):
    app = app_on_run()
    async with app.run_test(size=(120, 40)) as pilot:  # every batch, the expired one in between
        feed_batches(app)
        app.view.observe(BatchProgress(SUBMITTED[2].batch_id, "in_progress", 5, 0, 5, next_poll_s=30.0), FROZEN + 720)
        await pilot.pause()
        app.update_panels()
        await pilot.pause()
        lines = lane_text(app).splitlines()
        assert len(lines) == 4 and "latest" not in lines[0], lines
        assert lines[0].endswith("3 batches (2 open) · half price, back within 24h"), lines
        assert lines[2] == "batch_…11111111 expired     10/20 done 3 failed 7 sent again"
        assert lines[3].endswith("5/5  done  11m of 24h · poll in 25s")


def test_batch_cells_stand_apart_in_every_theme():
    """(The text on `$swarm-batch` is held to AA by the theme test, as every `swarm-*` colour is.)
    A cell waiting in a batch looks like no other state's, nor like one in its tools, and not like
    a live running one even without its hue: black text on one, white on the other, or a step in
    lightness."""
    for theme in bundled_themes():
        colours = theme.variables
        batch = Color.parse(colours["swarm-batch"])
        for name in ("running", "tool", "queued", "retrying", "succeeded", "failed", "cancelled", "cached"):
            other = Color.parse(colours[f"swarm-{name}"])
            distance = sum((a - b) ** 2 for a, b in zip(batch.rgb, other.rgb, strict=True)) ** 0.5
            assert distance >= 90, f"{theme.name}: $swarm-batch is too close to $swarm-{name}"
        running = Color.parse(colours["swarm-running"])
        assert readable_on(batch) != readable_on(running) or contrast_ratio(batch, running) >= 1.5, theme.name
