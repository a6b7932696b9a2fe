"""The response cache in the console ("attach, the grid (its own colour and glyph, every
theme contrast-tested), the footer ("cache 812 hits · saved $3.20") ... show it").

Driven like a user would (Pilot) on the simulator over loopback: a job run once to fill a cache (in
tmp_path, never the developer's own), then again with the same cache, every answer a replay: the
grid's cells in the cached colour with the cached glyph, the legend's count, the footer's cache
line with the hits and the saving (RunStats' and summary.json's); then the same run attached to,
which reads the same events from the journal and shows the same. A run without a cache looks
exactly as before (the snapshots in test_ui_snapshots.py hold it byte for byte)."""

from __future__ import annotations

import json

import pytest
from swarm_tui.cache import CacheSettings
from swarm_tui.config import Config
from swarm_tui.core.events import Attempt, TaskQueued, TaskSucceeded
from swarm_tui.core.lanes import CACHE
from swarm_tui.engine import TaskState
from swarm_tui.frontend.attached import AttachedRun
from swarm_tui.ui import format as fmt
from swarm_tui.ui.app import SwarmApp, make_app
from swarm_tui.ui.contrast import contrast_ratio, readable_on
from swarm_tui.ui.themes import bundled_themes
from swarm_tui.ui.widgets.footer.stats_footer import StatsFooter
from swarm_tui.ui.widgets.grid.agent_grid import AgentGrid
from swarm_tui.ui.widgets.grid.cells import BATCH_GLYPH, CACHED_GLYPH, GLYPHS, LOW_GLYPH, TOOL_GLYPH
from swarm_tui.view.run_view import RunView
from textual.color import Color

from tests.helpers import open_session, run_session
from tests.test_ui_agent_cells import cell, panel_text
from tests.test_ui_app import wait_for
from tests.test_ui_batch_lane import footer_text
from tests.test_ui_console import low_contrast_text

PRICES = {"custom/sim-1": {"input": 2.0, "output": 8.0}}
PROMPTS = [f"cached in the console {i}" for i in range(100)]


@pytest.fixture(autouse=True)
def private_cache_home(tmp_path, monkeypatch):
    """No test reads or writes the real ~/.cache: the default directory is in tmp_path too."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def cached_session(tmp_path, base_url: str, run_name: str):
    return open_session(
        tmp_path,
        base_url,
        PROMPTS,
        run_name=run_name,
        prices=PRICES,
        cache=CacheSettings(mode="readwrite", dir=str(tmp_path / "cache")),
    )


def cache_footer(app: SwarmApp) -> str | None:
    return next((line.rstrip() for line in footer_text(app).splitlines() if line.startswith("cache ")), None)


def cached_legend(app: SwarmApp) -> list[str] | None:
    """The legend's cached entry, split: its swatch's glyph, the count, the label."""
    return next((line.split() for line in panel_text(app).splitlines() if line.rstrip().endswith(" cached")), None)


def footer_lines(app: SwarmApp) -> int:
    """The footer's height as laid out (one line a lane past its three; the next layout pass sets it)."""
    return app.query_one(StatsFooter).size.height


def assert_cached_cells(app: SwarmApp) -> None:
    grid = app.query_one(AgentGrid)
    cached, done = grid.cached_style().bgcolor, grid.state_style(TaskState.SUCCEEDED).bgcolor
    assert cached is not None and cached != done
    for index in range(len(PROMPTS)):
        text, style = cell(grid, index)
        assert text[0] == CACHED_GLYPH and text[1:].strip() == str(index + 1), (index, text)
        assert style.bgcolor == cached, (index, style)


