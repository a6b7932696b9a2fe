"""The console's rough edges, tried as a new user would at 80x24 and 120x40:
readable themes, figures with their units, a clock that stops, limits that say which is which,
keys that say why they do nothing, a palette without doubles."""

from __future__ import annotations

import pytest
from swarm_tui.ui.contrast import AA_TEXT, contrast_ratio, readable_on
from swarm_tui.ui.themes import bundled_themes
from textual.color import Color
from textual.widgets import Footer

from tests.helpers import wait_until

THEMES = [theme.name for theme in bundled_themes()]
TEXT_ROLES = (
    "foreground",
    "text",
    "text-muted",
    "primary",
    "accent",
    "warning",
    "error",
    "success",
    "footer-key-foreground",
    "footer-description-foreground",
)
BACKGROUNDS = ("background", "surface", "panel")
GRAPHICS = range(0x2500, 0x2600)
"""Box drawing, block elements and geometric shapes: borders, scrollbars, sparklines, swatches
and a select's arrow are not text."""


def resolve(value: str, background: Color) -> Color:
    """A theme colour as it lands on `background`: `auto N%` and alpha resolved."""
    if value.startswith("auto"):
        alpha = float(value.split()[1].rstrip("%")) / 100 if " " in value else 1.0
        return background.blend(background.get_contrast_text(1.0), alpha)
    return background + Color.parse(value)


@pytest.mark.parametrize("theme", THEMES)
def test_every_bundled_theme_meets_aa_on_its_colour_pairs(theme):
    colours = next(t for t in bundled_themes() if t.name == theme).to_color_system().generate()
    variables = next(t for t in bundled_themes() if t.name == theme).variables
    too_low = []
    for bg_name in BACKGROUNDS:
        background = Color.parse(colours[bg_name])
        for role in TEXT_ROLES:
            ratio = contrast_ratio(resolve(colours[role], background), background)
            if ratio < AA_TEXT:
                too_low.append(f"${role} on ${bg_name}: {ratio:.2f}")
    for name, value in variables.items():  # agent cells and badges: black or white text on them
        cell = Color.parse(value)
        ratio = contrast_ratio(readable_on(cell), cell)
        if ratio < AA_TEXT:
            too_low.append(f"text on ${name}: {ratio:.2f}")
    for badge in ("swarm-simulated", "swarm-attached"):  # drawn in $background
        ratio = contrast_ratio(Color.parse(colours["background"]), Color.parse(variables[badge]))
        if ratio < AA_TEXT:
            too_low.append(f"$background on ${badge}: {ratio:.2f}")
    assert not too_low, f"{theme} is below WCAG AA (4.5:1) for: " + "; ".join(too_low)


def low_contrast_text(app) -> list[str]:
    """Every run of text on the screen as drawn, whose colour is below AA on its background;
    keys shown disabled (WCAG exempts inactive controls) and graphics are left out."""
    screen = app.screen
    update = screen._compositor.render_full_update()
    found = []
    for y, line in enumerate(update.strips):
        x = 0
        for strip in line:
            for segment in strip:
                text, style = segment.text, segment.style
                width = segment.cell_length
                visible = [c for c in text if not c.isspace() and ord(c) not in GRAPHICS]
                if visible and style is not None and style.color is not None and style.bgcolor is not None:
                    fg, bg = style.color, style.bgcolor
                    if style.reverse:
                        fg, bg = bg, fg
                    ratio = contrast_ratio(Color.from_rich_color(fg), Color.from_rich_color(bg))
                    widget, _ = screen.get_widget_at(x, y)
                    disabled = widget.has_class("-disabled") or any(
                        getattr(node, "disabled", False) for node in widget.ancestors_with_self
                    )
                    if ratio < AA_TEXT and not disabled:
                        found.append(f"{text.strip()!r} at {x},{y} ({type(widget).__name__}) {ratio:.2f}:1")
                x += width
    return found


VIEWS = {
    "main": [],
    "heat": ["h"],
    "help": ["question_mark"],
    "detail": ["down", "right", "right", "enter"],
    "projection": ["dollar_sign"],
    "provider": ["e"],
}


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("theme", THEMES)
async def test_every_text_on_screen_meets_aa_in_every_theme(app_on_run, theme, view):
    app = app_on_run(theme=theme)
    async with app.run_test(size=(120, 40)) as pilot:
        for key in VIEWS[view]:
            await pilot.press(key)
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        assert app.screen.query(Footer) or view in ("help", "provider")
        assert low_contrast_text(app) == []


