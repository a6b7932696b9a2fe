"""The judge in the console: the run panel's judge lines (judged
and low-scored counts beside their cell swatches, the rolling score against its baseline with a
sparkline of the recent scores, the last drift and what was done), a judged cell underlined and a
low-scored one in its own colour, the detail view's score and reason, and the footer's judge
cost, apart from the rest.

Driven like a user would (Pilot) on a multi-round swarm whose simulator pollutes its answers as
the memory grows (`drift_after_rounds=1`), so the score falls and the memory is flushed on its own;
then the same journal attached to, and reopened as a resumed run's screen: all three read the
same events, so all three show the same lines. A run without a judge looks exactly as before (the
snapshots in test_ui_snapshots.py hold it byte for byte)."""

from __future__ import annotations

import json
from pathlib import Path

from swarm_tui.config import Config
from swarm_tui.engine import TaskState
from swarm_tui.frontend.attached import AttachedRun
from swarm_tui.run.session import SwarmSession
from swarm_tui.ui import format as fmt
from swarm_tui.ui.app import SwarmApp, make_app
from swarm_tui.ui.screens.detail import AgentDetailScreen
from swarm_tui.ui.themes import bundled_themes
from swarm_tui.ui.widgets.footer.stats_footer import StatsFooter
from swarm_tui.ui.widgets.grid.agent_grid import LOW_GLYPH, LOW_SCORE, AgentGrid
from swarm_tui.ui.widgets.panels.run_panel import SPARK_BARS
from swarm_tui.view.figures import QualityView
from textual.color import Color
from textual.widgets import Static

from tests.test_judge_loop import open_run, swarm_job
from tests.test_ui_agent_cells import cell, panel_text
from tests.test_ui_app import wait_for
from tests.test_ui_batch_lane import footer_text
from tests.test_ui_console import low_contrast_text


def quality_of(app: SwarmApp) -> QualityView:
    return app.view.figures.quality


def judge_lines(app: SwarmApp) -> dict[str, str]:
    """The run panel's judge lines that are shown: the legend row, the score line, the drift line."""
    found = {}
    for line in (line.rstrip() for line in panel_text(app).splitlines()):
        if "judged" in line and line.endswith(f"scored ≤{LOW_SCORE:g}"):
            found["legend"] = line.strip()
        elif line.startswith(("judge ", "drift r")):
            found[line.split()[0]] = line
    return found


def judge_footer(app: SwarmApp) -> str:
    return next(line for line in footer_text(app).splitlines() if line.startswith("judge "))


def picks(quality: QualityView, states) -> tuple[int, int, int]:
    """A judged agent scored above the low mark, one scored low, and one not judged (all done)."""
    judged = quality.judged
    good = min(i for i, (score, _) in judged.items() if score > LOW_SCORE)
    low = min(i for i, (score, _) in judged.items() if score <= LOW_SCORE)
    plain = min(i for i, state in states.items() if state is TaskState.SUCCEEDED and i not in judged)
    return good, low, plain


def assert_cells(app: SwarmApp, quality: QualityView) -> None:
    grid = app.query_one(AgentGrid)
    good, low, plain = picks(quality, app.source.states)
    done = grid.state_style(TaskState.SUCCEEDED).bgcolor
    text, style = cell(grid, good)
    assert style.underline and style.bgcolor == done and text == "o", (text, style)
    text, style = cell(grid, low)
    assert style.underline and style.bgcolor == grid.low_score_style().bgcolor != done
    assert text == LOW_GLYPH, "compact cells: a low score reads without its colour too"
    text, style = cell(grid, plain)
    assert not style.underline and style.bgcolor == done and text == "o"


async def assert_detail(app: SwarmApp, pilot, index: int) -> None:
    score, reason = quality_of(app).judged[index]
    app.open_agent(index)
    await wait_for(pilot, lambda: isinstance(app.screen, AgentDetailScreen), what="the detail to open")
    await pilot.pause()
    screen = app.screen
    title = screen.query_one("#judge-title", Static)
    assert title.display and str(title.content).startswith(f"Judge: {score:g}/10"), title.content
    assert (score <= LOW_SCORE) == ("low" in str(title.content)) == title.has_class("-low")
    assert str(screen.query_one("#detail-judge", Static).content) == reason and reason
    await pilot.press("escape")
    await pilot.pause()


