"""The console at 120x40, 80x24 and 60x20, with and without colour: whole keys in every footer,
the phase, done, failed and the ETA in view, a glyph in every cell, the range a scrolling grid
shows and its follow mode. Pilot on the snapshot fixture's finished run, and a real terminal
(tmux) for NO_COLOR."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from swarm_tui.config import Config
from swarm_tui.engine import TaskState
from swarm_tui.ui.widgets.footer.key_footer import KeyFooter
from swarm_tui.ui.widgets.grid.agent_grid import GLYPHS, AgentGrid
from textual.widgets._footer import FooterKey

from tests.conftest import REPO, write_batch
from tests.helpers import open_session
from tests.test_ui_agent_cells import panel_text
from tests.test_ui_app import wait_for
from tests.test_ui_console import screen_text
from tests.test_ui_lifecycle import run_over

SIZES = [(120, 40), (80, 24), (60, 20)]


def footer_keys(app) -> list[FooterKey]:
    return list(app.screen.query_one(KeyFooter).query(FooterKey))


async def assert_whole_keys(app, pilot, *needed: str) -> None:
    """Every key of the screen's footer drawn whole inside the screen, and the needed ones there."""
    footer = app.screen.query_one(KeyFooter)

    def drawn_keys() -> bool:
        keys = footer_keys(app)
        line = screen_text(app).splitlines()[footer.region.y]
        return bool(keys) and all(f"{key.key_display} {key.description}" in line for key in keys)

    await wait_for(pilot, drawn_keys, what="the footer's keys drawn")
    keys = footer_keys(app)
    labels = [f"{key.key_display} {key.description}" for key in keys]
    right = max(key.region.right for key in keys)
    assert right <= footer.region.right, f"{labels} run past the footer ({right} > {footer.region.right})"
    drawn = screen_text(app).splitlines()[footer.region.y]
    for label in labels:
        assert label in drawn, (label, drawn)
    for label in needed:
        assert label in labels, f"{label!r} not in the footer: {labels}"


@pytest.mark.parametrize("size", SIZES, ids=["120x40", "80x24", "60x20"])
async def test_the_main_screen_keeps_quit_help_the_phase_done_failed_and_the_eta(app_on_run, size):
    app = app_on_run()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.update_panels()
        await pilot.pause()
        await assert_whole_keys(app, pilot, "q Quit", "? Help", "r Retry")
        panel = panel_text(app)
        assert panel.startswith("FINISHED 97 done, 3 failed"), panel
        assert "o   97 done" in panel and "x    3 failed" in panel, panel
        figures = app.figures.text.plain
        assert "done    97" in figures and "failed    3" in figures and "ETA --:--" in figures, figures
        bar = app.query_one("#provider-bar").render_line(0).text
        assert "SIMULATED" in bar and "e: provider pane" in bar and not bar.rstrip().endswith("…"), bar


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_the_detail_footer_keeps_back_and_quit_whole(app_on_run, size):
    app = app_on_run()
    async with app.run_test(size=size) as pilot:
        app.open_agent(12)
        await pilot.pause(0.2)
        await assert_whole_keys(app, pilot, "esc Back", "q Quit", "? Help")


async def test_an_attached_views_footer_says_detach_whole_at_60x20(journal_copy):
    from swarm_tui.frontend.attached import AttachedRun
    from swarm_tui.ui.app import make_app

    source = AttachedRun(journal_copy)  # the finished run, copied into the working directory
    app = make_app(source, config=Config(path=Path("config.toml")))
    try:
        async with app.run_test(size=(60, 20)) as pilot:
            await wait_for(pilot, lambda: source.stats.done == 100, what="the journal replayed")
            await pilot.pause(0.2)
            await assert_whole_keys(app, pilot, "q Detach", "? Help")
    finally:
        await source.aclose()