def messages(app) -> list[str]:
    return [notification.message for notification in app._notifications]


async def test_latencies_carry_their_unit_past_ten_seconds(app_on_run):
    app = app_on_run()
    async with app.run_test(size=(80, 24)):
        app.source.stats.latencies_ms[:] = sorted([480.0] * 98 + [11_000.0, 12_400.0])
        app.update_panels()
        figures = app.figures.text.plain
        assert "p50  480ms" in figures and "p99  11.0s" in figures, figures
        assert "s ms" not in figures


async def test_keys_that_do_nothing_now_say_why(app_on_run):
    """A done agent under the cursor, no aggregate step (it talks of none), no rolling memory: g,
    m and R each explain."""
    app = app_on_run()
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.source.states[0].value == "succeeded"
        for key, expected in (
            ("g", "This job has no aggregate step"),
            ("m", "No rolling memory"),
            ("R", "Agent 1 is done: R retries a failed agent"),
        ):
            await pilot.press(key)
            await wait_until(
                lambda expected=expected: any(expected in m for m in messages(app)),
                f"{key} to say why",
                step=pilot.pause,
            )


async def test_plus_names_the_ceiling_and_the_panel_both_numbers(app_on_run):
    app = app_on_run()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("plus")
        await wait_until(
            lambda: any("Concurrency ceiling: " in m for m in messages(app)), "+ to notify", step=pilot.pause
        )
        note = next(m for m in messages(app) if "Concurrency ceiling" in m)
        assert f"ceiling: {app.source.ceiling}" in note and f"adaptive limit (now {app.source.limit})" in note
        app.update_panels()
        panel = app.run_panel.text.plain
        assert f"limit {app.source.limit} · ceiling {app.source.ceiling}" in panel, panel


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_the_heat_view_shows_its_scale_in_ms(app_on_run, size):
    app = app_on_run()
    async with app.run_test(size=size) as pilot:
        await pilot.press("h")
        await wait_until(lambda: "heat" in app.run_panel.text.plain, "the heat scale", step=pilot.pause)
        panel = app.run_panel.text.plain
        bounds = app.grid.heat_bounds
        title = "heat ms, fast → slow" if size[0] < 120 else "heat: latency, fast → slow (ms)"
        assert len(bounds) == 4 and title in panel, panel
        assert all(f"{b:.0f} " in panel for b in bounds), panel
        lines = [app.run_panel.render_line(y).text.rstrip() for y in range(app.run_panel.size.height)]
        assert not [line for line in lines if line.endswith("…")], lines
        await pilot.press("h")
        await wait_until(lambda: "heat" not in app.run_panel.text.plain, "the scale to go", step=pilot.pause)


async def test_the_palette_has_one_quit_and_screenshots_go_to_the_run_directory(app_on_run, tmp_path, monkeypatch):
    from swarm_tui.ui.commands import COMMANDS

    monkeypatch.setenv("HOME", str(tmp_path / "no-home"))  # no ~/Downloads
    monkeypatch.setenv("XDG_DOWNLOAD_DIR", str(tmp_path / "no-home" / "Downloads"))
    app = app_on_run()
    async with app.run_test(size=(80, 24)) as pilot:
        system = list(app.get_system_commands(app.screen))
        titles = [c.title for c in system] + [
            name for action, name, _ in COMMANDS if app.check_action(action.partition("(")[0], ())
        ]
        assert titles.count("Quit") == 1, titles
        screenshot = next(c for c in system if c.title == "Screenshot")
        screenshot.callback()
        run_dir = app.source.run_dir.resolve()
        await wait_until(lambda: list(run_dir.glob("*.svg")), "a screenshot in the run directory", step=pilot.pause)
        saved = next(run_dir.glob("*.svg"))
        await wait_until(lambda: any(saved.name in m for m in messages(app)), "where it was saved", step=pilot.pause)