async def test_the_console_shows_the_judge_the_drift_and_its_cost_then_an_attached_view_the_same(tmp_path, sim_factory):
    sim = sim_factory(drift_after_rounds=1, seed=5)
    session = open_run(tmp_path, swarm_job(tmp_path), sim.base_url)
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(
                pilot,
                lambda: session.summary is not None and quality_of(app).judged and not session.engine.running,
                timeout=60,
                what="the six rounds to end",
            )
            quality = quality_of(app)
            await wait_for(  # the panels repaint on their own beat (PANELS_EVERY_S), not at each event
                pilot,
                lambda: judge_lines(app).get("legend", "").split()[1:3] == [str(len(quality.judged)), "judged"],
                what="the run panel to count every judged answer",
            )
            assert quality.drifts and quality.drifts[0].action == "flush_memory"
            low = sum(1 for score, _ in quality.judged.values() if score <= LOW_SCORE)
            assert low, "the polluted rounds scored low"

            lines = judge_lines(app)
            assert lines["legend"].split() == [
                "o",
                str(len(quality.judged)),
                "judged",
                LOW_GLYPH,
                str(low),
                "scored",
                f"≤{LOW_SCORE:g}",
            ]
            score_line = lines["judge"]
            rolling = "–" if quality.rolling is None else f"{quality.rolling:.1f}"
            base = "baseline pending" if quality.baseline is None else f"base {quality.baseline:.1f}"
            assert score_line.startswith(f"judge {rolling} · {base} "), score_line
            bars = score_line.rsplit(" ", 1)[1]
            assert 4 <= len(bars) <= len(quality.recent) and set(bars) <= set(SPARK_BARS), score_line
            last = quality.drifts[-1]
            count = f" (#{len(quality.drifts)})" if len(quality.drifts) > 1 else ""
            assert lines["drift"].startswith(f"drift r{last.round}{count} → memory flushed"), lines
            assert any(
                n.title == "Quality drift"
                and f"Round {quality.drifts[0].round}: " in n.message
                and "memory flushed" in n.message
                for n in app._notifications
            )
            finished = [n.message for n in app._notifications if n.message.startswith("Run finished")]
            assert finished == ["Run finished: 180 done, 0 failed. q quits."], "once, not once a round"

            assert_cells(app, quality)
            good, low_index, _ = picks(quality, app.source.states)
            app.follow_cursor(good)
            await wait_for(
                pilot,
                lambda: f"▸ agent {good + 1}: done, judged {quality.judged[good][0]:g}" in panel_text(app),
                what="the cursor line to say the agent's score",
            )
            await assert_detail(app, pilot, good)
            await assert_detail(app, pilot, low_index)

            stats = app.source.stats
            summary = json.loads((tmp_path / "run" / "summary.json").read_text())
            assert 0 < stats.judge_cost_usd < stats.cost_usd
            assert abs(stats.judge_cost_usd - summary["quality"]["judge_cost_usd"]) < 1e-5
            footer = judge_footer(app)
            share = f"{stats.judge_cost_usd / stats.cost_usd:.1%}"
            assert footer.split()[:2] == ["judge", fmt.usd(stats.judge_cost_usd).strip()], footer
            assert footer.endswith(f"{share} of the cost"), footer
            assert app.query_one(StatsFooter).has_class("-judge")
            assert app.query_one(StatsFooter).size.height == 4

            for theme in bundled_themes():  # the yellow/orange cells and the sparkline stay readable
                app.theme = theme.name
                await pilot.pause()
                assert low_contrast_text(app) == [], theme.name
            app.theme = "swarm-dark"
            await pilot.pause(0.3)
            live_lines, live_footer = judge_lines(app), judge_footer(app)

            await pilot.press("h")  # the heat scale takes two more rows: the judge's lines give way, not the log
            await wait_for(pilot, lambda: "heat:" in panel_text(app), what="the heat scale")
            top, grid = app.query_one("#top"), app.query_one(AgentGrid)
            assert top.size.height <= grid.fit_height, "the panel squeezes the error log and the footer"
            lines = judge_lines(app)
            assert lines == {key: live_lines[key] for key in lines} and "judge" in lines, "the score stays longest"
            assert judge_footer(app) == live_footer
            await pilot.press("q")
    finally:
        await session.aclose()

    run_dir = tmp_path / "run"
    attached = AttachedRun(run_dir)  # the same run, replayed from its journal: the same lines
    app = make_app(attached, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(
                pilot,
                lambda: attached.follower.finished is not None and judged_shown(app),
                what="the attached view to show the judge",
            )
            await pilot.pause(0.3)
            lines = judge_lines(app)  # (its notes say who writes the run: less room for the legend row)
            assert lines == {key: live_lines[key] for key in lines} and "judge" in lines and "drift" in lines
            assert judge_footer(app) == live_footer
            quality = quality_of(app)
            assert_cells(app, quality)
            await assert_detail(app, pilot, picks(quality, app.source.states)[1])
    finally:
        await attached.aclose()

    await assert_resumed_view_shows_the_same(run_dir, tmp_path, live_lines, live_footer)


def judged_shown(app: SwarmApp) -> bool:
    return "judge" in judge_lines(app)


async def assert_resumed_view_shows_the_same(run_dir: Path, tmp_path, lines: list[str], footer: str) -> None:
    """A resumed run's screen (nothing started here): the earlier sessions' scores from its history."""
    session = SwarmSession.reopen(run_dir)
    app = make_app(session, config=Config(path=tmp_path / "config.toml"), start=False)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: judged_shown(app), what="the resumed screen to show the judge")
            await pilot.pause(0.3)
            assert judge_lines(app) == lines
            assert judge_footer(app) == footer
            assert_cells(app, quality_of(app))
    finally:
        await session.aclose()


def test_low_scored_cells_stand_apart_in_every_theme():
    """(The text on `$swarm-low-score` is held to AA by the theme test, as every `swarm-*` colour is.)
    A low-scored answer's cell looks like no state's cell: it is a done agent that needs a look."""
    for theme in bundled_themes():
        colours = theme.variables
        low = Color.parse(colours["swarm-low-score"])
        for name in ("queued", "running", "retrying", "succeeded", "failed", "cancelled", "tool", "batch", "cached"):
            other = Color.parse(colours[f"swarm-{name}"])
            distance = sum((a - b) ** 2 for a, b in zip(low.rgb, other.rgb, strict=True)) ** 0.5
            assert distance >= 90, f"{theme.name}: $swarm-low-score is too close to $swarm-{name}"