async def test_a_run_answered_from_the_cache_shows_its_cells_legend_and_footer_live_and_attached(tmp_path, sim_factory):
    sim = sim_factory()
    first = cached_session(tmp_path, sim.base_url, "one")
    await run_session(first)
    sent = sim.stats()["requests"]
    assert sent == len(PROMPTS)
    paid = json.loads((tmp_path / "one" / "summary.json").read_text())["cost_usd"]
    assert paid > 0

    session = cached_session(tmp_path, sim.base_url, "two")
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(
                pilot,
                lambda: (
                    session.summary is not None
                    and cache_footer(app) is not None
                    and cached_legend(app) == [CACHED_GLYPH, str(len(PROMPTS)), "cached"]
                    and footer_lines(app) == 4
                ),
                what="the run to end, its footer (a line taller) and legend to count the hits",
            )
            assert sim.stats()["requests"] == sent, "every answer was a replay"
            stats = app.source.stats
            summary = json.loads((tmp_path / "two" / "summary.json").read_text())
            assert stats.cache_hits == summary["cache"]["hits"] == len(PROMPTS)
            assert abs(stats.cache_saved_usd - summary["cache"]["saved_usd"]) < 1e-6
            assert abs(stats.cache_saved_usd - paid) < 1e-6, "it saved what the first run paid"
            saved = stats.cache_saved_usd
            line = f"cache {len(PROMPTS):>5} hits · saved {fmt.usd(saved)}{fmt.money(saved, app.currency, 11)}"
            assert cache_footer(app) == line.rstrip(), footer_text(app)
            assert app.currency.shows_local and "≈" in line, "the saving in the local currency too"
            footer = app.query_one(StatsFooter)
            assert footer.has_class("-cache") and not footer.has_class("-batch") and not footer.has_class("-judge")
            assert len(footer_text(app).splitlines()) == 4
            assert app.grid.facts.from_cache == len(PROMPTS) and app.grid.facts.caching
            assert_cached_cells(app)
            done_line = next(line for line in panel_text(app).splitlines() if line.strip().endswith(" done"))
            assert done_line.split()[:2] == [GLYPHS[TaskState.SUCCEEDED], str(len(PROMPTS))], "a replay is a result"
            assert app.grid.visible_range() is None, "the footer's line takes no row the 10x10 grid needs at 80x24"
            for theme in bundled_themes():  # the cached cells' numbers stay readable
                app.theme = theme.name
                await pilot.pause()
                assert low_contrast_text(app) == [], theme.name
            app.theme = "swarm-dark"
            await pilot.pause(0.3)
            live_footer = cache_footer(app)
            await pilot.press("q")
    finally:
        await session.aclose()

    attached = AttachedRun(tmp_path / "two")  # the same run, replayed from its journal: the same lines
    app = make_app(attached, config=Config(path=tmp_path / "config.toml"))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(
                pilot,
                lambda: (
                    attached.follower.finished is not None
                    and cache_footer(app) == live_footer
                    and cached_legend(app) == [CACHED_GLYPH, str(len(PROMPTS)), "cached"]
                    and footer_lines(app) == 4
                ),
                what="the attached view to show the cache's line and legend",
            )
            assert app.source.stats.cache_hits == len(PROMPTS)
            assert_cached_cells(app)
    finally:
        await attached.aclose()


def test_a_replayed_answer_is_marked_until_its_task_is_queued_again():
    """The view's facts: a replay marks its agent (no latency: no call was made), a live answer
    does not, and a task queued again answers anew."""
    view = RunView(range(3))
    replay = Attempt(0, 1, CACHE, 1.0, 0.0, "ok", status=200, cost_usd=0.0, saved_usd=0.002)
    live = Attempt(1, 1, "custom", 1.0, 420.0, "ok", status=200, cost_usd=0.002)
    view.apply([TaskSucceeded(replay, "a"), TaskSucceeded(live, "b")])
    facts = view.agents
    assert facts.caching and facts.from_cache == 1
    assert facts.is_from_cache(0) and not facts.is_from_cache(1)
    assert 0 not in facts.latency and facts.latency[1] == 420.0
    view.observe(TaskQueued(0, TaskState.SUCCEEDED))
    assert not facts.is_from_cache(0) and facts.from_cache == 0


def test_cached_cells_stand_apart_in_every_theme():
    """(The text on `$swarm-cached` is held to AA by the theme test, as every `swarm-*` colour is.)
    A replayed answer's cell looks like no other kind of cell, and not like a done one even
    without its hue: black text on one, white on the other, or a step in lightness. Its glyph is
    its own too, so it reads apart without colour (NO_COLOR)."""
    assert CACHED_GLYPH not in {*GLYPHS.values(), TOOL_GLYPH, BATCH_GLYPH, LOW_GLYPH}
    for theme in bundled_themes():
        colours = theme.variables
        cached = Color.parse(colours["swarm-cached"])
        for name in ("queued", "running", "retrying", "succeeded", "failed", "cancelled", "tool", "batch", "low-score"):
            other = Color.parse(colours[f"swarm-{name}"])
            distance = sum((a - b) ** 2 for a, b in zip(cached.rgb, other.rgb, strict=True)) ** 0.5
            assert distance >= 90, f"{theme.name}: $swarm-cached is too close to $swarm-{name}"
        done = Color.parse(colours["swarm-succeeded"])
        assert readable_on(cached) != readable_on(done) or contrast_ratio(cached, done) >= 1.5, theme.name