async def test_a_scrolling_grid_says_which_agents_it_shows_and_follows_the_active_ones(tmp_path, sim_factory):
    sim = sim_factory(latency_ms=400.0, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(600)], concurrency=4, adaptive=False)
    from swarm_tui.ui.app import make_app

    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            grid = app.query_one(AgentGrid)
            await wait_for(pilot, lambda: session.engine.stats.succeeded >= 4, what="the first answers")
            assert grid.compact and grid.visible_range() is not None
            first, last = grid.visible_range()
            await wait_for(
                pilot,
                lambda: f"agents {first + 1}–{last + 1} of 600 · f follow" in panel_text(app),
                what="the panel to say which agents the grid shows",
            )
            grid.focus()
            await pilot.press("end")  # the last agents, far from the ones in flight
            await wait_for(pilot, lambda: grid.cursor_index == 599, what="end to move the cursor to the last agent")
            assert grid.visible_range()[1] == 599
            await pilot.press("f")
            await wait_for(
                pilot,
                lambda: (
                    app.follow.mode == "active"
                    and session.engine.states.get(grid.cursor_index) in (TaskState.RUNNING, TaskState.RETRYING)
                ),
                what="f to follow the active agents",
            )
            await wait_for(pilot, lambda: "following active agents (f: next)" in panel_text(app))
            start, end = grid.visible_range()
            assert start <= grid.cursor_index <= end, "the grid scrolled to the agent followed"
            followed = grid.cursor_index
            await wait_for(
                pilot,
                lambda: grid.cursor_index != followed and app.follow.mode == "active",
                what="the cursor to move on with the work",
            )
            await pilot.press("home")
            await wait_for(pilot, lambda: app.follow.mode is None, what="a cursor key to end the follow")
            session.engine.abort()
            await wait_for(pilot, lambda: run_over(app), what="the run's outputs written")
    finally:
        await session.aclose()


# --------------------------------------------------------------------------- a real terminal


def tmux_screen(name: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout


def screen_when(name: str, holds, what: str, timeout: float = 30.0) -> str:
    """The pane once `holds(screen)`; fails saying what it showed when it never does."""
    deadline = time.monotonic() + timeout
    while True:
        screen = tmux_screen(name)
        if holds(screen):
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: never on the screen:\n{screen}")
        time.sleep(0.2)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
@pytest.mark.parametrize("size", [(80, 24), (60, 20)], ids=["80x24", "60x20"])
def test_without_colour_a_failed_a_running_and_a_done_cell_read_apart_in_a_real_terminal(tmp_path, size):
    prompts = [
        f"task {i}" + (" [[sim:500]]" if i in (2, 11) else " [[sim:hang]]" if i in (4, 13) else "") for i in range(16)
    ]  # fewer than 20 answers: no straggler deadline, the hung two stay running
    job = write_batch(tmp_path / "job.jsonl", prompts)
    name = f"swarm-nocolor-{os.getpid()}-{size[0]}"
    env = (
        f"NO_COLOR=1 PYTHONPATH={REPO} SWARM_TUI_CONFIG={tmp_path / 'config.toml'} "
        f"PATH={Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    )
    # COLUMNS/LINES may be in the tmux server's environment (inherited from whoever started it, seen
    # under pytest as 80x24): Textual would take them over the pane's real size (shutil's rule)
    command = (
        f"cd {tmp_path} && env -u COLUMNS -u LINES {env} swarm-tui run {job} --max-attempts 1 --timeout 120 "
        f"--sim-latency-ms 20 --sim-error-rate 0 --out {tmp_path / 'run'}; sleep 30"
    )
    width, height = size
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), command], check=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            screen = tmux_screen(name)
            if "2 failed" in screen and ("running" in screen or width < 80):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the run never showed its failures:\n{screen}")
            time.sleep(0.2)
        states = (TaskState.FAILED, TaskState.RUNNING, TaskState.SUCCEEDED)
        screen = screen_when(  # a few drains later: the cells as they settle
            name, lambda shown: all(GLYPHS[s] in " ".join(shown.splitlines()[2:6]) for s in states), "the three cells"
        )
        lines = screen.splitlines()
        if width >= 80:  # numbered cells: a glyph before each number
            assert f"{GLYPHS[TaskState.FAILED]}  3" in screen or f"{GLYPHS[TaskState.FAILED]} 3" in screen, screen
            assert f"{GLYPHS[TaskState.RUNNING]}  5" in screen or f"{GLYPHS[TaskState.RUNNING]} 5" in screen, screen
            assert f"{GLYPHS[TaskState.SUCCEEDED]}  1" in screen or f"{GLYPHS[TaskState.SUCCEEDED]} 1" in screen
        grid_rows = [line for line in lines[2:6]]
        cells = " ".join(grid_rows)
        for state in (TaskState.FAILED, TaskState.RUNNING, TaskState.SUCCEEDED):
            assert GLYPHS[state] in cells, (state, screen)
        footer = lines[-1]
        assert "q Quit" in footer and "? Help" in footer, footer
        assert "failed" in screen and "ETA" in screen and "RUNNING" in screen, screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