async def test_the_elapsed_clock_stops_when_the_run_is_done(tmp_path, sim):
    from swarm_tui.config import Config
    from swarm_tui.core.events import TaskSucceeded
    from swarm_tui.ui.app import make_app

    from tests.helpers import open_session

    now = [1000.0]
    session = open_session(tmp_path, sim.base_url, [f"task {i}" for i in range(10)], concurrency=4)
    session.engine.subscribe(lambda e: isinstance(e, TaskSucceeded) and now.__setitem__(0, now[0] + 1.0))
    app = make_app(session, config=Config(path=tmp_path / "config.toml"), clock=lambda: now[0])
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app.phase == "DONE", "the run to finish", step=pilot.pause)
            await wait_until(lambda: "00:10 ETA" in app.figures.text.plain, "10 s of run time", step=pilot.pause)
            now[0] += 60  # a minute later, nothing running
            app.drain()
            assert "00:10 ETA" in app.figures.text.plain, app.figures.text.plain
    finally:
        await session.aclose()


def panel_lines(app) -> list[str]:
    panel = app.run_panel
    return [panel.render_line(y).text for y in range(panel.size.height)]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize("writer", ["finished", "crashed"])
async def test_an_attached_view_says_its_state_once_and_shows_the_resume_command(journal_copy, size, writer):
    import sqlite3
    from pathlib import Path

    from swarm_tui.config import Config
    from swarm_tui.frontend.attached import AttachedRun
    from swarm_tui.ui.app import make_app

    run_dir = journal_copy  # the finished run, copied into the working directory
    if writer == "crashed":  # its writer died before saying it finished
        db = sqlite3.connect(run_dir / "journal.sqlite")
        with db:
            db.execute("DELETE FROM log WHERE kind = 'RunFinished'")
            db.execute(
                'UPDATE meta SET value = \'{"at": 1700000010.0, "pid": 4194000, "session": 1}\' '
                "WHERE key = 'heartbeat'"
            )
        db.close()
    source = AttachedRun(run_dir)
    app = make_app(source, config=Config(path=Path("config.toml")))
    try:
        async with app.run_test(size=size) as pilot:
            phase = "FINISHED" if writer == "finished" else "NOT RUNNING"
            # the whole journal replayed: the last answer, and for a finished run its end (a few
            # events after it: the counts alone can be read before the phase has moved)
            await wait_until(
                lambda: app.source.stats.done == 100 and (writer == "crashed" or app.phase == "FINISHED"),
                "the journal to be replayed",
                step=pilot.pause,
            )
            app.update_panels()
            await pilot.pause()
            lines = panel_lines(app)
            shown = " ".join(line.strip() for line in lines)
            assert not [line for line in lines if line.rstrip().endswith("…")], "\n".join(lines)
            assert shown.count(phase) == 1, lines
            assert shown.startswith(f"{phase} 97 done, 3 failed"), lines
            reason = "the run that wrote it has ended" if writer == "finished" else "its process is gone"
            assert reason in shown
            assert "r: resume it here, in the background" in shown, lines
            if size[1] >= 40:  # the command too, where the rows allow
                assert "or: swarm-tui resume swarm-100-demo --retry-failed" in shown, lines
    finally:
        await source.aclose()


def screen_text(app) -> str:
    update = app.screen._compositor.render_full_update()
    return "\n".join("".join(segment.text for strip in line for segment in strip) for line in update.strips)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_every_column_of_the_cost_projection_can_be_read(app_on_run, size):
    from textual.widgets import DataTable

    app = app_on_run()
    async with app.run_test(size=size) as pilot:
        await pilot.press("dollar_sign")
        await wait_until(lambda: app.screen.query("#estimate-table"), "$ to open the projection", step=pilot.pause)
        table = app.screen.query_one("#estimate-table", DataTable)
        await wait_until(lambda: table.row_count, "the table's rows", step=pilot.pause)
        seen = screen_text(app)
        if size[0] >= 120:  # it all fits
            assert "cost CNY" in seen and "saving vs priciest" in seen and "(priciest)" in seen, seen
        for _ in range(40):  # → scrolls the columns; the model column stays
            if "saving vs priciest" in screen_text(app):
                break
            await pilot.press("right")
        seen = screen_text(app)
        assert "saving vs priciest" in seen and "(priciest)" in seen and "claude-sonnet-4.5" in seen, seen
        for _ in range(40):
            if "cost CNY" in screen_text(app):
                break
            await pilot.press("left")
        assert "cost CNY" in screen_text(app)


async def test_only_themes_with_the_grids_colours_are_offered_and_the_choice_is_remembered(app_on_run, tmp_path):
    from swarm_tui.config import load_config

    config = tmp_path / "config.toml"
    config.write_text('# my settings\n[defaults]\ncurrency = "CNY"  # keep this\n\n[keys]\napp.help = "f1"\n')
    app = app_on_run()
    async with app.run_test(size=(80, 24)) as pilot:
        offered = set(app.available_themes)  # what the palette's Theme command lists
        assert offered == set(THEMES), offered
        assert app.theme == "swarm-dark"
        await pilot.press("t")
        await wait_until(lambda: 'theme = "swarm-light"' in config.read_text(), "the choice written", step=pilot.pause)
    text = config.read_text()
    assert text.startswith('# my settings\n[defaults]\ntheme = "swarm-light"\ncurrency = "CNY"  # keep this\n'), text
    assert load_config(config).theme == "swarm-light" and load_config(config).keys == {"app.help": "f1"}


def test_a_textual_theme_is_refused_before_anything_starts(tmp_path, monkeypatch, capsys):
    from swarm_tui.cli import main

    monkeypatch.setenv("SWARM_TUI_FORCE_TUI", "1")
    assert main(["run", "--theme", "textual-light", "--out", str(tmp_path / "run")]) == 2
    assert (
        "no theme named 'textual-light' (known: swarm-dark, swarm-high-contrast, swarm-light" in capsys.readouterr().err
    )
    assert not (tmp_path / "run").exists()


async def test_the_latency_sparkline_draws_no_full_block_before_it_has_two_seconds(tmp_path, sim_factory):
    """At the first second the sparkline had one bar, and Textual draws a lone value as a full
    block across its whole width (three rows of █ at start): nothing to compare yet, so a flat
    line until there are two seconds to draw."""
    from swarm_tui.config import Config
    from swarm_tui.ui.app import make_app

    from tests.helpers import open_session

    sim = sim_factory(latency_ms=60, latency_sigma=0.0)
    session = open_session(tmp_path, sim.base_url, [f"t{i}" for i in range(80)], concurrency=2, adaptive=False)
    app = make_app(session, config=Config(path=tmp_path / "config.toml"))
    drawn: list[list[str]] = []

    def sparkline_rows() -> list[str]:
        spark = app.sparkline
        return [spark.render_line(y).text for y in range(spark.size.height)]

    try:
        async with app.run_test(size=(120, 40)) as pilot:

            def watched() -> bool:
                drawn.append(sparkline_rows())
                return session.engine.stats.succeeded >= 80

            await wait_until(watched, "the run to end", timeout=60, step=lambda: pilot.pause(0.05))
            await wait_until(lambda: len(app.sparkline.data or []) >= 2, "two seconds drawn", step=pilot.pause)
            drawn.append(sparkline_rows())
            await pilot.press("q")
    finally:
        await session.aclose()
    full = [rows for rows in drawn if any(row and set(row) == {"█"} for row in rows)]
    assert not full, full[0]
    assert any(set("".join(rows)) - {" ", "▁"} for rows in drawn), "the bars were drawn once there were two"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_toasts_keep_to_one_place_clear_of_the_error_log_and_the_footer(app_on_run, size):
    """Toasts stacked up from the bottom right over the error log, the figures and the keys: they
    stay at the top right now, over the grid's side, each a line or two."""
    from textual.widgets._toast import Toast

    app = app_on_run()
    async with app.run_test(size=size, notifications=True) as pilot:
        for i in range(4):
            app.notify(f"note {i}: something the run said, long enough to take a line or two", timeout=30)
        await wait_until(lambda: len(app.screen.query(Toast)) == 4, "the toasts", step=pilot.pause)
        await pilot.pause()
        toasts = [toast.region for toast in app.screen.query(Toast)]
        width, _ = size
        assert all(region.right >= width - 3 and region.y >= 1 for region in toasts), toasts  # the top right
        for pane in (app.error_log, app.stats_footer, app.query_one("#keys")):
            assert not [t for t in toasts if t.overlaps(pane.region)], (pane.id, toasts, pane.region)
